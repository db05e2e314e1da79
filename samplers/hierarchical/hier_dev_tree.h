/* hier_dev_tree.h — the tree on the device: the moments (added and
 * removed by one kernel) and the packed leaves (counted, scanned, filled,
 * sorted, moved).  A part of hierarchical.cu, included from it after the
 * reference's float arithmetic; not a header of its own. */

/* ---- the moments: one kernel adds and removes (the same code, so a
 * removal takes away exactly the integers its addition put in) ------------ */

/* Tasks: mode 0, every particle into every level (sign +1); mode 1, the
 * batch's accepted moves: old position out (-1), trial in (+1).  16
 * threads a task, thread m the column m of the solid harmonics
 * R_n^m (hier_tree.c, moments4: the same recurrences); m = 0 also A, D, B. */
extern "C" __global__ void hg_mom(hg_args a, int mode)
{
    const long long gt = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long task = gt >> 4;
    const int m = (int)(gt & 15);
    const int lv = a.L - 1;
    if (lv < 1) return;
    float4 p;
    int l;
    long long sign;
    if (mode == 0) {
        if (task >= (long long)a.n * lv) return;
        p = a.pos[task / lv];
        l = 1 + (int)(task % lv);
        sign = 1;
    } else {
        if (task >= (long long)a.S * lv * 2) return;
        const int k = (int)(task / (2 * lv)), r = (int)(task % (2 * lv));
        if (!a.acc[k]) return;
        l = 1 + r / 2;
        sign = (r & 1) ? 1 : -1;
        p = (r & 1) ? a.ttri[k] : a.told[k];
    }
    if (m > a.pm) return;
    const int ix = hg_coord(&a, l, p.x), iy = hg_coord(&a, l, p.y), iz = hg_coord(&a, l, p.z);
    const long long cell = a.cell0[l] + ((long long)ix * a.m[l] + iy) * a.m[l] + iz;
    const double sx = (double)p.x - hg_centre(&a, l, ix), sy = (double)p.y - hg_centre(&a, l, iy),
                 sz = (double)p.z - hg_centre(&a, l, iz);
    const double r2 = sx * sx + sy * sy + sz * sz;
    const double z = (double)a.prm.sp[coulomb_hs_species(p.w)].x;
    const int fs = a.fstride;
    const double *sc = a.unit + (size_t)l * 2 * fs; /* scales: 2^HG_FIX_BITS / unit */
    unsigned long long *F = (unsigned long long *)(a.fx + cell * fs);
    const int mo = 5 + a.pm; /* where M starts in the fixed-point block */
#define HG_ADD(off, val) atomicAdd(F + (off), (unsigned long long)(sign * __double2ll_rn((val) * sc[off])))
    const double *rc1 = a.tab + HG_T_RC1, *rc2 = a.tab + HG_T_RC2;
    if (m == 0) {
        atomicAdd(a.cnt + cell, (int)sign);
        const double az = fabs(z), s = sqrt(r2);
        HG_ADD(0, az);
        HG_ADD(1, az * sx);
        HG_ADD(2, az * sy);
        HG_ADD(3, az * sz);
        double sq = s;
        for (int q = 0; q <= a.pm; ++q) {
            HG_ADD(4 + q, az * sq);
            sq *= s;
        }
        double r0 = 1.0, r1 = 0.0;
        HG_ADD(mo, z);
        for (int n = 1; n <= a.pm; ++n) {
            const double rn = rc1[n * HG_TD] * sz * r0 - rc2[n * HG_TD] * r2 * r1;
            r1 = r0;
            r0 = rn;
            HG_ADD(mo + n * n, z * rn);
        }
        return;
    }
    double mr = 1.0, mi = 0.0;
    for (int k = 1; k <= m; ++k) {
        const double f = 1.0 / (2.0 * k);
        const double nr = f * (sx * mr - sy * mi), ni = f * (sx * mi + sy * mr);
        mr = nr;
        mi = ni;
    }
    double ar = mr, ai = mi, br = 0.0, bi = 0.0;
    HG_ADD(mo + m * m + 2 * m - 1, z * ar);
    HG_ADD(mo + m * m + 2 * m, z * ai);
    for (int n = m + 1; n <= a.pm; ++n) {
        const double e1 = rc1[n * HG_TD + m] * sz, e2 = rc2[n * HG_TD + m] * r2;
        const double xr = e1 * ar - e2 * br, xi = e1 * ai - e2 * bi;
        br = ar;
        bi = ai;
        ar = xr;
        ai = xi;
        HG_ADD(mo + n * n + 2 * m - 1, z * ar);
        HG_ADD(mo + n * n + 2 * m, z * ai);
    }
#undef HG_ADD
}

