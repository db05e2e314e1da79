/* pair_correlation.h — the pair-distance math shared by the CPU loops
 * (pc_accum.c) and the GPU kernel (pair_correlation.cu).
 *
 * Both backends must put every pair in the same bin and sum the potential
 * at a central ion in the same order, so that a test can demand identical
 * histograms.  nvcc contracts a*b+c into an FMA and gcc may too, so the
 * device side spells every operation as an IEEE-rounded intrinsic and the
 * host side is compiled with -ffp-contract=off (see CMakeLists.txt).
 * sqrtf and the division are correctly rounded on both (nvcc's default
 * -prec-sqrt/-prec-div hold because metro never builds with fast math).
 */
#ifndef METRO_PAIR_CORRELATION_H
#define METRO_PAIR_CORRELATION_H

#include "metro/hd.h"
#include "metro/plugin.h"

/* Partners are read in tiles of this many particles; the potential at a
 * central ion is summed in float over one tile, then in double.  The GPU
 * kernel runs with blocks of exactly PC_TILE threads. */
#define PC_TILE 256

/* What one histogram pass needs (a kernel argument, passed by value). */
typedef struct pc_launch {
    int n;                          /* particles of the replica */
    int n_central;                  /* entries of the central-ion list */
    int species;                    /* S: pairs (a, b) make S*S histograms */
    int bins;
    int psi;                        /* 1: also sum z_j / r_ij at each central ion */
    float rmax2;                    /* (bins * dr)^2: pairs at r^2 >= rmax2 are not binned */
    float inv_dr;
    float z[METRO_MAX_SPECIES];     /* valences by species index */
} pc_launch;

#ifdef __CUDACC__
#define PC_MUL(a, b) __fmul_rn((a), (b))
#define PC_ADD(a, b) __fadd_rn((a), (b))
#define PC_SUB(a, b) __fsub_rn((a), (b))
#define PC_SQRT(a) __fsqrt_rn(a)
#define PC_DIV(a, b) __fdiv_rn((a), (b))
#else
#define PC_MUL(a, b) ((a) * (b))
#define PC_ADD(a, b) ((a) + (b))
#define PC_SUB(a, b) ((a) - (b))
#define PC_SQRT(a) sqrtf(a)
#define PC_DIV(a, b) ((a) / (b))
#endif

/* Squared distance, rounded identically on both backends. */
METRO_HD float pc_dist2(metro_float4 a, metro_float4 b)
{
    float dx = PC_SUB(a.x, b.x), dy = PC_SUB(a.y, b.y), dz = PC_SUB(a.z, b.z);
    return PC_ADD(PC_ADD(PC_MUL(dx, dx), PC_MUL(dy, dy)), PC_MUL(dz, dz));
}

/* Bin of a pair at squared distance r2: floor(r / dr), or -1 when the pair
 * lies at or beyond r_max (rmax2 = r_max², or r2 is NaN).  Scalars, not the
 * pc_launch, so the kernel keeps them in registers. */
METRO_HD int pc_bin(float r2, float rmax2, float inv_dr, int bins)
{
    if (!(r2 < rmax2)) return -1;
    int k = (int)PC_MUL(PC_SQRT(r2), inv_dr);
    return k < bins ? k : bins - 1; /* r just below r_max may round up */
}

/* 1/r for the potential sum; 0 for coinciding points (uncharged ideal gas:
 * the term is multiplied by a zero valence and must not become NaN). */
METRO_HD float pc_inv_r(float r2)
{
    return r2 > 0.0f ? PC_DIV(1.0f, PC_SQRT(r2)) : 0.0f;
}

/* The partners of a central ion in cell ci of a cell list (pc_accum.h):
 * the 3 x 3 columns of cells around it, each three cells along z being
 * contiguous in cell order, as ranges [q0[k], q1[k]) of its positions.
 * Returns the number of columns (at most 9; fewer at the grid's faces). */
METRO_HD int pc_columns(int ci, int m0, int m1, int m2, const int *start, int *q0, int *q1)
{
    const int cz = ci % m2, cy = ci / m2 % m1, cx = ci / m2 / m1;
    const int z0 = cz > 0 ? cz - 1 : 0, z1 = cz + 1 < m2 ? cz + 1 : m2 - 1;
    int k = 0;
    for (int x = cx - 1; x <= cx + 1; x++)
        for (int y = cy - 1; y <= cy + 1; y++) {
            if (x < 0 || y < 0 || x >= m0 || y >= m1) continue;
            const int base = (x * m1 + y) * m2;
            q0[k] = start[base + z0];
            q1[k++] = start[base + z1 + 1];
        }
    return k;
}

/* Species index stored in w, clamped into [0, S-1]. */
METRO_HD int pc_species(float w, int S)
{
    int s = (int)w;
    return s < 0 ? 0 : (s >= S ? S - 1 : s);
}

#endif
