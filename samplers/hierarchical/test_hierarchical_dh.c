/* test_hierarchical_dh — the Debye–Hückel limiting law (PHYSICS.md §2) with
 * the hierarchical sampler: configs/electrolyte_dh_1to1.ini (1200 ions of
 * a dilute 1:1 salt, κλ_B = 0.15, a = 8 Å) with sampler = hierarchical and
 * the run of observables/pair_correlation/test_debye_huckel.c: the excess
 * energy per central ion must equal -λ_B κ / (2(1 + κa)) within its error
 * bar, which must resolve the ion-size factor.  (The chain is brush's
 * exactly; this checks the whole path through the core: energies, drift,
 * observables.) */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* value and error of a row of electrostatics.csv */
static int row(const char *dir, const char *name, double *value, double *error)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/electrostatics.csv", dir);
    char *t = metro_test_slurp(path);
    if (!t) return -1;
    int found = 0;
    size_t n = strlen(name);
    for (char *l = strchr(t, '\n'); l && !found; l = strchr(l + 1, '\n'))
        if (!strncmp(l + 1, name, n) && l[1 + n] == ',') found = sscanf(l + 2 + n, "%lf,%lf", value, error) == 2;
    free(t);
    return found ? 0 : -1;
}

START_TEST(limiting_law)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/configs/electrolyte_dh_1to1.ini", METRO_TEST_SOURCE_DIR);
    char *ini = metro_test_slurp(path);
    ck_assert_ptr_nonnull(ini);
    /* the sampler swapped in the text (a --set cannot change a plugin) */
    char *at = strstr(ini, "plugin = brush");
    ck_assert_ptr_nonnull(at);
    size_t len = strlen(ini);
    char *mod = malloc(len + 64);
    memcpy(mod, ini, (size_t)(at - ini));
    strcpy(mod + (at - ini), "plugin = hierarchical");
    strcat(mod, at + strlen("plugin = brush"));
    const char *sets[] = {"run.sweeps=3000", "run.equilibration=100", "observable pair_correlation.plots=false"};
    metro_sim *sim = metro_test_sim(mod, "cpu", sets, 3);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    free(ini);
    free(mod);
    double u, ue, dh, dhe;
    ck_assert_int_eq(row(metro_test_run_dir(), "u_ex", &u, &ue), 0);
    ck_assert_int_eq(row(metro_test_run_dir(), "u_ex_debye_huckel", &dh, &dhe), 0);
    double both = sqrt(ue * ue + dhe * dhe);
    printf("hierarchical: excess energy per ion %.5f +- %.5f kT, Debye-Hückel %.5f +- %.5f\n", u, ue, dh, dhe);
    ck_assert_msg(fabs(u - dh) < 3.0 * both, "u_ex = %.5f +- %.5f, Debye-Hückel %.5f", u, ue, dh);
    ck_assert_msg(ue < 0.03 * fabs(dh), "error %.5f too large for %.5f", ue, dh);
    ck_assert(dh < -0.05 && dh > -0.09);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hierarchical_dh");
    TCase *tc = tcase_create("dilute 1:1");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, limiting_law);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
