/* brush — sequential-updating Metropolis (seed 002 §2): in one cycle (one
 * sweep) every particle, in index order, tries one move, a displacement
 * uniform in the cube of side D = `step` around it, accepted with
 * min(1, exp(-ΔE)) (energies in k_T: β = 1).
 *
 * CPU backend: exactly that chain, ΔE from the potential's delta() (double
 * sums, OpenMP inside the potential).  CUDA backend: the Brush Metropolis
 * algorithm of seed 002 §3 (brush.cu), the same chain from the same random
 * numbers (brush.h), so with one seed the GPU trajectory equals the CPU one
 * up to floating-point ties.
 *
 * Parameters:
 *   step = 0         D, the side of the trial cube (NOT a half-width as in
 *                    metropolis' step); 0 = 2 R_cell / 3, the paper's
 *                    "D about L/3" with L the diameter of the cell
 *   eta = 0          CUDA: threads per particle (1, 2, ..., 32); 0 = auto
 *                    (with block and per_thread auto too: groups of 64
 *                    particles up to N = 8192, 128 up to 131072, 256 below
 *                    2^19; else T * SMs / N rounded down to a power of two)
 *   block = 0        CUDA: threads per block (32 ... 1024, a power of two);
 *                    0 = auto (4 S up to N = 16384, 1024 below 2^19, else
 *                    256)
 *   per_thread = 0   CUDA: particles per thread (1, 2, 4); 0 = auto (1 below
 *                    N = 2^19, else 2)
 *   cycles_per_launch = 0
 *                    CUDA: cycles one launch runs as one chain of (cycle,
 *                    group) tickets, so that a cycle's first groups sum over
 *                    the partners the previous cycle has finished while its
 *                    last groups still decide; 0 = auto (1 up to N = 8192,
 *                    else as many as 64 MB of uniforms hold, up to 64)
 *   trials = 0       particles that try a move per cycle, from index 0
 *                    (0 = all: a full cycle).  Fewer is for timing the CPU
 *                    backend on a subset; CUDA runs full cycles only.
 *
 * Bookkeeping: st->energy[0] += every accepted ΔE; st->accepted[0],
 * st->attempted[0]; a per-cycle acceptance count (on CUDA kept on the
 * device, copied back at sync) that finish() writes to acceptance.csv
 * (cycle, accepted, attempted, rate).  save()/restore() carry the cycle
 * count, that history and the uniforms drawn ahead.  One replica only.
 *
 * Ensembles (join/leave, brush_batch.h): the systems of one process with
 * the same size and layout (and, as the core checks, the same device code
 * and constants), at most 128 per group, share every launch: each system's thread draws its uniforms and
 * posts its cycles, the last to post launches brush_batch_p{1,2,4} for
 * all of them.  Each chain stays bit for bit its separate run's; for an
 * ensemble of small systems a layout of two particles per thread (block
 * 256, per_thread 2, eta 8 at N = 8192) fills the GPU best.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"

#include "brush.h"
#include "brush_batch.h"
#include "brush_cycles.h"

/* Per-cycle acceptance counts kept on the device between syncs. */
#define BRUSH_SLOTS 4096
/* auto configuration switches to the throughput layout here */
#define BRUSH_LARGE_N 524288

typedef struct brush {
    const metro_host_api *host;
    metro_ctx *ctx;
    double step_param, cell_radius;
    int eta_param, block_param, per_thread_param, per_launch_param;
    long trials;
    float step;
    /* start() */
    metro_state *st;
    const metro_potential_api *pot;
    void *pot_self;
    int n;
    long long cycles;            /* cycles done, restored ones included */
    /* the history of acceptances and the uniforms drawn ahead (the CPU
     * backend's source; on CUDA only what a restored CPU checkpoint left) */
    brush_cycles cyc;
    /* CUDA */
    void *kernel;
    int threads, per_thread, eta, group_size, groups, tile, pre;
    int per_launch; /* cycles per kernel launch, at most */
    size_t smem;
    metro_float4 *d_rnd;
    unsigned *d_ticket, *d_flags, *d_done;
    double *d_group_de;
    int *d_group_acc;
    long long *d_cycle_acc;
    unsigned long long *d_nan;   /* brush_launch.nan */
    int slot;
    unsigned epoch;
    /* METRO_BRUSH_TRACE set: per-group time stamps (brush.h), summarised in
     * the log after every cycle (each cycle then waits for the device) */
    unsigned long long *d_trace, *h_trace;
    /* launches shared with other systems (join(), brush_batch.h) */
    void *batch_kernel;
    brush_batch_key key;
    struct brush_group *grp;     /* NULL: launches of its own */
    int member;                  /* its index in grp */
    cudaStream_t stream;         /* its own stream (host->stream) */
    cudaEvent_t ev;              /* its uniforms are drawn */
} brush;

/* Systems that share launches (brush_batch.h): the rendezvous, each
 * member's launch block on the device, the group's stream and counter. */
