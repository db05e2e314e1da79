/* brush.h — what the CPU and CUDA backends of the brush sampler share: the
 * layout of the random numbers a cycle consumes, the trial move, and the
 * kernel's launch block.
 *
 * Random numbers.  Cycle c draws 4N uniforms in (0, 1] from the sampler's
 * Philox stream (one host->uniform call per cycle).  Particle i uses
 *     u[4i + 0], u[4i + 1], u[4i + 2]   its displacement (x, y, z)
 *     u[4i + 3]                         its Metropolis decision
 * so on the device the cycle's numbers are one float4 per particle.
 *
 * Move.  The trial of particle i is x_i + (u - 1/2) D on each axis: uniform
 * in the cube of side D (`step`) centred on x_i.  Both backends round it
 * alike (no fused multiply-add), so a trial is the same float on both.
 *
 * Decision.  metro_accept(ΔE, u[4i + 3]) on the CPU; on the GPU a
 * threshold test that provably gives the same answer as metro_accept for
 * the same ΔE, falling back to metro_accept itself near a tie (brush.cu).
 */
#ifndef BRUSH_H
#define BRUSH_H

#include <stddef.h>

#include "metro/hd.h"

#define BRUSH_UNIFORMS_PER_PARTICLE 4

METRO_HD float brush_axis(float x, float u, float step)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(x, __fmul_rn(u - 0.5f, step));
#else
    return x + (u - 0.5f) * step;
#endif
}

/* The trial position of a particle at p with its uniforms u[0..2]; w kept. */
METRO_HD metro_float4 brush_trial(metro_float4 p, float ux, float uy, float uz, float step)
{
    return metro_f4(brush_axis(p.x, ux, step), brush_axis(p.y, uy, step), brush_axis(p.z, uz, step), p.w);
}

/* One cycle's launch (passed by value to the kernels brush_cycle_p{1,2,4}).
 *
 * A launch runs `cycles` cycles as one chain: the grid has cycles x groups
 * blocks of `threads` threads, and a block takes the next ticket from
 * *ticket in the order blocks start: ticket k groups + g is group g of
 * cycle k, whose epoch is epoch + k.  Every (cycle, group) a block waits
 * for has a smaller ticket, so it belongs to a block already running (no
 * deadlock whatever the hardware's block order): group g of cycle k waits
 * for groups < g of cycle k (their new positions) and, for k > 0, groups
 * >= g of cycle k-1 (its old positions are their final ones).  Positions
 * are updated in place and stay right: cycle k's group h overwrites its
 * positions only after every group < h of cycle k is final, and those
 * read h's cycle-(k-1) positions before they were final themselves; and
 * group g of cycle k overwrites after waiting for all later groups of
 * cycle k-1, which were the last to read g's cycle-(k-1) positions.  Group g holds particles [g S, g S + S) with
 * S = group_size = per_thread * threads / eta.  flags[g] reaches `epoch`
 * when group g's new positions are in pos, cflags[c] when those of chunk c
 * (particles [32 c, 32 c + 32)) are, done[g] when its sums are in
 * group_de / group_acc; the epoch grows by one per launch, so the flags
 * never need clearing.  The last group of each cycle sums its cycle's
 * per-group results in a fixed order, writes the acceptances to
 * cycle_acc[slot + k] and, after the previous cycle's sum
 * (energy_done[k - 1]), adds the energy change to *energy, so the energy sees
 * the cycles' sums in order; the last of all re-arms *ticket. */
typedef struct brush_launch {
    metro_float4 *pos;         /* n positions, updated in place */
    const metro_float4 *rnd;   /* cycles x n float4 uniforms */
    unsigned *ticket;          /* group counter, 0 at launch */
    unsigned *flags;           /* groups: positions final */
    unsigned *cflags;          /* groups x S/32: a chunk's positions final */
    unsigned *done;            /* cycles x groups: group_de / group_acc written */
    unsigned *energy_done;     /* cycles: that cycle's energy change added */
    double *group_de;          /* cycles x groups: accepted energy change per group */
    int *group_acc;            /* cycles x groups: acceptances per group */
    double *energy;            /* st->d_energy (replica 0) */
    long long *cycle_acc;      /* per-cycle acceptance counts */
    /* the first move whose energy change was NaN, as (its cycle's flag
     * value << 32) | particle, the least of them (atomicMin); ~0: none */
    unsigned long long *nan;
    int slot;                  /* the first cycle's entry of cycle_acc */
    unsigned epoch;            /* the first cycle's flag value (never 0) */
    int cycles;                /* cycles in this launch */
    int n;                     /* particles */
    int groups;                /* = ceil(n / group_size) = grid size */
    int group_size;            /* S, a multiple of 32 */
    int eta;                   /* threads per particle: 1, 2, ..., 32 */
    int tile;                  /* partners per shared-memory tile, >= S */
    int pre_chunks;            /* chunks whose in-chunk terms are staged in shared memory */
    int chain;                 /* st->chain: bonds between index neighbours */
    float step;                /* D */
    /* NULL, or (METRO_BRUSH_TRACE) BRUSH_TRACE_SLOTS per group: %globaltimer
     * at start, phase 1 done, flag g-1 seen, base ready, flag g released
     * (0..4), then clock64 at the same points (5..9), then the SM (10) */
    unsigned long long *trace;
} brush_launch;

#define BRUSH_TRACE_SLOTS 16

/* Warps that share a decision round's first step (brush.cu, D) */
#define BRUSH_XWARPS 8

/* Bytes of dynamic shared memory a block of `threads` needs for groups of
 * S particles, tiles of `tile` partners and `pre` staged chunks; the kernel
 * lays its arrays out in this order. */
METRO_HD size_t brush_smem_bytes(int threads, int S, int tile, int pre)
{
    size_t w = (size_t)threads / 32;
    return 16 * ((size_t)tile + 2 * (size_t)S)                    /* tile, Y, Z */
         + 8 * (2 * (size_t)S + w)                                /* base, NL, wde */
         + 4 * (2 * (size_t)S + (size_t)pre * 1024 + w)          /* U, ovl, dl, wacc */
         + 4 * (2 * BRUSH_XWARPS * 32 + (pre < S / 32 ? 1024 : 0)); /* xpart, omp, djit */
}

#endif
