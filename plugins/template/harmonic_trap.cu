/* harmonic_trap.cu — the device side of the template: the term functions of
 * metro/device.h under this plugin's name (METRO_TERM), reading the
 * parameter block P the core placed for this term. */
#include "harmonic_trap.h"
#include "metro/device.h"

#define TRAP(P) ((const harmonic_trap_params *)(P))

extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b) { return 0.0f; }
extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a)
{
    return harmonic_trap_external(TRAP(P), a);
}
/* No pair energy, so no change of it either. */
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b) { return 0.0f; }
METRO_TERM_PAIR_DELTA_SUM_PLAIN
