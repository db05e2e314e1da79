/* hier_dev_batch.h — a batch's trials, the mates' terms, the rules from
 * the looks and the list of trials for the refined look.  A part of
 * hierarchical.cu, included from it after hier_dev_walk.h; not a header
 * of its own. */

/* ---- the batch's trials, the mates' terms, the chain ---------------------- */

extern "C" __global__ void hg_trials(hg_args a)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= a.S) return;
    const float4 o = a.pos[a.b0 + k], u = a.rnd[a.b0 + k];
    a.told[k] = o;
    a.ttri[k] = brush_trial(o, u.x, u.y, u.z, a.step);
}

/* Thread k, chunk y of the partners j: k's terms against mate j at j's old
 * place (A, in the enclosure's sum) and at j's trial (B): corr[j S + k] =
 * B - A (the change to k's ΔE if j moves), flg = 1 when k's trial overlaps
 * j's old place (k is rejected while j stays), 2 when it overlaps j's
 * trial (k is rejected if j moved).  The mates are the batch's own (j >= 0)
 * and, when batches overlap (Sp > 0), the previous batch's trials (j < 0,
 * its particle Sp + j, at corrx[(Sp + j) S + k]): their decisions are not
 * yet made when this batch is enclosed (hier_gpu.c, "overlap"). */
extern "C" __global__ void hg_tri(hg_args a)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int ch = blockIdx.y;
    if (k >= a.S) return;
    const int per = (a.Sp + a.S + HG_TRI_CHUNK - 1) / HG_TRI_CHUNK;
    const int j0 = ch * per - a.Sp, j1 = min(a.S, j0 + per);
    const float4 t = a.ttri[k], o = a.told[k];
    const float4 sa = a.prm.sp[coulomb_hs_species(o.w)];
    double abs = 0.0, sq = 0.0;
    int nA = 0;
    for (int j = j0; j < j1; ++j) {
        const size_t at = (size_t)(j < 0 ? a.Sp + j : j) * a.S + k;
        double *corr = j < 0 ? a.corrx : a.corr;
        unsigned char *flg = j < 0 ? a.flgx : a.flg;
        if (j == k) {
            corr[at] = 0.0;
            flg[at] = 0;
            continue;
        }
        const float4 oj = j < 0 ? a.toldp[a.Sp + j] : a.told[j], tj = j < 0 ? a.ttrip[a.Sp + j] : a.ttri[j];
        const float4 sb = a.prm.sp[coulomb_hs_species(oj.w)];
        const float eto = hg_pair(sa.y, sa.z, t, oj, sb.x, sb.y), eoo = hg_pair(sa.y, sa.z, o, oj, sb.x, sb.y);
        const float ett = hg_pair(sa.y, sa.z, t, tj, sb.x, sb.y), eot = hg_pair(sa.y, sa.z, o, tj, sb.x, sb.y);
        const int fA = !isfinite(eto), fB = !isfinite(ett);
        double c = 0.0;
        if (isfinite(eoo) && isfinite(eot) && !fB)
            c = ((double)ett - (double)eot) - ((fA ? 0.0 : (double)eto) - (double)eoo);
        corr[at] = c;
        sq += c * c;
        flg[at] = (unsigned char)(fA | fB << 1);
        nA += fA + (isfinite(eoo) ? 0 : (1 << 20));
        abs += (fA ? 0.0 : fabs((double)eto)) + (isfinite(eoo) ? fabs((double)eoo) : 0.0) +
               (fB ? 0.0 : fabs((double)ett)) + (isfinite(eot) ? fabs((double)eot) : 0.0);
    }
    a.tabs[(size_t)ch * a.S + k] = abs;
    a.tsq[(size_t)ch * a.S + k] = sq;
    a.tnA[(size_t)ch * a.S + k] = nA;
}

/* When batches overlap: the previous batch's accepted moves (acc, its
 * decisions) into this batch's sums before its chain, thread k: v = Σ of
 * their corrx[i S + k], the old places they left (flg 1) and the trials
 * they took (flg 2) that k's trial overlaps, into vstate / nstate, where
 * the chain starts from.  Block: 32 trials (lanes) by 32 warps, warp w the
 * previous batch's mates [32 w, 32 w + 32) in order, then the warps'
 * sums in order: the same bits on every run. */
