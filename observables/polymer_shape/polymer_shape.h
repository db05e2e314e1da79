/* polymer_shape.h — the shape of one chain (PHYSICS.md §1 "Observables",
 * seed 000 Eq. 8), and of every chain of a system's topology, shared by
 * the observable and its tests.
 *
 *   r_gyr^2 = (1/N) sum_k |r_k - r_mean|^2,  r_mean = (1/N) sum_k r_k
 *   R_ee^2  = |r_{N-1} - r_0|^2
 *
 * Two passes in double (the mean first), so a chain far from the origin
 * loses nothing to cancellation.
 */
#ifndef METRO_POLYMER_SHAPE_H
#define METRO_POLYMER_SHAPE_H

#include "metro/hd.h"

/* Double sums rounded alike on both backends: no fused multiply-add (nvcc
 * would contract a * b + c on the device, the host compiler does not). */
METRO_HD double metro__ps_add(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

METRO_HD double metro__ps_sq3(double x, double y, double z)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(__dadd_rn(__dmul_rn(x, x), __dmul_rn(y, y)), __dmul_rn(z, z));
#else
    return x * x + y * y + z * z;
#endif
}

/* The summation order of the device kernel (polymer_shape.cu, one warp per
 * chain): lane l sums terms l, l + 32, l + 64, ... in turn, then the
 * lanes' sums meet in a butterfly (step 16, 8, 4, 2, 1: lane l adds lane
 * l ^ step).  The host follows it, so both backends measure the same bits
 * and a run whose measurements move between them (parallel tempering over
 * MPI ranks measures on the host) writes what one process writes. */
#define METRO_PS_LANES 32

METRO_HD double metro__ps_butterfly(double *w)
{
    for (int o = METRO_PS_LANES / 2; o > 0; o >>= 1) {
        double u[METRO_PS_LANES];
        for (int l = 0; l < METRO_PS_LANES; ++l) u[l] = metro__ps_add(w[l], w[l ^ o]);
        for (int l = 0; l < METRO_PS_LANES; ++l) w[l] = u[l];
    }
    return w[0];
}

/* Shape of p[0..n-1] (n >= 1): sets *rg2 and *ree2 (host; the device
 * kernel computes the same in its lanes). */
METRO_HD void metro_polymer_shape(const metro_float4 *p, int n, double *rg2, double *ree2)
{
    double wx[METRO_PS_LANES], wy[METRO_PS_LANES], wz[METRO_PS_LANES];
    for (int l = 0; l < METRO_PS_LANES; ++l) {
        wx[l] = wy[l] = wz[l] = 0;
        for (int k = l; k < n; k += METRO_PS_LANES) {
            wx[l] = metro__ps_add(wx[l], (double)p[k].x);
            wy[l] = metro__ps_add(wy[l], (double)p[k].y);
            wz[l] = metro__ps_add(wz[l], (double)p[k].z);
        }
    }
    const double mx = metro__ps_butterfly(wx) / n, my = metro__ps_butterfly(wy) / n,
                 mz = metro__ps_butterfly(wz) / n;
    for (int l = 0; l < METRO_PS_LANES; ++l) {
        wx[l] = 0;
        for (int k = l; k < n; k += METRO_PS_LANES)
            wx[l] = metro__ps_add(wx[l], metro__ps_sq3(p[k].x - mx, p[k].y - my, p[k].z - mz));
    }
    *rg2 = metro__ps_butterfly(wx) / n;
    *ree2 = metro__ps_sq3((double)p[n - 1].x - p[0].x, (double)p[n - 1].y - p[0].y, (double)p[n - 1].z - p[0].z);
}

/* The chains of a topology (docs/COMPOSITION.md): chain c is
 * p[first[c] .. first[c] + length[c] - 1] (length[c] >= 1).  Each chain's
 * shape goes into rg2[c] and ree2[c] (when those are not NULL), and the
 * means over the chains into *rg2_mean and *ree2_mean, summed in chain
 * order and divided by the number of chains: with one chain the mean is
 * that chain's value exactly, so a lone chain measures as before.  The
 * device kernel (polymer_shape.cu) takes the means in the same order. */
METRO_HD void metro_polymer_shape_chains(const metro_float4 *p, int chains, const int *first, const int *length,
                                         double *rg2, double *ree2, double *rg2_mean, double *ree2_mean)
{
    double sa = 0, sb = 0;
    int c;
    for (c = 0; c < chains; ++c) {
        double a, b;
        metro_polymer_shape(p + first[c], length[c], &a, &b);
        if (rg2) rg2[c] = a;
        if (ree2) ree2[c] = b;
        sa += a;
        sb += b;
    }
    *rg2_mean = sa / chains;
    *ree2_mean = sb / chains;
}

#endif
