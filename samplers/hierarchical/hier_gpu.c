/* hier_gpu.c — the host side of the hierarchical sampler's CUDA path
 * (hier_gpu.h has the plan, hierarchical.cu the kernels): memory, the
 * tree's build, and a cycle as batches of launches.  Every CUDA call goes
 * through host->cuda (the one error path). */
#include "hier_gpu_host.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "brush.h"

#define HG_N_KERNELS 18
static const char *const kernel_names[HG_N_KERNELS] = {
    "hg_mom",   "hg_norms", "hg_leaf_count", "hg_leaf_scan", "hg_leaf_fill", "hg_leaf_sort",  "hg_leaf_move",
    "hg_enclose", "hg_trials", "hg_tri",     "hg_prep",      "hg_chain",     "hg_exact",      "hg_exact_decide",
    "hg_close_list", "hg_total_sum", "hg_fold", "hg_enclose_narrow"};
enum { K_MOM, K_NORMS, K_COUNT, K_SCAN, K_FILL, K_SORT, K_MOVE, K_ENCLOSE, K_TRIALS, K_TRI, K_PREP, K_CHAIN, K_EXACT,
       K_DECIDE, K_CLIST, K_TSUM, K_FOLD, K_NARROW };

/* the profile's phases (walks, rules, refined looks, chain, update, and
 * the main stream's wait from a batch's looks to the next update on the
 * main stream: for the chain, or for the host that launches the update
 * once the chain has ended), each between two events: looks' and
 * update's on the main stream, the chain's on its own */
#define HG_PHASES 6
#define HG_EVENTS 8
static const int phase_ev[HG_PHASES][2] = {{0, 1}, {1, 2}, {2, 3}, {4, 5}, {6, 7}, {3, 6}};

/* The METRO_HIER_* settings (read_knobs): their defaults unless set */
typedef struct hg_knobs {
    double close_sig, theta_refine; /* theta_refine: a factor of theta */
    int l2, overlap, side, profile;
    int chain_blocks, team, slots, narrow; /* chain_blocks, slots: 0 = the device's count */
} hg_knobs;

struct hier_gpu {
    const metro_host_api *host;
    metro_ctx *ctx;
    hier_gpu_cfg cfg;
    cudaStream_t s;
    /* the device's running counts (hg_status: decided[], refined) as last
     * read: each cycle adds what they grew by to the caller's stats, which
     * a resume restores (assigned, they counted only since the restart)
     * and which the int counters would wrap in 2^31 decisions */
    unsigned seen_decided[2];
    long long seen_refined;
    /* The side stream: work that needs neither the walks nor the moments
     * runs there beside a batch's update of the moments (hg_mom,
     * hg_norms): the leaves' moves (hg_leaf_move) and, in order and for a
     * cycle's first two batches, a batch's trials and mates' terms
     * (hg_trials, hg_tri; overlapping, the later ones go on cs: early,
     * below), from fork_to to join_from; METRO_HIER_SIDE=0 (comparisons):
     * no side stream, all on the main one in that order. */
    cudaStream_t side;
    cudaEvent_t fork_ev, join_ev;
    /* Batches overlapping (lead = 1; METRO_HIER_OVERLAP=0 for comparison:
     * lead = 0, everything in order).  Batch k's chain needs only its own
     * looks, and batch k + 1's looks need only the tree without batch k's
     * moves, if batch k's trials are among k + 1's mates (hg_tri's j < 0,
     * hg_fold): so batch k's chain, on its own stream cs, starts once its
     * looks are done (the event ready[k & 1]) and batch k + 1's trials,
     * formed before it (on cs: early, below; with METRO_HIER_SIDE=0 on
     * the main stream in batch k - 1's update), and runs beside batch k - 1's
     * update and batch k + 1's looks, on one SM: its launch is the deciding
     * block alone, and a trial it leaves open stops it for the exact pass
     * on the whole device (xhost), so that the walks keep the other SMs.
     * Three batches are in flight (k's chain, k + 1's looks, k + 2's
     * trials), so the trials' buffers rotate over three, and the rules,
     * the mates' terms and the decisions with their energy changes
     * alternate between two (batch k's update reads them while batch k +
     * 1's chain makes its own).  A packing of the leaves reads every
     * position, so the chain after it waits for it (pack_ev).
     * lead = 0: cs is the main stream.
     * early (lead with a side stream): batch k + 2's trials and mates'
     * terms go on cs once batch k's chain has ended, after batch k + 1's
     * first rules (prep_ev: hg_prep reads hg_tri's partial sums, whose
     * buffer is single), so they start beside batch k + 1's refined look
     * instead of with batch k's update; the main stream still waits for
     * them (trials_ev) at that update's end, by when they are done. */
    int lead, early;
    cudaStream_t cs;
    cudaEvent_t ready_ev[2], pack_ev, prep_ev, trials_ev;
    metro_float4 *told[3], *ttri[3];
    hg_trial *tr[2];
    double *corr[2], *corrx[2];
    unsigned char *flg[2], *flgx[2], *acc[2];
    double *dE[2];
    void *k[HG_N_KERNELS];
    hg_args a;
    int nleaves;
    long long ncells;
    int sms; /* the chain's launch: one block per SM (the deciding one and the exact pass's helpers) */
    hg_knobs kn; /* the METRO_HIER_* settings (read_knobs); kn.team: warps walking a point of the
                  * refined look together (hg_enclose) */
    hg_status *h_status; /* pinned */
    metro_float4 *h_pos;  /* pinned, from the first stop on: the positions the host's reference reads */
    int unpinned;         /* pinning them failed: the core's pageable st->pos instead */
    float4 *d_rnd;
    void *allocs[64];
    int nallocs;
    int counting;  /* dalloc only adds the bytes up (hier_gpu_bytes) */
    size_t counted;
    /* METRO_HIER_PROFILE=1: CUDA events around a batch's phases (walks,
     * the rules (hg_prep: the mates' terms themselves are formed before,
     * beside the previous update or, early, the previous refined look),
     * refined looks, the decision chain with its
     * exact passes and stops, tree update with what runs beside it),
     * summed per run; and around each stop
     * (the host's reference), counted apart */
    int profile;
    cudaEvent_t ev[HG_EVENTS], sev[2];
    int pending[HG_PHASES]; /* a phase's events recorded and not yet added */
    int looked;             /* looks recorded event 3 since the last update (phase 5's start) */
    double phase[HG_PHASES], t_stops;
    long long stops;
    long long cycle; /* the run's cycle under way (1, 2, ...): for messages */
    /* the mates' terms kept in L2 (l2_window): the window's bytes (0:
     * none) and the share of it that may persist */
    size_t l2_bytes, l2_limit0; /* and the device's set-aside before (restored at the end) */
    float l2_ratio;
};

static int cu(hier_gpu *g, int status, const char *what)
{
    return g->host->cuda(g->ctx, status, "hierarchical: %s", what);
}

static void *dalloc(hier_gpu *g, size_t bytes, int *bad)
{
    void *p = NULL;
    if (*bad) return NULL;
    if (bytes == 0) bytes = 16;
    if (g->counting) {
        g->counted += (bytes + 511) / 512 * 512; /* cudaMalloc's granularity */
        return NULL;
    }
    if (g->host->cuda(g->ctx, cudaMalloc(&p, bytes), "cudaMalloc of %zu bytes for the hierarchical tree", bytes)) {
        *bad = 1;
        return NULL;
    }
    g->allocs[g->nallocs++] = p;
    return p;
}

