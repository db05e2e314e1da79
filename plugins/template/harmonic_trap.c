/* harmonic_trap.c — TEMPLATE of a metro potential plugin.  Copy this
 * folder, rename harmonic_trap everywhere, and change the physics in the
 * header: nothing in metro's core changes when a plugin is added.
 *
 * Host side: declared parameters, creation, the parameter block for the
 * device, the starting configuration, and the CPU loops (delta, total).
 */
#include <stdlib.h>

#include "harmonic_trap.h"
#include "metro/plugin.h"

typedef struct trap {
    harmonic_trap_params p;
} trap;

static const metro_param_decl params[] = {
    {"k", METRO_PARAM_REAL, "1.0", 1e-9, 1e9, NULL, "energy/length^2", "spring constant of the trap"},
    METRO_PARAM_END};

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *pp,
                  metro_setup *setup, void **self)
{
    trap *t = calloc(1, sizeof *t);
    if (!t) return host->fail(ctx, "out of memory");
    t->p.k = (float)host->param_real(pp, "k");
    (void)setup;
    *self = t;
    return 0;
}

static void destroy(void *self)
{
    free(self);
}

static const void *device_params(void *self, size_t *size)
{
    *size = sizeof(harmonic_trap_params);
    return &((trap *)self)->p;
}

static int initial(void *self, metro_ctx *ctx, metro_float4 *pos, int n)
{
    (void)self; (void)ctx;
    for (int i = 0; i < n; ++i) pos[i] = metro_f4(0.1f * (float)(i % 7), 0.1f * (float)(i % 5), 0.1f * (float)(i % 3), pos[i].w);
    return 0;
}

static double delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    (void)n;
    const harmonic_trap_params *p = &((trap *)self)->p;
    return (double)harmonic_trap_external(p, trial) - (double)harmonic_trap_external(p, pos[i]);
}

static double total(void *self, const metro_float4 *pos, int n)
{
    double e = 0;
    for (int i = 0; i < n; ++i) e += harmonic_trap_external(&((trap *)self)->p, pos[i]);
    return e;
}

/* Per-pair forms, for systems composed of several terms: the same floats as
 * the device functions of harmonic_trap.cu. */
static float pair(void *self, metro_float4 a, metro_float4 b)
{
    (void)self; (void)a; (void)b;
    return 0.0f;
}

static float external(void *self, metro_float4 a)
{
    return harmonic_trap_external(&((trap *)self)->p, a);
}

/* No pair term at all: a composite skips its pair functions. */
static double cutoff(void *self)
{
    (void)self;
    return 0.0;
}

static const metro_potential_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .device_params = device_params,
    .initial = initial,
    .delta = delta,
    .total = total,
    .pair = pair,
    .external = external,
    .cutoff = cutoff,
};

METRO_PLUGIN(potential, "harmonic_trap", "1.0.0", "ideal particles in a harmonic trap (plugin template)",
             params, api)