typedef struct brush_group {
    brush_rv rv;
    int k, refs;                 /* members; members not yet destroyed (under rv.mu) */
    brush **m;
    brush_batch_var *var;        /* each member's post of the current round */
    brush_launch *d_sys;         /* device, one per member (made at the first launch) */
    unsigned *d_ticket;
    unsigned base;
    cudaStream_t stream;
    cudaEvent_t done;
    char err[512];               /* why a shared launch failed */
} brush_group;

static const metro_param_decl params[] = {
    {"step", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "side D of the trial cube around a particle (0: 2/3 of the cell radius, the paper's L/3)"},
    {"eta", METRO_PARAM_INT, "0", 0, 32, NULL, "",
     "CUDA: threads per particle, a power of two (0: auto)"},
    {"block", METRO_PARAM_INT, "0", 0, 1024, NULL, "",
     "CUDA: threads per block, a power of two from 32 (0: auto)"},
    {"per_thread", METRO_PARAM_INT, "0", 0, 4, NULL, "",
     "CUDA: particles per thread, 1, 2 or 4 (0: auto)"},
    {"cycles_per_launch", METRO_PARAM_INT, "0", 0, 64, NULL, "",
     "CUDA: cycles per kernel launch, run as one chain of groups (0: auto)"},
    {"trials", METRO_PARAM_INT, "0", 0, 2147483647, NULL, "",
     "particles that try a move per cycle, from index 0 (0: all); partial cycles are for timing, CPU only"},
    METRO_PARAM_END};

static int pow2(long x)
{
    return x > 0 && (x & (x - 1)) == 0;
}

/* ---- create / destroy ---------------------------------------------------- */

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p, metro_setup *setup,
                  void **self)
{
    brush *b = calloc(1, sizeof *b);
    if (!b) return host->fail(ctx, "out of memory");
    b->host = host;
    b->ctx = ctx;
    b->cyc = (brush_cycles){.host = host, .ctx = ctx, .who = "brush"};
    b->step_param = host->param_real(p, "step");
    b->eta_param = (int)host->param_int(p, "eta");
    b->block_param = (int)host->param_int(p, "block");
    b->per_thread_param = (int)host->param_int(p, "per_thread");
    b->per_launch_param = (int)host->param_int(p, "cycles_per_launch");
    b->trials = host->param_int(p, "trials");
    if (!host->fact(ctx, "cell_radius", &b->cell_radius)) b->cell_radius = 0; /* open space */
    int bad = 0;
    if (b->eta_param && !pow2(b->eta_param))
        bad = host->fail(ctx, "eta: %d is not a power of two", b->eta_param);
    else if (b->block_param && (!pow2(b->block_param) || b->block_param < 32))
        bad = host->fail(ctx, "block: %d is not a power of two from 32 to 1024", b->block_param);
    else if (b->per_thread_param == 3)
        bad = host->fail(ctx, "per_thread: 3 is not one of 1, 2, 4");
    else if (b->step_param > 0)
        b->step = (float)b->step_param;
    else if (b->cell_radius > 0)
        b->step = (float)(2.0 * b->cell_radius / 3.0);
    else
        bad = host->fail(ctx, "step: give the side of the trial cube (the potential has no cell radius to derive it from)");
    if (!bad && b->trials > setup->particles)
        bad = host->fail(ctx, "trials: %ld is more than the %d particles", b->trials, setup->particles);
    if (!bad && b->trials && setup->backend == METRO_BACKEND_CUDA)
        bad = host->fail(ctx, "trials: partial cycles exist on the CPU backend only");
    if (bad) {
        free(b);
        return -1;
    }
    setup->replicas = 1;
    *self = b;
    return 0;
}

static void free_cuda(brush *b)
{
    cudaFree(b->d_rnd);
    cudaFree(b->d_ticket);
    cudaFree(b->d_flags);
    cudaFree(b->d_done);
    cudaFree(b->d_group_de);
    cudaFree(b->d_group_acc);
    cudaFree(b->d_cycle_acc);
    cudaFree(b->d_nan);
    cudaFree(b->d_trace);
    free(b->h_trace);
    b->d_trace = NULL;
    b->h_trace = NULL;
    b->d_rnd = NULL;
    b->d_ticket = b->d_flags = b->d_done = NULL;
    b->d_group_de = NULL;
    b->d_group_acc = NULL;
    b->d_cycle_acc = NULL;
}

static void group_drop(brush *b);

static void destroy(void *self)
{
    brush *b = self;
    if (!b) return;
    group_drop(b);
    if (b->ev) cudaEventDestroy(b->ev);
    if (b->st && b->st->backend == METRO_BACKEND_CUDA) free_cuda(b);
    brush_cycles_free(&b->cyc);
    free(b);
}

/* ---- start --------------------------------------------------------------- */

/* METRO_BRUSH_TRACE: NULL when off (unset, empty or "0"); "1" for the log
 * line only; otherwise a file for the raw stamps too. */
