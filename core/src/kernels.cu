/* core/src/kernels.cu — the core's own device code, linked with every
 * sampler and potential at start-up. */
#include "metro/device.h"

/* The terms' parameter blocks (metro/device.h). */
__constant__ __align__(16) unsigned char metro_potential_params[METRO_PARAMS_MAX * METRO_MAX_TERMS];

/* Total energy of each replica: grid (blocks, replicas); every thread takes
 * particles i in a grid-stride loop and sums its external term and its
 * interactions with every j > i, in double.  Block sums are added to out[r]
 * (zeroed by the caller).  A check of the running energy, not a hot path. */
extern "C" __global__ void metro_core_total_energy(const float4 *__restrict__ pos, int n,
                                                   int chain, double *out)
{
    const float4 *p = pos + (size_t)blockIdx.y * n;
    double e = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float4 a = p[i];
        e += (double)metro_external_energy(a);
        for (int j = i + 1; j < n; ++j) e += (double)metro_interaction(a, p[j], i, j, chain);
    }
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1) e += __shfl_down_sync(0xffffffffu, e, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = e;
    __syncthreads();
    if (threadIdx.x < 32) {
        e = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) e += __shfl_down_sync(0xffffffffu, e, o);
        if (threadIdx.x == 0) atomicAdd(&out[blockIdx.y], e);
    }
}
