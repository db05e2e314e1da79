/* metro/hd.h — what a physics header needs to compile both as C11 (host)
 * and as CUDA (device).
 *
 * A potential's pair and bond math lives in one header of METRO_HD inline
 * functions, included by the plugin's .c file and its .cu file alike, so the
 * CPU and GPU backends evaluate the same expressions (docs/DESIGN.md, "One
 * source of truth").  Write that header in the C subset: no
 * references, no templates, no overloading.
 */
#ifndef METRO_HD_H
#define METRO_HD_H

#include <math.h>
#include <vector_types.h> /* float4: layout-identical on host and device */

#ifdef __CUDACC__
#define METRO_HD static __host__ __device__ __forceinline__
#else
#define METRO_HD static inline
#endif

#ifndef INFINITY
#define INFINITY (1.0f / 0.0f)
#endif

/* Largest parameter block a potential may hand its device code. */
#define METRO_PARAMS_MAX 1024
/* Most potential terms one run composes. */
#define METRO_MAX_TERMS 8

/* A particle: position x, y, z and one attribute w (charge, species...). */
typedef float4 metro_float4;

METRO_HD metro_float4 metro_f4(float x, float y, float z, float w)
{
    metro_float4 p;
    p.x = x; p.y = y; p.z = z; p.w = w;
    return p;
}

METRO_HD float metro_dist2(metro_float4 a, metro_float4 b)
{
    float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;
    return dx * dx + dy * dy + dz * dz;
}

/* The state of a run of pair-deltas of one moving particle (metro/device.h,
 * metro_pair_delta_begin/add/end): the trial and old positions, and room
 * the potential uses as it likes. */
typedef struct metro_pd_sum {
    metro_float4 t, o;
    float v[4];
    float rest; /* the core's composite: the other terms' sum (never a term's) */
    float near; /* the core's composite: the least squared distance of the run */
#ifdef __cplusplus
    bool flag; /* a bool, so that OR-ing into it stays one predicate op on the GPU */
#else
    _Bool flag;
#endif
} metro_pd_sum;

/* Metropolis acceptance for energy change dE at inverse temperature beta,
 * given a uniform u in (0,1].  Infinite or NaN dE is always rejected; the
 * comparison is done in double on both backends so they decide alike. */
METRO_HD int metro_accept(double beta_dE, float u)
{
    if (!(beta_dE < 1e300)) return 0; /* +inf and NaN */
    if (beta_dE <= 0.0) return 1;
    return (double)u < exp(-beta_dE);
}

#endif
