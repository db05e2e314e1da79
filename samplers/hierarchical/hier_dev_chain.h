/* hier_dev_chain.h — the decision chain: the exact pass inside it, the
 * rules' decisions, the stops' exact pass on the whole device.  A part of
 * hierarchical.cu, included from it after hier_dev_batch.h; not a header
 * of its own. */

/* ---- the exact pass inside the chain ----------------------------------- *
 *
 * The chain's launch has one block per SM.  Each block takes a ticket as
 * it starts; ticket t belongs to launch t / G (its epoch, G blocks a
 * launch) and the block with t % G == 0, the first of its launch to run,
 * decides the batch; the others are helpers that wait for jobs.  A trial
 * the enclosure leaves open is published as a job: the deciding warp
 * writes (epoch, trial, 0) into the HG_XCTR counters; a helper block (one
 * thread polls, so the counters' cache line is not flooded) adds its warp
 * count to its counter to claim as many chunks of the particles, each
 * warp sums the reference's terms over its chunk (positions read from L2:
 * the chain has just moved the accepted mates), and the last warp to
 * finish a counter's group of chunks adds the group's sums in chunk order.
 * The deciding warp adds the groups' sums in order, so the bits do not
 * depend on who summed what.  It never waits on a block that may not be
 * running: when no chunk has finished for HG_XWAIT cycles it claims
 * chunks itself, so the pass ends even with no helper resident; helpers
 * that start after the last job find the launch's exit in the counters. */

#define HG_XEXIT 0xfffu
#define HG_XNONE 0xffeu

static __device__ __forceinline__ unsigned long long hg_xtag(unsigned epoch, unsigned k)
{
    return ((unsigned long long)(epoch & 0xfffffu) << 44) | ((unsigned long long)k << 32);
}

static __device__ __forceinline__ unsigned hg_xepoch(unsigned long long w)
{
    return (unsigned)(w >> 44);
}

static __device__ __forceinline__ unsigned hg_xtrial(unsigned long long w)
{
    return (unsigned)(w >> 32) & 0xfffu;
}

/* A warp: the sums of `count` triples (Σ d, Σ|d|, bad) at src, every
 * `stride`-th from entry `first`, lane by lane in order, then a fixed
 * butterfly: the same bits in every lane whoever calls it */
static __device__ void hg_xsum(const double *src, int first, int count, int stride, double out[3])
{
    const int lane = threadIdx.x & 31;
    double s = 0.0, x = 0.0;
    bool bad = false;
    for (int e = lane; e < count; e += 32) {
        const double *q = src + 3 * (size_t)(first + e * stride);
        s += __ldcg(q);
        x += __ldcg(q + 1);
        bad |= __ldcg(q + 2) != 0.0;
    }
#pragma unroll
    for (int h = 16; h; h >>= 1) {
        s += __shfl_xor_sync(HG_FULL, s, h);
        x += __shfl_xor_sync(HG_FULL, x, h);
    }
    out[0] = s;
    out[1] = x;
    out[2] = __any_sync(HG_FULL, bad) ? 1.0 : 0.0;
}

/* A warp: chunk c of trial k's exact pass, the reference's float terms of
 * its trial and old place against the particles where they are now (k
 * itself left out), four partners a lane at a time (their loads first),
 * then a fixed butterfly; lane 0 stores Σ d_j, Σ|d_j| and whether a
 * distance was 0 or a hard core overlapped.  The warp that finishes the
 * last chunk of its group adds the group's chunks in order and counts the
 * group done. */
static __device__ __noinline__ void hg_xchunk(const hg_args *a, int k, int c)
{
    const int lane = threadIdx.x & 31;
    const float4 t = a->ttri[k], o = a->told[k];
    const float4 sa = a->prm.sp[coulomb_hs_species(o.w)];
    const int skip = a->b0 + k, i0 = c * a->xsize, i1 = min(a->n, i0 + a->xsize);
    double sum = 0.0, abs = 0.0;
    bool bad = false;
    for (int i = i0 + lane; i < i1; i += 4 * 32) {
        float4 b[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) b[u] = i + 32 * u < i1 ? __ldcg(&a->pos[i + 32 * u]) : make_float4(0.f, 0.f, 0.f, -1.f);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            bool b_bad;
            double ab;
            const double d = hg_xterm(a, t, o, sa, b[u], b_bad, ab);
            const bool use = i + 32 * u < i1 && i + 32 * u != skip;
            bad |= use && b_bad;
            sum += use ? d : 0.0;
            abs += use ? ab : 0.0;
        }
    }
