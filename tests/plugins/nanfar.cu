/* tests/plugins/nanfar.cu — nanfar's device term (nanfar.c): NaN beyond
 * `far` from the origin, as an external term or (pair = 1) as the pair
 * term with every partner. */
#include "metro/device.h"

typedef struct nanfar { /* nanfar.c's, which is the parameter block */
    float far;
    int pair;
    double memory;
} nanfar;

/* beyond far, in the host's float arithmetic step by step (no FMA) */
static __device__ __forceinline__ bool beyond(const void *P, float4 a)
{
    const float far = ((const nanfar *)P)->far;
    const float r2 = __fadd_rn(__fadd_rn(__fmul_rn(a.x, a.x), __fmul_rn(a.y, a.y)), __fmul_rn(a.z, a.z));
    return r2 > __fmul_rn(far, far);
}

extern "C" __device__ float METRO_TERM(pair_energy)(const void *P, float4 a, float4 b)
{
    return ((const nanfar *)P)->pair && (beyond(P, a) || beyond(P, b)) ? __int_as_float(0x7fc00000) : 0.0f;
}
extern "C" __device__ float METRO_TERM(bond_energy)(const void *P, float4 a, float4 b) { return 0.0f; }
extern "C" __device__ float METRO_TERM(external_energy)(const void *P, float4 a)
{
    return !((const nanfar *)P)->pair && beyond(P, a) ? __int_as_float(0x7fc00000) : 0.0f;
}
extern "C" __device__ float METRO_TERM(pair_delta)(const void *P, float4 trial, float4 old, float4 b)
{
    return METRO_TERM(pair_energy)(P, trial, b) - METRO_TERM(pair_energy)(P, old, b);
}

METRO_TERM_PAIR_DELTA_SUM_PLAIN
