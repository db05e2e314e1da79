/* hierarchical_scaling — cost of a cycle of the hierarchical sampler
 * against the sequential reference (brush's CPU path: coulomb_hs's delta()
 * for every trial), on the paper's 3:-1 electrolyte (PHYSICS.md §2: ion
 * radius 3.75 Å, λ_B = 7.117 Å, cation density 1.1447e-6 Å^-3), default
 * trial cube 2R/3, for N = 2^12 ... 2^20 (--sizes for others).
 *
 * Both are timed on subsets and scaled to a cycle, because a whole cycle of
 * the reference at 2^20 takes hours:
 *   reference   K trials of delta() (about 5e7 pair-deltas), per trial x N;
 *   hier        the sampler's advance() with trials = K (the first K
 *               particles of a cycle, tree rebuilt first), after a warm-up
 *               advance of 1 trial that measures the rebuild alone:
 *               rebuild + (advance - rebuild) N / K.
 * Plugins are driven directly through a small host table (as in
 * brush_scaling): a CPU-backend simulation would first compute the O(N^2)
 * initial energy.  The configuration is the potential's random placement
 * (not equilibrated: the decision statistics of an equilibrated melt may
 * differ).  Uniforms come from a xorshift here, not Philox: timing only.
 *
 *   hierarchical_scaling [--sizes 4096,...] [--seconds S | --trials K] [--threads 1,2]
 *                        [--reference-pairs P] [--cpu] [--numbering placed|space]
 *                        [--set key=value]...   (sampler parameters)
 * --cpu times with the process's CPU clock instead of the wall clock: on a
 * machine shared with other work, the cost of the computation itself.
 *
 * Prints per N and thread count: time per cycle, the fraction of moves
 * decided at the first stage, at later stages and by the reference, far
 * cells and direct partners per move; then the reference's time per cycle
 * and the speed-up, and a least-squares exponent of cost vs N; and the
 * cost per move fitted as a + b log2 N and as c N^k, with the residual of
 * each (whether a cycle's cost is N log N).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metro/metro.h"

#define CATION_DENSITY 1.1447e-6 /* Å^-3 */
#define AVOGADRO 6.02214076e23

/* --cpu: CPU time of the process instead of the wall clock (on a machine
 * shared with other work: the cost of the computation itself; for more
 * than one thread it is core-seconds, not elapsed time) */
static int use_cpu;

/* --numbering space: the placement renumbered along a Z-order curve
 * ([system] numbering = space), so that consecutive moves touch the same
 * cells.  Then the first K particles would all lie in one corner of the
 * cell; the K timed trials are instead eight stretches of K/8 consecutive
 * particles from the middles of the curve's eight parts (spread over the
 * ball, each as local as a whole cycle's run along the curve). */
static int by_space;

/* --trials K: time K moves instead of about --seconds of them */
static int fixed_trials;

/* pos = pos0, with the timed stretches (above) first when by_space */
static void timed_first(metro_float4 *pos, const metro_float4 *pos0, int n, int trials)
{
    if (!by_space || trials >= n || trials < 8) {
        memcpy(pos, pos0, (size_t)n * sizeof *pos);
        return;
    }
    int at = 0, from[8], len[8];
    for (int c = 0; c < 8; ++c) {
        len[c] = trials / 8 + (c < trials % 8);
        /* from the middle of the part on: a fixed start, so that a run of
         * more trials times a superset of a shorter run's (runs with
         * different windows stay comparable) */
        const long part = (long)n * (c + 1) / 8 - (long)n * c / 8;
        from[c] = (int)((long)n * c / 8 + (len[c] <= part / 2 ? part / 2 : part - len[c]));
        memcpy(pos + at, pos0 + from[c], (size_t)len[c] * sizeof *pos);
        at += len[c];
    }
    for (int c = 0; c < 8; ++c) { /* the rest, in curve order */
        int lo = c ? from[c - 1] + len[c - 1] : 0;
        memcpy(pos + at, pos0 + lo, (size_t)(from[c] - lo) * sizeof *pos);
        at += from[c] - lo;
    }
    memcpy(pos + at, pos0 + from[7] + len[7], (size_t)(n - from[7] - len[7]) * sizeof *pos);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(use_cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- a small host table --------------------------------------------------- */

typedef struct kv {
    const char *key[32], *val[32];
    int n;
} kv;

struct metro_params { const kv *kv; const metro_param_decl *decls; };
struct metro_ctx { char msg[1024]; char last_log[2048]; uint64_t rng; };

static const char *text_of(const metro_params *p, const char *name)
{
    for (int i = p->kv->n - 1; i >= 0; --i)
        if (!strcmp(p->kv->key[i], name)) return p->kv->val[i];
    for (const metro_param_decl *d = p->decls; d->name; ++d)
        if (!strcmp(d->name, name)) return d->default_value ? d->default_value : "";
    return "";
}
static long h_int(const metro_params *p, const char *n) { return atol(text_of(p, n)); }
static double h_real(const metro_params *p, const char *n) { return atof(text_of(p, n)); }
static int h_bool(const metro_params *p, const char *n) { return !strcmp(text_of(p, n), "true"); }
static const char *h_string(const metro_params *p, const char *n) { return text_of(p, n); }
static const double *h_list(const metro_params *p, const char *n, int *count)
{
    static double store[4][16];
    static int turn;
    double *out = store[turn++ & 3];
    const char *t = text_of(p, n);
    int k = 0;
    while (*t && k < 16) {
        char *end;
        out[k] = strtod(t, &end);
        if (end == t) break;
        ++k;
        t = end + strspn(end, ", ");
    }
    *count = k;
    return out;
}
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
    (void)l;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->last_log, sizeof c->last_log, fmt, ap);
    va_end(ap);
}
static int h_uniform(metro_ctx *c, float *out, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        out[i] = (float)((double)((c->rng >> 40) + 1) / 16777216.0);
    }
    return 0;
}
static FILE *h_open(metro_ctx *c, const char *name)
{
    (void)c;
    (void)name;
    return fopen("/dev/null", "w");
}
static int h_save(metro_ctx *c, const void *d, size_t n)
{
    (void)c;
    (void)d;
    (void)n;
    return 0;
}

