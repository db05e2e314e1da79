/* test_template — a plugin written later needs no change to the core: the
 * SDK template (plugins/template) is configured and built OUTSIDE metro's
 * tree, found through METRO_PLUGIN_PATH, and run by the unchanged `metro`
 * program.  Its physics is checked exactly: ideal particles in a harmonic
 * trap have <E> = (3/2) N T (equipartition). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

START_TEST(out_of_tree_plugin_runs)
{
    char dir[] = "/tmp/metro-template-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "PATH=/usr/local/cuda/bin:$PATH cmake -S %s/plugins/template -B %s/build -DMETRO_SDK=%s/plugins >%s/cmake.log 2>&1 && "
             "cmake --build %s/build >%s/build.log 2>&1",
             METRO_TEST_SOURCE_DIR, dir, METRO_TEST_SOURCE_DIR, dir, dir, dir);
    ck_assert_msg(system(cmd) == 0, "the template did not build: see %s/*.log", dir);

    const double T = 0.8;
    const int N = 5;
    snprintf(cmd, sizeof cmd, "%s/trap.ini", dir);
    FILE *f = fopen(cmd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[run]\nseed = 11\nsweeps = 40000\nequilibration = 2000\n\n[system]\nparticles = %d\n\n"
               "[potential]\nplugin = harmonic_trap\nk = 2.0\n\n[sampler]\nplugin = metropolis\ntemperature = %g\nstep = 0.8\n\n"
               "[observable energy]\nplugin = energy\nevery = 1\n", N, T);
    fclose(f);
    char args[8192];
    snprintf(args, sizeof args, "run %s/trap.ini --device cpu --output %s/run --quiet", dir, dir);
    snprintf(cmd, sizeof cmd, "%s/build", dir);
    setenv("METRO_PLUGIN_PATH", cmd, 1);
    char *o, *e;
    int rc = metro_test_cli(args, &o, &e);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    snprintf(cmd, sizeof cmd, "%s/run/energy_stats.csv", dir);
    double mean = metro_test_csv(cmd, 0, "E_mean"), err = metro_test_csv(cmd, 0, "E_err");
    double exact = 1.5 * N * T;
    printf("harmonic trap: <E> = %.4f +- %.4f, exact %.4f\n", mean, err, exact);
    ck_assert_msg(err > 0 && err < 0.05 * exact, "error bar %g not meaningful", err);
    ck_assert_msg(fabs(mean - exact) < 4 * err, "<E> = %g +- %g, exact %g", mean, err, exact);
    free(o);
    free(e);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("template");
    TCase *tc = tcase_create("out_of_tree");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, out_of_tree_plugin_runs);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
