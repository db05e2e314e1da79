/* bench.h — what bench/'s standalone design studies share: one pseudo-
 * random sequence (the same placements and trials wherever a study draws
 * them, in C or in CUDA's host code) and, in the CUDA programs, one way to
 * stop on a CUDA error. */
#ifndef METRO_BENCH_H
#define METRO_BENCH_H

#include <stdio.h>
#include <stdlib.h>

/* A 64-bit LCG (Knuth's MMIX constants): uniform in [0, 1), 53 bits */
static inline double urand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1p-53;
}

#ifdef __CUDACC__
/* A failed CUDA call: where, what, and exit 1 */
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                       \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#endif

#endif
