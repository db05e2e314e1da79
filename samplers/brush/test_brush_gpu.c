/* test_brush_gpu — the Brush Metropolis kernel against the CPU's sequential
 * chain.  With one seed both backends draw the same uniforms (brush.h), so
 * the GPU must accept the same moves in every cycle and end at the same
 * positions (within 1e-4: they are the same floats unless a decision fell
 * on a floating-point tie).  N = 4096 over 20 cycles, non-powers of two
 * (3000, 1000) over many layouts (eta, block, per_thread), a bonded chain
 * (lj_fene: the bond corrections across chunks and groups), energy
 * bookkeeping, the two-ion exact check on CUDA, and systems that share
 * launches (brush_batch.h) equal to the same systems run alone, bit for
 * bit.
 *
 * For compute-sanitizer (racecheck instruments every shared-memory access
 * and cannot finish the full suite in reasonable time), METRO_BRUSH_SMALL=1
 * runs only one small case: N = METRO_BRUSH_N (default 300) over 3 cycles
 * against the CPU, in the layout METRO_BRUSH_LAYOUT = "eta,block,per_thread"
 * or, by default, two layouts that between them cover several groups and
 * flags, staged chunks, several chunks per group, eta partial sums and two
 * particles per thread:
 *   CK_FORK=no METRO_BRUSH_SMALL=1 compute-sanitizer --tool racecheck \
 *       build/samplers/brush/test_brush_gpu   (or wherever ctest runs it) */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "../../potentials/coulomb_hs/two_ions.h"

typedef struct run {
    int n, cycles;
    long long *acc;       /* per cycle */
    metro_float4 *pos;    /* after the last cycle */
    double energy, total; /* running and fresh */
} run;

/* `cycles` cycles, advanced `batch` at a time; acc[] per advance. */
static run run_batches(const char *ini, const char *device, int n, int cycles, int batch, const char *const *sets,
                       int nsets)
{
    const int adv = cycles / batch;
    run r = {n, adv, calloc((size_t)adv, sizeof(long long)), malloc((size_t)n * sizeof(metro_float4)), 0, 0};
    metro_sim *sim = metro_test_sim(ini, device, sets, nsets);
    metro_error err = {0};
    long long prev = 0;
    for (int c = 0; c < adv; ++c) {
        ck_assert_msg(metro_sim_advance(sim, batch, &err) == METRO_OK, "%s", err.msg);
        const metro_state *st = metro_sim_state(sim, &err);
        ck_assert_msg(st != NULL, "%s", err.msg);
        r.acc[c] = st->accepted[0] - prev;
        prev = st->accepted[0];
    }
    const metro_state *st = metro_sim_state(sim, &err);
    memcpy(r.pos, st->pos, (size_t)n * sizeof *r.pos);
    r.energy = st->energy[0];
    r.total = metro_sim_total_energy(sim, 0, &err);
    metro_sim_destroy(sim);
    return r;
}

static run run_cycles(const char *ini, const char *device, int n, int cycles, const char *const *sets, int nsets)
{
    return run_batches(ini, device, n, cycles, 1, sets, nsets);
}

static void run_free(run *r)
{
    free(r->acc);
    free(r->pos);
}

