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

/* A block's inclusive sum over s[0 ... nt - 1] in shared memory, thread
 * k (of nt, all of them calling) holding s[k]: log2 nt steps, each read
 * before the barrier that lets it be overwritten */
static __device__ __forceinline__ void hg_block_scan(int *s, int k, int nt)
{
    for (int h = 1; h < nt; h <<= 1) {
        const int v = k >= h ? s[k - h] : 0;
        __syncthreads();
        s[k] += v;
        __syncthreads();
    }
}

/* The kernels, by job (one translation unit: the plugin SDK embeds one
 * device file, and the parts share the static helpers above) */
#include "hier_dev_tree.h"
#include "hier_dev_walk.h"
#include "hier_dev_batch.h"
#include "hier_dev_chain.h"
