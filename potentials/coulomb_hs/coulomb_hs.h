/* coulomb_hs.h — the primitive model: charged hard spheres in a dielectric
 * continuum, inside a spherical hard-wall cell (PHYSICS.md §2, seed 002 §5).
 *
 * Units: lengths in Å, energies in k_B T.
 *
 *   pair      βU_ab(r) = λ_B z_a z_b / r   for r >= (d_a + d_b) / 2,
 *                        +∞                 below (hard cores overlap)
 *   bond      the pair energy (this potential has no bonds)
 *   external  0 while the centre obeys |r| <= R_cell - d/2, +∞ outside:
 *             the wall confines the whole ion (its surface), so centres of
 *             species s live in the ball of radius R_cell - d_s/2.
 *
 * Particle w holds the species index (0, 1, ... as a float).
 *
 * This header is the one source of the pair, wall and species arithmetic:
 * the plugin's C file (CPU loops) and its .cu file (the device ABI of
 * metro/device.h) both include it, so both backends evaluate the same float
 * expressions.  The energies are float; callers sum them in double.
 */
#ifndef COULOMB_HS_H
#define COULOMB_HS_H

#include "metro/hd.h"

#ifndef METRO_MAX_SPECIES
#define METRO_MAX_SPECIES 8
#endif

/* The parameter block the device functions read (metro_potential_params).
 * sp[s] = (z_s, d_s / 2, λ_B z_s, (R_cell - d_s/2)^2): a partner's charge
 * and radius are adjacent, one 8-byte constant load. */
typedef struct coulomb_hs_params {
    metro_float4 sp[METRO_MAX_SPECIES];
    int nspecies;
    float bjerrum;      /* λ_B, Å */
    float cell_radius;  /* R_cell, Å */
    float pad;
} coulomb_hs_params;

/* Species index of a particle: w is a small non-negative integer stored as
 * a float.  16 w + 2^23 holds 16 w in its low mantissa bits, so the table
 * offset is one multiply-add and one logic op instead of a float-to-int
 * conversion (a slow-path instruction on the GPU).  Masked so a bad w
 * cannot index out of the table.  Returns the index in
 * [0, METRO_MAX_SPECIES). */
METRO_HD int coulomb_hs_species(float w)
{
    float f = w * 16.0f + 8388608.0f;
#ifdef __CUDA_ARCH__
    int bits = __float_as_int(f);
#else
    union { float f; int i; } u;
    u.f = f;
    int bits = u.i;
#endif
    return (bits & (16 * METRO_MAX_SPECIES - 16)) >> 4;
}

/* 1/sqrt(r2): one MUFU instruction on the GPU (with -ftz=true), the
 * correctly rounded quotient on the CPU. */
METRO_HD float coulomb_hs_rsqrt(float r2)
{
#ifdef __CUDA_ARCH__
    return rsqrtf(r2);
#else
    return 1.0f / sqrtf(r2);
#endif
}

/* Pair energy of a and b in k_T: λ_B z_a z_b / r, +INFINITY when the hard
 * cores overlap.  a's table row is loop-invariant in the samplers' partner
 * loops (hoisted), b's is the broadcast partner's.
 *
 * The overlap selects the prefactor (+INFINITY times 1/r > 0 is +INFINITY),
 * not the product: the value is the same float as selecting the product
 * (λ z_a z_b · rsqrt on both paths, +INFINITY on overlap, NaN stays NaN),
 * but the energy is a plain product again, so a caller's difference
 * E(t, b) - E(o, b) contracts to one FMUL and one FFMA on the GPU instead
 * of two FMULs and an FADD (one instruction less per pair-delta). */
METRO_HD float coulomb_hs_pair(const coulomb_hs_params *p, metro_float4 a, metro_float4 b)
{
    metro_float4 sa = p->sp[coulomb_hs_species(a.w)];
    metro_float4 sb = p->sp[coulomb_hs_species(b.w)];
    float r2 = metro_dist2(a, b);
    float dmin = sa.y + sb.y;
    float c = r2 < dmin * dmin ? INFINITY : sa.z * sb.x;
    return c * coulomb_hs_rsqrt(r2);
}

/* The device ABI's pair-delta (metro/device.h metro_pair_delta): the
 * change of the pair energy of a when it moves from o to t, against a
 * partner b, for an allowed old position (o does not overlap b).  One
 * species lookup for b, one prefactor c = λ z_a z_b, two rsqrt, one overlap
 * test (the trial's):
 *
 *     c_t = r_t^2 < d_ab^2 ? +INFINITY : c;    delta = c_t / r_t - c / r_o
 *
 * rounded exactly as the difference of two coulomb_hs_pair values was on
 * the device, where nvcc contracted E(t, b) - E(o, b) to
 * fma(c_t, 1/r_t, -(c_o / r_o)) (the brush kernels' SASS: FMUL + FFMA):
 * the product and the fused multiply-add are written out, so no other
 * contraction can be chosen.  c_o = c because o is allowed, so the result
 * is, bit for bit, what the samplers computed from metro_pair_energy
 * before; an overlapping o (never a term a sampler uses: the configuration
 * is always allowed) would give a finite value here where the difference
 * of the energies gives -inf or NaN.  On the host: the same expression
 * with fmaf (not used by the CPU loops, whose delta() sums
 * (double)E(t, b) - (double)E(o, b)). */
