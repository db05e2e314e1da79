/* test_pair_correlation — g(r) of an ideal gas, the observable's files,
 * save/restore and config checks.
 *
 *  - histograms: uniform independent configurations in a ball go through
 *    the CPU histogram, the blocks and the normalisation (pc_accum.c); every
 *    g_ab(r) of the interior must be 1 within its error bars, whose size is
 *    also checked (the canonical N_b - 1 and the exact shell volumes are
 *    what make that true); also for a gas denser towards the wall, where
 *    the one-body reference is what keeps g = 1.
 *  - the observable's table through a small fake host: the same ideal gas
 *    read back from g.csv; save/restore reproduces an uninterrupted run
 *    file for file; bad configurations are refused with the key named.
 *  - the whole core: coulomb_hs with every valence and diameter 0 (an ideal
 *    gas) sampled by brush on the CPU backend; g = 1 within errors.
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "pc_accum.h"

/* ---- configurations ------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static double uni(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}

/* n independent points in the ball of radius R with density proportional
 * to 1 + alpha (t/R)^2 at radius t; the first n0 of species 0, the rest of
 * species 1. */
static void ideal(metro_float4 *pos, int n, int n0, double R, double alpha)
{
    for (int i = 0; i < n; i++) {
        double x, y, z, t2;
        do {
            x = (2 * uni() - 1) * R;
            y = (2 * uni() - 1) * R;
            z = (2 * uni() - 1) * R;
            t2 = (x * x + y * y + z * z) / (R * R);
        } while (t2 > 1.0 || uni() * (1.0 + alpha) > 1.0 + alpha * t2);
        pos[i] = metro_f4((float)x, (float)y, (float)z, i < n0 ? 0.0f : 1.0f);
    }
}

#define N 200
#define N0 120
#define RCELL 10.0
#define MARGIN 3.0
#define BINS 10

/* g of every pair and bin within 4 error bars of 1, the χ² per value in a
 * sane range; returns the largest error of the outermost bins. */
static double check_ones(const double *g, const double *err, int n, int bins)
{
    double chi2 = 0.0, outer = 0.0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(isfinite(g[i]) && err[i] > 0, "value %d: g = %g +- %g", i, g[i], err[i]);
        ck_assert_msg(fabs(g[i] - 1.0) < 4.0 * err[i], "pair %d bin %d: g = %.5f +- %.5f", i / bins,
                      i % bins, g[i], err[i]);
        chi2 += (g[i] - 1.0) * (g[i] - 1.0) / (err[i] * err[i]);
        if (i % bins == bins - 1 && err[i] > outer) outer = err[i];
    }
    ck_assert_msg(chi2 / n > 0.4 && chi2 / n < 1.8, "chi2 per value %g", chi2 / n);
    return outer;
}

/* M ideal-gas configurations (density profile 1 + alpha (t/R)^2) through
 * the CPU histogram, the blocks and the estimates; g and its errors of
 * every pair and bin into g[], err[]; W = NULL: the homogeneous reference. */
