/* harmonic_trap.cu — the device side of the template: the fixed device ABI
 * of metro/device.h, reading the parameter block the core copied into
 * metro_potential_params. */
#include "harmonic_trap.h"
#include "metro/device.h"

static __device__ __forceinline__ const harmonic_trap_params *P()
{
    return (const harmonic_trap_params *)metro_potential_params;
}

extern "C" __device__ float metro_pair_energy(float4 a, float4 b) { return 0.0f; }
extern "C" __device__ float metro_bond_energy(float4 a, float4 b) { return 0.0f; }
extern "C" __device__ float metro_external_energy(float4 a) { return harmonic_trap_external(P(), a); }
/* No pair energy, so no change of it either. */
extern "C" __device__ float metro_pair_delta(float4 trial, float4 old, float4 b) { return 0.0f; }
METRO_PAIR_DELTA_SUM_PLAIN