/* The GPU run equals the CPU one; `what` names the case in messages. */
static void same(const run *cpu, const run *gpu, const char *what)
{
    for (int c = 0; c < cpu->cycles; ++c)
        ck_assert_msg(cpu->acc[c] == gpu->acc[c], "%s: cycle %d accepted %lld on the CPU, %lld on the GPU", what,
                      c + 1, cpu->acc[c], gpu->acc[c]);
    double worst = 0.0;
    int at = -1;
    for (int i = 0; i < cpu->n; ++i) {
        double d = fmax(fabs(cpu->pos[i].x - gpu->pos[i].x),
                        fmax(fabs(cpu->pos[i].y - gpu->pos[i].y), fabs(cpu->pos[i].z - gpu->pos[i].z)));
        if (d > worst) worst = d, at = i;
        ck_assert(cpu->pos[i].w == gpu->pos[i].w);
    }
    ck_assert_msg(worst <= 1e-4, "%s: particle %d is %g away from the CPU's", what, at, worst);
    ck_assert_msg(fabs(gpu->energy - gpu->total) <= 1e-6 * fmax(fabs(gpu->total), (double)cpu->n),
                  "%s: GPU running energy %.10g, fresh %.10g", what, gpu->energy, gpu->total);
    ck_assert_msg(fabs(gpu->energy - cpu->energy) <= 1e-6 * fmax(fabs(cpu->energy), (double)cpu->n),
                  "%s: GPU energy %.10g, CPU %.10g", what, gpu->energy, cpu->energy);
}

/* The electrolyte of PHYSICS.md §2 at the paper's density, n ions. */
static void ini_paper(char *buf, size_t len, int seed, int n)
{
    snprintf(buf, len,
             "[run]\nseed = %d\nsweeps = 0\n\n[system]\nparticles = %d\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\n"
             "concentration = 0.0019008\nbjerrum = 7.117\n\n[sampler]\nplugin = brush\n",
             seed, n);
}

START_TEST(n4096_twenty_cycles)
{
    char ini[2048];
    ini_paper(ini, sizeof ini, 21, 4096);
    run cpu = run_cycles(ini, "cpu", 4096, 20, NULL, 0);
    run gpu = run_cycles(ini, "cuda", 4096, 20, NULL, 0);
    long long a = 0;
    for (int c = 0; c < 20; ++c) a += cpu.acc[c];
    ck_assert_msg(a > 20 * 4096 / 20 && a < 20 * 4096 * 19 / 20, "acceptance %lld of %d", a, 20 * 4096);
    same(&cpu, &gpu, "N = 4096, auto layout");
    run_free(&cpu);
    run_free(&gpu);
}
END_TEST

/* Layouts (eta, block, per_thread) that cover: one and many chunks per
 * group, staged and unstaged chunk terms (groups above 256), partial last
 * groups and chunks, eta partial sums, 2 and 4 particles per thread, tiny
 * and large blocks, more groups than fit on the GPU at once. */
static const char *const layouts[][3] = {
    {"sampler.eta=1", "sampler.block=1024", "sampler.per_thread=1"},
    {"sampler.eta=2", "sampler.block=1024", "sampler.per_thread=1"},
    {"sampler.eta=32", "sampler.block=1024", "sampler.per_thread=1"},
    {"sampler.eta=16", "sampler.block=512", "sampler.per_thread=1"},
    {"sampler.eta=4", "sampler.block=128", "sampler.per_thread=1"},
    {"sampler.eta=1", "sampler.block=32", "sampler.per_thread=1"},
    {"sampler.eta=1", "sampler.block=64", "sampler.per_thread=1"},
    {"sampler.eta=1", "sampler.block=256", "sampler.per_thread=2"},
    {"sampler.eta=2", "sampler.block=128", "sampler.per_thread=2"},
    {"sampler.eta=1", "sampler.block=256", "sampler.per_thread=4"},
    {"sampler.eta=1", "sampler.block=32", "sampler.per_thread=4"},
    {"sampler.eta=8", "sampler.block=256", "sampler.per_thread=4"},
};

static void layouts_for(int n, int cycles, int seed)
{
    char ini[2048];
    ini_paper(ini, sizeof ini, seed, n);
    run cpu = run_cycles(ini, "cpu", n, cycles, NULL, 0);
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; ++k) {
        run gpu = run_cycles(ini, "cuda", n, cycles, layouts[k], 3);
        char what[256];
        snprintf(what, sizeof what, "N = %d, %s %s %s", n, layouts[k][0], layouts[k][1], layouts[k][2]);
        same(&cpu, &gpu, what);
        run_free(&gpu);
    }
    run auto_gpu = run_cycles(ini, "cuda", n, cycles, NULL, 0);
    same(&cpu, &auto_gpu, "auto layout");
    run_free(&auto_gpu);
    run_free(&cpu);
}