static void ideal_run(double alpha, int use_profile, double *g, double *err, metro_pc_profile *fullp)
{
    metro_pc_system sys;
    memset(&sys, 0, sizeof sys);
    sys.species = 2;
    sys.bins = BINS;
    sys.dr = MARGIN / BINS;
    sys.count[0] = N0;
    sys.count[1] = N - N0;
    sys.r_int = RCELL - MARGIN;
    sys.r_cell = RCELL;
    metro_pc_accum acc;
    ck_assert_int_eq(metro_pc_accum_init(&acc, 2, BINS, 20), 0);
    double *m = malloc(acc.rec * sizeof(double));
    metro_float4 pos[N];
    int central[N];
    pc_launch L;
    memset(&L, 0, sizeof L);
    L.n = N;
    L.species = 2;
    L.bins = BINS;
    L.rmax2 = (float)(MARGIN * MARGIN);
    L.inv_dr = (float)(1.0 / sys.dr);
    const int M = 20000;
    for (int c = 0; c < M; c++) {
        ideal(pos, N, N0, RCELL, alpha);
        memset(m, 0, acc.rec * sizeof(double));
        L.n_central = metro_pc_select(pos, N, &sys, central, m);
        m[METRO_PC_CONF] = 1;
        metro_pc_histogram_cpu(pos, central, &L, m + METRO_PC_HIST(2), NULL);
        metro_pc_accum_add(&acc, m);
    }
    ck_assert_int_eq(metro_pc_accum_count(&acc), M);
    double *blk = malloc(2 * 20 * acc.rec * sizeof(double)), *tot = calloc(acc.rec, sizeof(double));
    int B = metro_pc_accum_blocks(&acc, blk);
    ck_assert(B >= 20 && B <= 40);
    for (int j = 0; j < B; j++)
        for (size_t i = 0; i < acc.rec; i++) tot[i] += blk[j * acc.rec + i];
    double *W = use_profile ? metro_pc_weights(&sys, tot) : NULL;
    ck_assert(!use_profile || W);
    metro_pc_profile full, loo[40];
    ck_assert_int_eq(metro_pc_profile_alloc(&full, 2, BINS), 0);
    ck_assert_int_eq(metro_pc_profile_from(&full, &sys, tot, W), 0);
    for (int j = 0; j < B; j++) {
        for (size_t i = 0; i < acc.rec; i++) m[i] = tot[i] - blk[j * acc.rec + i];
        metro_pc_profile_alloc(&loo[j], 2, BINS);
        metro_pc_profile_from(&loo[j], &sys, m, W);
    }
    double tmp[40];
    for (int i = 0; i < 4 * BINS; i++) {
        g[i] = full.g[i];
        for (int j = 0; j < B; j++) tmp[j] = loo[j].g[i];
        err[i] = metro_pc_jackknife(tmp, B, 1);
    }
    *fullp = full;
    for (int j = 0; j < B; j++) metro_pc_profile_free(&loo[j]);
    metro_pc_accum_free(&acc);
    free(W);
    free(m);
    free(blk);
    free(tot);
}

START_TEST(ideal_gas_histograms)
{
    double g[4 * BINS], err[4 * BINS];
    metro_pc_profile full;
    ideal_run(0.0, 1, g, err, &full);
    /* outer bins: about 1e6 pairs, so the test sees the N_b - 1 of g_aa
     * (1/120 and 1/80) many times over */
    ck_assert_double_lt(check_ones(g, err, 4 * BINS, BINS), 0.003);
    /* the interior density is the cell's: N_b / V_cell */
    ck_assert_double_eq_tol(full.n[0], N0 / (4.0 / 3.0 * M_PI * pow(RCELL, 3)), 0.01 * full.n[0]);
    /* no charges: no charge density */
    for (int k = 0; k < BINS; k++) ck_assert_double_eq(full.rho[k], 0.0);
    metro_pc_profile_free(&full);
}
END_TEST

/* An ideal gas whose density grows towards the wall (1 + 3 (t/R)^2): the
 * one-body reference keeps g = 1; a homogeneous one does not (which is
 * what a wall layer does to the far field). */
START_TEST(inhomogeneous_ideal_gas)
{
    double g[4 * BINS], err[4 * BINS];
    metro_pc_profile full;
    rng = 2; /* any seed: over six, the largest of 40 pulls was 1.9-2.8 */
    ideal_run(3.0, 1, g, err, &full);
    ck_assert_double_lt(check_ones(g, err, 4 * BINS, BINS), 0.004);
    metro_pc_profile_free(&full);
    ideal_run(3.0, 0, g, err, &full);
    int off = 0;
    for (int i = 0; i < 4 * BINS; i++) off += fabs(g[i] - 1.0) > 4.0 * err[i];
    ck_assert_msg(off >= 8, "the homogeneous reference should fail: %d bins off", off);
    metro_pc_profile_free(&full);
}
END_TEST

/* Blocks stay equal in length: merged pairwise when full. */
START_TEST(blocks_merge)
{
    metro_pc_accum acc;
    ck_assert_int_eq(metro_pc_accum_init(&acc, 1, 1, 4), 0);
    double *m = malloc(acc.rec * sizeof(double)), *out = malloc(8 * acc.rec * sizeof(double));
    for (int i = 1; i <= 21; i++) {
        memset(m, 0, acc.rec * sizeof(double));
        m[METRO_PC_CONF] = 1;
        m[METRO_PC_HIST(1)] = i; /* the measurement's number */
        metro_pc_accum_add(&acc, m);
    }
    /* 21 = 8 full blocks of 2 (merged once at 9), then blocks of 2: after
     * 16 measurements 8 full blocks merge into 4 of 4, then 5 more: blocks
     * 4,4,4,4,4,1 */
    ck_assert_int_eq(acc.per, 4);
    ck_assert_int_eq(acc.used, 6);
    ck_assert_int_eq(acc.fill, 1);
    int B = metro_pc_accum_blocks(&acc, out);
    ck_assert_int_eq(B, 5); /* the short last block folded in */
    ck_assert_double_eq(out[0 * acc.rec + METRO_PC_HIST(1)], 1 + 2 + 3 + 4);
    ck_assert_double_eq(out[4 * acc.rec + METRO_PC_CONF], 5);
    ck_assert_double_eq(out[4 * acc.rec + METRO_PC_HIST(1)], 17 + 18 + 19 + 20 + 21);
    metro_pc_accum_free(&acc);
    free(m);
    free(out);
}
END_TEST

