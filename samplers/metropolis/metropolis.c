/* metropolis — single-chain Metropolis Monte Carlo with local moves (one
 * replica at one temperature; PHYSICS.md §1, seed 000 §3.2).
 *
 * Parameters:
 *   temperature (required)  T; beta = 1/T
 *   step = 0.01             half-width of the trial cube: each coordinate of
 *                           the trial is x + step * (2u - 1), u uniform
 *   order = random          random: each trial picks a particle at random;
 *                           sequential: trial t of a sweep moves particle t
 *   scheme = auto           CUDA only: block (one block runs whole sweeps in
 *                           one launch), reduction (the conventional GPU
 *                           scheme of seed 002 §4: two launches per trial, the
 *                           n - 1 pair terms summed by a multi-block
 *                           reduction); auto = block for n <= 4096, else
 *                           reduction
 *   tune = false            during equilibration, every 100 sweeps multiply
 *                           step by (acceptance of those sweeps) /
 *                           target_acceptance, within [1/2, 2]; the tuned
 *                           step is logged when production starts (a
 *                           warning when equilibration < 100 tuned nothing)
 *   target_acceptance = 0.5
 * Tuning happens at multiples of 100 sweeps of the run, however the core
 * splits its advance() calls, so a tuned run is reproducible and the CUDA
 * chain still equals the CPU one; a resumed tuned run continues with the
 * tuned step (an untuned one takes step from its config).
 * A sweep is n trials.  The random numbers a sweep consumes and the move
 * are defined once in metropolis.h; both backends draw them from the
 * instance's Philox stream, so with one seed the CUDA trajectory equals the
 * CPU one (up to the order of the double sums of dE).
 *
 * The sampler keeps st->energy[0] (the running total) and
 * st->attempted[0] / st->accepted[0]; save() and restore() carry the two
 * counters.  finish() writes acceptance.csv (replica, attempted, accepted,
 * rate) and logs the rate.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"

#include "metropolis.h"

/* Uniforms generated per chunk of sweeps: at most this many floats, but
 * always at least one sweep's worth. */
#define CHUNK_FLOATS (1u << 22)
/* CPU: uniforms are drawn this many at a time into a pool, because one call
 * of cuRAND's host generator costs ~150 us whatever its size (measured:
 * 16 or 4096 floats alike), which dominated runs measuring every sweep. */
#define POOL_FLOATS (1u << 16)
/* auto picks the block scheme up to this many particles */
#define BLOCK_MAX_N 4096
/* Sweeps between two adjustments of the step when tuning. */
#define TUNE_SWEEPS 100
/* Conventional scheme: threads per block, most blocks of the reduction. */
#define RED_THREADS 256
#define RED_MAX_BLOCKS 1024

typedef enum { SCHEME_AUTO, SCHEME_BLOCK, SCHEME_REDUCTION } scheme_t;

/* What save() writes before the unused uniforms; restore() reads it back. */
typedef struct saved_state {
    long long attempted, accepted;   /* replica 0's counters */
    long long tune_attempted, tune_accepted; /* counters at the last tuning */
    double step;
} saved_state;

typedef struct metropolis {
    const metro_host_api *host;
    metro_ctx *ctx;
    double temperature, beta;
    float step;
    int random_order;
    int tune, tune_reported;
    int tuned;                  /* a tuning step has scaled the step */
    long long equilibration;    /* [run] equilibration, for the warning */
    double target;
    long long tune_att0, tune_acc0;  /* counters at the last tuning */
    scheme_t scheme;            /* resolved at start() on CUDA */
    /* set by start() */
    metro_state *st;
    const metro_potential_api *pot;
    void *pot_self;
    int n;
    /* state restored before start(), applied there */
    saved_state saved;
    int have_saved;
    /* CPU: the pool of drawn uniforms, pool[pool_pos .. pool_n) not yet
     * used (also restored into on CUDA, from a CPU checkpoint) */
    float *pool;
    size_t pool_pos, pool_n, pool_cap;
    /* CUDA: device buffer of one chunk's uniforms */
    float *u;
    size_t ucap;
    /* CUDA */
    long long *d_counters;      /* [attempted, accepted, 1 + first NaN particle] */
    double *d_partial;
    void *k_block, *k_partial, *k_decide;
} metropolis;

