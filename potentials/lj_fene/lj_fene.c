/* lj_fene — elastic flexible homopolymer: truncated and shifted
 * Lennard-Jones between all pairs of monomers plus FENE bonds between chain
 * neighbours, in open space (PHYSICS.md §1, seed 000 §3.1).
 *
 * Parameters (reduced units, eps = k_B = 1 in the paper):
 *   r0 = 0.7        FENE centre and LJ minimum: s = 2^(-1/6) r0
 *   K = 40          FENE spring constant
 *   R = 0.3         FENE half-width: bonds stay in (r0 - R, r0 + R); R < r0
 *   epsilon = 1     LJ well depth (before the shift)
 *   rc_sigma = 2.5  LJ cutoff r_c in units of s
 *   lj_bonded = true  bonded neighbours feel the LJ too (paper, Eq. 4); off
 *                     reproduces codes that leave it out
 * With the defaults: s = 0.623629, r_c = 1.559073, E_LJ(r_c) = -0.0163169,
 * shifted well -0.983683 at r = r0.
 *
 * The term owns the bonds (METRO_POTENTIAL_BONDS): the run's chains
 * ([system] chains; one chain of all particles when a lone lj_fene runs a
 * system that declares none).  It publishes bond_length = r0.
 * Device functions (lj_fene.cu): pair = E_LJ^mod, bond = E_FENE (+ E_LJ^mod
 * when lj_bonded), external = 0.
 * Starting configuration (a lone term): each chain straight along x at
 * spacing r0, centred on the origin (every bond at the FENE and LJ
 * minimum), chain c at y = 2.5 c r0.
 */
#include <math.h>
#include <stdlib.h>

#include "metro/plugin.h"

#include "lj_fene.h"

typedef struct lj_fene {
    const metro_host_api *host;
    metro_lj_fene_params p;
    double r0;
    const metro_topology *topo; /* the core's, lives as long as the run */
} lj_fene;

static const metro_param_decl params[] = {
    {"r0", METRO_PARAM_REAL, "0.7", 1e-3, 1e3, NULL, "length",
     "FENE bond centre; also the LJ minimum (sigma = 2^(-1/6) r0)"},
    {"K", METRO_PARAM_REAL, "40", 0, 1e6, NULL, "energy/length^2", "FENE spring constant"},
    {"R", METRO_PARAM_REAL, "0.3", 1e-4, 1e3, NULL, "length",
     "FENE half-width: bond lengths stay in (r0 - R, r0 + R); must be < r0"},
    {"epsilon", METRO_PARAM_REAL, "1", 0, 1e6, NULL, "energy", "LJ well depth"},
    {"rc_sigma", METRO_PARAM_REAL, "2.5", 0.5, 100, NULL, "sigma",
     "LJ cutoff r_c in units of sigma (energy shifted to 0 at r_c)"},
    {"lj_bonded", METRO_PARAM_BOOL, "true", 0, 0, NULL, "",
     "LJ between bonded neighbours too (the paper's Eq. 4 sums over all pairs)"},
    METRO_PARAM_END};

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *pp,
                  metro_setup *setup, void **out)
{
    double r0 = host->param_real(pp, "r0"), K = host->param_real(pp, "K");
    double R = host->param_real(pp, "R"), eps = host->param_real(pp, "epsilon");
    double rcs = host->param_real(pp, "rc_sigma");
    if (!(R < r0))
        return host->fail(ctx, "R = %g must be smaller than r0 = %g (bond lengths must stay > 0)",
                          R, r0);
    lj_fene *self = calloc(1, sizeof *self);
    if (!self) return host->fail(ctx, "out of memory");
    self->host = host;
    self->r0 = r0;
    double sigma = pow(2.0, -1.0 / 6.0) * r0, rc = rcs * sigma;
    double src6 = pow(sigma / rc, 6.0);
    metro_lj_fene_params *p = &self->p;
    p->sigma2 = (float)(sigma * sigma);
    p->rc2 = (float)(rc * rc);
    p->eps4 = (float)(4.0 * eps);
    p->shift = (float)(4.0 * eps * (src6 * src6 - src6));
    p->core2 = (float)(1e-6 * sigma * sigma);
    p->r0 = (float)r0;
    p->R = (float)R;
    p->inv_R = (float)(1.0 / R);
    p->fene_pref = (float)(0.5 * K * R * R);
    p->lj_bonded = host->param_bool(pp, "lj_bonded") ? 1 : 0;
    self->topo = &setup->topology;
    if (host->fact_set(ctx, "bond_length", r0)) {
        free(self);
        return -1;
    }
    host->log(ctx, METRO_LOG_DEBUG, "sigma = %.6f, r_c = %.6f, E_LJ(r_c) = %.7f", sigma,
              rc, 4.0 * eps * (src6 * src6 - src6));
    *out = self;
    return 0;
}

