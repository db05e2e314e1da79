/* test_brush_batch — what of brush's shared launches (brush_batch.h) can be
 * checked without a GPU: the ticket map of a shared launch (a bijection
 * onto every system's own tickets, each dependency at a smaller ticket),
 * the partition of systems into groups, the host rendezvous (every post
 * launched exactly once, members of different lengths, members leaving,
 * a failed launch), and that grouping CPU systems changes nothing (the
 * sampler declines: each chain is its own). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "brush_batch.h"

/* Every block of a launch of k systems, C cycles, G groups maps to a
 * distinct (system, own ticket); every own ticket of every system is
 * covered; and a block's predecessors in its own chain (own tickets
 * below it) hold smaller launch tickets. */
START_TEST(ticket_map)
{
    for (int k = 1; k <= 9; ++k)
        for (int C = 1; C <= 3; ++C)
            for (int G = 1; G <= 6; ++G) {
                const unsigned total = (unsigned)(k * C * G);
                unsigned *at = malloc(total * sizeof *at); /* launch ticket of (s, own) */
                for (unsigned i = 0; i < total; ++i) at[i] = ~0u;
                for (unsigned t = 0; t < total; ++t) {
                    int s;
                    unsigned own;
                    brush_batch_ticket(t, k, &s, &own);
                    ck_assert(s >= 0 && s < k && own < (unsigned)(C * G));
                    ck_assert_msg(at[(unsigned)s * C * G + own] == ~0u, "k %d: two blocks for system %d ticket %u", k, s, own);
                    at[(unsigned)s * C * G + own] = t;
                }
                for (int s = 0; s < k; ++s)
                    for (unsigned own = 1; own < (unsigned)(C * G); ++own)
                        ck_assert(at[(unsigned)s * C * G + own - 1] < at[(unsigned)s * C * G + own]);
                free(at);
            }
}
END_TEST

START_TEST(partition)
{
    brush_batch_key a = {.n = 8192, .threads = 256, .per_thread = 1, .eta = 4, .group_size = 64, .tile = 1024,
                         .pre = 2, .smem = 1000};
    brush_batch_key a2 = a, b = a, c = a;
    b.n = 65536; /* another size */
    c.eta = 8;   /* another layout */
    const brush_batch_key *keys[9] = {&a, &b, &a2, NULL, &c, &a, &b, &a, &a};
    int lead[9];
    ck_assert_int_eq(brush_batch_partition(keys, 9, 128, lead), 2);
    const int want[9] = {0, 1, 0, -1, -1, 0, 1, 0, 0};
    for (int i = 0; i < 9; ++i) ck_assert_msg(lead[i] == want[i], "system %d: lead %d, want %d", i, lead[i], want[i]);
    /* at most 2 per group: a's five form groups {0,2}, {5,7} and 8 alone */
    ck_assert_int_eq(brush_batch_partition(keys, 9, 2, lead), 3);
    const int want2[9] = {0, 1, 0, -1, -1, 5, 1, 5, -1};
    for (int i = 0; i < 9; ++i) ck_assert_msg(lead[i] == want2[i], "max 2, system %d: lead %d, want %d", i, lead[i], want2[i]);
    /* nothing to share */
    const brush_batch_key *one[2] = {&a, &b};
    ck_assert_int_eq(brush_batch_partition(one, 2, 128, lead), 0);
    ck_assert(lead[0] == -1 && lead[1] == -1);
}
END_TEST

/* ---- the rendezvous -------------------------------------------------------- */

#define RV_K 7
#define RV_ROUNDS 400

typedef struct rv_log {
    int rounds;
    int posts[RV_K];          /* posts each member got launched */
    int seen[RV_ROUNDS * 2][RV_K];
    int fail_at;              /* launch number that fails, -1 never */
    int bad;                  /* a member launched while not in the round */
} rv_log;

static rv_log LOG;
static brush_rv RV;

static int fake_launch(void *arg, const unsigned char *has, int k)
{
    rv_log *l = arg;
    int any = 0;
    for (int m = 0; m < k; ++m)
        if (has[m]) {
            l->posts[m]++;
            l->seen[l->rounds][m] = 1;
            any = 1;
        }
    if (!any) l->bad = 1;
    return l->rounds++ == l->fail_at ? -1 : 0;
}

