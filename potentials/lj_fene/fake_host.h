/* fake_host.h — a minimal metro_host_api for unit tests that call a
 * plugin's table directly (no core): parameters from a key=value list, a
 * fail() that keeps the last message, uniforms from a fixed xorshift, and
 * save_bytes into a growable buffer.  Test-only, host-only; include from one
 * .c file.  Shared by the tests of lj_fene, metropolis and energy. */
#ifndef METRO_FAKE_HOST_H
#define METRO_FAKE_HOST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"

#define FAKE_MAX_KV 32

/* The fake's own metro_params: the text of each key, looked up by name;
 * a name not given falls back to the declaration's default. */
struct metro_params {
    const metro_param_decl *decls;
    char key[FAKE_MAX_KV][64];
    const char *val[FAKE_MAX_KV];
    int n;
};

struct metro_ctx {
    char msg[1024];
    int fails;
    uint64_t rng;
    unsigned char *saved;
    size_t nsaved;
    char dir[256];
};

static const char *fake_text(const metro_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->key[i], name)) return p->val[i];
    for (const metro_param_decl *d = p->decls; d->name; d++)
        if (!strcmp(d->name, name)) {
            if (!d->default_value) {
                fprintf(stderr, "fake host: required parameter %s not given\n", name);
                abort();
            }
            return d->default_value;
        }
    fprintf(stderr, "fake host: undeclared parameter %s\n", name);
    abort();
}

static long fake_int(const metro_params *p, const char *n) { return atol(fake_text(p, n)); }
static double fake_real(const metro_params *p, const char *n) { return atof(fake_text(p, n)); }
static int fake_bool(const metro_params *p, const char *n)
{
    const char *t = fake_text(p, n);
    return !strcmp(t, "true") || !strcmp(t, "1") || !strcmp(t, "yes") || !strcmp(t, "on");
}
static const char *fake_string(const metro_params *p, const char *n) { return fake_text(p, n); }

static int fake_fail(metro_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    c->fails++;
    return -1;
}

static void fake_log(metro_ctx *c, metro_log_level l, const char *fmt, ...) {}

/* uniforms in (0, 1] from xorshift64 */
static int fake_uniform(metro_ctx *c, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        out[i] = (float)((double)((c->rng >> 40) + 1) / 16777216.0);
    }
    return 0;
}

static FILE *fake_open_output(metro_ctx *c, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    return fopen(path, "w");
}

static const char *fake_run_dir(metro_ctx *c) { return c->dir; }

static int fake_save_bytes(metro_ctx *c, const void *data, size_t n)
{
    unsigned char *b = realloc(c->saved, c->nsaved + n);
    if (!b) return -1;
    memcpy(b + c->nsaved, data, n);
    c->saved = b;
    c->nsaved += n;
    return 0;
}

/* One process, every replica its own. */
static void fake_replicas_here(metro_ctx *ctx, int replicas, int *first, int *last)
{
    (void)ctx;
    *first = 0;
    *last = replicas;
}

static int fake_share_replicas(metro_ctx *ctx, void *array, int replicas, size_t bytes)
{
    (void)ctx, (void)array, (void)replicas, (void)bytes;
    return 0;
}

/* Facts: the last value published under each name (one instance at a
 * time in these tests, so no contradictions to catch). */
static struct {
    char name[32];
    double v;
} fake_facts[16];
static int fake_nfacts;

static int fake_fact_set(metro_ctx *ctx, const char *name, double v)
{
    (void)ctx;
    int i = 0;
    while (i < fake_nfacts && strcmp(fake_facts[i].name, name)) ++i;
    if (i == 16) return -1;
    if (i == fake_nfacts) ++fake_nfacts;
    snprintf(fake_facts[i].name, sizeof fake_facts[i].name, "%s", name);
    fake_facts[i].v = v;
    return 0;
}

static int fake_fact(metro_ctx *ctx, const char *name, double *v)
{
    (void)ctx;
    for (int i = 0; i < fake_nfacts; ++i)
        if (!strcmp(fake_facts[i].name, name)) {
            *v = fake_facts[i].v;
            return 1;
        }
    return 0;
}

/* A published fact's value, NAN when there is none. */
static inline double fake_fact_of(const char *name)
{
    double v = NAN;
    fake_fact(NULL, name, &v);
    return v;
}

static const metro_host_api fake_host = {
    .version = METRO_ABI_VERSION,
    .fail = fake_fail,
    .log = fake_log,
    .param_int = fake_int,
    .param_real = fake_real,
    .param_bool = fake_bool,
    .param_string = fake_string,
    .uniform = fake_uniform,
    .open_output = fake_open_output,
    .run_dir = fake_run_dir,
    .save_bytes = fake_save_bytes,
    .replicas_here = fake_replicas_here,
    .share_replicas = fake_share_replicas,
    .fact_set = fake_fact_set,
    .fact = fake_fact,
};

/* Params for decls from "key=value" strings (at most FAKE_MAX_KV; the
 * strings must outlive the params: values point into them). */
static metro_params fake_params(const metro_param_decl *decls, const char *const *kv, int n)
{
    metro_params p;
    memset(&p, 0, sizeof p);
    p.decls = decls;
    for (int i = 0; i < n && i < FAKE_MAX_KV; i++) {
        const char *eq = strchr(kv[i], '=');
        size_t k = eq ? (size_t)(eq - kv[i]) : strlen(kv[i]);
        if (k >= sizeof p.key[i]) k = sizeof p.key[i] - 1;
        memcpy(p.key[i], kv[i], k);
        p.key[i][k] = '\0';
        p.val[i] = eq ? eq + 1 : "";
        p.n++;
    }
    return p;
}

#endif