/* ---- the observable through a fake host ---------------------------------- */

extern const metro_plugin *metro_plugin_entry(void);

struct metro_params {
    const char *kv[32][2];
    int n;
};
struct metro_ctx {
    char msg[1024];
    char log[8192];              /* every warning logged, one a line */
    char dir[512];
    unsigned char *saved;
    size_t nsaved;
};

static const char *text(const metro_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->kv[i][0], name)) return p->kv[i][1];
    for (const metro_param_decl *d = metro_plugin_entry()->params; d->name; d++)
        if (!strcmp(d->name, name)) return d->default_value;
    ck_abort_msg("undeclared parameter %s", name);
    return NULL;
}
static long p_int(const metro_params *p, const char *n) { return atol(text(p, n)); }
static double p_real(const metro_params *p, const char *n) { return atof(text(p, n)); }
static int p_bool(const metro_params *p, const char *n) { return !strcmp(text(p, n), "true"); }
static const char *p_string(const metro_params *p, const char *n) { return text(p, n); }
static int h_fail(metro_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return -1;
}
static void h_log(metro_ctx *c, metro_log_level l, const char *fmt, ...)
{
    if (l != METRO_LOG_WARN) return;
    size_t n = strlen(c->log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->log + n, sizeof c->log - n, fmt, ap);
    va_end(ap);
    n = strlen(c->log);
    if (n + 1 < sizeof c->log) strcpy(c->log + n, "\n");
}
static FILE *h_open(metro_ctx *c, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    return fopen(path, "w");
}
static const char *h_dir(metro_ctx *c) { return c->dir; }
static int h_save(metro_ctx *c, const void *d, size_t n)
{
    c->saved = realloc(c->saved, c->nsaved + n);
    memcpy(c->saved + c->nsaved, d, n);
    c->nsaved += n;
    return 0;
}
/* The facts the potential would publish: its cell and its Bjerrum length
 * (0: none published). */
static double fact_cell_radius, fact_bjerrum;

static int h_fact(metro_ctx *c, const char *name, double *v)
{
    (void)c;
    double x = !strcmp(name, "cell_radius") ? fact_cell_radius : !strcmp(name, "bjerrum") ? fact_bjerrum : 0;
    if (x == 0) return 0;
    *v = x;
    return 1;
}

static const metro_host_api host = {.version = METRO_ABI_VERSION, .fail = h_fail, .log = h_log,
                                    .param_int = p_int, .param_real = p_real, .param_bool = p_bool,
                                    .param_string = p_string, .open_output = h_open,
                                    .run_dir = h_dir, .save_bytes = h_save, .fact = h_fact};

static metro_setup ideal_setup(void)
{
    metro_setup s;
    memset(&s, 0, sizeof s);
    s.particles = N;
    s.replicas = 1;
    s.backend = METRO_BACKEND_CPU;
    s.species = 2;
    s.species_table[0] = (metro_species){"a", 0.0, 0.0, N0};
    s.species_table[1] = (metro_species){"b", 0.0, 0.0, N - N0};
    fact_cell_radius = RCELL;
    fact_bjerrum = 0;
    return s;
}

static void new_ctx(metro_ctx *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/metro-pc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(c->dir));
}

/* A state holding one configuration (replica 0, β = 1). */
typedef struct one_state {
    metro_state st;
    metro_float4 pos[N];
    double beta, energy;
    int slot;
} one_state;

static void one_state_init(one_state *s)
{
    memset(s, 0, sizeof *s);
    s->st.backend = METRO_BACKEND_CPU;
    s->st.particles = N;
    s->st.replicas = 1;
    s->st.pos = s->pos;
    s->st.beta = &s->beta;
    s->st.energy = &s->energy;
    s->st.slot_replica = &s->slot;
    s->beta = 1.0;
    s->st.measuring = 1;
}

