/* metropolis.cu — the CUDA kernels of the metropolis sampler (one replica).
 *
 * Two schemes follow the CPU reference's chain exactly (same uniforms, same
 * trial construction from metropolis.h, same metro_accept):
 *
 *  metropolis_block: one block advances whole sweeps in one launch.  For
 *    each trial, thread 0 builds the move; the threads split the partners j
 *    and sum their pair-term changes in double; a warp-shuffle then shared-
 *    memory reduction gives dE; thread 0 decides and updates position,
 *    energy and counters.  Positions live in shared memory when they fit.
 *
 *  metropolis_partial + metropolis_decide: the conventional scheme (seed 002
 *    §4), one trial at a time: a multi-block kernel sums the n - 1 pair
 *    terms into one partial per block, then a one-warp kernel adds the
 *    partials in a fixed order, decides and updates.  Two launches per trial.
 *
 * Energies are float per pair (the device ABI), differences and sums in
 * double.  Block sizes are multiples of 32 (the host launches them so).
 */
#include "metro/device.h"

#include "metropolis.h"

#define FULL_MASK 0xffffffffu

static __device__ __forceinline__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(FULL_MASK, v, off);
    return v;
}

/* Change of the pair terms of particle i moved from old to trial, summed
 * over partners j = first, first + stride, ... < n. */
static __device__ __forceinline__ double pair_delta(const float4 *P, int n, int i, float4 old,
                                                    float4 trial, int first, int stride, int chain)
{
    double d = 0.0;
    for (int j = first; j < n; j += stride) {
        if (j == i) continue;
        float4 pj = P[j];
        d += (double)metro_interaction(trial, pj, i, j, chain) -
             (double)metro_interaction(old, pj, i, j, chain);
    }
    return d;
}

/* counters[0] = attempted, counters[1] = accepted (replica 0), counters[2]
 * = 1 + the particle of the first move whose energy change was NaN (0:
 * none).  metro_accept rejects NaN as it rejects an overlap, so a
 * potential's bug would bias the chain without a word; the host stops the
 * run at its next look at the counters, naming the particle, as the CPU
 * path stops at the move. */
extern "C" __global__ void metropolis_block(float4 *pos, double *energy, long long *counters,
                                            const float *u, int n, long sweeps, int random_order,
                                            float step, double beta, int chain, int use_smem)
{
    extern __shared__ float4 s_pos[];
    __shared__ double s_part[32];
    __shared__ int s_i;
    __shared__ float4 s_trial;

    const int tid = threadIdx.x, nt = blockDim.x, nwarps = nt >> 5;
    const int nu = METRO_METROPOLIS_NU(random_order);
    float4 *P = use_smem ? s_pos : pos;

    if (use_smem)
        for (int j = tid; j < n; j += nt) s_pos[j] = pos[j];
    double E = tid == 0 ? energy[0] : 0.0;
    long long acc = 0, nan_i = 0;
    __syncthreads();

    for (long s = 0; s < sweeps; s++)
        for (int t = 0; t < n; t++) {
            const float *q = u + ((size_t)s * (size_t)n + (size_t)t) * (size_t)nu;
            if (tid == 0) {
                int i;
                s_trial = metro_metropolis_trial(q, t, n, random_order, step, P, &i);
                s_i = i;
            }
            /* (A) the move, and the previous trial's update of P, are seen
             * by all; nobody still reads s_part of the previous trial */
            __syncthreads();
            const int i = s_i;
            const float4 trial = s_trial, old = P[i];
            double part = warp_sum(pair_delta(P, n, i, old, trial, tid, nt, chain));
            if ((tid & 31) == 0) s_part[tid >> 5] = part;
            /* (B) partials are complete; every thread has read P, s_i and
             * s_trial of this trial, so thread 0 may overwrite them */
            __syncthreads();
            if (tid == 0) {
                double dE = (double)metro_external_energy(trial) - (double)metro_external_energy(old);
                for (int w = 0; w < nwarps; w++) dE += s_part[w];
                if (dE != dE && !nan_i) nan_i = i + 1;
                if (metro_accept(beta * dE, metro_metropolis_accept_u(q, random_order))) {
                    P[i] = trial;
                    E += dE;
                    acc++;
                }
            }
        }

    /* thread 0's last update of P is seen before the copy back */
    __syncthreads();
    if (tid == 0) {
        energy[0] = E;
        counters[0] += (long long)sweeps * n;
        counters[1] += acc;
        if (nan_i && !counters[2]) counters[2] = nan_i;
    }
    if (use_smem)
        for (int j = tid; j < n; j += nt) pos[j] = s_pos[j];
}

/* Conventional scheme, step 1: partial[blockIdx.x] = the block's share of
 * the pair-term change of trial t (uniforms at q). */
extern "C" __global__ void metropolis_partial(const float4 *pos, const float *q, int t, int n,
                                              int random_order, float step, int chain,
                                              double *partial)
{
    __shared__ double s_part[32];
    const int tid = threadIdx.x;
    int i;
    /* every thread builds the same move from the same uniforms */
    const float4 trial = metro_metropolis_trial(q, t, n, random_order, step, pos, &i);
    const float4 old = pos[i];
    double part = warp_sum(pair_delta(pos, n, i, old, trial, blockIdx.x * blockDim.x + tid,
                                      gridDim.x * blockDim.x, chain));
    if ((tid & 31) == 0) s_part[tid >> 5] = part;
    __syncthreads();
    if (tid == 0) {
        double d = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) d += s_part[w];
        partial[blockIdx.x] = d;
    }
}

/* Conventional scheme, step 2 (one warp): dE = sum of the nparts partials
 * (lane-strided, then a fixed shuffle tree: deterministic), decide, update
 * position, energy and counters. */
extern "C" __global__ void metropolis_decide(float4 *pos, double *energy, long long *counters,
                                             const float *q, int t, int n, int random_order,
                                             float step, double beta, const double *partial,
                                             int nparts)
{
    const int lane = threadIdx.x;
    double d = 0.0;
    for (int b = lane; b < nparts; b += 32) d += partial[b];
    d = warp_sum(d);
    if (lane == 0) {
        int i;
        const float4 trial = metro_metropolis_trial(q, t, n, random_order, step, pos, &i);
        const float4 old = pos[i];
        double dE = d + ((double)metro_external_energy(trial) - (double)metro_external_energy(old));
        counters[0] += 1;
        if (dE != dE && !counters[2]) counters[2] = i + 1;
        if (metro_accept(beta * dE, metro_metropolis_accept_u(q, random_order))) {
            pos[i] = trial;
            energy[0] += dE;
            counters[1] += 1;
        }
    }
}
