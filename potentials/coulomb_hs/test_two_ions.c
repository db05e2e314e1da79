/* test_two_ions — PHYSICS.md §2's exact check on the CPU backend: two ions
 * (+1, -1, hard-core diameter 4 Å, λ_B = 7.117 Å) alone in a cell of radius
 * 12 Å.  The mean energy of the brush sampler and of the metropolis sampler
 * (both orders) must hit the quadrature within 4 error bars, and the error
 * bars must be small enough for that to mean something. */
#include "two_ions.h"

#define D 4.0
#define R 12.0

static void check(const char *sampler, int seed)
{
    char ini[2048];
    two_ions_ini(ini, sizeof ini, seed, D, R, sampler);
    const double exact = two_ions_exact(7.117, -1.0, D, R);
    two_ions_result r = two_ions_measure(ini, "cpu", 2000, 40, 5000);
    printf("%-60s <bU> = %.5f +- %.5f (exact %.5f), acceptance %.3f\n", sampler, r.mean, r.err, exact,
           r.acceptance);
    ck_assert_double_lt(r.err, 0.01);
    ck_assert_msg(fabs(r.mean - exact) < 4 * r.err, "%s: <bU> = %.5f +- %.5f, exact %.5f", sampler, r.mean, r.err,
                  exact);
    ck_assert(r.acceptance > 0.1 && r.acceptance < 0.95);
}

START_TEST(quadrature_itself)
{
    /* without charges the mean energy is 0; with them it is negative (the
     * ions attract) and above the contact energy -λ_B/d */
    ck_assert_double_eq_tol(two_ions_exact(7.117, 0.0, D, R), 0.0, 1e-12);
    double e = two_ions_exact(7.117, -1.0, D, R);
    ck_assert(e < -0.1 && e > -7.117 / D);
    /* p(r) integrates to 1 over [0, 2a] for a point-like pair (d -> 0) */
    double a = 10.0, s = 0.0;
    for (int k = 0; k < 100000; ++k) {
        double r = (k + 0.5) * 2 * a / 100000;
        s += (3 * r * r / (a * a * a) - 9 * r * r * r / (4 * a * a * a * a) + 3 * pow(r, 5) / (16 * pow(a, 6))) *
             2 * a / 100000;
    }
    ck_assert_double_eq_tol(s, 1.0, 1e-8);
}
END_TEST

START_TEST(brush_cpu)
{
    check("plugin = brush\nstep = 12", 11);
}
END_TEST

START_TEST(metropolis_sequential_cpu)
{
    check("plugin = metropolis\ntemperature = 1\nstep = 6\norder = sequential", 12);
}
END_TEST

START_TEST(metropolis_random_cpu)
{
    check("plugin = metropolis\ntemperature = 1\nstep = 6\norder = random", 13);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("two_ions");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, quadrature_itself);
    tcase_add_test(tc, brush_cpu);
    tcase_add_test(tc, metropolis_sequential_cpu);
    tcase_add_test(tc, metropolis_random_cpu);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