static const metro_param_decl params[] = {
    {"temperature", METRO_PARAM_REAL, NULL, 1e-6, 1e6, NULL, "energy/k_B",
     "temperature T of the chain (beta = 1/T)"},
    {"step", METRO_PARAM_REAL, "0.01", 1e-7, 1e6, NULL, "length",
     "half-width of the trial cube: each coordinate moves by step * (2u - 1)"},
    {"order", METRO_PARAM_CHOICE, "random", 0, 0, "random|sequential", "",
     "random: each trial picks a particle at random; sequential: particles in index order"},
    {"scheme", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|block|reduction", "",
     "CUDA kernel: block (one launch per chunk of sweeps), reduction (two launches per "
     "trial), auto (block for n <= 4096)"},
    {"tune", METRO_PARAM_BOOL, "false", 0, 0, NULL, "",
     "adjust step every 100 sweeps of equilibration toward target_acceptance"},
    {"target_acceptance", METRO_PARAM_REAL, "0.5", 0.05, 0.95, NULL, "",
     "acceptance rate the tuning of step aims at"},
    METRO_PARAM_END};

/* ---- helpers ------------------------------------------------------------- */

/* Room for `floats` values in the pool; returns 0 or -1 (failed). */
static int reserve_pool(metropolis *m, size_t floats)
{
    if (floats <= m->pool_cap) return 0;
    float *p = realloc(m->pool, floats * sizeof(float));
    if (!p) return m->host->fail(m->ctx, "out of memory for %zu uniforms", floats);
    m->pool = p;
    m->pool_cap = floats;
    return 0;
}

/* CPU: the next k uniforms of the stream, from the pool (refilled with at
 * least POOL_FLOATS at a time).  Returns them, or NULL (failed). */
static const float *take_uniforms(metropolis *m, size_t k)
{
    size_t rest = m->pool_n - m->pool_pos;
    if (rest < k) {
        size_t want = k > POOL_FLOATS ? k : POOL_FLOATS;
        if (reserve_pool(m, want)) return NULL;
        memmove(m->pool, m->pool + m->pool_pos, rest * sizeof(float));
        if (m->host->uniform(m->ctx, m->pool + rest, want - rest)) return NULL;
        m->pool_pos = 0;
        m->pool_n = want;
    }
    const float *u = m->pool + m->pool_pos;
    m->pool_pos += k;
    return u;
}

/* CUDA: the next k uniforms of the stream into the device buffer m->u:
 * first what a restored pool still holds, then fresh ones.  Returns 0 or
 * -1 (failed). */
static int device_uniforms(metropolis *m, size_t k)
{
    cudaStream_t stream = (cudaStream_t)m->host->stream(m->ctx);
    if (k > m->ucap) {
        /* the run's stream does not block with the legacy one: wait for the
         * kernels that still read the old buffer before freeing it */
        if (m->u && m->host->cuda(m->ctx, cudaStreamSynchronize(stream), "sync")) return -1;
        if (m->u) cudaFree(m->u);
        m->u = NULL;
        m->ucap = 0;
        if (m->host->cuda(m->ctx, cudaMalloc((void **)&m->u, k * sizeof(float)), "cudaMalloc of %zu bytes for uniforms", k * sizeof(float)))
            return -1;
        m->ucap = k;
    }
    size_t rest = m->pool_n - m->pool_pos, r = rest < k ? rest : k;
    if (r) {
        if (m->host->cuda(m->ctx, cudaMemcpyAsync(m->u, m->pool + m->pool_pos, r * sizeof(float),
                                          cudaMemcpyHostToDevice, stream),
                       "upload restored uniforms") ||
            m->host->cuda(m->ctx, cudaStreamSynchronize(stream), "sync"))
            return -1;
        m->pool_pos += r;
    }
    return r < k ? m->host->uniform(m->ctx, m->u + r, k - r) : 0;
}

