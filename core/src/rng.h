/* core/src/rng.h — the random stream of one plugin instance: cuRAND
 * Philox4_32_10 through the host API, a host generator on the CPU backend
 * and a device generator on CUDA.  Both give the same numbers for the same
 * seed (docs/DESIGN.md fact 5), so the whole state of a stream is (seed,
 * offset): that is what a checkpoint stores. */
#ifndef METRO__RNG_H
#define METRO__RNG_H

#include <curand.h>
#include <stddef.h>
#include <stdint.h>

/* A host generator call costs ~150 us whatever its size, so host draws go
 * through a buffer; offset counts the numbers handed out, not generated. */
#define METRO__RNG_BUF 65536

typedef struct metro__rng {
    curandGenerator_t gen;        /* created on first use */
    int device;                   /* 1: writes device memory */
    void *stream;                 /* cudaStream_t for the device generator */
    uint64_t seed;
    unsigned long long offset;    /* uniforms handed out so far */
    float *buf;                   /* host: generated, not yet handed out */
    size_t pos, len;
} metro__rng;

/* Fill out[0..n-1] with uniforms in (0, 1]; host memory, or device memory
 * when rng->device.  Returns 0, or the cuRAND status (non-zero). */
int metro__rng_uniform(metro__rng *rng, float *out, size_t n);

/* Release the generator and buffer; the stream can be recreated from
 * (seed, offset). */
void metro__rng_free(metro__rng *rng);

#endif
