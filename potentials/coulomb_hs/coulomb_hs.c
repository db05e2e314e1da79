/* coulomb_hs — the primitive-model electrolyte: charged hard spheres in a
 * spherical hard-wall cell, every pair interacting through the bare Coulomb
 * energy with no cutoff (PHYSICS.md §2; the math is coulomb_hs.h).
 *
 * Species: when [system] declares the system's species (species, charges,
 * diameters, counts), the term reads them there, and giving them here too
 * is refused.  Otherwise (a lone coulomb_hs, as in seed 002) they are given
 * here as lists, up to METRO_MAX_SPECIES, one entry each:
 *   valences = 3, -1          z_s, units of e (required)
 *   diameters = 7.5           d_s in Å, > 0 for a charged species; one value
 *                             applies to every species
 *   counts = 262144, 786432   particles of each species, summing to
 *                             [system] particles; the default 0 derives them
 *                             for one neutral species or two charged ones
 *                             from electroneutrality
 *   names = cation, anion     optional labels (default z+3, z-1, ...)
 * The system must be electroneutral (sum of counts x valences = 0) unless
 *   allow_net_charge = true   then a net charge is run, with a warning: the
 *                             hard-wall cell has no neutralising background,
 *                             so the excess charge gathers at the wall and
 *                             bulk properties are not those of a salt.
 *
 * The cell: give exactly one of
 *   cell_radius = R           Å, the radius of the cavity, or
 *   concentration = c         mol/L of the FIRST species: the cavity volume
 *                             4/3 pi R^3 is count_0 / (c N_A).
 * A centre of species s is allowed where |r| <= R - d_s/2 (the wall stops
 * the ion's surface); external() is 0 there and +inf outside.
 *
 * Bjerrum length: bjerrum = λ_B in Å, or (bjerrum = 0, the default) from
 * temperature (K, default 300) and epsilon_r (default 78.3), not both:
 * λ_B = e^2 / (4 pi eps0 eps_r k_B T) = 7.1137 Å at the defaults with SI
 * constants.  The paper quotes 7.117 Å for the same T and eps_r (0.05%
 * higher); configs reproducing it give bjerrum = 7.117.
 *
 * Facts published: cell_radius, bjerrum (λ_B is the coupling at the run's
 * unit temperature: at beta the Boltzmann factor is exp(-beta λ_B z z'/r),
 * so a run at T = 2 sees λ_B / 2; docs/COMPOSITION.md).
 *
 * initial() places the ions uniformly in their allowed balls with no
 * overlap, by random sequential addition on a cell grid (O(N): a million
 * ions in about a second); the core has assigned the species along the
 * index (interleaved so every prefix is nearly neutral); it fails with a message after max_attempts
 * rejected tries for one ion (the packing is too dense for random
 * placement).
 *
 * CPU loops: delta() and total() sum float pair energies in double, the
 * partner loop split over `threads` OpenMP threads where OpenMP exists.
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "metro/plugin.h"

#include "coulomb_hs.h"

#ifdef _OPENMP
#define CHS_PRAGMA(x) _Pragma(x)
#else
#define CHS_PRAGMA(x)
#endif

/* Below this many partners a delta() stays on one thread: forking costs
 * more than the loop. */
#define CHS_PAR_MIN 4096
/* Uniforms drawn per call during placement (one host-generator call has a
 * fixed cost of ~0.1 ms whatever its size). */
#define CHS_POOL (3u << 18)
#define AVOGADRO 6.02214076e23

typedef struct coulomb_hs {
    const metro_host_api *host;
    metro_ctx *ctx;
    coulomb_hs_params dev;       /* also what the CPU loops read */
    int nspecies;
    double z[METRO_MAX_SPECIES], d[METRO_MAX_SPECIES];
    long count[METRO_MAX_SPECIES];
    char name[METRO_MAX_SPECIES][16];
    double radius, bjerrum;
    int particles, threads;
    long max_attempts;
} coulomb_hs;

