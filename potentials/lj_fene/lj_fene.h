/* lj_fene.h — the math of the elastic flexible homopolymer (PHYSICS.md §1,
 * seed 000 §3.1), shared by the host loops (lj_fene.c) and the device ABI
 * (lj_fene.cu) so the two backends evaluate the same expressions.
 *
 *   E_LJ^mod(r) = E_LJ(min(r, r_c)) - E_LJ(r_c),  E_LJ(r) = 4 eps [(s/r)^12 - (s/r)^6]
 *   E_FENE(r)   = -(K/2) R^2 ln[1 - ((r - r0)/R)^2]   for |r - r0| < R, else +inf
 *   s = 2^(-1/6) r0,  r_c = rc_sigma * s
 *
 * Non-bonded pairs get E_LJ^mod; bonded neighbours (i, i+1) get E_FENE plus,
 * when lj_bonded is set, E_LJ^mod.  Energies are evaluated in float (the
 * device ABI returns float) and summed in double by the callers.
 */
#ifndef METRO_LJ_FENE_H
#define METRO_LJ_FENE_H

#include "metro/hd.h"

/* The parameter block handed to the device (device_params()); all derived
 * quantities precomputed in double on the host, then rounded once. */
typedef struct metro_lj_fene_params {
    float sigma2;     /* s^2 */
    float rc2;        /* r_c^2 */
    float eps4;       /* 4 eps */
    float shift;      /* E_LJ(r_c) */
    float core2;      /* below this r^2 the LJ is +inf (float would overflow) */
    float r0;         /* FENE centre */
    float R;          /* FENE half-width */
    float inv_R;      /* 1 / R */
    float fene_pref;  /* (K/2) R^2 */
    int lj_bonded;    /* 1: bonded neighbours also feel E_LJ^mod */
} metro_lj_fene_params;

/* 1/x rounded to nearest, for x in the normal range below 2^126 (biased
 * exponent 1 ... 252), which is all the LJ needs: r2 in (core2, rc2); for
 * other x the value is unspecified (the LJ discards it by a select).
 * Device: MUFU.RCP and one Newton step with fused multiply-adds, which is
 * exactly the fast path of __frcp_rn (correctly rounded in that range)
 * without its range test, branch and slow-path call.  Host: 1.0f / x, the
 * IEEE round-to-nearest quotient.  So host and device agree bit for bit. */
METRO_HD float metro_lj_fene_rcp(float x)
{
#ifdef __CUDA_ARCH__
    float y;
    /* y0 ~ 1/x; e = x y0 - 1 (exact); y = y0 - y0 e, rounded once */
    asm("{\n\t.reg .f32 y0, e, ny;\n\t"
        "rcp.approx.ftz.f32 y0, %1;\n\t"
        "fma.rn.f32 e, %1, y0, 0fBF800000;\n\t"
        "neg.f32 ny, y0;\n\t"
        "fma.rn.f32 %0, ny, e, y0;\n\t}"
        : "=f"(y) : "f"(x));
    return y;
#else
    return 1.0f / x;
#endif
}

/* Truncated and shifted LJ at squared distance r2; +inf when r2 is so
 * small (r < 1e-3 s) that the float would overflow, 0 beyond r_c.
 * Branch-free: the polynomial is evaluated for every r2 and selects pick
 * the result (values computed outside (core2, rc2), possibly inf or NaN,
 * are discarded), so a warp whose lanes straddle the cutoff does not
 * diverge.  s2 = sigma2 * (1 / r2): two roundings, the same on host and
 * device. */
METRO_HD float metro_lj_fene_lj(const metro_lj_fene_params *p, float r2)
{
    float s2 = p->sigma2 * metro_lj_fene_rcp(r2);
    float s6 = s2 * s2 * s2;
    float e = p->eps4 * (s6 * s6 - s6) - p->shift;
    e = r2 >= p->rc2 ? 0.0f : e;
    return r2 > p->core2 ? e : INFINITY; /* NaN r2 -> +inf, as before */
}

/* FENE bond energy at squared distance r2; +inf outside (r0 - R, r0 + R). */
METRO_HD float metro_lj_fene_fene(const metro_lj_fene_params *p, float r2)
{
    float x = (sqrtf(r2) - p->r0) * p->inv_R;
    float x2 = x * x;
    if (!(x2 < 1.0f)) return INFINITY;
    return -p->fene_pref * log1pf(-x2);
}

/* Whole interaction of two bonded neighbours at squared distance r2. */
METRO_HD float metro_lj_fene_bond(const metro_lj_fene_params *p, float r2)
{
    float e = metro_lj_fene_fene(p, r2);
    if (p->lj_bonded && e < INFINITY) e += metro_lj_fene_lj(p, r2);
    return e;
}

/* The interaction of particles i and j of a chain (bonded when |i-j| = 1):
 * the host-side twin of metro_interaction() in metro/device.h. */
METRO_HD float metro_lj_fene_pair_ij(const metro_lj_fene_params *p, metro_float4 a,
                                     metro_float4 b, int i, int j)
{
    float r2 = metro_dist2(a, b);
    int d = i - j;
    return (d == 1 || d == -1) ? metro_lj_fene_bond(p, r2) : metro_lj_fene_lj(p, r2);
}

#endif