static const char *trace_setting(void)
{
    const char *t = getenv("METRO_BRUSH_TRACE");
    return t && *t && strcmp(t, "0") ? t : NULL;
}

/* Choose and check the CUDA layout; returns 0 or -1 (message recorded). */
static int configure(brush *b)
{
    const metro_host_api *h = b->host;
    int dev = 0, sms = 0;
    if (b->host->cuda(b->ctx, cudaGetDevice(&dev), "CUDA device") ||
        b->host->cuda(b->ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "CUDA device"))
        return -1;
    /* Auto layout (bench/NOTES_brush.md, "layout sweep"): the chain of
     * groups costs about N S (each group's decisions grow as S^2), the
     * partner sums N^2 whatever S, so groups are small where the chain
     * dominates: S = 64 up to N = 8192, 128 up to 131072, 256 below 2^19,
     * with eta = T / S threads per particle; from 2^19, 256-thread blocks
     * of 2 particles per thread (S = 512), where the partner sums dominate
     * and sharing each partner load between two particles pays. */
    const int large = b->n >= BRUSH_LARGE_N;
    const int tuned = !b->block_param && !b->per_thread_param && !b->eta_param;
    const int S0 = b->n <= 8192 ? 64 : b->n <= 131072 ? 128 : 256;
    int T = b->block_param ? b->block_param : large ? 256 : b->n <= 16384 ? 4 * S0 : 1024;
    int P = b->per_thread_param ? b->per_thread_param : large ? 2 : 1;
    int maxT = P == 1 ? 1024 : 256; /* the kernels' launch bounds */
    if (T > maxT) {
        if (b->block_param) return h->fail(b->ctx, "block: at most %d threads with per_thread = %d", maxT, P);
        T = maxT;
    }
    int eta = b->eta_param;
    if (!eta && tuned && !large) {
        eta = T / S0;
    } else if (!eta) {
        long want = (long)T * sms / (b->n > 0 ? b->n : 1);
        eta = 1;
        while (eta < 32 && 2L * eta <= want && T / (2 * eta) >= 32) eta *= 2;
    }
    if (T / eta < 32)
        return h->fail(b->ctx, "eta: %d threads per particle leave %d particles of a %d-thread block: need 32 or more",
                       eta, T / eta, T);
    b->threads = T;
    b->per_thread = P;
    b->eta = eta;
    b->group_size = P * T / eta;
    b->groups = (b->n + b->group_size - 1) / b->group_size;
    b->tile = b->group_size > 1024 ? b->group_size : T >= 256 ? 1024 : 512;

    static const char *names[5] = {NULL, "brush_cycle_p1", "brush_cycle_p2", NULL, "brush_cycle_p4"};
    static const char *batch_names[5] = {NULL, "brush_batch_p1", "brush_batch_p2", NULL, "brush_batch_p4"};
    if (h->kernel(b->ctx, names[P], &b->kernel) || h->kernel(b->ctx, batch_names[P], &b->batch_kernel)) return -1;
    /* Stage the in-chunk terms of groups of up to 256 in phase A, unless
     * that costs a block per SM (then the decision rounds compute them) */
    int per_sm = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const int pre = pass == 0 && b->group_size <= 256 ? b->group_size / 32 : 0;
        const size_t smem = brush_smem_bytes(T, b->group_size, b->tile, pre);
        if (smem > 48 * 1024 &&
            b->host->cuda(b->ctx, cudaFuncSetAttribute((const void *)b->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "brush: asking for shared memory"))
            return -1;
        int n = 0;
        if (b->host->cuda(b->ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void *)b->kernel, T, smem),
                    "brush: occupancy"))
            return -1;
        if (pass == 0 || n > per_sm) {
            b->pre = pre;
            b->smem = smem;
            per_sm = n;
        }
        if (pre == 0) break;
    }
    if (per_sm < 1)
        return h->fail(b->ctx, "brush: a block of %d threads with %zu bytes of shared memory does not fit on this GPU",
                       T, b->smem);
    if (b->host->cuda(b->ctx, cudaFuncSetAttribute((const void *)b->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b->smem),
                "brush: asking for shared memory") ||
        b->host->cuda(b->ctx, cudaFuncSetAttribute((const void *)b->batch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b->smem),
                "brush: asking for shared memory"))
        return -1;
    /* cycles per launch: as many as 64 MB of uniforms hold (one with the
     * trace, which reports every cycle) */
    int K = b->per_launch_param;
    if (!K && b->n <= 8192) {
        K = 1; /* measured: chaining costs here (bench/NOTES.md, brushperf4) */
    } else if (!K) {
        size_t fit = ((size_t)64 << 20) / ((size_t)b->n * sizeof(metro_float4));
        K = fit < 1 ? 1 : fit > 64 ? 64 : (int)fit;
    }
    if (trace_setting()) K = 1;
    b->per_launch = K;
    struct cudaFuncAttributes fa;
    memset(&fa, 0, sizeof fa);
    cudaFuncGetAttributes(&fa, (const void *)b->kernel);
    h->log(b->ctx, METRO_LOG_INFO,
           "%d groups of %d particles, %d threads per block (eta %d, %d per thread), %zu B shared, "
           "%d registers, %zu B local, %d blocks per SM, %d SMs, %d chunks staged, up to %d cycles per launch, step %g",
           b->groups, b->group_size, T, eta, P, b->smem, fa.numRegs, fa.localSizeBytes, per_sm, sms, b->pre, b->per_launch,
           (double)b->step);
    return 0;
}