#pragma unroll
    for (int h = 16; h; h >>= 1) {
        sum += __shfl_xor_sync(HG_FULL, sum, h);
        abs += __shfl_xor_sync(HG_FULL, abs, h);
    }
    bad = __any_sync(HG_FULL, bad);
    const int g = c / a->xper, g0 = g * a->xper, gn = min(a->xnch, g0 + a->xper) - g0;
    unsigned last = 0;
    if (lane == 0) {
        a->xch[3 * (size_t)c] = sum;
        a->xch[3 * (size_t)c + 1] = abs;
        a->xch[3 * (size_t)c + 2] = bad ? 1.0 : 0.0;
        __threadfence();
        last = atomicAdd(a->xgdone + g, 1u) == (unsigned)gn - 1u;
    }
    if (!__shfl_sync(HG_FULL, last, 0)) return;
    __threadfence();
    double grp[3];
    hg_xsum(a->xch, g0, gn, 1, grp);
    if (lane == 0) {
        a->xgrp[3 * g] = grp[0];
        a->xgrp[3 * g + 1] = grp[1];
        a->xgrp[3 * g + 2] = grp[2];
        __threadfence();
        atomicAdd(a->xdone, 1u);
    }
}

/* A helper block (number r of its launch): the jobs of counter r %
 * HG_XCTR, until the launch's exit */
static __device__ __noinline__ void hg_xhelp(const hg_args *a, unsigned epoch, int r)
{
    __shared__ unsigned long long sjob;
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, home = r % HG_XCTR;
    unsigned long long *ctr = a->xjob + home;
    unsigned last = HG_XNONE;
    epoch &= 0xfffffu;
    for (;;) {
        __syncthreads(); /* sjob is free */
        if (threadIdx.x == 0) {
            unsigned long long job;
            for (;;) {
                job = *(volatile unsigned long long *)ctr;
                if (hg_xepoch(job) == epoch && hg_xtrial(job) != last) break;
                __nanosleep(200);
            }
            sjob = job;
        }
        __syncthreads();
        if (hg_xtrial(sjob) == HG_XEXIT) return;
        for (;;) {
            __syncthreads();
            if (threadIdx.x == 0) sjob = atomicAdd(ctr, (unsigned long long)nw);
            __syncthreads();
            /* the claim belongs to the job the counter holds now, which
             * may already be the next one */
            const unsigned long long old = sjob;
            const unsigned k = hg_xtrial(old);
            if (k == HG_XEXIT) return;
            last = k;
            const int idx = (int)(unsigned)old;
            if (idx >= a->xper) break;
            const int c = home * a->xper + idx + warp;
            if (idx + warp < a->xper && c < a->xnch) hg_xchunk(a, (int)k, c);
        }
    }
}

/* The deciding warp: trial j's exact pass, and the CPU's rule on it
 * (hier_decide with hier_exact_eps, as hg_exact_decide): 1 accept, 0 reject, 2 left to the host's
 * reference; *de the sum */
