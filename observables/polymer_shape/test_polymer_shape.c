/* test_polymer_shape — the shape of a known configuration by hand, the
 * multiple-histogram reweighting on samples of a known density of states,
 * and a parallel tempering run whose reweighted curve reproduces the
 * direct estimates at the simulated temperatures.  Through a fake host:
 * per-chain shapes of two chains beside free particles by hand (thermo.csv
 * and chains.csv), a lone chain measured as before (with or without a
 * topology, no chains.csv), save/restore with chains. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "polymer_shape.h"
#include "polymer_shape_wham.h"

START_TEST(shape_by_hand)
{
    /* corners of a staircase: mean (3/4, 1/2, 1/4); squared distances to it
     * 7/8, 3/8, 3/8, 7/8 -> r_gyr^2 = 5/8; end to end (1,1,1) -> 3 */
    metro_float4 p[4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}};
    double rg2, ree2;
    metro_polymer_shape(p, 4, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - 0.625) < 1e-15, "rg2 = %.17g", rg2);
    ck_assert_msg(fabs(ree2 - 3.0) < 1e-15, "ree2 = %.17g", ree2);
    /* far from the origin: the same (two passes, no cancellation) */
    for (int k = 0; k < 4; ++k) { p[k].x += 1024; p[k].y -= 512; p[k].z += 8; }
    metro_polymer_shape(p, 4, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - 0.625) < 1e-12 && fabs(ree2 - 3.0) < 1e-12, "shifted: %.17g %.17g", rg2, ree2);
    /* a random chain against r_gyr^2 = (1/2N^2) sum_ij |r_i - r_j|^2 */
    metro_float4 q[37];
    unsigned s = 12345;
    for (int k = 0; k < 37; ++k) {
        s = s * 1103515245u + 12345u; q[k].x = (float)(s >> 8) / 16777216.0f;
        s = s * 1103515245u + 12345u; q[k].y = (float)(s >> 8) / 16777216.0f;
        s = s * 1103515245u + 12345u; q[k].z = (float)(s >> 8) / 16777216.0f;
        q[k].w = 0;
    }
    double pairs = 0;
    for (int i = 0; i < 37; ++i)
        for (int j = 0; j < 37; ++j) {
            double dx = (double)q[i].x - q[j].x, dy = (double)q[i].y - q[j].y, dz = (double)q[i].z - q[j].z;
            pairs += dx * dx + dy * dy + dz * dz;
        }
    metro_polymer_shape(q, 37, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - pairs / (2.0 * 37 * 37)) < 1e-12, "%.17g vs %.17g", rg2, pairs / (2.0 * 37 * 37));
}
END_TEST

/* Samples of g(E) ~ E^(m-1) (E > 0) at beta: a Gamma(m, 1/beta) variable,
 * the sum of m exponentials.  <E> = m / beta, beta^2 var(E) = m. */
static double gamma_sample(unsigned long long *s, int m, double beta)
{
    double e = 0;
    for (int i = 0; i < m; ++i) {
        *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
        e -= log(((double)(*s >> 11) + 0.5) / 9007199254740992.0);
    }
    return e / beta;
}

START_TEST(wham_known_density_of_states)
{
    const int K = 6, m = 20, n = 40000;
    double beta[6];
    for (int k = 0; k < K; ++k) beta[k] = 3.0 * pow(1.0 / 3.0, k / 5.0); /* 3 ... 1 */
    unsigned long long s = 88172645463325252ull;
    double *e = malloc(sizeof *e * K * n);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) {
            double x = gamma_sample(&s, m, beta[k]);
            e[k * n + i] = x;
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
    metro__wham w;
    ck_assert_int_eq(metro__wham_init(&w, K, beta, lo, hi, 0.01), 0);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) metro__wham_add(&w, k, e[k * n + i], 2 * e[k * n + i], 0);
    long it = metro__wham_solve(&w, 1e-10, 100000, 0);
    ck_assert_msg(it > 0, "did not converge");
    /* exact free energies: Z(beta) ~ beta^-m, so f_k - f_0 = m ln(beta_k / beta_0) */
    for (int k = 1; k < K; ++k)
        ck_assert_msg(fabs(w.f[k] - m * log(beta[k] / beta[0])) < 0.02, "f_%d = %g, exact %g", k, w.f[k],
                      m * log(beta[k] / beta[0]));
    const double probe[] = {2.7, 2.0, 1.6, 1.13};
    for (int i = 0; i < 4; ++i) {
        metro__wham_avg a;
        metro__wham_average(&w, probe[i], &a);
        double E = m / probe[i], cv = probe[i] * probe[i] * (a.e2 - a.e * a.e);
        ck_assert_msg(fabs(a.e - E) < 0.005 * E, "beta %g: <E> = %g, exact %g", probe[i], a.e, E);
        ck_assert_msg(fabs(cv - m) < 0.04 * m, "beta %g: beta^2 var E = %g, exact %d", probe[i], cv, m);
        ck_assert_msg(fabs(a.a - 2 * a.e) < 1e-9 * a.e, "observable A = 2E reweights to %g, 2<E> = %g", a.a, 2 * a.e);
    }
    metro__wham_free(&w);
    free(e);
}
END_TEST

