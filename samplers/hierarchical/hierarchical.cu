/* hierarchical.cu — the hierarchical sampler on the GPU (hier_gpu.h has
 * the plan, DESIGN.md "The GPU path" the argument).
 *
 * Rounding.  Terms that must be the reference's own (a partner's float
 * pair energy E = (λ z_a z_b) (1 / sqrt(r²)), the hard-core and wall
 * tests, the trial position) are written with the _rn intrinsics: IEEE
 * operations, never contracted, the bits of the CPU reference's terms.
 * The tree's own double arithmetic may be contracted (FMA): a fused
 * operation rounds once where two would round twice, inside the
 * allowance the CPU's unfused operations are given.
 *
 * Determinism.  Moments are sums in 64-bit fixed point (integer atomics
 * commute), a leaf's particles are sorted by index when packed, and every
 * reduction runs in a fixed order, so the enclosures, the running energy
 * and the chain are the same on every run. */
#include "metro/hd.h"

#include "brush.h"
#include "coulomb_hs.h"
#include "hier_gpu.h"

#define HG_FULL 0xffffffffu

/* ---- the reference's float arithmetic ----------------------------------- */

/* coulomb_hs_pair as the CPU computes it: r² = (dx² + dy²) + dz², +∞ on a
 * hard-core overlap, (λ z_a z_b) · (1 / sqrt(r²)) */
static __device__ __forceinline__ float hg_r2(float ax, float ay, float az, float bx, float by, float bz)
{
    const float dx = __fsub_rn(ax, bx), dy = __fsub_rn(ay, by), dz = __fsub_rn(az, bz);
    return __fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz));
}

static __device__ __forceinline__ float hg_inv(float r2)
{
    return __fdiv_rn(1.0f, __fsqrt_rn(r2));
}

/* E(a, b) with a's row sa (radius, λ z) and b's charge and radius */
static __device__ __forceinline__ float hg_pair(float sa_y, float sa_z, float4 a, float4 b, float bq, float br)
{
    const float r2 = hg_r2(a.x, a.y, a.z, b.x, b.y, b.z);
    const float dmin = __fadd_rn(sa_y, br);
    const float c = r2 < __fmul_rn(dmin, dmin) ? INFINITY : __fmul_rn(sa_z, bq);
    return __fmul_rn(c, hg_inv(r2));
}

/* The reference's term of a move o -> t against partner b (coulomb_hs's
 * delta, term by term): E(t, b) - E(o, b), each float as the CPU computes
 * it, their difference in double; `bad` when a hard core overlaps or a
 * distance is 0.  ra and lza are the mover's radius and λ z, sp b's row. */
static __device__ __forceinline__ double hg_ref_delta(float4 t, float4 o, float ra, float lza, float4 b, float4 sp,
                                                      bool &bad)
{
    const float rt2 = hg_r2(t.x, t.y, t.z, b.x, b.y, b.z), ro2 = hg_r2(o.x, o.y, o.z, b.x, b.y, b.z);
    const float dmin = __fadd_rn(ra, sp.y), dm2 = __fmul_rn(dmin, dmin);
    bad = rt2 < dm2 || ro2 < dm2 || rt2 == 0.0f || ro2 == 0.0f;
    const float c = __fmul_rn(lza, sp.x);
    return (double)__fmul_rn(c, hg_inv(rt2)) - (double)__fmul_rn(c, hg_inv(ro2));
}

/* reference = exact: a directly summed partner's term (λ z_a) z_b / r in
 * double from the float positions (hier_exact_r2: within HIER_EXACT_TERM
 * of the exact term) */
static __device__ __forceinline__ double hg_exact_term(float lza, float zb, float4 x, float4 b)
{
    return (double)lza * (double)zb / sqrt(hier_exact_r2(x, b.x, b.y, b.z));
}

/* Partner b's term of trial k's exact pass (t, o; the mover's row sa) and
 * what it adds to the pass's bound: reference = float, the reference's
 * own d_j (hg_ref_delta) and |d_j|; reference = exact, the double term of
 * hier_ideal_delta and |e_t| + |e_o| (`bad` then near a hard core, with a
 * margin: the float test decides those on the host) */
