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
 * The potential sets setup->chain = 1: particles i and i+1 are bonded.
 * Device ABI (lj_fene.cu): metro_pair_energy = E_LJ^mod, metro_bond_energy =
 * E_FENE (+ E_LJ^mod when lj_bonded), metro_external_energy = 0.
 * Starting configuration: a straight chain along x at spacing r0, centred
 * on the origin (every bond at the FENE and LJ minimum).
 */
#include <math.h>
#include <stdlib.h>

#include "metro/plugin.h"

#include "lj_fene.h"

typedef struct lj_fene {
    const metro_host_api *host;
    metro_lj_fene_params p;
    double r0;
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
    setup->chain = 1;
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
    lj_fene *self = s;
    for (int i = 0; i < n; i++)
        pos[i] = metro_f4((float)((i - 0.5 * (n - 1)) * self->r0), 0.0f, 0.0f, 0.0f);
    return 0;
}

/* O(n): only the terms of particle i change. */
static double delta(void *s, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    const metro_lj_fene_params *p = &((lj_fene *)s)->p;
    metro_float4 old = pos[i];
    double d = 0.0;
    /* bonds first: an overstretched trial needs no further work */
    for (int j = i - 1; j <= i + 1; j += 2) {
        if (j < 0 || j >= n) continue;
        float en = metro_lj_fene_pair_ij(p, trial, pos[j], i, j);
        if (!(en < INFINITY)) return INFINITY;
        d += (double)en - (double)metro_lj_fene_pair_ij(p, old, pos[j], i, j);
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
    const metro_lj_fene_params *p = &((lj_fene *)s)->p;
    double e = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) e += (double)metro_lj_fene_pair_ij(p, pos[i], pos[j], i, j);
    return e;
}

static const metro_potential_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .device_params = device_params,
    .initial = initial,
    .delta = delta,
    .total = total,
};

METRO_PLUGIN(potential, "lj_fene", "1.0.0",
             "elastic homopolymer: truncated-shifted LJ between all monomers + FENE bonds",
             params, api)