/* The sum of a warp's lanes' values (a butterfly: every lane gets it) */
static __device__ __forceinline__ double hg_wsum(double v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(HG_FULL, v, o);
    return v;
}

/* A warp: a cell's evaluated block from its fixed-point sums, as hier_tree.c's
 * cell_norms, each quantity widened by its proven error (DESIGN.md, "The
 * error bound", (c)): the fixed point's rounding, count HG_FIX_SLACK rho^n
 * (hier_gpu.h); for the moments also each source's recurrence, src_n A
 * rho^n, and the conversion to double (the integer and the product by the
 * unit's inverse: 3u of each real, 3u G_n in the norm).  Integer sums do
 * not drift: nothing accumulates between rebuilds.  The
 * lanes convert the integers side by side, then take a degree each (the
 * same operations per degree as the CPU's cell_norms): a thread per cell walked
 * ~250 integers and the norms' double loop alone, at 5% occupancy. */
static __device__ void hg_finalize(const hg_args *a, long long cell, int l)
{
    const int lane = threadIdx.x & 31;
    const int fs = a->fstride, pm = a->pm;
    const double *inv = a->unit + (size_t)l * 2 * fs + fs;
    const long long *F = a->fx + cell * fs;
    double *M = a->blk + cell * a->stride;
    const int cn = a->cnt[cell];
    const double quant = (double)(cn > 0 ? cn : 0) * HG_FIX_SLACK;
    /* F: A, D_0..2, B_0..pm, then the moments; M: hier_tree.h's layout, the moments order by order (hier_mslot) */
    for (int i = lane; i < 5 + pm + a->ncoef; i += 32) {
        const int dst = i == 0   ? 0
                        : i < 4      ? a->doff + i - 1
                        : i < 5 + pm ? a->boff + i - 4
                                     : a->moff + hier_mslot(pm, a->mc0, i - 5 - pm);
        M[dst] = (double)F[i] * inv[i];
    }
    __syncwarp();
    for (int n = lane; n <= pm; n += 32) M[a->goff + n] = hier_norm_g_orders(M + a->moff, a->tab + HG_T_GW, pm, a->mc0, n);
    __syncwarp();
    if (lane == 0) M[1] = M[0] > 0 ? M[0] : 0.0; /* K_0 = A */
    const double A = M[0] > 0 ? M[0] : 0.0, rho = a->rho[l];
    /* The rounding bound of a far cell, Σ_(n<=q) R_n v^(n+1) (hier_round),
     * is at most v Σ_(n<=q) R_n (theta / rho)^n, since rho <= theta d: one
     * number for each look (first: p_lo, theta; refined: p, theta_refine)
     * instead of a Horner over the R_n in every walk (+9% on the walks) */
    const double wl = a->theta / rho, wh = a->theta_refine / rho;
    double rl = 0.0, rh = 0.0;
    for (int n = lane; n <= pm + 1; n += 32) {
        double rn = 1.0; /* rho^n, as the CPU's cell_norms forms it */
        for (int i = 0; i < n; ++i) rn *= rho;
        const double G = n <= pm ? M[a->goff + n] : 0.0;
        const double dg =
            n <= pm ? (quant * rn + a->tab[HG_T_SRC + n] * A * rn + 3.0 * 0x1p-53 * G) * (1.0 + 1e-6) : 0.0;
        if (n >= 1) hier_norm_k(M, pm, a->doff, a->boff, a->goff, rn, 0.0, dg, quant * rn, n);
        if (n <= pm) {
            const double R = (a->tab[HG_T_EV + n] * G * (1.0 + 1e-6) + a->tab[HG_T_SQ + n] * dg) * (1.0 + 1e-6);
            double pl = 1.0, ph = 1.0;
            for (int i = 0; i < n; ++i) pl *= wl, ph *= wh;
            if (n <= a->p_lo) rl += R * pl;
            if (n <= pm - HIER_EXTRA) rh += R * ph;
        }
    }
    rl = hg_wsum(rl);
    rh = hg_wsum(rh);
    if (lane == 0) {
        M[a->roff] = rl * (1.0 + 1e-6);
        M[a->roff + 1] = rh * (1.0 + 1e-6);
    }
}

