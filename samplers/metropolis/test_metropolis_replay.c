/* test_metropolis_replay.c — the sampler consumes its random numbers
 * exactly as metropolis.h documents.  The built lj_fene.so and
 * metropolis.so run under a fake host whose uniforms are known; the test
 * replays the documented chain itself (layout, pick, move, acceptance)
 * from the same uniforms and demands the identical trajectory, across
 * advance() calls of uneven sizes. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>

#include "../../potentials/lj_fene/fake_host.h"
#include "testutil.h"

enum { N = 13 };

static const metro_plugin *load(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/lib/metro/plugins/%s.so", METRO_TEST_BINARY_DIR, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    metro_plugin_entry_fn entry = (metro_plugin_entry_fn)dlsym(h, METRO_PLUGIN_ENTRY);
    ck_assert_ptr_nonnull(entry);
    return entry();
}

static void replay(const char *order)
{
    const metro_plugin *P = load("lj_fene"), *S = load("metropolis");
    const metro_potential_api *pa = P->api;
    const metro_sampler_api *sa = S->api;
    static metro_ctx cp, cs, mine;
    memset(&cp, 0, sizeof cp);
    memset(&cs, 0, sizeof cs);
    cs.rng = mine.rng = 0x9E3779B97F4A7C15ull;

    char ok[64];
    snprintf(ok, sizeof ok, "order=%s", order);
    const char *kv[] = {"temperature=0.7", "step=0.1", ok};
    metro_params pp = fake_params(P->params, NULL, 0), sp = fake_params(S->params, kv, 3);
    /* one chain of every particle, as the core gives a lone lj_fene */
    static unsigned char bonds[N];
    static int first = 0, length = N;
    for (int i = 0; i + 1 < N; ++i) bonds[i] = 1;
    static metro_setup su;
    su = (metro_setup){.particles = N, .replicas = 1, .backend = METRO_BACKEND_CPU};
    su.topology = (metro_topology){1, &first, &length, bonds};
    void *pot, *smp;
    ck_assert_int_eq(pa->create(&fake_host, &cp, &pp, &su, &pot), 0);
    ck_assert_int_eq(sa->create(&fake_host, &cs, &sp, &su, &smp), 0);
    ck_assert_int_eq(su.replicas, 1);

    metro_float4 pos[N], ref[N];
    double energy, beta;
    int slot;
    long long acc = 0, att = 0;
    metro_state st = {.backend = METRO_BACKEND_CPU, .particles = N, .replicas = 1,
                      .chain = 1, .topology = &su.topology, .pos = pos, .energy = &energy, .beta = &beta,
                      .slot_replica = &slot, .accepted = &acc, .attempted = &att};
    pa->initial(pot, &cp, pos, N);
    memcpy(ref, pos, sizeof pos);
    energy = pa->total(pot, pos, N);
    ck_assert_int_eq(sa->start(smp, &st, pa, pot), 0);
    ck_assert_double_eq_tol(beta, 1 / 0.7, 1e-15);

    const long calls[] = {7, 1, 42, 3, 200};
    int random_order = !strcmp(order, "random");
    long long my_acc = 0;
    for (int c = 0; c < 5; c++) {
        ck_assert_int_eq(sa->advance(smp, &st, calls[c]), 0);
        /* the documented chain: per trial [pick,] dx, dy, dz, accept */
        for (long s = 0; s < calls[c]; s++)
            for (int t = 0; t < N; t++) {
                float u[5];
                fake_uniform(&mine, u, random_order ? 5 : 4);
                const float *d = u + random_order;
                int i = random_order ? (int)(u[0] * N) : t;
                if (i > N - 1) i = N - 1;
                metro_float4 old = ref[i], trial = old;
                trial.x = old.x + 0.1f * (2.0f * d[0] - 1.0f);
                trial.y = old.y + 0.1f * (2.0f * d[1] - 1.0f);
                trial.z = old.z + 0.1f * (2.0f * d[2] - 1.0f);
                double before = pa->total(pot, ref, N);
                ref[i] = trial;
                double bdE = beta * (pa->total(pot, ref, N) - before);
                if (bdE <= 0 || (double)d[3] < exp(-bdE)) my_acc++; /* inf: exp = 0 */
                else ref[i] = old;
            }
        ck_assert_int_eq(acc, my_acc);
        ck_assert_int_eq(att, (long long)N * (calls[0] + (c > 0) * calls[1] + (c > 1) * calls[2] +
                                              (c > 2) * calls[3] + (c > 3) * calls[4]));
        for (int i = 0; i < N; i++)
            ck_assert_msg(pos[i].x == ref[i].x && pos[i].y == ref[i].y && pos[i].z == ref[i].z,
                          "%s, call %d: particle %d at (%.9g %.9g %.9g), replay (%.9g %.9g %.9g)",
                          order, c, i, pos[i].x, pos[i].y, pos[i].z, ref[i].x, ref[i].y, ref[i].z);
    }
    ck_assert_int_gt(my_acc, N * 253 / 4);
    ck_assert_double_eq_tol(energy, pa->total(pot, pos, N), 1e-9);

    /* save/restore: counters and unused uniforms carry over, so a restored
     * sampler continues the same chain */
    free(cs.saved);
    cs.saved = NULL;
    cs.nsaved = 0;
    ck_assert_int_eq(sa->save(smp), 0);
    void *again;
    static metro_ctx cs2;
    memset(&cs2, 0, sizeof cs2);
    cs2.rng = cs.rng; /* the stream continues where the first one stopped */
    ck_assert_int_eq(sa->create(&fake_host, &cs2, &sp, &su, &again), 0);
    ck_assert_int_eq(sa->restore(again, cs.saved, cs.nsaved), 0);
    metro_float4 pos2[N];
    memcpy(pos2, pos, sizeof pos);
    double energy2 = energy, beta2;
    int slot2;
    long long acc2 = 0, att2 = 0;
    metro_state st2 = st;
    st2.pos = pos2;
    st2.energy = &energy2;
    st2.beta = &beta2;
    st2.slot_replica = &slot2;
    st2.accepted = &acc2;
    st2.attempted = &att2;
    ck_assert_int_eq(sa->start(again, &st2, pa, pot), 0);
    ck_assert_int_eq(acc2, acc);
    ck_assert_int_eq(att2, att);
    ck_assert_int_eq(sa->advance(smp, &st, 30), 0);
    ck_assert_int_eq(sa->advance(again, &st2, 30), 0);
    ck_assert_int_eq(acc2, acc);
    ck_assert_mem_eq(pos2, pos, sizeof pos);
    free(cs.saved);
    sa->destroy(smp);
    sa->destroy(again);
    pa->destroy(pot);
}

START_TEST(replay_random) { replay("random"); }
END_TEST

START_TEST(replay_sequential) { replay("sequential"); }
END_TEST

int main(void)
{
    Suite *s = suite_create("metropolis_replay");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, replay_random);
    tcase_add_test(tc, replay_sequential);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
