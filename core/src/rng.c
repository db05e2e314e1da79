/* core/src/rng.c — random streams (rng.h). */
#include "rng.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

static int create(metro__rng *rng)
{
    curandStatus_t s = rng->device ? curandCreateGenerator(&rng->gen, CURAND_RNG_PSEUDO_PHILOX4_32_10)
                                   : curandCreateGeneratorHost(&rng->gen, CURAND_RNG_PSEUDO_PHILOX4_32_10);
    if (s == CURAND_STATUS_SUCCESS) s = curandSetPseudoRandomGeneratorSeed(rng->gen, rng->seed);
    if (s == CURAND_STATUS_SUCCESS) s = curandSetGeneratorOffset(rng->gen, rng->offset);
    if (s == CURAND_STATUS_SUCCESS && rng->device && rng->stream)
        s = curandSetStream(rng->gen, (cudaStream_t)rng->stream);
    if (s != CURAND_STATUS_SUCCESS) {
        if (rng->gen) curandDestroyGenerator(rng->gen);
        rng->gen = NULL;
    }
    rng->pos = rng->len = 0;
    return (int)s;
}

int metro__rng_uniform(metro__rng *rng, float *out, size_t n)
{
    if (!n) return 0;
    int s;
    if (!rng->gen && (s = create(rng))) return s;
    if (rng->device) {
        if ((s = (int)curandGenerateUniform(rng->gen, out, n))) return s;
        rng->offset += n;
        return 0;
    }
    if (!rng->buf && !(rng->buf = malloc(METRO__RNG_BUF * sizeof *rng->buf))) return (int)CURAND_STATUS_ALLOCATION_FAILED;
    while (n) {
        if (rng->pos == rng->len) {
            if (n >= METRO__RNG_BUF) { /* large draws go straight to the caller */
                size_t k = n - n % METRO__RNG_BUF;
                if ((s = (int)curandGenerateUniform(rng->gen, out, k))) return s;
                rng->offset += k;
                out += k;
                n -= k;
                continue;
            }
            if ((s = (int)curandGenerateUniform(rng->gen, rng->buf, METRO__RNG_BUF))) return s;
            rng->pos = 0;
            rng->len = METRO__RNG_BUF;
        }
        size_t k = rng->len - rng->pos < n ? rng->len - rng->pos : n;
        memcpy(out, rng->buf + rng->pos, k * sizeof *out);
        rng->pos += k;
        rng->offset += k;
        out += k;
        n -= k;
    }
    return 0;
}

void metro__rng_free(metro__rng *rng)
{
    if (rng->gen) curandDestroyGenerator(rng->gen);
    rng->gen = NULL;
    free(rng->buf);
    rng->buf = NULL;
    rng->pos = rng->len = 0;
}
