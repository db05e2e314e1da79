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
    tcase_add_test(tc, dimer_cuda);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
