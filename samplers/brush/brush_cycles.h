/* samplers/brush/brush_cycles.h — what a sampler of brush's sequential
 * chain keeps between cycles on the host: the uniforms drawn ahead (whole
 * cycles, BRUSH_UNIFORMS_PER_PARTICLE per particle, consumed in the
 * stream's order) and each cycle's acceptance count; acceptance.csv from
 * that history; and both saved in, and restored from, a checkpoint.
 *
 * One piece for the brush sampler and for the hierarchical sampler, which
 * must consume the random stream exactly as brush does to give its chain:
 * a change here changes both alike.  Each keeps its own checkpoint magic
 * and its own name in messages. */
#ifndef METRO_BRUSH_CYCLES_H
#define METRO_BRUSH_CYCLES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brush.h"
#include "metro/plugin.h"

/* Small systems draw the uniforms of several cycles per call (a call of
 * cuRAND's host generator costs ~0.1 ms whatever its size): up to this many
 * floats, always whole cycles, so the stream is consumed exactly as one call
 * per cycle would. */
#define BRUSH_POOL_FLOATS 65536

typedef struct brush_cycles {
    const metro_host_api *host;
    metro_ctx *ctx;
    const char *who;             /* the sampler's name, for messages */
    long long *hist;             /* acceptances of each cycle since start */
    size_t nhist, caphist;
    /* uniforms drawn ahead on the host: pool[pool_pos .. pool_n), whole
     * cycles; saved in checkpoints so a resumed chain uses the same ones */
    float *pool;
    size_t pool_pos, pool_n, pool_cap;
} brush_cycles;

static inline void brush_cycles_free(brush_cycles *c)
{
    free(c->pool);
    free(c->hist);
    c->pool = NULL;
    c->hist = NULL;
}

/* Append one cycle's acceptance count; returns 0 or -1 (out of memory). */
static inline int brush_cycles_push(brush_cycles *c, long long accepted)
{
    if (c->nhist == c->caphist) {
        size_t cap = c->caphist ? 2 * c->caphist : 1024;
        long long *h = realloc(c->hist, cap * sizeof *h);
        if (!h) return c->host->fail(c->ctx, "out of memory for the acceptance history");
        c->hist = h;
        c->caphist = cap;
    }
    c->hist[c->nhist++] = accepted;
    return 0;
}

/* Room for `floats` uniforms in the pool; returns 0 or -1. */
static inline int brush_cycles_reserve(brush_cycles *c, size_t floats)
{
    if (floats <= c->pool_cap) return 0;
    float *p = realloc(c->pool, floats * sizeof *p);
    if (!p) return c->host->fail(c->ctx, "out of memory for %zu uniforms", floats);
    c->pool = p;
    c->pool_cap = floats;
    return 0;
}

/* The uniforms of the next cycle of n particles, in host memory; NULL on
 * failure. */
static inline const float *brush_cycles_uniforms(brush_cycles *c, int n)
{
    const size_t per = (size_t)n * BRUSH_UNIFORMS_PER_PARTICLE;
    if (c->pool_n - c->pool_pos < per) {
        size_t k = per < BRUSH_POOL_FLOATS ? BRUSH_POOL_FLOATS / per : 1;
        if (brush_cycles_reserve(c, k * per) || c->host->uniform(c->ctx, c->pool, k * per)) return NULL;
        c->pool_pos = 0;
        c->pool_n = k * per;
    }
    const float *u = c->pool + c->pool_pos;
    c->pool_pos += per;
    return u;
}

/* acceptance.csv: one row per cycle of the history, `cycles` the last
 * one's number and `per` the trials of a cycle.  0 or -1. */
static inline int brush_cycles_write(brush_cycles *c, long long cycles, long long per)
{
    FILE *f = c->host->open_output(c->ctx, "acceptance.csv");
    if (!f) return -1;
    fprintf(f, "cycle,accepted,attempted,rate\n");
    const long long first = cycles - (long long)c->nhist;
    for (size_t i = 0; i < c->nhist; ++i)
        fprintf(f, "%lld,%lld,%lld,%.6f\n", first + (long long)i + 1, c->hist[i], per,
                per ? (double)c->hist[i] / (double)per : 0.0);
    if (fclose(f) != 0) return c->host->fail(c->ctx, "acceptance.csv: write failed");
    return 0;
}

