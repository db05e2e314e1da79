/* test_net_charge — coulomb_hs with a net charge (allow_net_charge):
 *
 *   - refused by default, the message naming allow_net_charge;
 *   - allowed with a warning in the log;
 *   - two ions of valence +3 and -1, and two like charges (+1, +1), run
 *     with the brush sampler on the CPU and hit the exact two-ion
 *     quadrature of PHYSICS.md §2 (two_ions.h), which holds for any z1 z2:
 *     strong attraction and repulsion both come out right. */
#include <stdlib.h>
#include <string.h>

#include "two_ions.h"

#define D 4.0
#define R 12.0

static void ini_for(char *buf, size_t n, int seed, const char *species, int allow)
{
    snprintf(buf, n,
             "[run]\nseed = %d\nsweeps = 0\n\n[system]\nparticles = 2\n\n"
             "[potential]\nplugin = coulomb_hs\n%s\ndiameters = %g\ncell_radius = %g\nbjerrum = 7.117\n%s\n"
             "[sampler]\nplugin = brush\nstep = 12\n",
             seed, species, D, R, allow ? "allow_net_charge = true\n" : "");
}

START_TEST(refused_unless_allowed)
{
    char ini[2048];
    ini_for(ini, sizeof ini, 1, "valences = 3, -1\ncounts = 1, 1", 0);
    metro_options opt = {0};
    opt.config_text = ini;
    opt.config_path = "<test>";
    opt.device = "cpu";
    opt.quiet = 1;
    opt.output = "";
    metro_sim *sim = NULL;
    metro_error err = {0};
    ck_assert_int_eq(metro_sim_create(&opt, &sim, &err), METRO_EUSAGE);
    ck_assert_msg(strstr(err.msg, "not electroneutral") && strstr(err.msg, "sum to 2 e") &&
                      strstr(err.msg, "allow_net_charge = true"),
                  "%s", err.msg);
}
END_TEST

static void exact(const char *species, double z1z2, int seed)
{
    char ini[2048];
    ini_for(ini, sizeof ini, seed, species, 1);
    /* the warning, in the run's log */
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_sim_destroy(sim);
    char path[4200];
    snprintf(path, sizeof path, "%s/log.txt", metro_test_run_dir());
    char *log = metro_test_slurp(path);
    ck_assert_msg(log && strstr(log, "warning: the system carries a net charge of"), "no warning in %s: %s", path, log);
    free(log);
    const double want = two_ions_exact(7.117, z1z2, D, R);
    two_ions_result r = two_ions_measure(ini, "cpu", 2000, 40, 5000);
    printf("z1 z2 = %+g: <bU> = %.5f +- %.5f (exact %.5f), acceptance %.3f\n", z1z2, r.mean, r.err, want, r.acceptance);
    ck_assert_double_lt(r.err, 0.02);
    ck_assert_msg(fabs(r.mean - want) < 4 * r.err, "%s: <bU> = %.5f +- %.5f, exact %.5f", species, r.mean, r.err, want);
}

START_TEST(plus3_minus1)
{
    exact("valences = 3, -1\ncounts = 1, 1", -3.0, 21);
}
END_TEST

START_TEST(like_charges)
{
    exact("valences = 1", 1.0, 22);
}
END_TEST

int main(void)
{
    (void)two_ions_ini; /* the +1/-1 config of two_ions.h: these configs are built here */
    Suite *s = suite_create("net_charge");
    TCase *tc = tcase_create("net_charge");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, refused_unless_allowed);
    tcase_add_test(tc, plus3_minus1);
    tcase_add_test(tc, like_charges);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