/* Facts coulomb_hs publishes (cell_radius, bjerrum), read by the sampler. */
static double fact_v[2];
static int fact_idx(const char *name)
{
    return !strcmp(name, "cell_radius") ? 0 : !strcmp(name, "bjerrum") ? 1 : -1;
}
static int h_fact_set(metro_ctx *ctx, const char *name, double v)
{
    (void)ctx;
    if (fact_idx(name) >= 0) fact_v[fact_idx(name)] = v;
    return 0;
}
static int h_fact(metro_ctx *ctx, const char *name, double *v)
{
    (void)ctx;
    if (fact_idx(name) < 0 || !(fact_v[fact_idx(name)] > 0)) return 0;
    *v = fact_v[fact_idx(name)];
    return 1;
}

static metro_host_api host_table(void)
{
    metro_host_api h = {0};
    h.version = METRO_ABI_VERSION;
    h.fail = h_fail;
    h.log = h_log;
    h.param_int = h_int;
    h.param_real = h_real;
    h.param_bool = h_bool;
    h.param_string = h_string;
    h.param_list = h_list;
    h.uniform = h_uniform;
    h.open_output = h_open;
    h.save_bytes = h_save;
    h.fact_set = h_fact_set;
    h.fact = h_fact;
    return h;
}

static const metro_plugin *load(const char *name)
{
    char exe[4096], path[4300];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return NULL;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/../lib/metro/plugins/%s.so", exe, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "hierarchical_scaling: %s\n", dlerror());
        return NULL;
    }
    metro_plugin_entry_fn entry = (metro_plugin_entry_fn)dlsym(h, METRO_PLUGIN_ENTRY);
    return entry ? entry() : NULL;
}

/* ---- one system ------------------------------------------------------------ */

typedef struct sys {
    const metro_potential_api *api;
    void *self;
    metro_setup setup, setup0; /* setup0: before the potential declared its species */
    metro_float4 *pos, *pos0;
    int n;
    metro_ctx ctx;
    metro_params p;
    kv kvs;
    char conc[64], thr[32];
    const metro_host_api *host;
} sys;

