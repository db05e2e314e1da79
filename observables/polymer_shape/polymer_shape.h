/* polymer_shape.h — the shape of one chain (PHYSICS.md §1 "Observables",
 * seed 000 Eq. 8), shared by the observable and its tests.
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

#endif
