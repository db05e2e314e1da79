/* polymer_shape.cu — the polymer_shape observable's device side: one
 * measurement of every slot (energy, r_gyr^2, R_ee^2 of every chain) read
 * where the sampler keeps the state, so measuring needs no host sync
 * (metro_observable_api.measure_device).
 *
 * One warp per slot, looping over the slot's chains (a few long chains is
 * the case this is for: with many chains shorter than a warp most lanes
 * idle, which costs little beside a sweep).  r_gyr^2 by the two passes of
 * polymer_shape.h (the mean first, then the squared distances to it, both
 * summed in double), in the order the host's metro_polymer_shape follows
 * (lanes, then a butterfly) with no fused multiply-add, so the values
 * equal the host's bit for bit.
 */
#include "metro/hd.h"

#include "polymer_shape.h"

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
    for (int o = PS_WARP / 2; o > 0; o >>= 1) v = metro__ps_add(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Slot t = global warp index (blockDim.x a multiple of 32).  The replica
 * r = slot_replica[t] (NULL: r = t) has n particles pos[r n ... r n + n - 1];
 * chain c of it is the particles first[c] ... first[c] + length[c] - 1
 * (length >= 1), walked one chain after another by the whole warp.
 * Writes out[t] = E, out[slots + t] and out[2 slots + t] = r_gyr^2 and
 * R_ee^2 averaged over the chains (summed in chain order, then divided by
 * the number of chains, as metro_polymer_shape_chains does: one chain's
 * value is that chain's exactly), and when per, each chain's values at
 * out[3 slots + t chains + c] (r_gyr^2) and
 * out[3 slots + slots chains + t chains + c] (R_ee^2). */
extern "C" __global__ void polymer_shape_record(const metro_float4 *__restrict__ pos,
                                                const double *__restrict__ energy,
                                                const int *__restrict__ slot_replica, int n, int slots, int chains,
                                                const int *__restrict__ first, const int *__restrict__ length,
                                                int per, double *__restrict__ out)
{
    const int lane = threadIdx.x & (PS_WARP - 1);
    const int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) / PS_WARP);
    if (t >= slots) return; /* whole warps leave together */
    const int r = slot_replica ? slot_replica[t] : t;
    const metro_float4 *base = pos + (size_t)r * (size_t)n;
    double sa = 0, sb = 0; /* lane 0: sums over the chains */
    for (int c = 0; c < chains; ++c) {
        const metro_float4 *p = base + first[c];
        const int len = length[c];
        double mx = 0, my = 0, mz = 0;
        for (int k = lane; k < len; k += PS_WARP) {
            metro_float4 q = p[k];
            mx = metro__ps_add(mx, ps_f2d(q.x));
            my = metro__ps_add(my, ps_f2d(q.y));
            mz = metro__ps_add(mz, ps_f2d(q.z));
        }
        mx = ps_warp_sum(mx) / len;
        my = ps_warp_sum(my) / len;
        mz = ps_warp_sum(mz) / len;
        double s = 0;
        for (int k = lane; k < len; k += PS_WARP) {
            metro_float4 q = p[k]; /* L1 hit: read in the first pass */
            s = metro__ps_add(s, metro__ps_sq3(ps_f2d(q.x) - mx, ps_f2d(q.y) - my, ps_f2d(q.z) - mz));
        }
        s = ps_warp_sum(s);
        if (lane == 0) {
            metro_float4 a = p[0], b = p[len - 1];
            double rg2 = s / len,
                   ree2 = metro__ps_sq3(ps_f2d(b.x) - ps_f2d(a.x), ps_f2d(b.y) - ps_f2d(a.y), ps_f2d(b.z) - ps_f2d(a.z));
            sa += rg2;
            sb += ree2;
            if (per) {
                out[3 * (size_t)slots + (size_t)t * chains + c] = rg2;
                out[3 * (size_t)slots + (size_t)slots * chains + (size_t)t * chains + c] = ree2;
            }
        }
    }
    if (lane == 0) {
        out[t] = energy[r];
        out[slots + t] = sa / chains;
        out[2 * slots + t] = sb / chains;
    }
}