static int make_system(sys *s, const metro_plugin *pot, const metro_host_api *host, int n, int threads)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->host = host;
    snprintf(s->conc, sizeof s->conc, "%.9g", CATION_DENSITY / (AVOGADRO * 1e-27));
    snprintf(s->thr, sizeof s->thr, "%d", threads);
    s->kvs = (kv){{"valences", "diameters", "concentration", "bjerrum", "threads"}, {"3, -1", "7.5", s->conc, "7.117", s->thr}, 5};
    s->p = (metro_params){&s->kvs, pot->params};
    s->ctx.rng = 88172645463325252ull;
    s->api = pot->api;
    s->setup.particles = n;
    s->setup.replicas = 1;
    s->setup.backend = METRO_BACKEND_CPU;
    s->pos = malloc((size_t)n * sizeof *s->pos);
    s->pos0 = malloc((size_t)n * sizeof *s->pos0);
    s->setup0 = s->setup;
    int bad = !s->pos || !s->pos0 || s->api->create(host, &s->ctx, &s->p, &s->setup, &s->self);
    /* the species along the index as the core assigns them */
    long count[METRO_MAX_SPECIES];
    for (int k = 0; !bad && k < s->setup.species; ++k) count[k] = s->setup.species_table[k].count;
    if (!bad) metro_species_interleave(s->pos, n, count, s->setup.species);
    s->setup.terms = 1;
    if (bad || s->api->initial(s->self, &s->ctx, s->pos, n)) {
        fprintf(stderr, "hierarchical_scaling: coulomb_hs: %s\n", s->ctx.msg);
        return -1;
    }
    if (by_space && metro_number_by_space(s->pos, n)) {
        fprintf(stderr, "hierarchical_scaling: out of memory numbering %d particles\n", n);
        return -1;
    }
    memcpy(s->pos0, s->pos, (size_t)n * sizeof *s->pos);
    return 0;
}

static int set_threads(sys *s, int threads)
{
    snprintf(s->thr, sizeof s->thr, "%d", threads);
    /* coulomb_hs reads its thread count at create: make it again */
    s->api->destroy(s->self);
    s->self = NULL;
    s->setup = s->setup0; /* a lone coulomb_hs declares the species again */
    if (s->api->create(s->host, &s->ctx, &s->p, &s->setup, &s->self)) {
        fprintf(stderr, "hierarchical_scaling: coulomb_hs: %s\n", s->ctx.msg);
        return -1;
    }
    s->setup.terms = 1;
    return 0;
}

/* Seconds per cycle of the reference (delta() for every trial, brush's CPU
 * path), from about `pd` pair-deltas of trials. */
static double reference_cycle(sys *s, double pd)
{
    const int n = s->n;
    const float D = (float)(2.0 * fact_v[0] / 3.0);
    long k = (long)(pd / (double)n);
    if (k < 2) k = 2;
    if (k > n) k = n;
    memcpy(s->pos, s->pos0, (size_t)n * sizeof *s->pos);
    float u[4];
    double t0 = now();
    for (long i = 0; i < k; ++i) {
        h_uniform(&s->ctx, u, 4);
        metro_float4 t = s->pos[i];
        t.x = t.x + (u[0] - 0.5f) * D;
        t.y = t.y + (u[1] - 0.5f) * D;
        t.z = t.z + (u[2] - 0.5f) * D;
        double de = s->api->delta(s->self, s->pos, n, (int)i, t);
        if (metro_accept(de, u[3])) s->pos[i] = t;
    }
    return (now() - t0) * (double)n / (double)k;
}

typedef struct hier_run {
    double cycle, rebuild, per_move;
    long long stage0, stage1, stage2, later, exact, fallback, moves, wall, overlap;
    double cells, direct, t_rebuild, t_moves, c_rebuild, c_moves;
    char levels[2048];
} hier_run;

/* One advance of `trials` moves of the hierarchical sampler from the
 * placement; fills r (times, and the statistics of the finish() line). */
