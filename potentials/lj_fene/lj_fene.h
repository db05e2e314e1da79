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

/* Truncated and shifted LJ at squared distance r2; +inf when r2 is so
 * small (r < 1e-3 s) that the float would overflow, 0 beyond r_c. */
METRO_HD float metro_lj_fene_lj(const metro_lj_fene_params *p, float r2)
{
    if (!(r2 > p->core2)) return INFINITY;
    if (r2 >= p->rc2) return 0.0f;
    float s2 = p->sigma2 / r2;
    float s6 = s2 * s2 * s2;
    return p->eps4 * (s6 * s6 - s6) - p->shift;
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
