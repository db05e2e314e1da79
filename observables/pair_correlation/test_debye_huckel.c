/* test_debye_huckel — the Debye–Hückel limiting law at low concentration
 * (PHYSICS.md §2), through the whole program on the CPU backend.
 *
 * configs/electrolyte_dh_1to1.ini (a 1:1 salt, κλ_B = 0.15, a = 8 Å),
 * shortened: the excess energy per ion of the ions far from the wall
 * (pair_correlation's u_ex, from the potential every other ion exerts on
 * each) must equal -λ_B κ / (2(1 + κa)) (u_ex_debye_huckel, from the
 * measured interior density) within its error bar, which must be small
 * enough to tell it from the limiting law without the ion size
 * (-λ_B κ / 2) and from zero.
 */
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
        if (!strncmp(l + 1, name, n) && l[1 + n] == ',') {
            found = sscanf(l + 2 + n, "%lf,%lf", value, error) == 2;
        }
    free(t);
    return found ? 0 : -1;
}

START_TEST(limiting_law)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/configs/electrolyte_dh_1to1.ini", METRO_TEST_SOURCE_DIR);
    char *ini = metro_test_slurp(path);
    ck_assert_ptr_nonnull(ini);
    const char *sets[] = {"run.sweeps=3000", "run.equilibration=100", "observable pair_correlation.plots=false"};
    metro_sim *sim = metro_test_sim(ini, "cpu", sets, 3);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    free(ini);
    double u, ue, dh, dhe;
    ck_assert_int_eq(row(metro_test_run_dir(), "u_ex", &u, &ue), 0);
    ck_assert_int_eq(row(metro_test_run_dir(), "u_ex_debye_huckel", &dh, &dhe), 0);
    double both = sqrt(ue * ue + dhe * dhe);
    printf("excess energy per ion %.5f +- %.5f kT, Debye-Hückel %.5f +- %.5f\n", u, ue, dh, dhe);
    ck_assert_msg(fabs(u - dh) < 3.0 * both, "u_ex = %.5f +- %.5f, Debye-Hückel %.5f", u, ue, dh);
    /* meaningful: the error resolves the ion-size factor 1/(1 + κa) ~ 0.92 */
    ck_assert_msg(ue < 0.03 * fabs(dh), "error %.5f too large for %.5f", ue, dh);
    ck_assert(dh < -0.05 && dh > -0.09);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("debye_huckel");
    TCase *tc = tcase_create("dilute 1:1");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, limiting_law);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