static const metro_observable_api *api(void)
{
    const metro_plugin *d = metro_plugin_entry();
    ck_assert_int_eq(d->kind, METRO_KIND_OBSERVABLE);
    ck_assert_str_eq(d->name, "pair_correlation");
    return d->api;
}

static double col(const char *dir, const char *file, int row, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return metro_test_csv(path, row, name);
}

/* The observable (wall margin 3, 10 bins) over m ideal-gas configurations
 * of n0 ions of species a and N - n0 of b, from seed; its files in c->dir */
static void measure_with(metro_ctx *c, const metro_params *pp, const metro_setup *ss, int n0, int m,
                         uint64_t seed);
static void measure_ideal(metro_ctx *c, int n0, int m, uint64_t seed)
{
    metro_params p = {{{"wall_margin", "3"}, {"bins", "10"}, {"plots", "false"}}, 3};
    metro_setup s = ideal_setup();
    measure_with(c, &p, &s, n0, m, seed);
}

/* The same with the parameters p and the setup s. */
static void measure_with(metro_ctx *c, const metro_params *pp, const metro_setup *ss, int n0, int m,
                         uint64_t seed)
{
    const metro_observable_api *a = api();
    metro_params p = *pp;
    metro_setup s = *ss;
    new_ctx(c);
    void *self = NULL;
    ck_assert_msg(a->create(&host, c, &p, &s, &self) == 0, "%s", c->msg);
    one_state st;
    one_state_init(&st);
    rng = seed;
    for (int k = 0; k < m; k++) {
        ideal(st.pos, N, n0, RCELL, 0.0);
        ck_assert_int_eq(a->measure(self, &st.st), 0);
    }
    ck_assert_int_eq(a->finish(self, &st.st), 0);
    a->destroy(self);
}

START_TEST(observable_ideal_gas_files)
{
    metro_ctx c;
    measure_ideal(&c, N0, 20000, 12345);
    static const char *pairs[] = {"g_a_a", "g_a_b", "g_b_a", "g_b_b"};
    double g[4 * BINS], e[4 * BINS];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < BINS; k++) {
            char ename[32];
            snprintf(ename, sizeof ename, "%s_err", pairs[i]);
            g[i * BINS + k] = col(c.dir, "g.csv", k, pairs[i]);
            e[i * BINS + k] = col(c.dir, "g.csv", k, ename);
        }
    ck_assert_double_lt(check_ones(g, e, 4 * BINS, BINS), 0.003);
    ck_assert_double_eq_tol(col(c.dir, "g.csv", 0, "r"), 0.15, 1e-9);
    /* 20000 measurements in 20-40 blocks: nothing to say about the errors */
    ck_assert_msg(!strstr(c.log, "too short"), "%s", c.log);
    /* the other files exist with their headers */
    char path[1024];
    snprintf(path, sizeof path, "%s/electrostatics.csv", c.dir);
    char *es = metro_test_slurp(path);
    ck_assert_ptr_nonnull(es);
    ck_assert(strncmp(es, "quantity,value,error,paper_value", 32) == 0);
    free(es);
    ck_assert(isfinite(col(c.dir, "rho_q.csv", 3, "rho_a")));
    snprintf(path, sizeof path, "%s/pair_correlation.gp", c.dir);
    ck_assert(access(path, R_OK) == 0);
}
END_TEST

/* A pair with no data (no central ion of species b ever measured) is
 * written "nan", never "-nan" (what -log and 0/0 gave before) */
START_TEST(no_data_is_nan)
{
    metro_ctx c;
    measure_ideal(&c, N, 200, 777); /* every ion of species a */
    ck_assert(isnan(col(c.dir, "g.csv", 3, "g_b_a")));
    ck_assert(isfinite(col(c.dir, "g.csv", 3, "g_a_a")));
    static const char *files[] = {"g.csv", "rho_q.csv", "fits.csv", "electrostatics.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", c.dir, files[i]);
        char *text = metro_test_slurp(path);
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(!strstr(text, "-nan"), "%s holds -nan", files[i]);
        if (i == 0) ck_assert_msg(strstr(text, ",nan"), "g.csv: no nan for the pair without data");
        free(text);
    }
    /* said in the log, and its all-nan curves kept out of g.png (gnuplot
     * fails the whole plot on a curve without a point) */
    ck_assert_msg(strstr(c.log, "no b ion was ever a central ion"), "log: %s", c.log);
    char path[1024];
    snprintf(path, sizeof path, "%s/pair_correlation.gp", c.dir);
    char *gp = metro_test_slurp(path);
    ck_assert_ptr_nonnull(gp);
    ck_assert_msg(strstr(gp, "'g_a_b'") && !strstr(gp, "'g_b_a'") && !strstr(gp, "'g_b_b'"), "%s", gp);
    free(gp);
}
END_TEST

