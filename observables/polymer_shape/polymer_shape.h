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

/* Shape of p[0..n-1] (n >= 1): sets *rg2 and *ree2. */
METRO_HD void metro_polymer_shape(const metro_float4 *p, int n, double *rg2, double *ree2)
{
    double mx = 0, my = 0, mz = 0, s = 0;
    int k;
    for (k = 0; k < n; ++k) {
        mx += p[k].x;
        my += p[k].y;
        mz += p[k].z;
    }
    mx /= n;
    my /= n;
    mz /= n;
    for (k = 0; k < n; ++k) {
        double dx = p[k].x - mx, dy = p[k].y - my, dz = p[k].z - mz;
        s += dx * dx + dy * dy + dz * dz;
    }
    *rg2 = s / n;
    {
        double dx = (double)p[n - 1].x - p[0].x, dy = (double)p[n - 1].y - p[0].y,
               dz = (double)p[n - 1].z - p[0].z;
        *ree2 = dx * dx + dy * dy + dz * dz;
    }
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
