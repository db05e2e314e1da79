/* core/src/rng.c — random streams (rng.h). */
#include "rng.h"

#include <cuda_runtime_api.h>

int metro__rng_uniform(metro__rng *rng, float *out, size_t n)
{
    if (!n) return 0;
    curandStatus_t s = CURAND_STATUS_SUCCESS;
    if (!rng->gen) {
        s = rng->device ? curandCreateGenerator(&rng->gen, CURAND_RNG_PSEUDO_PHILOX4_32_10)
                        : curandCreateGeneratorHost(&rng->gen, CURAND_RNG_PSEUDO_PHILOX4_32_10);
        if (s == CURAND_STATUS_SUCCESS) s = curandSetPseudoRandomGeneratorSeed(rng->gen, rng->seed);
        if (s == CURAND_STATUS_SUCCESS) s = curandSetGeneratorOffset(rng->gen, rng->offset);
        if (s == CURAND_STATUS_SUCCESS && rng->device && rng->stream)
            s = curandSetStream(rng->gen, (cudaStream_t)rng->stream);
        if (s != CURAND_STATUS_SUCCESS) {
            if (rng->gen) curandDestroyGenerator(rng->gen);
            rng->gen = NULL;
            return (int)s;
        }
    }
    s = curandGenerateUniform(rng->gen, out, n);
    if (s != CURAND_STATUS_SUCCESS) return (int)s;
    rng->offset += n;
    return 0;
}

void metro__rng_free(metro__rng *rng)
{
    if (rng->gen) curandDestroyGenerator(rng->gen);
    rng->gen = NULL;
}
