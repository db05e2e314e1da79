/* test_brush — the brush sampler on the CPU backend, through the whole core
 * (metro_test_sim): energy bookkeeping against a fresh total, counters and
 * the per-cycle acceptance file, determinism, the step's effect, partial
 * cycles, refused parameters, and exact restart through the CLI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* A 3:-1 electrolyte of n ions (n divisible by 4) in a cell of radius R. */
static void ini_electrolyte(char *buf, size_t len, int seed, int n, double R, const char *sampler_extra)
{
    snprintf(buf, len,
             "[run]\nseed = %d\nsweeps = 20\nequilibration = 5\n\n[system]\nparticles = %d\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\ncell_radius = %g\n"
             "bjerrum = 7.117\n\n[sampler]\nplugin = brush\n%s\n",
             seed, n, R, sampler_extra ? sampler_extra : "");
}

START_TEST(bookkeeping)
{
    char ini[2048];
    ini_electrolyte(ini, sizeof ini, 3, 200, 80.0, NULL);
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    const metro_state *st = metro_sim_state(sim, &err);
    metro_float4 p0 = st->pos[0];
    long long prev = 0, sum = 0;
    for (int c = 0; c < 30; ++c) {
        ck_assert_int_eq(metro_sim_advance(sim, 1, &err), METRO_OK);
        st = metro_sim_state(sim, &err);
        long long a = st->accepted[0] - prev;
        prev = st->accepted[0];
        ck_assert(a >= 0 && a <= 200);
        sum += a;
        ck_assert_int_eq(st->attempted[0], 200LL * (c + 1));
    }
    ck_assert_int_eq(sum, st->accepted[0]);
    double rate = (double)st->accepted[0] / (double)st->attempted[0];
    ck_assert_msg(rate > 0.05 && rate < 0.95, "acceptance %g", rate);
    double e = metro_sim_total_energy(sim, 0, &err);
    ck_assert(isfinite(e));
    ck_assert_msg(fabs(st->energy[0] - e) < 1e-9 * fmax(fabs(e), 200.0), "running %.12g, fresh %.12g",
                  st->energy[0], e);
    ck_assert(st->pos[0].x != p0.x || st->pos[0].y != p0.y);
    ck_assert_double_eq(st->beta[0], 1.0);
    metro_sim_destroy(sim);
}
END_TEST

/* Positions after `cycles` cycles (heap, caller frees) and the acceptances. */
static metro_float4 *trajectory(const char *ini, int n, int cycles, long long *accepted)
{
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_int_eq(metro_sim_advance(sim, cycles, &err), METRO_OK);
    const metro_state *st = metro_sim_state(sim, &err);
    metro_float4 *p = malloc((size_t)n * sizeof *p);
    memcpy(p, st->pos, (size_t)n * sizeof *p);
    *accepted = st->accepted[0];
    metro_sim_destroy(sim);
    return p;
}

START_TEST(deterministic)
{
    char a[2048], b[2048];
    ini_electrolyte(a, sizeof a, 9, 100, 60.0, NULL);
    ini_electrolyte(b, sizeof b, 10, 100, 60.0, NULL);
    long long n1, n2, n3;
    metro_float4 *p1 = trajectory(a, 100, 10, &n1), *p2 = trajectory(a, 100, 10, &n2), *p3 = trajectory(b, 100, 10, &n3);
    ck_assert_int_eq(n1, n2);
    ck_assert(memcmp(p1, p2, 100 * sizeof *p1) == 0);
    ck_assert(memcmp(p1, p3, 100 * sizeof *p1) != 0);
    free(p1);
    free(p2);
    free(p3);
}
END_TEST

START_TEST(step_sets_acceptance)
{
    /* a tiny cube is accepted almost always, the default (2R/3) far less */
    char ini[2048];
    long long acc[2];
    const char *steps[2] = {"step = 0.5", ""};
    for (int k = 0; k < 2; ++k) {
        ini_electrolyte(ini, sizeof ini, 4, 100, 60.0, steps[k]);
        free(trajectory(ini, 100, 10, &acc[k]));
    }
    ck_assert_msg(acc[0] > 950, "step 0.5: %lld of 1000", acc[0]);
    ck_assert_msg(acc[1] < acc[0] - 200, "default step: %lld of 1000", acc[1]);
}
END_TEST