/* ---- the table ----------------------------------------------------------- */

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p,
                  metro_setup *setup, void **out)
{
    metropolis *m = calloc(1, sizeof *m);
    if (!m) return host->fail(ctx, "out of memory");
    m->host = host;
    m->ctx = ctx;
    m->temperature = host->param_real(p, "temperature");
    m->beta = 1.0 / m->temperature;
    m->step = (float)host->param_real(p, "step");
    m->random_order = strcmp(host->param_string(p, "order"), "sequential") != 0;
    m->tune = host->param_bool(p, "tune");
    m->target = host->param_real(p, "target_acceptance");
    m->equilibration = setup->equilibration;
    const char *s = host->param_string(p, "scheme");
    m->scheme = !strcmp(s, "block") ? SCHEME_BLOCK : !strcmp(s, "reduction") ? SCHEME_REDUCTION
                                                                            : SCHEME_AUTO;
    setup->replicas = 1;
    *out = m;
    return 0;
}

static void destroy(void *self)
{
    metropolis *m = self;
    if (!m) return;
    if (m->st && m->st->backend == METRO_BACKEND_CUDA) {
        cudaFree(m->u);
        cudaFree(m->d_counters);
        cudaFree(m->d_partial);
    }
    free(m->pool);
    free(m);
}

static int start(void *self, metro_state *st, const metro_potential_api *pot, void *pot_self)
{
    metropolis *m = self;
    m->st = st;
    m->pot = pot;
    m->pot_self = pot_self;
    m->n = st->particles;
    st->beta[0] = m->beta;
    st->slot_replica[0] = 0;
    if (m->have_saved) {
        st->attempted[0] = m->saved.attempted;
        st->accepted[0] = m->saved.accepted;
    } else {
        m->tune_att0 = st->attempted[0];
        m->tune_acc0 = st->accepted[0];
    }
    if (st->backend != METRO_BACKEND_CUDA) {
        if (m->scheme != SCHEME_AUTO)
            m->host->log(m->ctx, METRO_LOG_INFO, "scheme is for CUDA; ignored on CPU");
        return 0;
    }

    if (m->scheme == SCHEME_AUTO) m->scheme = m->n <= BLOCK_MAX_N ? SCHEME_BLOCK : SCHEME_REDUCTION;
    m->host->log(m->ctx, METRO_LOG_INFO, "CUDA scheme %s for %d particles",
                 m->scheme == SCHEME_BLOCK ? "block" : "reduction", m->n);
    if (m->scheme == SCHEME_BLOCK) {
        if (m->host->kernel(m->ctx, "metropolis_block", &m->k_block)) return -1;
    } else {
        if (m->host->kernel(m->ctx, "metropolis_partial", &m->k_partial) ||
            m->host->kernel(m->ctx, "metropolis_decide", &m->k_decide))
            return -1;
        if (m->host->cuda(m->ctx, cudaMalloc((void **)&m->d_partial, RED_MAX_BLOCKS * sizeof(double)),
                       "cudaMalloc partials"))
            return -1;
    }
    long long c[3] = {st->attempted[0], st->accepted[0], 0};
    if (m->host->cuda(m->ctx, cudaMalloc((void **)&m->d_counters, sizeof c), "cudaMalloc counters") ||
        /* on the run's stream (non-blocking: the legacy stream's copy would
         * not be ordered before the first launch), c on the stack until done */
        m->host->cuda(m->ctx, cudaMemcpyAsync(m->d_counters, c, sizeof c, cudaMemcpyHostToDevice, m->host->stream(m->ctx)),
                      "upload counters") ||
        m->host->cuda(m->ctx, cudaStreamSynchronize(m->host->stream(m->ctx)), "upload counters"))
        return -1;
    return 0;
}

/* A move whose energy change was NaN (the CPU path: at the move; CUDA: the
 * first one since the last look at the counters) */
static int nan_delta(metropolis *m, long long i)
{
    return m->host->fail(m->ctx, "the potential's delta() returned NaN for particle %lld (a bug in the potential: a "
                                 "move's energy change is a number, or +inf where the move is forbidden)", i);
}