static void l2_window(hier_gpu *g, int on);

void hier_gpu_free(hier_gpu *g)
{
    if (!g) return;
    for (int i = 0; i < g->nallocs; ++i) cudaFree(g->allocs[i]);
    if (g->h_status) cudaFreeHost(g->h_status);
    if (g->h_pos) cudaFreeHost(g->h_pos);
    if (g->l2_bytes) { /* the window (a cycle that failed left it on the core's stream), the set-aside as it was */
        l2_window(g, 0);
        (void)cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, g->l2_limit0);
        (void)cudaGetLastError();
    }
    for (int i = 0; g->profile && i < HG_EVENTS; ++i) cudaEventDestroy(g->ev[i]);
    for (int i = 0; g->profile && i < 2; ++i) cudaEventDestroy(g->sev[i]);
    if (g->fork_ev) cudaEventDestroy(g->fork_ev);
    if (g->join_ev) cudaEventDestroy(g->join_ev);
    for (int i = 0; i < 2; ++i)
        if (g->ready_ev[i]) cudaEventDestroy(g->ready_ev[i]);
    if (g->pack_ev) cudaEventDestroy(g->pack_ev);
    if (g->prep_ev) cudaEventDestroy(g->prep_ev);
    if (g->trials_ev) cudaEventDestroy(g->trials_ev);
    if (g->side != g->s) cudaStreamDestroy(g->side);
    if (g->cs && g->cs != g->s) cudaStreamDestroy(g->cs);
    free(g);
}

static int launch(hier_gpu *g, cudaStream_t on, int which, long long threads, int block, void **args)
{
    if (threads <= 0) return 0;
    const long long blocks = (threads + block - 1) / block;
    dim3 grid = {(unsigned)blocks, 1, 1}, blk = {(unsigned)block, 1, 1};
    return g->host->cuda(g->ctx, cudaLaunchKernel((const void *)g->k[which], grid, blk, args, 0, on),
                         "hierarchical: launching %s (%lld threads)", kernel_names[which], threads);
}

static int run1(hier_gpu *g, int which, long long threads, int block)
{
    void *args[1] = {&g->a};
    return launch(g, g->s, which, threads, block, args);
}

static int run2(hier_gpu *g, int which, long long threads, int block, int x)
{
    void *args[2] = {&g->a, &x};
    return launch(g, g->s, which, threads, block, args);
}

/* Stream `to` starts after what the main stream has queued so far */
static int fork_to(hier_gpu *g, cudaStream_t to)
{
    if (to == g->s) return 0;
    return cu(g, cudaEventRecord(g->fork_ev, g->s), "recording an event") ||
           cu(g, cudaStreamWaitEvent(to, g->fork_ev, 0), "waiting for an event");
}

/* and the main stream goes on after what stream `from` has queued */
static int join_from(hier_gpu *g, cudaStream_t from)
{
    if (from == g->s) return 0;
    return cu(g, cudaEventRecord(g->join_ev, from), "recording an event") ||
           cu(g, cudaStreamWaitEvent(g->s, g->join_ev, 0), "waiting for an event");
}

/* The factors of the recurrences (hier_tree.c, build_tables) and the units
 * of the fixed point: a per-level value v is kept as round(v 2^FIX / unit),
 * unit = |z| rho^n for a degree-n quantity, the moments also divided by
 * sqrt((n-m)! (n+m)!) (the size of a source's R_n^m at most), so every
 * stored integer is at most Σ|z| 2^FIX in size (HG_FIX_BITS). */
static void tables(const hier_gpu *g, double *tab, double *unit)
{
    const int pm = g->a.pm;
    double fact[2 * HIER_MAX_DEG + 2];
    fact[0] = 1.0;
    for (int k = 1; k < 2 * HIER_MAX_DEG + 2; ++k) fact[k] = fact[k - 1] * (double)k;
    memset(tab, 0, HG_T_SIZE * sizeof *tab);
    hier_factors(pm, tab + HG_T_IC1, tab + HG_T_IC2, tab + HG_T_RC1, tab + HG_T_RC2, tab + HG_T_GW);
    hier_round_factors(pm, pm - HIER_EXTRA, tab + HG_T_EV, tab + HG_T_SRC, tab + HG_T_SQ);
    const int fs = g->a.fstride;
    for (int l = 0; l < (g->a.L > 1 ? g->a.L : 1); ++l) {
        double *sc = unit + (size_t)l * 2 * fs, *inv = sc + fs;
        const double rho = g->a.rho[l];
        for (int i = 0; i < fs; ++i) {
            double un;
            if (i == 0) un = 1.0;
            else if (i < 4) un = rho;
            else if (i < 5 + pm) un = pow(rho, (double)(i - 3));
            else {
                const int k = i - (5 + pm);
                int n = 0;
                while ((n + 1) * (n + 1) <= k) ++n;
                const int m = k == n * n ? 0 : (k - n * n + 1) / 2;
                un = pow(rho, (double)n) / sqrt(fact[n - m] * fact[n + m]);
            }
            sc[i] = ldexp(1.0, HG_FIX_BITS) / un;
            inv[i] = ldexp(un, -HG_FIX_BITS);
        }
    }
}

/* Leaves packed afresh from the positions: counts, places (cap = count +
 * count/2 + 8), particles in, each leaf sorted by index. */
static int repack(hier_gpu *g, int mode)
{
    return cu(g, cudaMemsetAsync(g->a.fill, 0, (size_t)g->nleaves * sizeof(int), g->s), "clearing leaf counts") ||
           run2(g, K_COUNT, g->a.n, 256, mode) || run2(g, K_SCAN, 1024, 1024, g->nleaves) ||
           run1(g, K_FILL, g->a.n, 256) || run2(g, K_SORT, g->nleaves, 128, g->nleaves);
}

/* The fixed point's units: two rows (scale, inverse) of fstride per level
 * (tables) */
static size_t units_of(const hg_args *a)
{
    return (size_t)(a->L > 1 ? a->L : 1) * 2 * (size_t)a->fstride;
}

/* The packed leaves' places: hg_leaf_scan (hier_dev_tree.h) gives a leaf of
 * k particles k + k/2 + 8, at most this in all, with some to spare */
static size_t packed_of(int n, int nleaves)
{
    return (size_t)n + (size_t)n / 2 + 8 * (size_t)nleaves + 64;
}

/* The METRO_HIER_* environment variables: benchmarks' and tests' controls
 * of how a decision is reached, never of which decision (each named where
 * it acts, below).  Unset or empty: the default.  Anything else must be a
 * number in [lo, hi] (an integer where `whole`); otherwise the run stops
 * at its start, before anything is allocated, naming the variable, its
 * value and what it allows: a mistyped knob must not measure the default
 * under another name. */
static int knob(const metro_host_api *host, metro_ctx *ctx, const char *name, double lo, double hi, int whole,
                double *v)
{
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end = NULL;
    const double x = strtod(s, &end);
    if (end == s || *end != '\0' || !(x >= lo && x <= hi) || (whole && x != floor(x)))
        return host->fail(ctx, "hierarchical: environment variable %s=\"%s\" is not %s from %g to %g (unset it for the default)",
                          name, s, whole ? "an integer" : "a number", lo, hi);
    *v = x;
    return 0;
}