static const metro_param_decl params[] = {
    {"valences", METRO_PARAM_REAL_LIST, "", -100, 100, NULL, "e",
     "valence z of each species (when [system] declares none)"},
    {"diameters", METRO_PARAM_REAL_LIST, "", 0, 1e6, NULL, "Å",
     "hard-core diameter of each species, > 0 when charged (one value: the same for all; when [system] declares none)"},
    {"counts", METRO_PARAM_REAL_LIST, "0", 0, 2e9, NULL, "",
     "particles of each species, summing to [system] particles (0: derived from electroneutrality)"},
    {"names", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "comma-separated species names (empty: z+3, z-1, ...)"},
    {"cell_radius", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "Å",
     "radius of the spherical cavity; a centre lies within cell_radius - d/2 (0: from concentration)"},
    {"concentration", METRO_PARAM_REAL, "0", 0, 1e3, NULL, "mol/L",
     "concentration of the first species, which sets cell_radius when that is 0"},
    {"bjerrum", METRO_PARAM_REAL, "0", 0, 1e6, NULL, "Å",
     "Bjerrum length λ_B (0: from temperature and epsilon_r)"},
    {"temperature", METRO_PARAM_REAL, "300", 1e-3, 1e6, NULL, "K",
     "temperature for λ_B when bjerrum = 0 (with bjerrum > 0: leave it out)"},
    {"epsilon_r", METRO_PARAM_REAL, "78.3", 1e-3, 1e6, NULL, "",
     "relative permittivity of the solvent for λ_B when bjerrum = 0 (with bjerrum > 0: leave it out)"},
    {"threads", METRO_PARAM_INT, "0", 0, 4096, NULL, "",
     "CPU threads of delta() and total() (0: the OpenMP default, all cores)"},
    {"max_attempts", METRO_PARAM_INT, "1000", 1, 1e9, NULL, "",
     "rejected placements of one ion before initial() gives up"},
    {"allow_net_charge", METRO_PARAM_BOOL, "false", 0, 0, NULL, "",
     "run a system whose counts x valences do not sum to 0 (with a warning)"},
    METRO_PARAM_END};

/* ---- create -------------------------------------------------------------- */

/* Copy the idx-th comma-separated field of list into out (trimmed). */
static void list_field(const char *list, int idx, char *out, size_t n)
{
    const char *p = list;
    for (int i = 0; i < idx && p; ++i) {
        p = strchr(p, ',');
        if (p) ++p;
    }
    out[0] = '\0';
    if (!p) return;
    while (*p == ' ' || *p == '\t') ++p;
    size_t k = 0;
    while (p[k] && p[k] != ',') ++k;
    while (k && (p[k - 1] == ' ' || p[k - 1] == '\t')) --k;
    if (k >= n) k = n - 1;
    memcpy(out, p, k);
    out[k] = '\0';
}

static int check_neutral(coulomb_hs *c, const metro_params *p);