/* CPU reference: the chain of metropolis.h with the potential's delta(). */
static int cpu_sweeps(metropolis *m, const float *u, long sweeps)
{
    metro_state *st = m->st;
    const int n = m->n, nu = METRO_METROPOLIS_NU(m->random_order);
    metro_float4 *pos = st->pos;
    double E = st->energy[0];
    long long acc = 0;
    for (long s = 0; s < sweeps; s++)
        for (int t = 0; t < n; t++) {
            const float *q = u + ((size_t)s * (size_t)n + (size_t)t) * (size_t)nu;
            int i;
            metro_float4 trial = metro_metropolis_trial(q, t, n, m->random_order, m->step, pos, &i);
            double dE = m->pot->delta(m->pot_self, pos, n, i, trial);
            /* metro_accept rejects NaN as it rejects an overlap: a bug in a
             * potential would bias the chain without a word */
            if (dE != dE) return nan_delta(m, i);
            if (metro_accept(m->beta * dE, metro_metropolis_accept_u(q, m->random_order))) {
                pos[i] = trial;
                E += dE;
                acc++;
            }
        }
    st->energy[0] = E;
    st->attempted[0] += (long long)sweeps * n;
    st->accepted[0] += acc;
    return 0;
}

static int cuda_sweeps(metropolis *m, long sweeps)
{
    metro_state *st = m->st;
    cudaStream_t stream = (cudaStream_t)m->host->stream(m->ctx);
    int n = m->n, ro = m->random_order, chain = st->chain;
    float step = m->step;
    double beta = m->beta;
    if (m->scheme == SCHEME_BLOCK) {
        int threads = (n + 31) / 32 * 32;
        if (threads > 512) threads = 512;
        /* positions in shared memory when they fit the 48 KiB a block gets
         * without opting in, less 1 KiB for the kernel's static arrays */
        size_t smem = (size_t)n * sizeof(metro_float4);
        int use_smem = smem <= 47 * 1024;
        if (!use_smem) smem = 0;
        void *args[] = {&st->d_pos, &st->d_energy, &m->d_counters, &m->u, &n, &sweeps, &ro,
                        &step, &beta, &chain, &use_smem};
        dim3 grid = {1, 1, 1}, block = {(unsigned)threads, 1, 1};
        return m->host->cuda(m->ctx, cudaLaunchKernel((const void *)m->k_block, grid, block, args, smem, stream),
                          "launch metropolis_block");
    }
    int nb = (n + RED_THREADS - 1) / RED_THREADS;
    if (nb > RED_MAX_BLOCKS) nb = RED_MAX_BLOCKS;
    const int nu = METRO_METROPOLIS_NU(ro);
    dim3 grid = {(unsigned)nb, 1, 1}, block = {RED_THREADS, 1, 1}, one = {1, 1, 1}, warp = {32, 1, 1};
    for (long s = 0; s < sweeps; s++)
        for (int t = 0; t < n; t++) {
            const float *q = m->u + ((size_t)s * (size_t)n + (size_t)t) * (size_t)nu;
            void *pa[] = {&st->d_pos, &q, &t, &n, &ro, &step, &chain, &m->d_partial};
            void *da[] = {&st->d_pos, &st->d_energy, &m->d_counters, &q, &t, &n, &ro,
                          &step, &beta, &m->d_partial, &nb};
            if (m->host->cuda(m->ctx, cudaLaunchKernel((const void *)m->k_partial, grid, block, pa, 0, stream),
                           "launch metropolis_partial") ||
                m->host->cuda(m->ctx, cudaLaunchKernel((const void *)m->k_decide, one, warp, da, 0, stream),
                           "launch metropolis_decide"))
                return -1;
        }
    return 0;
}

static int fetch_counters(metropolis *m);

/* Sweeps in chunks of at most CHUNK_FLOATS uniforms. */
static int run_sweeps(metropolis *m, metro_state *st, long sweeps)
{
    const size_t per = (size_t)m->n * METRO_METROPOLIS_NU(m->random_order);
    long chunk = (long)(CHUNK_FLOATS / per);
    if (chunk < 1) chunk = 1;
    while (sweeps > 0) {
        long c = sweeps < chunk ? sweeps : chunk;
        if (st->backend == METRO_BACKEND_CUDA) {
            if (device_uniforms(m, (size_t)c * per) || cuda_sweeps(m, c)) return -1;
        } else {
            const float *u = take_uniforms(m, (size_t)c * per);
            if (!u) return -1;
            if (cpu_sweeps(m, u, c)) return -1;
        }
        sweeps -= c;
    }
    return 0;
}