/* Every knob's default (hier_gpu_bytes reads no environment) */
static hg_knobs knob_defaults(int ideal)
{
    return (hg_knobs){.close_sig = HG_CLOSE_SIGMAS, .theta_refine = ideal ? HG_THETA_REFINE_EXACT : HIER_THETA_REFINE,
                      .l2 = 1, .overlap = ideal, .side = 1, .profile = 0, .chain_blocks = 0, .team = HG_TEAM,
                      .slots = 0, .narrow = 1};
}

static int read_knobs(const metro_host_api *host, metro_ctx *ctx, int ideal, hg_knobs *k)
{
    const hg_knobs d = knob_defaults(ideal);
    double close = d.close_sig, theta = d.theta_refine, l2 = d.l2, overlap = d.overlap, side = d.side,
           profile = d.profile, blocks = d.chain_blocks, team = d.team, slots = d.slots, narrow = d.narrow;
    if (knob(host, ctx, "METRO_HIER_CLOSE_SIGMAS", 0, 1e6, 0, &close) ||
        knob(host, ctx, "METRO_HIER_REFINE_THETA", 0x1p-10, 1, 0, &theta) ||
        knob(host, ctx, "METRO_HIER_L2", 0, 1, 1, &l2) || knob(host, ctx, "METRO_HIER_OVERLAP", 0, 1, 1, &overlap) ||
        knob(host, ctx, "METRO_HIER_SIDE", 0, 1, 1, &side) || knob(host, ctx, "METRO_HIER_PROFILE", 0, 1, 1, &profile) ||
        knob(host, ctx, "METRO_HIER_CHAIN_BLOCKS", 1, 4096, 1, &blocks) ||
        knob(host, ctx, "METRO_HIER_REFINE_WARPS", 1, HG_TEAM_MAX, 1, &team) ||
        knob(host, ctx, "METRO_HIER_REFINE_SLOTS", 1, 1 << 20, 1, &slots) ||
        knob(host, ctx, "METRO_HIER_REFINE_NARROW", 0, 2, 1, &narrow))
        return -1;
    *k = (hg_knobs){.close_sig = close, .theta_refine = theta, .l2 = (int)l2, .overlap = (int)overlap,
                    .side = (int)side, .profile = (int)profile, .chain_blocks = (int)blocks, .team = (int)team,
                    .slots = (int)slots, .narrow = (int)narrow};
    return 0;
}

/* The layout and every size that follows from g->cfg and n alone
 * (hier_gpu_create and hier_gpu_bytes alike). */
static void geometry(hier_gpu *g, int n)
{
    hg_args *a = &g->a;
    const hier_gpu_cfg *cfg = &g->cfg;
    a->prm = cfg->prm;
    a->n = n;
    a->L = cfg->L;
    a->pm = cfg->order_hi + HIER_EXTRA;
    a->ncoef = (a->pm + 1) * (a->pm + 1);
    /* the rounding bounds of the two looks (hier_dev_tree.h, hg_finalize),
     * beside K: a far cell reads them with its truncation bound */
    a->roff = 1 + (a->pm + 2);
    a->doff = a->roff + 2;
    a->phik = a->pm < HIER_PHI_DEG ? a->pm : HIER_PHI_DEG;
    /* The block's moments order by order (hier_mslot): a far cell's
     * expansion runs down each order's degrees, so a lane reads its cell's
     * moments in memory order, a line at a time, instead of across the
     * whole block for every order (degree by degree, hier_tree.h's layout:
     * the walks' cells then outgrew L1, and most moment loads went to L2).
     * Order 0 padded to an even length and the block's moments and blocks
     * at even offsets, so each (re, im) pair is one 16-byte load. */
    a->mc0 = (a->pm + 2) & ~1;
    a->moff = (a->doff + 3 + HIER_PHI_DEG + 1) & ~1;
    a->boff = a->moff + a->mc0 + a->pm * (a->pm + 1);
    a->goff = a->boff + (a->pm + 1);
    a->stride = (a->goff + (a->pm + 1) + 1) & ~1;
    a->fstride = 5 + a->pm + a->ncoef;
    a->p_lo = cfg->order;
    a->direct_max = cfg->direct_max;
    a->step = cfg->step;
    a->Rt = cfg->Rt;
    a->theta = cfg->theta;
    /* METRO_HIER_CLOSE_SIGMAS=x (benchmarks): trials within x of the mates'
     * plausible shift of their threshold get the refined look */
    a->close_sig = g->kn.close_sig;
    /* METRO_HIER_REFINE_THETA=f (benchmarks): the refined look opens cells
     * to f theta instead of HIER_THETA_REFINE or HG_THETA_REFINE_EXACT
     * theta (a second look with theta halved, as the CPU's stage 2, was
     * measured: at 2^22 it left 156 exact passes instead of 17,569 under
     * reference = exact but cost 1.1 s a cycle more than they did, one more
     * walk's latency a batch) */
    a->theta_refine = a->theta * g->kn.theta_refine;
    a->dcut = cfg->dcut;
    a->bound_scale = cfg->bound_scale;
    a->ksum = ((double)n + 4.0) * 0x1p-53 * 1.01;
    long long cells = 0;
    for (int l = 0; l <= a->L; ++l) {
        a->m[l] = 1 << l;
        a->h[l] = 2.0 * a->Rt / (double)a->m[l];
        a->rho[l] = 0.5 * sqrt(3.0) * a->h[l] * (1.0 + 1e-9);
        a->cell0[l] = l == 0 ? 0 : cells;
        if (l >= 1 && l < a->L) cells += (long long)a->m[l] * a->m[l] * a->m[l];
    }
    if (a->L >= 1) a->cell0[a->L] = cells;
    g->ncells = cells;
    g->nleaves = 1 << (3 * a->L);
    /* the chain's exact pass: chunks of a multiple of 128 particles (a
     * warp's four loads a lane), at least 256, at most HG_XCHUNKS of them,
     * in at most HG_XCTR groups */
    a->xsize = (n + HG_XCHUNKS - 1) / HG_XCHUNKS;
    a->xsize = a->xsize < 256 ? 256 : (a->xsize + 127) / 128 * 128;
    a->xnch = (n + a->xsize - 1) / a->xsize;
    a->xper = (a->xnch + HG_XCTR - 1) / HG_XCTR;
    a->xng = (a->xnch + a->xper - 1) / a->xper;
    /* reference = exact: the summation heights for hier_ideal_eps.  The
     * chain's pass: a lane's terms of a chunk, a butterfly (5), a lane's
     * chunks of a group (hg_xsum), 5, the groups, 5.  A stop's pass
     * (hg_exact_part): a thread's terms, the block's tree (8), the blocks'
     * partial sums one after the other. */
    a->ideal = g->cfg.ideal;
    a->xpath = (double)((a->xsize + 31) / 32 + (a->xper + 31) / 32 + (a->xng + 31) / 32 + 15);
    a->spath = (double)((n + 256 * HG_EXACT_BLOCKS - 1) / (256 * HG_EXACT_BLOCKS) + 8 + HG_EXACT_BLOCKS);
}

/* The chain reads the mates' terms (corr, flg) row by row, each read on
 * its path, long after hg_tri wrote them; the walks in between stream the
 * tree through L2 and evict them (its probes: ~2,000 cycles a round trip).
 * So hg_tri's writes are marked persisting for the cycle's batches (a
 * window on both streams, removed at the cycle's end, when other plugins'
 * kernels run).  A hint: where the device has no persisting L2 (or
 * METRO_HIER_L2=0) the run is the same, only slower. */
