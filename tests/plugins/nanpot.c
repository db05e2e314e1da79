/* tests/plugins/nanpot.c — a potential whose delta() is NaN for one
 * particle (`bad`), `bias` otherwise, while total() is 0: two bugs of a
 * potential, which every sampler's CPU path must stop at (NaN: rejected as
 * an overlap is, a silent bias) and the core's energy check must catch (a
 * delta() that is not the change of total()) (test_rundir); and, with
 * `nan_total`, a total() that turns NaN, which the energy check names as
 * total()'s (test_loader). */
#include <math.h>
#include <stdlib.h>

#include "metro/plugin.h"

typedef struct nanpot {
    int bad;
    double bias;
    long nan_total, totals; /* NaN from call nan_total of total() on; calls so far */
} nanpot;

static int p_create(const metro_host_api *h, metro_ctx *c, const metro_params *p, metro_setup *s, void **self)
{
    (void)s;
    nanpot *q = calloc(1, sizeof *q);
    if (!q) return h->fail(c, "out of memory");
    q->bad = (int)h->param_int(p, "bad");
    q->bias = h->param_real(p, "bias");
    q->nan_total = h->param_int(p, "nan_total");
    *self = q;
    return 0;
}
static void p_destroy(void *self) { free(self); }
static const void *p_params(void *self, size_t *size)
{
    *size = sizeof(nanpot);
    return self;
}
static int p_initial(void *self, metro_ctx *ctx, metro_float4 *pos, int n)
{
    (void)self, (void)ctx;
    for (int i = 0; i < n; ++i) pos[i] = (metro_float4){2.0f * (float)i, 0, 0, 0};
    return 0;
}
static double p_delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    (void)pos, (void)n, (void)trial;
    return i == ((nanpot *)self)->bad ? NAN : ((nanpot *)self)->bias;
}
static double p_total(void *self, const metro_float4 *pos, int n)
{
    (void)pos, (void)n;
    nanpot *q = self;
    return q->nan_total && ++q->totals >= q->nan_total ? NAN : 0.0;
}

static const metro_potential_api api = {METRO_ABI_VERSION, p_create, p_destroy, p_params, p_initial, p_delta, p_total, NULL, 0, NULL, NULL, NULL, NULL};

static const metro_param_decl params[] = {
    {"bad", METRO_PARAM_INT, "3", -1, 1000000, NULL, "", "the particle whose moves give NaN (-1: none)"},
    {"bias", METRO_PARAM_REAL, "0", -1, 1, NULL, "", "every other move's energy change, which total() never shows"},
    {"nan_total", METRO_PARAM_INT, "0", 0, 1000000, NULL, "",
     "total() is NaN from this call on (1: the initial energy; 0: never)"},
    METRO_PARAM_END};

METRO_EXPORT const metro_plugin *metro_plugin_entry(void)
{
    static const metro_plugin d = {METRO_ABI_VERSION, METRO_KIND_POTENTIAL, "nanpot", "0.0.1",
                                   "delta() NaN for one particle (tests)", params, &api, NULL, 0};
    return &d;
}