typedef struct member {
    int m, posts, ok, failed;
} member;

static void *member_run(void *arg)
{
    member *me = arg;
    for (int i = 0; i < me->posts; ++i) {
        if (brush_rv_post(&RV, me->m)) {
            me->failed++;
            break;
        }
        me->ok++;
        if ((i + me->m) % 5 == 0) sched_yield();
    }
    brush_rv_leave(&RV, me->m);
    return NULL;
}

static void rendezvous_run(int fail_at)
{
    memset(&LOG, 0, sizeof LOG);
    LOG.fail_at = fail_at;
    ck_assert_int_eq(brush_rv_init(&RV, RV_K, fake_launch, &LOG), 0);
    member mem[RV_K];
    pthread_t th[RV_K];
    for (int m = 0; m < RV_K; ++m) {
        /* different lengths: members leave while others still post */
        mem[m] = (member){m, 50 + 50 * m, 0, 0};
        ck_assert_int_eq(pthread_create(&th[m], NULL, member_run, &mem[m]), 0);
    }
    for (int m = 0; m < RV_K; ++m) pthread_join(th[m], NULL);
    ck_assert(!LOG.bad);
    if (fail_at < 0) {
        /* every post launched once; a round holds every member still in */
        for (int m = 0; m < RV_K; ++m) {
            ck_assert_int_eq(mem[m].ok, mem[m].posts);
            ck_assert_int_eq(LOG.posts[m], mem[m].posts);
        }
        ck_assert_int_eq(LOG.rounds, mem[RV_K - 1].posts);
        for (int r = 0; r < LOG.rounds; ++r)
            for (int m = 0; m < RV_K; ++m) ck_assert_int_eq(LOG.seen[r][m], r < mem[m].posts);
    } else {
        /* the failed round's members see it, and nobody gets past it */
        for (int m = 0; m < RV_K; ++m) {
            ck_assert_int_eq(mem[m].failed, 1);
            ck_assert_int_eq(mem[m].ok, fail_at);
        }
        ck_assert_int_eq(LOG.rounds, fail_at + 1);
    }
    brush_rv_free(&RV);
}

START_TEST(rendezvous)
{
    rendezvous_run(-1);
}
END_TEST

START_TEST(rendezvous_failure)
{
    rendezvous_run(17);
}
END_TEST

/* CPU systems: the sampler declines to group them (nothing to share), so
 * one thread may advance them in turn and each chain is its own. */
START_TEST(cpu_group_declines)
{
    char ini[1024];
    metro_sim *sims[3], *alone[3];
    metro_error err = {0};
    for (int i = 0; i < 3; ++i) {
        snprintf(ini, sizeof ini,
                 "[run]\nseed = %d\nsweeps = 0\n\n[system]\nparticles = 64\n\n[potential]\nplugin = coulomb_hs\n"
                 "valences = 1, -1\ndiameters = 4\ncell_radius = 40\nbjerrum = 7.117\n\n[sampler]\nplugin = brush\n",
                 50 + i);
        sims[i] = metro_test_sim(ini, "cpu", NULL, 0);
        alone[i] = metro_test_sim(ini, "cpu", NULL, 0);
    }
    ck_assert_int_eq(metro_sims_group(sims, 3, &err), METRO_OK);
    for (int i = 0; i < 3; ++i) {
        ck_assert_int_eq(metro_sim_advance(sims[i], 5, &err), METRO_OK);
        ck_assert_int_eq(metro_sim_advance(alone[i], 5, &err), METRO_OK);
        metro_sim_ungroup(sims[i]);
        const metro_state *a = metro_sim_state(sims[i], &err), *b = metro_sim_state(alone[i], &err);
        ck_assert(memcmp(a->pos, b->pos, 64 * sizeof *a->pos) == 0);
        ck_assert(a->energy[0] == b->energy[0] && a->accepted[0] == b->accepted[0]);
        metro_sim_destroy(sims[i]);
        metro_sim_destroy(alone[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("brush_batch");
    TCase *tc = tcase_create("logic");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ticket_map);
    tcase_add_test(tc, partition);
    tcase_add_test(tc, rendezvous);
    tcase_add_test(tc, rendezvous_failure);
    tcase_add_test(tc, cpu_group_declines);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
