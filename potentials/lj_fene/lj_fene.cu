/* lj_fene.cu — the device ABI of metro/device.h for the lj_fene potential.
 * The math is lj_fene.h, shared with the host loops; the parameter block is
 * the metro_lj_fene_params that device_params() hands the core, which
 * copies it into metro_potential_params. */
#include "metro/device.h"

#include "lj_fene.h"

static __device__ __forceinline__ const metro_lj_fene_params *lj_fene_p(void)
{
    return (const metro_lj_fene_params *)metro_potential_params;
}

extern "C" __device__ float metro_pair_energy(float4 a, float4 b)
{
    return metro_lj_fene_lj(lj_fene_p(), metro_dist2(a, b));
}

extern "C" __device__ float metro_bond_energy(float4 a, float4 b)
{
    return metro_lj_fene_bond(lj_fene_p(), metro_dist2(a, b));
}

extern "C" __device__ float metro_external_energy(float4 a)
{
    return 0.0f;
}

/* Plainly the difference of the two pair energies: the same expression (and
 * float result) the samplers computed from metro_pair_energy before. */
extern "C" __device__ float metro_pair_delta(float4 trial, float4 old, float4 b)
{
    return metro_lj_fene_lj(lj_fene_p(), metro_dist2(trial, b)) - metro_lj_fene_lj(lj_fene_p(), metro_dist2(old, b));
}

METRO_PAIR_DELTA_SUM_PLAIN