/* The checkpoint blob: magic and version, cycles, the history, the
 * uniforms not yet used.  0 or -1. */
static inline int brush_cycles_save(brush_cycles *c, unsigned magic, long long cycles)
{
    const metro_host_api *h = c->host;
    unsigned hdr[2] = {magic, 1u};
    long long nh = (long long)c->nhist, np = (long long)(c->pool_n - c->pool_pos);
    if (h->save_bytes(c->ctx, hdr, sizeof hdr) || h->save_bytes(c->ctx, &cycles, sizeof cycles) ||
        h->save_bytes(c->ctx, &nh, sizeof nh) || h->save_bytes(c->ctx, &np, sizeof np) ||
        (nh && h->save_bytes(c->ctx, c->hist, c->nhist * sizeof *c->hist)) ||
        (np && h->save_bytes(c->ctx, c->pool + c->pool_pos, (size_t)np * sizeof(float))))
        return -1;
    return 0;
}

/* The length of that blob at the start of data, from its header (the
 * history's and the pool's lengths), for a sampler that saves more after
 * it; size when the header cannot say (brush_cycles_restore then names
 * what is wrong). */
static inline size_t brush_cycles_blob_size(const void *data, size_t size)
{
    const size_t head = 2 * sizeof(unsigned) + 3 * sizeof(long long);
    if (size < head) return size;
    long long nh, np;
    memcpy(&nh, (const unsigned char *)data + 2 * sizeof(unsigned) + sizeof(long long), sizeof nh);
    memcpy(&np, (const unsigned char *)data + 2 * sizeof(unsigned) + 2 * sizeof(long long), sizeof np);
    if (nh < 0 || np < 0 || (unsigned long long)nh >= size || (unsigned long long)np >= size) return size;
    const size_t end = head + (size_t)nh * sizeof(long long) + (size_t)np * sizeof(float);
    return end <= size ? end : size;
}

/* Back from that blob; *cycles set.  0 or -1 (with the reason). */
static inline int brush_cycles_restore(brush_cycles *c, unsigned magic, const void *data, size_t size,
                                       long long *cycles_out)
{
    const unsigned char *p = data;
    unsigned hdr[2];
    long long cycles, nh, np;
    const size_t head = sizeof hdr + sizeof cycles + sizeof nh + sizeof np;
    if (size < head) return c->host->fail(c->ctx, "%s: checkpoint too short", c->who);
    memcpy(hdr, p, sizeof hdr);
    memcpy(&cycles, p + sizeof hdr, sizeof cycles);
    memcpy(&nh, p + sizeof hdr + sizeof cycles, sizeof nh);
    memcpy(&np, p + sizeof hdr + sizeof cycles + sizeof nh, sizeof np);
    if (hdr[0] != magic || hdr[1] != 1u) return c->host->fail(c->ctx, "%s: not a %s checkpoint", c->who, c->who);
    if (nh < 0 || np < 0 || size != head + (size_t)nh * sizeof(long long) + (size_t)np * sizeof(float))
        return c->host->fail(c->ctx, "%s: checkpoint has the wrong size", c->who);
    if (brush_cycles_reserve(c, (size_t)np + 1)) return -1;
    memcpy(c->pool, p + head + (size_t)nh * sizeof(long long), (size_t)np * sizeof(float));
    c->pool_pos = 0;
    c->pool_n = (size_t)np;
    c->nhist = 0;
    for (long long i = 0; i < nh; ++i) {
        long long a;
        memcpy(&a, p + head + (size_t)i * sizeof a, sizeof a);
        if (brush_cycles_push(c, a)) return -1;
    }
    *cycles_out = cycles;
    return 0;
}

#endif