/* No ion ever central (an interior of radius 0.01 in a cell of 10): every
 * estimate is 0/0.  It wrote all-nan files (kappa_inv inf) and exited 0,
 * gnuplot failing on them the only sign; now a warning says so and nothing
 * is written. */
START_TEST(no_central_ion_is_said)
{
    metro_ctx c;
    metro_params p = {{{"wall_margin", "9.99"}, {"bins", "10"}, {"plots", "false"}}, 3};
    metro_setup s = ideal_setup();
    measure_with(&c, &p, &s, N0, 50, 4242);
    ck_assert_msg(strstr(c.log, "no ion was ever a central ion") && strstr(c.log, "nothing written"), "log: %s",
                  c.log);
    char path[1024];
    snprintf(path, sizeof path, "%s/g.csv", c.dir);
    ck_assert_msg(access(path, F_OK) != 0, "g.csv written without a central ion");
    snprintf(path, sizeof path, "%s/electrostatics.csv", c.dir);
    ck_assert_msg(access(path, F_OK) != 0, "electrostatics.csv written without a central ion");
}
END_TEST

/* A run of a few measurements got jackknife errors over blocks of one
 * measurement without comment, while the energy observable warns that its
 * series is too short for its error bar: the same warning here, below the
 * energy's floors (64 samples, 8 jackknife bins), and not above them. */
START_TEST(short_run_is_said)
{
    static const int m[] = {3, 20, 50};
    for (int i = 0; i < 3; i++) {
        metro_ctx c;
        measure_ideal(&c, N0, m[i], 99 + i);
        ck_assert_msg(strstr(c.log, "too short for its error bars"), "%d measurements, log: %s", m[i], c.log);
    }
    metro_ctx c;
    measure_ideal(&c, N0, 400, 17);
    ck_assert_msg(!strstr(c.log, "too short"), "400 measurements, log: %s", c.log);
}
END_TEST

/* The sum rules are sums up to r_max: with r_max a few Debye lengths a
 * screened tail beyond it is missing from them (configs/
 * electrolyte_dh_1to1.ini: stillinger_lovett 0.43 against 1, r_max 3.2
 * Debye lengths, without a word).  Said when the tail is more than 2 %. */
START_TEST(truncated_sum_rules_are_said)
{
    metro_params p = {{{"wall_margin", "3"}, {"bins", "10"}, {"plots", "false"}}, 3};
    metro_setup s = ideal_setup();
    s.species_table[0].charge = 1.0;
    s.species_table[1].charge = -1.0;
    /* 1/kappa = 1.29 at bjerrum 1 (r_max 3 = 2.3 of them), 0.29 at 20 (10.4) */
    const double lb[] = {1.0, 20.0};
    for (int i = 0; i < 2; i++) {
        metro_ctx c;
        fact_bjerrum = lb[i];
        measure_with(&c, &p, &s, N0, 400, 5 + i);
        const char *at = strstr(c.log, "the sum rules are integrated only up to it");
        ck_assert_msg(i == 0 ? at != NULL : at == NULL, "bjerrum %g, log: %s", lb[i], c.log);
    }
    fact_bjerrum = 0;
}
END_TEST

/* Save after K measurements, restore into a fresh instance, go on: the
 * files equal those of a run that was never interrupted. */
