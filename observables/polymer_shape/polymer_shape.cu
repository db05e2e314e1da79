/* polymer_shape.cu — the polymer_shape observable's device side: one
 * measurement of every slot (energy, r_gyr^2, R_ee^2) read where the
 * sampler keeps the state, so measuring needs no host sync
 * (metro_observable_api.measure_device).
 *
 * One warp per slot.  r_gyr^2 by the two passes of polymer_shape.h (the
 * mean first, then the squared distances to it, both summed in double), so
 * the values agree with the host's metro_polymer_shape to double rounding
 * (only the order of the double sums differs: lanes, then a shuffle tree).
 */
#include "metro/hd.h"

#define PS_WARP 32

/* float -> double keeping subnormals, as the host converts: under
 * -ftz=true nvcc writes cvt.ftz.f64.f32, an FMUL.FTZ by 1 before each F2F. */
__device__ __forceinline__ double ps_f2d(float x)
{
    double d;
    asm("cvt.f64.f32 %0, %1;" : "=d"(d) : "f"(x));
    return d;
}

__device__ __forceinline__ double ps_warp_sum(double v)
{
#pragma unroll
    for (int o = PS_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Slot t = global warp index (blockDim.x a multiple of 32).  Writes
 * out[t] = E, out[slots + t] = r_gyr^2, out[2 slots + t] = R_ee^2 of the
 * replica r = slot_replica[t] (NULL: r = t), whose n >= 1 monomers are
 * pos[r n ... r n + n - 1]. */
extern "C" __global__ void polymer_shape_record(const metro_float4 *__restrict__ pos,
                                                const double *__restrict__ energy,
                                                const int *__restrict__ slot_replica, int n, int slots,
                                                double *__restrict__ out)
{
    const int lane = threadIdx.x & (PS_WARP - 1);
    const int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) / PS_WARP);
    if (t >= slots) return; /* whole warps leave together */
    const int r = slot_replica ? slot_replica[t] : t;
    const metro_float4 *p = pos + (size_t)r * (size_t)n;
    double mx = 0, my = 0, mz = 0;
    for (int k = lane; k < n; k += PS_WARP) {
        metro_float4 q = p[k];
        mx += ps_f2d(q.x);
        my += ps_f2d(q.y);
        mz += ps_f2d(q.z);
    }
    mx = ps_warp_sum(mx) / n;
    my = ps_warp_sum(my) / n;
    mz = ps_warp_sum(mz) / n;
    double s = 0;
    for (int k = lane; k < n; k += PS_WARP) {
        metro_float4 q = p[k]; /* L1 hit: read in the first pass */
        double dx = ps_f2d(q.x) - mx, dy = ps_f2d(q.y) - my, dz = ps_f2d(q.z) - mz;
        s += dx * dx + dy * dy + dz * dz;
    }
    s = ps_warp_sum(s);
    if (lane == 0) {
        metro_float4 a = p[0], b = p[n - 1];
        double dx = ps_f2d(b.x) - ps_f2d(a.x), dy = ps_f2d(b.y) - ps_f2d(a.y), dz = ps_f2d(b.z) - ps_f2d(a.z);
        out[t] = energy[r];
        out[slots + t] = s / n;
        out[2 * slots + t] = dx * dx + dy * dy + dz * dz;
    }
}