/* One buffer for the group flags and, after them, the chunk flags. */
static size_t flag_bytes(const brush *b)
{
    return (size_t)b->groups * (1 + (size_t)b->group_size / 32) * sizeof(unsigned);
}

/* Done flags of every (cycle of a launch, group), then one per cycle for
 * its energy sum. */
static size_t done_bytes(const brush *b)
{
    return (size_t)b->per_launch * (b->groups + 1) * sizeof(unsigned);
}

static int start_cuda(brush *b)
{
    size_t n = (size_t)b->n;
    if (configure(b)) return -1;
    const int K = b->per_launch;
    const size_t kg = (size_t)K * b->groups;
    b->stream = (cudaStream_t)b->host->stream(b->ctx);
    if (b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_rnd, (size_t)K * n * sizeof(metro_float4)), "cudaMalloc of %zu bytes for uniforms", (size_t)K * n * sizeof(metro_float4)) ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_ticket, sizeof(unsigned)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_flags, flag_bytes(b)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_done, done_bytes(b)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_group_de, kg * sizeof(double)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_group_acc, kg * sizeof(int)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_cycle_acc, BRUSH_SLOTS * sizeof(long long)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_nan, sizeof(unsigned long long)), "brush: allocating") ||
        b->host->cuda(b->ctx, cudaMemsetAsync(b->d_nan, 0xff, sizeof(unsigned long long), b->stream), "brush: clearing") ||
        /* on the run's stream, which is non-blocking: the legacy stream's
         * cudaMemset would not be ordered before the first launch */
        b->host->cuda(b->ctx, cudaMemsetAsync(b->d_ticket, 0, sizeof(unsigned), b->stream), "brush: clearing") ||
        b->host->cuda(b->ctx, cudaMemsetAsync(b->d_flags, 0, flag_bytes(b), b->stream), "brush: clearing") ||
        b->host->cuda(b->ctx, cudaMemsetAsync(b->d_done, 0, done_bytes(b), b->stream), "brush: clearing"))
        return -1;
    b->epoch = 0;
    b->slot = 0;
    /* what another system must share to run in the same launches */
    int dev = 0;
    cudaGetDevice(&dev);
    b->key = (brush_batch_key){.device = dev, .n = b->n, .threads = b->threads, .per_thread = b->per_thread,
                               .eta = b->eta, .group_size = b->group_size, .tile = b->tile, .pre = b->pre,
                               .chain = b->st->chain, .smem = b->smem};
    if (trace_setting()) {
        size_t bytes = (size_t)b->groups * BRUSH_TRACE_SLOTS * sizeof(unsigned long long);
        b->h_trace = malloc(bytes);
        if (!b->h_trace) return b->host->fail(b->ctx, "brush: out of memory for the trace");
        if (b->host->cuda(b->ctx, cudaMalloc((void **)&b->d_trace, bytes), "cudaMalloc of %zu bytes for the trace", bytes) ||
            b->host->cuda(b->ctx, cudaMemsetAsync(b->d_trace, 0, bytes, b->stream), "brush: clearing the trace"))
            return -1;
    }
    return 0;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorted in place); 0 for n = 0. */
static long long median_ll(long long *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_ll);
    return v[n / 2];
}

/* One log line about the cycle just run (METRO_BRUSH_TRACE): where the
 * time of the chain goes.  ns from %globaltimer (cross-SM), clk from
 * clock64 (within a block). */
