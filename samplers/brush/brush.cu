/* brush.cu — sequential-updating cycles on the GPU: the Brush Metropolis
 * algorithm of seed 002 §3, exact (the same chain as the CPU loop, up to
 * floating-point ties), through the device ABI of metro/device.h.
 *
 * Work of the block that owns group g of cycle k (S particles,
 * S = P T / eta):
 *
 *   A  own group, old positions: every particle k against the later
 *      particles of the group (the upper triangle) and, inside k's chunk of
 *      32, the terms the decision chain will need for the earlier ones;
 *   1  later groups (old positions): tiles of partners in shared memory,
 *      every thread eta-strided over them for its P particles, each tile
 *      (for k > 0) once cycle k-1 has finished its groups;
 *   2  earlier groups (new positions): the same, each tile after the flag of
 *      its last group says it is final; then group g-1 chunk by chunk as its
 *      decision rounds publish them, so the critical path after g-1's last
 *      chunk is one chunk of 32 partners;
 *   D  decisions, chunk by chunk of 32 particles, each by one warp in a
 *      warp-synchronous chain (below), in rounds of two steps (at D);
 *   then the last chunk's new positions go to global memory and flags[g]
 *   is released.
 *
 * The chain.  For lane l and an earlier lane j of the same chunk, the term
 * of j is A_j = ΔU(l; x_j) if j is rejected and B_j = ΔU(l; x~_j) if it is
 * accepted.  Both are computed before the chain (during A, or in the
 * round's first step), so a step of the chain is a compare, a ballot and
 * a select: s += accepted_j ? d_j : (A_j infinite ? ∞ : 0), where the
 * finite A_j are already in the base and d_j = B_j - (finite A_j).
 * Accepting j frees l from an overlap with j's old position, which is why
 * infinite A_j are kept out of the base.
 *
 * Decision.  Lane l accepts iff metro_accept(base + s, u) would.  With
 * M = -ln u - base (double), that is s < M up to a tie; the chain compares
 * the float s with float bounds M ∓ 1e-6 (1 + |M|), which no rounding of
 * ln, exp or the sum can cross, and calls metro_accept itself in the rare
 * case that s falls between them.
 *
 * Sums: float over runs of at most 32 partners (the potential's pair-delta
 * runs, metro/device.h), then double (DESIGN.md).  Run boundaries depend
 * on g alone, never on timing, so the trajectory is reproducible.
 * Infinite energies are +INFINITY (never NaN in a used term): a trial that
 * overlaps or leaves the wall is rejected.
 *
 * No deadlock: a block's (cycle, group) is the ticket it takes when it
 * starts, and it only ever waits for smaller tickets, whose blocks took
 * them earlier and are therefore running (brush.h).  Inside a block every
 * hand-off is a __syncthreads (so compute-sanitizer's racecheck can follow
 * it); between blocks, release/acquire flags.
 */
#include "metro/device.h"

#include "brush.h"
#include "brush_batch.h"

#define BRUSH_FULL 0xffffffffu
/* earlier groups taken one at a time near the front of the chain */
#define BRUSH_NEAR 8

/* ---- memory-model helpers ------------------------------------------------ */

static __device__ __forceinline__ unsigned brush_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void brush_st_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Release two flags with one fence: fence.acq_rel.gpu then relaxed
 * stores is a release of each. */
static __device__ __forceinline__ void brush_release2(unsigned *p, unsigned *q, unsigned v)
{
    asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%0], %2;\n\tst.relaxed.gpu.global.u32 [%1], %2;"
                 ::"l"(p), "l"(q), "r"(v) : "memory");
}

/* Thread 0: wait until group J of this launch is final. */
static __device__ void brush_wait_group(const unsigned *flags, int J, unsigned epoch)
{
    unsigned ns = 8;
    while ((int)(brush_ld_acquire(flags + J) - epoch) < 0) {
        __nanosleep(ns);
        if (ns < 64) ns <<= 1;
    }
}

/* Trace points (METRO_BRUSH_TRACE): thread 0 stamps the time when L.trace
 * is set.  Off the hot loops; L is kernel-parameter memory, so the check
 * holds no register. */