static int hier_once(sys *s, const metro_plugin *smp, const metro_host_api *host, int trials, int threads,
                     const char *const *sets, int nsets, double *secs, hier_run *r)
{
    kv k = {{0}, {0}, 0};
    char tr[32], th[32];
    snprintf(tr, sizeof tr, "%d", trials);
    snprintf(th, sizeof th, "%d", threads);
    static char keys[32][64];
    for (int i = 0; i < nsets && k.n < 28; ++i) {
        const char *eq = strchr(sets[i], '=');
        if (!eq) continue;
        snprintf(keys[k.n], sizeof keys[k.n], "%.*s", (int)(eq - sets[i]), sets[i]);
        k.key[k.n] = keys[k.n];
        k.val[k.n] = eq + 1;
        k.n++;
    }
    k.key[k.n] = "trials";
    k.val[k.n++] = tr;
    k.key[k.n] = "threads";
    k.val[k.n++] = th;
    metro_params p = {&k, smp->params};
    metro_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.rng = 2463534242ull;
    metro_setup setup = s->setup;
    const metro_sampler_api *api = smp->api;
    void *self = NULL;
    if (api->create(host, &ctx, &p, &setup, &self)) {
        fprintf(stderr, "hierarchical_scaling: hierarchical: %s\n", ctx.msg);
        return -1;
    }
    timed_first(s->pos, s->pos0, s->n, trials);
    double energy = 0, beta = 1;
    int slot = 0;
    long long acc = 0, att = 0;
    metro_state st = {0};
    st.backend = METRO_BACKEND_CPU;
    st.particles = s->n;
    st.replicas = 1;
    st.pos = s->pos;
    st.energy = &energy;
    st.beta = &beta;
    st.slot_replica = &slot;
    st.accepted = &acc;
    st.attempted = &att;
    if (api->start(self, &st, s->api, s->self)) {
        fprintf(stderr, "hierarchical_scaling: hierarchical: %s\n", ctx.msg);
        api->destroy(self);
        return -1;
    }
    snprintf(r->levels, sizeof r->levels, "%s", ctx.last_log);
    double t0 = now();
    if (api->advance(self, &st, 1)) {
        fprintf(stderr, "hierarchical_scaling: hierarchical: %s\n", ctx.msg);
        api->destroy(self);
        return -1;
    }
    *secs = now() - t0;
    api->finish(self, &st);
    double acc_rate;
    if (sscanf(ctx.last_log,
               "%*d cycles, acceptance %lf; moves %lld: stage0 %lld, stage1 %lld, stage2 %lld, "
               "exact %lld, reference %lld (wall %lld, overlap %lld); far cells %lf and direct partners %lf per move; "
               "%lf s rebuilding the tree, %lf s moving (CPU %lf s, %lf s); decided by a later look %lld",
               &acc_rate, &r->moves, &r->stage0, &r->stage1, &r->stage2, &r->exact, &r->fallback, &r->wall,
               &r->overlap, &r->cells, &r->direct, &r->t_rebuild, &r->t_moves, &r->c_rebuild, &r->c_moves,
               &r->later) != 16)
        fprintf(stderr, "hierarchical_scaling: cannot read: %s\n", ctx.last_log);
    api->destroy(self);
    return 0;
}

/* Cost of a cycle at thread count `threads`, from the sampler's own
 * timers (rebuild, moves): a probe of 16 trials, then enough trials for
 * about `seconds` of moves. */
static int hier_cycle(sys *s, const metro_plugin *smp, const metro_host_api *host, int threads, double seconds,
                      const char *const *sets, int nsets, hier_run *r)
{
    double tk;
    memset(r, 0, sizeof *r);
    int k = s->n < 16 ? s->n : 16;
    if (hier_once(s, smp, host, k, threads, sets, nsets, &tk, r)) return -1;
    double per = r->t_moves / k;
    if (fixed_trials > 0) { /* --trials: the same moves in every run, so runs compare move for move */
        k = fixed_trials < s->n ? fixed_trials : s->n;
        if (hier_once(s, smp, host, k, threads, sets, nsets, &tk, r)) return -1;
    } else if (per > 0) {
        long want = (long)(seconds / per);
        if (want > s->n) want = s->n;
        if (want > k) {
            k = (int)want;
            if (hier_once(s, smp, host, k, threads, sets, nsets, &tk, r)) return -1;
        }
    }
    r->rebuild = use_cpu ? r->c_rebuild : r->t_rebuild;
    r->per_move = (use_cpu ? r->c_moves : r->t_moves) / k;
    r->cycle = r->rebuild + r->per_move * s->n;
    return 0;
}

/* Least-squares line y = a + b x. */
static void line(const double *x, const double *y, int m, double *a, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < m; ++i) sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
    *b = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    *a = (sy - *b * sx) / m;
}

/* Least-squares slope of log y against log x. */
static double slope(const double *x, const double *y, int n)
{
    double lx[32], ly[32], a, b;
    int m = 0;
    for (int i = 0; i < n; ++i)
        if (y[i] > 0) lx[m] = log(x[i]), ly[m++] = log(y[i]);
    if (m < 2) return NAN;
    line(lx, ly, m, &a, &b);
    return b;
}

/* Is a cycle's cost N log N?  The cost per move (cycle / N) fitted by
 * least squares as a + b log2 N and as c N^k: their residuals side by side
 * (the smaller fits better). */
static void log_or_power(const double *x, const double *cyc, int n)
{
    double lx[32], y[32], ly[32], lnx[32];
    int m = 0;
    for (int i = 0; i < n; ++i) {
        if (!(cyc[i] > 0)) continue;
        lx[m] = log2(x[i]);
        lnx[m] = log(x[i]);
        y[m] = 1e6 * cyc[i] / x[i];
        ly[m] = log(y[m]);
        ++m;
    }
    if (m < 3) return;
    double a, b, c, k, r_log = 0, r_pow = 0;
    line(lx, y, m, &a, &b);
    line(lnx, ly, m, &c, &k);
    for (int i = 0; i < m; ++i) {
        r_log += pow(a + b * lx[i] - y[i], 2);
        r_pow += pow(exp(c + k * lnx[i]) - y[i], 2);
    }
    printf("  µs a move as a + b log2 N: b = %.3g, residual %.4g µs²; as c N^k: k = %.3f, residual %.4g µs²\n", b, r_log,
           k, r_pow);
}

