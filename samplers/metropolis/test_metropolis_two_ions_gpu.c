/* test_metropolis_two_ions_gpu — PHYSICS.md §2's exact check on CUDA for
 * the metropolis sampler (the brush sampler has its own in
 * test_brush_gpu): two ions alone in a sphere, both CUDA schemes, the mean
 * energy within 4 error bars of the quadrature. */
#include "../../potentials/coulomb_hs/two_ions.h"

static void check(const char *sampler, int seed)
{
    char ini[2048];
    two_ions_ini(ini, sizeof ini, seed, 4.0, 12.0, sampler);
    const double exact = two_ions_exact(7.117, -1.0, 4.0, 12.0);
    two_ions_result r = two_ions_measure(ini, "cuda", 2000, 40, 2500);
    printf("%-70s <bU> = %.5f +- %.5f (exact %.5f)\n", sampler, r.mean, r.err, exact);
    ck_assert_double_lt(r.err, 0.015);
    ck_assert_msg(fabs(r.mean - exact) < 4 * r.err, "%s: <bU> = %.5f +- %.5f, exact %.5f", sampler, r.mean, r.err,
                  exact);
}

START_TEST(block_scheme) { check("plugin = metropolis\ntemperature = 1\nstep = 6\norder = sequential\nscheme = block", 41); }
END_TEST
START_TEST(reduction_scheme) { check("plugin = metropolis\ntemperature = 1\nstep = 6\norder = random\nscheme = reduction", 42); }
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("metropolis_two_ions_gpu");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, block_scheme);
    tcase_add_test(tc, reduction_scheme);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
