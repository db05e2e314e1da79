/* coulomb_hs.cu — the device ABI of metro/device.h for coulomb_hs.  The math
 * is coulomb_hs.h, shared with the CPU loops; the parameter block is the
 * coulomb_hs_params that device_params() hands the core. */
#include "metro/device.h"

#include "coulomb_hs.h"

static __device__ __forceinline__ const coulomb_hs_params *coulomb_hs_p(void)
{
    return (const coulomb_hs_params *)metro_potential_params;
}

extern "C" __device__ float metro_pair_energy(float4 a, float4 b)
{
    return coulomb_hs_pair(coulomb_hs_p(), a, b);
}

/* No bonds: a "bonded" pair interacts like any other. */
extern "C" __device__ float metro_bond_energy(float4 a, float4 b)
{
    return coulomb_hs_pair(coulomb_hs_p(), a, b);
}

extern "C" __device__ float metro_external_energy(float4 a)
{
    return coulomb_hs_external(coulomb_hs_p(), a);
}

/* The fast form of metro_pair_energy(trial, b) - metro_pair_energy(old, b)
 * (coulomb_hs.h): the same float for an allowed old position. */
extern "C" __device__ float metro_pair_delta(float4 trial, float4 old, float4 b)
{
    return coulomb_hs_pair_delta(coulomb_hs_p(), trial, old, b);
}

/* Runs of pair-deltas with λ z_a outside the sum and one overlap flag:
 * Σ_b z_b (1/r_t - 1/r_o), times λ z_a at the end (coulomb_hs.h). */
extern "C" __device__ metro_pd_sum metro_pair_delta_begin(float4 trial, float4 old)
{
    return coulomb_hs_sum_begin(coulomb_hs_p(), trial, old);
}

extern "C" __device__ void metro_pair_delta_add(metro_pd_sum *s, float4 b)
{
    coulomb_hs_sum_add(coulomb_hs_p(), s, b);
}

extern "C" __device__ float metro_pair_delta_end(const metro_pd_sum *s)
{
    return coulomb_hs_sum_end(s);
}
