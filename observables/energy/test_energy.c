/* test_energy.c — the energy observable's table through a fake host (no
 * core): which replica each slot records, the three CSV files against
 * metro/stats.h computed here, the ACF's extent, and save/restore.
 * energy.c is linked in. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../potentials/lj_fene/fake_host.h"
#include "metro/stats.h"
#include "testutil.h"

const metro_plugin *metro_plugin_entry(void);

enum { SLOTS = 2, N = 4, SAMPLES = 3000, EVERY = 10 };

static metro_ctx ctx;
static const metro_observable_api *api;

static void *make(const char *const *kv, int n)
{
    const metro_plugin *d = metro_plugin_entry();
    api = d->api;
    metro_params p = fake_params(d->params, kv, n);
    metro_setup setup = {.particles = N, .replicas = SLOTS, .backend = METRO_BACKEND_CPU};
    void *self = NULL;
    ck_assert_int_eq(api->create(&fake_host, &ctx, &p, &setup, &self), 0);
    return self;
}

static void setup_dir(void)
{
    memset(&ctx, 0, sizeof ctx);
    snprintf(ctx.dir, sizeof ctx.dir, "/tmp/metro-energy-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(ctx.dir));
}

/* A state whose two replicas run different AR(1)-like series; slots hold
 * the replicas crosswise (slot 0 <- replica 1), as parallel tempering may
 * leave them. */
typedef struct fake_state {
    metro_state st;
    double energy[SLOTS], beta[SLOTS];
    int slot_replica[SLOTS];
    double want[SLOTS][SAMPLES]; /* what slot t must record at sample k */
} fake_state;

static void fill(fake_state *f, void *obs, int from, int to)
{
    memset(&f->st, 0, sizeof f->st);
    f->st.particles = N;
    f->st.replicas = SLOTS;
    f->st.energy = f->energy;
    f->st.beta = f->beta;
    f->st.slot_replica = f->slot_replica;
    f->beta[0] = 1 / 0.5;
    f->beta[1] = 1 / 2.0;
    f->slot_replica[0] = 1;
    f->slot_replica[1] = 0;
    double x0 = 0, x1 = 0;
    unsigned r = 2718281u;
    for (int k = 0; k < to; k++) {
        /* a deterministic AR(1) series per replica (LCG noise) */
        r = r * 1664525u + 1013904223u;
        x0 = 0.9 * x0 + (r >> 8) / 16777216.0 - 0.5;
        r = r * 1664525u + 1013904223u;
        x1 = 0.5 * x1 + (r >> 8) / 16777216.0 - 0.5;
        f->energy[0] = -10 + x0;
        f->energy[1] = -3 + 0.2 * x1;
        f->want[0][k] = f->energy[1];
        f->want[1][k] = f->energy[0];
        if (k < from) continue;
        f->st.sweep = 1000 + (long long)EVERY * (k + 1);
        ck_assert_int_eq(api->measure(obs, &f->st), 0);
    }
}

static char *path(const char *name)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/%s", ctx.dir, name);
    return p;
}

START_TEST(records_and_stats)
{
    setup_dir();
    void *obs = make(NULL, 0);
    static fake_state f;
    fill(&f, obs, 0, SAMPLES);
    ck_assert_int_eq(api->finish(obs, &f.st), 0);

    /* the series: slot-major within a sweep, T of the slot, E of its replica */
    ck_assert_double_eq(metro_test_csv(path("energy.csv"), 0, "sweep"), 1010);
    ck_assert_double_eq(metro_test_csv(path("energy.csv"), 1, "slot"), 1);
    ck_assert_double_eq_tol(metro_test_csv(path("energy.csv"), 0, "T"), 0.5, 1e-12);
    ck_assert_double_eq_tol(metro_test_csv(path("energy.csv"), 1, "T"), 2.0, 1e-12);
    for (int k = 0; k < SAMPLES; k += 499)
        for (int t = 0; t < SLOTS; t++)
            ck_assert_double_eq(metro_test_csv(path("energy.csv"), 2 * k + t, "E"), f.want[t][k]);
    ck_assert(isnan(metro_test_csv(path("energy.csv"), 2 * SAMPLES, "E"))); /* no extra rows */

    for (int t = 0; t < SLOTS; t++) {
        const double *x = f.want[t];
        double beta = f.beta[t], tau, cv, cv_err;
        size_t w;
        double err = metro_binning_error(x, SAMPLES, &tau), ts = metro_tau_int_sokal(x, SAMPLES, &w);
        metro_jackknife_cv(x, SAMPLES, beta, N, &cv, &cv_err);
        const char *s = path("energy_stats.csv");
        ck_assert_double_eq(metro_test_csv(s, t, "slot"), t);
        ck_assert_double_eq_tol(metro_test_csv(s, t, "T"), 1 / beta, 1e-9);
        ck_assert_double_eq_tol(metro_test_csv(s, t, "E_mean"), metro_mean(x, SAMPLES), 1e-9);
        ck_assert_double_eq_tol(metro_test_csv(s, t, "E_err"), err, 1e-5 * fabs(err));
        ck_assert_double_eq_tol(metro_test_csv(s, t, "Cv_per_N"), cv, 1e-7 * fabs(cv));
        ck_assert_double_eq_tol(metro_test_csv(s, t, "Cv_err"), cv_err, 1e-5 * cv_err);
        /* taus in sweeps: samples x EVERY */
        ck_assert_double_eq_tol(metro_test_csv(s, t, "tau_int"), tau * EVERY, 1e-5 * tau * EVERY);
        ck_assert_double_eq_tol(metro_test_csv(s, t, "tau_int_sokal"), ts * EVERY, 1e-5 * ts * EVERY);
        ck_assert_double_eq(metro_test_csv(s, t, "samples"), SAMPLES);
        ck_assert_double_gt(tau, 1.0); /* the series are correlated */
    }

    /* ACF: slot 0 from t = 0 to its Sokal window, then slot 1 */
    size_t w0;
    metro_tau_int_sokal(f.want[0], SAMPLES, &w0);
    const char *a = path("energy_acf.csv");
    ck_assert_double_eq(metro_test_csv(a, 0, "slot"), 0);
    ck_assert_double_eq(metro_test_csv(a, 0, "t"), 0);
    ck_assert_double_eq_tol(metro_test_csv(a, 0, "C"), 1.0, 1e-9);
    ck_assert_double_eq(metro_test_csv(a, 3, "t"), 3 * EVERY);
    ck_assert_double_eq_tol(metro_test_csv(a, 3, "C"), metro_autocorr(f.want[0], SAMPLES, 3), 1e-7);
    ck_assert_double_eq(metro_test_csv(a, (int)w0, "t"), (double)w0 * EVERY);
    ck_assert_double_eq(metro_test_csv(a, (int)w0 + 1, "slot"), 1);
    ck_assert_double_eq(metro_test_csv(a, (int)w0 + 1, "t"), 0);
    api->destroy(obs);
}
END_TEST