METRO_HD float coulomb_hs_pair_delta(const coulomb_hs_params *p, metro_float4 t, metro_float4 o, metro_float4 b)
{
    metro_float4 sa = p->sp[coulomb_hs_species(o.w)];
    metro_float4 sb = p->sp[coulomb_hs_species(b.w)];
    float rt2 = metro_dist2(t, b), ro2 = metro_dist2(o, b);
    float dmin = sa.y + sb.y;
    float rt = coulomb_hs_rsqrt(rt2), ro = coulomb_hs_rsqrt(ro2);
#ifdef __CUDA_ARCH__
    float c = __fmul_rn(sa.z, sb.x);
    float ct = rt2 < dmin * dmin ? INFINITY : c;
    return __fmaf_rn(ct, rt, -__fmul_rn(c, ro));
#else
    float c = sa.z * sb.x;
    float ct = rt2 < dmin * dmin ? INFINITY : c;
    return fmaf(ct, rt, -(c * ro));
#endif
}

/* A run of pair-deltas (metro/device.h metro_pair_delta_begin/add/end):
 *
 *     v[0] = Σ_b z_b (1/r_t - 1/r_o)    flag: the trial overlaps some b
 *     result = flag ? +INFINITY : λ_B z_a v[0]
 *
 * λ z_a leaves the sum and the overlap is one predicate per partner, so a
 * pair-delta is the two distances, two rsqrt, the hard-core test and one
 * FADD + FFMA (against FMUL + FMUL + FFMA + FADD + FSEL for the sum of
 * coulomb_hs_pair_delta).  Rounding differs from that sum (still float
 * over the run, double across runs). */
METRO_HD metro_pd_sum coulomb_hs_sum_begin(const coulomb_hs_params *p, metro_float4 t, metro_float4 o)
{
    metro_float4 sa = p->sp[coulomb_hs_species(o.w)];
    metro_pd_sum s;
    s.t = t;
    s.o = o;
    s.v[0] = 0.0f;
    s.v[1] = sa.y; /* d_a / 2 */
    s.v[2] = sa.z; /* λ z_a */
    s.v[3] = 0.0f;
    s.flag = 0;
    return s;
}

METRO_HD void coulomb_hs_sum_add(const coulomb_hs_params *p, metro_pd_sum *s, metro_float4 b)
{
    metro_float4 sb = p->sp[coulomb_hs_species(b.w)];
    float rt2 = metro_dist2(s->t, b), ro2 = metro_dist2(s->o, b);
    float dmin = s->v[1] + sb.y;
    s->flag = s->flag | (rt2 < dmin * dmin);
    s->v[0] = fmaf(sb.x, coulomb_hs_rsqrt(rt2) - coulomb_hs_rsqrt(ro2), s->v[0]);
}

METRO_HD float coulomb_hs_sum_end(const metro_pd_sum *s)
{
    return s->flag ? INFINITY : s->v[2] * s->v[0];
}

/* Wall energy of a: 0 while |r| <= R_cell - d/2, +INFINITY outside.  The
 * squared radius is rounded the same way on both backends (no fused
 * multiply-add on the device), so a centre right at the wall is inside or
 * outside alike on the CPU and the GPU. */
METRO_HD float coulomb_hs_external(const coulomb_hs_params *p, metro_float4 a)
{
    metro_float4 s = p->sp[coulomb_hs_species(a.w)];
#ifdef __CUDA_ARCH__
    float r2 = __fadd_rn(__fadd_rn(__fmul_rn(a.x, a.x), __fmul_rn(a.y, a.y)), __fmul_rn(a.z, a.z));
#else
    float r2 = a.x * a.x + a.y * a.y + a.z * a.z;
#endif
    return r2 > s.w ? INFINITY : 0.0f;
}

/* Bjerrum length in Å of water-like solvent at temperature T (K) and
 * relative permittivity eps_r: e^2 / (4 pi eps0 eps_r k_B T), SI 2019
 * constants (e, k_B exact; eps0 CODATA 2018). */
METRO_HD double coulomb_hs_bjerrum(double temperature, double eps_r)
{
    const double e = 1.602176634e-19, kB = 1.380649e-23, eps0 = 8.8541878128e-12;
    const double pi = 3.14159265358979323846;
    return e * e / (4.0 * pi * eps0 * eps_r * kB * temperature) * 1e10;
}

#endif
