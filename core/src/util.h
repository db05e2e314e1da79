/* core/src/util.h — small internal helpers of the core. */
#ifndef METRO__UTIL_H
#define METRO__UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "metro/metro.h"

/* Append a line to err (keeping the first status set); returns status. */
int metro__fail(metro_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* FNV-1a 64-bit hash, chainable: pass the previous value as h (start with
 * METRO__FNV_INIT). */
#define METRO__FNV_INIT 0xcbf29ce484222325ull
uint64_t metro__fnv(uint64_t h, const void *data, size_t n);

/* Allocation that exits with status 1, naming the size, on out-of-memory
 * (sizes are checked against the machine before the run starts). */
char *metro__strdup(const char *s);
void *metro__xmalloc(size_t n);
void *metro__xcalloc(size_t n, size_t size);
void *metro__xrealloc(void *p, size_t n);

/* mkdir -p; 0 or -1 with errno. */
int metro__mkdirs(const char *path);

/* Whole file into a heap buffer (NUL-terminated); NULL with errno. */
char *metro__read_file(const char *path, size_t *size);

/* A C identifier ([A-Za-z_][A-Za-z0-9_]*): plugin names (their device
 * symbols are built from them) and the keys plugins declare. */
int metro__identifier(const char *s);

/* Levenshtein distance, for "did you mean" hints. */
int metro__edit_distance(const char *a, const char *b);

/* Seconds since an arbitrary epoch (monotonic). */
double metro__now(void);

#endif