static int read_species(coulomb_hs *c, const metro_params *p, int particles)
{
    const metro_host_api *h = c->host;
    int nz, nd, nc;
    const double *z = h->param_list(p, "valences", &nz);
    const double *d = h->param_list(p, "diameters", &nd);
    if (!nz) return h->fail(c->ctx, "valences: give the valence of each species (or declare the species in [system])");
    if (!nd) return h->fail(c->ctx, "diameters: give the diameter of each species, or one for all");
    const double *cnt = h->param_list(p, "counts", &nc);
    if (nz > METRO_MAX_SPECIES)
        return h->fail(c->ctx, "valences: %d species, at most %d", nz, METRO_MAX_SPECIES);
    if (nd != 1 && nd != nz)
        return h->fail(c->ctx, "diameters: %d values for %d species (give one, or one per species)", nd, nz);
    c->nspecies = nz;
    for (int s = 0; s < nz; ++s) {
        c->z[s] = z[s];
        c->d[s] = d[nd == 1 ? 0 : s];
    }
    int derive = nc == 1 && cnt[0] == 0.0;
    if (!derive) {
        if (nc != nz)
            return h->fail(c->ctx, "counts: %d values for %d species", nc, nz);
        long sum = 0;
        for (int s = 0; s < nz; ++s) {
            if (cnt[s] != floor(cnt[s]))
                return h->fail(c->ctx, "counts: %g is not a whole number", cnt[s]);
            c->count[s] = (long)cnt[s];
            sum += c->count[s];
        }
        if (sum != particles)
            return h->fail(c->ctx, "counts: they sum to %ld, but [system] particles = %d", sum, particles);
    } else if (nz == 1) {
        c->count[0] = particles;
    } else if (nz == 2 && c->z[0] * c->z[1] < 0) {
        /* n0 z0 + n1 z1 = 0 and n0 + n1 = N */
        double n0 = (double)particles * fabs(c->z[1]) / (fabs(c->z[0]) + fabs(c->z[1]));
        if (fabs(n0 - floor(n0 + 0.5)) > 1e-6)
            return h->fail(c->ctx,
                           "counts: %d particles cannot be split into an electroneutral mix of valences "
                           "%g and %g (give a multiple of %g, or counts)",
                           particles, c->z[0], c->z[1], (fabs(c->z[0]) + fabs(c->z[1])));
        c->count[0] = (long)floor(n0 + 0.5);
        c->count[1] = particles - c->count[0];
    } else {
        return h->fail(c->ctx, "counts: give one count per species (they can be derived only for one "
                               "neutral species or two of opposite sign)");
    }
    return check_neutral(c, p);
}

/* Electroneutrality of the species table, or the warning that allows it. */
static int check_neutral(coulomb_hs *c, const metro_params *p)
{
    const metro_host_api *h = c->host;
    int nz = c->nspecies;
    double q = 0.0, qabs = 0.0;
    for (int s = 0; s < nz; ++s) {
        q += (double)c->count[s] * c->z[s];
        qabs += (double)c->count[s] * fabs(c->z[s]);
    }
    if (fabs(q) > 1e-9 * (qabs + 1.0)) {
        if (!h->param_bool(p, "allow_net_charge"))
            return h->fail(c->ctx, "the system is not electroneutral: counts x valences sum to %g e "
                                   "(allow_net_charge = true runs it anyway)", q);
        h->log(c->ctx, METRO_LOG_WARN,
               "the system carries a net charge of %g e (allow_net_charge = true): nothing neutralises it, so the "
               "excess gathers at the cell wall", q);
    }
    return 0;
}

/* The species table's names: the names key, else z+3, z-1, ...  Given
 * names follow [system] species' rule (one a species, 1 to 15 of letters,
 * digits, _ + - ., none twice): they are what an initial file and the
 * trajectories match species by, so a missing, extra or repeated name is a
 * mistake to report, not one to paper over. */
static int name_species(coulomb_hs *c, const metro_params *p)
{
    const metro_host_api *h = c->host;
    int nz = c->nspecies;
    const char *names = h->param_string(p, "names");
    if (*names) {
        int given = 1;
        for (const char *x = names; *x; ++x) given += *x == ',';
        if (given != nz)
            return h->fail(c->ctx, "names: %d name%s for %d species (give one per species, separated by commas, or "
                                   "none: z+3, z-1, ...)", given, given == 1 ? "" : "s", nz);
    }
    for (int s = 0; s < nz; ++s) {
        char f[64];
        list_field(names, s, f, sizeof f);
        if (!*names) {
            snprintf(c->name[s], sizeof c->name[s], "z%+g", c->z[s]);
            for (int t = 0; t < s; ++t)
                if (!strcmp(c->name[t], c->name[s])) snprintf(c->name[s], sizeof c->name[s], "s%d", s);
            continue;
        }
        int ok = f[0] != 0 && strlen(f) < sizeof c->name[s] && strlen(f) < sizeof f - 1;
        for (const char *x = f; *x; ++x) ok &= isalnum((unsigned char)*x) || strchr("_+-.", *x) != NULL;
        if (!ok)
            return h->fail(c->ctx, "names: '%s' (species %d) is not a species name (1 to %zu of letters, digits, "
                                   "_ + - .)", f, s + 1, sizeof c->name[s] - 1);
        for (int t = 0; t < s; ++t)
            if (!strcmp(c->name[t], f)) return h->fail(c->ctx, "names: '%s' is named twice", f);
        memcpy(c->name[s], f, strlen(f) + 1); /* fits: checked above */
    }
    return 0;
}

