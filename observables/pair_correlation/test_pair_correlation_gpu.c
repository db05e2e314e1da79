/* test_pair_correlation_gpu — the GPU histogram equals the CPU one.
 *
 * One CUDA run of the 3:-1 salt (4,096 ions at the paper's density) with two
 * pair_correlation instances measuring the same configurations, one binning
 * on the GPU (pair_correlation.cu), one on the CPU (pc_accum.c): every pair
 * must land in the same bin, so g.csv and rho_q.csv agree to the last digit
 * printed; the potential sums (summed per ion in the same order, across
 * ions in a different one) agree to 1e-9.  Without the potential sums both
 * count from the cell list (the GPU's kernel pair_correlation_cells, the
 * host's loop on every core): the same files again.  Also with a bin count
 * whose shared-memory histogram does not fit (global atomics).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char *file(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", metro_test_run_dir(), name);
    char *t = metro_test_slurp(path);
    ck_assert_msg(t != NULL, "no %s", path);
    return t;
}

static double value(const char *prefix, const char *name)
{
    char fn[64];
    snprintf(fn, sizeof fn, "%selectrostatics.csv", prefix);
    char *t = file(fn);
    double v = NAN, e;
    size_t n = strlen(name);
    for (char *l = strchr(t, '\n'); l; l = strchr(l + 1, '\n'))
        if (!strncmp(l + 1, name, n) && l[1 + n] == ',') sscanf(l + 2 + n, "%lf,%lf", &v, &e);
    free(t);
    return v;
}

static void same_with(int bins, int potential, const char *extra)
{
    char ini[4096];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 7\nsweeps = 40\nequilibration = 4\n"
             "[system]\nparticles = 4096\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\n"
             "names = cation, anion\nconcentration = 0.0019008922\nbjerrum = 7.117\n"
             "[sampler]\nplugin = brush\n"
             "[observable gpu]\nplugin = pair_correlation\nevery = 4\nhistogram = gpu\n"
             "prefix = gpu_\nbins = %d\nplots = false\npotential = %s\n%s\n"
             "[observable cpu]\nplugin = pair_correlation\nevery = 4\nhistogram = cpu\n"
             "prefix = cpu_\nbins = %d\nplots = false\npotential = %s\n%s\n",
             bins, potential ? "true" : "false", extra, bins, potential ? "true" : "false", extra);
    metro_sim *sim = metro_test_sim(ini, "cuda", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    static const char *files[] = {"g.csv", "rho_q.csv"};
    for (int i = 0; i < 2; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "gpu_%s", files[i]);
        snprintf(b, sizeof b, "cpu_%s", files[i]);
        /* a run whose interior never held an ion writes neither side's
         * tables (pair_correlation says so), on both sides alike */
        char pa[4200], pb[4200];
        snprintf(pa, sizeof pa, "%s/%s", metro_test_run_dir(), a);
        snprintf(pb, sizeof pb, "%s/%s", metro_test_run_dir(), b);
        ck_assert_msg((access(pa, F_OK) == 0) == (access(pb, F_OK) == 0), "%s and %s: one written, not the other", a, b);
        if (access(pa, F_OK) != 0) continue;
        char *x = file(a), *y = file(b);
        ck_assert_msg(strcmp(x, y) == 0, "%s differs between GPU and CPU histograms", files[i]);
        free(x);
        free(y);
    }
    if (!potential || *extra) return;
    double ug = value("gpu_", "u_ex"), uc = value("cpu_", "u_ex");
    ck_assert_msg(isfinite(ug) && ug < 0, "u_ex %g", ug);
    ck_assert_msg(fabs(ug - uc) <= 1e-9 * fabs(uc), "u_ex GPU %.12g CPU %.12g", ug, uc);
}

static void same(int bins, int potential)
{
    same_with(bins, potential, "");
}

START_TEST(gpu_equals_cpu_shared)
{
    same(250, 1); /* 4 x 250 counters: the block histogram in shared memory */
}
END_TEST

START_TEST(gpu_cells_equal_cpu_cells)
{
    same(250, 0);
    same(4000, 0);
    /* a wall margin that leaves an interior of about an ion's radius (R =
     * 597.72, d = 7.5: the most create() allows, R - d/2 = 593.97), which
     * no ion of 4096 is likely to enter in 10 measurements: nothing to
     * count, on either side, and no failure */
    same_with(10, 0, "wall_margin = 593.9\nr_max = 50");
}
END_TEST

START_TEST(gpu_equals_cpu_global)
{
    same(4000, 1); /* 64 KB of counters: global atomics */
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("pair_correlation_gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gpu_equals_cpu_shared);
    tcase_add_test(tc, gpu_equals_cpu_global);
    tcase_add_test(tc, gpu_cells_equal_cpu_cells);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