static void l2_setup(hier_gpu *g, int dev)
{
    int maxp = 0, maxw = 0;
    const size_t bytes = 2 * (size_t)g->cfg.batch * (size_t)g->cfg.batch * (sizeof(double) + 1);
    if (!g->kn.l2 || cudaDeviceGetAttribute(&maxp, cudaDevAttrMaxPersistingL2CacheSize, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&maxw, cudaDevAttrMaxAccessPolicyWindowSize, dev) != cudaSuccess || maxp <= 0 ||
        maxw <= 0) {
        (void)cudaGetLastError();
        return;
    }
    const size_t set = bytes < (size_t)maxp ? bytes : (size_t)maxp;
    if (cudaDeviceGetLimit(&g->l2_limit0, cudaLimitPersistingL2CacheSize) != cudaSuccess ||
        cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    g->l2_bytes = bytes < (size_t)maxw ? bytes : (size_t)maxw;
    g->l2_ratio = set >= g->l2_bytes ? 1.f : (float)((double)set / (double)g->l2_bytes);
}

static void l2_window(hier_gpu *g, int on)
{
    if (!g->l2_bytes) return;
    cudaStreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = on ? (void *)g->corr[0] : NULL;
    v.accessPolicyWindow.num_bytes = on ? g->l2_bytes : 0;
    v.accessPolicyWindow.hitRatio = on ? g->l2_ratio : 0.f;
    v.accessPolicyWindow.hitProp = on ? cudaAccessPropertyPersisting : cudaAccessPropertyNormal;
    v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    /* every stream: hg_tri writes the window on the side stream (on the
     * chain's, batches overlapping), the chain reads it on its own */
    if (cudaStreamSetAttribute(g->s, cudaStreamAttributeAccessPolicyWindow, &v) != cudaSuccess) (void)cudaGetLastError();
    if (g->side != g->s && cudaStreamSetAttribute(g->side, cudaStreamAttributeAccessPolicyWindow, &v) != cudaSuccess)
        (void)cudaGetLastError();
    if (g->cs && g->cs != g->s && cudaStreamSetAttribute(g->cs, cudaStreamAttributeAccessPolicyWindow, &v) != cudaSuccess)
        (void)cudaGetLastError();
    /* off: the lines kept persisting go back to normal, so the other
     * plugins' kernels between cycles have the whole L2 */
    if (!on && cudaCtxResetPersistingL2Cache() != cudaSuccess) (void)cudaGetLastError();
}

/* Every device array; with g->counting only their bytes are added up. */
static void allocate(hier_gpu *g, int *bad)
{
    hg_args *a = &g->a;
    const int n = a->n, S = g->cfg.batch;
    const size_t cells = (size_t)(g->ncells ? g->ncells : 1);
    a->tab = dalloc(g, HG_T_SIZE * sizeof(double), bad);
    a->unit = dalloc(g, units_of(a) * sizeof(double), bad);
    a->fx = dalloc(g, cells * (size_t)a->fstride * sizeof(long long), bad);
    a->blk = dalloc(g, cells * (size_t)a->stride * sizeof(double), bad);
    a->cnt = dalloc(g, cells * sizeof(int), bad);
    a->start = dalloc(g, (size_t)g->nleaves * sizeof(int), bad);
    a->count = dalloc(g, (size_t)g->nleaves * sizeof(int), bad);
    a->cap = dalloc(g, (size_t)g->nleaves * sizeof(int), bad);
    a->fill = dalloc(g, (size_t)g->nleaves * sizeof(int), bad);
    const size_t packed = packed_of(n, g->nleaves);
    a->pk = dalloc(g, packed * sizeof(float4), bad);
    a->pr = dalloc(g, packed * sizeof(float), bad);
    a->pid = dalloc(g, packed * sizeof(int), bad);
    a->slot = dalloc(g, (size_t)n * sizeof(int), bad);
    a->leafof = dalloc(g, (size_t)n * sizeof(int), bad);
    a->ovf = dalloc(g, ((size_t)n + 1) * sizeof(int), bad);
    a->novf = dalloc(g, sizeof(int), bad);
    a->ovslot = dalloc(g, (size_t)n * sizeof(int), bad);
    for (int i = 0; i < 3; ++i) {
        g->told[i] = dalloc(g, (size_t)S * sizeof(float4), bad);
        g->ttri[i] = dalloc(g, (size_t)S * sizeof(float4), bad);
    }
    a->pts = dalloc(g, 2 * (size_t)S * sizeof(hg_point), bad);
    a->front = dalloc(g, 2 * (size_t)S * 2 * HG_FRONT * sizeof(unsigned), bad);
    a->nearl = dalloc(g, 2 * (size_t)S * HG_NEAR * sizeof(unsigned), bad);
    /* corr and flg of both parities in one piece: one L2 window holds
     * them (l2_window); the previous batch's (corrx, flgx) are read once */
    const size_t SS = (size_t)S * (size_t)S;
    double *in = dalloc(g, 2 * SS * (sizeof(double) + 1), bad), *x = dalloc(g, 2 * SS * (sizeof(double) + 1), bad);
    for (int i = 0; i < 2 && in && x; ++i) {
        g->corr[i] = in + i * SS;
        g->flg[i] = (unsigned char *)(in + 2 * SS) + i * SS;
        g->corrx[i] = x + i * SS;
        g->flgx[i] = (unsigned char *)(x + 2 * SS) + i * SS;
    }
    a->tabs = dalloc(g, (size_t)HG_TRI_CHUNK * (size_t)S * sizeof(double), bad);
    a->tsq = dalloc(g, (size_t)HG_TRI_CHUNK * (size_t)S * sizeof(double), bad);
    a->tnA = dalloc(g, (size_t)HG_TRI_CHUNK * (size_t)S * sizeof(int), bad);
    for (int i = 0; i < 2; ++i) g->tr[i] = dalloc(g, (size_t)S * sizeof(hg_trial), bad);
    a->vstate = dalloc(g, (size_t)S * sizeof(double), bad);
    a->nstate = dalloc(g, 2 * (size_t)S * sizeof(int), bad);
    for (int i = 0; i < 2; ++i) g->dE[i] = dalloc(g, (size_t)S * sizeof(double), bad);
    a->close = dalloc(g, (size_t)S * sizeof(int), bad);
    a->clist = dalloc(g, (size_t)S * sizeof(int), bad);
    a->nclist = dalloc(g, sizeof(int), bad);
    for (int i = 0; i < 2; ++i) g->acc[i] = dalloc(g, (size_t)S, bad);
    a->xpart = dalloc(g, 2 * HG_EXACT_BLOCKS * sizeof(double), bad);
    a->xbad = dalloc(g, HG_EXACT_BLOCKS * sizeof(int), bad);
    a->xjob = dalloc(g, HG_XCTR * sizeof(unsigned long long), bad);
    a->xch = dalloc(g, 3 * (size_t)a->xnch * sizeof(double), bad);
    a->xgrp = dalloc(g, 3 * HG_XCTR * sizeof(double), bad);
    a->xgdone = dalloc(g, HG_XCTR * sizeof(unsigned), bad);
    a->xdone = dalloc(g, sizeof(unsigned), bad);
    a->xticket = dalloc(g, sizeof(unsigned long long), bad);
    a->status = dalloc(g, sizeof(hg_status), bad);
    a->cycle_acc = dalloc(g, sizeof(long long), bad);
    a->tot = dalloc(g, 3 * sizeof(double), bad);
    g->d_rnd = dalloc(g, (size_t)n * sizeof(float4), bad);
}

size_t hier_gpu_bytes(const hier_gpu_cfg *cfg, int n)
{
    hier_gpu *g = calloc(1, sizeof *g);
    if (!g) return 0;
    g->cfg = *cfg;
    g->counting = 1;
    g->kn = knob_defaults(cfg->ideal);
    geometry(g, n);
    int bad = 0;
    allocate(g, &bad);
    const size_t bytes = g->counted;
    free(g);
    return bytes;
}

int hier_gpu_create(const metro_host_api *host, metro_ctx *ctx, const hier_gpu_cfg *cfg, metro_state *st,
                    hier_gpu **out)
{
    *out = NULL;
    hg_knobs kn;
    if (read_knobs(host, ctx, cfg->ideal, &kn)) return -1;
    hier_gpu *g = calloc(1, sizeof *g);
    if (!g) return host->fail(ctx, "out of memory");
    g->kn = kn;
    g->host = host;
    g->ctx = ctx;
    g->cfg = *cfg;
    g->s = (cudaStream_t)host->stream(ctx);
    g->side = g->s;
    /* Batches overlap under reference = exact (METRO_HIER_OVERLAP=1 or 0
     * forces it either way): there a chain has a few exact passes, each a
     * stop for the host's launch of hg_exact; the float reference's floor
     * leaves ~10 a batch at 2^23, which want the helpers inside the chain
     * and every SM for them (an overlap that kept 30% of the SMs for the
     * chain made a cycle 1.8x slower there: bench/NOTES.md).  The chain's
     * stream is of the highest priority: its block and its exact passes'
     * take SMs before the walks' waiting blocks do. */
    g->lead = kn.overlap;
    g->cs = g->lead ? NULL : g->s;
    int prio_lo = 0, prio_hi = 0;
    if (g->lead && (cu(g, cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi), "the streams' priorities") ||
                    cu(g, cudaStreamCreateWithPriority(&g->cs, cudaStreamNonBlocking, prio_hi), "creating a stream") ||
                    cu(g, cudaEventCreateWithFlags(&g->ready_ev[0], cudaEventDisableTiming), "creating an event") ||
                    cu(g, cudaEventCreateWithFlags(&g->ready_ev[1], cudaEventDisableTiming), "creating an event") ||
                    cu(g, cudaEventCreateWithFlags(&g->pack_ev, cudaEventDisableTiming), "creating an event") ||
                    cu(g, cudaEventCreateWithFlags(&g->prep_ev, cudaEventDisableTiming), "creating an event") ||
                    cu(g, cudaEventCreateWithFlags(&g->trials_ev, cudaEventDisableTiming), "creating an event"))) {
        hier_gpu_free(g);
        return -1;
    }
    /* non-blocking, as the core's own: no implicit wait on the legacy
     * default stream (the events order it against the main one) */
    if ((kn.side &&
         cu(g, cudaStreamCreateWithFlags(&g->side, cudaStreamNonBlocking), "creating a stream")) ||
        cu(g, cudaEventCreateWithFlags(&g->fork_ev, cudaEventDisableTiming), "creating an event") ||
        cu(g, cudaEventCreateWithFlags(&g->join_ev, cudaEventDisableTiming), "creating an event")) {
        hier_gpu_free(g);
        return -1;
    }
    g->early = g->lead && g->side != g->s;
    g->profile = kn.profile;
    for (int i = 0; g->profile && i < HG_EVENTS + 2; ++i)
        if (cu(g, cudaEventCreate(i < HG_EVENTS ? &g->ev[i] : &g->sev[i - HG_EVENTS]), "creating an event"))
            g->profile = 0;
    g->a.profile = g->profile; /* hg_chain's timing only where the profile prints it */
    for (int i = 0; i < HG_N_KERNELS; ++i)
        if (host->kernel(ctx, kernel_names[i], &g->k[i])) {
            hier_gpu_free(g);
            return -1;
        }
    hg_args *a = &g->a;
    const int n = st->particles;
    geometry(g, n);
    /* the fixed point holds Σ|z| 2^HG_FIX_BITS in 62 bits */
    double zsum = 0.0;
    for (int i = 0; i < n; ++i) zsum += fabs((double)cfg->prm.sp[coulomb_hs_species(st->pos[i].w)].x);
    if (zsum >= ldexp(1.0, 62 - HG_FIX_BITS)) {
        hier_gpu_free(g);
        return host->fail(ctx,
                          "hierarchical: on CUDA the tree's fixed-point moments hold a total |charge| below %.0f; "
                          "this system has %.6g: run it with device = cpu",
                          ldexp(1.0, 62 - HG_FIX_BITS), zsum);
    }
    int bad = 0;
    double *tab = malloc(HG_T_SIZE * sizeof(double));
    const size_t units = units_of(a);
    double *unit = malloc(units * sizeof(double));
    if (!tab || !unit) {
        free(tab);
        free(unit);
        hier_gpu_free(g);
        return host->fail(ctx, "out of memory");
    }
    tables(g, tab, unit);
    allocate(g, &bad);
    if (!bad && cu(g, cudaMallocHost((void **)&g->h_status, sizeof(hg_status)), "cudaMallocHost of the status")) bad = 1;
    int dev = 0;
    if (!bad && (cu(g, cudaGetDevice(&dev), "cudaGetDevice") ||
                 cu(g, cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, dev), "counting the SMs")))
        bad = 1;
    const int sms = g->sms; /* the device's own count, whatever the chain's launch uses */
    /* METRO_HIER_CHAIN_BLOCKS=B (tests): B blocks in the chain's launch,
     * 1 = no helper, so the deciding warp sums every chunk itself.
     * Batches overlapping, the deciding block alone: helpers would hold
     * SMs (each block of S threads fills one's registers) that the first
     * look's one wave needs (bench/NOTES.md) */
    if (g->lead) g->sms = 1;
    else if (kn.chain_blocks) g->sms = kn.chain_blocks;
    if (g->sms < 1) g->sms = 1;
    a->xhost = g->lead;
    if (!bad) l2_setup(g, dev);
    /* METRO_HIER_REFINE_WARPS=W: W warps walk each point of the refined
     * look (1: one, as every other walk): kn.team */
    /* how many of the refined look's blocks the device holds at once
     * (hg_enclose splits a block into teams when its points are more) */
    int per_sm = 0, per_sm_narrow = 0;
    if (!bad && (cu(g, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)g->k[K_ENCLOSE], 32 * g->kn.team, 0),
                    "the refined look's occupancy") ||
                 cu(g, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_narrow, (const void *)g->k[K_NARROW],
                                                                     32 * HG_TEAM_NARROW, 0),
                    "the refined look's occupancy")))
        bad = 1;
    if (per_sm < 1) per_sm = 1;
    const int free_sms = g->lead && sms > g->sms ? sms - g->sms : sms;
    a->refine_slots = per_sm * free_sms;
    a->refine_slots_narrow = per_sm_narrow * free_sms;
    /* METRO_HIER_REFINE_SLOTS=B (tests): as if the device held B blocks,
     * so that the refined look splits its blocks into teams sooner (and
     * the narrow kernel's count in the device's proportion) */
    if (kn.slots > 0) {
        a->refine_slots = kn.slots; /* at most 2^20: split * slots fits an int */
        a->refine_slots_narrow = (int)((long long)a->refine_slots * per_sm_narrow / per_sm);
    }
    /* the narrow blocks are for teams of HG_TEAM_NARROW where the wide ones
     * would split smaller (never when the wide ones walk in teams of
     * HG_TEAM_NARROW or fewer anyway); METRO_HIER_REFINE_NARROW=0 never,
     * 2 always (comparisons, tests) */
    a->refine_narrow_from = (int)((long long)a->refine_slots * g->kn.team / HG_TEAM_NARROW);
    a->refine_narrow = kn.narrow;
    if (a->refine_narrow == 1 && (g->kn.team <= HG_TEAM_NARROW || a->refine_slots_narrow <= a->refine_narrow_from))
        a->refine_narrow = 0;
    /* no job yet: the counters hold an epoch no launch has before they
     * write it (all ones), the tickets start at 0 */
    if (bad || cu(g, cudaMemsetAsync(a->xjob, 0xff, HG_XCTR * sizeof(unsigned long long), g->s), "clearing the jobs") ||
        cu(g, cudaMemsetAsync(a->xticket, 0, sizeof(unsigned long long), g->s), "clearing the tickets") ||
        cu(g, cudaMemcpyAsync((void *)a->tab, tab, HG_T_SIZE * sizeof(double), cudaMemcpyHostToDevice, g->s), "uploading tables") ||
        cu(g, cudaMemcpyAsync((void *)a->unit, unit, units * sizeof(double), cudaMemcpyHostToDevice, g->s), "uploading units")) {
        free(tab);
        free(unit);
        hier_gpu_free(g);
        return -1;
    }
    a->pos = st->d_pos;
    a->rnd = g->d_rnd;
    a->energy = st->d_energy;
    hg_status zero;
    memset(&zero, 0, sizeof zero);
    zero.preset = -1;
    *g->h_status = zero;
    int rc = cu(g, cudaMemcpyAsync(a->status, &zero, sizeof zero, cudaMemcpyHostToDevice, g->s), "clearing the status");
    free(tab);
    free(unit);
    if (rc) {
        hier_gpu_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* The tree from the positions on the device (at the start, and after a
 * restore replaced them): leaves, then every particle into the moments of
 * every level, then the blocks. */
int hier_gpu_rebuild(hier_gpu *g)
{
    hg_args *a = &g->a;
    const long long cells = g->ncells;
    return cu(g, cudaMemsetAsync(a->fx, 0, (size_t)(cells ? cells : 1) * (size_t)a->fstride * sizeof(long long), g->s), "clearing moments") ||
           cu(g, cudaMemsetAsync(a->cnt, 0, (size_t)(cells ? cells : 1) * sizeof(int), g->s), "clearing counts") ||
           cu(g, cudaMemsetAsync(a->novf, 0, sizeof(int), g->s), "clearing the overflow list") || repack(g, 0) ||
           run2(g, K_MOM, (long long)a->n * (a->L > 1 ? a->L - 1 : 0) * 16, 128, 0) || run2(g, K_NORMS, cells * 32, 128, 0) ||
           cu(g, cudaStreamSynchronize(g->s), "building the tree");
}

/* a walk's lists overflowed (hg_status.err) */
static int overflowed(hier_gpu *g)
{
    return g->host->fail(g->ctx, "hierarchical: a tree walk outgrew its lists (%d cells a level, %d near leaves); "
                                 "raise theta or leaf",
                         HG_FRONT, HG_NEAR);
}

/* The total energy from the tree as it stands (DESIGN.md, "The energy"):
 * every particle's walk at its own place, in chunks of 2 S (the scratch
 * of a batch's walks), each chunk's ½ Σ U summed by one block in a fixed
 * order, so two runs give the same bits. */
int hier_gpu_total(hier_gpu *g, double *energy, double *bound, long long *bad)
{
    hg_args *a = &g->a;
    const int b0 = a->b0, S = a->S, chunk = 2 * g->cfg.batch;
    double tot[3];
    int rc = cu(g, cudaMemsetAsync(a->tot, 0, sizeof tot, g->s), "clearing the total");
    for (int c0 = 0; !rc && c0 < a->n; c0 += chunk) {
        a->b0 = c0;
        a->S = a->n - c0 < chunk ? a->n - c0 : chunk;
        rc = run2(g, K_ENCLOSE, (long long)a->S * 32, 32 * HG_WARPS, HG_WALK_WHOLE) || run1(g, K_TSUM, HG_TSUM, HG_TSUM);
    }
    a->b0 = b0;
    a->S = S;
    if (rc || cu(g, cudaMemcpyAsync(tot, a->tot, sizeof tot, cudaMemcpyDeviceToHost, g->s), "reading the total") ||
        cu(g, cudaMemcpyAsync(g->h_status, a->status, sizeof(hg_status), cudaMemcpyDeviceToHost, g->s), "reading the status") ||
        cu(g, cudaStreamSynchronize(g->s), "the total energy"))
        return -1;
    if (g->h_status->err) return overflowed(g);
    *energy = tot[0];
    *bound = tot[1] * (1.0 + 1e-9);
    *bad = (long long)tot[2];
    return 0;
}

/* The chain stopped at trial k of the batch: the exact pass on the GPU,
 * and where it cannot decide, the reference on the host (coulomb_hs's own
 * delta() on the current positions and metro_accept: bit for bit the
 * sequential reference). */
static int undecided(hier_gpu *g, metro_state *st, int k, hier_gpu_stats *stats)
{
    hg_args *a = &g->a;
    void *args[3] = {a, &k, NULL};
    int blocks = HG_EXACT_BLOCKS;
    dim3 grid = {HG_EXACT_BLOCKS, 1, 1}, blk = {256, 1, 1}, one = {1, 1, 1};
    if (cu(g, cudaLaunchKernel((const void *)g->k[K_EXACT], grid, blk, args, 0, g->cs), "launching hg_exact")) return -1;
    args[2] = &blocks;
    if (cu(g, cudaLaunchKernel((const void *)g->k[K_DECIDE], one, one, args, 0, g->cs), "launching hg_exact_decide") ||
        cu(g, cudaMemcpyAsync(g->h_status, a->status, sizeof(hg_status), cudaMemcpyDeviceToHost, g->cs), "reading the status") ||
        cu(g, cudaStreamSynchronize(g->cs), "the exact pass"))
        return -1;
    if (g->h_status->exact_bad == 0) {
        stats->exact++;
        return 0;
    }
    /* the reference itself, on a pinned copy of the positions (a stop of
     * 2^23 ions took 24 ms with the pageable copy) */
    const int i = a->b0 + k;
    const size_t bytes = (size_t)a->n * sizeof(metro_float4);
    if (!g->h_pos && !g->unpinned && cudaMallocHost((void **)&g->h_pos, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* no pinned memory to spare: the core's pageable copy, slower */
        g->h_pos = NULL;
        g->unpinned = 1;
    }
    metro_float4 *hp = g->h_pos ? g->h_pos : st->pos;
    float4 u;
    if (cu(g, cudaMemcpy(hp, st->d_pos, bytes, cudaMemcpyDeviceToHost), "copying positions") ||
        cu(g, cudaMemcpy(&u, g->d_rnd + i, sizeof u, cudaMemcpyDeviceToHost), "copying a uniform"))
        return -1;
    const metro_float4 t = brush_trial(hp[i], u.x, u.y, u.z, a->step);
    hg_status *h = g->h_status;
    double de;
    if (a->ideal) { /* the exact sum's last resort (hier_tree.c) */
        h->preset = hier_ideal_reference(&a->prm, hp, a->n, i, t, u.w, &de);
        if (h->preset < 0) return hier_undecidable(g->host, g->ctx, g->cycle, i, de, u.w);
    } else {
        de = g->cfg.pot->delta(g->cfg.pot_self, hp, a->n, i, t);
        h->preset = metro_accept(de, u.w);
    }
    h->preset_de = de;
    h->exact_bad = 0;
    stats->fallback++;
    const size_t from = offsetof(hg_status, preset), to = offsetof(hg_status, err);
    return cu(g, cudaMemcpyAsync((char *)a->status + from, (char *)h + from, to - from, cudaMemcpyHostToDevice, g->cs),
              "writing the status");
}

/* the profile's event e on stream `on` (0 = success, for || chains) */
static int mark(hier_gpu *g, int e, cudaStream_t on)
{
    if (g->profile) cudaEventRecord(g->ev[e], on);
    return 0;
}

/* adds phase p's time if its events were recorded and not yet added
 * (before they are recorded again, and at the cycle's end) */
static void profile_phase(hier_gpu *g, int p)
{
    if (!g->profile || !g->pending[p]) return;
    float ms = 0.f;
    cudaEventSynchronize(g->ev[phase_ev[p][1]]);
    cudaEventElapsedTime(&ms, g->ev[phase_ev[p][0]], g->ev[phase_ev[p][1]]);
    g->phase[p] += ms * 1e-3;
    g->pending[p] = 0;
}

/* phases p0 ... p1 are about to be recorded again */
static void profile_renew(hier_gpu *g, int p0, int p1)
{
    for (int p = p0; g->profile && p <= p1; ++p) {
        profile_phase(g, p);
        g->pending[p] = 1;
    }
}

/* The view a becomes batch bi of the cycle's `trials` moves: its
 * particles, its trials' and rules' buffers (hier_gpu, lead), and, batches
 * overlapping, the previous batch as mates */
static void view(hier_gpu *g, int bi, int trials)
{
    hg_args *a = &g->a;
    const int S0 = g->cfg.batch;
    a->b0 = bi * S0;
    a->S = trials - a->b0 < S0 ? trials - a->b0 : S0;
    a->Sp = g->lead && bi > 0 ? S0 : 0;
    a->told = g->told[bi % 3];
    a->ttri = g->ttri[bi % 3];
    a->toldp = g->told[(bi + 2) % 3];
    a->ttrip = g->ttri[(bi + 2) % 3];
    a->tr = g->tr[bi & 1];
    a->corr = g->corr[bi & 1];
    a->flg = g->flg[bi & 1];
    a->corrx = g->corrx[bi & 1];
    a->flgx = g->flgx[bi & 1];
    a->acc = g->acc[bi & 1];
    a->accp = g->acc[(bi + 1) & 1];
    a->dE = g->dE[bi & 1];
}

/* Batch bi's trials and mates' terms (hg_trials, hg_tri) on stream `on`
 * (the side stream or the chain's): they read only the batch's own
 * particles, which no earlier batch moves, and the previous batch's
 * trials (none past the cycle's end) */
static int batch_trials(hier_gpu *g, int bi, int trials, cudaStream_t on)
{
    hg_args *a = &g->a;
    view(g, bi, trials);
    if (a->S <= 0) return 0;
    void *args1[1] = {a};
    dim3 tri_grid = {(unsigned)((a->S + 127) / 128), HG_TRI_CHUNK, 1}, tri_blk = {128, 1, 1};
    return launch(g, on, K_TRIALS, a->S, 256, args1) ||
           cu(g, cudaLaunchKernel((const void *)g->k[K_TRI], tri_grid, tri_blk, args1, 0, on), "launching hg_tri");
}

/* the one-block kernels' tree sums want a power of two */
static int pow2_of(int S)
{
    int p = 32;
    while (p < S) p *= 2;
    return p;
}

/* Batch bi's looks on the main stream: the first look (every trial and
 * old place) and the rules (hg_prep); then the trials near their
 * threshold looked at again, closer (the CPU's first refinement), and
 * their rules made again; then, batches overlapping, the event ready[bi &
 * 1] (batch bi's chain may start).  The chain's exact passes are for what
 * that leaves open.  Overlapping, the previous batch's chain writes its
 * accepted places (pos) while these walks run; the walks read pos only
 * for the overflow list, which holds only particles moved by earlier
 * batches since the last packing (every cycle starts with one), never the
 * previous batch's. */
static int looks(hier_gpu *g, int bi, int trials)
{
    hg_args *a = &g->a;
    view(g, bi, trials);
    const int S = a->S;
    profile_renew(g, 0, 2);
    profile_phase(g, 5); /* before its first event is recorded again */
    g->looked = 1;
    return mark(g, 0, g->s) || run2(g, K_ENCLOSE, 2LL * S * 32, 32 * HG_WARPS, HG_WALK_FIRST) || mark(g, 1, g->s) ||
           run2(g, K_PREP, S, 256, 0) ||
           (g->early && cu(g, cudaEventRecord(g->prep_ev, g->s), "recording an event")) || mark(g, 2, g->s) ||
           (g->cfg.refine > 0 && (run1(g, K_CLIST, pow2_of(S), pow2_of(S)) ||
                                  (a->refine_narrow < 2 && run2(g, K_ENCLOSE, 2LL * S * 32 * g->kn.team, 32 * g->kn.team, HG_WALK_REFINE)) ||
                                  (a->refine_narrow && run1(g, K_NARROW, 2LL * S * 32 * HG_TEAM_NARROW, 32 * HG_TEAM_NARROW)) ||
                                  run2(g, K_PREP, S, 256, 1))) ||
           mark(g, 3, g->s) || (g->lead && cu(g, cudaEventRecord(g->ready_ev[bi & 1], g->s), "recording an event"));
}

/* Batch bi's chain on its stream (batches overlapping: after its looks,
 * the event ready[bi & 1], and the previous batch's moves first added into
 * its sums, hg_fold): the decisions, resumed after each stop for the
 * exact pass (overlapping, every trial the looks leave open) or the
 * host's reference.  Returns once the batch is decided. */
static int chain(hier_gpu *g, metro_state *st, int bi, int trials, hier_gpu_stats *stats)
{
    hg_args *a = &g->a;
    view(g, bi, trials);
    const int S = a->S;
    int from = 0;
    void *cargs[2] = {a, &from}, *args1[1] = {a};
    dim3 chain_grid = {(unsigned)g->sms, 1, 1}, chain_blk = {(unsigned)((S + 31) / 32 * 32), 1, 1};
    profile_renew(g, 3, 3);
    if ((g->lead && cu(g, cudaStreamWaitEvent(g->cs, g->ready_ev[bi & 1], 0), "waiting for an event")) ||
        mark(g, 4, g->cs) ||
        (a->Sp && launch(g, g->cs, K_FOLD, (long long)((S + 31) / 32) * 1024, 1024, args1)))
        return -1;
    for (;;) {
        if (cu(g, cudaLaunchKernel((const void *)g->k[K_CHAIN], chain_grid, chain_blk, cargs, 0, g->cs), "launching hg_chain") ||
            cu(g, cudaMemcpyAsync(g->h_status, a->status, sizeof(hg_status), cudaMemcpyDeviceToHost, g->cs), "reading the status") ||
            cu(g, cudaStreamSynchronize(g->cs), "the decision chain"))
            return -1;
        if (g->h_status->err) return overflowed(g);
        if (g->h_status->stop >= S) break;
        from = g->h_status->stop;
        if (g->profile) cudaEventRecord(g->sev[0], g->cs);
        if (undecided(g, st, from, stats)) return -1;
        if (g->profile) {
            float ms = 0.f;
            cudaEventRecord(g->sev[1], g->cs);
            cudaEventSynchronize(g->sev[1]);
            cudaEventElapsedTime(&ms, g->sev[0], g->sev[1]);
            g->t_stops += ms * 1e-3;
            g->stops++;
        }
    }
    return mark(g, 5, g->cs);
}

/* Early (g->early): batch `next`'s trials and mates' terms on the chain's
 * stream, right after the chain that ended there, once the rules of the
 * batch before `next` have read hg_tri's partial sums (prep_ev); the
 * main stream waits for them (trials_ev) at the end of the update before
 * next's looks.  What they overwrite is free by then: the trial buffers
 * of batch next - 3, whose update is before those rules on the main
 * stream (and which batch next - 2's mates' terms read, before its
 * chain), and the mates' terms of batch next - 2, whose chain has ended;
 * what they read (batch next - 1's trials) is written before them and not
 * again. */
static int early_trials(hier_gpu *g, int next, int trials)
{
    return cu(g, cudaStreamWaitEvent(g->cs, g->prep_ev, 0), "waiting for an event") ||
           batch_trials(g, next, trials, g->cs) || cu(g, cudaEventRecord(g->trials_ev, g->cs), "recording an event");
}

/* Batch bi's update of the tree after its chain: the moments on the main
 * stream, and beside them on the side stream its leaves' moves and batch
 * `next`'s trials and mates' terms (early, those are on the chain's
 * stream already, and the main stream waits for them here: beside the
 * update, hg_tri's twice as many mates outlasted the moments, and on the
 * side stream they followed the leaves' moves); then, where due, the leaves
 * packed afresh (the holes and the overflow list gone, the leaves in
 * index order again: HG_REPACKS), which the next chain, writing places,
 * waits for */
static int update(hier_gpu *g, int bi, int next, int trials, int repack_now)
{
    hg_args *a = &g->a;
    view(g, bi, trials);
    const int S = a->S, lv = a->L > 1 ? a->L - 1 : 0;
    void *args1[1] = {a};
    profile_renew(g, 4, 4);
    profile_phase(g, 5);
    /* hg_leaf_move is launched with this batch's view, batch_trials (last)
     * changes it */
    mark(g, 6, g->s);
    /* the looks' end (event 3) to here; overlapping, the cycle's last
     * update follows the one before it, not looks: no wait to count */
    g->pending[5] = g->profile && g->looked;
    g->looked = 0;
    return fork_to(g, g->side) || launch(g, g->side, K_MOVE, pow2_of(S), pow2_of(S), args1) ||
           run2(g, K_MOM, (long long)S * lv * 2 * 16, 128, 1) || run2(g, K_NORMS, (long long)S * lv * 2 * 32, 128, 1) ||
           (g->early ? cu(g, cudaStreamWaitEvent(g->s, g->trials_ev, 0), "waiting for an event")
                     : batch_trials(g, next, trials, g->side)) ||
           join_from(g, g->side) ||
           (repack_now && (repack(g, 1) ||
                           (g->lead && (cu(g, cudaEventRecord(g->pack_ev, g->s), "recording an event") ||
                                        cu(g, cudaStreamWaitEvent(g->cs, g->pack_ev, 0), "waiting for an event"))))) ||
           mark(g, 7, g->s);
}

/* A cycle as batches of S0 = batch moves.  In order (lead 0): batch k's
 * looks, its chain, its update.  Overlapping (lead 1): the main stream
 * runs batch k - 1's update, batch k + 1's looks, batch k's update, ...,
 * and batch k's chain runs beside the first two, from the end of its own
 * looks. */
int hier_gpu_cycle(hier_gpu *g, metro_state *st, long long cycle, int trials, hier_gpu_stats *stats,
                   long long *accepted)
{
    hg_args *a = &g->a;
    g->cycle = cycle;
    const int S0 = g->cfg.batch, lead = g->lead;
    const int nb = (trials + S0 - 1) / S0, every = (nb + HG_REPACKS - 1) / HG_REPACKS;
    l2_window(g, 1);
    /* the first batch's trials beside the cycle's packing of the leaves;
     * overlapping, the second's after the first's rules (hg_tri's partial
     * sums, tabs, have one buffer: hg_prep's first call reads them) */
    if (fork_to(g, g->side) || batch_trials(g, 0, trials, g->side) ||
        cu(g, cudaMemsetAsync(a->cycle_acc, 0, sizeof(long long), g->s), "clearing the count") || repack(g, 1) ||
        join_from(g, g->side) || looks(g, 0, trials) ||
        (lead && nb > 1 && (fork_to(g, g->side) || batch_trials(g, 1, trials, g->side) || join_from(g, g->side) ||
                            looks(g, 1, trials))))
        return -1;
    for (int bi = 0; bi < nb; ++bi) {
        const int next = bi + 1 + lead;
        if (chain(g, st, bi, trials, stats) || (g->early && early_trials(g, next, trials)) ||
            update(g, bi, next, trials, (bi + 1) % every == 0 && bi + 1 < nb) ||
            (next < nb && looks(g, next, trials)))
            return -1;
    }
    l2_window(g, 0);
    long long acc = 0;
    if (cu(g, cudaMemcpyAsync(&acc, a->cycle_acc, sizeof acc, cudaMemcpyDeviceToHost, g->s), "reading acceptances") ||
        cu(g, cudaMemcpyAsync(g->h_status, a->status, sizeof(hg_status), cudaMemcpyDeviceToHost, g->s), "reading the status") ||
        cu(g, cudaStreamSynchronize(g->s), "the cycle"))
        return -1;
    *accepted = acc;
    for (int k = 0; k < 2; ++k) {
        const unsigned now = (unsigned)g->h_status->decided[k];
        *(k ? &stats->chain : &stats->enclosure) += (long long)(now - g->seen_decided[k]); /* modulo 2^32 */
        g->seen_decided[k] = now;
    }
    stats->refined += g->h_status->refined - g->seen_refined;
    g->seen_refined = g->h_status->refined;
    if (g->profile) {
        for (int p = 0; p < HG_PHASES; ++p) profile_phase(g, p);
        g->host->log(g->ctx, METRO_LOG_INFO,
                     "profile so far: %.4g s walks, %.4g s rules, %.4g s refined looks, %.4g s "
                     "decision chain (its exact passes and stops included; %lld stops, %.4g s), %.4g s tree updates "
                     "(the leaves' packings included, and, in order, the next batch's trials and mates' terms beside them; "
                     "overlapping with a side stream, those run before, beside the refined look, and the update waits for them; "
                     "the first batch's, beside the cycle's first packing, and the second's when batches overlap, "
                     "in no phase), %.4g s between looks and update (the main stream waiting for the chain or the "
                     "host); the chain's deciding block ran %.4g s of its phase%s",
                     g->phase[0], g->phase[1], g->phase[2], g->phase[3], g->stops, g->t_stops, g->phase[4], g->phase[5],
                     (double)g->h_status->chain_ns * 1e-9,
                     lead ? "; batches overlapping: a batch's chain runs beside the previous batch's update and the next "
                            "batch's looks" : "");
    }
    return 0;
}

float4 *hier_gpu_uniforms(hier_gpu *g)
{
    return g->d_rnd;
}

cudaStream_t hier_gpu_stream(hier_gpu *g)
{
    return g->s;
}