START_TEST(n3000_layouts)
{
    layouts_for(3000, 6, 22);
}
END_TEST

START_TEST(n1000_layouts)
{
    layouts_for(1000, 10, 23);
}
END_TEST

START_TEST(tiny_systems)
{
    /* fewer particles than a chunk, and exactly one chunk */
    static const int ns[] = {4, 32, 36};
    for (size_t k = 0; k < 3; ++k) {
        char ini[2048];
        snprintf(ini, sizeof ini,
                 "[run]\nseed = 24\nsweeps = 0\n\n[system]\nparticles = %d\n\n[potential]\nplugin = coulomb_hs\n"
                 "valences = 1, -1\ndiameters = 4\ncell_radius = 25\nbjerrum = 7.117\n\n"
                 "[sampler]\nplugin = brush\nstep = 10\n",
                 ns[k]);
        run cpu = run_cycles(ini, "cpu", ns[k], 50, NULL, 0);
        run gpu = run_cycles(ini, "cuda", ns[k], 50, NULL, 0);
        same(&cpu, &gpu, "tiny");
        run_free(&cpu);
        run_free(&gpu);
    }
}
END_TEST

START_TEST(bonded_chain)
{
    /* lj_fene: bonds inside a chunk, across chunks and across groups */
    static const char *ini = "[run]\nseed = 25\nsweeps = 0\n\n[system]\nparticles = 150\n\n[potential]\nplugin = lj_fene\n\n"
                             "[sampler]\nplugin = brush\nstep = 0.08\n";
    static const char *const lay[][3] = {
        {"sampler.eta=1", "sampler.block=64", "sampler.per_thread=1"},
        {"sampler.eta=2", "sampler.block=64", "sampler.per_thread=1"},
        {"sampler.eta=1", "sampler.block=32", "sampler.per_thread=2"},
        {"sampler.eta=32", "sampler.block=1024", "sampler.per_thread=1"},
    };
    run cpu = run_cycles(ini, "cpu", 150, 30, NULL, 0);
    ck_assert_int_gt(cpu.acc[29], 0);
    for (size_t k = 0; k < 4; ++k) {
        run gpu = run_cycles(ini, "cuda", 150, 30, lay[k], 3);
        same(&cpu, &gpu, lay[k][0]);
        run_free(&gpu);
    }
    run_free(&cpu);
}
END_TEST

/* Several cycles in one launch (sampler.cycles_per_launch) are the same
 * chain, bit for bit, as one launch per cycle: 12 cycles advanced 12 at a
 * time in launches of 5, 5 and 2 (so the launches differ in length), and 6
 * at a time in launches of 6, against 12 single launches; and the CPU's. */
START_TEST(chained_cycles)
{
    char ini[2048];
    ini_paper(ini, sizeof ini, 27, 3000);
    static const char *const lay[2][4] = {
        {"sampler.cycles_per_launch=1", "sampler.eta=0", "sampler.block=0", "sampler.per_thread=0"},
        {"sampler.cycles_per_launch=1", "sampler.eta=1", "sampler.block=64", "sampler.per_thread=2"}};
    run cpu = run_batches(ini, "cpu", 3000, 12, 12, NULL, 0);
    for (int l = 0; l < 2; ++l) {
        const char *sets[4] = {lay[l][0], lay[l][1], lay[l][2], lay[l][3]};
        run one = run_batches(ini, "cuda", 3000, 12, 12, sets, 4);
        sets[0] = "sampler.cycles_per_launch=5";
        run five = run_batches(ini, "cuda", 3000, 12, 12, sets, 4);
        sets[0] = "sampler.cycles_per_launch=6";
        run six = run_batches(ini, "cuda", 3000, 12, 6, sets, 4);
        ck_assert_int_eq(six.acc[0] + six.acc[1], one.acc[0]);
        ck_assert_int_eq(five.acc[0], one.acc[0]);
        ck_assert_msg(memcmp(one.pos, five.pos, 3000 * sizeof *one.pos) == 0, "layout %d: launches of 5 differ", l);
        ck_assert_msg(memcmp(one.pos, six.pos, 3000 * sizeof *one.pos) == 0, "layout %d: launches of 6 differ", l);
        ck_assert_msg(one.energy == five.energy && one.energy == six.energy, "layout %d: energies %.17g %.17g %.17g", l,
                      one.energy, five.energy, six.energy);
        same(&cpu, &five, l ? "chained, eta 1 block 64 per_thread 2" : "chained, auto layout");
        run_free(&one);
        run_free(&five);
        run_free(&six);
    }
    run_free(&cpu);
}
END_TEST

