/* test_parallel_tempering — the parallel tempering sampler on the CPU
 * backend: the ladder, exchanges and round trips, reproducibility, the
 * dimer exact check (PHYSICS.md §1), save/restore. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fake_host.h"
#include "lj_fene_exact.h"
#include "metro/stats.h"

static const char *dimer_ini =
    "[run]\nseed = 11\nsweeps = 1\n"
    "[system]\nparticles = 2\n"
    "[potential]\nplugin = lj_fene\n"
    "[sampler]\nplugin = parallel_tempering\n"
    "temperatures = 0.3, 0.6, 1.0, 2.0\nladders = 4\nstep = 0.05\nexchange_every = 5\n";

static const char *chain_ini =
    "[run]\nseed = 3\nsweeps = 1\n"
    "[system]\nparticles = 13\n"
    "[potential]\nplugin = lj_fene\n"
    "[sampler]\nplugin = parallel_tempering\n"
    "t_min = 0.2\nt_max = 2.0\nreplicas = 5\nexchange_every = 2\n";

/* chain_ini without the generated ladder's keys, for a temperatures list
 * (its line is line 11) */
static const char *list_ini =
    "[run]\nseed = 3\nsweeps = 1\n"
    "[system]\nparticles = 13\n"
    "[potential]\nplugin = lj_fene\n"
    "[sampler]\nplugin = parallel_tempering\n"
    "exchange_every = 2\n";

