/* core/src/util.c — small internal helpers of the core. */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int metro__fail(metro_error *err, int status, const char *fmt, ...)
{
    if (!err) return status;
    if (!err->status) err->status = status;
    size_t len = strlen(err->msg);
    static const char more[] = "(more errors)\n";
    /* once the buffer has overflowed, it stays as it is: the marker last */
    if (len + sizeof more >= sizeof err->msg || strstr(err->msg, more)) return status;
    va_list ap;
    va_start(ap, fmt);
    char line[sizeof err->msg];
    int l = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* a message that no longer fits is dropped whole, not cut mid-line;
     * the first one, if it alone is too long, keeps its whole lines */
    if (l < 0 || len + (size_t)l + 1 + sizeof more > sizeof err->msg) {
        if (len == 0 && l > 0) {
            size_t keep = sizeof err->msg - sizeof more - 1;
            while (keep && line[keep - 1] != '\n') --keep;
            memcpy(err->msg, line, keep);
            len = keep;
        }
        if (!strstr(err->msg, more)) memcpy(err->msg + len, more, sizeof more);
        return status;
    }
    memcpy(err->msg + len, line, (size_t)l + 1);
    len = strlen(err->msg);
    if (len + 1 < sizeof err->msg && (len == 0 || err->msg[len - 1] != '\n')) {
        err->msg[len] = '\n';
        err->msg[len + 1] = 0;
    }
    return status;
}

uint64_t metro__fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Sizes are checked against the machine before anything large is
 * allocated (metro__sim_memory); an allocation that fails anyway ends the
 * program with status 1 and what it asked for, never with abort(). */
static void oom(size_t bytes)
{
    fprintf(stderr, "metro: out of memory: could not allocate %zu bytes (%.3g GiB)\n", bytes,
            (double)bytes / (1u << 30));
    exit(METRO_ERUN);
}

void *metro__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *metro__xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *metro__xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) oom(n);
    return p;
}

char *metro__strdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) oom(strlen(s ? s : "") + 1);
    return d;
}

int metro__mkdirs(const char *path)
{
    char *p = metro__strdup(path);
    for (char *s = p + 1; *s; ++s) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0777) && errno != EEXIST) { free(p); return -1; }
        *s = '/';
    }
    int rc = mkdir(p, 0777);
    free(p);
    return rc && errno != EEXIST ? -1 : 0;
}

char *metro__read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = metro__xmalloc(cap);
    size_t got;
    errno = 0;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap) buf = metro__xrealloc(buf, cap *= 2);
    }
    /* the read's own reason (a folder: EISDIR), EIO only without one */
    int bad = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (bad) { free(buf); errno = bad; return NULL; }
    buf[n] = 0;
    if (size) *size = n;
    return buf;
}

int metro__identifier(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    for (++s; *s; ++s)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

int metro__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; ++i) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; ++j) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; ++i)
        for (size_t j = 1; j <= lb; ++j) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

double metro__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
