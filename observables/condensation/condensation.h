/* condensation.h — which free particles lie near a chain, shared by the
 * condensation observable and its tests.
 *
 * A free particle (one in no chain of the topology: a counterion, a salt
 * ion) is condensed when its centre lies within `distance` of the centre
 * of any chain particle (any monomer of any chain):
 *   min_m |r_i - r_m| <= distance.
 * Distances are taken in double from the float coordinates, so the
 * decision at the boundary does not depend on the order of the sums.
 */
#ifndef METRO_CONDENSATION_H
#define METRO_CONDENSATION_H

#include "metro/plugin.h"

/* 1 when p[i] lies within sqrt(d2) of a particle of one of the chains
 * (chain c: p[first[c] .. first[c] + length[c] - 1]), else 0. */
static inline int metro_condensed(const metro_float4 *p, int i, int chains, const int *first, const int *length,
                                  double d2)
{
    const double x = p[i].x, y = p[i].y, z = p[i].z;
    for (int c = 0; c < chains; ++c)
        for (int m = first[c]; m < first[c] + length[c]; ++m) {
            double dx = p[m].x - x, dy = p[m].y - y, dz = p[m].z - z;
            if (dx * dx + dy * dy + dz * dz <= d2) return 1;
        }
    return 0;
}

/* One configuration p: for each of the nfree free particles free_idx[k],
 * total[s] and near[s] (s = its species, the w of p, clamped to
 * 0 .. nspecies - 1) count it and, when condensed, count it as near.
 * total[] and near[] (nspecies each) are added to, not cleared. */
static inline void metro_condensation_count(const metro_float4 *p, const int *free_idx, int nfree, int chains,
                                            const int *first, const int *length, double distance, int nspecies,
                                            long *total, long *near)
{
    const double d2 = distance * distance;
    for (int k = 0; k < nfree; ++k) {
        int i = free_idx[k], s = (int)p[i].w;
        if (s < 0) s = 0;
        if (s >= nspecies) s = nspecies - 1;
        total[s]++;
        near[s] += metro_condensed(p, i, chains, first, length, d2);
    }
}

#endif