/* ---- shared launches (brush_batch.h) --------------------------------------- */

/* One system of a group: advanced by its own thread `cycles` cycles, `batch`
 * at a time (acceptances per advance), then it leaves the group. */
typedef struct member {
    metro_sim *sim;
    int n, cycles, batch;
    long long acc[64];
    int rc;
    char msg[512];
} member;

static void *member_run(void *arg)
{
    member *m = arg;
    metro_error err = {0};
    long long prev = 0;
    for (int done = 0, i = 0; done < m->cycles && !m->rc; ++i) {
        const int k = m->cycles - done < m->batch ? m->cycles - done : m->batch;
        m->rc = metro_sim_advance(m->sim, k, &err);
        const metro_state *st = m->rc ? NULL : metro_sim_state(m->sim, &err);
        if (!st) {
            m->rc = 1;
            break;
        }
        m->acc[i] = st->accepted[0] - prev;
        prev = st->accepted[0];
        done += k;
    }
    if (m->rc) snprintf(m->msg, sizeof m->msg, "%.500s", err.msg);
    metro_sim_ungroup(m->sim);
    return NULL;
}

/* Systems of ini_fn(seed, n) grouped (metro_sims_group, one thread each)
 * end, bit for bit, where the same systems run one by one end: positions,
 * running energy, every advance's acceptances.  Systems of another size
 * in the same call run alone, still equal. */