static __device__ __forceinline__ double hg_xterm(const hg_args *a, float4 t, float4 o, float4 sa, float4 b, bool &bad,
                                                  double &abs)
{
    const float4 sp = a->prm.sp[coulomb_hs_species(b.w)];
    if (a->ideal) {
        const double dm = ((double)sa.y + (double)sp.y) * (1.0 + 1e-6);
        double ab = 0.0;
        int bd = 0;
        const double d = hier_ideal_delta((double)sa.z * (double)sp.x, t, o, b.x, b.y, b.z, dm * dm, &ab, &bd);
        bad = bd != 0;
        abs = ab;
        return d;
    }
    const double d = hg_ref_delta(t, o, sa.y, sa.z, b, sp, bad);
    abs = fabs(d);
    return d;
}

/* The exact pass's ±eps around its sum: the reference's summation margin
 * (float) or hier_ideal_eps with the pass's summation height (exact) */
static __device__ __forceinline__ double hg_xeps(const hg_args *a, double sum, double abs, double path)
{
    return a->ideal ? hier_ideal_eps(sum, abs, path, a->bound_scale) : hier_exact_eps(abs, a->ksum, a->bound_scale);
}

static __device__ __forceinline__ int hg_coord(const hg_args *a, int l, double v)
{
    const double f = (v + a->Rt) / a->h[l];
    int c = (int)floor(f);
    return c < 0 ? 0 : c >= a->m[l] ? a->m[l] - 1 : c;
}

static __device__ __forceinline__ double hg_centre(const hg_args *a, int l, int i)
{
    return -a->Rt + ((double)i + 0.5) * a->h[l];
}

static __device__ __forceinline__ unsigned hg_morton(int ix, int iy, int iz, int L)
{
    unsigned c = 0;
    for (int b = 0; b < L; ++b)
        c |= ((unsigned)(ix >> b) & 1u) << (3 * b + 2) | ((unsigned)(iy >> b) & 1u) << (3 * b + 1) |
             ((unsigned)(iz >> b) & 1u) << (3 * b);
    return c;
}

static __device__ __forceinline__ unsigned hg_leaf_of(const hg_args *a, float4 p)
{
    return hg_morton(hg_coord(a, a->L, p.x), hg_coord(a, a->L, p.y), hg_coord(a, a->L, p.z), a->L);
}

static __device__ __forceinline__ long long hg_cell(const hg_args *a, int l, float4 p)
{
    const int ix = hg_coord(a, l, p.x), iy = hg_coord(a, l, p.y), iz = hg_coord(a, l, p.z);
    return a->cell0[l] + ((long long)ix * a->m[l] + iy) * a->m[l] + iz;
}

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
    for (int h = 1; h < nt; h <<= 1) {
        const int v = k >= h ? ov_s[k - h] : 0;
        __syncthreads();
        ov_s[k] += v;
        __syncthreads();
    }
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

/* ---- the enclosure of a point: a warp walks the tree level by level ----- */

/* Point p of the batch: 2k the trial of mate k, 2k + 1 its old position.
 * Against every particle at its place at the batch's start; the moving ion
 * itself left out (its far image subtracted, as hier_tree.c does), and a
 * mate whose place overlaps the point left out of the sum (the chain
 * counts that overlap: hg_tri).  mode:
 *   HG_WALK_FIRST   the first look (order p_lo, theta);
 *   HG_WALK_REFINE  the refined look (order pm - HIER_EXTRA at
 *                   HIER_THETA_REFINE theta) of the trials hg_close_list
 *                   listed: p = 2e + (0 trial, 1 old place) for the e-th,
 *                   written over that trial's first look;
 *   HG_WALK_WHOLE   the total energy (hier_gpu_total): point p is particle
 *                   b0 + p at its place, p < S, against every other
 *                   particle; no mates, so every overlap counts.
 * A point's walk is one warp's, except in the refined look, which few
 * trials take and whose time is one walk's latency: there a team of the
 * block's warps (all of them, or a share of them when the block splits:
 * hg_enclose) walk one point together.  Each level's candidates go
 * round by round, warp w taking the round's w-th 32, and the queues are
 * filled in candidate order (each warp's offset from the team's counts),
 * so the frontier is the single warp's; each warp sums its own lanes and
 * the team adds the warps in order: the same bits on every run. */
