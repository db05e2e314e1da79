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
} nanfar;

static int p_create(const metro_host_api *h, metro_ctx *c, const metro_params *p, metro_setup *s, void **self)
{
    (void)s;
    nanfar *q = calloc(1, sizeof *q);
    if (!q) return h->fail(c, "out of memory");
    q->far = (float)h->param_real(p, "far");
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
/* the device's external term, in the same float arithmetic */
static double energy_at(const nanfar *q, metro_float4 a)
{
    const float r2 = a.x * a.x + a.y * a.y + a.z * a.z;
    return r2 > q->far * q->far ? NAN : 0.0;
}
static double p_delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    (void)n;
    return energy_at(self, trial) - energy_at(self, pos[i]);
}
/* the per-term functions of a composed system (docs/COMPOSITION.md) */
static float p_pair(void *self, metro_float4 a, metro_float4 b)
{
    (void)self, (void)a, (void)b;
    return 0.0f;
}
static float p_external(void *self, metro_float4 a)
{
    return (float)energy_at(self, a);
}
static double p_total(void *self, const metro_float4 *pos, int n)
{
    double e = 0;
    for (int i = 0; i < n; ++i) e += energy_at(self, pos[i]);
    return e;
}

static const metro_potential_api api = {.version = METRO_ABI_VERSION,
                                        .create = p_create,
                                        .destroy = p_destroy,
                                        .device_params = p_params,
                                        .initial = p_initial,
                                        .delta = p_delta,
                                        .total = p_total,
                                        .pair = p_pair,
                                        .external = p_external};

static const metro_param_decl params[] = {
    {"far", METRO_PARAM_REAL, "15", 1, 1e6, NULL, "", "moves beyond this distance from the origin give NaN"},
    METRO_PARAM_END};

/* (also built as halfterm, with device code that lacks three functions) */
#ifndef NANFAR_NAME
#define NANFAR_NAME "nanfar"
#endif
METRO_PLUGIN(potential, NANFAR_NAME, "0.0.1", "NaN beyond a distance from the origin (tests)", params, api)