static void batched_vs_separate(const char *what, void (*ini_fn)(char *, size_t, int, int), int k, const int *n,
                                const int *cycles, const int *batch, const char *const *sets, int nsets)
{
    member *g = calloc((size_t)k, sizeof *g), *a = calloc((size_t)k, sizeof *a);
    metro_sim **sims = calloc((size_t)k, sizeof *sims);
    pthread_t *th = calloc((size_t)k, sizeof *th);
    char ini[2048], (*dirs)[4096] = calloc((size_t)k, sizeof *dirs);
    for (int i = 0; i < k; ++i) {
        ini_fn(ini, sizeof ini, 41 + i, n[i]);
        g[i] = (member){metro_test_sim(ini, "cuda", sets, nsets), n[i], cycles[i], batch[i], {0}, 0, {0}};
        snprintf(dirs[i], sizeof dirs[i], "%s/log.txt", metro_test_run_dir());
        a[i] = (member){metro_test_sim(ini, "cuda", sets, nsets), n[i], cycles[i], batch[i], {0}, 0, {0}};
        sims[i] = g[i].sim;
    }
    metro_error err = {0};
    ck_assert_msg(metro_sims_group(sims, k, &err) == METRO_OK, "%s", err.msg);
    /* a system shares its launches exactly when another has its size (the
     * core offered them, the sampler took them: its log says so) */
    for (int i = 0; i < k; ++i) {
        int same_n = 0;
        for (int j = 0; j < k; ++j) same_n += j != i && n[j] == n[i];
        char *log = metro_test_slurp(dirs[i]);
        ck_assert_msg(log != NULL, "%s: no log", dirs[i]);
        ck_assert_msg(!strstr(log, "shares its launches") == !same_n, "%s: system %d %s share its launches", what, i,
                      same_n ? "does not" : "does");
        free(log);
    }
    free(dirs);
    for (int i = 0; i < k; ++i) ck_assert_int_eq(pthread_create(&th[i], NULL, member_run, &g[i]), 0);
    for (int i = 0; i < k; ++i) pthread_join(th[i], NULL);
    for (int i = 0; i < k; ++i) {
        member_run(&a[i]); /* alone, one after the other */
        ck_assert_msg(!g[i].rc && !a[i].rc, "%s: system %d: %s%s", what, i, g[i].msg, a[i].msg);
        for (int c = 0; c * batch[i] < cycles[i]; ++c)
            ck_assert_msg(g[i].acc[c] == a[i].acc[c], "%s: system %d, advance %d: %lld accepted grouped, %lld alone",
                          what, i, c, g[i].acc[c], a[i].acc[c]);
        const metro_state *sg = metro_sim_state(g[i].sim, &err), *sa = metro_sim_state(a[i].sim, &err);
        ck_assert(sg && sa);
        ck_assert_msg(memcmp(sg->pos, sa->pos, (size_t)n[i] * sizeof *sg->pos) == 0, "%s: system %d: positions differ",
                      what, i);
        ck_assert_msg(sg->energy[0] == sa->energy[0] && sg->accepted[0] == sa->accepted[0] &&
                          sg->attempted[0] == sa->attempted[0],
                      "%s: system %d: energy %.17g grouped, %.17g alone", what, i, sg->energy[0], sa->energy[0]);
        ck_assert_int_gt(sg->accepted[0], 0);
        metro_sim_destroy(g[i].sim);
        metro_sim_destroy(a[i].sim);
    }
    free(g);
    free(a);
    free(sims);
    free(th);
}

static void ini_paper_fn(char *buf, size_t len, int seed, int n)
{
    ini_paper(buf, len, seed, n);
}

/* Five systems of 3000 ions share launches of up to 4 cycles while
 * advancing by 1, 5, 3 (and leaving after 7 cycles), 12 and 2 cycles at a
 * time, so a launch holds systems with different cycle counts and members
 * leave while others go on; a sixth of 1000 ions runs alone. */
START_TEST(batched_equals_separate)
{
    static const int n[6] = {3000, 3000, 3000, 3000, 3000, 1000}, cycles[6] = {12, 12, 7, 12, 12, 12},
                     batch[6] = {1, 5, 3, 12, 2, 4};
    const char *sets[1] = {"sampler.cycles_per_launch=4"};
    batched_vs_separate("auto layout", ini_paper_fn, 6, n, cycles, batch, sets, 1);
}
END_TEST

/* The p2 kernel and the default one cycle per launch (N = 1000, 16 groups
 * of 64), eight systems. */
START_TEST(batched_two_per_thread)
{
    static const int n[8] = {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}, cycles[8] = {10, 10, 10, 10, 10, 10, 10, 6},
                     batch[8] = {10, 1, 2, 5, 10, 3, 10, 6};
    const char *sets[3] = {"sampler.eta=1", "sampler.block=32", "sampler.per_thread=2"};
    batched_vs_separate("eta 1 block 32 per_thread 2", ini_paper_fn, 8, n, cycles, batch, sets, 3);
}
END_TEST

static void ini_chain_fn(char *buf, size_t len, int seed, int n)
{
    snprintf(buf, len, "[run]\nseed = %d\nsweeps = 0\n\n[system]\nparticles = %d\n\n[potential]\nplugin = lj_fene\n\n"
                       "[sampler]\nplugin = brush\nstep = 0.08\n", seed, n);
}