/* A two-phase density of states, g = g_s + A g_l with Gamma-shaped
 * branches (g_s(E) = (E - Es)^(cs-1) / Gamma(cs), the same for l): the
 * "solid" coexists with the "liquid" at T = 0.32 with a latent heat, so
 * the histograms near it are bimodal and overlap poorly, as at the
 * freezing of the 55-mer.  Z(beta) = e^(-beta Es) beta^-cs + A e^(-beta El) beta^-cl.
 * The plain self-consistent iteration needed about 1500 passes here (a
 * minute for the p55 run's 31000 bins x 64 temperatures); Newton's method
 * on the convex WHAM objective takes a handful. */
START_TEST(wham_two_phases_converges_fast)
{
    enum { K = 16, n = 20000 };
    const double cs = 81, Es = -200, cl = 90, El = -185, Tf = 0.32;
    const double lnA = (cs - cl) * log(Tf) + (El - Es) / Tf;
    double beta[K], lnz[K];
    for (int k = 0; k < K; ++k) {
        beta[k] = 1.0 / (0.2 * pow(2.5 / 0.2, k / (K - 1.0)));
        double zs = -beta[k] * Es - cs * log(beta[k]), zl = lnA - beta[k] * El - cl * log(beta[k]);
        lnz[k] = fmax(zs, zl) + log1p(exp(-fabs(zs - zl)));
    }
    unsigned long long s = 0x9e3779b97f4a7c15ull;
    double *e = malloc(sizeof *e * K * n);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; ++k) {
        double zs = -beta[k] * Es - cs * log(beta[k]);
        double ps = exp(zs - lnz[k]); /* probability of the solid */
        for (int i = 0; i < n; ++i) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            int solid = ((double)(s >> 11) + 0.5) / 9007199254740992.0 < ps;
            double x = solid ? Es + gamma_sample(&s, (int)cs, beta[k]) : El + gamma_sample(&s, (int)cl, beta[k]);
            e[k * n + i] = x;
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
    }
    metro__wham w;
    ck_assert_int_eq(metro__wham_init(&w, K, beta, lo, hi, 0.01), 0);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) metro__wham_add(&w, k, e[k * n + i], 1, 0);
    long it = metro__wham_solve(&w, 1e-10, 100000, 0);
    ck_assert_msg(it > 0 && it <= 30, "%ld iterations", it);
    /* f_k - f_0 = -(ln Z_k - ln Z_0) */
    for (int k = 1; k < K; ++k)
        ck_assert_msg(fabs(w.f[k] + lnz[k] - lnz[0]) < 0.15, "f_%d = %.6f, exact %.6f", k, w.f[k], lnz[0] - lnz[k]);
    /* a warm start from the answer is done at once */
    ck_assert_int_le(metro__wham_solve(&w, 1e-10, 100000, 1), 2);
    /* the peak of C_V at the coexistence */
    metro__wham_avg a;
    metro__wham_average(&w, 1 / Tf, &a);
    double cv = (a.e2 - a.e * a.e) / (Tf * Tf);
    ck_assert_msg(cv > 5 * cl, "C_V(T_f) = %g: no latent heat", cv);
    metro__wham_free(&w);
    free(e);
}
END_TEST

/* Row of csv whose column T equals T (within 1e-7), or -1. */
static int row_of(const char *path, double T)
{
    for (int r = 0;; ++r) {
        double t = metro_test_csv(path, r, "T");
        if (isnan(t)) return -1;
        if (fabs(t - T) < 1e-7 * T) return r;
    }
}