static __device__ __forceinline__ void brush_stamp(const brush_launch &L, int cyc, int g, int k)
{
    if (L.trace && cyc == 0) {
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        L.trace[(size_t)g * BRUSH_TRACE_SLOTS + k] = gt;
        L.trace[(size_t)g * BRUSH_TRACE_SLOTS + 5 + k] = (unsigned long long)clock64();
        if (k == 0) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            L.trace[(size_t)g * BRUSH_TRACE_SLOTS + 10] = sm;
        }
    }
}

/* ---- pair terms ---------------------------------------------------------- */

/* The same with the bonded-pair rule (partners of the own group): bonded
 * neighbours through metro_interaction, the others through the pair-delta. */
static __device__ __forceinline__ float brush_id(float4 t, float4 o, float4 b, int i, int j, int chain)
{
    const int d = i - j;
    if (chain && (d == 1 || d == -1))
        return metro_interaction(t, b, i, j, chain) - metro_interaction(o, b, i, j, chain);
    return metro_pair_delta(t, o, b);
}

/* Bond correction for an index neighbour b in another group, whose pair
 * term the tile loops counted with metro_pair_energy. */
static __device__ __forceinline__ float brush_bond_fix(float4 t, float4 o, float4 b)
{
    return (metro_bond_energy(t, b) - metro_pair_energy(t, b)) - (metro_bond_energy(o, b) - metro_pair_energy(o, b));
}

/* One run of partners src[0], src[stride], ... (n of them, n <= 32)
 * against the thread's P particles: the potential's pair-delta sum (float
 * over the run, with its second pass, metro/device.h), added to acc in
 * double.  STRIDE 1 is the
 * hot case (the loads take immediate offsets); global partners are read
 * from L2 (other blocks write them during the launch). */
template <int P, int STRIDE, bool GLOBAL>
static __device__ __forceinline__ void brush_run(const float4 *src, int n, int stride, const float4 (&tr)[P],
                                                 const float4 (&ol)[P], double (&acc)[P])
{
    metro_pd_sum f[P];
#pragma unroll
    for (int q = 0; q < P; ++q) f[q] = metro_pair_delta_begin(tr[q], ol[q]);
    const int st = STRIDE ? STRIDE : stride;
    if (n == 32) {
#pragma unroll 8
        for (int s = 0; s < 32; ++s) {
            const float4 b = GLOBAL ? __ldcg(src + s * st) : src[s * st];
#pragma unroll
            for (int q = 0; q < P; ++q) metro_pair_delta_add(&f[q], b);
        }
    } else {
#pragma unroll 4
        for (int s = 0; s < n; ++s) {
            const float4 b = GLOBAL ? __ldcg(src + s * st) : src[s * st];
#pragma unroll
            for (int q = 0; q < P; ++q) metro_pair_delta_add(&f[q], b);
        }
    }
    /* a composite's short-ranged terms, when a partner of the run came
     * within their reach: the same partners again, in the same order, not
     * unrolled (for a lone term near() is false and this vanishes) */
    bool near = false;
#pragma unroll
    for (int q = 0; q < P; ++q) near |= metro_pair_delta_near(&f[q]);
    if (near) {
#pragma unroll 1
        for (int s = 0; s < n; ++s) {
            const float4 b = GLOBAL ? __ldcg(src + s * st) : src[s * st];
#pragma unroll
            for (int q = 0; q < P; ++q)
                if (metro_pair_delta_near(&f[q])) metro_pair_delta_near_add(&f[q], b);
        }
    }
#pragma unroll
    for (int q = 0; q < P; ++q) acc[q] += (double)metro_pair_delta_end(&f[q]);
}

/* The inter-group loop: partners tile[r], tile[r + eta], ... < m against
 * the thread's P particles, in runs of 32 partners. */
template <int P>
static __device__ __forceinline__ void brush_tile(const float4 *tile, int m, int r, int eta, const float4 (&tr)[P],
                                                  const float4 (&ol)[P], double (&acc)[P])
{
    int i = r;
    if (eta == 1)
        for (; i + 31 < m; i += 32) brush_run<P, 1, false>(tile + i, 32, 1, tr, ol, acc);
    for (; i + 31 * eta < m; i += 32 * eta) brush_run<P, 0, false>(tile + i, 32, eta, tr, ol, acc);
    if (i < m) brush_run<P, 0, false>(tile + i, (m - i + eta - 1) / eta, eta, tr, ol, acc);
}

