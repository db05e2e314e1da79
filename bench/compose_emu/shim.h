/* bench/compose_emu/shim.h — the few CUDA names that metro/device.h, the
 * terms' .cu files and the generated source use, for a host compiler, so
 * that they compile unchanged (-include shim.h). */
#define __CUDACC__ 1
#define __host__
#define __device__
#define __constant__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#include <string.h>
#include <vector_types.h>
static inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
