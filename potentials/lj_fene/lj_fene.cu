/* lj_fene.cu — the term functions of metro/device.h for lj_fene.  The math
 * is lj_fene.h, shared with the host loops; P is the metro_lj_fene_params
 * that device_params() handed the core. */
#include "metro/device.h"

#include "lj_fene.h"

#define LJ(P) ((const metro_lj_fene_params *)(P))

extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b)
{
    return metro_lj_fene_lj(LJ(P), metro_dist2(a, b));
}

extern "C" __device__ float METRO_TERM(bond_energy)(const void *P, float4 a, float4 b)
{
    return metro_lj_fene_bond(LJ(P), metro_dist2(a, b));
}

extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a)
{
    return 0.0f;
}

/* Plainly the difference of the two pair energies: the same expression (and
 * float result) the samplers computed from the pair energy before. */
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b)
{
    return metro_lj_fene_lj(LJ(P), metro_dist2(trial, b)) - metro_lj_fene_lj(LJ(P), metro_dist2(old, b));
}

METRO_TERM_PAIR_DELTA_SUM_PLAIN