/* One published chunk of 32 partners, read straight from L2 (each warp
 * after its own acquire): partners r, r + eta, ... against the thread's P
 * particles, one run, as brush_tile sums a tile of 32. */
template <int P>
static __device__ __forceinline__ void brush_chunk(const float4 *src, int r, int eta, const float4 (&tr)[P],
                                                   const float4 (&ol)[P], double (&acc)[P])
{
    if (eta == 1)
        brush_run<P, 1, true>(src, 32, 1, tr, ol, acc);
    else
        brush_run<P, 0, true>(src + r, (32 - r + eta - 1) / eta, eta, tr, ol, acc);
}

/* Load partners pos[b0 .. b0+m) into the tile (L2 only: other blocks write
 * pos during the launch). */
static __device__ __forceinline__ void brush_load(float4 *tile, const float4 *pos, int b0, int m)
{
    for (int i = threadIdx.x; i < m; i += blockDim.x) tile[i] = __ldcg(pos + b0 + i);
}

/* The in-chunk terms of lane `lane` of chunk c for the chain: d[j] and the
 * mask of infinite A_j, staged in phase A (c < pre: dl, ovl) or by the
 * round's first step (djit, and the per-warp masks omp of nx warps). */
static __device__ __forceinline__ void brush_terms(int c, int pre, int lane, int k, int cnt, int nx,
                                                   const unsigned *ovl, const float *dl, const float *djit,
                                                   const unsigned *omp, float (&d)[32], unsigned &om)
{
    const float *src = c < pre ? dl + (c << 10) : djit;
#pragma unroll
    for (int j = 0; j < 32; ++j) d[j] = src[(j << 5) + lane];
    om = 0u;
    if (k < cnt) {
        if (c < pre) {
            om = ovl[k];
        } else {
            for (int w = 0; w < nx; ++w) om |= omp[(w << 5) + lane];
        }
    }
}

/* The warp-synchronous decision chain of one chunk: lane l accepts iff
 * metro_accept(dE_l + s_l, u_l) with s_l the terms of the lanes before it
 * (d[j] if j accepted, else +inf where A_j was infinite).  Returns the
 * mask of accepted lanes; *s_out gets the lane's s at its decision.
 *
 * Compact by design: this is the critical path of small N, run once per
 * chunk, usually on an SM whose instruction cache has not seen it yet.  A
 * step is a compare, one ballot, a bit test and a predicated add, with
 * no branch and no inlined exp (the previous form inlined metro_accept in
 * each of the 32 steps: ~95 instructions per step, 3000 per chunk to
 * fetch).  A lane whose s falls between its bounds (a near tie) is first
 * decided by the bound test (reject).  After the pass the tie lanes are
 * settled in lane order with metro_accept itself (one copy of that code):
 * a reject confirms the guess, an accept forces the lane (its bounds
 * become +inf) and the pass is repeated.  Lane l's s at the end of a pass
 * is its s at its own step (d[j] = 0 and no mask bit for j >= l), and a
 * repeated pass changes nothing before the forced lane, so every lane is
 * decided from the exact decisions of the lanes before it: the same mask
 * as deciding each tie in place. */
static __device__ __forceinline__ unsigned brush_chain(double dE, double nlu, float u, const float (&d)[32],
                                                       unsigned om, int lane, float *s_out)
{
    float lo = -INFINITY, hi = -INFINITY;
    if (dE < 1e300) {
        const double M = nlu - dE; /* nlu = -ln u, computed before the chain */
        const double margin = 1e-6 * (1.0 + fabs(M));
        lo = (float)(M - margin);
        hi = (float)(M + margin);
    }
    for (;;) {
        /* s: the accepted lanes' d.  A rejected lane j < l that left an
         * infinite A_j makes l's sum +inf: its bound drops to -inf (no
         * accept, no tie) and s becomes +inf after the pass. */
        float s = 0.0f, lim = lo;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const unsigned v = __ballot_sync(BRUSH_FULL, s < lim);
            if ((v >> j) & 1u) s += d[j];
            if (((om & ~v) >> j) & 1u) lim = -INFINITY; /* one LOP3 off v: no per-step mask kept */
        }
        if (lim == -INFINITY) s = INFINITY; /* poisoned, or never accepting */
        unsigned tm = __ballot_sync(BRUSH_FULL, !(s < lo) && !(s > hi));
        bool redo = false;
        while (tm && !redo) {
            const int j = __ffs(tm) - 1;
            tm &= tm - 1;
            const int e = metro_accept(dE + (double)s, u);
            redo = (__shfl_sync(BRUSH_FULL, e, j) & 1) != 0;
            if (lane == j) lo = hi = redo ? INFINITY : -INFINITY;
        }
        if (!redo) {
            *s_out = s;
            return __ballot_sync(BRUSH_FULL, s < lo);
        }
    }
}

