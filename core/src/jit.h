/* core/src/jit.h — composing device code: nvJitLink links the LTO-IR of
 * the core, the sampler, the potential and the observables into one cubin
 * for the device's own architecture (docs/DESIGN.md facts 2-4).  The cubin is
 * cached on disk, keyed by a hash of every input; a damaged entry is
 * detected by its checksum and rebuilt, never trusted.
 */
#ifndef METRO__JIT_H
#define METRO__JIT_H

#include <stddef.h>

#include "metro/metro.h"

typedef struct metro__ir {
    const char *name;            /* for messages: the plugin's name */
    const unsigned char *data;   /* fatbin holding LTO-IR; or CUDA source */
    size_t size;
    int source;                  /* 1: data is CUDA source, compiled by NVRTC
                                    to LTO-IR only when the cache misses */
} metro__ir;

/* Link irs[0..n-1] for `arch` ("sm_90").  No GPU is needed.  On success
 * *cubin is a heap buffer the caller frees.  METRO_OK or METRO_ERUN with
 * nvJitLink's log in err. */
int metro__jit_link(const metro__ir *irs, int n, const char *arch, void **cubin, size_t *size,
                    metro_error *err);

/* As metro__jit_link, through the cache folder (METRO_CACHE_DIR, else
 * $XDG_CACHE_HOME/metro, else ~/.cache/metro).  *from_cache tells which. */
int metro__jit_cached(const metro__ir *irs, int n, const char *arch, void **cubin, size_t *size,
                      int *from_cache, metro_error *err);

/* The cache folder in use (created on demand). */
const char *metro__jit_cache_dir(void);

/* The core's own device code (core/src/kernels.cu). */
extern const unsigned char metro__core_ir[];
extern const size_t metro__core_ir_size;

#endif