static __device__ __noinline__ int hg_xpass(const hg_args *a, unsigned epoch, int j, double *de)
{
    const int lane = threadIdx.x & 31;
    /* the accepted mates' places (this block's writes) before the job */
    __threadfence();
    __syncwarp();
    if (lane == 0) *(volatile unsigned *)a->xdone = 0u;
    *(volatile unsigned *)(a->xgdone + lane) = 0u;
    __threadfence();
    __syncwarp();
    atomicExch(a->xjob + lane, hg_xtag(epoch, (unsigned)j));
    unsigned seen = 0;
    long long t0 = clock64();
    for (;;) {
        unsigned done = 0;
        if (lane == 0) done = *(volatile unsigned *)a->xdone;
        done = __shfl_sync(HG_FULL, done, 0);
        if ((int)done >= a->xng) break;
        /* progress: the chunks finished so far */
        unsigned chunks = *(volatile unsigned *)(a->xgdone + lane);
#pragma unroll
        for (int h = 16; h; h >>= 1) chunks += __shfl_xor_sync(HG_FULL, chunks, h);
        const long long now = clock64();
        if (chunks != seen) {
            seen = chunks;
            t0 = now;
        } else if (now - t0 > HG_XWAIT) {
            /* no helper moves: claim one chunk of every counter */
            const unsigned long long old = atomicAdd(a->xjob + lane, 1ull);
            const int idx = (int)(unsigned)old, c = lane * a->xper + idx;
            const int mine = idx < a->xper && c < a->xnch ? c : -1;
            for (unsigned m = __ballot_sync(HG_FULL, mine >= 0); m; m &= m - 1)
                hg_xchunk(a, j, __shfl_sync(HG_FULL, mine, __ffs(m) - 1));
            t0 = clock64();
        }
    }
    __threadfence();
    double tot[3];
    hg_xsum(a->xgrp, 0, a->xng, 1, tot);
    if (tot[2] != 0.0) return 2;
    const hg_trial tr = a->tr[j];
    *de = tot[0];
    return hier_decide(tot[0], hg_xeps(a, tot[0], tot[1], a->xpath), tr.T, tr.dT);
}

/* A trial's rule in the chain (hierarchical.c's): accept when est + v +
 * eps <= acc = max(0, T - dT) (hi <= 0 or hi <= T - dT), reject when
 * est + v - eps >= rej = T + dT; kind 1 blocked, 2 degenerate */
struct hg_rule {
    double est, eps, acc, rej;
    double lo, hi, sab; /* the chunk's earlier mates (hg_trial) */
    unsigned fa, fb;
    int kind;
};

static __device__ __forceinline__ hg_rule hg_rule_of(const hg_args *a, int k)
{
    hg_rule r = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0u, 0u, 0};
    if (k < a->S) {
        const hg_trial tr = a->tr[k];
        r.est = tr.est;
        r.eps = tr.eps;
        /* an enclosure too coarse for the running energy (hg_prep) never
         * accepts: the exact pass does, and its sum is what the energy adds */
        r.acc = tr.wide ? -INFINITY : fmax(0.0, tr.T - tr.dT);
        r.rej = tr.T + tr.dT;
        r.lo = tr.lo;
        r.hi = tr.hi;
        r.sab = tr.sab;
        r.fa = tr.fa;
        r.fb = tr.fb;
        r.kind = tr.blocked ? 1 : tr.degenerate ? 2 : 0;
    }
    return r;
}

/* A lane's sum v plus rows [b0, b1) of a staged 32 x 32 block whose bit
 * is set in `take`, in row order, eight rows' loads in flight.  A row that
 * does not count adds +0.0, which leaves every sum but -0.0 as it is, and
 * a running sum is never -0.0 (it starts at +0.0, and a sum of finite
 * doubles rounded to nearest is -0.0 only when both addends are): the bits
 * of adding only the rows that count, without a branch. */
static __device__ __forceinline__ void hg_add_rows(const double (*rows)[32], unsigned take, int b0, int b1, int lane,
                                                   double &v)
{
    for (int b = b0; b < b1; b += 8) {
        double r[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) r[u] = rows[(b + u) & 31][lane];
#pragma unroll
        for (int u = 0; u < 8; ++u) v += ((b + u < 32) & (take >> ((b + u) & 31))) ? r[u] : 0.0;
    }
}

/* Rows [first, 64) by step of what chunk w needs while chunk w - 1 is
 * decided, lane: column k = 32 w + lane.  Row r < 32 is row r of chunk
 * w's own block of terms (mates j of chunk w against its lanes: to dst),
 * row r >= 32 row r - 32 of chunk w - 1's block for w's lanes (to ndst);
 * with ndst null only the first 32.  The block's warps that do not decide
 * share the rows, four loads in flight each, so the staging takes about
 * one load's latency and not 64 of them. */