/* A warp per cell.  mode 0: every cell; mode 1: the cells the batch's
 * accepted moves touched (a cell touched twice is finalized twice, to the
 * same values) */
extern "C" __global__ void hg_norms(hg_args a, int mode)
{
    const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (a.L < 2) return;
    if (mode == 0) {
        if (t >= a.cell0[a.L]) return;
        int l = 1;
        while (l + 1 < a.L && t >= a.cell0[l + 1]) ++l;
        hg_finalize(&a, t, l);
        return;
    }
    const int lv = a.L - 1;
    if (t >= (long long)a.S * lv * 2) return;
    const int k = (int)(t / (2 * lv)), r = (int)(t % (2 * lv));
    if (!a.acc[k]) return;
    const int l = 1 + r / 2;
    const float4 p = (r & 1) ? a.ttri[k] : a.told[k];
    hg_finalize(&a, hg_cell(&a, l, p), l);
}

/* ---- leaves --------------------------------------------------------------- */

/* Count each leaf's particles (mode 0 first computes every leafof) */
extern "C" __global__ void hg_leaf_count(hg_args a, int mode)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n) return;
    if (mode == 0) a.leafof[i] = (int)hg_leaf_of(&a, a.pos[i]);
    atomicAdd(a.fill + a.leafof[i], 1);
}

/* One block: leaf c gets cap = count + count/2 + 8 places from start[c]
 * (the exclusive sum), count[c] = 0; fill[c] is cleared for the next use */
extern "C" __global__ void hg_leaf_scan(hg_args a, int nleaves)
{
    __shared__ long long part[1024];
    const int t = threadIdx.x, nt = blockDim.x;
    const int per = (nleaves + nt - 1) / nt;
    const int c0 = t * per, c1 = min(nleaves, c0 + per);
    long long s = 0;
    for (int c = c0; c < c1; ++c) {
        const int k = a.fill[c];
        s += k + k / 2 + 8;
    }
    part[t] = s;
    __syncthreads();
    if (t == 0) {
        long long run = 0;
        for (int i = 0; i < nt; ++i) {
            const long long v = part[i];
            part[i] = run;
            run += v;
        }
    }
    __syncthreads();
    long long run = part[t];
    for (int c = c0; c < c1; ++c) {
        const int k = a.fill[c];
        a.start[c] = (int)run;
        a.cap[c] = k + k / 2 + 8;
        a.count[c] = 0;
        a.fill[c] = 0;
        run += k + k / 2 + 8;
    }
    if (t == 0) *a.novf = 0;
}

static __device__ __forceinline__ void hg_put(const hg_args *a, int s, int i, float4 p)
{
    const float4 sp = a->prm.sp[coulomb_hs_species(p.w)];
    a->pk[s] = make_float4(p.x, p.y, p.z, sp.x);
    a->pr[s] = sp.y;
    a->pid[s] = i;
    a->slot[i] = s;
}

/* Every particle into its leaf (places in any order: hg_leaf_sort fixes it) */
extern "C" __global__ void hg_leaf_fill(hg_args a)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n) return;
    const int c = a.leafof[i];
    const int s = a.start[c] + atomicAdd(a.count + c, 1);
    hg_put(&a, s, i, a.pos[i]);
}