START_TEST(partial_cycles)
{
    /* trials = 10: only particles 0..9 ever move */
    char ini[2048];
    ini_electrolyte(ini, sizeof ini, 5, 100, 60.0, "trials = 10\nstep = 5");
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    metro_float4 before[100];
    memcpy(before, metro_sim_state(sim, &err)->pos, sizeof before);
    ck_assert_int_eq(metro_sim_advance(sim, 5, &err), METRO_OK);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_int_eq(st->attempted[0], 50);
    ck_assert_int_gt(st->accepted[0], 0);
    ck_assert(memcmp(before + 10, st->pos + 10, 90 * sizeof *before) == 0);
    ck_assert(memcmp(before, st->pos, 10 * sizeof *before) != 0);
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(acceptance_file)
{
    char ini[2048], path[4200];
    ini_electrolyte(ini, sizeof ini, 6, 40, 40.0, NULL);
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    snprintf(path, sizeof path, "%s/acceptance.csv", metro_test_run_dir());
    double sum = 0.0;
    for (int row = 0; row < 25; ++row) {
        ck_assert_double_eq(metro_test_csv(path, row, "cycle"), row + 1);
        ck_assert_double_eq(metro_test_csv(path, row, "attempted"), 40);
        double a = metro_test_csv(path, row, "accepted");
        ck_assert_double_eq_tol(metro_test_csv(path, row, "rate"), a / 40, 1e-6);
        sum += a;
    }
    ck_assert(isnan(metro_test_csv(path, 25, "cycle")));
    ck_assert_double_eq(sum, (double)st->accepted[0]);
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(bad_parameters)
{
    static const char *const bad[][2] = {
        {"eta = 3", "power of two"},
        {"block = 48", "power of two"},
        {"per_thread = 3", "per_thread"},
        {"trials = 101", "more than"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        char ini[2048];
        ini_electrolyte(ini, sizeof ini, 1, 100, 60.0, bad[i][0]);
        metro_options opt = {0};
        opt.config_text = ini;
        opt.device = "cpu";
        opt.output = "";
        opt.quiet = 1;
        metro_sim *sim = NULL;
        metro_error err = {0};
        int rc = metro_sim_create(&opt, &sim, &err);
        ck_assert_msg(rc != METRO_OK, "%s accepted", bad[i][0]);
        ck_assert_msg(strstr(err.msg, bad[i][1]) != NULL, "%s: %s", bad[i][0], err.msg);
    }
}
END_TEST

START_TEST(resume_is_exact)
{
    /* 12 ions (the uniform pool spans many cycles), 30 sweeps straight, or
     * 15 then resumed: same checkpoint, same per-cycle acceptances */
    char d[] = "/tmp/metro-brush-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    char path[1024], args[2048], a[1100], b[1100];
    for (int k = 0; k < 2; ++k) {
        char ini[2048];
        ini_electrolyte(ini, sizeof ini, 8, 12, 30.0, "step = 10");
        char *sw = strstr(ini, "sweeps = 20");
        memcpy(sw, k ? "sweeps = 15" : "sweeps = 30", 11);
        snprintf(path, sizeof path, "%s/%s.ini", d, k ? "half" : "full");
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(ini, f);
        fclose(f);
        snprintf(args, sizeof args, "run %s --device cpu --output %s/%s --quiet", path, d, k ? "split" : "full");
        ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    }
    char *e = NULL;
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=30 --device cpu --quiet", d);
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "resume failed: %s", e ? e : "");
    free(e);
    snprintf(a, sizeof a, "%s/full/checkpoint.bin", d);
    snprintf(b, sizeof b, "%s/split/checkpoint.bin", d);
    ck_assert_msg(metro_test_same_file(a, b), "checkpoints differ: %s %s", a, b);
    snprintf(a, sizeof a, "%s/full/acceptance.csv", d);
    snprintf(b, sizeof b, "%s/split/acceptance.csv", d);
    ck_assert_msg(metro_test_same_file(a, b), "acceptance files differ: %s %s", a, b);
    snprintf(args, sizeof args, "rm -rf %s", d);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("brush");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bookkeeping);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, step_sets_acceptance);
    tcase_add_test(tc, partial_cycles);
    tcase_add_test(tc, acceptance_file);
    tcase_add_test(tc, bad_parameters);
    tcase_add_test(tc, resume_is_exact);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
