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

START_TEST(step_tuning)
{
    /* step 0.5 at T = 0.5 is far too large; tuning brings the acceptance
     * to the target, and the log says to which step */
    static const char *const tune[] = {"sampler.tune=true", "sampler.target_acceptance=0.4"};
    double rate[2];
    for (int k = 0; k < 2; k++) {
        char ini[2048], path[4200];
        chain_ini(ini, sizeof ini, 13, 20000, 0.5, 0.5, "random", "auto", 100);
        metro_sim *sim = metro_test_sim(ini, "cpu", tune, k ? 2 : 0);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        snprintf(path, sizeof path, "%s/acceptance.csv", metro_test_run_dir());
        rate[k] = metro_test_csv(path, 0, "rate");
        snprintf(path, sizeof path, "%s/log.txt", metro_test_run_dir());
        char *log = metro_test_slurp(path);
        ck_assert_ptr_nonnull(log);
        const char *said = strstr(log, "step tuned during equilibration to ");
        ck_assert_msg((said != NULL) == (k == 1), "%s", log);
        if (said) {
            double step = atof(said + strlen("step tuned during equilibration to "));
            ck_assert_msg(step > 0.01 && step < 0.25, "tuned step %g", step);
            /* and production keeps it: tuning while measuring would break
             * detailed balance (mutation testing found this unguarded) */
            const char *last = NULL;
            for (const char *p = strstr(log, ", step "); p; p = strstr(p + 1, ", step ")) last = p;
            ck_assert_msg(last != NULL, "%s", log);
            const double end = atof(last + strlen(", step "));
            ck_assert_msg(fabs(end - step) <= 1e-5 * step, "the step moved in production: %g after %g", end, step);
        }
        free(log);
        metro_sim_destroy(sim);
    }
    ck_assert_msg(rate[0] < 0.2, "untuned acceptance %g", rate[0]);
    ck_assert_msg(fabs(rate[1] - 0.4) < 0.05, "tuned acceptance %g", rate[1]);
}
END_TEST

START_TEST(tuning_without_equilibration_says_so)
{
    /* tuning happens at every 100 sweeps of equilibration: with fewer, the
     * log said "step tuned during equilibration to 0.5 ... (tuned)" of a
     * step nothing had tuned */
    static const char *const sets[2][2] = {{"sampler.tune=true", "run.equilibration=0"},
                                           {"sampler.tune=true", "run.equilibration=99"}};
    for (int k = 0; k < 2; k++) {
        char ini[2048], path[4200];
        chain_ini(ini, sizeof ini, 13, 200, 0.5, 0.5, "random", "auto", 100);
        metro_sim *sim = metro_test_sim(ini, "cpu", sets[k], 2);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        snprintf(path, sizeof path, "%s/log.txt", metro_test_run_dir());
        char *log = metro_test_slurp(path);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(!strstr(log, "step tuned") && !strstr(log, "(tuned)"), "%s", log);
        char want[256];
        snprintf(want, sizeof want,
                 "tune = true, but nothing was tuned: the step is adjusted every 100 sweeps of equilibration, and "
                 "[run] equilibration = %d (give it at least 100); the run keeps step = 0.5", k ? 99 : 0);
        ck_assert_msg(strstr(log, want) != NULL, "%s", log);
        ck_assert_msg(strstr(log, ", step 0.5\n") != NULL, "%s", log);
        free(log);
        metro_sim_destroy(sim);
    }
}
END_TEST

START_TEST(tuning_ignores_call_sizes)
{
    /* tuning happens at multiples of 100 sweeps of the run, so the chain
     * does not depend on how advance() calls split the sweeps (advance
     * alone never leaves equilibration, so it tunes throughout) */
    static const char *const tune[] = {"sampler.tune=true"};
    char ini[2048];
    chain_ini(ini, sizeof ini, 13, 100, 0.5, 0.5, "random", "auto", 1);
    long long accepted[2];
    metro_float4 pos[2][13];
    for (int k = 0; k < 2; k++) {
        metro_sim *sim = metro_test_sim(ini, "cpu", tune, 1);
        metro_error err = {0};
        for (long done = 0, c = k ? 37 : 1000; done < 1000; done += c) {
            if (c > 1000 - done) c = 1000 - done;
            ck_assert_int_eq(metro_sim_advance(sim, c, &err), METRO_OK);
        }
        const metro_state *st = metro_sim_state(sim, &err);
        accepted[k] = st->accepted[0];
        memcpy(pos[k], st->pos, sizeof pos[k]);
        metro_sim_destroy(sim);
    }
    ck_assert_int_eq(accepted[0], accepted[1]);
    ck_assert_mem_eq(pos[0], pos[1], sizeof pos[0]);
    ck_assert_int_gt(accepted[0], 13 * 1000 / 4); /* it did tune: untuned is < 20% */
}
END_TEST

START_TEST(tuned_resume_is_exact)
{
    /* the tuned step is part of the saved state: a run stopped in
     * production and resumed ends as the uninterrupted run */
    char d[] = "/tmp/metro-tune-XXXXXX", ini[2048], path[1024], args[4096];
    ck_assert_ptr_nonnull(mkdtemp(d));
    for (int k = 0; k < 2; k++) {
        chain_ini(ini, sizeof ini, 13, k ? 600 : 1200, 0.5, 0.5, "random", "auto", 3);
        snprintf(path, sizeof path, "%s/%s.ini", d, k ? "half" : "full");
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "%s", ini);
        fclose(f);
        snprintf(args, sizeof args, "run %s --device cpu --output %s/%s --quiet --set sampler.tune=true",
                 path, d, k ? "split" : "full");
        ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    }
    char *e = NULL;
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=1200 --device cpu --quiet", d);
    ck_assert_msg(metro_test_cli(args, NULL, &e) == 0, "%s", e);
    free(e);
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/full/energy_stats.csv", d);
    snprintf(b, sizeof b, "%s/split/energy_stats.csv", d);
    ck_assert_msg(metro_test_same_file(a, b), "energy statistics differ in %s", d);
    snprintf(a, sizeof a, "%s/full/acceptance.csv", d);
    snprintf(b, sizeof b, "%s/split/acceptance.csv", d);
    ck_assert_msg(metro_test_same_file(a, b), "acceptance differs in %s", d);
    snprintf(args, sizeof args, "rm -rf %s", d);
    ck_assert_int_eq(system(args), 0);
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
    tcase_add_test(tc, step_tuning);
    tcase_add_test(tc, tuning_without_equilibration_says_so);
    tcase_add_test(tc, tuning_ignores_call_sizes);
    tcase_add_test(tc, tuned_resume_is_exact);
    tcase_add_test(tc, dimer_random);
    tcase_add_test(tc, dimer_sequential);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
