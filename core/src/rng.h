/* core/src/rng.h — the random stream of one plugin instance: cuRAND
 * Philox4_32_10 through the host API, a host generator on the CPU backend
 * and a device generator on CUDA.  Both give the same numbers for the same
 * seed (DESIGN.md fact 5), so the whole state of a stream is (seed,
 * offset): that is what a checkpoint stores. */
#ifndef METRO__RNG_H
#define METRO__RNG_H

#include <curand.h>
#include <stddef.h>
#include <stdint.h>

typedef struct metro__rng {
    curandGenerator_t gen;        /* created on first use */
    int device;                   /* 1: writes device memory */
    void *stream;                 /* cudaStream_t for the device generator */
    uint64_t seed;
    unsigned long long offset;    /* uniforms drawn so far */
} metro__rng;

/* Fill out[0..n-1] with uniforms in (0, 1]; host memory, or device memory
 * when rng->device.  Returns 0, or the cuRAND status (non-zero). */
int metro__rng_uniform(metro__rng *rng, float *out, size_t n);

/* Release the generator (the stream can be recreated from seed, offset). */
void metro__rng_free(metro__rng *rng);

#endif