static __device__ __forceinline__ void hg_team_sync(int team, int bar)
{
    if (team > 1)
        asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(32 * team) : "memory");
    else
        __syncwarp();
}

/* One near partner id (place b, charge bq, radius br) of the point x of a
 * moving ion of species row sa: coulomb_hs_pair's float hard-core test,
 * then its term into Sf (the reference's float energy, or in double when
 * dbl) and |z|/r into Phid.  An overlap with a mate (ids [b0 - Sp, mate_hi):
 * the batch's and, when batches overlap, the previous batch's) is
 * the chain's to count; another sets overlap (at the trial) or degenerate. */
static __device__ __forceinline__ void hg_near(const hg_args &a, float4 x, float4 sa, float4 b, float bq, float br,
                                               int id, int mate_hi, int is_t, bool dbl, double &Sf, double &Phid,
                                               long long &nd, int &overlap, int &degenerate)
{
    const float r2 = hg_r2(x.x, x.y, x.z, b.x, b.y, b.z);
    const float dmin = __fadd_rn(sa.y, br);
    if (r2 < __fmul_rn(dmin, dmin) || r2 == 0.0f) {
        if (id >= a.b0 - a.Sp && id < mate_hi) return;
        if (r2 != 0.0f && is_t) overlap = 1;
        else degenerate = 1;
        return;
    }
    const float inv = hg_inv(r2);
    Sf += dbl ? hg_exact_term(sa.z, bq, x, b) : (double)__fmul_rn(__fmul_rn(sa.z, bq), inv);
    Phid += (double)fabsf(bq) * (double)inv;
    ++nd;
}

/* a block is a team of up to HG_TEAM_MAX warps (the refined look) or
 * HG_WARPS warps with a point each: 128 registers a thread either way */