/* One tuning step: scale step by the acceptance since the last one over
 * the target, within [1/2, 2].  Returns 0 or -1 (failed). */
static int tune_step(metropolis *m, metro_state *st)
{
    if (fetch_counters(m)) return -1;
    long long att = st->attempted[0] - m->tune_att0, acc = st->accepted[0] - m->tune_acc0;
    m->tune_att0 = st->attempted[0];
    m->tune_acc0 = st->accepted[0];
    if (att <= 0) return 0;
    double f = ((double)acc / (double)att) / m->target;
    f = f < 0.5 ? 0.5 : f > 2.0 ? 2.0 : f;
    m->step = (float)(m->step * f);
    m->tuned = 1;
    return 0;
}

static int advance(void *self, metro_state *st, long sweeps)
{
    metropolis *m = self;
    if (m->tune && st->measuring && !m->tune_reported) {
        m->tune_reported = 1;
        if (m->tuned)
            m->host->log(m->ctx, METRO_LOG_INFO, "step tuned during equilibration to %.6g (target acceptance %g)",
                         (double)m->step, m->target);
        else /* equilibration shorter than one tuning interval: saying "tuned" would be false */
            m->host->log(m->ctx, METRO_LOG_WARN,
                         "tune = true, but nothing was tuned: the step is adjusted every %d sweeps of equilibration, "
                         "and [run] equilibration = %lld (give it at least %d); the run keeps step = %g",
                         TUNE_SWEEPS, m->equilibration, TUNE_SWEEPS, (double)m->step);
    }
    for (long done = 0; done < sweeps;) {
        long seg = sweeps - done;
        int tuning = m->tune && !st->measuring;
        if (tuning) { /* stop at the next multiple of TUNE_SWEEPS of the run */
            long to_next = TUNE_SWEEPS - (long)((st->sweep + done) % TUNE_SWEEPS);
            if (seg > to_next) seg = to_next;
        }
        if (run_sweeps(m, st, seg)) return -1;
        done += seg;
        if (tuning && (st->sweep + done) % TUNE_SWEEPS == 0 && tune_step(m, st)) return -1;
    }
    return 0;
}

/* Counters from the device (CUDA) into st; a no-op on CPU. */
static int fetch_counters(metropolis *m)
{
    if (!m->st || m->st->backend != METRO_BACKEND_CUDA) return 0;
    long long c[3];
    cudaStream_t stream = (cudaStream_t)m->host->stream(m->ctx);
    if (m->host->cuda(m->ctx, cudaMemcpyAsync(c, m->d_counters, sizeof c, cudaMemcpyDeviceToHost, stream),
                   "download counters") ||
        m->host->cuda(m->ctx, cudaStreamSynchronize(stream), "sync"))
        return -1;
    if (c[2]) return nan_delta(m, c[2] - 1);
    m->st->attempted[0] = c[0];
    m->st->accepted[0] = c[1];
    return 0;
}

static int sync_state(void *self, metro_state *st)
{
    metropolis *m = self;
    if (st->backend != METRO_BACKEND_CUDA) return 0;
    cudaStream_t stream = (cudaStream_t)m->host->stream(m->ctx);
    if (m->host->cuda(m->ctx, cudaMemcpyAsync(st->pos, st->d_pos, (size_t)m->n * sizeof(metro_float4),
                                      cudaMemcpyDeviceToHost, stream), "download positions") ||
        m->host->cuda(m->ctx, cudaMemcpyAsync(st->energy, st->d_energy, sizeof(double),
                                      cudaMemcpyDeviceToHost, stream), "download energy"))
        return -1;
    return fetch_counters(m); /* synchronises the stream */
}