static int trace_report(brush *b, cudaStream_t s)
{
    const int G = b->groups;
    const size_t bytes = (size_t)G * BRUSH_TRACE_SLOTS * sizeof(unsigned long long);
    if (b->host->cuda(b->ctx, cudaStreamSynchronize(s), "brush: cycle kernel") ||
        b->host->cuda(b->ctx, cudaMemcpy(b->h_trace, b->d_trace, bytes, cudaMemcpyDeviceToHost), "brush: copying the trace"))
        return -1;
    const unsigned long long *T = b->h_trace;
#define TR(g, k) ((long long)T[(size_t)(g) * BRUSH_TRACE_SLOTS + (k)])
    long long t0 = TR(0, 0), tend = TR(0, 4);
    for (int g = 0; g < G; ++g) {
        if (TR(g, 0) < t0) t0 = TR(g, 0);
        if (TR(g, 4) > tend) tend = TR(g, 4);
    }
    long long *v = malloc((size_t)(G > 1 ? G : 1) * 6 * sizeof *v);
    if (!v) return b->host->fail(b->ctx, "brush: out of memory for the trace");
    long long *hand = v, *tile = v + G, *dec = v + 2 * G, *p1 = v + 3 * G, *tilec = v + 4 * G, *decc = v + 5 * G;
    int n = 0;
    for (int g = 1; g < G; ++g, ++n) {
        hand[n] = TR(g, 2) - TR(g - 1, 4); /* flag g-1 released -> seen by g */
        tile[n] = TR(g, 3) - TR(g, 2);     /* last tile, eta sums, barrier */
        dec[n] = TR(g, 4) - TR(g, 3);      /* decisions, publish, release */
        tilec[n] = TR(g, 8) - TR(g, 7);
        decc[n] = TR(g, 9) - TR(g, 8);
    }
    for (int g = 0; g < G; ++g) p1[g] = TR(g, 1) - TR(g, 0);
    const long long g0 = TR(0, 4) - t0, step = G > 1 ? (TR(G - 1, 4) - TR(0, 4)) / (G - 1) : 0;
    const long long mh = median_ll(hand, n), mt = median_ll(tile, n), md = median_ll(dec, n);
    const long long mtc = median_ll(tilec, n), mdc = median_ll(decc, n);
    const long long mp1 = median_ll(p1, G), xp1 = p1[G - 1];
    /* METRO_BRUSH_TRACE=<file>: also the raw stamps, one row per group,
     * appended (ns from the cycle's first start) */
    const char *path = trace_setting();
    if (path && strcmp(path, "1")) {
        FILE *f = fopen(path, "a");
        if (!f) return b->host->fail(b->ctx, "brush: cannot open the trace file %s", path);
        for (int g = 0; g < G; ++g)
            fprintf(f, "%d,%d,%lld,%lld,%lld,%lld,%lld,%lld\n", b->n, g, TR(g, 0) - t0, TR(g, 1) - t0,
                    TR(g, 2) - t0, TR(g, 3) - t0, TR(g, 4) - t0, TR(g, 10));
        fclose(f);
    }
    b->host->log(b->ctx, METRO_LOG_INFO,
                 "brush trace: span %lld ns; group 0 released at %lld ns; chain step %lld ns (median: hand-off %lld, "
                 "last tile %lld ns = %lld clk, decisions+release %lld ns = %lld clk); phase 1 median %lld ns, max %lld ns",
                 tend - t0, g0, step, mh, mt, mtc, md, mdc, mp1, xp1);
#undef TR
    free(v);
    return 0;
}

static int start(void *self, metro_state *st, const metro_potential_api *pot, void *pot_self)
{
    brush *b = self;
    b->st = st;
    b->pot = pot;
    b->pot_self = pot_self;
    b->n = st->particles;
    st->beta[0] = 1.0;
    st->slot_replica[0] = 0;
    if (st->replicas != 1) return b->host->fail(b->ctx, "brush runs one replica, not %d", st->replicas);
    if (st->backend == METRO_BACKEND_CUDA) return start_cuda(b);
    return 0;
}

/* ---- advance ------------------------------------------------------------- */

/* A move whose energy change was NaN: rejected as an overlap is, so a
 * potential's bug would bias the chain without a word.  The CPU path stops
 * at the move; the device's first (brush_launch.nan) is the same move,
 * reported at the next look at the counts (flush_cuda). */
static int nan_delta(brush *b, int i)
{
    return b->host->fail(b->ctx, "the potential's delta() returned NaN for particle %d (a bug in the potential: a "
                                 "move's energy change is a number, or +inf where the move is forbidden)", i);
}

static int advance_cpu(brush *b, metro_state *st, long sweeps)
{
    const int n = b->n;
    const int trials = b->trials ? (int)b->trials : n;
    metro_float4 *pos = st->pos;
    for (long s = 0; s < sweeps; ++s) {
        const float *uc = brush_cycles_uniforms(&b->cyc, b->n);
        if (!uc) return -1;
        long long acc = 0;
        for (int i = 0; i < trials; ++i) {
            const float *u = uc + (size_t)BRUSH_UNIFORMS_PER_PARTICLE * i;
            const metro_float4 trial = brush_trial(pos[i], u[0], u[1], u[2], b->step);
            const double de = b->pot->delta(b->pot_self, pos, n, i, trial);
            if (de != de) return nan_delta(b, i);
            if (metro_accept(de, u[3])) {
                pos[i] = trial;
                st->energy[0] += de;
                ++acc;
            }
        }
        st->accepted[0] += acc;
        st->attempted[0] += trials;
        b->cycles++;
        if (brush_cycles_push(&b->cyc, acc)) return -1;
    }
    return 0;
}