extern "C" __global__ void __launch_bounds__(32 * HG_TEAM_MAX, 1) hg_enclose(hg_args a, int mode)
{
    __shared__ int tcnt[2][2][HG_TEAM_MAX];      /* a round's pushes and near leaves per warp, by parity */
    __shared__ double tsum[HG_TEAM_MAX][8];
    __shared__ int tflag[HG_TEAM_MAX][3];
    __shared__ unsigned fq[HG_TEAM_MAX][64];     /* each warp's far cells waiting for lanes: a ring */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int whole = mode == HG_WALK_WHOLE, refined = mode == HG_WALK_REFINE;
    /* reference = exact: the refined look sums its near partners in double,
     * so its floor is double rounding (hier_floor) */
    const bool dbl = refined && a.ideal;
    /* the refined look: a block's warps walk one point together, or,
     * when the points are more than the blocks the device holds at once,
     * split into 2, 4, ... teams that walk a point each (fewer warps a
     * point, but no second wave of blocks: at 2^20 with the float
     * reference, hundreds of points, 0.49 s of refined looks in teams of
     * 16 against 0.31 s split); each team its own named barrier */
    const int nwb = (int)(blockDim.x >> 5), npts = refined ? 2 * *a.nclist : 0;
    int split = 1;
    while (refined && npts > split * a.refine_slots && 2 * split <= nwb && nwb % (2 * split) == 0) split *= 2;
    const int team = refined ? nwb / split : 1, wi = team > 1 ? warp % team : 0, bar = 1 + warp / team;
    const int p = refined ? (int)blockIdx.x * split + warp / team : (int)blockIdx.x * nwb + warp;
    if (p >= (whole ? a.S : refined ? npts : 2 * a.S)) return;
    const int k = whole ? p : refined ? a.clist[p >> 1] : p >> 1, is_t = !whole && !(p & 1);
    const int out = whole ? p : 2 * k + (p & 1); /* where the result goes in pts */
    const int q = refined ? a.pm - HIER_EXTRA : a.p_lo;
    const double theta = refined ? a.theta_refine : a.theta;
    const float4 o = whole ? a.pos[a.b0 + k] : a.told[k];
    const float4 x = is_t ? a.ttri[k] : o;
    const int mate_hi = whole ? 0 : a.b0 + a.S; /* mates: [b0, mate_hi) */
    const int skip = a.b0 + k;
    const float4 sa = a.prm.sp[coulomb_hs_species(o.w)];
    const double xd[3] = {(double)x.x, (double)x.y, (double)x.z};
    double skip_r;
    {
        const double dx = xd[0] - (double)o.x, dy = xd[1] - (double)o.y, dz = xd[2] - (double)o.z;
        skip_r = sqrt(dx * dx + dy * dy + dz * dz);
        if (skip_r == 0.0) skip_r = 1.0;
    }
    const double skip_z = (double)sa.x;
    unsigned *front = a.front + (size_t)p * 2 * HG_FRONT, *nearl = a.nearl + (size_t)p * HG_NEAR;
    double S = 0.0, E = 0.0, Er = 0.0, Phi = 0.0, Phif = 0.0, adds = 0.0, Sf = 0.0, Phid = 0.0;
    int overlap = 0, degenerate = 0, err = 0;
    int ncur = 1, nnear = 0, cur = 0;
    int fh = 0, nq = 0; /* the far ring's head and length */
    if (lane == 0 && wi == 0) front[0] = 0u;
    if (a.L == 0) { /* one leaf: the whole cube */
        if (lane == 0 && wi == 0) nearl[0] = 0u;
        nnear = a.count[0] > 0;
    }
    hg_team_sync(team, bar);
    int round = 0;
    for (int l = 1; l <= a.L && !err; ++l) {
        const unsigned *fc = front + cur * HG_FRONT;
        unsigned *fn = front + (cur ^ 1) * HG_FRONT;
        const int ncand = 8 * ncur;
        int nnext = 0;
        const int sl[3] = {hg_coord(&a, l, o.x), hg_coord(&a, l, o.y), hg_coord(&a, l, o.z)};
        for (int c0 = 0; c0 < ncand; c0 += 32 * team, ++round) {
            const int c = c0 + 32 * wi + lane;
            int push = 0, isnear = 0, far = 0;
            unsigned val = 0;
            if (c < ncand) {
                const unsigned e = fc[c >> 3];
                const int ch = c & 7;
                const unsigned dir = (e >> 30) & 1u;
                const int ix = 2 * (int)(e & 1023u) + ((ch >> 2) & 1), iy = 2 * (int)((e >> 10) & 1023u) + ((ch >> 1) & 1),
                          iz = 2 * (int)((e >> 20) & 1023u) + (ch & 1);
                if (l == a.L) {
                    val = hg_morton(ix, iy, iz, a.L);
                    isnear = a.count[val] > 0;
                } else {
                    const long long cell = a.cell0[l] + ((long long)ix * a.m[l] + iy) * a.m[l] + iz;
                    const int cn = a.cnt[cell];
                    val = (unsigned)ix | (unsigned)iy << 10 | (unsigned)iz << 20;
                    if (cn > 0) {
                        if (dir) {
                            push = 1;
                            val |= 1u << 30;
                        } else {
                            const double y[3] = {xd[0] - hg_centre(&a, l, ix), xd[1] - hg_centre(&a, l, iy),
                                                 xd[2] - hg_centre(&a, l, iz)};
                            const double d = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
                            const double rho = a.rho[l];
                            if (rho <= theta * d && d - rho >= a.dcut) {
                                if (cn <= a.direct_max && l >= a.L - 2) {
                                    push = 1;
                                    val |= 1u << 30;
                                } else {
                                    far = 1;
                                }
                            } else {
                                push = 1;
                            }
                        }
                    }
                }
            }
            const unsigned lt = (1u << lane) - 1u;
            const unsigned mp = __ballot_sync(HG_FULL, push), mn = __ballot_sync(HG_FULL, isnear);
            int tp = __popc(mp), tn = __popc(mn), bp = 0, bn = 0;
            if (team > 1) { /* the team's counts; buffers by parity: one barrier a round */
                int(*tc)[HG_TEAM_MAX] = tcnt[round & 1];
                const int tw = warp - wi; /* the team's first warp in the block */
                if (lane == 0) {
                    tc[0][warp] = tp;
                    tc[1][warp] = tn;
                }
                hg_team_sync(team, bar);
                tp = tn = 0;
                for (int w = 0; w < team; ++w) {
                    if (w == wi) bp = tp, bn = tn;
                    tp += tc[0][tw + w];
                    tn += tc[1][tw + w];
                }
            }
            if (nnext + tp > HG_FRONT || nnear + tn > HG_NEAR) {
                err = 1;
                break;
            }
            if (push) fn[nnext + bp + __popc(mp & lt)] = val;
            if (isnear) nearl[nnear + bn + __popc(mn & lt)] = val;
            nnext += tp;
            nnear += tn;
            /* The round's far cells join the warp's ring; they are
             * expanded 32 at a time, a lane each, and the level's rest
             * after its last round (all of one level: l, sl), so the
             * lanes are busy in the expansions, not the few whose
             * candidate happened to be far (the cells, their order and
             * so every lane's sum are the same on every run). */
            const unsigned mf = __ballot_sync(HG_FULL, far);
            if (far) fq[warp][(fh + nq + __popc(mf & lt)) & 63] = val;
            nq += __popc(mf);
            __syncwarp();
            const int last = c0 + 32 * team >= ncand;
            while (nq >= 32 || (last && nq > 0)) {
                const int take = min(nq, 32);
                if (lane < take) {
                    const unsigned e = fq[warp][(fh + lane) & 63];
                    const int ix = (int)(e & 1023u), iy = (int)((e >> 10) & 1023u), iz = (int)((e >> 20) & 1023u);
                    const long long cell = a.cell0[l] + ((long long)ix * a.m[l] + iy) * a.m[l] + iz;
                    const double y[3] = {xd[0] - hg_centre(&a, l, ix), xd[1] - hg_centre(&a, l, iy),
                                         xd[2] - hg_centre(&a, l, iz)};
                    const double d = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
                    const double rho = a.rho[l];
                    const double *M = a.blk + cell * a.stride;
                    const double v = 1.0 / d, idr = 1.0 / (d - rho);
                    const double extra = (double)a.cnt[cell] * HG_FIX_SLACK;
                    S += hier_expand_orders(M + a.moff, a.pm, a.mc0, y, v, q);
                    E += hier_trunc(M + 1, a.pm, v, idr, q) + extra * idr;
                    Er += M[a.roff + refined] * v; /* hg_finalize */
                    /* the fixed point's rounding of A and D: extra v */
                    const double phc = hier_phi(M, a.doff, a.phik, y, v, idr, rho, 0.0, 0.0) + extra * v;
                    Phi += phc;
                    Phif += phc;
                    adds += 1.0; /* the lane's running S */
                    if (ix == sl[0] && iy == sl[1] && iz == sl[2]) {
                        S -= skip_z / skip_r;
                        Er += 6.0 * 0x1p-53 * fabs(skip_z) / skip_r; /* a distance within 4.5u, a division */
                        adds += 1.0;
                    }
                }
                fh = (fh + take) & 63;
                nq -= take;
                __syncwarp();
            }
        }
        hg_team_sync(team, bar);
        cur ^= 1;
        ncur = nnext;
    }
    /* near leaves, 32 at a time: lane u reads leaf u's place and count,
     * then the lanes take the group's places one each (found by a binary
     * search over the counts' prefix sums), so the loads of a whole group
     * are in flight together */
    long long nd = 0;
    for (int g0 = 32 * wi; g0 < nnear && !err; g0 += 32 * team) {
        int st = 0, cn = 0;
        if (g0 + lane < nnear) {
            const unsigned c = nearl[g0 + lane];
            st = a.start[c];
            cn = a.count[c];
        }
        int pre = cn; /* inclusive prefix sum over lanes */
        for (int o2 = 1; o2 < 32; o2 <<= 1) {
            const int v = __shfl_up_sync(HG_FULL, pre, o2);
            if (lane >= o2) pre += v;
        }
        const int total = __shfl_sync(HG_FULL, pre, 31);
        /* HG_NEAR_PER places a lane per round, their loads (index, place,
         * radius of each) issued together: the near field's time is these
         * loads' round trips, not arithmetic.  A lane's places come in the
         * same order whatever HG_NEAR_PER is (idx = base + 32 h + lane), so
         * its sums have the same bits */
        for (int base = 0; base < total; base += 32 * HG_NEAR_PER) {
            int sidx[HG_NEAR_PER];
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h) {
                const int idx = base + 32 * h + lane;
                int lo = 0; /* the first lane whose prefix exceeds idx */
                for (int step = 16; step; step >>= 1) {
                    const int pv = __shfl_sync(HG_FULL, pre, lo + step - 1);
                    if (pv <= idx) lo += step;
                }
                const int pu = __shfl_sync(HG_FULL, pre, lo), cu_ = __shfl_sync(HG_FULL, cn, lo),
                          su = __shfl_sync(HG_FULL, st, lo);
                sidx[h] = idx < total ? su + idx - (pu - cu_) : -1;
            }
            int ids[HG_NEAR_PER];
            float4 bs[HG_NEAR_PER];
            float brs[HG_NEAR_PER];
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h) {
                const int s = sidx[h] >= 0 ? sidx[h] : 0;
                ids[h] = sidx[h] >= 0 ? a.pid[s] : -1;
                bs[h] = a.pk[s];
                brs[h] = a.pr[s];
            }
#pragma unroll
            for (int h = 0; h < HG_NEAR_PER; ++h)
                if (ids[h] >= 0 && ids[h] != skip) /* packed: the charge in w */
                    hg_near(a, x, sa, bs[h], bs[h].w, brs[h], ids[h], mate_hi, is_t, dbl, Sf, Phid, nd, overlap,
                            degenerate);
        }
    }
    /* particles waiting in the overflow list, when their leaf is near */
    const int nov = *a.novf;
    for (int e = 32 * wi + lane; e < nov && !err; e += 32 * team) {
        const int id = a.ovf[e];
        if (id < 0 || id == skip) continue;
        const unsigned lf = (unsigned)a.leafof[id];
        int in = 0;
        for (int u = 0; u < nnear && !in; ++u) in = nearl[u] == lf;
        if (!in) continue;
        const float4 b = a.pos[id];
        const float4 sb = a.prm.sp[coulomb_hs_species(b.w)];
        hg_near(a, x, sa, b, sb.x, sb.y, id, mate_hi, is_t, dbl, Sf, Phid, nd, overlap, degenerate);
    }
    S = hg_wsum(S);
    E = hg_wsum(E);
    Er = hg_wsum(Er);
    Phi = hg_wsum(Phi);
    Phif = hg_wsum(Phif);
    /* a term's roundings: its lane's running sums, the warp's five
     * levels and the team's sum (at most HG_TEAM_MAX - 1 additions): at
     * most the count of all terms plus 8 + HG_TEAM_MAX (added by every
     * warp of a team, so a team counts it team times: looser, not wrong) */
    adds = hg_wsum(adds + (double)nd) + (8.0 + HG_TEAM_MAX);
    Sf = hg_wsum(Sf);
    Phid = hg_wsum(Phid);
    overlap = __any_sync(HG_FULL, overlap);
    degenerate = __any_sync(HG_FULL, degenerate);
    err = __any_sync(HG_FULL, err);
    if (team > 1) { /* the warps' sums in order */
        if (lane == 0) {
            const double v[8] = {S, E, Phi, Phif, adds, Sf, Phid, Er};
            for (int i = 0; i < 8; ++i) tsum[warp][i] = v[i];
            tflag[warp][0] = overlap;
            tflag[warp][1] = degenerate;
            tflag[warp][2] = err;
        }
        hg_team_sync(team, bar);
        if (wi != 0) return;
        S = E = Phi = Phif = adds = Sf = Phid = Er = 0.0;
        for (int w = 0; w < team; ++w) {
            S += tsum[warp + w][0];
            E += tsum[warp + w][1];
            Phi += tsum[warp + w][2];
            Phif += tsum[warp + w][3];
            adds += tsum[warp + w][4];
            Sf += tsum[warp + w][5];
            Phid += tsum[warp + w][6];
            Er += tsum[warp + w][7];
            overlap |= tflag[warp + w][0];
            degenerate |= tflag[warp + w][1];
            err |= tflag[warp + w][2];
        }
    }
    if (lane == 0) {
        hg_point r;
        r.Sf = Sf;
        r.S = S;
        r.E = E;
        r.Er = Er;
        /* each near |z|/r from the float 1/r (within 1.5 ulp): widened 1e-6 */
        r.Phi = Phi + Phid * (1.0 + 1e-6);
        r.Phif = Phif;
        r.Phid = Phid * (1.0 + 1e-6);
        r.exact_near = dbl;
        r.adds = adds;
        r.overlap = overlap;
        r.degenerate = degenerate;
        a.pts[out] = r;
        if (err) a.status->err = 1;
    }
}

