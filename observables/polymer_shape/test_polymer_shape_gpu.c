/* test_polymer_shape_gpu — polymer_shape measured on the device
 * (measure_device, polymer_shape.cu) against the CPU backend's host path:
 * the parallel tempering sampler runs the same chain on both for the same
 * seed, so thermo.csv must agree row by row to float rounding.  Also the
 * device buffer filling up many times and the series thinning when full,
 * and a composed system of several chains beside counterions: the device
 * path against the host path on the same CUDA chain (the host path forced
 * by an observable without a device path), thermo.csv and chains.csv to
 * double rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define THERMO_HEADER "T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n"

/* Runs ini on `device`; copies its run directory into dir[4096]; returns the
 * simulation (still alive, for its final state). */
static metro_sim *run(const char *ini, const char *device, char *dir)
{
    metro_sim *sim = metro_test_sim(ini, device, NULL, 0);
    snprintf(dir, 4096, "%s", metro_test_run_dir());
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s run: %s", device, err.msg);
    return sim;
}

static char *file_of(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = metro_test_slurp(path);
    ck_assert_msg(text != NULL, "%s missing", path);
    return text;
}

/* Same seed on the CPU and on CUDA: the same chain (checked first, so that
 * a sampler divergence is not blamed on the observable), the device path
 * used on CUDA and the host path on the CPU, and thermo.csv equal row by
 * row (E_mean, Rg2_mean, Ree2_mean within 1e-5 relative, samples exactly).
 * Returns the number of rows. */
static int compare(const char *ini, int expect_thinning)
{
    char dc[4096], dg[4096];
    metro_sim *c = run(ini, "cpu", dc);
    metro_sim *g = run(ini, "cuda", dg);
    ck_assert_int_eq(metro_sim_backend(g), METRO_BACKEND_CUDA);
    metro_error err = {0};
    const metro_state *sc = metro_sim_state(c, &err), *sg = metro_sim_state(g, &err);
    ck_assert_msg(sc && sg, "%s", err.msg);
    ck_assert_int_eq(sc->replicas, sg->replicas);
    for (int r = 0; r < sc->replicas; ++r) {
        ck_assert_msg(sc->accepted[r] == sg->accepted[r] && sc->slot_replica[r] == sg->slot_replica[r],
                      "the sampler's chains differ (replica %d: accepted %lld vs %lld, slot %d holds %d vs %d): "
                      "not the observable's fault",
                      r, sc->accepted[r], sg->accepted[r], r, sc->slot_replica[r], sg->slot_replica[r]);
    }

    /* which path measured: the observable says so once at DEBUG level */
    char *lc = file_of(dc, "log.txt"), *lg = file_of(dg, "log.txt");
    ck_assert_msg(strstr(lg, "polymer_shape: measuring on the device"), "CUDA run did not measure on the device:\n%s",
                  lg);
    ck_assert_msg(!strstr(lg, "measuring from the host copies"), "CUDA run measured on the host:\n%s", lg);
    ck_assert_msg(strstr(lc, "polymer_shape: measuring from the host copies"), "CPU log:\n%s", lc);
    ck_assert_msg(!strstr(lc, "measuring on the device"), "CPU run measured on the device:\n%s", lc);
    if (expect_thinning) {
        ck_assert_msg(strstr(lc, "series full: keeping every 2-th"), "no thinning on the CPU:\n%s", lc);
        ck_assert_msg(strstr(lg, "series full: keeping every 2-th"), "no thinning on CUDA:\n%s", lg);
    }
    free(lc);
    free(lg);

    char tc[4200], tg[4200];
    snprintf(tc, sizeof tc, "%s/thermo.csv", dc);
    snprintf(tg, sizeof tg, "%s/thermo.csv", dg);
    char *text = file_of(dg, "thermo.csv");
    ck_assert_msg(!strncmp(text, THERMO_HEADER, strlen(THERMO_HEADER)), "header: %.120s", text);
    free(text);
    const char *cols[] = {"E_mean", "Rg2_mean", "Ree2_mean"};
    int rows = 0;
    for (;; ++rows) {
        double T = metro_test_csv(tc, rows, "T");
        if (isnan(T)) break;
        ck_assert_msg(metro_test_csv(tg, rows, "T") == T, "row %d: T %.9g vs %.9g", rows, T,
                      metro_test_csv(tg, rows, "T"));
        double nc = metro_test_csv(tc, rows, "samples"), ng = metro_test_csv(tg, rows, "samples");
        ck_assert_msg(nc == ng && nc > 0, "T = %g: %g samples (CPU) vs %g (CUDA)", T, nc, ng);
        for (int q = 0; q < 3; ++q) {
            double a = metro_test_csv(tc, rows, cols[q]), b = metro_test_csv(tg, rows, cols[q]);
            ck_assert_msg(isfinite(a) && isfinite(b) && fabs(a - b) <= 1e-5 * fmax(fabs(a), 1.0),
                          "T = %g %s: %.10g (CPU) vs %.10g (CUDA)", T, cols[q], a, b);
        }
    }
    ck_assert_msg(isnan(metro_test_csv(tg, rows, "T")), "CUDA thermo.csv has more rows than the CPU's %d", rows);
    metro_sim_destroy(c);
    metro_sim_destroy(g);
    return rows;
}