/* Every charged species has a hard core: point charges of opposite sign
 * would fall into each other (the energy runs to -inf, the chain freezes).
 * key starts the message, where ends it. */
static int hard_cores(coulomb_hs *c, const char *key, const char *where)
{
    for (int s = 0; s < c->nspecies; ++s)
        if (c->z[s] != 0 && !(c->d[s] > 0))
            return c->host->fail(c->ctx, "%sspecies '%s' carries charge %g but has no hard core: give it a diameter "
                                         "> 0 (%s)", key, c->name[s], c->z[s], where);
    return 0;
}

/* Species the core declared ([system] or the initial file): this term reads
 * them, and giving them here as well is a contradiction. */
static int core_species(coulomb_hs *c, const metro_params *p, const metro_setup *setup)
{
    const metro_host_api *h = c->host;
    static const char *const own[] = {"valences", "diameters", "names"};
    for (int k = 0; k < 3; ++k) {
        int n = 0;
        if (k < 2) h->param_list(p, own[k], &n);
        else n = *h->param_string(p, own[k]) != 0;
        if (n)
            return h->fail(c->ctx, "%s: the species are declared for the whole system ([system] species, charges, "
                                   "diameters, counts): give them there only (here they would be given twice)",
                           own[k]);
    }
    int nc;
    const double *cnt = h->param_list(p, "counts", &nc);
    if (nc != 1 || cnt[0] != 0.0)
        return h->fail(c->ctx, "counts: the species are declared for the whole system ([system] counts): give "
                               "them there only (here they would be given twice)");
    c->nspecies = setup->species;
    for (int s = 0; s < c->nspecies; ++s) {
        c->z[s] = setup->species_table[s].charge;
        c->d[s] = setup->species_table[s].diameter;
        c->count[s] = setup->species_table[s].count;
        snprintf(c->name[s], sizeof c->name[s], "%s", setup->species_table[s].name);
    }
    if (hard_cores(c, "", "[system] diameters")) return -1;
    return check_neutral(c, p);
}

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p, metro_setup *setup,
                  void **self)
{
    coulomb_hs *c = calloc(1, sizeof *c);
    if (!c) return host->fail(ctx, "out of memory");
    c->host = host;
    c->ctx = ctx;
    c->particles = setup->particles;
    c->threads = (int)host->param_int(p, "threads");
    c->max_attempts = host->param_int(p, "max_attempts");
    if (setup->species ? core_species(c, p, setup) : read_species(c, p, setup->particles)) goto fail;
    if (!setup->species &&
        (name_species(c, p) || hard_cores(c, "diameters: ", "point charges of opposite sign fall into each other")))
        goto fail;

    double R = host->param_real(p, "cell_radius");
    double conc = host->param_real(p, "concentration");
    if (R > 0 && conc > 0) {
        host->fail(ctx, "cell_radius and concentration: give one of them, not both");
        goto fail;
    }
    if (conc > 0) {
        if (c->count[0] == 0) {
            host->fail(ctx, "concentration: the first species has no particles");
            goto fail;
        }
        double n0 = conc * AVOGADRO * 1e-27; /* Å^-3 */
        R = cbrt(3.0 * ((double)c->count[0] / n0) / (4.0 * M_PI));
    } else if (!(R > 0)) {
        host->fail(ctx, "cell_radius: give cell_radius (Å) or concentration (mol/L of the first species)");
        goto fail;
    }
    double dmax = 0.0;
    for (int s = 0; s < c->nspecies; ++s) dmax = fmax(dmax, c->d[s]);
    if (!(R > dmax / 2)) {
        host->fail(ctx, "cell_radius: %g Å leaves no room for an ion of diameter %g Å", R, dmax);
        goto fail;
    }
    c->radius = R;
    double lb = host->param_real(p, "bjerrum");
    /* a given bjerrum makes temperature and epsilon_r unused: one of them
     * given as well (not at its default, as a resumed run's config.ini
     * writes it) is a contradiction, not a choice */
    for (const metro_param_decl *d = params; lb > 0 && d->name; ++d)
        if ((!strcmp(d->name, "temperature") || !strcmp(d->name, "epsilon_r")) &&
            host->param_real(p, d->name) != strtod(d->default_value, NULL)) {
            host->fail(ctx, "bjerrum: give bjerrum or temperature/epsilon_r, not both (%s = %g is given too, and "
                            "bjerrum = %g would ignore it)", d->name, host->param_real(p, d->name), lb);
            goto fail;
        }
    if (!(lb > 0)) {
        lb = coulomb_hs_bjerrum(host->param_real(p, "temperature"), host->param_real(p, "epsilon_r"));
        /* beside other terms (LJ units, a trap, ...) a λ_B from kelvin and a
         * permittivity is rarely what is meant, and bjerrum = 0 reads as
         * "no coupling": say what was taken, whatever --quiet */
        if (setup->terms > 1)
            host->log(ctx, METRO_LOG_WARN,
                      "bjerrum = 0 (given or by default) means λ_B = %g from temperature = %g K and epsilon_r = %g, "
                      "not no coupling; in a composed system every term's energy is in units of the sampler's "
                      "temperature: give bjerrum (λ_B at T = 1) in the length unit of the other terms",
                      lb, host->param_real(p, "temperature"), host->param_real(p, "epsilon_r"));
    }
    c->bjerrum = lb;

    memset(&c->dev, 0, sizeof c->dev);
    for (int s = 0; s < METRO_MAX_SPECIES; ++s) {
        /* unused rows: neutral points confined to nothing (never indexed
         * by a valid particle, harmless if one is) */
        int t = s < c->nspecies ? s : 0;
        double rc = R - c->d[t] / 2;
        c->dev.sp[s] = metro_f4((float)c->z[t], (float)(c->d[t] / 2), (float)(lb * c->z[t]), (float)(rc * rc));
    }
    c->dev.nspecies = c->nspecies;
    c->dev.bjerrum = (float)lb;
    c->dev.cell_radius = (float)R;

    if (!setup->species) { /* a lone coulomb_hs declares the system's species */
        setup->species = c->nspecies;
        for (int s = 0; s < c->nspecies; ++s) {
            metro_species *sp = &setup->species_table[s];
            memset(sp, 0, sizeof *sp);
            snprintf(sp->name, sizeof sp->name, "%s", c->name[s]);
            sp->charge = c->z[s];
            sp->diameter = c->d[s];
            sp->count = c->count[s];
        }
    }
    double k2 = 0.0, phi = 0.0, vol = 4.0 / 3.0 * M_PI * R * R * R;
    for (int s = 0; s < c->nspecies; ++s) {
        k2 += 4.0 * M_PI * lb * (double)c->count[s] / vol * c->z[s] * c->z[s];
        phi += (double)c->count[s] * M_PI / 6.0 * c->d[s] * c->d[s] * c->d[s] / vol;
    }
    /* spheres filling more than the cell: no placement and no file can
     * hold them (a dry run passed such a system, the run failed later) */
    if (phi > 1.0) {
        host->fail(ctx, "%s: the ions' hard spheres would fill %.3g times the cell's volume (radius %g Å): no "
                        "configuration holds them (random placement jams near a volume fraction of 0.38)",
                   conc > 0 ? "concentration" : "cell_radius", phi, R);
        goto fail;
    }
    if (host->fact_set(ctx, "cell_radius", R) || host->fact_set(ctx, "bjerrum", lb)) goto fail;
    host->log(ctx, METRO_LOG_INFO,
              "%d species, cell radius %.6g Å, Bjerrum length %.6g Å, bare Debye length %.6g Å, "
              "volume fraction %.3g",
              c->nspecies, R, lb, k2 > 0 ? 1.0 / sqrt(k2) : INFINITY, phi);
    *self = c;
    return 0;
fail:
    free(c);
    return -1;
}

