/* parallel_tempering — replica-exchange Monte Carlo (PHYSICS.md §1 "Parallel
 * tempering", seed 000 §3.2-3.3).
 *
 * n_r replicas of one system run at a ladder of temperatures T_0 < ... <
 * T_{n_r-1}: an explicit list (`temperatures`), or `replicas` temperatures
 * from `t_min` to `t_max`, spaced geometrically (constant ratio, the usual
 * choice when C_V varies little) or linearly.  `ladders` independent copies
 * of the ladder run side by side (n_r x ladders replicas: a way to fill a
 * GPU, and independent samples for error bars); slot L n_r + k is
 * temperature k of ladder L.
 *
 * A sweep is N trials in every replica: random updating, each trial picks a
 * monomer at random and displaces it uniformly in a cube of half-side
 * `step` (or step x sqrt(T / T_min) with step_scaling = sqrt: the same
 * acceptance at every temperature, roughly, for near-harmonic local
 * motion), accepted with min(1, exp(-beta dE)).  After every
 * `exchange_every` (M) sweeps, neighbouring temperatures of each ladder
 * propose to exchange their replicas with p = min(1, exp[(E_i - E_{i+1})
 * (beta_i - beta_{i+1})]) (Eq. 6), even pairs (0-1, 2-3, ...) and odd pairs
 * (1-2, 3-4, ...) in alternate rounds.  An exchange permutes
 * state->slot_replica; coordinates never move.
 *
 * Random numbers: Philox4x32-10 (metro/philox.h), keyed by the run's seed,
 * with counters (trial, sweep, replica) and (pair, round, ladder): the
 * layout is in parallel_tempering.h.  So the CPU and CUDA backends run the
 * same Markov chain, replica by replica, up to the rounding of energy
 * changes (float pair terms summed in another order).
 *
 * Backends.  CPU: the reference; replicas in parallel with OpenMP
 * (`threads`), each trial through the potential's delta().  CUDA
 * (parallel_tempering.cu): a group of `lanes` lanes per replica (auto: the
 * size that keeps both the lanes and the GPU busy for this N and replica
 * count), the chain in shared memory, the O(N) energy change of the moved
 * monomer through the device ABI, random numbers drawn in the kernel,
 * exchanges decided by a small kernel every M sweeps; positions, energies
 * and slot maps stay on the device until sync().
 *
 * Output at finish: exchange.csv (per pair of neighbouring temperatures,
 * summed over ladders: attempted, accepted, acceptance) and roundtrips.csv
 * (per replica: completed round trips lowest -> highest -> lowest
 * temperature), and a summary in the log.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "metro/plugin.h"

#include "parallel_tempering.h"

/* The temperatures a ladder may hold, listed or generated. */
#define PT_T_LO 1e-6
#define PT_T_HI 1e9

static const metro_param_decl params[] = {
    {"temperatures", METRO_PARAM_STRING, "", 0, 0, NULL, "energy/k_B",
     "explicit ladder, ascending, comma-separated; give it or t_min/t_max/replicas/spacing, not both"},
    {"t_min", METRO_PARAM_REAL, "0.2", PT_T_LO, PT_T_HI, NULL, "energy/k_B", "lowest temperature of the ladder"},
    {"t_max", METRO_PARAM_REAL, "2.0", PT_T_LO, PT_T_HI, NULL, "energy/k_B", "highest temperature of the ladder"},
    {"replicas", METRO_PARAM_INT, "32", 1, 1048576, NULL, "", "temperatures in the ladder (n_r)"},
    {"spacing", METRO_PARAM_CHOICE, "geometric", 0, 0, "geometric|linear", "",
     "how the ladder fills [t_min, t_max]"},
    {"ladders", METRO_PARAM_INT, "1", 1, 1048576, NULL, "",
     "independent copies of the ladder run side by side (n_r x ladders replicas)"},
    {"step", METRO_PARAM_REAL, "0.01", 1e-9, 1e9, NULL, "length",
     "half-side of the cube of trial displacements (paper: 0.01)"},
    {"step_scaling", METRO_PARAM_CHOICE, "none", 0, 0, "none|sqrt", "",
     "none: every temperature uses `step`; sqrt: step x sqrt(T / T_min), larger moves where they are accepted"},
    {"exchange_every", METRO_PARAM_INT, "10", 1, 2147483647.0, NULL, "sweeps",
     "propose exchanges of neighbouring temperatures after every this many sweeps (M)"},
    {"lanes", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|4|8|16|32", "",
     "CUDA: lanes of a warp per replica (auto picks from N and the replica count)"},
    {"threads", METRO_PARAM_INT, "0", 0, 4096, NULL, "", "CPU: OpenMP threads (0: all)"},
    METRO_PARAM_END};