static void destroy(void *self) { free(self); }

static const void *device_params(void *s, size_t *size)
{
    *size = sizeof(metro_lj_fene_params);
    return &((lj_fene *)s)->p;
}

static int initial(void *s, metro_ctx *ctx, metro_float4 *pos, int n)
{
    (void)ctx;
    const lj_fene *self = s;
    const metro_topology *t = self->topo;
    const float gap = (float)(2.5 * self->r0);
    int nfree = n;
    for (int c = 0; c < t->chains && t->first[c] < n; ++c) {
        int len = t->length[c] < n - t->first[c] ? t->length[c] : n - t->first[c];
        nfree -= len;
        for (int k = 0; k < len; ++k) {
            metro_float4 *q = &pos[t->first[c] + k];
            *q = metro_f4((float)((k - 0.5 * (len - 1)) * self->r0), gap * (float)c, 0.0f, q->w);
        }
    }
    /* free particles (chains come first in index order): one more line */
    int first_free = n - nfree;
    for (int i = first_free; i < n; ++i)
        pos[i] = metro_f4((float)((i - first_free - 0.5 * (nfree - 1)) * self->r0), gap * (float)t->chains, 0.0f,
                          pos[i].w);
    return 0;
}

static int bonded(const lj_fene *self, int i, int j)
{
    return metro_bonded_pair(self->topo, i, j);
}

/* O(n): only the terms of particle i change. */
static double delta(void *s, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    const lj_fene *self = s;
    const metro_lj_fene_params *p = &self->p;
    metro_float4 old = pos[i];
    double d = 0.0;
    /* bonds first: an overstretched trial needs no further work */
    for (int j = i - 1; j <= i + 1; j += 2) {
        if (j < 0 || j >= n) continue;
        float en = bonded(self, i, j) ? metro_lj_fene_bond(p, metro_dist2(trial, pos[j]))
                                      : metro_lj_fene_lj(p, metro_dist2(trial, pos[j]));
        if (!(en < INFINITY)) return INFINITY;
        d += (double)en - (double)(bonded(self, i, j) ? metro_lj_fene_bond(p, metro_dist2(old, pos[j]))
                                                      : metro_lj_fene_lj(p, metro_dist2(old, pos[j])));
    }
    for (int j = 0; j < n; j++) {
        if (j >= i - 1 && j <= i + 1) continue;
        d += (double)metro_lj_fene_lj(p, metro_dist2(trial, pos[j])) -
             (double)metro_lj_fene_lj(p, metro_dist2(old, pos[j]));
    }
    return d;
}

static double total(void *s, const metro_float4 *pos, int n)
{
    const lj_fene *self = s;
    const metro_lj_fene_params *p = &self->p;
    double e = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            float r2 = metro_dist2(pos[i], pos[j]);
            e += (double)(bonded(self, i, j) ? metro_lj_fene_bond(p, r2) : metro_lj_fene_lj(p, r2));
        }
    return e;
}

static float pair(void *s, metro_float4 a, metro_float4 b)
{
    return metro_lj_fene_lj(&((lj_fene *)s)->p, metro_dist2(a, b));
}

static float bond(void *s, metro_float4 a, metro_float4 b)
{
    return metro_lj_fene_bond(&((lj_fene *)s)->p, metro_dist2(a, b));
}

static float external(void *s, metro_float4 a)
{
    (void)s; (void)a;
    return 0.0f;
}

/* LJ is 0 from r_c on (metro_lj_fene_lj compares r^2 with the float rc2) */
static double cutoff(void *s)
{
    return sqrt((double)((lj_fene *)s)->p.rc2);
}

static const metro_potential_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .device_params = device_params,
    .initial = initial,
    .delta = delta,
    .total = total,
    .flags = METRO_POTENTIAL_BONDS,
    .pair = pair,
    .bond = bond,
    .external = external,
    .cutoff = cutoff,
};

METRO_PLUGIN(potential, "lj_fene", "1.0.0",
             "elastic homopolymer: truncated-shifted LJ between all monomers + FENE bonds",
             params, api)