extern "C" __global__ void __launch_bounds__(1024) hg_fold(hg_args a)
{
    __shared__ double sv[32][33];
    __shared__ int sleft[32][33], stook[32][33];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, k = 32 * blockIdx.x + lane;
    double v = 0.0;
    int left = 0, took = 0;
    if (k < a.S) {
        const int i1 = min(a.Sp, 32 * w + 32);
        for (int i = 32 * w; i < i1; ++i)
            if (a.accp[i]) {
                const size_t at = (size_t)i * a.S + k;
                const unsigned f = a.flgx[at];
                v += a.corrx[at];
                left += (int)(f & 1u);
                took += (int)(f >> 1);
            }
    }
    sv[w][lane] = v;
    sleft[w][lane] = left;
    stook[w][lane] = took;
    __syncthreads();
    if (w == 0 && k < a.S) {
        double s = 0.0;
        int l = 0, t = 0;
        for (int u = 0; u < 32; ++u) {
            s += sv[u][lane];
            l += sleft[u][lane];
            t += stook[u][lane];
        }
        a.vstate[k] = s;
        a.nstate[k] = a.tr[k].nA - l;
        a.nstate[a.S + k] = t;
    }
}

/* Thread k: the enclosure of ΔE_k at the batch's start (hierarchical.c's
 * stage 0, the same terms), widened for what the chain adds: the mates'
 * corrections (their reference rounding, κ Σ|terms|, and ours, one double
 * rounding of the running sum per mate).  mode 0: every trial, from the
 * first look; mode 1: after the refined look, only the trials it took
 * (hg_close_list), whose points it rewrote: the parts of the rule that do
 * not depend on the points (the mates' sums, -ln u, the chunk's ranges)
 * are mode 0's, read back, so the rule has the bits a full pass gives. */
extern "C" __global__ void hg_prep(hg_args a, int mode)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= a.S) return;
    if (mode && !a.close[k]) return;
    const hg_point rt = a.pts[2 * k], ro = a.pts[2 * k + 1];
    const float4 o = a.told[k], t = a.ttri[k];
    hg_trial r;
    double sq = 0.0;
    int nA = 0;
    if (mode) {
        r = a.tr[k];
        nA = r.nA; /* a listed trial overlaps no mate's old place (nA = 0) */
    } else {
        double absA = 0.0;
        for (int c = 0; c < HG_TRI_CHUNK; ++c) {
            absA += a.tabs[(size_t)c * a.S + k];
            sq += a.tsq[(size_t)c * a.S + k];
            nA += a.tnA[(size_t)c * a.S + k];
        }
        const float u = a.rnd[a.b0 + k].w;
        r.T = -log((double)u);
        r.dT = 1e-12 * (1.0 + r.T);
        r.absA = absA;
        r.nA = nA & 0xfffff;
        /* what the chain needs to know which decisions its chunk's earlier
         * mates cannot change (hier_rule_fixed): their changes' range and flags */
        r.lo = r.hi = r.sab = 0.0;
        r.fa = r.fb = 0u;
        for (int j = k & ~31; j < k; ++j) {
            const unsigned f = a.flg[(size_t)j * a.S + k];
            hier_chunk_add(a.corr[(size_t)j * a.S + k], &r.lo, &r.hi, &r.sab);
            r.fa |= (f & 1u) << (j & 31);
            r.fb |= ((f >> 1) & 1u) << (j & 31);
        }
    }
    const int sa = coulomb_hs_species(o.w);
    const double lz = (double)a.prm.sp[sa].z, alz = fabs(lz);
    r.est = (rt.Sf - ro.Sf) + lz * (rt.S - ro.S);
    const double reff = hier_ref_float(&a.prm, sa);
    const double fnear = rt.exact_near && ro.exact_near ? HIER_EXACT_TERM : reff;
    const double floor = hier_floor(a.ideal, alz, fnear, a.ideal ? 0.0 : a.ksum, rt.Phid + ro.Phid, rt.Phif + ro.Phif,
                                    rt.Phi + ro.Phi);
    const double rest = alz * (rt.E + ro.E + hier_own_bound(rt.Er, rt.adds, rt.Phi, rt.E) +
                               hier_own_bound(ro.Er, ro.adds, ro.Phi, ro.E));
    /* the mates' float terms: the reference's summation (float) or their
     * rounding against the exact terms (exact); our running sum's */
    const double absA = r.absA;
    /* our roundings: one a mate's change added (the previous batch's in
     * hg_fold: 32 warps' sums, then those 32 added), and est + v */
    const double adds = (double)(a.S + (a.Sp ? a.Sp + 32 : 0) + 1);
    const double mates = (a.ideal ? reff : a.ksum) * absA + adds * 0x1p-53 * (fabs(r.est) + absA);
    r.eps = a.bound_scale * (floor + rest + mates * (1.0 + 1e-6)) * (1.0 + 1e-9);
    /* too coarse for the running energy, which adds est: the chain then
     * leaves an acceptance to the exact pass (hg_rule_of), and the refined
     * look may narrow it first (mode 0 below), as the CPU's later looks do */
    r.wide = hier_energy_wide(rt.E + ro.E, rt.Phif + ro.Phif);
    r.blocked = coulomb_hs_external(&a.prm, t) != 0.0f || rt.overlap;
    r.degenerate = rt.degenerate || ro.degenerate || (nA >> 20) != 0;
    a.tr[k] = r;
    if (mode) return;
    /* undecided at the batch's start, or near enough that the accepted
     * mates' changes (about sqrt(Σ corr²/2) for half of them accepted;
     * close_sig times that, HG_CLOSE_SIGMAS) may leave it undecided: a refined look, in
     * parallel with the others, when refine > 0 (a guess: a trial it
     * misses only gets its exact pass in the chain sooner) */
    const double margin = a.close_sig * sqrt(0.5 * sq);
    a.close[k] = !r.blocked && !r.degenerate && r.nA == 0 &&
                 (hier_decide(r.est, r.eps + margin, r.T, r.dT) == 2 || (r.wide && r.est - r.eps < r.T + r.dT));
}