typedef struct pt {
    const metro_host_api *host;
    metro_ctx *ctx;
    metro_backend backend;
    int nr, ladders, R, n;
    int first, last;               /* the replicas this process advances (MPI ranks) */
    double *temps;                 /* nr temperatures, ascending */
    float step;
    int step_sqrt;
    float *slot_step;              /* trial step of each slot */
    long M;
    int lanes, threads;
    metro_philox_key_t key;
    unsigned long long sweep;      /* sweeps run so far */
    unsigned long long round;      /* exchange rounds run so far */

    /* bookkeeping, live on the CPU backend, copies on CUDA */
    int *replica_slot;
    int *trip_state;
    long long *trips;
    unsigned long long *xacc, *xatt; /* ladders * (nr - 1) */

    metro_state *st;
    const metro_potential_api *pot;
    void *pot_self;

    /* CUDA */
    void *k_sweeps, *k_exchange;
    int G, rpb;
    size_t smem;
    double *d_beta;
    float *d_step;
    int *d_slot_replica, *d_replica_slot, *d_trip_state;
    long long *d_trips;
    unsigned long long *d_acc, *d_xacc, *d_xatt;
    unsigned long long *d_nan;      /* metro_pt_sweep_args.nan */

    void *restored;                /* a save() blob restore() got before start() */
    size_t restored_size;
} pt;

/* Through the core's one CUDA error path (host->cuda). */
#define PT_CUDA(call, ...)                                                       \
    do {                                                                         \
        if (self->host->cuda(self->ctx, (int)(call), __VA_ARGS__)) return -1;   \
    } while (0)

/* ---- the ladder --------------------------------------------------------- */

/* Whether s[0..len) is a plain decimal number, [+-]digits[.digits][e[+-]digits]:
 * strtod also takes hex (0x10), inf and nan, which no ladder means. */
static int plain_decimal(const char *s, size_t len)
{
    size_t i = 0, digits = 0, edigits = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) ++i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; ++i) ++digits;
    if (i < len && s[i] == '.')
        for (++i; i < len && s[i] >= '0' && s[i] <= '9'; ++i) ++digits;
    if (!digits) return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < len && (s[i] == '+' || s[i] == '-')) ++i;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; ++i) ++edigits;
        if (!edigits) return 0;
    }
    return i == len;
}

/* Parse the explicit list into *out (malloc'ed).  Items are separated by
 * one comma or by blanks and numbered as the core numbers the items of its
 * own lists ([system] charges): an empty item is a typo, not a skip ("1,,2"
 * must not quietly become two temperatures), and each item is held to the
 * range t_min and t_max are (a temperature of 1e-300 gave C_V = inf).
 * Returns the count, or -1 after host->fail. */
static int parse_temperatures(const metro_host_api *host, metro_ctx *ctx, const char *text, double **out)
{
    int n = 0, cap = 16;
    double *t = malloc(cap * sizeof *t);
    if (!t) return host->fail(ctx, "out of memory");
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        const char *stop = comma ? comma : p + strlen(p);
        int items = 0;
        for (const char *q = p;;) {
            while (q < stop && (*q == ' ' || *q == '\t')) ++q;
            if (q == stop) break;
            size_t len = 0;
            while (q + len < stop && q[len] != ' ' && q[len] != '\t') ++len;
            if (!plain_decimal(q, len)) {
                free(t);
                return host->fail(ctx, "temperatures: item %d, '%.*s', is not a plain decimal number (such as 0.5 or "
                                       "2e-1)", n + 1, (int)len, q);
            }
            double v = strtod(q, NULL);
            if (!(v >= PT_T_LO && v <= PT_T_HI)) {
                free(t);
                return host->fail(ctx, "temperatures: item %d, %.*s, is out of range (allowed: %g to %g, as t_min "
                                       "and t_max)", n + 1, (int)len, q, PT_T_LO, PT_T_HI);
            }
            if (n && !(v > t[n - 1])) {
                double last = t[n - 1];
                free(t);
                return host->fail(ctx, "temperatures: must be strictly ascending (item %d, %g, after %g)", n + 1, v,
                                  last);
            }
            if (n == cap) {
                double *g = realloc(t, (cap *= 2) * sizeof *t);
                if (!g) { free(t); return host->fail(ctx, "out of memory"); }
                t = g;
            }
            t[n++] = v;
            ++items;
            q += len;
        }
        if (!items && (comma || p != text)) {
            free(t);
            return host->fail(ctx, "temperatures: item %d of the list is empty (items are separated by one comma "
                                   "or by blanks)", n + 1);
        }
        if (!comma) break;
        p = comma + 1;
    }
    if (!n) { free(t); return host->fail(ctx, "temperatures: the list is empty"); }
    *out = t;
    return n;
}

/* The first key of the generated ladder that is not at its default, or
 * NULL; its value as text in val.  A plugin sees values, not whether a key
 * was written (and a run's config.ini, which a resume reads, spells out
 * every default), so, as coulomb_hs tells cell_radius from concentration,
 * a key counts as given when its value is not the default. */
