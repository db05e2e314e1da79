/* coulomb_hs.cu — the term functions of metro/device.h for coulomb_hs.  The
 * math is coulomb_hs.h, shared with the CPU loops; P is the
 * coulomb_hs_params that device_params() handed the core. */
#include "metro/device.h"

#include "coulomb_hs.h"

#define CHS(P) ((const coulomb_hs_params *)(P))

extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b)
{
    return coulomb_hs_pair(CHS(P), a, b);
}

extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a)
{
    return coulomb_hs_external(CHS(P), a);
}

/* The fast form of pair_energy(trial, b) - pair_energy(old, b)
 * (coulomb_hs.h): the same float for an allowed old position. */
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b)
{
    return coulomb_hs_pair_delta(CHS(P), trial, old, b);
}

/* Runs of pair-deltas with λ z_a outside the sum and one overlap flag:
 * Σ_b z_b (1/r_t - 1/r_o), times λ z_a at the end (coulomb_hs.h). */
extern "C" __device__ metro_pd_sum METRO_TERM(pair_delta_begin)(const void *P, float4 trial, float4 old)
{
    return coulomb_hs_sum_begin(CHS(P), trial, old);
}

extern "C" __device__ void METRO_TERM(pair_delta_add)(const void *P, metro_pd_sum *s, float4 b)
{
    coulomb_hs_sum_add(CHS(P), s, b);
}

extern "C" __device__ float METRO_TERM(pair_delta_end)(const void *P, const metro_pd_sum *s)
{
    return coulomb_hs_sum_end(s);
}
