/* test_metropolis_gpu.c — the metropolis sampler's CUDA kernels against the
 * CPU reference: with one seed the GPU follows the CPU chain (same accepted
 * count, positions within 1e-5) for both schemes and both orders, including
 * a reduction over several blocks and a block run too large for shared
 * memory; and the exact dimer on CUDA. */
#include "metropolis_test.h"

START_TEST(trajectory_13mer_block)
{
    same_trajectory(13, 1000, 0.5, 0.05, "random", "block");
    same_trajectory(13, 1000, 0.5, 0.05, "sequential", "block");
}
END_TEST

START_TEST(trajectory_13mer_reduction)
{
    same_trajectory(13, 1000, 0.5, 0.05, "random", "reduction");
    same_trajectory(13, 1000, 0.5, 0.05, "sequential", "reduction");
}
END_TEST

START_TEST(trajectory_long_chains)
{
    /* 600: three reduction blocks; 3500: block scheme without shared memory */
    same_trajectory(600, 20, 1.0, 0.1, "random", "reduction");
    same_trajectory(600, 20, 1.0, 0.1, "random", "block");
    same_trajectory(3500, 3, 1.0, 0.1, "random", "block");
}
END_TEST

START_TEST(whole_run_same_series)
{
    /* a whole run (equilibration, energy checks, measuring on the device
     * with energy's measure_device) gives the CPU run's time series */
    static const char *const series[] = {"observable energy.series=true"};
    char ini[2048], path[2][4200];
    chain_ini(ini, sizeof ini, 13, 3000, 0.7, 0.05, "random", "auto", 3);
    const char *dev[2] = {"cpu", "cuda"};
    for (int k = 0; k < 2; k++) {
        metro_sim *sim = metro_test_sim(ini, dev[k], series, 1);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        snprintf(path[k], sizeof path[k], "%s/energy.csv", metro_test_run_dir());
        metro_sim_destroy(sim);
    }
    for (int row = 0; row < 1000; row += 37) {
        ck_assert_double_eq(metro_test_csv(path[1], row, "sweep"), metro_test_csv(path[0], row, "sweep"));
        double a = metro_test_csv(path[0], row, "E"), b = metro_test_csv(path[1], row, "E");
        ck_assert_msg(fabs(a - b) < 1e-5 * (1 + fabs(a)), "row %d: cpu E %.10g, cuda %.10g", row, a, b);
    }
    ck_assert(isnan(metro_test_csv(path[1], 1000, "E")));
    ck_assert(!isnan(metro_test_csv(path[1], 999, "E")));
}
END_TEST

START_TEST(dimer_cuda)
{
    dimer_exact("cuda", 0.5, "random", "block", 400000, 2e-3);
    dimer_exact("cuda", 1.0, "sequential", "block", 400000, 3e-3);
    dimer_exact("cuda", 2.0, "random", "reduction", 100000, 1e-2);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("metropolis_gpu");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, trajectory_13mer_block);
    tcase_add_test(tc, trajectory_13mer_reduction);
    tcase_add_test(tc, trajectory_long_chains);
    tcase_add_test(tc, whole_run_same_series);
    tcase_add_test(tc, dimer_cuda);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