/* Bring the device's per-cycle counts home (waits for the stream). */
static int flush_cuda(brush *b)
{
    cudaStream_t s = (cudaStream_t)b->host->stream(b->ctx);
    if (b->host->cuda(b->ctx, cudaStreamSynchronize(s), "brush: cycle kernel")) return -1;
    unsigned long long nan;
    if (b->host->cuda(b->ctx, cudaMemcpy(&nan, b->d_nan, sizeof nan, cudaMemcpyDeviceToHost), "brush: copying the NaN mark"))
        return -1;
    if (nan != ~0ull) return nan_delta(b, (int)(nan & 0xffffffffu));
    if (!b->slot) return 0;
    long long buf[BRUSH_SLOTS];
    if (b->host->cuda(b->ctx, cudaMemcpy(buf, b->d_cycle_acc, (size_t)b->slot * sizeof(long long), cudaMemcpyDeviceToHost),
                "brush: copying acceptance counts"))
        return -1;
    for (int i = 0; i < b->slot; ++i) {
        b->st->accepted[0] += buf[i];
        if (brush_cycles_push(&b->cyc, buf[i])) return -1;
    }
    b->slot = 0;
    return 0;
}

/* This system's launch block, for `cycles` cycles from its current epoch
 * and slot. */
static brush_launch launch_block(const brush *b, const metro_state *st, int cycles)
{
    brush_launch L;
    memset(&L, 0, sizeof L);
    L.pos = st->d_pos;
    L.rnd = b->d_rnd;
    L.ticket = b->d_ticket;
    L.flags = b->d_flags;
    L.cflags = b->d_flags + b->groups;
    L.done = b->d_done;
    L.energy_done = b->d_done + (size_t)b->per_launch * b->groups;
    L.group_de = b->d_group_de;
    L.group_acc = b->d_group_acc;
    L.energy = st->d_energy;
    L.cycle_acc = b->d_cycle_acc;
    L.nan = b->d_nan;
    L.slot = b->slot;
    L.epoch = b->epoch + 1;
    L.cycles = cycles;
    L.n = b->n;
    L.groups = b->groups;
    L.group_size = b->group_size;
    L.eta = b->eta;
    L.tile = b->tile;
    L.pre_chunks = b->pre;
    L.chain = st->chain;
    L.step = b->step;
    L.trace = b->d_trace;
    return L;
}

/* ---- shared launches (brush_batch.h) ---------------------------------------- */

static int group_fail(brush_group *G, int status, const char *what)
{
    if (status == cudaSuccess) return 0;
    snprintf(G->err, sizeof G->err, "CUDA: %s failed: %s (%s)", what, cudaGetErrorName((cudaError_t)status),
             cudaGetErrorString((cudaError_t)status));
    return -1;
}

/* The rendezvous' launch (brush_rv): every posted member's cycles in one
 * grid on the group's stream, after each one's uniforms; each posted
 * member's stream then waits for it.  Runs in a posted member's thread,
 * under the rendezvous lock. */
static int group_launch(void *arg, const unsigned char *has, int k)
{
    brush_group *G = arg;
    brush *lead = NULL;
    for (int i = 0; i < k && !lead; ++i)
        if (has[i]) lead = G->m[i];
    if (!G->stream) { /* first launch: the group's stream, counter and launch blocks */
        brush_launch *h = calloc((size_t)(k > 0 ? k : 1), sizeof *h);
        if (!h) return snprintf(G->err, sizeof G->err, "out of memory"), -1;
        for (int i = 0; i < k; ++i) h[i] = launch_block(G->m[i], G->m[i]->st, 0);
        int rc = group_fail(G, cudaStreamCreateWithFlags(&G->stream, cudaStreamNonBlocking), "creating the group's stream") ||
                 group_fail(G, cudaEventCreateWithFlags(&G->done, cudaEventDisableTiming), "creating an event") ||
                 group_fail(G, cudaMalloc((void **)&G->d_ticket, sizeof(unsigned)), "allocating the group's counter") ||
                 group_fail(G, cudaMalloc((void **)&G->d_sys, (size_t)k * sizeof *h), "allocating launch blocks") ||
                 /* on the group's stream, ahead of its launches: a plain
                  * cudaMemcpy from pageable memory returns before its DMA
                  * lands, and the legacy stream does not order a
                  * non-blocking one (a shared launch read launch blocks not
                  * yet there: cudaErrorIllegalAddress under load) */
                 group_fail(G, cudaMemsetAsync(G->d_ticket, 0, sizeof(unsigned), G->stream), "clearing the group's counter") ||
                 group_fail(G, cudaMemcpyAsync(G->d_sys, h, (size_t)k * sizeof *h, cudaMemcpyHostToDevice, G->stream),
                            "uploading launch blocks") ||
                 group_fail(G, cudaStreamSynchronize(G->stream), "uploading launch blocks"); /* before h is freed */
        free(h);
        if (rc) return -1;
    }
    brush_batch B;
    memset(&B, 0, sizeof B);
    B.sys = G->d_sys;
    B.ticket = G->d_ticket;
    B.base = G->base;
    B.groups = lead->groups;
    for (int i = 0; i < k; ++i) {
        if (!has[i]) continue;
        B.var[B.k++] = G->var[i];
        if (G->var[i].cycles > B.cycles) B.cycles = G->var[i].cycles;
        if (group_fail(G, cudaStreamWaitEvent(G->stream, G->m[i]->ev, 0), "waiting for a system's uniforms")) return -1;
    }
    const unsigned blocks = (unsigned)B.k * (unsigned)B.cycles * (unsigned)B.groups;
    void *args[1] = {&B};
    dim3 grid = {blocks, 1, 1}, block = {(unsigned)lead->threads, 1, 1};
    if (group_fail(G, cudaLaunchKernel((const void *)lead->batch_kernel, grid, block, args, lead->smem, G->stream),
                   "brush: launching the shared cycles") ||
        group_fail(G, cudaEventRecord(G->done, G->stream), "recording the shared launch"))
        return -1;
    G->base += blocks;
    for (int i = 0; i < k; ++i)
        if (has[i] && group_fail(G, cudaStreamWaitEvent(G->m[i]->stream, G->done, 0), "waiting for the shared launch"))
            return -1;
    return 0;
}