static const char *ladder_key_given(const metro_host_api *host, const metro_params *pp, char *val, size_t n)
{
    for (const metro_param_decl *d = params; d->name; ++d) {
        if (strcmp(d->name, "t_min") && strcmp(d->name, "t_max") && strcmp(d->name, "replicas") &&
            strcmp(d->name, "spacing"))
            continue;
        int given;
        if (d->type == METRO_PARAM_REAL) {
            double v = host->param_real(pp, d->name);
            given = v != strtod(d->default_value, NULL);
            snprintf(val, n, "%g", v);
        } else if (d->type == METRO_PARAM_INT) {
            long v = host->param_int(pp, d->name);
            given = v != strtol(d->default_value, NULL, 10);
            snprintf(val, n, "%ld", v);
        } else {
            const char *v = host->param_string(pp, d->name);
            given = strcmp(v, d->default_value) != 0;
            snprintf(val, n, "%s", v);
        }
        if (given) return d->name;
    }
    return NULL;
}

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *pp, metro_setup *setup,
                  void **out)
{
    pt *self = calloc(1, sizeof *self);
    if (!self) return host->fail(ctx, "out of memory");
    self->host = host;
    self->ctx = ctx;
    self->backend = setup->backend;
    const char *list = host->param_string(pp, "temperatures");
    char val[64];
    const char *also = list && *list ? ladder_key_given(host, pp, val, sizeof val) : NULL;
    if (also) {
        free(self);
        return host->fail(ctx, "temperatures: give temperatures or t_min/t_max/replicas/spacing, not both (%s = %s "
                               "is given too, and the list would ignore it)", also, val);
    }
    if (list && *list) {
        int n = parse_temperatures(host, ctx, list, &self->temps);
        if (n < 0) { free(self); return -1; }
        self->nr = n;
    } else {
        double lo = host->param_real(pp, "t_min"), hi = host->param_real(pp, "t_max");
        self->nr = (int)host->param_int(pp, "replicas");
        if (self->nr > 1 && !(hi > lo)) {
            free(self);
            return host->fail(ctx, "t_max = %g must exceed t_min = %g", hi, lo);
        }
        self->temps = malloc(self->nr * sizeof *self->temps);
        if (!self->temps) { free(self); return host->fail(ctx, "out of memory"); }
        int geo = !strcmp(host->param_string(pp, "spacing"), "geometric");
        for (int k = 0; k < self->nr; ++k) {
            double f = self->nr > 1 ? (double)k / (self->nr - 1) : 0.0;
            self->temps[k] = geo ? lo * pow(hi / lo, f) : lo + (hi - lo) * f;
        }
        if (self->nr > 1) self->temps[self->nr - 1] = hi;
    }
    self->ladders = (int)host->param_int(pp, "ladders");
    if ((long long)self->nr * self->ladders > 16777216) {
        int nr = self->nr, ladders = self->ladders;
        free(self->temps);
        free(self);
        return host->fail(ctx, "%d temperatures x %d ladders: more than 2^24 replicas", nr, ladders);
    }
    self->R = self->nr * self->ladders;
    self->n = setup->particles;
    self->step = (float)host->param_real(pp, "step");
    self->step_sqrt = !strcmp(host->param_string(pp, "step_scaling"), "sqrt");
    self->M = host->param_int(pp, "exchange_every");
    const char *lanes = host->param_string(pp, "lanes");
    self->lanes = strcmp(lanes, "auto") ? atoi(lanes) : 0;
    self->threads = (int)host->param_int(pp, "threads");
    self->key = metro_philox_key(setup->seed, METRO_PT_KEY);
    setup->replicas = self->R;
    *out = self;
    return 0;
}

static void destroy(void *vself)
{
    pt *self = vself;
    if (!self) return;
    if (self->backend == METRO_BACKEND_CUDA) { /* no CUDA call on the CPU backend */
        cudaFree(self->d_beta);
        cudaFree(self->d_step);
        cudaFree(self->d_slot_replica);
        cudaFree(self->d_replica_slot);
        cudaFree(self->d_trip_state);
        cudaFree(self->d_trips);
        cudaFree(self->d_acc);
        cudaFree(self->d_xacc);
        cudaFree(self->d_xatt);
        cudaFree(self->d_nan);
    }
    free(self->temps);
    free(self->slot_step);
    free(self->replica_slot);
    free(self->trip_state);
    free(self->trips);
    free(self->xacc);
    free(self->xatt);
    free(self->restored);
    free(self);
}

/* ---- CUDA set-up -------------------------------------------------------- */

/* Lanes per replica for the auto setting: a model of the warp instructions
 * of one trial step of a warp (a pass over G partners ~44 with the
 * branch-free lj_fene, the fixed part ~185: broadcast, bonds, reduction,
 * decision; read off the sm_90 SASS, bench/NOTES.md), shared by the 32/G
 * replicas of the warp, times how busy the SMs are: the warps spread over
 * all SMs (start_cuda shrinks blocks to one warp when replicas are few) and
 * an SM is taken as saturated from 8 resident warps on (below that it is
 * latency-bound, roughly in proportion).  Returns 4, 8, 16 or 32. */
static int auto_lanes(int n, long long R, int sms)
{
    int best = 32;
    double bestv = -1;
    for (int G = 4; G <= 32; G *= 2) {
        double passes = (double)((n + G - 1) / G);
        double cost = passes * 44.0 + 185.0 + 80.0 / G; /* + Philox, 1/G per trial */
        double per_sm = (double)R * G / 32.0 / (sms > 0 ? sms : 132);
        double v = (32.0 / G) / cost * (per_sm < 8.0 ? per_sm / 8.0 : 1.0);
        if (v > bestv * 1.0001) { bestv = v; best = G; }
    }
    return best;
}

