/* tests/plugins/nanfar.c — a potential whose moves beyond `far` from the
 * origin change the energy by NaN (0 elsewhere), on the CPU and, through
 * nanfar.cu, on the GPU: a potential's bug that every sampler must stop at
 * on both backends, naming the same move (test_nan_gpu), alone or as a term
 * of a composed system (test_rundir). */
#include <math.h>
#include <stdlib.h>

#include "metro/plugin.h"

typedef struct nanfar {
    float far;
    int pair; /* the NaN from the pair term instead of the external one */
    double memory; /* GiB its memory() reports (the core's memory checks) */
} nanfar;

static int p_create(const metro_host_api *h, metro_ctx *c, const metro_params *p, metro_setup *s, void **self)
{
    (void)s;
    nanfar *q = calloc(1, sizeof *q);
    if (!q) return h->fail(c, "out of memory");
    q->far = (float)h->param_real(p, "far");
    q->pair = (int)h->param_int(p, "pair");
    q->memory = h->param_real(p, "memory");
    *self = q;
    return 0;
}
static void p_destroy(void *self) { free(self); }
static const void *p_params(void *self, size_t *size)
{
    *size = sizeof(nanfar);
    return self;
}
static int p_initial(void *self, metro_ctx *ctx, metro_float4 *pos, int n)
{
    (void)self, (void)ctx;
    for (int i = 0; i < n; ++i) pos[i] = (metro_float4){2.0f * (float)i, 0, 0, 0};
    return 0;
}
/* whether a lies beyond far, in the device's float arithmetic */
static int beyond(const nanfar *q, metro_float4 a)
{
    const float r2 = a.x * a.x + a.y * a.y + a.z * a.z;
    return r2 > q->far * q->far;
}
static double energy_at(const nanfar *q, metro_float4 a)
{
    return !q->pair && beyond(q, a) ? NAN : 0.0;
}
static float pair_at(const nanfar *q, metro_float4 a, metro_float4 b)
{
    return q->pair && (beyond(q, a) || beyond(q, b)) ? NAN : 0.0f;
}
static double p_delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    double d = energy_at(self, trial) - energy_at(self, pos[i]);
    for (int j = 0; j < n; ++j)
        if (j != i) d += (double)pair_at(self, trial, pos[j]) - (double)pair_at(self, pos[i], pos[j]);
    return d;
}
/* the per-term functions of a composed system (docs/COMPOSITION.md) */
static float p_pair(void *self, metro_float4 a, metro_float4 b)
{
    return pair_at(self, a, b);
}
static float p_external(void *self, metro_float4 a)
{
    return (float)energy_at(self, a);
}
static double p_total(void *self, const metro_float4 *pos, int n)
{
    double e = 0;
    for (int i = 0; i < n; ++i) {
        e += energy_at(self, pos[i]);
        for (int j = i + 1; j < n; ++j) e += (double)pair_at(self, pos[i], pos[j]);
    }
    return e;
}

static int p_memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    (void)setup;
    *host = (size_t)(((nanfar *)self)->memory * 1073741824.0);
    *device = 0;
    return 0;
}

static const metro_potential_api api = {.version = METRO_ABI_VERSION,
                                        .create = p_create,
                                        .destroy = p_destroy,
                                        .device_params = p_params,
                                        .initial = p_initial,
                                        .delta = p_delta,
                                        .total = p_total,
                                        .pair = p_pair,
                                        .external = p_external,
                                        .memory = p_memory};

static const metro_param_decl params[] = {
    {"far", METRO_PARAM_REAL, "15", 1, 1e6, NULL, "", "moves beyond this distance from the origin give NaN"},
    {"memory", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "GiB", "what its memory() reports"},
    {"pair", METRO_PARAM_INT, "0", 0, 1, NULL, "", "1: the NaN comes from the pair term with every partner, 0: from the external term"},
    METRO_PARAM_END};

/* (also built as halfterm, with device code that lacks three functions) */
#ifndef NANFAR_NAME
#define NANFAR_NAME "nanfar"
#endif
METRO_PLUGIN(potential, NANFAR_NAME, "0.0.1", "NaN beyond a distance from the origin (tests)", params, api)