/* Post this system's next launch of K cycles to its group and wait until
 * the group has launched it. */
static int group_post(brush *b, int K)
{
    brush_group *G = b->grp;
    G->var[b->member] = (brush_batch_var){b->member, b->epoch + 1, b->slot, K};
    if (b->host->cuda(b->ctx, cudaEventRecord(b->ev, b->stream), "brush: recording an event")) return -1;
    if (brush_rv_post(&G->rv, b->member))
        return b->host->fail(b->ctx, "brush: a launch shared with other systems failed: %s", G->err);
    return 0;
}

static void group_leave(brush *b)
{
    if (b->grp) brush_rv_leave(&b->grp->rv, b->member);
}

/* Leave, and free the group with its last member. */
static void group_drop(brush *b)
{
    brush_group *G = b->grp;
    if (!G) return;
    group_leave(b);
    pthread_mutex_lock(&G->rv.mu);
    const int last = --G->refs == 0;
    pthread_mutex_unlock(&G->rv.mu);
    b->grp = NULL;
    if (!last) return;
    if (G->stream) {
        cudaStreamSynchronize(G->stream);
        cudaStreamDestroy(G->stream);
        cudaEventDestroy(G->done);
    }
    cudaFree(G->d_ticket);
    cudaFree(G->d_sys);
    brush_rv_free(&G->rv);
    free(G->m);
    free(G->var);
    free(G);
}

static int join(void *const *selves, int k)
{
    const brush_batch_key **keys = calloc((size_t)k, sizeof *keys);
    int *lead = calloc((size_t)k, sizeof *lead);
    brush *b0 = selves[0];
    if (!keys || !lead) {
        free(keys);
        free(lead);
        return b0->host->fail(b0->ctx, "out of memory");
    }
    for (int i = 0; i < k; ++i) {
        const brush *b = selves[i];
        /* CUDA only; not with the trace (it waits for every cycle) */
        keys[i] = b->st && b->st->backend == METRO_BACKEND_CUDA && !b->d_trace && !b->grp ? &b->key : NULL;
    }
    int rc = brush_batch_partition(keys, k, BRUSH_BATCH_MAX, lead) < 0 ? b0->host->fail(b0->ctx, "out of memory") : 0;
    for (int i = 0; i < k && !rc; ++i) {
        if (lead[i] != i) continue;
        brush_group *G = calloc(1, sizeof *G);
        int m = 0;
        for (int j = i; j < k; ++j) m += lead[j] == i;
        if (G) {
            G->m = calloc((size_t)m, sizeof *G->m);
            G->var = calloc((size_t)m, sizeof *G->var);
        }
        if (!G || !G->m || !G->var || brush_rv_init(&G->rv, m, group_launch, G)) {
            if (G) free(G->m), free(G->var);
            free(G);
            rc = b0->host->fail(b0->ctx, "out of memory");
            break;
        }
        G->k = G->refs = m;
        for (int j = i, n = 0; j < k; ++j) {
            if (lead[j] != i) continue;
            brush *b = selves[j];
            G->m[n] = b;
            b->grp = G;
            b->member = n++;
            if (b->host->cuda(b->ctx, cudaEventCreateWithFlags(&b->ev, cudaEventDisableTiming), "brush: creating an event")) rc = -1;
            b->host->log(b->ctx, METRO_LOG_INFO, "shares its launches with %d other systems (member %d of %d)",
                         m - 1, b->member, m);
        }
    }
    free(keys);
    free(lead);
    return rc;
}

static void leave(void *self)
{
    group_leave(self);
}

/* Cycles go to the device in launches of up to per_launch: the launch's
 * blocks take tickets (cycle k, group g) in order, so cycle k's first
 * groups sum over the partners cycle k-1 has finished while its last
 * groups still decide (brush.h).  In a group, the launch is shared with
 * the other systems' (brush_batch.h). */