/* One measurement still writes thermo.csv, its errors nan, as the energy
 * observable writes its rows (it wrote nothing below 4, with a warning) */
START_TEST(one_measurement_writes_thermo)
{
    const char *ini = "[run]\nseed = 7\nsweeps = 1\nequilibration = 0\n[system]\nparticles = 5\n"
                      "[potential]\nplugin = lj_fene\n[sampler]\nplugin = parallel_tempering\nt_min = 0.6\n"
                      "t_max = 1.6\nreplicas = 2\nstep = 0.1\n[observable polymer_shape]\nplugin = polymer_shape\n"
                      "every = 1\nreweight_points = 20\nplots = false\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    char direct[4200];
    snprintf(direct, sizeof direct, "%s/thermo.csv", metro_test_run_dir());
    ck_assert_int_eq((int)metro_test_csv(direct, 0, "samples"), 1);
    ck_assert(isfinite(metro_test_csv(direct, 0, "Rg2_mean")) && isnan(metro_test_csv(direct, 0, "Rg2_err")));
}
END_TEST

START_TEST(reweighting_reproduces_direct_estimates)
{
    const char *ini = "[run]\nseed = 7\nsweeps = 40000\nequilibration = 4000\n"
                      "[system]\nparticles = 13\n"
                      "[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nt_min = 0.6\nt_max = 1.6\nreplicas = 6\n"
                      "step = 0.1\nexchange_every = 10\n"
                      "[observable polymer_shape]\nplugin = polymer_shape\nevery = 10\nreweight_points = 50\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    char direct[4200], rw[4200];
    snprintf(direct, sizeof direct, "%s/thermo.csv", metro_test_run_dir());
    snprintf(rw, sizeof rw, "%s/thermo_reweighted.csv", metro_test_run_dir());
    char *text = metro_test_slurp(direct);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(!strncmp(text, "T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n",
                           strlen("T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n")),
                  "header: %.120s", text);
    free(text);
    const char *cols[][2] = {{"E_mean", "E_err"}, {"Cv_per_N", "Cv_err"}, {"Rg2_mean", "Rg2_err"}, {"Ree2_mean", "Ree2_err"}};
    for (int k = 0; k < 6; ++k) {
        double T = metro_test_csv(direct, k, "T");
        ck_assert_int_eq((int)metro_test_csv(direct, k, "samples"), 4000);
        int r = row_of(rw, T);
        ck_assert_msg(r >= 0, "T = %g missing from the reweighted curve", T);
        for (int c = 0; c < 4; ++c) {
            double a = metro_test_csv(direct, k, cols[c][0]), ea = metro_test_csv(direct, k, cols[c][1]);
            double b = metro_test_csv(rw, r, cols[c][0]), eb = metro_test_csv(rw, r, cols[c][1]);
            ck_assert_msg(ea > 0 && eb > 0 && isfinite(a) && isfinite(b), "T = %g %s: %g +- %g, %g +- %g", T, cols[c][0], a,
                          ea, b, eb);
            ck_assert_msg(fabs(a - b) < 2 * sqrt(ea * ea + eb * eb), "T = %g %s: direct %g +- %g, reweighted %g +- %g", T,
                          cols[c][0], a, ea, b, eb);
        }
    }
    /* the grid: reweight_points temperatures plus the simulated ones */
    int rows = 0;
    while (!isnan(metro_test_csv(rw, rows, "T"))) ++rows;
    ck_assert_msg(rows >= 50 && rows <= 50 + 6, "%d rows", rows); /* the ends coincide */
    struct stat sb;
    char png[4200];
    snprintf(png, sizeof png, "%s/cv.png", metro_test_run_dir());
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        ck_assert_msg(stat(png, &sb) == 0 && sb.st_size > 1000, "cv.png missing");
    metro_sim_destroy(sim);
}
END_TEST

/* ---- the observable through a fake host ----------------------------------- */

extern const metro_plugin *metro_plugin_entry(void);