START_TEST(save_restore_equals_uninterrupted)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"wall_margin", "3"}, {"bins", "10"}, {"plots", "false"}, {"blocks", "4"}}, 4};
    metro_setup s = ideal_setup();
    metro_ctx c1, c2;
    new_ctx(&c1);
    new_ctx(&c2);
    void *x = NULL, *y = NULL;
    ck_assert_int_eq(a->create(&host, &c1, &p, &s, &x), 0);
    ck_assert_int_eq(a->create(&host, &c2, &p, &s, &y), 0);
    one_state st;
    one_state_init(&st);
    rng = 777;
    for (int m = 0; m < 37; m++) {
        ideal(st.pos, N, N0, RCELL, 0.0);
        a->measure(x, &st.st);
    }
    ck_assert_int_eq(a->save(x), 0);
    ck_assert_int_eq(a->restore(y, c1.saved, c1.nsaved), 0);
    for (int m = 0; m < 29; m++) {
        ideal(st.pos, N, N0, RCELL, 0.0);
        a->measure(x, &st.st);
        a->measure(y, &st.st);
    }
    ck_assert_int_eq(a->finish(x, &st.st), 0);
    ck_assert_int_eq(a->finish(y, &st.st), 0);
    static const char *files[] = {"g.csv", "rho_q.csv", "electrostatics.csv"};
    for (int i = 0; i < 3; i++) {
        char p1[1024], p2[1024];
        snprintf(p1, sizeof p1, "%s/%s", c1.dir, files[i]);
        snprintf(p2, sizeof p2, "%s/%s", c2.dir, files[i]);
        char *t1 = metro_test_slurp(p1), *t2 = metro_test_slurp(p2);
        ck_assert_ptr_nonnull(t1);
        ck_assert_ptr_nonnull(t2);
        ck_assert_msg(strcmp(t1, t2) == 0, "%s differs after restore", files[i]);
        free(t1);
        free(t2);
    }
    /* a checkpoint of another binning is refused */
    metro_params q = {{{"wall_margin", "3"}, {"bins", "12"}, {"blocks", "4"}}, 3};
    void *z = NULL;
    metro_ctx c3;
    new_ctx(&c3);
    ck_assert_int_eq(a->create(&host, &c3, &q, &s, &z), 0);
    ck_assert_int_ne(a->restore(z, c1.saved, c1.nsaved), 0);
    ck_assert_msg(strstr(c3.msg, "bins") != NULL, "%s", c3.msg);
    ck_assert_int_ne(a->restore(z, c1.saved, 10), 0);
    a->destroy(x);
    a->destroy(y);
    a->destroy(z);
    free(c1.saved);
}
END_TEST

static void refused(metro_params *p, metro_setup *s, const char *word)
{
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    ck_assert_int_ne(api()->create(&host, &c, p, s, &self), 0);
    ck_assert_msg(strstr(c.msg, word) != NULL, "message '%s' lacks '%s'", c.msg, word);
}