START_TEST(options)
{
    setup_dir();
    static const char *const kv[] = {"series=false", "max_lag=7"};
    void *obs = make(kv, 2);
    static fake_state f;
    fill(&f, obs, 0, 500);
    ck_assert_int_eq(api->finish(obs, &f.st), 0);
    ck_assert_int_ne(access(path("energy.csv"), F_OK), 0);
    const char *a = path("energy_acf.csv");
    ck_assert_double_eq(metro_test_csv(a, 7, "t"), 7 * EVERY);
    ck_assert_double_eq(metro_test_csv(a, 8, "slot"), 1);
    ck_assert_double_eq(metro_test_csv(a, 15, "t"), 7 * EVERY);
    ck_assert(isnan(metro_test_csv(a, 16, "t")));
    api->destroy(obs);
}
END_TEST

START_TEST(save_restore)
{
    /* an interrupted run restored from its saved state reports the same
     * statistics as the uninterrupted one */
    setup_dir();
    static fake_state f;
    void *whole = make(NULL, 0);
    fill(&f, whole, 0, SAMPLES);
    ck_assert_int_eq(api->finish(whole, &f.st), 0);
    char *want = metro_test_slurp(path("energy_stats.csv"));
    char *want_series = metro_test_slurp(path("energy.csv"));
    api->destroy(whole);

    void *first = make(NULL, 0);
    fill(&f, first, 0, 1234);
    ck_assert_int_eq(api->save(first), 0);
    api->destroy(first);
    void *second = make(NULL, 0);
    ck_assert_int_eq(api->restore(second, ctx.saved, ctx.nsaved), 0);
    fill(&f, second, 1234, SAMPLES);
    ck_assert_int_eq(api->finish(second, &f.st), 0);
    char *got = metro_test_slurp(path("energy_stats.csv"));
    char *got_series = metro_test_slurp(path("energy.csv"));
    ck_assert_str_eq(got, want);
    ck_assert_str_eq(got_series, want_series);

    /* damaged or foreign states are refused with a reason */
    ck_assert_int_ne(api->restore(second, ctx.saved, ctx.nsaved - 8), 0);
    ck_assert_ptr_nonnull(strstr(ctx.msg, "bytes"));
    ck_assert_int_ne(api->restore(second, ctx.saved, 10), 0);
    unsigned char *bad = malloc(ctx.nsaved);
    memcpy(bad, ctx.saved, ctx.nsaved);
    bad[0] ^= 1;
    ck_assert_int_ne(api->restore(second, bad, ctx.nsaved), 0);
    memcpy(bad, ctx.saved, ctx.nsaved);
    bad[8] = 3; /* slots */
    ck_assert_int_ne(api->restore(second, bad, ctx.nsaved), 0);
    ck_assert_ptr_nonnull(strstr(ctx.msg, "slots"));
    free(bad);
    free(want);
    free(got);
    free(want_series);
    free(got_series);
    api->destroy(second);
    free(ctx.saved);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("energy");
    TCase *tc = tcase_create("observable");
    tcase_add_test(tc, records_and_stats);
    tcase_add_test(tc, options);
    tcase_add_test(tc, save_restore);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