START_TEST(device_measurements_equal_host)
{
    /* 4 temperatures x 2 ladders, N = 13: 400 measurements of 8 slots stay
     * in the device buffer until finish() (and the checkpoints' save()) */
    const char *ini = "[run]\nseed = 23\nequilibration = 500\nsweeps = 4000\n"
                      "[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nt_min = 0.6\nt_max = 1.6\nreplicas = 4\nladders = 2\n"
                      "step = 0.1\nexchange_every = 10\n"
                      "[observable polymer_shape]\nplugin = polymer_shape\nevery = 10\nreweight_points = 20\n"
                      "plots = false\n";
    ck_assert_int_eq(compare(ini, 0), 4);
}
END_TEST

START_TEST(device_buffer_wraps_and_series_thin)
{
    /* every sweep for 6000 sweeps, 9 slots (3 temperatures x 3 ladders):
     * the device buffer (512 measurements) fills 9 times; max_memory_mb = 1
     * keeps 1 MiB / (3 x 8 B x 9 slots) = 4854 measurements per series, so
     * they are thinned once, at the 4855th (after the device's measurements
     * are brought back, in the middle of a buffer), to 2427, and every
     * other one of the remaining 1146 is kept: 3000 per slot */
    const char *ini = "[run]\nseed = 31\nequilibration = 200\nsweeps = 6000\n"
                      "[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nt_min = 0.7\nt_max = 1.4\nreplicas = 3\nladders = 3\n"
                      "step = 0.1\nexchange_every = 5\n"
                      "[observable polymer_shape]\nplugin = polymer_shape\nevery = 1\nmax_memory_mb = 1\n"
                      "reweight = false\nplots = false\n";
    ck_assert_int_eq(compare(ini, 1), 3);
}
END_TEST

/* Same seed, same backend (CUDA), so the same chain: once measured on the
 * device (polymer_shape alone), once from the host copies (condensation,
 * which has no measure_device, makes the core sync and every observable
 * due measure on the host).  Four chains of 8 (and one of 5 beside them
 * in the second system: chains of different lengths) with counterions. */
static void chains_device_equals_host(const char *system, int chains)
{
    char ini[4096], dd[4096], dh[4096];
    const char *head = "[run]\nseed = 41\nequilibration = 200\nsweeps = 3000\n";
    const char *rest = "[potential chain]\nplugin = lj_fene\nspecies = m\n"
                       "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 8\nbjerrum = 2\n"
                       "[sampler]\nplugin = parallel_tempering\nt_min = 0.6\nt_max = 2\nreplicas = 4\nladders = 2\n"
                       "step = 0.2\nexchange_every = 10\n"
                       "[observable polymer_shape]\nplugin = polymer_shape\nevery = 10\nreweight = false\nplots = false\n";
    snprintf(ini, sizeof ini, "%s%s%s", head, system, rest);
    metro_sim *d = run(ini, "cuda", dd);
    snprintf(ini, sizeof ini, "%s%s%s[observable condensation]\nplugin = condensation\nevery = 10\ndistance = 1.5\n"
             "plots = false\n", head, system, rest);
    metro_sim *h = run(ini, "cuda", dh);
    char *ld = file_of(dd, "log.txt"), *lh = file_of(dh, "log.txt");
    ck_assert_msg(strstr(ld, "polymer_shape: measuring on the device"), "not measured on the device:\n%s", ld);
    ck_assert_msg(strstr(lh, "polymer_shape: measuring from the host copies") && !strstr(lh, "measuring on the device"),
                  "not measured on the host:\n%s", lh);
    free(ld);
    free(lh);
    const char *files[] = {"thermo.csv", "chains.csv"};
    const char *cols[2][4] = {{"E_mean", "Rg2_mean", "Ree2_mean", "Rg2_var"}, {"Rg2_mean", "Rg2_err", "Ree2_mean", "Ree2_err"}};
    for (int f = 0; f < 2; ++f) {
        char a[4200], b[4200];
        snprintf(a, sizeof a, "%s/%s", dd, files[f]);
        snprintf(b, sizeof b, "%s/%s", dh, files[f]);
        int rows = 0;
        for (;; ++rows) {
            double T = metro_test_csv(a, rows, "T");
            if (isnan(T)) break;
            ck_assert_msg(metro_test_csv(b, rows, "T") == T, "%s row %d: T differs", files[f], rows);
            ck_assert_msg(metro_test_csv(b, rows, "samples") == metro_test_csv(a, rows, "samples"), "%s row %d: samples",
                          files[f], rows);
            for (int q = 0; q < 4; ++q) {
                double x = metro_test_csv(a, rows, cols[f][q]), y = metro_test_csv(b, rows, cols[f][q]);
                /* the files print 4 to 10 digits: equal to double rounding
                 * shows as equal text, or a last-digit difference */
                ck_assert_msg(isfinite(x) && isfinite(y) && fabs(x - y) <= 1e-7 * fmax(fabs(x), 1e-3),
                              "%s T = %g %s: %.10g (device) vs %.10g (host)", files[f], T, cols[f][q], x, y);
            }
        }
        ck_assert_msg(rows == (f ? 4 * chains : 4), "%s: %d rows", files[f], rows); /* 4 temperatures */
        ck_assert_msg(isnan(metro_test_csv(b, rows, "T")), "%s: the host run has more rows", files[f]);
    }
    metro_sim_destroy(d);
    metro_sim_destroy(h);
}

START_TEST(chains_device_equals_host_path)
{
    chains_device_equals_host("[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 32, 32\n"
                              "chains = 4x8\nchain_species = m\n", 4);
    chains_device_equals_host("[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 37, 37\n"
                              "chains = 4x8, 5\nchain_species = m\n", 5);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("polymer_shape_gpu");
    TCase *tc = tcase_create("agreement");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, device_measurements_equal_host);
    tcase_add_test(tc, device_buffer_wraps_and_series_thin);
    tcase_add_test(tc, chains_device_equals_host_path);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