START_TEST(bad_configs)
{
    metro_setup s = ideal_setup();
    /* shells would cross the wall */
    metro_params p1 = {{{"wall_margin", "3"}, {"r_max", "3.5"}}, 2};
    refused(&p1, &s, "r_max");
    /* no charges: no default margin */
    metro_params p2 = {{{"bins", "10"}}, 1};
    refused(&p2, &s, "wall_margin");
    /* nothing left inside */
    metro_params p3 = {{{"wall_margin", "10"}}, 1};
    refused(&p3, &s, "interior");
    /* gpu on the CPU backend */
    metro_params p4 = {{{"wall_margin", "3"}, {"histogram", "gpu"}}, 2};
    refused(&p4, &s, "CUDA");
    /* no cell */
    metro_setup open = s;
    fact_cell_radius = 0;
    metro_params p5 = {{{"wall_margin", "3"}}, 1};
    refused(&p5, &open, "cell");
    fact_cell_radius = RCELL;
    /* hard cores: r_max at most margin - d/2 */
    metro_setup hs = s;
    hs.species_table[0].diameter = 1.0;
    metro_params p6 = {{{"wall_margin", "3"}, {"r_max", "2.9"}}, 2};
    refused(&p6, &hs, "r_max");
    /* a margin within half a diameter leaves no shell at all: said so (it
     * was "r_max: -0.5 is more than ... = -0.5") */
    hs.species_table[0].diameter = 9.0;
    metro_params p6b = {{{"wall_margin", "4"}}, 1};
    refused(&p6b, &hs, "wall_margin: 4 is not more than half the largest diameter, 4.5");
    /* with charges the default margin is ten Debye lengths, and r_max at
     * most that (minus d/2 = 0): 44 is allowed, 45 is not */
    metro_setup q = s;
    q.species_table[0].charge = 1.0;
    q.species_table[1].charge = -1.5;
    fact_bjerrum = 7.0;
    fact_cell_radius = 50.0;
    const double vol = 4.0 / 3.0 * M_PI * pow(50.0, 3);
    const double margin = 10.0 / sqrt(4 * M_PI * 7.0 * (N0 * 1.0 + (N - N0) * 2.25) / vol);
    ck_assert(margin > 44.0 && margin < 45.0);
    metro_params p7 = {{{"r_max", "44"}}, 1};
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    ck_assert_msg(api()->create(&host, &c, &p7, &q, &self) == 0, "%s", c.msg);
    api()->destroy(self);
    metro_params p8 = {{{"r_max", "45"}}, 1};
    refused(&p8, &q, "r_max");
    fact_bjerrum = 0;
    fact_cell_radius = RCELL;
    /* an interior narrower than an ion (radius 2): R 10, margin 8.5 leaves
     * 1.5, where hardly any configuration has a central ion (all-nan
     * results, exit 0); 8 leaves 2, allowed */
    metro_setup big = s;
    big.species_table[0].diameter = big.species_table[1].diameter = 4.0;
    metro_params p9 = {{{"wall_margin", "8.5"}}, 1};
    refused(&p9, &big, "wall_margin: 8.5 leaves an interior of radius 1.5");
    refused(&p9, &big, "at most R - d_max/2 = 8");
    metro_params p10 = {{{"wall_margin", "8"}}, 1};
    new_ctx(&c);
    self = NULL;
    ck_assert_msg(api()->create(&host, &c, &p10, &big, &self) == 0, "%s", c.msg);
    api()->destroy(self);
    /* fit windows (r_max 3 in bins of 0.3): reversed, beyond r_max, or
     * narrower than a fit's 8 bins were accepted and reported at the end
     * as "too few bins with signal" */
    metro_params f1 = {{{"wall_margin", "3"}, {"bins", "10"}, {"fit_rmin", "2"}, {"fit_rmax", "1"}}, 4};
    refused(&f1, &s, "fit_rmin: 2 is not below fit_rmax = 1");
    metro_params f2 = {{{"wall_margin", "3"}, {"bins", "10"}, {"fit_rmax", "3.5"}}, 3};
    refused(&f2, &s, "fit_rmax: 3.5 is beyond r_max = 3");
    metro_params f3 = {{{"wall_margin", "3"}, {"bins", "10"}, {"fit_rmin", "3"}}, 3};
    refused(&f3, &s, "fit_rmin: 3 is not below r_max = 3");
    metro_params f4 = {{{"wall_margin", "3"}, {"bins", "10"}, {"fit_rmin", "0.3"}, {"fit_rmax", "1.2"}}, 4};
    refused(&f4, &s, "fit_rmax: the fit window 0.3..1.2 holds 3 bin centres");
    /* 0.3..3 (to r_max itself) holds 9: allowed */
    metro_params f5 = {{{"wall_margin", "3"}, {"bins", "10"}, {"fit_rmin", "0.3"}, {"fit_rmax", "3"}}, 4};
    new_ctx(&c);
    self = NULL;
    ck_assert_msg(api()->create(&host, &c, &f5, &s, &self) == 0, "%s", c.msg);
    api()->destroy(self);
}
END_TEST

/* ---- the whole core --------------------------------------------------------- */

START_TEST(ideal_gas_through_the_core)
{
    const char *ini = "[run]\nseed = 5\nsweeps = 4000\nequilibration = 20\n"
                      "[system]\nparticles = 300\n"
                      "[potential]\nplugin = coulomb_hs\nvalences = 0, 0\ndiameters = 0\n"
                      "counts = 180, 120\nnames = a, b\ncell_radius = 10\n"
                      "[sampler]\nplugin = brush\n"
                      "[observable pair_correlation]\nplugin = pair_correlation\nevery = 2\n"
                      "wall_margin = 3\nbins = 6\nplots = false\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    static const char *pairs[] = {"g_a_a", "g_a_b", "g_b_a", "g_b_b"};
    double g[4 * 6], e[4 * 6];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 6; k++) {
            char ename[32];
            snprintf(ename, sizeof ename, "%s_err", pairs[i]);
            g[i * 6 + k] = col(metro_test_run_dir(), "g.csv", k, pairs[i]);
            e[i * 6 + k] = col(metro_test_run_dir(), "g.csv", k, ename);
        }
    ck_assert_double_lt(check_ones(g, e, 4 * 6, 6), 0.01);
}
END_TEST