static int advance_cuda(brush *b, metro_state *st, long sweeps)
{
    cudaStream_t s = b->stream;
    const size_t per = (size_t)b->n * BRUSH_UNIFORMS_PER_PARTICLE;
    for (long c = 0; c < sweeps;) {
        if (b->slot == BRUSH_SLOTS && flush_cuda(b)) return -1;
        long K = sweeps - c;
        if (K > b->per_launch) K = b->per_launch;
        if (K > BRUSH_SLOTS - b->slot) K = BRUSH_SLOTS - b->slot;
        for (long k = 0; k < K; ++k) { /* one cycle's uniforms at a time: the stream as one launch per cycle */
            float *dst = (float *)(b->d_rnd + k * b->n);
            if (b->cyc.pool_n - b->cyc.pool_pos >= per) { /* left by a CPU checkpoint */
                if (b->host->cuda(b->ctx, cudaMemcpyAsync(dst, b->cyc.pool + b->cyc.pool_pos, per * sizeof(float), cudaMemcpyHostToDevice, s),
                            "brush: uploading uniforms"))
                    return -1;
                b->cyc.pool_pos += per;
            } else if (b->host->uniform(b->ctx, dst, per)) {
                return -1;
            }
        }
        if (b->epoch > 0x7fffffffu - (unsigned)K) { /* 2^31 cycles: start the flags afresh */
            if (b->host->cuda(b->ctx, cudaMemsetAsync(b->d_flags, 0, flag_bytes(b), s), "brush: clearing") ||
                b->host->cuda(b->ctx, cudaMemsetAsync(b->d_done, 0, done_bytes(b), s), "brush: clearing"))
                return -1;
            b->epoch = 0;
        }
        if (b->grp) {
            if (group_post(b, (int)K)) return -1;
        } else {
            brush_launch L = launch_block(b, st, (int)K);
            void *args[1] = {&L};
            dim3 grid = {(unsigned)(K * b->groups), 1, 1}, block = {(unsigned)b->threads, 1, 1};
            if (b->host->cuda(b->ctx, cudaLaunchKernel((const void *)b->kernel, grid, block, args, b->smem, s), "brush: launching"))
                return -1;
        }
        b->epoch += (unsigned)K;
        b->slot += (int)K;
        b->cycles += K;
        st->attempted[0] += (long long)K * b->n;
        c += K;
        if (b->d_trace && trace_report(b, s)) return -1;
    }
    return 0;
}

static int advance(void *self, metro_state *st, long sweeps)
{
    brush *b = self;
    return st->backend == METRO_BACKEND_CUDA ? advance_cuda(b, st, sweeps) : advance_cpu(b, st, sweeps);
}

static int sync_state(void *self, metro_state *st)
{
    brush *b = self;
    if (st->backend != METRO_BACKEND_CUDA) return 0;
    if (flush_cuda(b)) return -1;
    return b->host->cuda(b->ctx, cudaMemcpy(st->pos, st->d_pos, (size_t)b->n * sizeof(metro_float4), cudaMemcpyDeviceToHost),
                   "brush: copying positions") ||
           b->host->cuda(b->ctx, cudaMemcpy(st->energy, st->d_energy, sizeof(double), cudaMemcpyDeviceToHost),
                   "brush: copying the energy");
}

/* ---- finish, save, restore ----------------------------------------------- */

static int finish(void *self, metro_state *st)
{
    brush *b = self;
    if (sync_state(b, st) || brush_cycles_write(&b->cyc, b->cycles, b->trials ? b->trials : b->n)) return -1;
    b->host->log(b->ctx, METRO_LOG_INFO, "%lld cycles, acceptance %.4f", b->cycles,
                 st->attempted[0] ? (double)st->accepted[0] / (double)st->attempted[0] : 0.0);
    return 0;
}

#define BRUSH_MAGIC 0x48535242u /* "BRSH" */

static int save(void *self)
{
    brush *b = self;
    if (b->st && b->st->backend == METRO_BACKEND_CUDA && flush_cuda(b)) return -1;
    return brush_cycles_save(&b->cyc, BRUSH_MAGIC, b->cycles);
}

static int restore(void *self, const void *data, size_t size)
{
    brush *b = self;
    return brush_cycles_restore(&b->cyc, BRUSH_MAGIC, data, size, &b->cycles);
}

/* Uniforms: one float4 per particle and cycle, on the device for the
 * cycles of one launch (at most 64; auto picks at most 8 at sizes where
 * memory matters), and a cycle's worth drawn ahead on the host. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    brush *b = self;
    size_t n = (size_t)setup->particles, K = b->per_launch_param > 0 ? (size_t)b->per_launch_param : 8;
    *host = 2 * n * sizeof(metro_float4);
    *device = K * n * sizeof(metro_float4) + (n / 64 + 1) * 64;
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
    .join = join,
    .leave = leave,
};

METRO_PLUGIN(sampler, "brush", "1.0.0",
             "sequential-updating Metropolis; on CUDA the exact Brush Metropolis algorithm (seed 002)", params,
             api)
