/* core/src/frames_io.h — what the trajectory writer (frames.c) and reader
 * (frames_read.c) share: whole reads and writes at an offset, the error
 * text, and the GSD file layer's header and index entry.  Private to those
 * two files. */
#ifndef METRO_FRAMES_IO_H
#define METRO_FRAMES_IO_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4), unused)) static int ferr(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- whole reads and writes at an offset ---------------------------------- */

__attribute__((unused)) static int pwrite_all(int fd, const void *buf, size_t n, uint64_t at)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        p += w, n -= (size_t)w, at += (uint64_t)w;
    }
    return 0;
}

__attribute__((unused)) static int pread_all(int fd, void *buf, size_t n, uint64_t at)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0; /* short file */
            return -1;
        }
        p += r, n -= (size_t)r, at += (uint64_t)r;
    }
    return 0;
}

__attribute__((unused)) static const char *why(void)
{
    return errno ? strerror(errno) : "the file ends early";
}

/* ---- GSD ---------------------------------------------------------------- */

#define GSD_MAGIC 0x65DF65DF65DF65DFull
#define GSD_VERSION ((2u << 16) | 0u)
#define GSD_HOOMD_SCHEMA ((1u << 16) | 4u)
#define GSD_FIRST_INDEX 1024u   /* entries of the first index block (32 KiB) */

enum { T_UINT8 = 1, T_UINT16, T_UINT32, T_UINT64, T_INT8, T_INT16, T_INT32, T_INT64, T_FLOAT, T_DOUBLE };

__attribute__((unused)) static size_t type_size(unsigned t)
{
    static const size_t s[] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return t >= 1 && t <= 10 ? s[t] : 0;
}

typedef struct gsd_header {
    uint64_t magic, index_location, index_allocated_entries, namelist_location, namelist_allocated_entries;
    uint32_t schema_version, gsd_version;
    char application[64], schema[64], reserved[80];
} gsd_header;

typedef struct gsd_entry {
    uint64_t frame, N;
    int64_t location;
    uint32_t M;
    uint16_t id;
    uint8_t type, flags;
} gsd_entry;

_Static_assert(sizeof(gsd_header) == 256, "GSD header must be 256 bytes");
_Static_assert(sizeof(gsd_entry) == 32, "GSD index entry must be 32 bytes");

#endif