static const metro_state *advance(metro_sim *sim, long sweeps)
{
    metro_error err = {0};
    ck_assert_msg(metro_sim_advance(sim, sweeps, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_msg(st != NULL, "%s", err.msg);
    return st;
}

/* ---- the ladder ----------------------------------------------------------- */

START_TEST(ladder_geometric_and_linear)
{
    metro_sim *sim = metro_test_sim(chain_ini, "cpu", NULL, 0);
    const metro_state *st = advance(sim, 0);
    ck_assert_int_eq(st->replicas, 5);
    for (int k = 0; k < 5; ++k) {
        double T = 0.2 * pow(10.0, k / 4.0);
        ck_assert_msg(fabs(1.0 / st->beta[k] - T) < 1e-12 * T, "slot %d: T = %.15g, expected %.15g", k,
                      1.0 / st->beta[k], T);
        ck_assert_int_eq(st->slot_replica[k], k);
    }
    metro_sim_destroy(sim);

    const char *sets[] = {"sampler.spacing=linear", "sampler.ladders=3"};
    sim = metro_test_sim(chain_ini, "cpu", sets, 2);
    st = advance(sim, 0);
    ck_assert_int_eq(st->replicas, 15);
    for (int t = 0; t < 15; ++t) {
        double T = 0.2 + 1.8 * (t % 5) / 4.0;
        ck_assert_msg(fabs(1.0 / st->beta[t] - T) < 1e-12, "slot %d: T = %.15g, expected %.15g", t, 1.0 / st->beta[t], T);
    }
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(ladder_explicit_and_refused)
{
    const char *ok[] = {"sampler.temperatures=0.25, 0.5,1.5"};
    metro_sim *sim = metro_test_sim(list_ini, "cpu", ok, 1);
    const metro_state *st = advance(sim, 0);
    ck_assert_int_eq(st->replicas, 3);
    ck_assert(st->beta[0] == 4.0 && st->beta[1] == 2.0 && st->beta[2] == 1.0 / 1.5);
    metro_sim_destroy(sim);

    const char *bad[][1] = {{"sampler.temperatures=0.5, 0.25"}, {"sampler.temperatures=0.5, x"},
                            {"sampler.t_max=0.1"}};
    const char *why[] = {"ascending", "item 2, 'x', is not a plain decimal number", "must exceed"};
    for (int i = 0; i < 3; ++i) {
        metro_options opt = {0};
        opt.config_text = i < 2 ? list_ini : chain_ini;
        opt.sets = bad[i];
        opt.nsets = 1;
        opt.device = "cpu";
        opt.output = "";
        opt.quiet = 1;
        metro_error err = {0};
        metro_sim *s = NULL;
        ck_assert_int_eq(metro_sim_create(&opt, &s, &err), METRO_EUSAGE);
        ck_assert_msg(strstr(err.msg, why[i]) != NULL, "message: %s", err.msg);
    }
}
END_TEST

/* Each item of the list is checked as the core checks its own lists, and
 * the refusal names the item on the key's line: an empty item was skipped
 * ("1,,2" ran two temperatures), a temperature of 1e-300 ran (C_V = inf),
 * and strtod took hex, inf and nan as numbers. */
START_TEST(ladder_list_items_refused)
{
    static const struct {
        const char *list, *want;
    } bad[] = {
        {"1e-300, 1", "pt.ini:11: [sampler] parallel_tempering (sampler) refused its parameters: temperatures: item 1, "
                      "1e-300, is out of range (allowed: 1e-06 to 1e+09"},
        {"1, 1e300", "temperatures: item 2, 1e300, is out of range"},
        {"1, 2e9", "temperatures: item 2, 2e9, is out of range"},
        {"0, 1", "temperatures: item 1, 0, is out of range"},
        {"-1, 1", "temperatures: item 1, -1, is out of range"},
        {"1,,2", "pt.ini:11: [sampler] parallel_tempering (sampler) refused its parameters: temperatures: item 2 of "
                 "the list is empty"},
        {"1, 2,", "temperatures: item 3 of the list is empty"},
        {", 1, 2", "temperatures: item 1 of the list is empty"},
        {"1, 0x10", "temperatures: item 2, '0x10', is not a plain decimal number"},
        {"1, inf", "temperatures: item 2, 'inf', is not a plain decimal number"},
        {"nan", "temperatures: item 1, 'nan', is not a plain decimal number"},
        {"1 2;3", "temperatures: item 2, '2;3', is not a plain decimal number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        char ini[1024];
        snprintf(ini, sizeof ini, "%stemperatures = %s\n", list_ini, bad[i].list);
        metro_test_refused(ini, "pt.ini", bad[i].want);
    }
    /* blanks separate items as commas do, and every plain form is taken */
    const char *ok[] = {"sampler.temperatures=1e-6 .5, 2.5E+1 +3e2,1e9"};
    metro_sim *sim = metro_test_sim(list_ini, "cpu", ok, 1);
    const metro_state *st = advance(sim, 0);
    ck_assert_int_eq(st->replicas, 5);
    ck_assert(st->beta[0] == 1e6 && st->beta[1] == 2.0 && st->beta[2] == 1.0 / 25 && st->beta[4] == 1e-9);
    metro_sim_destroy(sim);
}
END_TEST

/* A list replaces the generated ladder: t_min, t_max, replicas or spacing
 * given with it were ignored without a word.  At their defaults they are
 * not refused: a run's config.ini spells out every default, and a resume
 * reads it. */
START_TEST(ladder_list_or_range_not_both)
{
    static const char *const keys[] = {"t_min = 0.5", "t_max = 3", "replicas = 4", "spacing = linear"};
    for (int i = 0; i < 4; ++i) {
        char ini[1024], want[256];
        snprintf(ini, sizeof ini, "%s%s\ntemperatures = 1, 2\n", list_ini, keys[i]);
        snprintf(want, sizeof want,
                 "pt.ini:12: [sampler] parallel_tempering (sampler) refused its parameters: temperatures: give "
                 "temperatures or t_min/t_max/replicas/spacing, not both (%s is given too", keys[i]);
        metro_test_refused(ini, "pt.ini", want);
    }
    char ini[1024];
    snprintf(ini, sizeof ini, "%st_min = 0.2\nt_max = 2.0\nreplicas = 32\nspacing = geometric\ntemperatures = 1, 2\n",
             list_ini);
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    ck_assert_int_eq(advance(sim, 0)->replicas, 2);
    metro_sim_destroy(sim);
}
END_TEST

/* ---- exchanges ------------------------------------------------------------ */

/* slot_replica is a permutation that keeps every replica in its ladder. */
static void check_permutation(const metro_state *st, int nr)
{
    int *seen = calloc(st->replicas, sizeof *seen);
    for (int t = 0; t < st->replicas; ++t) {
        int r = st->slot_replica[t];
        ck_assert(r >= 0 && r < st->replicas);
        ck_assert_msg(r / nr == t / nr, "replica %d left its ladder for slot %d", r, t);
        ck_assert(!seen[r]++);
    }
    free(seen);
}

START_TEST(exchanges_move_replicas_not_coordinates)
{
    const char *sets[] = {"sampler.ladders=2"};
    metro_sim *sim = metro_test_sim(chain_ini, "cpu", sets, 1);
    const metro_state *st = advance(sim, 400);
    check_permutation(st, 5);
    int moved = 0;
    for (int t = 0; t < st->replicas; ++t) moved += st->slot_replica[t] != t;
    ck_assert_msg(moved > 0, "no exchange was accepted in 200 rounds");
    /* the running energy of each replica is that of its own coordinates */
    metro_error err = {0};
    for (int r = 0; r < st->replicas; ++r) {
        double e = metro_sim_total_energy(sim, r, &err);
        ck_assert_msg(fabs(e - st->energy[r]) < 1e-6 * fmax(1.0, fabs(e)), "replica %d: %.12g vs %.12g", r,
                      st->energy[r], e);
    }
    metro_sim_destroy(sim);
}
END_TEST

/* Eq. (6) at both extremes: near-equal temperatures always exchange; far
 * apart ones (0.05 against 5: |dE dbeta| ~ 19 x |dE|) almost never. */
START_TEST(exchange_acceptance_extremes)
{
    const char *near[] = {"sampler.temperatures=1.0, 1.000001", "sampler.exchange_every=1"};
    metro_sim *sim = metro_test_sim(list_ini, "cpu", near, 2);
    advance(sim, 200);
    metro_error err = {0};
    ck_assert_int_eq(metro_sim_run(sim, &err), METRO_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/exchange.csv", metro_test_run_dir());
    double a = metro_test_csv(path, 0, "acceptance"), n = metro_test_csv(path, 0, "attempted");
    ck_assert_msg(a > 0.99 && n >= 100, "near-equal temperatures: acceptance %g of %g", a, n);
    metro_sim_destroy(sim);

    const char *far[] = {"sampler.temperatures=0.05, 5", "sampler.exchange_every=1"};
    sim = metro_test_sim(list_ini, "cpu", far, 2);
    advance(sim, 400);
    ck_assert_int_eq(metro_sim_run(sim, &err), METRO_OK);
    snprintf(path, sizeof path, "%s/exchange.csv", metro_test_run_dir());
    a = metro_test_csv(path, 0, "acceptance");
    ck_assert_msg(a < 0.05, "far temperatures: acceptance %g", a);
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(round_trips_are_counted)
{
    /* two close temperatures of a dimer exchange almost always: every
     * replica shuttles between the ends */
    const char *sets[] = {"sampler.temperatures=1.0, 1.01", "sampler.exchange_every=1", "run.sweeps=400"};
    metro_sim *sim = metro_test_sim(dimer_ini, "cpu", sets, 3);
    metro_error err = {0};
    ck_assert_int_eq(metro_sim_run(sim, &err), METRO_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/roundtrips.csv", metro_test_run_dir());
    double trips = 0;
    for (int r = 0; r < 8; ++r) trips += metro_test_csv(path, r, "round_trips");
    /* 401 rounds, each accepted with p ~ 1, even and odd rounds alike for
     * the one pair (0,1): a trip needs two accepted exchanges */
    ck_assert_msg(trips > 0.8 * 401 / 2 * 4 && trips <= 401.0 / 2 * 4 + 8, "round trips %g", trips);
    metro_sim_destroy(sim);
}
END_TEST

/* ---- reproducibility ------------------------------------------------------ */

START_TEST(same_seed_same_chain_any_thread_count)
{
    const char *one[] = {"sampler.ladders=3", "sampler.threads=1"};
    const char *four[] = {"sampler.ladders=3", "sampler.threads=4"};
    metro_sim *a = metro_test_sim(chain_ini, "cpu", one, 2);
    metro_sim *b = metro_test_sim(chain_ini, "cpu", four, 2);
    const metro_state *sa = advance(a, 150), *sb = advance(b, 150);
    for (int r = 0; r < sa->replicas; ++r) {
        ck_assert(sa->energy[r] == sb->energy[r]);
        ck_assert(sa->accepted[r] == sb->accepted[r]);
        ck_assert(sa->slot_replica[r] == sb->slot_replica[r]);
    }
    ck_assert(!memcmp(sa->pos, sb->pos, sizeof(metro_float4) * sa->replicas * sa->particles));
    metro_sim_destroy(b);
    const char *other[] = {"sampler.ladders=3", "run.seed=4"};
    b = metro_test_sim(chain_ini, "cpu", other, 2);
    sb = advance(b, 150);
    ck_assert(sa->energy[0] != sb->energy[0]);
    metro_sim_destroy(a);
    metro_sim_destroy(b);
}
END_TEST

/* ---- the dimer exact check ------------------------------------------------ */

START_TEST(dimer_exact_cpu)
{
    metro_sim *sim = metro_test_sim(dimer_ini, "cpu", NULL, 0);
    const int nr = 4, L = 4;
    const double T[4] = {0.3, 0.6, 1.0, 2.0};
    advance(sim, 2000);
    metro_series s[16] = {{0}};
    for (int m = 0; m < 40000; ++m) {
        const metro_state *st = advance(sim, 5);
        for (int t = 0; t < nr * L; ++t) metro_series_push(&s[t], st->energy[st->slot_replica[t]]);
    }
    metro_lj_fene_model model = metro_lj_fene_model_default();
    for (int k = 0; k < nr; ++k) {
        double mean = 0, var = 0, cv = 0, cv_var = 0, e2;
        for (int l = 0; l < L; ++l) {
            metro_series *x = &s[l * nr + k];
            double err = metro_binning_error(x->x, x->n, NULL), c, ce;
            mean += metro_mean(x->x, x->n) / L;
            var += err * err / (L * L);
            metro_jackknife_cv(x->x, x->n, 1.0 / T[k], 1.0, &c, &ce);
            cv += c / L;
            cv_var += ce * ce / (L * L);
        }
        double exact = metro_lj_fene_dimer_moments(&model, T[k], 0, &e2);
        double exact_cv = (e2 - exact * exact) / (T[k] * T[k]);
        double err = sqrt(var), cv_err = sqrt(cv_var);
        ck_assert_msg(err < 0.01 * fmax(1.0, T[k]), "T = %g: error bar %g too large to test", T[k], err);
        ck_assert_msg(fabs(mean - exact) < 4 * err, "T = %g: <E> = %.6f +- %.6f, exact %.6f", T[k], mean, err, exact);
        ck_assert_msg(fabs(cv - exact_cv) < 4 * cv_err, "T = %g: C = %.5f +- %.5f, exact %.5f", T[k], cv, cv_err,
                      exact_cv);
    }
    for (int t = 0; t < 16; ++t) metro_series_free(&s[t]);
    metro_sim_destroy(sim);
}
END_TEST

/* ---- save / restore, through the plugin's table ------------------------ */

/* A toy potential: every particle in a harmonic well, U = |r|^2 / 2. */
static double toy_delta(void *s, const metro_float4 *p, int n, int i, metro_float4 t)
{
    return 0.5 * ((double)t.x * t.x + (double)t.y * t.y + (double)t.z * t.z -
                  ((double)p[i].x * p[i].x + (double)p[i].y * p[i].y + (double)p[i].z * p[i].z));
}
static const metro_potential_api toy = {.version = METRO_ABI_VERSION, .delta = toy_delta};

typedef struct toy_run {
    metro_state st;
    metro_float4 pos[3 * 4];
    double energy[3], beta[3];
    int slot_replica[3];
    long long accepted[3], attempted[3];
} toy_run;

static void toy_init(toy_run *t)
{
    memset(t, 0, sizeof *t);
    t->st.backend = METRO_BACKEND_CPU;
    t->st.particles = 4;
    t->st.replicas = 3;
    t->st.pos = t->pos;
    t->st.energy = t->energy;
    t->st.beta = t->beta;
    t->st.slot_replica = t->slot_replica;
    t->st.accepted = t->accepted;
    t->st.attempted = t->attempted;
}

static void toy_copy(toy_run *to, const toy_run *from)
{
    toy_init(to);
    memcpy(to->pos, from->pos, sizeof to->pos);
    memcpy(to->energy, from->energy, sizeof to->energy);
}

START_TEST(save_restore_continues_the_chain)
{
    char so[4200];
    snprintf(so, sizeof so, "%s/lib/metro/plugins/parallel_tempering.so", METRO_TEST_BINARY_DIR);
    /* NODELETE: the plugin pulls in libgomp, whose idle threads must not
     * outlive its unloading */
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    ck_assert_msg(h != NULL, "%s", dlerror());
    metro_plugin_entry_fn entry = (metro_plugin_entry_fn)dlsym(h, METRO_PLUGIN_ENTRY);
    const metro_plugin *d = entry();
    const metro_sampler_api *api = d->api;
    const char *kv[] = {"temperatures=0.5, 1, 2", "exchange_every=3", "step=0.3"};
    metro_params pp = fake_params(d->params, kv, 3);
    metro_setup setup = {0};
    setup.particles = 4;
    setup.backend = METRO_BACKEND_CPU;
    setup.seed = 5;

    struct metro_ctx ca = {0}, cb = {0}, cc = {0};
    void *a, *b, *c;
    ck_assert_int_eq(api->create(&fake_host, &ca, &pp, &setup, &a), 0);
    ck_assert_int_eq(setup.replicas, 3);
    toy_run ra, snap, rb, rc;
    toy_init(&ra);
    ck_assert_int_eq(api->start(a, &ra.st, &toy, NULL), 0);
    ck_assert_int_eq(api->advance(a, &ra.st, 10), 0);
    ck_assert_int_eq(api->save(a), 0);
    ck_assert(ca.nsaved > 0);
    snap = ra;
    ck_assert_int_eq(api->advance(a, &ra.st, 11), 0);

    /* restore after start */
    ck_assert_int_eq(api->create(&fake_host, &cb, &pp, &setup, &b), 0);
    toy_copy(&rb, &snap);
    ck_assert_int_eq(api->start(b, &rb.st, &toy, NULL), 0);
    ck_assert_int_eq(api->restore(b, ca.saved, ca.nsaved), 0);
    ck_assert_int_eq(api->advance(b, &rb.st, 11), 0);
    /* restore before start */
    ck_assert_int_eq(api->create(&fake_host, &cc, &pp, &setup, &c), 0);
    ck_assert_int_eq(api->restore(c, ca.saved, ca.nsaved), 0);
    toy_copy(&rc, &snap);
    ck_assert_int_eq(api->start(c, &rc.st, &toy, NULL), 0);
    ck_assert_int_eq(api->advance(c, &rc.st, 11), 0);

    int exchanged = 0;
    for (int r = 0; r < 3; ++r) {
        ck_assert(ra.energy[r] == rb.energy[r] && ra.energy[r] == rc.energy[r]);
        ck_assert(ra.slot_replica[r] == rb.slot_replica[r] && ra.slot_replica[r] == rc.slot_replica[r]);
        ck_assert(ra.accepted[r] == rb.accepted[r] && ra.accepted[r] == rc.accepted[r]);
        exchanged += ra.slot_replica[r] != r;
    }
    ck_assert(!memcmp(ra.pos, rb.pos, sizeof ra.pos) && !memcmp(ra.pos, rc.pos, sizeof ra.pos));
    ck_assert_msg(exchanged, "the test needs exchanges to mean something");
    /* a blob of the wrong size is refused */
    ck_assert_int_ne(api->restore(c, ca.saved, ca.nsaved - 1), 0);
    ck_assert(strstr(cc.msg, "bytes") != NULL);
    api->destroy(a);
    api->destroy(b);
    api->destroy(c);
    free(ca.saved);
    dlclose(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parallel_tempering");
    TCase *tc = tcase_create("ladder");
    tcase_add_test(tc, ladder_geometric_and_linear);
    tcase_add_test(tc, ladder_explicit_and_refused);
    tcase_add_test(tc, ladder_list_items_refused);
    tcase_add_test(tc, ladder_list_or_range_not_both);
    suite_add_tcase(s, tc);
    tc = tcase_create("exchange");
    tcase_add_test(tc, exchanges_move_replicas_not_coordinates);
    tcase_add_test(tc, exchange_acceptance_extremes);
    tcase_add_test(tc, round_trips_are_counted);
    tcase_add_test(tc, same_seed_same_chain_any_thread_count);
    suite_add_tcase(s, tc);
    tc = tcase_create("physics");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, dimer_exact_cpu);
    suite_add_tcase(s, tc);
    tc = tcase_create("checkpoint");
    tcase_add_test(tc, save_restore_continues_the_chain);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