static void destroy(void *self)
{
    free(self);
}

static const void *device_params(void *self, size_t *size)
{
    coulomb_hs *c = self;
    *size = sizeof c->dev;
    return &c->dev;
}

/* ---- initial placement --------------------------------------------------- */

typedef struct pool {
    const metro_host_api *host;
    metro_ctx *ctx;
    float *u;
    size_t pos, n;
} pool;

/* Next uniform in (0, 1]; refills from the instance's stream.  Returns -1
 * (in *out untouched) when drawing failed. */
static int next_uniform(pool *p, float *out)
{
    if (p->pos == p->n) {
        if (p->host->uniform(p->ctx, p->u, CHS_POOL)) return -1;
        p->pos = 0;
        p->n = CHS_POOL;
    }
    *out = p->u[p->pos++];
    return 0;
}

static int initial(void *self, metro_ctx *ctx, metro_float4 *pos, int n)
{
    coulomb_hs *c = self;
    const metro_host_api *h = c->host;
    const double R = c->radius;
    double dmax = 0.0;
    for (int s = 0; s < c->nspecies; ++s) dmax = fmax(dmax, c->d[s]);

    /* pos[i].w holds each particle's species (the core assigned them) */
    /* Cell grid over the cube [-R, R]^3: cells at least dmax wide, so a
     * neighbour test covers the 27 cells around, and at most about 8N of
     * them, so the grid costs O(N) memory whatever the density. */
    long m = (long)floor(2.0 * R / fmax(dmax, 1e-9));
    long mcap = (long)cbrt(8.0 * (double)n) + 1;
    if (m > mcap) m = mcap;
    if (m < 1) m = 1;
    const double h_cell = 2.0 * R / (double)m;
    size_t ncell = (size_t)m * (size_t)m * (size_t)m;
    int *head = malloc(ncell * sizeof *head);
    int *next = malloc((size_t)(n > 0 ? n : 1) * sizeof *next);
    pool pl = {h, ctx, malloc(CHS_POOL * sizeof(float)), 0, 0};
    int rc = 0;
    if (!head || !next || !pl.u) {
        rc = h->fail(ctx, "out of memory for the placement grid (%zu cells)", ncell);
        goto done;
    }
    for (size_t k = 0; k < ncell; ++k) head[k] = -1;

    for (int i = 0; i < n; ++i) {
        const int s = (int)pos[i].w;
        const double rmax = R - c->d[s] / 2;
        long tries = 0;
        for (;;) {
            if (tries++ >= c->max_attempts) {
                double vol = 4.0 / 3.0 * M_PI * R * R * R, phi = 0.0;
                for (int t = 0; t < c->nspecies; ++t)
                    phi += (double)c->count[t] * M_PI / 6.0 * c->d[t] * c->d[t] * c->d[t] / vol;
                rc = h->fail(ctx,
                             "cannot place ion %d of %d (species %s, diameter %g Å) without overlap after "
                             "%ld attempts: volume fraction %.3g in a cell of radius %g Å is too dense for "
                             "random placement (random sequential addition jams near 0.38)",
                             i, n, c->name[s], c->d[s], c->max_attempts, phi, R);
                goto done;
            }
            float u[3];
            if (next_uniform(&pl, &u[0]) || next_uniform(&pl, &u[1]) || next_uniform(&pl, &u[2])) {
                rc = -1;
                goto done;
            }
            metro_float4 p = metro_f4((float)((2.0 * u[0] - 1.0) * rmax), (float)((2.0 * u[1] - 1.0) * rmax),
                                      (float)((2.0 * u[2] - 1.0) * rmax), pos[i].w);
            if (coulomb_hs_external(&c->dev, p) != 0.0f) continue;
            long cx = (long)((p.x + R) / h_cell), cy = (long)((p.y + R) / h_cell), cz = (long)((p.z + R) / h_cell);
            cx = cx < 0 ? 0 : cx >= m ? m - 1 : cx;
            cy = cy < 0 ? 0 : cy >= m ? m - 1 : cy;
            cz = cz < 0 ? 0 : cz >= m ? m - 1 : cz;
            int clash = 0;
            for (long ax = cx - 1; ax <= cx + 1 && !clash; ++ax)
                for (long ay = cy - 1; ay <= cy + 1 && !clash; ++ay)
                    for (long az = cz - 1; az <= cz + 1 && !clash; ++az) {
                        if (ax < 0 || ay < 0 || az < 0 || ax >= m || ay >= m || az >= m) continue;
                        for (int j = head[(ax * m + ay) * m + az]; j >= 0; j = next[j])
                            if (coulomb_hs_pair(&c->dev, p, pos[j]) == INFINITY) {
                                clash = 1;
                                break;
                            }
                    }
            if (clash) continue;
            pos[i] = p;
            size_t k = (size_t)((cx * m + cy) * m + cz);
            next[i] = head[k];
            head[k] = i;
            break;
        }
    }
done:
    free(head);
    free(next);
    free(pl.u);
    return rc;
}