static int start_cuda(pt *self, metro_state *st)
{
    const metro_host_api *host = self->host;
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    int G = self->lanes ? self->lanes : auto_lanes(self->n, self->R, sms);
    /* shared memory: up to 128 / G replicas a block within the default 48 KiB;
     * a chain larger than that stays in global memory (behind L1) */
    size_t per = (size_t)self->n * sizeof(metro_float4), limit = 48 * 1024;
    int rpb = 128 / G, shared = per <= limit;
    /* few replicas: smaller blocks (down to one warp) so that the grid
     * covers every SM twice where it can; a 128-thread block of G = 4 on
     * 2048 replicas made 64 blocks, half the SMs idle */
    while (rpb > 1 && rpb * G > 32 && (self->R + rpb - 1) / rpb < 2 * (sms > 0 ? sms : 132)) rpb /= 2;
    if (shared && (size_t)rpb * per > limit) rpb = (int)(limit / per);
    self->G = G;
    self->rpb = rpb;
    self->smem = shared ? (size_t)rpb * per : 0;
    char name[64];
    snprintf(name, sizeof name, "parallel_tempering_sweeps_g%d_%s", G, shared ? "shared" : "global");
    if (host->kernel(self->ctx, name, &self->k_sweeps)) return -1;
    if (host->kernel(self->ctx, "parallel_tempering_exchange", &self->k_exchange)) return -1;

    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    PT_CUDA(cudaMalloc((void **)&self->d_beta, R * sizeof(double)), "cudaMalloc of %zu bytes for beta", (size_t)(R * sizeof(double)));
    PT_CUDA(cudaMalloc((void **)&self->d_step, R * sizeof(float)), "cudaMalloc of %zu bytes for step", (size_t)(R * sizeof(float)));
    PT_CUDA(cudaMalloc((void **)&self->d_slot_replica, R * sizeof(int)), "cudaMalloc of %zu bytes for slot_replica", (size_t)(R * sizeof(int)));
    PT_CUDA(cudaMalloc((void **)&self->d_replica_slot, R * sizeof(int)), "cudaMalloc of %zu bytes for replica_slot", (size_t)(R * sizeof(int)));
    PT_CUDA(cudaMalloc((void **)&self->d_trip_state, R * sizeof(int)), "cudaMalloc of %zu bytes for trip_state", (size_t)(R * sizeof(int)));
    PT_CUDA(cudaMalloc((void **)&self->d_trips, R * sizeof(long long)), "cudaMalloc of %zu bytes for trips", (size_t)(R * sizeof(long long)));
    PT_CUDA(cudaMalloc((void **)&self->d_acc, R * sizeof(unsigned long long)), "cudaMalloc of %zu bytes for acc", (size_t)(R * sizeof(unsigned long long)));
    PT_CUDA(cudaMalloc((void **)&self->d_xacc, P * sizeof(unsigned long long)), "cudaMalloc of %zu bytes for xacc", (size_t)(P * sizeof(unsigned long long)));
    PT_CUDA(cudaMalloc((void **)&self->d_xatt, P * sizeof(unsigned long long)), "cudaMalloc of %zu bytes for xatt", (size_t)(P * sizeof(unsigned long long)));
    PT_CUDA(cudaMalloc((void **)&self->d_nan, 2 * R * sizeof(unsigned long long)), "cudaMalloc of %zu bytes for NaN marks", (size_t)(2 * R * sizeof(unsigned long long)));
    PT_CUDA(cudaMemsetAsync(self->d_nan, 0, 2 * R * sizeof(unsigned long long), (cudaStream_t)host->stream(self->ctx)), "clearing NaN marks");
    host->log(self->ctx, METRO_LOG_INFO, "CUDA: %d lanes per replica%s, %d replicas per block, chains in %s memory", G,
              self->lanes ? "" : " (auto)", rpb, shared ? "shared" : "global");
    return 0;
}

