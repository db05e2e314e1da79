/* metropolis.h — what the metropolis sampler's CPU loop (metropolis.c) and
 * its CUDA kernels (metropolis.cu) share: the layout of the random numbers
 * a sweep consumes, and the construction of a trial move.  Both backends
 * draw the same uniforms (host->uniform) and read them through these
 * functions, so they follow the same Markov chain.
 *
 * Random numbers.  A sweep is n trials; trial t of sweep s reads the
 * METRO_METROPOLIS_NU(order) uniforms starting at ((s * n) + t) * nu of the
 * sweep chunk's buffer:
 *   order = sequential (nu = 4): particle t;        u[0..2] dx, dy, dz; u[3] accept
 *   order = random     (nu = 5): particle pick(u[0]); u[1..3] dx, dy, dz; u[4] accept
 * with pick(u) = min(n - 1, (int)(u * n)) (u in (0, 1]).
 *
 * Move.  Each coordinate of the trial is x + step * (2u - 1): uniform in
 * the cube of half-width `step` around the old position (seed 000 §3.2's
 * [-delta, delta]).  The attribute w is kept.
 */
#ifndef METRO_METROPOLIS_H
#define METRO_METROPOLIS_H

#include "metro/hd.h"

#define METRO_METROPOLIS_NU(random_order) ((random_order) ? 5 : 4)

/* Particle chosen by uniform u in (0, 1] among n (u = 1 gives n - 1). */
METRO_HD int metro_metropolis_pick(float u, int n)
{
    int i = (int)(u * (float)n);
    return i < n - 1 ? i : n - 1;
}

/* One trial coordinate x + step * (2u - 1).  On the device the operations
 * are the round-to-nearest intrinsics, which nvcc never contracts into an
 * FMA, so both backends round alike and the trajectories stay equal. */
METRO_HD float metro_metropolis_coord(float x, float step, float u)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(x, __fmul_rn(step, __fsub_rn(__fmul_rn(2.0f, u), 1.0f)));
#else
    return x + step * (2.0f * u - 1.0f);
#endif
}

/* The trial move of trial t (of n per sweep) whose uniforms start at q:
 * sets *i to the particle and returns its trial position; pos holds the
 * current positions. */
METRO_HD metro_float4 metro_metropolis_trial(const float *q, int t, int n, int random_order,
                                             float step, const metro_float4 *pos, int *i)
{
    int k = random_order ? metro_metropolis_pick(q[0], n) : t;
    const float *d = q + (random_order ? 1 : 0);
    metro_float4 p = pos[k];
    *i = k;
    return metro_f4(metro_metropolis_coord(p.x, step, d[0]), metro_metropolis_coord(p.y, step, d[1]),
                    metro_metropolis_coord(p.z, step, d[2]), p.w);
}

/* The acceptance uniform of the trial whose uniforms start at q. */
METRO_HD float metro_metropolis_accept_u(const float *q, int random_order)
{
    return q[random_order ? 4 : 3];
}

#endif