/* ---- CPU loops ----------------------------------------------------------- */

static int nthreads(const coulomb_hs *c)
{
#ifdef _OPENMP
    return c->threads > 0 ? c->threads : omp_get_max_threads();
#else
    return 1;
#endif
}

static double delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    const coulomb_hs *c = self;
    const coulomb_hs_params *p = &c->dev;
    const metro_float4 old = pos[i];
    double s = (double)coulomb_hs_external(p, trial) - (double)coulomb_hs_external(p, old);
    const int nt = n >= CHS_PAR_MIN ? nthreads(c) : 1;
    (void)nt;
    CHS_PRAGMA("omp parallel for reduction(+ : s) schedule(static) num_threads(nt) if (nt > 1)")
    for (int j = 0; j < n; ++j)
        if (j != i) s += (double)coulomb_hs_pair(p, trial, pos[j]) - (double)coulomb_hs_pair(p, old, pos[j]);
    return s;
}

static double total(void *self, const metro_float4 *pos, int n)
{
    const coulomb_hs *c = self;
    const coulomb_hs_params *p = &c->dev;
    const int nt = n >= 256 ? nthreads(c) : 1;
    (void)nt;
    double s = 0.0;
    CHS_PRAGMA("omp parallel for reduction(+ : s) schedule(dynamic, 64) num_threads(nt) if (nt > 1)")
    for (int i = 0; i < n; ++i) {
        double e = (double)coulomb_hs_external(p, pos[i]);
        for (int j = i + 1; j < n; ++j) e += (double)coulomb_hs_pair(p, pos[i], pos[j]);
        s += e;
    }
    return s;
}

static float pair(void *self, metro_float4 a, metro_float4 b)
{
    return coulomb_hs_pair(&((coulomb_hs *)self)->dev, a, b);
}

static float external(void *self, metro_float4 a)
{
    return coulomb_hs_external(&((coulomb_hs *)self)->dev, a);
}

/* The placement grid: at most about 8N cells and a link per particle. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    (void)self;
    *host = 9 * (size_t)setup->particles * sizeof(int);
    *device = 0;
    return 0;
}

static const metro_potential_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .device_params = device_params,
    .initial = initial,
    .delta = delta,
    .total = total,
    .memory = memory,
    .pair = pair,
    .external = external,
};

METRO_PLUGIN(potential, "coulomb_hs", "1.0.0",
             "charged hard spheres in a spherical hard-wall cell, bare Coulomb with no cutoff (primitive model)",
             params, api)