/* Host bookkeeping -> device (after start and after restore). */
static int upload(pt *self, metro_state *st)
{
    cudaStream_t s = (cudaStream_t)self->host->stream(self->ctx);
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    unsigned long long *acc = malloc(R * sizeof *acc);
    if (!acc) return self->host->fail(self->ctx, "out of memory");
    for (size_t r = 0; r < R; ++r) acc[r] = (unsigned long long)st->accepted[r];
    cudaError_t e = cudaMemcpyAsync(self->d_acc, acc, R * sizeof *acc, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaStreamSynchronize(s); /* acc is freed below */
    free(acc);
    PT_CUDA(e, "uploading counters");
    PT_CUDA(cudaMemcpyAsync(self->d_beta, st->beta, R * sizeof(double), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_step, self->slot_step, R * sizeof(float), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_slot_replica, st->slot_replica, R * sizeof(int), cudaMemcpyHostToDevice, s), "uploading");
    /* observables that measure on the device read the slot map from here */
    st->d_slot_replica = self->d_slot_replica;
    PT_CUDA(cudaMemcpyAsync(self->d_replica_slot, self->replica_slot, R * sizeof(int), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_trip_state, self->trip_state, R * sizeof(int), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_trips, self->trips, R * sizeof(long long), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_xacc, self->xacc, P * sizeof(unsigned long long), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaMemcpyAsync(self->d_xatt, self->xatt, P * sizeof(unsigned long long), cudaMemcpyHostToDevice, s), "uploading");
    PT_CUDA(cudaStreamSynchronize(s), "uploading");
    return 0;
}

/* ---- save / restore ----------------------------------------------------- */

#define PT_MAGIC 0x31545052u /* "RPT1" */

typedef struct pt_header {
    uint32_t magic;
    int32_t nr, ladders, n;
    uint64_t sweep, round;
} pt_header;

static size_t blob_size(const pt *self)
{
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    return sizeof(pt_header) + R * (2 * sizeof(int) + sizeof(int) + sizeof(long long) + sizeof(long long)) +
           2 * P * sizeof(unsigned long long);
}

/* Apply a blob to the host copies (validated by restore()). */
static void apply_blob(pt *self, metro_state *st, const unsigned char *b)
{
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    pt_header h;
    memcpy(&h, b, sizeof h);
    b += sizeof h;
    self->sweep = h.sweep;
    self->round = h.round;
    memcpy(st->slot_replica, b, R * sizeof(int)); b += R * sizeof(int);
    memcpy(self->replica_slot, b, R * sizeof(int)); b += R * sizeof(int);
    memcpy(self->trip_state, b, R * sizeof(int)); b += R * sizeof(int);
    memcpy(self->trips, b, R * sizeof(long long)); b += R * sizeof(long long);
    memcpy(st->accepted, b, R * sizeof(long long)); b += R * sizeof(long long);
    memcpy(self->xacc, b, P * sizeof(unsigned long long)); b += P * sizeof(unsigned long long);
    memcpy(self->xatt, b, P * sizeof(unsigned long long));
    for (size_t r = 0; r < R; ++r) st->attempted[r] = (long long)self->n * (long long)self->sweep;
}

static int sync_state(void *vself, metro_state *st);
static int pull_stats(pt *self);

static int save(void *vself)
{
    pt *self = vself;
    if (!self->st) return self->host->fail(self->ctx, "save before start");
    /* the core syncs before it saves (under MPI that sync is the collective
     * that shares the replicas, and only the writing rank saves: a sync
     * here would wait for ranks that never come) */
    if (pull_stats(self)) return -1;
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    pt_header h = {PT_MAGIC, self->nr, self->ladders, self->n, self->sweep, self->round};
    const metro_host_api *host = self->host;
    metro_ctx *c = self->ctx;
    if (host->save_bytes(c, &h, sizeof h) || host->save_bytes(c, self->st->slot_replica, R * sizeof(int)) ||
        host->save_bytes(c, self->replica_slot, R * sizeof(int)) ||
        host->save_bytes(c, self->trip_state, R * sizeof(int)) ||
        host->save_bytes(c, self->trips, R * sizeof(long long)) ||
        host->save_bytes(c, self->st->accepted, R * sizeof(long long)) ||
        host->save_bytes(c, self->xacc, P * sizeof(unsigned long long)) ||
        host->save_bytes(c, self->xatt, P * sizeof(unsigned long long)))
        return -1;
    return 0;
}

static int restore(void *vself, const void *data, size_t size)
{
    pt *self = vself;
    pt_header h;
    if (size != blob_size(self) || size < sizeof h)
        return self->host->fail(self->ctx, "checkpoint: %zu bytes of sampler state, expected %zu", size, blob_size(self));
    memcpy(&h, data, sizeof h);
    if (h.magic != PT_MAGIC || h.nr != self->nr || h.ladders != self->ladders || h.n != self->n)
        return self->host->fail(self->ctx, "checkpoint: written for another ladder or system (%d x %d, N = %d)", h.nr,
                                h.ladders, h.n);
    if (!self->st) { /* before start: keep it for start() */
        free(self->restored);
        self->restored = malloc(size);
        if (!self->restored) return self->host->fail(self->ctx, "out of memory");
        memcpy(self->restored, data, size);
        self->restored_size = size;
        return 0;
    }
    apply_blob(self, self->st, data);
    return self->backend == METRO_BACKEND_CUDA ? upload(self, self->st) : 0;
}

/* ---- start -------------------------------------------------------------- */

static int start(void *vself, metro_state *st, const metro_potential_api *pot, void *pot_self)
{
    pt *self = vself;
    if (st->replicas != self->R || st->particles != self->n)
        return self->host->fail(self->ctx, "state has %d replicas of %d particles, expected %d of %d", st->replicas,
                                st->particles, self->R, self->n);
    self->st = st;
    self->pot = pot;
    self->pot_self = pot_self;
    /* Under MPI each rank advances a range of replicas; the exchanges are
     * decided on every rank alike from everyone's energies, so the chain
     * is the one process's, whatever the number of ranks. */
    self->host->replicas_here(self->ctx, self->R, &self->first, &self->last);
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    self->replica_slot = malloc(R * sizeof(int));
    self->slot_step = malloc(R * sizeof(float));
    self->trip_state = calloc(R, sizeof(int));
    self->trips = calloc(R, sizeof(long long));
    self->xacc = calloc(P, sizeof(unsigned long long));
    self->xatt = calloc(P, sizeof(unsigned long long));
    if (!self->replica_slot || !self->slot_step || !self->trip_state || !self->trips || !self->xacc || !self->xatt)
        return self->host->fail(self->ctx, "out of memory");
    for (int t = 0; t < self->R; ++t) {
        st->beta[t] = 1.0 / self->temps[t % self->nr];
        self->slot_step[t] = (float)(self->step * (self->step_sqrt ? sqrt(self->temps[t % self->nr] / self->temps[0]) : 1.0));
        st->slot_replica[t] = t;
        self->replica_slot[t] = t;
        /* the replica that starts at a ladder's lowest temperature is on
         * its way up */
        if (t % self->nr == 0 && self->nr > 1) self->trip_state[t] = 1;
        st->accepted[t] = st->attempted[t] = 0;
    }
    if (self->restored) {
        apply_blob(self, st, self->restored);
        free(self->restored);
        self->restored = NULL;
    }
    if (self->backend == METRO_BACKEND_CUDA) {
        if (start_cuda(self, st)) return -1;
        if (upload(self, st)) return -1;
    }
    self->host->log(self->ctx, METRO_LOG_INFO,
                    "%d temperatures from %g to %g x %d ladder%s = %d replicas; step %g%s, exchanges every %ld sweeps",
                    self->nr, self->temps[0], self->temps[self->nr - 1], self->ladders, self->ladders > 1 ? "s" : "",
                    self->R, (double)self->step, self->step_sqrt ? " x sqrt(T / T_min)" : "", self->M);
    return 0;
}

/* ---- advance ------------------------------------------------------------ */

/* A move whose energy change was NaN: rejected as an overlap is, so a
 * potential's bug would bias the chain without a word.  The CPU path stops
 * at the exchange segment where one occurs and names its lowest replica;
 * the device goes on to the next look at its counters and names the same
 * (nan_marks). */
static int nan_delta(pt *self, long long particle, int replica)
{
    return self->host->fail(self->ctx, "the potential's delta() returned NaN for particle %lld of replica %d (a bug in "
                                       "the potential: a move's energy change is a number, or +inf where the move is "
                                       "forbidden)", particle, replica);
}

/* The device's NaN marks (metro_pt_sweep_args.nan): the first move's, by
 * exchange segment and then replica, as nan_delta says. */
static int nan_marks(pt *self, cudaStream_t s)
{
    size_t R = (size_t)self->R;
    unsigned long long *m = malloc(2 * R * sizeof *m);
    if (!m) return self->host->fail(self->ctx, "out of memory");
    cudaError_t e = cudaMemcpyAsync(m, self->d_nan, 2 * R * sizeof *m, cudaMemcpyDeviceToHost, s);
    if (!e) e = cudaStreamSynchronize(s);
    int best = -1;
    for (size_t r = 0; !e && r < R; ++r)
        if (m[2 * r] && (best < 0 || (m[2 * r] - 1) / self->M < (m[2 * best] - 1) / self->M)) best = (int)r;
    const long long particle = best >= 0 ? (long long)m[2 * best + 1] : 0;
    free(m);
    PT_CUDA(e, "reading NaN marks");
    return best >= 0 ? nan_delta(self, particle, best) : 0;
}

/* `seg` sweeps of every replica on the CPU: each replica's chain on one
 * thread, trials through the potential's delta(). */
static int cpu_sweeps(pt *self, metro_state *st, long seg)
{
    const int n = self->n, R = self->last - self->first;
    /* a NaN from delta() (rejected by metro_accept as an overlap is: a
     * silent bias) stops its replica's chain; the first is reported */
    int nan_replica = -1, nan_particle = -1;
    const unsigned long long sweep0 = self->sweep;
    const metro_potential_api *pot = self->pot;
    void *ps = self->pot_self;
#ifdef _OPENMP
    int nt = self->threads > 0 ? self->threads : omp_get_max_threads();
    /* threads only for work worth waking them: ~1e6 pair terms (a ms) */
    int par = nt > 1 && R > 1 && (double)R * seg * n * n > 1e6;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
#endif
    for (int r = self->first; r < self->last; ++r) {
        metro_float4 *p = st->pos + (size_t)r * n;
        double E = st->energy[r];
        const double beta = st->beta[self->replica_slot[r]];
        const float step = self->slot_step[self->replica_slot[r]];
        long long acc = 0;
        for (long s = 0; s < seg; ++s) {
            const unsigned long long sw = sweep0 + (unsigned long long)s;
            for (int t = 0; t < n; ++t) {
                metro_pt_trial tr = metro_pt_make_trial(self->key, (uint32_t)r, sw, (uint32_t)t, n, step);
                metro_float4 nw = metro_pt_displace(p[tr.i], tr.dx, tr.dy, tr.dz);
                double dE = pot->delta(ps, p, n, tr.i, nw);
                if (dE != dE) {
#ifdef _OPENMP
#pragma omp critical(pt_nan)
#endif
                    if (nan_replica < 0 || r < nan_replica) nan_replica = r, nan_particle = tr.i;
                    s = seg; /* this replica's chain stops */
                    break;
                }
                if (metro_accept(beta * dE, tr.u)) {
                    p[tr.i] = nw;
                    E += dE;
                    ++acc;
                }
            }
        }
        st->energy[r] = E;
        st->accepted[r] += acc;
        st->attempted[r] += (long long)n * seg;
    }
    return nan_replica >= 0 ? nan_delta(self, nan_particle, nan_replica) : 0;
}

static metro_pt_exchange_args exchange_args(pt *self, int device)
{
    metro_pt_exchange_args a;
    metro_state *st = self->st;
    a.energy = device ? st->d_energy : st->energy;
    a.beta = device ? self->d_beta : st->beta;
    a.slot_replica = device ? self->d_slot_replica : st->slot_replica;
    a.replica_slot = device ? self->d_replica_slot : self->replica_slot;
    a.trip_state = device ? self->d_trip_state : self->trip_state;
    a.trips = device ? self->d_trips : self->trips;
    a.xaccepted = device ? self->d_xacc : self->xacc;
    a.xattempted = device ? self->d_xatt : self->xatt;
    a.key = self->key;
    a.round = self->round;
    a.nr = self->nr;
    a.ladders = self->ladders;
    return a;
}

static int spread(const pt *self)
{
    return self->first != 0 || self->last != self->R;
}

/* CUDA over MPI ranks: every rank's device advances its own replicas, and
 * the exchange kernel, run alike on every device, needs every energy. */
static int share_device_energies(pt *self, metro_state *st, cudaStream_t s)
{
    size_t f = (size_t)self->first, k = (size_t)(self->last - self->first), R = (size_t)self->R;
    PT_CUDA(cudaMemcpyAsync(st->energy + f, st->d_energy + f, k * sizeof(double), cudaMemcpyDeviceToHost, s), "reading %zu energies", k);
    PT_CUDA(cudaStreamSynchronize(s), "reading energies");
    if (self->host->share_replicas(self->ctx, st->energy, self->R, sizeof *st->energy)) return -1;
    PT_CUDA(cudaMemcpyAsync(st->d_energy, st->energy, R * sizeof(double), cudaMemcpyHostToDevice, s), "uploading %zu energies", R);
    return 0;
}

static int advance(void *vself, metro_state *st, long sweeps)
{
    pt *self = vself;
    const int cuda = self->backend == METRO_BACKEND_CUDA;
    cudaStream_t s = cuda ? (cudaStream_t)self->host->stream(self->ctx) : NULL;
    while (sweeps > 0) {
        /* up to the next exchange point (a multiple of M sweeps) */
        long seg = self->M - (long)(self->sweep % (unsigned long long)self->M);
        if (seg > sweeps) seg = sweeps;
        if (seg > (1L << 30)) seg = 1L << 30;
        if (cuda) {
            metro_pt_sweep_args a;
            a.pos = st->d_pos;
            a.energy = st->d_energy;
            a.beta = self->d_beta;
            a.replica_slot = self->d_replica_slot;
            a.accepted = self->d_acc;
            a.nan = self->d_nan;
            a.key = self->key;
            a.sweep0 = self->sweep;
            a.sweeps = (int)seg;
            a.n = self->n;
            a.first = self->first;
            a.replicas = self->last;
            a.step = self->d_step;
            void *args[] = {&a};
            dim3 grid = {(unsigned)((self->last - self->first + self->rpb - 1) / self->rpb), 1, 1};
            dim3 block = {(unsigned)(self->rpb * self->G), 1, 1};
            PT_CUDA(cudaLaunchKernel((const void *)self->k_sweeps, grid, block, args, self->smem, s), "launching sweeps");
        } else {
            if (cpu_sweeps(self, st, seg)) return -1;
        }
        self->sweep += (unsigned long long)seg;
        sweeps -= seg;
        if (self->nr > 1 && self->sweep % (unsigned long long)self->M == 0) {
            if (!cuda && self->host->share_replicas(self->ctx, st->energy, self->R, sizeof *st->energy)) return -1;
            if (cuda && spread(self) && share_device_energies(self, st, s)) return -1;
            metro_pt_exchange_args a = exchange_args(self, cuda);
            int parity = (int)(self->round & 1);
            long long pairs = (long long)((self->nr - parity) / 2) * self->ladders;
            if (cuda) {
                void *args[] = {&a};
                long long blocks = (pairs + 127) / 128;
                dim3 grid = {(unsigned)(blocks > 4096 ? 4096 : blocks < 1 ? 1 : blocks), 1, 1}, block = {128, 1, 1};
                PT_CUDA(cudaLaunchKernel((const void *)self->k_exchange, grid, block, args, 0, s), "launching exchanges");
            } else {
                for (int L = 0; L < self->ladders; ++L)
                    for (int k = parity; k + 1 < self->nr; k += 2) metro_pt_exchange_pair(&a, L, k);
            }
            self->round++;
        }
    }
    return 0;
}

/* ---- sync and finish ---------------------------------------------------- */

static int sync_state(void *vself, metro_state *st)
{
    pt *self = vself;
    if (self->backend != METRO_BACKEND_CUDA) {
        /* every rank gets every replica (a no-op with one rank) */
        const metro_host_api *h = self->host;
        return h->share_replicas(self->ctx, st->pos, self->R, (size_t)self->n * sizeof *st->pos) ||
               h->share_replicas(self->ctx, st->energy, self->R, sizeof *st->energy) ||
               h->share_replicas(self->ctx, st->accepted, self->R, sizeof *st->accepted) ||
               h->share_replicas(self->ctx, st->attempted, self->R, sizeof *st->attempted) ? -1 : 0;
    }
    cudaStream_t s = (cudaStream_t)self->host->stream(self->ctx);
    size_t R = (size_t)self->R;
    PT_CUDA(cudaMemcpyAsync(st->pos, st->d_pos, R * self->n * sizeof(metro_float4), cudaMemcpyDeviceToHost, s), "reading positions");
    PT_CUDA(cudaMemcpyAsync(st->energy, st->d_energy, R * sizeof(double), cudaMemcpyDeviceToHost, s), "reading energies");
    PT_CUDA(cudaMemcpyAsync(st->slot_replica, self->d_slot_replica, R * sizeof(int), cudaMemcpyDeviceToHost, s), "reading slots");
    PT_CUDA(cudaMemcpyAsync(self->replica_slot, self->d_replica_slot, R * sizeof(int), cudaMemcpyDeviceToHost, s), "reading slots");
    /* long long and unsigned long long share their representation */
    PT_CUDA(cudaMemcpyAsync(st->accepted, self->d_acc, R * sizeof(long long), cudaMemcpyDeviceToHost, s), "reading counters");
    PT_CUDA(cudaStreamSynchronize(s), "running the sweeps");
    if (nan_marks(self, s)) return -1;
    for (size_t r = 0; r < R; ++r) st->attempted[r] = (long long)self->n * (long long)self->sweep;
    if (spread(self)) {
        /* every rank gets every replica, and so does its device (the core's
         * energy check and the observables read the device's copy) */
        const metro_host_api *h = self->host;
        if (h->share_replicas(self->ctx, st->pos, self->R, (size_t)self->n * sizeof *st->pos) ||
            h->share_replicas(self->ctx, st->energy, self->R, sizeof *st->energy) ||
            h->share_replicas(self->ctx, st->accepted, self->R, sizeof *st->accepted))
            return -1;
        PT_CUDA(cudaMemcpyAsync(st->d_pos, st->pos, R * self->n * sizeof(metro_float4), cudaMemcpyHostToDevice, s), "uploading positions");
        PT_CUDA(cudaMemcpyAsync(st->d_energy, st->energy, R * sizeof(double), cudaMemcpyHostToDevice, s), "uploading energies");
        PT_CUDA(cudaMemcpyAsync(self->d_acc, st->accepted, R * sizeof(long long), cudaMemcpyHostToDevice, s), "uploading counters");
        PT_CUDA(cudaStreamSynchronize(s), "uploading the shared replicas");
    }
    return 0;
}

/* Exchange statistics and round trips device -> host. */
static int pull_stats(pt *self)
{
    if (self->backend != METRO_BACKEND_CUDA) return 0;
    cudaStream_t s = (cudaStream_t)self->host->stream(self->ctx);
    size_t R = (size_t)self->R, P = (size_t)self->ladders * (self->nr > 1 ? self->nr - 1 : 1);
    PT_CUDA(cudaMemcpyAsync(self->trip_state, self->d_trip_state, R * sizeof(int), cudaMemcpyDeviceToHost, s), "reading round trips");
    PT_CUDA(cudaMemcpyAsync(self->trips, self->d_trips, R * sizeof(long long), cudaMemcpyDeviceToHost, s), "reading round trips");
    PT_CUDA(cudaMemcpyAsync(self->xacc, self->d_xacc, P * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s), "reading exchanges");
    PT_CUDA(cudaMemcpyAsync(self->xatt, self->d_xatt, P * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s), "reading exchanges");
    PT_CUDA(cudaStreamSynchronize(s), "reading statistics");
    return 0;
}

static int finish(void *vself, metro_state *st)
{
    pt *self = vself;
    const metro_host_api *host = self->host;
    if (sync_state(self, st) || pull_stats(self)) return -1;
    FILE *f = host->open_output(self->ctx, "exchange.csv");
    if (!f) return -1;
    fprintf(f, "pair,T_low,T_high,attempted,accepted,acceptance\n");
    double worst = 1.0;
    int worst_k = -1;
    for (int k = 0; k + 1 < self->nr; ++k) {
        unsigned long long att = 0, acc = 0;
        for (int L = 0; L < self->ladders; ++L) {
            att += self->xatt[L * (self->nr - 1) + k];
            acc += self->xacc[L * (self->nr - 1) + k];
        }
        double a = att ? (double)acc / (double)att : NAN;
        if (att && a < worst) { worst = a; worst_k = k; }
        fprintf(f, "%d,%.9g,%.9g,%llu,%llu,%.6f\n", k, self->temps[k], self->temps[k + 1], att, acc, a);
    }
    if (fclose(f)) return host->fail(self->ctx, "exchange.csv: write error");
    f = host->open_output(self->ctx, "roundtrips.csv");
    if (!f) return -1;
    fprintf(f, "replica,ladder,slot,T_now,round_trips,accepted,attempted\n");
    long long total = 0;
    for (int r = 0; r < self->R; ++r) {
        int slot = self->replica_slot[r];
        total += self->trips[r];
        fprintf(f, "%d,%d,%d,%.9g,%lld,%lld,%lld\n", r, r / self->nr, slot, self->temps[slot % self->nr],
                self->trips[r], st->accepted[r], st->attempted[r]);
    }
    if (fclose(f)) return host->fail(self->ctx, "roundtrips.csv: write error");
    if (self->nr > 1)
        host->log(self->ctx, METRO_LOG_INFO,
                  "%llu sweeps, %llu exchange rounds; lowest pair acceptance %.3f (T %g-%g); %lld round trips "
                  "(%.3g per replica)",
                  self->sweep, self->round, worst_k >= 0 ? worst : NAN, worst_k >= 0 ? self->temps[worst_k] : NAN,
                  worst_k >= 0 ? self->temps[worst_k + 1] : NAN, total, (double)total / self->R);
    return 0;
}

/* Per replica: slot maps, step, round-trip state and counters (about 40
 * bytes) on the host and the device, and per ladder pair the exchange
 * counters. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    (void)self;
    size_t R = (size_t)setup->replicas;
    *host = R * 48 + R * 16;
    *device = R * 56;
    return 0;
}

static const metro_sampler_api api = {
    METRO_ABI_VERSION, create, destroy, start, advance, sync_state, finish, save, restore, memory, NULL, NULL, NULL, NULL, NULL,
};

METRO_PLUGIN(sampler, "parallel_tempering", "1.0.0",
             "replica exchange: a ladder of temperatures, local moves, Eq. (6) exchanges; CPU and CUDA", params, api)