/* A bonded chain (lj_fene): the bond terms across chunks and groups. */
START_TEST(batched_chain)
{
    static const int n[3] = {150, 150, 150}, cycles[3] = {20, 20, 20}, batch[3] = {20, 7, 1};
    const char *sets[3] = {"sampler.eta=2", "sampler.block=64", "sampler.per_thread=1"};
    batched_vs_separate("lj_fene chain", ini_chain_fn, 3, n, cycles, batch, sets, 3);
}
END_TEST

START_TEST(two_ions_cuda)
{
    char ini[2048];
    two_ions_ini(ini, sizeof ini, 31, 4.0, 12.0, "plugin = brush\nstep = 12");
    const double exact = two_ions_exact(7.117, -1.0, 4.0, 12.0);
    two_ions_result r = two_ions_measure(ini, "cuda", 2000, 40, 2500);
    printf("brush on CUDA: <bU> = %.5f +- %.5f (exact %.5f)\n", r.mean, r.err, exact);
    ck_assert_double_lt(r.err, 0.015);
    ck_assert_msg(fabs(r.mean - exact) < 4 * r.err, "<bU> = %.5f +- %.5f, exact %.5f", r.mean, r.err, exact);
}
END_TEST

START_TEST(small_case)
{
    const char *en = getenv("METRO_BRUSH_N"), *el = getenv("METRO_BRUSH_LAYOUT");
    const int n = en && atoi(en) > 0 ? atoi(en) : 300;
    char ini[2048];
    ini_paper(ini, sizeof ini, 26, n);
    /* three cycles in one advance: one launch of three chained cycles */
    run cpu = run_batches(ini, "cpu", n, 3, 3, NULL, 0);
    static char sets[3][64];
    const char *lay[2][3] = {{"sampler.eta=4", "sampler.block=128", "sampler.per_thread=1"},
                             {"sampler.eta=1", "sampler.block=64", "sampler.per_thread=2"}};
    int nlay = 2;
    if (el && *el) {
        int e = 0, b = 0, p = 0;
        ck_assert_msg(sscanf(el, "%d,%d,%d", &e, &b, &p) == 3, "METRO_BRUSH_LAYOUT: want eta,block,per_thread");
        snprintf(sets[0], sizeof sets[0], "sampler.eta=%d", e);
        snprintf(sets[1], sizeof sets[1], "sampler.block=%d", b);
        snprintf(sets[2], sizeof sets[2], "sampler.per_thread=%d", p);
        lay[0][0] = sets[0];
        lay[0][1] = sets[1];
        lay[0][2] = sets[2];
        nlay = 1;
    }
    for (int k = 0; k < nlay; ++k) {
        run gpu = run_batches(ini, "cuda", n, 3, 3, lay[k], 3);
        char what[256];
        snprintf(what, sizeof what, "small N = %d, %s %s %s", n, lay[k][0], lay[k][1], lay[k][2]);
        same(&cpu, &gpu, what);
        run_free(&gpu);
    }
    run_free(&cpu);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    const char *small = getenv("METRO_BRUSH_SMALL");
    if (small && *small && strcmp(small, "0") != 0) {
        Suite *s = suite_create("brush_gpu_small");
        TCase *tc = tcase_create("small");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, small_case);
        suite_add_tcase(s, tc);
        return metro_test_main(s);
    }
    Suite *s = suite_create("brush_gpu");
    TCase *tc = tcase_create("same_chain");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, n4096_twenty_cycles);
    tcase_add_test(tc, n3000_layouts);
    tcase_add_test(tc, n1000_layouts);
    tcase_add_test(tc, tiny_systems);
    tcase_add_test(tc, bonded_chain);
    tcase_add_test(tc, chained_cycles);
    suite_add_tcase(s, tc);
    tc = tcase_create("shared_launches");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, batched_equals_separate);
    tcase_add_test(tc, batched_two_per_thread);
    tcase_add_test(tc, batched_chain);
    suite_add_tcase(s, tc);
    tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_ions_cuda);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