static __device__ __forceinline__ void hg_stage(const hg_args *a, int w, int first, int step, double (*dst)[32],
                                                unsigned char (*fdst)[32], double (*ndst)[32],
                                                unsigned char (*fndst)[32])
{
    const int lane = threadIdx.x & 31, k = 32 * w + lane, rows = ndst ? 64 : 32;
    for (int r0 = first; r0 < rows; r0 += 4 * step) {
        double cv[4];
        unsigned char fv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = r0 + i * step, j = 32 * (r < 32 ? w : w - 1) + (r & 31);
            const int ok = r < rows && j < a->S && k < a->S;
            cv[i] = ok ? a->corr[(size_t)j * a->S + k] : 0.0;
            fv[i] = ok ? a->flg[(size_t)j * a->S + k] : (unsigned char)0;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = r0 + i * step;
            if (r < 32) {
                dst[r][lane] = cv[i];
                fdst[r][lane] = fv[i];
            } else if (r < rows) {
                ndst[r - 32][lane] = cv[i];
                fndst[r - 32][lane] = fv[i];
            }
        }
    }
}

/* Lane k: chunk c's accepted mates' changes (mask m) from global memory,
 * in index order, eight loads in flight */
static __device__ __forceinline__ void hg_add_accepted(const hg_args *a, int c, unsigned m, int k, double &v, int &nA,
                                                       int &nB)
{
    const double *corr = a->corr + k;
    const unsigned char *flg = a->flg + k;
    while (m) {
        int js[8];
        double cv[8];
        int fv[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            js[i] = m ? 32 * c + __ffs(m) - 1 : -1;
            m &= m - 1;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            cv[i] = js[i] >= 0 ? corr[(size_t)js[i] * a->S] : 0.0;
            fv[i] = js[i] >= 0 ? flg[(size_t)js[i] * a->S] : 0;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
            if (js[i] >= 0) {
                v += cv[i];
                nA -= fv[i] & 1;
                nB += (fv[i] >> 1) & 1;
            }
    }
}

/* What the deciding block keeps in shared memory (hg_chain, hg_decide) */
struct hg_chain_smem {
    unsigned mask[HG_MAX_BATCH / 32]; /* per chunk: the lanes accepted */
    /* per chunk: its open trial, or S.  A slot per chunk, not one word:
     * chunk c + 1's warp may write before a slower warp has read chunk
     * c's (racecheck found the one word's race) */
    int stop[HG_MAX_BATCH / 32];
    int from, preset;                 /* where hg_decide starts, and that trial's decision when made (>= 0) */
    double preset_de;                 /* and its energy change */
    /* by chunk parity: the deciding warp's own block, and the next warp's
     * block of the deciding chunk's terms */
    double diag[2][32][32], next[2][32][32];
    unsigned char fdiag[2][32][32], fnext[2][32][32];
    hg_rule rule[2][32]; /* by chunk parity: the deciding warp's trials */
};

/* The decisions of the batch from trial `from` (decided already when
 * preset >= 0, with energy change preset_de) up to the first trial the
 * enclosure leaves open, or to the end: returns that trial, or S.  Thread
 * k the k-th trial; a warp's 32 trials (a chunk) at a time: the chunk's
 * warp finds the decisions its own earlier ones cannot change
 * (hier_rule_fixed), adds the accepted mates' exact changes to the later
 * lanes' sums in bulk (from shared memory, where the other warps put the
 * chunk's block of terms while the chunk before it was decided), and
 * applies hierarchical.c's rule, handing the decision on by a shuffle,
 * only where a decision is open.  Then one block
 * barrier, and every later warp adds the accepted mates' changes in index
 * order: the next warp from shared memory, so it can start at once, the
 * others from global memory while the next chunk is decided.  Every
 * running sum has the bits of a chain of single decisions.  The sums of
 * the trials after the open one wait in vstate / nstate.  Nothing here
 * calls a function: its values stay in registers (with the exact pass's
 * call inside this loop, nvJitLink kept the loop's counters and sums in
 * local memory: ~500 cycles a decision). */
static __device__ __forceinline__ int hg_decide(const hg_args &a, hg_chain_smem &sm)
{
    /* the thread's index read afresh (not the caller's, which lives
     * across the exact pass's call and so in local memory) */
    unsigned tid;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    const int k = (int)tid, lane = k & 31, warp = k >> 5, in = k < a.S, nw = (int)(blockDim.x >> 5);
    const int from = sm.from, preset = sm.preset;
    const double preset_de = sm.preset_de;
    int decided0 = 0;
    double v = 0.0; /* Σ of the accepted mates' changes */
    int nA = 0, nB = 0;
    if (in) {
        if (from == 0 && !a.Sp) {
            nA = a.tr[k].nA;
        } else { /* a stop's state, or the previous batch's moves (hg_fold) */
            v = a.vstate[k];
            nA = a.nstate[k];
            nB = a.nstate[a.S + k];
        }
    }
    const int c0 = from >> 5, nch = (a.S + 31) >> 5;
    hg_stage(&a, c0, warp, nw, sm.diag[c0 & 1], sm.fdiag[c0 & 1], nullptr, nullptr);
    if (warp == c0) sm.rule[c0 & 1][lane] = hg_rule_of(&a, k);
    __syncthreads();
    int stop = a.S;
    for (int c = c0; c < nch && stop == a.S; ++c) {
        const int p = c & 1;
        /* the deciding warp's: its chunk's first trial and where it ended,
         * the accepted lanes, each lane's energy change (written out after
         * the barrier, off the next chunk's path) */
        int j0 = 0, j = 0;
        unsigned accm = 0;
        double de = 0.0;
        if (warp == c) {
            /* my chunk's decisions.  First every lane finds whether its
             * decision is already fixed whatever its earlier mates in the
             * chunk decide: its sum will lie in [v + lo, v + hi] (hg_prep)
             * up to the running sum's rounding, and the rule is monotone in
             * the sum, so equal decisions at both ends are the decision
             * (hier_rule_fixed).  Then the chunk in segments: every lane adds
             * the accepted rows up to the next open lane (in index order,
             * eight loads in flight), that lane applies the rule to its now
             * exact sum and a shuffle hands the result on; typically no
             * lane or one is open.  The chunk ends at the first move left
             * open for good.  The rule: a preset decision (a trial decided
             * outside the loop), else rejection when blocked or
             * overlapping, else an open move when degenerate, else
             * hierarchical.c's bounds. */
            j0 = max(from, 32 * c);
            const int j1 = min(32 * c + 32, a.S), pre = preset >= 0 && from >= j0 ? from : -1;
            const hg_rule &r = sm.rule[p][lane];
            const double est = r.est, eps = r.eps, acc_thr = r.acc, rej_thr = r.rej;
            const int kind = r.kind;
            int mine = hier_rule_fixed(est, eps, acc_thr, rej_thr, v, r.lo, r.hi, r.sab); /* 3: open until its turn */
            mine = kind == 2 ? 2 : mine;
            mine = (r.fa | r.fb) && nB == 0 ? 3 : nA > 0 || nB > 0 ? 0 : mine; /* overlaps the chunk may change: open */
            mine = kind == 1 ? 0 : mine;
            mine = k == pre ? preset : mine;
            const unsigned lim = j1 - 32 * c == 32 ? HG_FULL : (1u << (j1 - 32 * c)) - 1u;
            unsigned acc = __ballot_sync(HG_FULL, mine == 1), stops = __ballot_sync(HG_FULL, mine == 2) & lim,
                     open = __ballot_sync(HG_FULL, mine == 3) & lim;
            int s0 = j0;
            for (;;) {
                /* the next open or stopping lane at or after s0 */
                const unsigned ahead = (open | stops) & ~((1u << (s0 & 31)) - 1u);
                const int e = ahead ? 32 * c + __ffs(ahead) - 1 : j1;
                /* the accepted rows in [s0, e), of mates before me */
                const unsigned seg = acc & (e - 32 * c == 32 ? HG_FULL : (1u << (e & 31)) - 1u) &
                                     ~((1u << (s0 & 31)) - 1u);
                hg_add_rows(sm.diag[p], in ? seg & ((1u << lane) - 1u) : 0u, s0 - 32 * c, e - 32 * c, lane, v);
                nA -= __popc(r.fa & seg);
                nB += __popc(r.fb & seg);
                j = e;
                if (e >= j1 || ((stops >> (e & 31)) & 1u)) break;
                int rr = hier_rule(est + v, eps, acc_thr, rej_thr);
                rr = kind == 2 ? 2 : rr;
                rr = nA > 0 || nB > 0 ? 0 : rr;
                const int d = __shfl_sync(HG_FULL, rr, e & 31);
                if (d == 2) break;
                acc |= d == 1 ? 1u << (e & 31) : 0u;
                open &= ~(1u << (e & 31));
                s0 = e;
            }
            /* the decided lanes [j0, j); a lane's sum is final from its
             * turn on (only later lanes add its row), so its energy change
             * is the rule's est + v */
            accm = acc & (j - 32 * c == 32 ? HG_FULL : (1u << (j & 31)) - 1u) & ~((1u << (j0 & 31)) - 1u);
            de = k == pre ? preset_de : est + v;
            decided0 += k >= j0 && k < j && k != pre;
            if (lane == 0) {
                sm.mask[c] = accm;
                sm.stop[c] = j < j1 ? j : a.S;
            }
        } else if (c + 1 < nch) {
            /* while chunk c is decided, the other warps stage what chunk
             * c + 1 needs: its block of terms, chunk c's block for its
             * lanes, and (its own warp) its trials' rules */
            const int o = (warp - c - 1 + nw) % nw;
            hg_stage(&a, c + 1, o, nw - 1, sm.diag[p ^ 1], sm.fdiag[p ^ 1], sm.next[p], sm.fnext[p]);
            if (o == 0) sm.rule[p ^ 1][lane] = hg_rule_of(&a, k);
        }
        __syncthreads();
        /* each lane of the decided chunk its own decision; the accepted
         * mates' places before any exact pass (which begins with a fence) */
        if (warp == c && k >= j0 && k < j) {
            const int acc = (accm >> lane) & 1u;
            a.acc[k] = (unsigned char)acc;
            if (acc) {
                a.pos[a.b0 + k] = a.ttri[k];
                a.dE[k] = de;
            }
        }
        stop = sm.stop[c];
        /* only decided mates carry a bit: all before the stop */
        const unsigned m = sm.mask[c];
        if (warp == c + 1) {
            hg_add_rows(sm.next[p], m, 0, 32, lane, v);
#pragma unroll 8
            for (int u = 0; u < 32; ++u) {
                const unsigned t = (m >> u) & 1u, f = sm.fnext[p][u][lane];
                nA -= (int)(t & f);
                nB += (int)(t & (f >> 1));
            }
        } else if (warp > c + 1 && in) {
            /* off the critical path (the next chunk's decisions take
             * longer than these loads): only the accepted mates' terms,
             * so these warps take few issue slots from the deciding one */
            hg_add_accepted(&a, c, m, k, v, nA, nB);
        }
    }
    if (stop < a.S && in && k > stop) {
        a.vstate[k] = v;
        a.nstate[k] = nA;
        a.nstate[a.S + k] = nB;
    }
    decided0 = __reduce_add_sync(HG_FULL, decided0);
    if (lane == 0 && decided0) atomicAdd(&a.status->decided[0], decided0);
    return stop;
}

/* Trial `stop`, left open by the enclosure: its warp's exact pass,
 * every partner's reference term where it is now (the accepted mates
 * moved); the decision goes to shared memory, where hg_decide starts from
 * it */
static __device__ __noinline__ void hg_open(const hg_args *a, unsigned epoch, int stop, hg_chain_smem *sm)
{
    if ((int)(threadIdx.x >> 5) != stop >> 5) return;
    double xde = 0.0;
    const int d = hg_xpass(a, epoch, stop, &xde);
    if ((threadIdx.x & 31) == 0) {
        sm->from = stop;
        sm->preset = d;
        sm->preset_de = xde;
        if (d != 2) atomicAdd(&a->status->decided[1], 1);
    }
}

/* The chain's end: where it stopped, for the host; the helpers go */
static __device__ __noinline__ void hg_chain_end(const hg_args *a, unsigned epoch, int stop)
{
    if (threadIdx.x == 0) {
        a->status->stop = stop;
        a->status->preset = -1;
    }
    if (threadIdx.x < 32) atomicExch(a->xjob + threadIdx.x, hg_xtag(epoch, HG_XEXIT));
}

/* The launch's deciding block (the first of its launch to run: the
 * others are the exact pass's helpers, hg_xhelp), S threads rounded up to
 * 32: the decisions (hg_decide) from `from`; a trial they leave open gets
 * its exact pass here (hg_xpass, its chunk's warp with the helper blocks),
 * and the decisions go on after it as after a stop.  What even the exact
 * pass leaves open stops the chain (its state kept in vstate / nstate) for
 * the host's reference; with xhost every trial the enclosure leaves open
 * stops it (the host's exact pass, hg_exact, then the reference). */
extern "C" __global__ void __launch_bounds__(HG_MAX_BATCH) hg_chain(const __grid_constant__ hg_args a, int from)
{
    __shared__ hg_chain_smem sm;
    __shared__ unsigned long long sticket;
    if (threadIdx.x == 0) sticket = atomicAdd(a.xticket, 1ull);
    __syncthreads();
    const unsigned long long ticket = sticket;
    const unsigned epoch = (unsigned)(ticket / gridDim.x);
    if (ticket % gridDim.x) {
        hg_xhelp(&a, epoch, (int)(ticket % gridDim.x) - 1);
        return;
    }
    /* (in shared memory: nothing of this kernel lives across its calls) */
    __shared__ unsigned long long t0;
    if (a.profile && threadIdx.x == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    if (threadIdx.x == 0) {
        sm.from = from;
        sm.preset = a.status->preset;
        sm.preset_de = a.status->preset_de;
    }
    __syncthreads();
    /* hg_decide takes where it starts from shared memory, and the exact
     * pass and the end are calls that find what they need there: no value
     * of the decisions' loop (not even the thread's index) lives across a
     * call */
    int stop;
    for (;;) {
        stop = hg_decide(a, sm);
        if (stop >= a.S || a.xhost) break;
        hg_open(&a, epoch, stop, &sm);
        __syncthreads();
        if (sm.preset == 2) break;
    }
    hg_chain_end(&a, epoch, stop);
    if (a.profile && threadIdx.x == 0) {
        unsigned long long t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        a.status->chain_ns += t1 - t0;
    }
}

extern "C" __global__ void hg_exact(hg_args a, int k)
{
    double sum = 0.0, abs = 0.0;
    int bad = 0;
    hg_exact_part(&a, k, blockIdx.x * blockDim.x, a.n, gridDim.x * blockDim.x, &sum, &abs, &bad);
    if (threadIdx.x == 0) {
        a.xpart[blockIdx.x] = sum;
        a.xpart[gridDim.x + blockIdx.x] = abs;
        a.xbad[blockIdx.x] = bad;
    }
}

/* One thread: the exact pass's decision (hier_decide, the CPU's rule); what it
 * cannot decide is left to the host's reference (status->exact_bad). */
extern "C" __global__ void hg_exact_decide(hg_args a, int k, int blocks)
{
    if (threadIdx.x || blockIdx.x) return;
    double sum = 0.0, abs = 0.0;
    int bad = 0;
    for (int b = 0; b < blocks; ++b) {
        sum += a.xpart[b];
        abs += a.xpart[blocks + b];
        bad |= a.xbad[b];
    }
    hg_status *st = a.status;
    st->exact_sum = sum;
    st->exact_abs = abs;
    st->exact_bad = 0;
    st->preset = -1;
    if (bad) {
        st->exact_bad = 1;
        return;
    }
    const hg_trial tr = a.tr[k];
    const int d = hier_decide(sum, hg_xeps(&a, sum, abs, a.spath), tr.T, tr.dT);
    if (d == 2) {
        st->exact_bad = 2;
        return;
    }
    st->preset = d;
    st->preset_de = sum;
    st->decided[2]++;
}