struct metro_params {
    const char *kv[16][2];
    int n;
};
struct metro_ctx {
    char msg[1024];
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
static int h_fail(metro_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return -1;
}
static void h_log(metro_ctx *c, metro_log_level l, const char *fmt, ...) { (void)c, (void)l, (void)fmt; }
static FILE *h_open(metro_ctx *c, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    return fopen(path, "w");
}
static int h_save(metro_ctx *c, const void *d, size_t n)
{
    c->saved = realloc(c->saved, c->nsaved + n);
    memcpy(c->saved + c->nsaved, d, n);
    c->nsaved += n;
    return 0;
}
static const metro_host_api host = {.version = METRO_ABI_VERSION, .fail = h_fail, .log = h_log, .param_int = p_int,
                                    .param_real = p_real, .param_bool = p_bool, .open_output = h_open,
                                    .save_bytes = h_save};

static void new_ctx(metro_ctx *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/metro-ps-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(c->dir));
}

static double col(const char *dir, const char *file, int row, const char *name)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return metro_test_csv(path, row, name);
}

static const metro_observable_api *api(void)
{
    const metro_plugin *d = metro_plugin_entry();
    ck_assert_str_eq(d->name, "polymer_shape");
    return d->api;
}

/* Two replicas of NP particles in two slots (slot 0: T = 2 holds replica
 * 1; slot 1: T = 0.5 holds replica 0).  Replica 0: free particle 0, chain
 * 0 = particles 1-4 (the staircase of shape_by_hand: r_gyr^2 5/8, R_ee^2
 * 3), free 5-6, chain 1 = particles 7-8 two apart far from the origin
 * (r_gyr^2 1, R_ee^2 4), free 9.  Replica 1: chain 0 straight, 1 apart
 * (0..3 on x: r_gyr^2 5/4, R_ee^2 9), chain 1 as in replica 0. */
enum { NP = 10 };
static const int ps_first[2] = {1, 7}, ps_length[2] = {4, 2};

typedef struct ps_state {
    metro_state st;
    metro_float4 pos[2 * NP];
    double beta[2], energy[2];
    int slot[2];
} ps_state;

static void ps_state_init(ps_state *s)
{
    memset(s, 0, sizeof *s);
    const metro_float4 r0[NP] = {{40, 0, 0, 1}, {0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0},
                                 {-30, 5, 2, 1}, {7, 7, 7, 1}, {100, -50, 3, 0}, {102, -50, 3, 0}, {0, 0, 90, 1}};
    memcpy(s->pos, r0, sizeof r0);
    memcpy(s->pos + NP, r0, sizeof r0);
    for (int k = 0; k < 4; ++k) s->pos[NP + 1 + k] = (metro_float4){(float)k, 0, 0, 0};
    s->st.backend = METRO_BACKEND_CPU;
    s->st.particles = NP;
    s->st.replicas = 2;
    s->st.pos = s->pos;
    s->st.beta = s->beta;
    s->st.energy = s->energy;
    s->st.slot_replica = s->slot;
    s->beta[0] = 0.5;
    s->beta[1] = 2.0;
    s->slot[0] = 1;
    s->slot[1] = 0;
    s->energy[0] = -3;
    s->energy[1] = -1;
    s->st.measuring = 1;
}

static metro_setup ps_setup(int chains, const int *first, const int *length, int particles)
{
    metro_setup s;
    memset(&s, 0, sizeof s);
    s.particles = particles;
    s.replicas = 2;
    s.backend = METRO_BACKEND_CPU;
    s.topology.chains = chains;
    s.topology.first = first;
    s.topology.length = length;
    return s;
}