/* ---- the cycle ----------------------------------------------------------- */

/* own >= 0: the block's ticket in this system's chain, taken by a batched
 * launch (brush_batch.h); -1: take it from L.ticket (a launch of its own) */
template <int P>
static __device__ __forceinline__ void brush_cycle(const brush_launch &L, int own)
{
    extern __shared__ __align__(16) unsigned char brush_smem[];
    __shared__ unsigned s_group;

    const int T = blockDim.x, t = threadIdx.x, lane = t & 31, warp = t >> 5, nwarps = T >> 5;
    const int S = L.group_size, eta = L.eta, TS = L.tile, chain = L.chain;
    const int npre = L.pre_chunks;

    /* shared memory, in the order of brush_smem_bytes() */
    float4 *tile = (float4 *)brush_smem;      /* TS partners */
    float4 *Y = tile + TS;                    /* S: own old, then new, positions */
    float4 *Z = Y + S;                        /* S: own trials */
    double *base = (double *)(Z + S);         /* S: ΔE without the chain's terms */
    double *NL = base + S;                    /* S: -ln u of the decision uniforms */
    double *wde = NL + S;                     /* nwarps */
    float *U = (float *)(wde + nwarps);       /* S: decision uniforms */
    unsigned *ovl = (unsigned *)(U + S);      /* S: lanes j whose A_j is infinite */
    float *dl = (float *)(ovl + S);           /* npre chunks x 32 x 32: d_j per lane */
    int *wacc = (int *)(dl + npre * 1024);    /* nwarps */
    float *xpart = (float *)(wacc + nwarps);  /* BRUSH_XWARPS x 32: cross-chunk partial sums */
    unsigned *omp = (unsigned *)(xpart + BRUSH_XWARPS * 32); /* BRUSH_XWARPS x 32: in-chunk masks */
    float *djit = (float *)(omp + BRUSH_XWARPS * 32); /* 32 x 32: in-chunk terms of an unstaged chunk */

    if (t == 0) {
        s_group = own < 0 ? atomicAdd(L.ticket, 1u) : (unsigned)own;
        /* cycle k > 0: this group's old positions are cycle k-1's final ones */
        if (s_group >= (unsigned)L.groups)
            brush_wait_group(L.flags, s_group % L.groups, L.epoch + s_group / L.groups - 1);
    }
    for (int e = t; e < npre * 1024; e += T) dl[e] = 0.0f;
    __syncthreads();
    const int cyc = (int)s_group / L.groups, g = (int)s_group % L.groups;
    const unsigned epoch = L.epoch + cyc; /* this cycle's flag value */
    if (t == 0) brush_stamp(L, cyc, g, 0);
    const int first = g * S;
    const int cnt = min(S, L.n - first);
    const int nch = (cnt + 31) >> 5;
    const int pre = min(npre, nch);

    for (int k = t; k < cnt; k += T) {
        const float4 x = __ldcg(L.pos + first + k);
        const float4 u = L.rnd[(size_t)cyc * L.n + first + k];
        Y[k] = x;
        Z[k] = brush_trial(x, u.x, u.y, u.z, L.step);
        U[k] = u.w;
        NL[k] = -log((double)u.w); /* off the decision chain's critical path */
        ovl[k] = 0u;
    }
    __syncthreads();

    /* the thread's particles: slots pslot + q * T/eta, partner residue r */
    const int r = t & (eta - 1), pslot = t / eta, layer = T / eta;
    int kq[P];
    float4 ol[P], tr[P];
    double acc[P];
#pragma unroll
    for (int q = 0; q < P; ++q) {
        kq[q] = pslot + q * layer;
        const int kk = kq[q] < cnt ? kq[q] : 0;
        ol[q] = Y[kk];
        tr[q] = Z[kk];
        tr[q].w = ol[q].w; /* it is; saying so lets one species lookup serve both */
        acc[q] = 0.0;
    }

    /* A: own group from the start of the particle's chunk */
#pragma unroll
    for (int q = 0; q < P; ++q) {
        const int k = kq[q];
        const int c = k >> 5, cs = c << 5, l = k & 31;
        const bool stage = c < pre; /* uniform in a warp: its lanes share a chunk */
        unsigned mask = 0u;
        if (k < cnt) {
            float f = 0.0f;
            int nf = 0;
            for (int j = cs + r; j < cnt; j += eta) {
                const float A = brush_id(tr[q], ol[q], Y[j], first + k, first + j, chain);
                if (j > k) {
                    f += A;
                } else if (j < k) {
                    const bool fin = A != INFINITY; /* a NaN is summed: the check after the rounds sees it */
                    if (fin) f += A;
                    if (stage) {
                        const float B = brush_id(tr[q], ol[q], Z[j], first + k, first + j, chain);
                        dl[(c << 10) + ((j - cs) << 5) + l] = fin ? B - A : B;
                        if (!fin) mask |= 1u << (j - cs);
                    }
                }
                if (++nf == 32) {
                    acc[q] += (double)f;
                    f = 0.0f;
                    nf = 0;
                }
            }
            acc[q] += (double)f;
        }
        if (stage) {
            for (int o = 1; o < eta; o <<= 1) mask |= __shfl_xor_sync(BRUSH_FULL, mask, o);
            if (r == 0 && k < cnt) ovl[k] = mask;
        }
    }

    /* 1: later groups, old positions (for k > 0 each tile once cycle k-1
     * has finished its last group) */
    for (int b0 = first + S; b0 < L.n; b0 += TS) {
        const int m = min(TS, L.n - b0);
        if (cyc > 0 && t == 0) brush_wait_group(L.flags, (b0 + m - 1) / S, epoch - 1);
        __syncthreads();
        brush_load(tile, L.pos, b0, m);
        __syncthreads();
        brush_tile<P>(tile, m, r, eta, tr, ol, acc);
    }
    if (chain && first + S < L.n && r == 0 && metro_bonded(first + S - 1)) {
        const float4 nb = __ldcg(L.pos + first + S);
#pragma unroll
        for (int q = 0; q < P; ++q)
            if (kq[q] == S - 1) acc[q] += (double)brush_bond_fix(tr[q], ol[q], nb);
    }

    /* walls and fields, once per particle, before any waiting (the term is
     * 0 or +inf, so where it is added does not change the sum) */
    if (r == 0)
#pragma unroll
        for (int q = 0; q < P; ++q)
            acc[q] += (double)metro_external_energy(tr[q]) - (double)metro_external_energy(ol[q]);

    /* 2: earlier groups, new positions, as they become final.  Tiles of up
     * to TS partners end at group boundaries; the BRUSH_NEAR groups before
     * g-1 are tiles of one group each, and group g-1 is taken chunk by
     * chunk as its decisions publish them.  A block at the front of the
     * chain thus follows g-1's rounds and, when g-1's last chunk is final,
     * has 32 partners left: the chain's step is one group's decisions and
     * one chunk, not a whole group's tile.  The boundaries depend on g
     * alone, not on timing, so the float partial sums, and the trajectory,
     * are reproducible. */
    if (t == 0) brush_stamp(L, cyc, g, 1);
    const int prev = first - S; /* group g-1 */
    const int far = max(prev - BRUSH_NEAR * S, 0);
    for (int b0 = 0; b0 < prev;) {
        const int m = b0 < far ? min(TS, far - b0) : S;
        if (t == 0) brush_wait_group(L.flags, (b0 + m - 1) / S, epoch);
        __syncthreads();
        brush_load(tile, L.pos, b0, m);
        __syncthreads();
        brush_tile<P>(tile, m, r, eta, tr, ol, acc);
        b0 += m;
    }
    if (g > 0) {
        /* each warp on its own (no block barrier per chunk): lane i probes
         * chunk c + i, and the warp takes every chunk published so far in
         * one pass, each summed on its own, so how the chunks are batched
         * (a matter of timing) does not change a bit of the sums */
        const int nc = S >> 5, c0 = prev >> 5;
        for (int c = 0; c < nc;) {
            bool ready = false;
            if (lane < nc - c) ready = (int)(brush_ld_acquire(L.cflags + c0 + c + lane) - epoch) >= 0;
            const unsigned got = __ballot_sync(BRUSH_FULL, ready);
            const int k = got == BRUSH_FULL ? 32 : __ffs(~got) - 1; /* chunks c .. c+k-1 are final */
            if (k == 0) {
                if (lane == 0) brush_wait_group(L.cflags, c0 + c, epoch);
                __syncwarp();
                continue;
            }
            __syncwarp(); /* the lanes' acquires before every lane's loads */
            for (int i = 0; i < k; ++i) brush_chunk<P>(L.pos + prev + ((c + i) << 5), r, eta, tr, ol, acc);
            c += k;
        }
        if (t == 0) brush_stamp(L, cyc, g, 2);
    }
    if (chain && g > 0 && r == 0 && metro_bonded(first - 1)) {
        const float4 nb = __ldcg(L.pos + first - 1);
#pragma unroll
        for (int q = 0; q < P; ++q)
            if (kq[q] == 0) acc[q] += (double)brush_bond_fix(tr[q], ol[q], nb);
    }

    /* the eta partial sums */
#pragma unroll
    for (int q = 0; q < P; ++q) {
        for (int o = 1; o < eta; o <<= 1) acc[q] += __shfl_xor_sync(BRUSH_FULL, acc[q], o);
        if (r == 0 && kq[q] < cnt) base[kq[q]] = acc[q];
    }
    __syncthreads();
    if (t == 0) brush_stamp(L, cyc, g, 3);

    /* D: decisions.  Round c decides chunk c; its owner is warp c mod
     * nwarps.  The owner's critical path per round is two barriers and a
     * chain: everything that does not depend on chunk c-1's decisions was
     * staged before, and the rest is spread over all warps.
     *
     *  S1  the first nx warps, each a slice of R = 32/nx rows j: every lane
     *      l of chunk c adds ΔU against the new positions of rows j of
     *      chunk c-1 (-> xpart[w][l]) and, for chunks not staged in phase
     *      A, computes the in-chunk terms of its rows (-> djit, omp);
     *  S2  the owner: base + Σ_w xpart in warp order, the chain, chunk c's
     *      new positions; the other warps: chunks c+1, c+2, ... against
     *      chunk c-1's new positions (each chunk by one warp), so chunk c+1
     *      has every earlier chunk but c when its round begins.
     */
    const int nx = min(nwarps, BRUSH_XWARPS), R = 32 / nx;
    double my_de = 0.0;
    int my_acc = 0;
    for (int c = 0; c < nch; ++c) {
        const int cs = c << 5, o = c % nwarps;
        if (warp < nx && (c > 0 || c >= pre)) { /* S1 */
            const int k = cs + lane;
            const bool valid = k < cnt;
            const int kk = valid ? k : cs;
            const float4 xo = Y[kk];
            float4 xt = Z[kk];
            xt.w = xo.w;
            const int j0 = warp * R;
            if (c > 0) {
                float f = 0.0f;
                for (int j = cs - 32 + j0; j < cs - 32 + j0 + R; ++j)
                    f += brush_id(xt, xo, Y[j], first + k, first + j, chain);
                xpart[(warp << 5) + lane] = f;
            }
            if (c >= pre) {
                unsigned m = 0u;
                for (int j = j0; j < j0 + R; ++j) {
                    float v = 0.0f;
                    if (j < lane && valid) {
                        const float A = brush_id(xt, xo, Y[cs + j], first + k, first + cs + j, chain);
                        const float B = brush_id(xt, xo, Z[cs + j], first + k, first + cs + j, chain);
                        const bool fin = A != INFINITY; /* (a NaN is summed, as above) */
                        v = fin ? B - A : B;
                        if (!fin) m |= 1u << j;
                    }
                    djit[(j << 5) + lane] = v;
                }
                omp[(warp << 5) + lane] = m;
            }
        }
        __syncthreads();
        if (warp == o) { /* S2: the chain */
            float d[32];
            unsigned om;
            const int k = cs + lane;
            const bool valid = k < cnt;
            const int kk = valid ? k : cs;
            brush_terms(c, pre, lane, k, cnt, nx, ovl, dl, djit, omp, d, om);
            const float4 xo = Y[kk];
            float4 xt = Z[kk];
            xt.w = xo.w;
            const float u = U[kk];
            double dE = (double)INFINITY;
            if (valid) {
                float x = 0.0f;
                if (c > 0)
                    for (int w = 0; w < nx; ++w) x += xpart[(w << 5) + lane];
                dE = base[kk] + (double)x;
            }
            float s;
            const unsigned am = brush_chain(dE, NL[kk], u, d, om, lane, &s);
            const bool acc_k = valid && ((am >> lane) & 1u);
            __syncwarp(); /* every lane has read the chunk's old positions */
            if (valid) Y[k] = acc_k ? xt : xo;
            if (acc_k) {
                my_de += dE + (double)s;
                ++my_acc;
            }
            /* the move's change, for the NaN check after the rounds (two
             * stores of values at hand: nothing on the chain's path waits;
             * the decision's uniforms are spent) */
            if (valid) {
                NL[k] = dE;
                U[k] = s;
            }
        }
        if (c > 0 && warp == (o + nwarps - 1) % nwarps) { /* S2: publish chunk c-1 */
            L.pos[first + cs - 32 + lane] = Y[cs - 32 + lane];
            __syncwarp(); /* the warp's writes before lane 0's release */
            if (lane == 0) brush_st_release(L.cflags + ((first + cs) >> 5) - 1, epoch);
        }
        if (c > 0 && (warp != o || nwarps == 1)) { /* S2: the far chunks */
            const int helpers = nwarps > 1 ? nwarps - 1 : 1;
            const int rank = nwarps > 1 ? (warp - o - 1 + nwarps) % nwarps : 0;
            for (int c2 = c + 1 + rank; c2 < nch; c2 += helpers) {
                const int k = (c2 << 5) + lane;
                if (k >= cnt) continue;
                const float4 xo = Y[k];
                float4 xt = Z[k];
                xt.w = xo.w;
                float f = 0.0f;
#pragma unroll 8
                for (int j = 0; j < 32; ++j) {
                    const int jj = cs - 32 + j;
                    f += brush_id(xt, xo, Y[jj], first + k, first + jj, chain);
                }
                base[k] += (double)f;
            }
        }
        __syncthreads();
    }
    /* publish the last chunk (the others went out in the rounds) and
     * release its flag and the group's first (the chain's critical path);
     * the group's sums follow, under a flag of their own */
    for (int k = (nch - 1) * 32 + t; k < cnt; k += T) L.pos[first + k] = Y[k];
    __syncthreads();
    if (t == 0) {
        /* one release for both flags: fence.acq_rel.gpu and two relaxed
         * stores (the PTX release pattern), cumulative over the writes the
         * barrier ordered before it; one fence on the chain's critical path
         * instead of two (and no __threadfence, whose MEMBAR.SC.GPU would
         * add a third) */
        brush_release2(L.cflags + ((first >> 5) + nch - 1), L.flags + g, epoch);
        brush_stamp(L, cyc, g, 4);
    }
    /* a move whose change was NaN was rejected as an overlap is: a
     * potential's bug would bias the chain without a word (the host stops
     * the run, naming the first) */
    for (int k = t; k < cnt; k += T)
        if (isnan(NL[k] + (double)U[k])) atomicMin(L.nan, (unsigned long long)epoch << 32 | (unsigned)(first + k));
    for (int o = 16; o > 0; o >>= 1) {
        my_de += __shfl_down_sync(BRUSH_FULL, my_de, o);
        my_acc += __shfl_down_sync(BRUSH_FULL, my_acc, o);
    }
    if (lane == 0) {
        wde[warp] = my_de;
        wacc[warp] = my_acc;
    }
    __syncthreads();
    if (t == 0) {
        double de = 0.0;
        int a = 0;
        for (int w = 0; w < nwarps; ++w) {
            de += wde[w];
            a += wacc[w];
        }
        L.group_de[s_group] = de;
        L.group_acc[s_group] = a;
        brush_st_release(L.done + s_group, epoch); /* orders the two stores above */
    }

    /* the last group of a cycle: sum the cycle's groups in a fixed order,
     * each once its done flag says its sums are written */
    if (g == L.groups - 1) {
        double de = 0.0;
        long long a = 0;
        const int base0 = cyc * L.groups;
        for (int i = t; i < L.groups; i += T) {
            brush_wait_group(L.done, base0 + i, epoch);
            de += __ldcg(L.group_de + base0 + i);
            a += __ldcg(L.group_acc + base0 + i);
        }
        for (int o = 16; o > 0; o >>= 1) {
            de += __shfl_down_sync(BRUSH_FULL, de, o);
            a += __shfl_down_sync(BRUSH_FULL, a, o);
        }
        __syncthreads(); /* wde / wacc reused */
        if (lane == 0) {
            wde[warp] = de;
            wacc[warp] = (int)a;
        }
        __syncthreads();
        if (t == 0) {
            de = 0.0;
            a = 0;
            for (int w = 0; w < nwarps; ++w) {
                de += wde[w];
                a += wacc[w];
            }
            L.cycle_acc[L.slot + cyc] = a;
            /* the energy takes the cycles' sums in order */
            if (cyc > 0) brush_wait_group(L.energy_done, cyc - 1, epoch - 1);
            volatile double *en = L.energy;
            *en += de;
            if (cyc + 1 < L.cycles) brush_st_release(L.energy_done + cyc, epoch);
            else if (own < 0) *L.ticket = 0u; /* a batched launch's counter is never re-armed */
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024) brush_cycle_p1(brush_launch L)
{
    brush_cycle<1>(L, -1);
}

extern "C" __global__ void __launch_bounds__(256, 4) brush_cycle_p2(brush_launch L)
{
    brush_cycle<2>(L, -1);
}

extern "C" __global__ void __launch_bounds__(256, 3) brush_cycle_p4(brush_launch L)
{
    brush_cycle<4>(L, -1);
}

/* ---- several systems in one launch (brush_batch.h) ------------------------ */

/* The parameter block is read in place (__grid_constant__: no copy of its
 * 2 KiB per thread).  The block's ticket picks its system and its own
 * ticket there; the
 * system's launch block goes to shared memory with this launch's epoch,
 * slot and cycles, and the block runs as it would in a launch of its own.
 * A block past its system's cycles leaves at once. */
template <int P>
static __device__ __forceinline__ void brush_batch_cycle(const brush_batch &B)
{
    __shared__ brush_launch s_L;
    __shared__ int s_own;
    if (threadIdx.x == 0) {
        int slot;
        unsigned own;
        brush_batch_ticket(atomicAdd(B.ticket, 1u) - B.base, B.k, &slot, &own);
        const brush_batch_var v = B.var[slot];
        s_own = own / (unsigned)B.groups < (unsigned)v.cycles ? (int)own : -1;
        if (s_own >= 0) {
            s_L = B.sys[v.sys];
            s_L.ticket = NULL;
            s_L.epoch = v.epoch;
            s_L.slot = v.slot;
            s_L.cycles = v.cycles;
            s_L.trace = NULL;
        }
    }
    __syncthreads();
    if (s_own < 0) return;
    brush_cycle<P>(s_L, s_own);
}

extern "C" __global__ void __launch_bounds__(1024) brush_batch_p1(const __grid_constant__ brush_batch B)
{
    brush_batch_cycle<1>(B);
}

extern "C" __global__ void __launch_bounds__(256, 4) brush_batch_p2(const __grid_constant__ brush_batch B)
{
    brush_batch_cycle<2>(B);
}

extern "C" __global__ void __launch_bounds__(256, 3) brush_batch_p4(const __grid_constant__ brush_batch B)
{
    brush_batch_cycle<4>(B);
}