/* Each leaf's particles in index order, so every sum over them runs in
 * one order on every run */
extern "C" __global__ void hg_leaf_sort(hg_args a, int nleaves)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nleaves) return;
    const int s0 = a.start[c], s1 = s0 + a.count[c];
    for (int s = s0 + 1; s < s1; ++s) {
        const int id = a.pid[s];
        const float4 q = a.pk[s];
        const float r = a.pr[s];
        int u = s - 1;
        while (u >= s0 && a.pid[u] > id) {
            a.pid[u + 1] = a.pid[u];
            a.pk[u + 1] = a.pk[u];
            a.pr[u + 1] = a.pr[u];
            --u;
        }
        a.pid[u + 1] = id;
        a.pk[u + 1] = q;
        a.pr[u + 1] = r;
    }
    for (int s = s0; s < s1; ++s) a.slot[a.pid[s]] = s;
}

/* One block of S threads (rounded up to 32), thread k the batch's k-th
 * trial: the accepted moves' leaves, the batch's energy change and its
 * acceptances.  A particle that moves within its leaf is updated in place;
 * one that leaves its place leaves a hole (no charge, far away: its terms
 * are exactly 0) and is appended to its new leaf after the batch's earlier
 * newcomers there (its rank among them, so the places do not depend on
 * timing); where the leaf is full it joins the overflow list, in index
 * order.  The energy change is summed in a fixed tree. */
extern "C" __global__ void hg_leaf_move(hg_args a)
{
    __shared__ int nl_s[HG_MAX_BATCH], ov_s[HG_MAX_BATCH];
    __shared__ double de_s[HG_MAX_BATCH];
    __shared__ int nacc_s[HG_MAX_BATCH];
    const int k = threadIdx.x, nt = blockDim.x, in = k < a.S;
    const int j = a.b0 + k;
    const int acc = in && a.acc[k];
    float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
    int nl = -1, mover = 0;
    if (acc) {
        t = a.ttri[k];
        nl = (int)hg_leaf_of(&a, t);
        const int s = a.slot[j];
        mover = !(nl == a.leafof[j] && s >= 0);
        if (!mover) {
            a.pk[s] = make_float4(t.x, t.y, t.z, a.pk[s].w);
        } else if (s >= 0) {
            a.pk[s] = make_float4(1e7f, 1e7f, 1e7f, 0.0f);
            a.pr[s] = 0.0f;
            a.pid[s] = -1;
        } else {
            a.ovf[a.ovslot[j]] = -1;
        }
    }
    nl_s[k] = mover ? nl : -1;
    de_s[k] = acc ? a.dE[k] : 0.0;
    nacc_s[k] = acc;
    __syncthreads();
    int rank = 0, c0 = 0, over = 0;
    if (mover) {
        for (int u = 0; u < k; ++u) rank += nl_s[u] == nl;
        c0 = a.count[nl];
        over = c0 + rank >= a.cap[nl];
    }
    ov_s[k] = over;
    __syncthreads();
    /* the overflow list's new entries in index order: an exclusive sum */
    hg_block_scan(ov_s, k, nt);
    const int nov0 = *a.novf;
    if (mover) {
        a.leafof[j] = nl;
        if (!over) {
            hg_put(&a, a.start[nl] + c0 + rank, j, t);
            atomicMax(a.count + nl, c0 + rank + 1);
        } else {
            const int e = nov0 + ov_s[k] - 1;
            a.ovf[e] = j;
            a.ovslot[j] = e;
            a.slot[j] = -1;
        }
    }
    /* the energy change and the count, in a fixed tree */
    for (int h = nt / 2; h; h >>= 1) {
        if (k < h) {
            de_s[k] += de_s[k + h];
            nacc_s[k] += nacc_s[k + h];
        }
        __syncthreads();
    }
    if (k == nt - 1) *a.novf = nov0 + ov_s[k];
    if (k == 0) {
        a.energy[0] += de_s[0];
        *a.cycle_acc += nacc_s[0];
    }
}