START_TEST(chains_by_hand)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"reweight", "false"}, {"plots", "false"}}, 2};
    metro_setup su = ps_setup(2, ps_first, ps_length, NP);
    metro_ctx c;
    new_ctx(&c);
    void *self = NULL;
    ck_assert_msg(a->create(&host, &c, &p, &su, &self) == 0, "%s", c.msg);
    ps_state st;
    ps_state_init(&st);
    for (int m = 0; m < 6; ++m) {
        /* the free particles move: they are in no chain, so nothing changes */
        for (int i = 0; i < 2 * NP; ++i)
            if (i % NP == 0 || i % NP == 5 || i % NP == 6 || i % NP == 9) st.pos[i].x += 3.0f * m;
        ck_assert_msg(a->measure(self, &st.st) == 0, "%s", c.msg);
    }
    ck_assert_msg(a->finish(self, &st.st) == 0, "%s", c.msg);
    a->destroy(self);
    /* T = 0.5: replica 0, chains 5/8 and 1; T = 2: replica 1, 5/4 and 1 */
    const double rg2[2][2] = {{0.625, 1.0}, {1.25, 1.0}}, ree2[2][2] = {{3, 4}, {9, 4}};
    for (int k = 0; k < 2; ++k) {
        ck_assert_double_eq(col(c.dir, "thermo.csv", k, "T"), k ? 2 : 0.5);
        double am = (rg2[k][0] + rg2[k][1]) / 2, bm = (ree2[k][0] + ree2[k][1]) / 2;
        ck_assert_msg(fabs(col(c.dir, "thermo.csv", k, "Rg2_mean") - am) < 1e-7, "T row %d: Rg2_mean %.9g, want %g", k,
                      col(c.dir, "thermo.csv", k, "Rg2_mean"), am);
        ck_assert_msg(fabs(col(c.dir, "thermo.csv", k, "Ree2_mean") - bm) < 1e-7, "T row %d: Ree2_mean %.9g, want %g", k,
                      col(c.dir, "thermo.csv", k, "Ree2_mean"), bm);
        ck_assert_double_eq(col(c.dir, "thermo.csv", k, "Rg2_err"), 0);
        ck_assert_double_eq(col(c.dir, "thermo.csv", k, "E_mean"), k ? -1 : -3);
        ck_assert_double_eq(col(c.dir, "thermo.csv", k, "samples"), 6);
        for (int ch = 0; ch < 2; ++ch) {
            int row = 2 * k + ch;
            ck_assert_double_eq(col(c.dir, "chains.csv", row, "T"), k ? 2 : 0.5);
            ck_assert_double_eq(col(c.dir, "chains.csv", row, "chain"), ch);
            ck_assert_msg(fabs(col(c.dir, "chains.csv", row, "Rg2_mean") - rg2[k][ch]) < 1e-7 &&
                              fabs(col(c.dir, "chains.csv", row, "Ree2_mean") - ree2[k][ch]) < 1e-7,
                          "chains.csv row %d: %.9g %.9g, want %g %g", row, col(c.dir, "chains.csv", row, "Rg2_mean"),
                          col(c.dir, "chains.csv", row, "Ree2_mean"), rg2[k][ch], ree2[k][ch]);
            ck_assert_double_eq(col(c.dir, "chains.csv", row, "Rg2_err"), 0);
            ck_assert_double_eq(col(c.dir, "chains.csv", row, "samples"), 6);
        }
    }
    ck_assert(isnan(col(c.dir, "chains.csv", 4, "T")));
    char path[1024];
    snprintf(path, sizeof path, "%s/chains.csv", c.dir);
    char *text = metro_test_slurp(path);
    ck_assert_msg(text && !strncmp(text, "T,chain,Rg2_mean,Rg2_err,Ree2_mean,Ree2_err,samples\n", 52), "%s", text);
    free(text);
    /* a chain of one particle has no shape */
    static const int f1[2] = {1, 7}, l1[2] = {4, 1};
    su = ps_setup(2, f1, l1, NP);
    ck_assert_int_ne(a->create(&host, &c, &p, &su, &self), 0);
    ck_assert_msg(strstr(c.msg, "chain 1 (particles 7 to 7) has 1 particle"), "%s", c.msg);
}
END_TEST

/* A lone chain, as a system without a topology and as the one chain of
 * every particle that a lone lj_fene gets: the same thermo.csv byte for
 * byte, the whole system's shape, no chains.csv. */