/* The errors of rho where it is all one-body profile: inside the hard
 * core (r < d = 1, no pair counts), rho_a = -sum_b z_b <n_b>.  Over 8
 * seeds the scatter of rho in the first bin must match the errors the runs
 * report (their jackknife kept the whole run's profile for every replica,
 * and reported ~1/70 of the scatter). */
START_TEST(core_errors_match_the_scatter)
{
    enum { SEEDS = 8 };
    double v[SEEDS], e2 = 0, m = 0;
    for (int s = 0; s < SEEDS; s++) {
        char ini[1024];
        snprintf(ini, sizeof ini,
                 "[run]\nseed = %d\nsweeps = 5000\nequilibration = 100\n[system]\nparticles = 100\n"
                 "[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 1\ncell_radius = 10\n"
                 "bjerrum = 1e-6\n[sampler]\nplugin = brush\n"
                 "[observable pc]\nplugin = pair_correlation\nwall_margin = 4\ndr = 0.3\nr_max = 3.3\nplots = false\n",
                 s + 1);
        metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        metro_sim_destroy(sim);
        ck_assert_double_eq_tol(col(metro_test_run_dir(), "rho_q.csv", 0, "r"), 0.15, 1e-9);
        v[s] = col(metro_test_run_dir(), "rho_q.csv", 0, "rho_z+1");
        const double e = col(metro_test_run_dir(), "rho_q.csv", 0, "rho_z+1_err");
        ck_assert(isfinite(v[s]) && e > 0);
        e2 += e * e / SEEDS;
        m += v[s] / SEEDS;
    }
    double sd = 0;
    for (int s = 0; s < SEEDS; s++) sd += (v[s] - m) * (v[s] - m) / (SEEDS - 1);
    sd = sqrt(sd);
    /* the sample sd of 8 is within ~27% of the truth; 2.5x is beyond 3 sigma */
    const double ratio = sd / sqrt(e2);
    ck_assert_msg(ratio > 0.4 && ratio < 2.5, "scatter %.3g against reported errors %.3g (ratio %.3g)", sd, sqrt(e2),
                  ratio);
}
END_TEST

/* A species with no ions (counts 0) weighs nothing in the sum rules: its
 * rho has no central ion and is nan, which made stillinger_lovett and u_ex
 * nan for the whole system. */
START_TEST(empty_species_weighs_nothing)
{
    const char *ini = "[run]\nseed = 3\nsweeps = 1000\nequilibration = 50\n[system]\nparticles = 100\n"
                      "[potential]\nplugin = coulomb_hs\nvalences = 1, -1, 2\ncounts = 50, 50, 0\ndiameters = 1\n"
                      "cell_radius = 10\nbjerrum = 0.5\n[sampler]\nplugin = brush\n"
                      "[observable pc]\nplugin = pair_correlation\nwall_margin = 4\nplots = false\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    char path[1024];
    snprintf(path, sizeof path, "%s/electrostatics.csv", metro_test_run_dir());
    char *text = metro_test_slurp(path);
    ck_assert_ptr_nonnull(text);
    for (const char *const *q = (const char *const[]){"\nstillinger_lovett,", "\nu_ex,", "\nu_ex_z+1,", NULL}; *q; ++q) {
        const char *at = strstr(text, *q);
        ck_assert_msg(at && isfinite(atof(at + strlen(*q))), "%s not finite in %s", *q + 1, text);
    }
    ck_assert_msg(strstr(text, "\nu_ex_z+2,nan"), "the empty species' own u_ex: %s", text);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pair_correlation");
    TCase *tc = tcase_create("ideal_gas");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, ideal_gas_histograms);
    tcase_add_test(tc, inhomogeneous_ideal_gas);
    tcase_add_test(tc, blocks_merge);
    tcase_add_test(tc, observable_ideal_gas_files);
    tcase_add_test(tc, no_data_is_nan);
    tcase_add_test(tc, no_central_ion_is_said);
    tcase_add_test(tc, short_run_is_said);
    tcase_add_test(tc, truncated_sum_rules_are_said);
    tcase_add_test(tc, save_restore_equals_uninterrupted);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, ideal_gas_through_the_core);
    tcase_add_test(tc, core_errors_match_the_scatter);
    tcase_add_test(tc, empty_species_weighs_nothing);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