static int finish(void *self, metro_state *st)
{
    metropolis *m = self;
    if (fetch_counters(m)) return -1;
    long long a = st->attempted[0], c = st->accepted[0];
    double rate = a ? (double)c / (double)a : 0.0;
    FILE *f = m->host->open_output(m->ctx, "acceptance.csv");
    if (!f) return -1;
    fprintf(f, "replica,attempted,accepted,rate\n0,%lld,%lld,%.6f\n", a, c, rate);
    if (fclose(f)) return m->host->fail(m->ctx, "cannot write acceptance.csv");
    m->host->log(m->ctx, METRO_LOG_INFO,
                 "acceptance %.4f (%lld of %lld trials) at T = %g, step %g%s", rate, c, a,
                 m->temperature, (double)m->step, m->tuned ? " (tuned)" : "");
    return 0;
}

/* Saved state: a saved_state (counters, tuning, step), then the uniforms
 * drawn from the stream but not used yet (the pool), so that a restart
 * from the stream's saved offset continues the very same chain. */
static int save(void *self)
{
    metropolis *m = self;
    saved_state v = m->saved;
    if (m->st) {
        if (fetch_counters(m)) return -1;
        v.attempted = m->st->attempted[0];
        v.accepted = m->st->accepted[0];
    }
    v.tune_attempted = m->tune_att0;
    v.tune_accepted = m->tune_acc0;
    v.step = m->step;
    if (m->host->save_bytes(m->ctx, &v, sizeof v)) return -1;
    size_t rest = m->pool_n - m->pool_pos;
    return rest ? m->host->save_bytes(m->ctx, m->pool + m->pool_pos, rest * sizeof(float)) : 0;
}

static int restore(void *self, const void *data, size_t size)
{
    metropolis *m = self;
    if (size < sizeof(saved_state) || (size - sizeof(saved_state)) % sizeof(float))
        return m->host->fail(m->ctx, "saved state has %zu bytes: not %zu + 4k", size,
                             sizeof(saved_state));
    memcpy(&m->saved, data, sizeof m->saved);
    m->have_saved = 1;
    if (m->tune) m->step = (float)m->saved.step; /* tuned: state; else: the config's */
    m->tune_att0 = m->saved.tune_attempted;
    m->tune_acc0 = m->saved.tune_accepted;
    /* the counters at the last tuning leave the fresh chain's 0 only at a
     * tuning step, so they tell whether one happened (the saved layout stays) */
    m->tuned = m->tune && m->tune_att0 > 0;
    size_t rest = (size - sizeof(saved_state)) / sizeof(float);
    if (reserve_pool(m, rest)) return -1;
    if (rest) /* an empty pool may have no buffer: memcpy wants one even for 0 bytes */
        memcpy(m->pool, (const char *)data + sizeof(saved_state), rest * sizeof(float));
    m->pool_pos = 0;
    m->pool_n = rest;
    if (!m->st) return 0; /* start() applies the counters */
    m->st->attempted[0] = m->saved.attempted;
    m->st->accepted[0] = m->saved.accepted;
    long long c[2] = {m->saved.attempted, m->saved.accepted}; /* (the NaN mark stays 0) */
    if (m->st->backend == METRO_BACKEND_CUDA && m->d_counters) {
        cudaStream_t stream = (cudaStream_t)m->host->stream(m->ctx);
        return m->host->cuda(m->ctx, cudaMemcpyAsync(m->d_counters, c, sizeof c, cudaMemcpyHostToDevice,
                                             stream), "upload counters") ||
               m->host->cuda(m->ctx, cudaStreamSynchronize(stream), "sync");
    }
    return 0;
}

/* The uniforms of a chunk of sweeps (4 per move) on the host and, on CUDA,
 * on the device: a few sweeps' worth at most. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    size_t per_sweep = 4 * (size_t)setup->particles * sizeof(float);
    *host = 4 * per_sweep + (1u << 20);
    *device = 4 * per_sweep + (1u << 16);
    return 0;
}

static const metro_sampler_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .start = start,
    .advance = advance,
    .sync = sync_state,
    .finish = finish,
    .save = save,
    .restore = restore,
    .memory = memory,
};

METRO_PLUGIN(sampler, "metropolis", "1.0.0",
             "single-chain Metropolis with local moves (CPU reference; CUDA block or reduction)",
             params, api)
