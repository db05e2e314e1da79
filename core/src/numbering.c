/* core/src/numbering.c — numbering particles along a space-filling curve.
 *
 * The samplers move the particles in index order, once each per cycle.
 * With the placement's numbering, particle i+1 lies anywhere in the cell,
 * so a sampler that keeps a spatial tree (hierarchical) reads a new path of
 * cells and a new near field for every move: at 2^23 ions the fine
 * levels' moments come from DRAM on every move.  Numbered along a Z-order
 * (Morton) curve, which is the order of an octree's leaves, consecutive
 * moves touch the same cells.  Which numbering a run starts from does not
 * change what it samples: particles of one species are indistinguishable,
 * and the numbering is fixed once, before the first move (an order chosen
 * again from the configuration during the run could break balance; this
 * one is only the choice of the initial state's labels). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metro/metro.h"

typedef struct keyed {
    uint64_t key;
    int index;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index); /* a total order: the same on every platform */
}

int metro_number_by_space(metro_float4 *pos, int n)
{
    if (n < 2) return 0;
    keyed *k = malloc((size_t)n * sizeof *k);
    metro_float4 *tmp = malloc((size_t)n * sizeof *tmp);
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return -1;
    }
    /* one cube around all of them (an octree's cells are cubes) */
    double lo[3] = {pos[0].x, pos[0].y, pos[0].z}, hi[3] = {pos[0].x, pos[0].y, pos[0].z};
    for (int i = 1; i < n; ++i) {
        const double p[3] = {pos[i].x, pos[i].y, pos[i].z};
        for (int a = 0; a < 3; ++a) {
            if (p[a] < lo[a]) lo[a] = p[a];
            if (p[a] > hi[a]) hi[a] = p[a];
        }
    }
    double side = 0.0;
    for (int a = 0; a < 3; ++a)
        if (hi[a] - lo[a] > side) side = hi[a] - lo[a];
    const double scale = side > 0.0 ? 2097151.0 / side : 0.0;
    for (int i = 0; i < n; ++i) {
        const double p[3] = {pos[i].x, pos[i].y, pos[i].z};
        uint64_t c[3];
        for (int a = 0; a < 3; ++a) {
            double v = (p[a] - lo[a]) * scale;
            c[a] = v <= 0.0 ? 0 : v >= 2097151.0 ? 2097151 : (uint64_t)v;
        }
        k[i].key = metro_morton_spread(c[0]) << 2 | metro_morton_spread(c[1]) << 1 | metro_morton_spread(c[2]);
        k[i].index = i;
    }
    qsort(k, (size_t)n, sizeof *k, by_key);
    for (int i = 0; i < n; ++i) tmp[i] = pos[k[i].index];
    memcpy(pos, tmp, (size_t)n * sizeof *pos);
    free(k);
    free(tmp);
    return 0;
}