START_TEST(lone_chain_unchanged)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"reweight", "false"}, {"plots", "false"}}, 2};
    static const int f[1] = {0}, l[1] = {NP};
    metro_ctx c[2];
    for (int v = 0; v < 2; ++v) {
        metro_setup su = v ? ps_setup(1, f, l, NP) : ps_setup(0, NULL, NULL, NP);
        new_ctx(&c[v]);
        void *self = NULL;
        ck_assert_msg(a->create(&host, &c[v], &p, &su, &self) == 0, "%s", c[v].msg);
        ps_state st;
        ps_state_init(&st);
        for (int m = 0; m < 6; ++m) {
            st.pos[m].y += 0.5f * m; /* a varying shape */
            ck_assert_int_eq(a->measure(self, &st.st), 0);
        }
        ck_assert_int_eq(a->finish(self, &st.st), 0);
        a->destroy(self);
        char path[1024];
        snprintf(path, sizeof path, "%s/chains.csv", c[v].dir);
        ck_assert_msg(access(path, F_OK) != 0, "chains.csv written for one chain");
        if (v) continue;
        /* replica 0 (T = 0.5) varied: its mean is not its last shape */
        double rg2, ree2;
        metro_polymer_shape(st.pos, NP, &rg2, &ree2);
        ck_assert(fabs(col(c[v].dir, "thermo.csv", 0, "Rg2_mean") - rg2) > 1e-3);
        ck_assert(col(c[v].dir, "thermo.csv", 0, "Rg2_err") > 0);
    }
    char p0[1100], p1[1100];
    snprintf(p0, sizeof p0, "%s/thermo.csv", c[0].dir);
    snprintf(p1, sizeof p1, "%s/thermo.csv", c[1].dir);
    ck_assert_msg(metro_test_same_file(p0, p1), "no topology and one whole chain differ");
    /* the T = 2 slot holds replica 1, which never moved: its whole-system shape */
    ps_state st;
    ps_state_init(&st);
    double rg2, ree2;
    metro_polymer_shape(st.pos + NP, NP, &rg2, &ree2);
    ck_assert_msg(fabs(col(c[0].dir, "thermo.csv", 1, "Rg2_mean") - rg2) < 1e-6 * rg2, "%.9g vs %.9g",
                  col(c[0].dir, "thermo.csv", 1, "Rg2_mean"), rg2);
    ck_assert_msg(fabs(col(c[0].dir, "thermo.csv", 1, "Ree2_mean") - ree2) < 1e-6 * ree2, "%.9g vs %.9g",
                  col(c[0].dir, "thermo.csv", 1, "Ree2_mean"), ree2);
}
END_TEST

/* Save after some measurements of two chains, restore into a fresh
 * instance, go on: chains.csv and thermo.csv equal an uninterrupted run's. */
START_TEST(chains_save_restore)
{
    const metro_observable_api *a = api();
    metro_params p = {{{"reweight", "false"}, {"plots", "false"}}, 2};
    metro_setup su = ps_setup(2, ps_first, ps_length, NP);
    metro_ctx c1, c2;
    new_ctx(&c1);
    new_ctx(&c2);
    void *x = NULL, *y = NULL;
    ck_assert_int_eq(a->create(&host, &c1, &p, &su, &x), 0);
    ck_assert_int_eq(a->create(&host, &c2, &p, &su, &y), 0);
    ps_state st;
    ps_state_init(&st);
    for (int m = 0; m < 50; ++m) {
        st.pos[2].z = 0.1f * (m % 7);
        st.pos[NP + 8].y = -50.0f + 0.3f * (m % 5);
        ck_assert_int_eq(a->measure(x, &st.st), 0);
        if (m == 20) {
            ck_assert_int_eq(a->save(x), 0);
            ck_assert_int_eq(a->restore(y, c1.saved, c1.nsaved), 0);
        }
        if (m > 20) ck_assert_int_eq(a->measure(y, &st.st), 0);
    }
    ck_assert_int_eq(a->finish(x, &st.st), 0);
    ck_assert_int_eq(a->finish(y, &st.st), 0);
    a->destroy(x);
    a->destroy(y);
    const char *files[] = {"thermo.csv", "chains.csv"};
    for (int i = 0; i < 2; ++i) {
        char p1[1100], p2[1100];
        snprintf(p1, sizeof p1, "%s/%s", c1.dir, files[i]);
        snprintf(p2, sizeof p2, "%s/%s", c2.dir, files[i]);
        ck_assert_msg(metro_test_same_file(p1, p2), "%s differs after the restore", files[i]);
    }
    /* the series varied: T = 0.5 chain 0 (replica 0), T = 2 chain 1 (replica 1) */
    ck_assert(col(c1.dir, "chains.csv", 0, "Rg2_err") > 0 && col(c1.dir, "chains.csv", 3, "Ree2_err") > 0);
    free(c1.saved);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("polymer_shape");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, shape_by_hand);
    tcase_add_test(tc, chains_by_hand);
    tcase_add_test(tc, lone_chain_unchanged);
    tcase_add_test(tc, chains_save_restore);
    suite_add_tcase(s, tc);
    tc = tcase_create("reweighting");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, wham_known_density_of_states);
    tcase_add_test(tc, wham_two_phases_converges_fast);
    tcase_add_test(tc, reweighting_reproduces_direct_estimates);
    tcase_add_test(tc, one_measurement_writes_thermo);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