/* One block of HG_TSUM threads: the total energy's share of the chunk of
 * whole walks (points 0 ... S-1, particles b0 ...): ½ Σ_p U_p with U_p =
 * Sf + λz S (the particle's pair energies with all others), added to
 * tot[0] in a fixed order, the bound on its distance from the direct sum
 * of the float pair energies (DESIGN.md, "The energy") to tot[1], and
 * the points that met an overlap or a coincidence to tot[2]. */
extern "C" __global__ void __launch_bounds__(HG_TSUM) hg_total_sum(hg_args a)
{
    __shared__ double sh[3][HG_TSUM];
    double u = 0.0, b = 0.0, bad = 0.0;
    for (int p = threadIdx.x; p < a.S; p += HG_TSUM) {
        const hg_point r = a.pts[p];
        const double lz = (double)a.prm.sp[coulomb_hs_species(a.pos[a.b0 + p].w)].z;
        u += r.Sf + lz * r.S;
        b += hier_total_bound(fabs(lz), r.E + hier_own_bound(r.Er, r.adds, r.Phi, r.E), r.Phi, a.ksum);
        bad += (double)(r.overlap || r.degenerate);
    }
    sh[0][threadIdx.x] = u;
    sh[1][threadIdx.x] = b;
    sh[2][threadIdx.x] = bad;
    for (int w = HG_TSUM / 2; w; w >>= 1) {
        __syncthreads();
        if (threadIdx.x < w)
            for (int c = 0; c < 3; ++c) sh[c][threadIdx.x] += sh[c][threadIdx.x + w];
    }
    if (threadIdx.x == 0) {
        a.tot[0] += 0.5 * sh[0][0];
        a.tot[1] += 0.5 * sh[1][0];
        a.tot[2] += sh[2][0];
    }
}

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
        r.pad = 0;
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
    a.close[k] = !r.blocked && !r.degenerate && r.nA == 0 && hier_decide(r.est, r.eps + margin, r.T, r.dT) == 2;
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
    for (int h = 1; h < nt; h <<= 1) {
        const int v = k >= h ? sc[k - h] : 0;
        __syncthreads();
        sc[k] += v;
        __syncthreads();
    }
    if (f) a.clist[sc[k] - 1] = k;
    if (k == nt - 1) {
        *a.nclist = sc[k];
        a.status->refined += sc[k];
    }
}

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
        r.acc = fmax(0.0, tr.T - tr.dT);
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