/* A block's share of trial k's exact pass: the reference's float terms of
 * its trial and old place against particles i0 + threadIdx.x, then every
 * `step`-th, below i1 (k itself left out), summed per thread and then in a
 * fixed tree; thread 0 gets Σ d_j, Σ|d_j| and whether a distance was 0 or
 * a hard core overlapped. */
static __device__ void hg_exact_part(const hg_args *a, int k, int i0, int i1, int step, double *sum_out,
                                     double *abs_out, int *bad_out)
{
    __shared__ double ss[256], sa2[256];
    __shared__ int sb[256];
    const float4 t = a->ttri[k], o = a->told[k];
    const float4 sa = a->prm.sp[coulomb_hs_species(o.w)];
    const int skip = a->b0 + k;
    double sum = 0.0, abs = 0.0;
    int bad = 0;
    for (int i = i0 + (int)threadIdx.x; i < i1; i += step) {
        if (i == skip) continue;
        const float4 b = a->pos[i];
        bool b_bad;
        double ab;
        const double d = hg_xterm(a, t, o, sa, b, b_bad, ab);
        bad |= b_bad;
        sum += d;
        abs += ab;
    }
    const int t_ = threadIdx.x;
    ss[t_] = sum;
    sa2[t_] = abs;
    sb[t_] = bad;
    __syncthreads();
    for (int h = blockDim.x / 2; h; h >>= 1) {
        if (t_ < h) {
            ss[t_] += ss[t_ + h];
            sa2[t_] += sa2[t_ + h];
            sb[t_] |= sb[t_ + h];
        }
        __syncthreads();
    }
    if (t_ == 0) {
        *sum_out = ss[0];
        *abs_out = sa2[0];
        *bad_out = sb[0];
    }
    __syncthreads(); /* the arrays are free again */
}

/* One block of S threads: the trials flagged by hg_prep, listed in order */
extern "C" __global__ void hg_close_list(hg_args a)
{
    __shared__ int sc[HG_MAX_BATCH];
    const int k = threadIdx.x, nt = blockDim.x;
    const int f = k < a.S ? a.close[k] : 0;
    sc[k] = f;
    __syncthreads();
    hg_block_scan(sc, k, nt);
    if (f) a.clist[sc[k] - 1] = k;
    if (k == nt - 1) {
        *a.nclist = sc[k];
        a.status->refined += sc[k];
    }
}
