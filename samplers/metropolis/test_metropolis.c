/* test_metropolis.c — the metropolis sampler on the CPU backend, through the
 * whole core (metro_test_sim): acceptance and counters, energy bookkeeping,
 * the two orders, and the exact dimer (PHYSICS.md §1) with both orders. */
#include "metropolis_test.h"

START_TEST(acceptance_sane)
{
    /* a larger step is accepted less often; counters = n per sweep */
    double rate[2];
    const double step[2] = {0.03, 0.3};
    for (int k = 0; k < 2; k++) {
        char ini[2048];
        chain_ini(ini, sizeof ini, 13, 2000, 1.0, step[k], "random", "auto", 100);
        metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        const metro_state *st = metro_sim_state(sim, &err);
        ck_assert_int_eq(st->attempted[0], 13LL * (2000 + 2000));
        char path[4200];
        snprintf(path, sizeof path, "%s/acceptance.csv", metro_test_run_dir());
        rate[k] = metro_test_csv(path, 0, "rate");
        ck_assert_double_eq(metro_test_csv(path, 0, "attempted"), (double)st->attempted[0]);
        ck_assert_double_eq(metro_test_csv(path, 0, "accepted"), (double)st->accepted[0]);
        ck_assert_double_eq_tol(rate[k], (double)st->accepted[0] / st->attempted[0], 1e-6);
        ck_assert_double_eq(metro_test_csv(path, 0, "replica"), 0);
        ck_assert_double_eq_tol(st->beta[0], 1.0, 1e-15);
        metro_sim_destroy(sim);
    }
    ck_assert_msg(rate[0] > 0.7 && rate[0] < 1.0, "step 0.03: acceptance %g", rate[0]);
    ck_assert_msg(rate[1] > 0.02 && rate[1] < rate[0] - 0.2, "step 0.3: acceptance %g", rate[1]);
}
END_TEST

START_TEST(energy_bookkeeping)
{
    /* run_chain asserts running energy == fresh total after many sweeps,
     * for both orders; the chain must actually have moved */
    const char *order[2] = {"random", "sequential"};
    for (int k = 0; k < 2; k++) {
        traj t = run_chain("cpu", 13, 5000, 0.8, 0.1, order[k], "auto");
        ck_assert_msg(t.accepted > 13 * 5000 / 5, "%s: only %lld accepted", order[k], t.accepted);
        double moved = 0;
        for (int i = 0; i < 13; i++) moved += fabs(t.pos[i].y) + fabs(t.pos[i].z);
        ck_assert_double_gt(moved, 0.1); /* the start is a straight line along x */
        free(t.pos);
    }
}
END_TEST

START_TEST(orders_differ)
{
    /* one sweep with a tiny step (acceptance ~ 1): sequential moves every
     * particle once; random leaves about (12/13)^13 = 35% of them alone */
    const char *order[2] = {"sequential", "random"};
    int unmoved[2];
    for (int k = 0; k < 2; k++) {
        traj t = run_chain("cpu", 13, 1, 1.0, 1e-4, order[k], "auto");
        ck_assert_int_eq(t.accepted, 13);
        unmoved[k] = 0;
        for (int i = 0; i < 13; i++)
            unmoved[k] += t.pos[i].y == 0.0f && t.pos[i].z == 0.0f;
        free(t.pos);
    }
    ck_assert_int_eq(unmoved[0], 0);
    ck_assert_int_gt(unmoved[1], 0);
}
END_TEST

START_TEST(dimer_random)
{
    dimer_exact("cpu", 0.5, "random", "auto", 1000000, 1.2e-3);
    dimer_exact("cpu", 1.0, "random", "auto", 1000000, 2e-3);
    dimer_exact("cpu", 2.0, "random", "auto", 1000000, 3e-3);
}
END_TEST

START_TEST(dimer_sequential)
{
    dimer_exact("cpu", 0.5, "sequential", "auto", 1000000, 1.2e-3);
    dimer_exact("cpu", 1.0, "sequential", "auto", 1000000, 2e-3);
    dimer_exact("cpu", 2.0, "sequential", "auto", 1000000, 3e-3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metropolis");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, acceptance_sane);
    tcase_add_test(tc, energy_bookkeeping);
    tcase_add_test(tc, orders_differ);
    tcase_add_test(tc, dimer_random);
    tcase_add_test(tc, dimer_sequential);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