int main(int argc, char **argv)
{
    int sizes[32], nsizes = 0;
    for (int e = 12; e <= 20; ++e) sizes[nsizes++] = 1 << e;
    int threads[4] = {1, 2}, nthreads = 2;
    double seconds = 4.0, ref_pd = 5e7;
    const char *sets[32];
    int nsets = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < 32; t = strtok(NULL, ",")) sizes[nsizes++] = atoi(t);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = 0;
            for (char *t = strtok(argv[++i], ","); t && nthreads < 4; t = strtok(NULL, ",")) threads[nthreads++] = atoi(t);
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--trials") && i + 1 < argc) {
            fixed_trials = atoi(argv[++i]);
            if (fixed_trials < 16) {
                fprintf(stderr, "hierarchical_scaling: --trials %s: at least 16\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--reference-pairs") && i + 1 < argc) {
            ref_pd = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--cpu")) {
            use_cpu = 1;
        } else if (!strcmp(argv[i], "--numbering") && i + 1 < argc && !strcmp(argv[i + 1], "space")) {
            by_space = 1, ++i;
        } else if (!strcmp(argv[i], "--numbering") && i + 1 < argc && !strcmp(argv[i + 1], "placed")) {
            by_space = 0, ++i;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && nsets < 32) {
            sets[nsets++] = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--sizes N,N,...] [--threads 1,2] [--seconds S | --trials K] [--reference-pairs P] "
                            "[--cpu] [--numbering placed|space] [--set key=value]...\n", argv[0]);
            return 2;
        }
    }
    const metro_plugin *pot = load("coulomb_hs"), *smp = load("hierarchical");
    if (!pot || !smp) return 1;
    metro_host_api host = host_table();
    printf("%s", use_cpu ? "(CPU time of the process)\n" : "(wall clock)\n");
    printf("hierarchical_scaling: 3:-1 electrolyte, radius 3.75 Å, λ_B = 7.117 Å, cation density %.4g Å^-3, "
           "trial cube 2R/3; %ld cores\n", CATION_DENSITY, sysconf(_SC_NPROCESSORS_ONLN));
    printf("  numbering %s\n", by_space ? "space (Z-order; the timed trials: eight stretches along it)" : "placed");
    for (int i = 0; i < nsets; ++i) printf("  sampler.%s\n", sets[i]);
    printf("%9s %3s %12s %10s %9s %7s %7s %7s %8s %8s %8s %9s %9s %12s %9s\n", "N", "thr", "hier s/cyc", "rebuild s",
           "us/move", "stage0", "stage1", "stage2", "later", "exact", "ref", "cells/mv", "direct/mv", "ref s/cyc",
           "speed-up");
    double xs[32], hy[4][32], ry[4][32];
    for (int a = 0; a < nsizes; ++a) {
        const int n = sizes[a];
        sys s;
        if (make_system(&s, pot, &host, n, 1)) return 1;
        xs[a] = n;
        for (int b = 0; b < nthreads; ++b) {
            if (set_threads(&s, threads[b])) return 1;
            hier_run r;
            if (hier_cycle(&s, smp, &host, threads[b], seconds, sets, nsets, &r)) return 1;
            double ref = reference_cycle(&s, ref_pd);
            hy[b][a] = r.cycle;
            ry[b][a] = ref;
            const double m = r.moves ? (double)r.moves : 1.0;
            printf("%9d %3d %12.4g %10.3g %9.4g %7.4f %7.4f %7.4f %8.2e %8.2e %8.2e %9.1f %9.1f %12.4g %9.1f\n", n,
                   threads[b], r.cycle, r.rebuild, 1e6 * r.per_move, r.stage0 / m, r.stage1 / m, r.stage2 / m,
                   r.later / m, r.exact / m, r.fallback / m,
                   r.cells, r.direct, ref, ref / r.cycle);
            fflush(stdout);
        }
        s.api->destroy(s.self);
        free(s.pos);
        free(s.pos0);
    }
    for (int b = 0; b < nthreads; ++b) {
        printf("fitted exponent of the cost per cycle vs N, %d thread(s): hierarchical %.3f, reference %.3f\n",
               threads[b], slope(xs, hy[b], nsizes), slope(xs, ry[b], nsizes));
        log_or_power(xs, hy[b], nsizes);
    }
    return 0;
}
