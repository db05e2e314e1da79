/* core/src/compose.c — the system the core owns, and an energy composed of
 * several potential terms (docs/COMPOSITION.md).
 *
 *   [system]    species, charges, diameters, counts, chains, chain_species:
 *               the particles' kinds and the bonds, read by every term
 *   [potential] one term; or [potential NAME] sections, each a term acting
 *               on the particles of its `species` (default: all); the
 *               energy is the sum of the terms
 *
 * A lone term acting on every species is the run's potential as it is (its
 * own loops, placement and device functions: the chains of metro before
 * composition, bit for bit).  Otherwise the core composes:
 *   CPU   a metro_potential_api of its own (below) summing the terms'
 *         per-pair functions, each where its species mask holds;
 *   CUDA  a source (metro__compose_source) defining the device ABI's
 *         run-wide functions as that sum of the terms' NAME__ functions,
 *         with each term's parameter block at its own offset, compiled
 *         by NVRTC and linked with the rest, so it inlines into the
 *         samplers' loops (no function pointers: docs/DESIGN.md fact 1);
 *   and places the particles itself (random sequential addition, chains
 *   grown bond by bond).
 * The chains' bonds reach the device through metro_bonded(), generated
 * from the topology in both cases.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "util.h"

#define ALL_SPECIES 0xffu
/* Chains of different lengths are searched on the device in a table in
 * the generated source; equal lengths need none. */
#define MAX_CHAIN_TABLE 4096

typedef struct term {
    const metro_potential_api *api;
    void *self;
    unsigned mask;
    const char *name;
} term;

struct metro__composite {
    int n;
    term t[METRO_MAX_TERMS];
    int bond;                    /* the term that owns the bonds, -1: none */
    const metro_topology *topo;
    metro_sim *sim;
};

/* ---- small helpers --------------------------------------------------------- */

static const char *where_of(metro_sim *sim, const char *section, const char *key)
{
    metro__entry *e = metro__config_find(sim->cfg, section, key);
    return e ? e->where : metro__config_section_where(sim->cfg, section);
}

/* Split a comma-separated list into at most max trimmed fields; returns
 * the count, or -1 when there are more. */
static int split(const char *s, char out[][64], int max)
{
    int n = 0;
    while (s && *s) {
        const char *c = strchr(s, ',');
        size_t l = c ? (size_t)(c - s) : strlen(s);
        while (l && isspace((unsigned char)*s)) ++s, --l;
        while (l && isspace((unsigned char)s[l - 1])) --l;
        if (n == max) return -1;
        if (l >= 64) l = 63;
        memcpy(out[n], s, l);
        out[n][l] = 0;
        ++n;
        s = c ? c + 1 : NULL;
    }
    return n;
}

static int species_index(const metro_setup *su, const char *name)
{
    for (int s = 0; s < su->species; ++s)
        if (!strcmp(su->species_table[s].name, name)) return s;
    return -1;
}

static void species_names(const metro_setup *su, char *buf, size_t n)
{
    buf[0] = 0;
    for (int s = 0; s < su->species; ++s) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%s", s ? ", " : "", su->species_table[s].name);
    }
}

/* ---- [system]: species ------------------------------------------------------ */

static int read_species(metro_sim *sim, int composed, metro_error *err)
{
    metro_setup *su = &sim->setup;
    const metro_params *p = sim->system;
    const char *names = metro__param_string(p, "species");
    int nq, nd, nc;
    const double *q = metro__param_list(p, "charges", &nq);
    const double *d = metro__param_list(p, "diameters", &nd);
    const double *c = metro__param_list(p, "counts", &nc);
    const char *chain_sp = metro__param_string(p, "chain_species");
    if (!*names) {
        static const char *const need[] = {"charges", "diameters", "counts", "chain_species"};
        int given[] = {nq, nd, nc, *chain_sp != 0};
        for (int k = 0; k < 4; ++k)
            if (given[k])
                return metro__fail(err, METRO_EUSAGE, "%s: [system] %s: given without species (declare the species "
                                                      "first: species = NAME, NAME, ...)",
                                   where_of(sim, "system", need[k]), need[k]);
        /* none declared: a composed system's come from the initial file,
         * where it names them */
        return metro__initial_species(sim, composed, err);
    }
    char f[METRO_MAX_SPECIES][64];
    int ns = split(names, f, METRO_MAX_SPECIES);
    const char *w = where_of(sim, "system", "species");
    if (ns < 0) return metro__fail(err, METRO_EUSAGE, "%s: [system] species: more than %d species", w, METRO_MAX_SPECIES);
    for (int s = 0; s < ns; ++s) {
        int ok = f[s][0] != 0 && strlen(f[s]) < sizeof su->species_table[0].name;
        for (const char *x = f[s]; *x; ++x) ok &= isalnum((unsigned char)*x) || strchr("_+-.", *x) != NULL;
        if (!ok)
            return metro__fail(err, METRO_EUSAGE, "%s: [system] species: '%s' is not a species name (1 to %zu of "
                                                  "letters, digits, _ + - .)",
                               w, f[s], sizeof su->species_table[0].name - 1);
        for (int t = 0; t < s; ++t)
            if (!strcmp(f[t], f[s]))
                return metro__fail(err, METRO_EUSAGE, "%s: [system] species: '%s' is named twice", w, f[s]);
    }
    /* charges and diameters may be left out: neutral point particles (a
     * term that needs either says so) */
    if (nq != 0 && nq != ns)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] charges: %d values for %d species (give one valence, in e, "
                                              "per species, or none: all 0)",
                           where_of(sim, "system", "charges"), nq, ns);
    if (nd > 1 && nd != ns)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] diameters: %d values for %d species (give one per species, "
                                              "one for all, or none: point particles)",
                           where_of(sim, "system", "diameters"), nd, ns);
    if (nc != ns)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] counts: %d values for %d species (give the particles of "
                                              "each species)",
                           where_of(sim, "system", "counts"), nc, ns);
    long sum = 0;
    for (int s = 0; s < ns; ++s) {
        if (c[s] != floor(c[s]))
            return metro__fail(err, METRO_EUSAGE, "%s: [system] counts: %g is not a whole number",
                               where_of(sim, "system", "counts"), c[s]);
        metro_species *sp = &su->species_table[s];
        memset(sp, 0, sizeof *sp);
        snprintf(sp->name, sizeof sp->name, "%s", f[s]);
        sp->charge = nq ? q[s] : 0.0;
        sp->diameter = nd ? d[nd == 1 ? 0 : s] : 0.0;
        sp->count = (long)c[s];
        sum += sp->count;
    }
    su->species = ns;
    long np = metro__param_int(p, "particles");
    if (sum > 2147483647L)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] counts: they sum to %ld, more than the 2147483647 particles a "
                                              "system may hold",
                           where_of(sim, "system", "counts"), sum);
    if (np == 0 && sum > 0) {
        su->particles = (int)sum;
    } else if (sum != np) {
        return metro__fail(err, METRO_EUSAGE, "%s: [system] counts: they sum to %ld, but particles = %ld (give "
                                              "particles = %ld, or leave particles out)",
                           where_of(sim, "system", "counts"), sum, np, sum);
    }
    return METRO_OK;
}

/* ---- [system]: chains --------------------------------------------------------- */

/* "64, 3x32": lengths in index order, chains first. */
static int read_chains(metro_sim *sim, metro_error *err)
{
    const char *s = metro__param_string(sim->system, "chains");
    const char *w = where_of(sim, "system", "chains");
    long total = 0;
    int n = 0, cap = 0;
    for (const char *x = s; *x;) {
        while (isspace((unsigned char)*x) || *x == ',') ++x;
        if (!*x) break;
        char *end;
        long a = strtol(x, &end, 10), rep = 1, len = a;
        if (end != x && (*end == 'x' || *end == 'X')) {
            rep = a;
            const char *y = end + 1;
            len = strtol(y, &end, 10);
            if (end == y) end = (char *)x;
        }
        const char *after = end;
        while (isspace((unsigned char)*after)) ++after;
        if (end == x || (*after && *after != ',') || rep < 1 || len < 2 || rep > 1e8 || len > 2147483647L)
            return metro__fail(err, METRO_EUSAGE, "%s: [system] chains: '%s' is not a list of chain lengths (each "
                                                  "LENGTH or COUNTxLENGTH, lengths >= 2, e.g. 64, 4x32)",
                               w, s);
        for (long r = 0; r < rep; ++r) {
            if (total + len > sim->setup.particles) {
                free(sim->chain_first);
                free(sim->chain_length);
                sim->chain_first = sim->chain_length = NULL;
                return metro__fail(err, METRO_EUSAGE, "%s: [system] chains: the chains hold more than the %d "
                                                      "particles of the system",
                                   w, sim->setup.particles);
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                sim->chain_first = metro__xrealloc(sim->chain_first, sizeof(int) * (size_t)cap);
                sim->chain_length = metro__xrealloc(sim->chain_length, sizeof(int) * (size_t)cap);
            }
            sim->chain_first[n] = (int)total;
            sim->chain_length[n] = (int)len;
            total += len;
            ++n;
        }
        x = after;
    }
    sim->setup.topology.chains = n;
    return METRO_OK;
}

static void build_bonds(metro_sim *sim)
{
    metro_topology *t = &sim->setup.topology;
    t->first = sim->chain_first;
    t->length = sim->chain_length;
    if (!t->chains) return;
    sim->bond_next = metro__xcalloc((size_t)sim->setup.particles, 1);
    for (int c = 0; c < t->chains; ++c)
        for (int k = 0; k + 1 < t->length[c]; ++k) sim->bond_next[t->first[c] + k] = 1;
    t->bond_next = sim->bond_next;
}

/* ---- terms -------------------------------------------------------------- */

static int term_mask(metro_sim *sim, metro_ctx *c, metro_error *err)
{
    c->mask = ALL_SPECIES;
    metro__entry *e = metro__config_find(sim->cfg, c->section, "species");
    if (!e) return METRO_OK;
    const metro_setup *su = &sim->setup;
    char known[256];
    species_names(su, known, sizeof known);
    if (!su->species)
        return metro__fail(err, METRO_EUSAGE, "%s: [%s] species: the system declares no species ([system] species = "
                                              "NAME, ...), so a term cannot be restricted to some",
                           e->where, c->section);
    char f[METRO_MAX_SPECIES + 1][64];
    int n = split(e->value, f, METRO_MAX_SPECIES + 1);
    if (n <= 0)
        return metro__fail(err, METRO_EUSAGE, "%s: [%s] species: '%s' names no species (allowed: %s)", e->where,
                           c->section, e->value, known);
    c->mask = 0;
    for (int i = 0; i < n; ++i) {
        int s = species_index(su, f[i]);
        if (s < 0)
            return metro__fail(err, METRO_EUSAGE, "%s: [%s] species: no species '%s' in [system] (allowed: %s)",
                               e->where, c->section, f[i], known);
        if (c->mask >> s & 1u)
            return metro__fail(err, METRO_EUSAGE, "%s: [%s] species: '%s' is named twice", e->where, c->section, f[i]);
        c->mask |= 1u << s;
    }
    return METRO_OK;
}

/* Before the terms' create(): the species [system] declares, the chains,
 * which term owns the bonds. */
int metro__system_read(metro_sim *sim, metro_error *err)
{
    metro_setup *su = &sim->setup;
    su->particles = (int)metro__param_int(sim->system, "particles");
    su->terms = sim->nterms;
    /* composed: the energy is not one term acting on everything (the
     * species must then belong to the system, not to a term) */
    int composed = sim->nterms > 1 || metro__config_find(sim->cfg, sim->terms[0].section, "species") != NULL;
    int rc = metro__initial_read(sim, composed, err);
    if (rc || (rc = read_species(sim, composed, err))) return rc;
    if (su->particles < 1)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] particles: required (the particles per replica), unless "
                                              "counts give them",
                           where_of(sim, "system", "particles"));
    if ((rc = read_chains(sim, err)) || (rc = metro__initial_chains(sim, err))) return rc;
    int bond = -1;
    for (int k = 0; k < sim->nterms; ++k) {
        metro_ctx *c = &sim->terms[k];
        const metro_potential_api *api = c->plugin->d->api;
        if (!(api->flags & METRO_POTENTIAL_BONDS)) continue;
        if (bond >= 0)
            return metro__fail(err, METRO_EUSAGE, "%s: [%s]: %s defines bonds, and so does [%s] (%s): one term owns "
                                                  "the bonds of the chains",
                               metro__config_section_where(sim->cfg, c->section), c->section, c->plugin->d->name,
                               sim->terms[bond].section, sim->terms[bond].plugin->d->name);
        bond = k;
    }
    sim->bond_term = bond;
    if (su->topology.chains && bond < 0 && sim->initial_chains)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] initial = %s: its bonds make %d chains, but no potential term "
                                              "defines bonds (one such as lj_fene must be a term)",
                           where_of(sim, "system", "initial"), metro__param_string(sim->system, "initial"),
                           su->topology.chains);
    if (!sim->resuming && *metro__param_string(sim->system, "initial") &&
        !strcmp(metro__param_string(sim->system, "numbering"), "space"))
        return metro__fail(err, METRO_EUSAGE, "%s: [system] numbering = space renumbers the potential's placement; the "
                                              "configuration of [system] initial = %s keeps the file's numbering "
                                              "(allowed with initial: placed)",
                           where_of(sim, "system", "numbering"), metro__param_string(sim->system, "initial"));
    if (su->topology.chains && bond < 0)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] chains: no potential term defines bonds (one such as "
                                              "lj_fene must be a term)",
                           where_of(sim, "system", "chains"));
    if (!su->topology.chains && bond >= 0) {
        if (sim->nterms > 1 || metro__config_find(sim->cfg, sim->terms[0].section, "species"))
            return metro__fail(err, METRO_EUSAGE, "%s: [%s]: %s defines bonds, but [system] declares no chains "
                                                  "(chains = LENGTH, ... or COUNTxLENGTH)",
                               metro__config_section_where(sim->cfg, sim->terms[bond].section),
                               sim->terms[bond].section, sim->terms[bond].plugin->d->name);
        /* a lone bonded potential: one chain of every particle, as before
         * systems had topologies */
        sim->chain_first = metro__xcalloc(1, sizeof(int));
        sim->chain_length = metro__xcalloc(1, sizeof(int));
        sim->chain_length[0] = su->particles;
        su->topology.chains = 1;
    }
    build_bonds(sim);
    for (int k = 0; k < sim->nterms; ++k)
        if ((rc = term_mask(sim, &sim->terms[k], err))) return rc;
    if (su->topology.chains && *metro__param_string(sim->system, "chain_species")) {
        char f[64][64];
        int n = split(metro__param_string(sim->system, "chain_species"), f, 64);
        const char *w = where_of(sim, "system", "chain_species");
        if (n <= 0) return metro__fail(err, METRO_EUSAGE, "%s: [system] chain_species: give 1 to 64 species names", w);
        sim->chain_pattern_n = n;
        for (int i = 0; i < n; ++i) {
            int s = species_index(su, f[i]);
            if (s < 0) {
                char known[256];
                species_names(su, known, sizeof known);
                return metro__fail(err, METRO_EUSAGE, "%s: [system] chain_species: no species '%s' (allowed: %s)", w,
                                   f[i], known);
            }
            sim->chain_pattern[i] = s;
        }
    } else if (su->topology.chains && su->species > 1 && !sim->initial_chains &&
               metro__config_find(sim->cfg, "system", "chains")) {
        /* (chains from the initial file have their species there) */
        return metro__fail(err, METRO_EUSAGE, "%s: [system] chain_species: required with chains and several species "
                                              "(the species along each chain, repeated: e.g. monomer, or cm, m, m)",
                           where_of(sim, "system", "chains"));
    }
    return METRO_OK;
}

/* The species of each particle (w), for replica 0: along each chain the
 * pattern repeated; the free particles interleaved
 * (metro_species_interleave). */
static int assign_species(metro_sim *sim, metro_float4 *pos, metro_error *err)
{
    const metro_setup *su = &sim->setup;
    const metro_topology *t = &su->topology;
    int n = su->particles;
    for (int i = 0; i < n; ++i) pos[i].w = 0.0f;
    if (!su->species) return METRO_OK;
    long left[METRO_MAX_SPECIES];
    for (int s = 0; s < su->species; ++s) left[s] = su->species_table[s].count;
    int nchain = 0;
    for (int c = 0; c < t->chains; ++c)
        for (int k = 0; k < t->length[c]; ++k) {
            int s = sim->chain_pattern_n ? sim->chain_pattern[k % sim->chain_pattern_n] : 0;
            pos[t->first[c] + k].w = (float)s;
            if (--left[s] < 0)
                return metro__fail(err, METRO_EUSAGE, "%s: [system] chains: the chains need more particles of species "
                                                      "%s than counts gives it (%ld)",
                                   where_of(sim, "system", "chains"), su->species_table[s].name,
                                   su->species_table[s].count);
            ++nchain;
        }
    metro_species_interleave(pos + nchain, n - nchain, left, su->species);
    return METRO_OK;
}

/* ---- the composed energy on the CPU -------------------------------------------- */

static inline int in(unsigned mask, metro_float4 a)
{
    return (int)((mask >> (int)a.w) & 1u);
}

/* The interaction of a and b summed over the terms, in float in term order
 * (the generated device code's order). */
static inline float pair_sum(const metro__composite *c, metro_float4 a, metro_float4 b, int bonded)
{
    float e = 0.0f;
    for (int k = 0; k < c->n; ++k) {
        const term *t = &c->t[k];
        if (!in(t->mask, a) || !in(t->mask, b)) continue;
        e += (bonded && k == c->bond) ? t->api->bond(t->self, a, b) : t->api->pair(t->self, a, b);
    }
    return e;
}

static inline float external_sum(const metro__composite *c, metro_float4 a)
{
    float e = 0.0f;
    for (int k = 0; k < c->n; ++k)
        if (in(c->t[k].mask, a)) e += c->t[k].api->external(c->t[k].self, a);
    return e;
}

static double c_delta(void *self, const metro_float4 *pos, int n, int i, metro_float4 trial)
{
    const metro__composite *c = self;
    const metro_float4 old = pos[i];
    /* +inf (forbidden) ends the sum; so does NaN, as NaN: a term's bug,
     * which the samplers stop at (as +inf it was a hidden wall) */
    float xt = external_sum(c, trial);
    if (!(xt < INFINITY)) return xt;
    double s = (double)xt - (double)external_sum(c, old);
    for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        int b = metro_bonded_pair(c->topo, i, j);
        float et = pair_sum(c, trial, pos[j], b);
        if (!(et < INFINITY)) return et;
        s += (double)et - (double)pair_sum(c, old, pos[j], b);
    }
    return s;
}

static double c_total(void *self, const metro_float4 *pos, int n)
{
    const metro__composite *c = self;
    double e = 0.0;
    for (int i = 0; i < n; ++i) {
        e += (double)external_sum(c, pos[i]);
        for (int j = i + 1; j < n; ++j) e += (double)pair_sum(c, pos[i], pos[j], metro_bonded_pair(c->topo, i, j));
    }
    return e;
}

static float c_pair(void *self, metro_float4 a, metro_float4 b)
{
    return pair_sum(self, a, b, 0);
}

static float c_external(void *self, metro_float4 a)
{
    return external_sum(self, a);
}

/* ---- placement of a composed system ------------------------------------------ */

typedef struct upool {
    metro_ctx *ctx;
    float u[4096];
    int pos, n;
} upool;

static int uni(upool *p, float *out)
{
    if (p->pos == p->n) {
        if (metro__host_api.uniform(p->ctx, p->u, 4096)) return -1;
        p->pos = 0;
        p->n = 4096;
    }
    *out = p->u[p->pos++];
    return 0;
}

/* Random sequential addition in the cell (the "cell_radius" fact; open
 * space: a ball at volume fraction 0.02), chains grown bond by bond at
 * "bond_length" in random directions: a trial is kept when it is in the
 * allowed region of every external term, no non-bonded particle lies
 * within the contact distance (d_i + d_j)/2, and its interactions with the
 * particles near it are finite.  A chain that gets stuck starts again. */
static int c_initial(void *self, metro_ctx *ctx, metro_float4 *pos, int n)
{
    metro__composite *c = self;
    metro_sim *sim = c->sim;
    const metro_setup *su = &sim->setup;
    const metro_topology *t = c->topo;
    double dmax = 0.0, R = 0.0, b = 0.0;
    for (int s = 0; s < su->species; ++s) dmax = fmax(dmax, su->species_table[s].diameter);
    if (!(dmax > 0)) dmax = 1.0;
    double dl;
    if (metro__host_api.fact(ctx, "bond_length", &dl)) b = dl;
    if (!(b > 0)) b = dmax;
    int open = !metro__host_api.fact(ctx, "cell_radius", &R);
    if (open) R = 0.5 * fmax(dmax, b) * cbrt((double)n / 0.02) + dmax;
    double reach = fmax(dmax, b); /* cells at least this wide: contacts lie in the 27 around */
    long m = (long)floor(2.0 * R / reach);
    long mcap = (long)cbrt(8.0 * (double)n) + 1;
    if (m > mcap) m = mcap;
    if (m < 1) m = 1;
    const double h = 2.0 * R / (double)m;
    size_t ncell = (size_t)m * (size_t)m * (size_t)m;
    int *head = malloc(ncell * sizeof *head), *next = malloc((size_t)n * sizeof *next);
    upool *pl = malloc(sizeof *pl);
    int rc = 0;
    if (!head || !next || !pl) {
        rc = metro__host_api.fail(ctx, "out of memory for the placement grid (%zu cells)", ncell);
        goto done;
    }
    pl->ctx = ctx;
    pl->pos = pl->n = 0;
    for (size_t k = 0; k < ncell; ++k) head[k] = -1;
    const long attempts = 1000;
    int restarts = 0;
    for (int i = 0; i < n; ++i) {
        const int s = (int)pos[i].w;
        const double di = su->species ? su->species_table[s].diameter : 0.0;
        int grow = i > 0 && t->bond_next && t->bond_next[i - 1];
        long tries = 0;
        for (;;) {
            if (tries++ >= attempts) {
                /* a stuck chain starts again from its first particle */
                int c0 = -1;
                for (int k = 0; k < t->chains; ++k)
                    if (i >= t->first[k] && i < t->first[k] + t->length[k]) c0 = t->first[k];
                if (c0 >= 0 && i > c0 && ++restarts < 1000) {
                    for (int j = i - 1; j >= c0; --j) { /* unlink c0..i-1: they are the latest heads */
                        long cx = (long)((pos[j].x + R) / h), cy = (long)((pos[j].y + R) / h),
                             cz = (long)((pos[j].z + R) / h);
                        cx = cx < 0 ? 0 : cx >= m ? m - 1 : cx;
                        cy = cy < 0 ? 0 : cy >= m ? m - 1 : cy;
                        cz = cz < 0 ? 0 : cz >= m ? m - 1 : cz;
                        head[(cx * m + cy) * m + cz] = next[j];
                    }
                    i = c0 - 1;
                    goto next_particle;
                }
                /* a chain that no density lets grow: its bond where the
                 * terms forbid it (inside a hard core, beyond the bond's
                 * reach) or longer than the cell */
                const metro_float4 q = metro_f4(pos[i - 1].x + (float)b, pos[i - 1].y, pos[i - 1].z, pos[i].w);
                const int ps = (int)pos[i - 1].w;
                const double dp = su->species ? su->species_table[ps].diameter : 0.0;
                if (grow && !(pair_sum(c, pos[i - 1], q, 1) < INFINITY))
                    rc = metro__host_api.fail(ctx, "cannot place particle %d of %d: two bonded particles (species %s and "
                                                   "%s) at the bond length %g have infinite energy (%s), so no chain "
                                                   "can be grown here; give a bond length the terms allow (or an initial file: [system] initial)",
                                              i, n, su->species ? su->species_table[ps].name : "-",
                                              su->species ? su->species_table[s].name : "-", b,
                                              b < 0.5 * (di + dp) ? "it lies inside their hard-core contact"
                                                                  : "the bond term forbids that length");
                else if (grow && !open && b >= 2.0 * R - di)
                    rc = metro__host_api.fail(ctx, "cannot place particle %d of %d: the bond length %g does not fit in "
                                                   "the cell (radius %g)", i, n, b, R);
                else
                    rc = metro__host_api.fail(ctx, "cannot place particle %d of %d (species %s) after %ld attempts and %d "
                                                   "chain restarts: the system is too dense for random placement (give "
                                                   "an initial file: [system] initial)",
                                              i, n, su->species ? su->species_table[s].name : "-", attempts, restarts);
                goto done;
            }
            float u[3];
            if (uni(pl, &u[0]) || uni(pl, &u[1]) || uni(pl, &u[2])) {
                rc = -1;
                goto done;
            }
            metro_float4 p;
            if (grow) {
                double z = 2.0 * u[0] - 1.0, ph = 2.0 * M_PI * u[1], r = sqrt(fmax(0.0, 1.0 - z * z));
                p = metro_f4((float)(pos[i - 1].x + b * r * cos(ph)), (float)(pos[i - 1].y + b * r * sin(ph)),
                             (float)(pos[i - 1].z + b * z), pos[i].w);
            } else {
                double rmax = R - di / 2;
                p = metro_f4((float)((2.0 * u[0] - 1.0) * rmax), (float)((2.0 * u[1] - 1.0) * rmax),
                             (float)((2.0 * u[2] - 1.0) * rmax), pos[i].w);
                if ((double)p.x * p.x + (double)p.y * p.y + (double)p.z * p.z > rmax * rmax) continue;
            }
            if (!(external_sum(c, p) < INFINITY)) continue;
            /* the grid covers the cube [-R, R]^3 only (a chain may grow out of it in open space) */
            if (fabs(p.x) >= R || fabs(p.y) >= R || fabs(p.z) >= R) continue;
            long cx = (long)((p.x + R) / h), cy = (long)((p.y + R) / h), cz = (long)((p.z + R) / h);
            cx = cx < 0 ? 0 : cx >= m ? m - 1 : cx;
            cy = cy < 0 ? 0 : cy >= m ? m - 1 : cy;
            cz = cz < 0 ? 0 : cz >= m ? m - 1 : cz;
            int clash = 0;
            for (long ax = cx - 1; ax <= cx + 1 && !clash; ++ax)
                for (long ay = cy - 1; ay <= cy + 1 && !clash; ++ay)
                    for (long az = cz - 1; az <= cz + 1 && !clash; ++az) {
                        if (ax < 0 || ay < 0 || az < 0 || ax >= m || ay >= m || az >= m) continue;
                        for (int j = head[(ax * m + ay) * m + az]; j >= 0 && !clash; j = next[j]) {
                            int bj = metro_bonded_pair(t, i, j);
                            double dj = su->species ? su->species_table[(int)pos[j].w].diameter : 0.0;
                            double cd = 0.5 * (di + dj);
                            if (!bj && metro_dist2(p, pos[j]) < cd * cd) clash = 1;
                            else if (!(pair_sum(c, p, pos[j], bj) < INFINITY)) clash = 1;
                        }
                    }
            if (clash) continue;
            pos[i] = p;
            size_t k = (size_t)((cx * m + cy) * m + cz);
            next[i] = head[k];
            head[k] = i;
            break;
        }
    next_particle:;
    }
done:
    free(head);
    free(next);
    free(pl);
    return rc;
}

static const void *c_device_params(void *self, size_t *size)
{
    (void)self;
    *size = 0;
    return NULL;
}

static int c_create(const metro_host_api *h, metro_ctx *x, const metro_params *p, metro_setup *s, void **o)
{
    (void)h; (void)x; (void)p; (void)s; (void)o;
    return -1; /* never called: the core builds the composite itself */
}

static void c_destroy(void *self)
{
    free(self);
}

static const metro_potential_api composite_api = {
    .version = METRO_ABI_VERSION,
    .create = c_create,
    .destroy = c_destroy,
    .device_params = c_device_params,
    .initial = c_initial,
    .delta = c_delta,
    .total = c_total,
    .pair = c_pair,
    .external = c_external,
};

/* After the terms' create(): the checks that need the species (a lone term
 * may have declared them), then the potential the samplers see. */
int metro__terms_finish(metro_sim *sim, metro_error *err)
{
    metro_setup *su = &sim->setup;
    int lone = sim->nterms == 1 && !metro__config_find(sim->cfg, sim->terms[0].section, "species");
    snprintf(sim->pot_name, sizeof sim->pot_name, "%s", sim->terms[0].plugin->d->name);
    if (lone) {
        sim->pot_api = sim->terms[0].plugin->d->api;
        sim->pot_self = sim->terms[0].self;
        return METRO_OK;
    }
    unsigned all = su->species ? (1u << su->species) - 1u : 1u, covered = 0;
    metro__composite *c = metro__xcalloc(1, sizeof *c);
    c->n = sim->nterms;
    c->bond = sim->bond_term;
    c->topo = &su->topology;
    c->sim = sim;
    sim->comp = c;
    for (int k = 0; k < sim->nterms; ++k) {
        metro_ctx *x = &sim->terms[k];
        const metro_potential_api *api = x->plugin->d->api;
        if (!api->pair || !api->external || (k == c->bond && !api->bond))
            return metro__fail(err, METRO_EUSAGE, "%s: [%s]: %s has no per-pair functions (pair, external%s), so it "
                                                  "can only be a run's one potential, not a term of several",
                               metro__config_section_where(sim->cfg, x->section), x->section, x->plugin->d->name,
                               k == c->bond ? ", bond" : "");
        c->t[k] = (term){api, x->self, x->mask & all, x->plugin->d->name};
        covered |= x->mask & all;
        if (k) {
            size_t l = strlen(sim->pot_name);
            snprintf(sim->pot_name + l, sizeof sim->pot_name - l, " + %s", x->plugin->d->name);
        }
    }
    unsigned walled = 0;
    int wall_term = -1;
    for (int k = 0; k < sim->nterms; ++k)
        if (sim->terms[k].walls) walled |= sim->terms[k].mask & all, wall_term = wall_term < 0 ? k : wall_term;
    for (int s = 0; s < su->species; ++s) {
        if (!(covered >> s & 1u))
            return metro__fail(err, METRO_EUSAGE, "%s: [system] species: no potential term acts on species '%s' (give "
                                                  "it in some term's species list)",
                               where_of(sim, "system", "species"), su->species_table[s].name);
        /* in a cell, a species no wall acts on leaves it (seen: ions at
         * |r| = 37 in a cell of radius 15, outside the trajectory's box) */
        if (wall_term >= 0 && !(walled >> s & 1u))
            return metro__fail(err, METRO_EUSAGE, "%s: [%s] species: species '%s' is not among them, and no other term "
                                                  "with the cell's wall acts on it, so nothing keeps it in the cell "
                                                  "(give it in this term's species list)",
                               where_of(sim, sim->terms[wall_term].section, "species"), sim->terms[wall_term].section,
                               su->species_table[s].name);
    }
    /* what is allowed but rarely meant, said in the log: two species that
     * no term acts on together pass through each other (no hard core, no
     * Coulomb between them), and two terms of one plugin on the same pairs
     * count those pairs twice (a second coulomb_hs over all species
     * doubled the Bjerrum length) */
    char apart[1024] = "", twice[1024] = "";
    int first = -1, second = -1;
    /* a term without a pair energy (cutoff 0: walls, fields) acts on no pair */
    unsigned char pairs[METRO_MAX_TERMS];
    for (int k = 0; k < sim->nterms; ++k) {
        const metro_potential_api *api = sim->terms[k].plugin->d->api;
        pairs[k] = !(api->cutoff && api->cutoff(sim->terms[k].self) == 0);
    }
    for (int a = 0; a < su->species; ++a)
        for (int b = a; b < su->species; ++b) {
            const unsigned ab = 1u << a | 1u << b;
            int n = 0, dup = 0;
            for (int k = 0; k < sim->nterms; ++k) {
                if (!pairs[k]) continue;
                if ((sim->terms[k].mask & ab) == ab) {
                    for (int j = 0; j < k && !dup; ++j)
                        if ((sim->terms[j].mask & ab) == ab && sim->terms[j].plugin == sim->terms[k].plugin)
                            dup = 1, first = first < 0 ? j : first, second = second < 0 ? k : second;
                    ++n;
                }
            }
            char *list = !n && a != b ? apart : dup ? twice : NULL;
            const size_t l = list ? strlen(list) : 0;
            if (list && l + 2 < sizeof apart)
                snprintf(list + l, sizeof apart - l, "%s%s-%s", l ? ", " : "", su->species_table[a].name,
                         su->species_table[b].name);
        }
    if (apart[0])
        metro__log(sim, METRO_LOG_WARN, "no potential term acts on these pairs of species, so they do not interact at "
                                        "all (no hard core, no Coulomb between them): %s; give both species of a pair "
                                        "in one term's species list if they should",
                   apart);
    if (twice[0])
        metro__log(sim, METRO_LOG_WARN, "two terms of one plugin act on these pairs of species, whose energy thus "
                                        "counts twice (first [%s] and [%s]): %s",
                   sim->terms[first].section, sim->terms[second].section, twice);
    if (c->bond >= 0 && sim->chain_pattern_n)
        for (int i = 0; i < sim->chain_pattern_n; ++i)
            if (!(c->t[c->bond].mask >> sim->chain_pattern[i] & 1u))
                return metro__fail(err, METRO_EUSAGE, "%s: [system] chain_species: species '%s' is in the chains, but "
                                                      "[%s] (which owns the bonds) does not act on it",
                                   where_of(sim, "system", "chain_species"),
                                   su->species_table[sim->chain_pattern[i]].name, sim->terms[c->bond].section);
    sim->pot_api = &composite_api;
    sim->pot_self = c;
    return METRO_OK;
}

int metro__assign_species(metro_sim *sim, metro_float4 *pos, int replicas, metro_error *err)
{
    const size_t n = (size_t)sim->setup.particles;
    int rc = assign_species(sim, pos, err);
    for (int r = 1; !rc && r < replicas; ++r) memcpy(pos + (size_t)r * n, pos, sizeof *pos * n);
    return rc;
}

metro_ctx *metro__placing_ctx(metro_sim *sim)
{
    return &sim->terms[0];
}

void metro__compose_free(metro_sim *sim)
{
    free(sim->comp);
    sim->comp = NULL;
    free(sim->chain_first);
    free(sim->chain_length);
    free(sim->bond_next);
}

/* ---- the composed energy on the device: generated source ------------------------ */

/* The condition under which term k of a composite adds its pair function
 * for particles a and b: both of its species.  In a run of pair-deltas
 * (o: the moving particle's old position) a short-ranged term is also
 * skipped unless b is nearer than its r_c to a or o.  The squared distances
 * here are rounded apart from the term's own, so the gate is r_c^2 widened
 * by 1e-5 relative (some hundred float ulps): a partner it skips is beyond
 * r_c for the term too, where the term's pair energy is exactly 0.  (An x
 * slab of r_c instead, one compare sharing the long-ranged term's x
 * difference, measured slower on the H100: 1.42-1.50x against 1.38x for
 * the composed brush; bench/NOTES.md.)  Empty when the term always adds. */
/* r_c^2 widened by 1e-5 relative, as a float: the gate of a short-ranged
 * term (pair_cond) and of the runs' second pass */
static float gate2(double rc)
{
    return (float)(rc * rc * (1.0 + 1e-5));
}

static void pair_cond(char *c, size_t n, const metro__compose_desc *d, int k, const char *a, const char *o,
                      const char *b)
{
    unsigned m = d->mask[k];
    int len = 0;
    c[0] = 0;
    if ((m & d->all) != d->all) len = snprintf(c, n, "metro__in(%uu, %s) && metro__in(%uu, %s)", m, b, m, a);
    if (o && d->range[k] > 0) {
        const float g = gate2(d->range[k]);
        snprintf(c + len, n - (size_t)len, "%s(metro__d2(%s, %s) < %.9gf || metro__d2(%s, %s) < %.9gf)",
                 len ? " && " : "", a, b, g, o, b, g);
    }
}

/* Per-pair functions (every sampler's, in loops where the partners differ
 * between lanes): a select, no branch; runs (brush's loop, the partner the
 * same in every lane): a branch, which whole warps skip. */
static void add_if(FILE *f, const char *cond, const char *target, const char *call, int branch)
{
    if (!*cond)
        fprintf(f, "    %s += %s;\n", target, call);
    else if (branch)
        fprintf(f, "    if (%s) %s += %s;\n", cond, target, call);
    else
        fprintf(f, "    %s += (%s) ? %s : 0.0f;\n", target, cond, call);
}

char *metro__compose_text(const metro__compose_desc *d)
{
    const metro_topology *t = d->topology;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fprintf(f, "// generated by metro (core/src/compose.c): the run's energy and bonds\n");
    fprintf(f, "struct metro_pd_sum { float4 t, o; float v[4]; float rest, near; bool flag; };\n");
    fprintf(f, "extern __constant__ unsigned char metro_potential_params[%d];\n", METRO_PARAMS_MAX * METRO_MAX_TERMS);
    for (int k = 0; k < d->n; ++k) {
        int seen = 0;
        for (int j = 0; j < k; ++j) seen |= !strcmp(d->name[j], d->name[k]);
        if (seen) continue;
        const char *n = d->name[k];
        fprintf(f, "extern \"C\" __device__ float %s__pair_energy(const void *, float4, float4);\n", n);
        if (k == d->bond) fprintf(f, "extern \"C\" __device__ float %s__bond_energy(const void *, float4, float4);\n", n);
        fprintf(f, "extern \"C\" __device__ float %s__external_energy(const void *, float4);\n", n);
        fprintf(f, "extern \"C\" __device__ float %s__pair_delta(const void *, float4, float4, float4);\n", n);
        fprintf(f, "extern \"C\" __device__ metro_pd_sum %s__pair_delta_begin(const void *, float4, float4);\n", n);
        fprintf(f, "extern \"C\" __device__ void %s__pair_delta_add(const void *, metro_pd_sum *, float4);\n", n);
        fprintf(f, "extern \"C\" __device__ float %s__pair_delta_end(const void *, const metro_pd_sum *);\n", n);
    }
    fprintf(f, "static __device__ __forceinline__ bool metro__in(unsigned m, float4 a) { return (m >> (int)a.w) & 1u; }\n"
               "static __device__ __forceinline__ float metro__d2(float4 a, float4 b) {\n"
               "    float x = a.x - b.x, y = a.y - b.y, z = a.z - b.z; return x * x + y * y + z * z; }\n");
    /* a lone term is forwarded as it is (its own speed, its own bits);
     * composites gate their terms */
    const int lone = d->n == 1 && (d->mask[0] & d->all) == d->all;
    char P[METRO_MAX_TERMS][64], call[1024], cond[512];
    for (int k = 0; k < d->n; ++k) snprintf(P[k], sizeof P[k], "(metro_potential_params + %d)", k * METRO_PARAMS_MAX);
    static const char *const fn[4] = {"pair_energy(float4 a, float4 b)", "bond_energy(float4 a, float4 b)",
                                      "external_energy(float4 a)", "pair_delta(float4 t, float4 o, float4 b)"};
    for (int w = 0; w < 4; ++w) {
        /* the first term initialises the sum: "0.0f + x" is an FADD the
         * compiler must keep (it turns -0 into +0), one more per pair in
         * every sampler's loop */
        fprintf(f, "extern \"C\" __device__ float metro_%s {\n    float e", fn[w]);
        int first = 1;
        for (int k = 0; k < d->n; ++k) {
            const char *n = d->name[k];
            const int own_bond = w == 1 && k == d->bond;
            if (d->nopair[k] && (w == 0 || w == 3 || (w == 1 && !own_bond))) continue;
            switch (w) {
            case 0: snprintf(call, sizeof call, "%s__pair_energy(%s, a, b)", n, P[k]); break;
            case 1: snprintf(call, sizeof call, "%s__%s_energy(%s, a, b)", n, own_bond ? "bond" : "pair", P[k]); break;
            case 2: snprintf(call, sizeof call, "%s__external_energy(%s, a)", n, P[k]); break;
            default: snprintf(call, sizeof call, "%s__pair_delta(%s, t, o, b)", n, P[k]);
            }
            if (lone)
                cond[0] = 0;
            else if (w == 2)
                snprintf(cond, sizeof cond, (d->mask[k] & d->all) == d->all ? "" : "metro__in(%uu, a)", d->mask[k]);
            else if (own_bond) /* the bond term's whole bonded interaction, no gate */
                snprintf(cond, sizeof cond, (d->mask[k] & d->all) == d->all ? "" : "metro__in(%uu, a) && metro__in(%uu, b)",
                         d->mask[k], d->mask[k]);
            else
                pair_cond(cond, sizeof cond, d, k, w == 3 ? "t" : "a", NULL, "b");
            if (first) {
                if (*cond)
                    fprintf(f, " = (%s) ? %s : 0.0f;\n", cond, call);
                else
                    fprintf(f, " = %s;\n", call);
                first = 0;
            } else {
                add_if(f, cond, "e", call, 0);
            }
        }
        fprintf(f, "%s    return e;\n}\n", first ? " = 0.0f;\n" : "");
    }
    /* runs of pair-deltas: a lone term's own form (one overlap test, a
     * factor out of the sum); a composite keeps the own form of its
     * long-ranged term over every species (where the cost is) in add, and
     * sums the others' gated pair-deltas into rest in the second pass
     * (near/near_add, metro/device.h), which add asks for through the
     * run's least squared distance; without such a term, a plain sum */
    int lead = -1;
    for (int k = 0; k < d->n && lead < 0 && !lone; ++k)
        if ((d->mask[k] & d->all) == d->all && d->range[k] == 0 && !d->nopair[k]) lead = k;
    if (lone || lead >= 0) {
        const int p = lone ? 0 : lead;
        const char *n = d->name[p];
        unsigned reach_mask = 0; /* species of the short-ranged terms */
        double reach = 0;        /* their largest gate; INFINITY: one has no cutoff */
        for (int k = 0; k < d->n && !lone; ++k) {
            if (k == p || d->nopair[k]) continue;
            reach_mask |= d->mask[k];
            reach = d->range[k] > 0 && reach < INFINITY ? fmax(reach, d->range[k]) : INFINITY;
        }
        const int track = reach_mask && reach < INFINITY;
        fprintf(f, "extern \"C\" __device__ metro_pd_sum metro_pair_delta_begin(float4 t, float4 o) {\n"
                   "    metro_pd_sum s = %s__pair_delta_begin(%s, t, o);\n", n, P[p]);
        if (!lone) fprintf(f, "    s.rest = 0.0f;\n");
        if (track) fprintf(f, "    s.near = __int_as_float(0x7f800000);\n"); /* +inf (NVRTC has no math.h) */
        fprintf(f, "    return s;\n}\n"
                   "extern \"C\" __device__ void metro_pair_delta_add(metro_pd_sum *s, float4 b) {\n"
                   "    %s__pair_delta_add(%s, s, b);\n", n, P[p]);
        if (track) fprintf(f, "    s->near = fminf(s->near, fminf(metro__d2(s->t, b), metro__d2(s->o, b)));\n");
        fprintf(f, "}\nextern \"C\" __device__ bool metro_pair_delta_near(const metro_pd_sum *s) {\n    return ");
        if (!reach_mask)
            fprintf(f, "false");
        else {
            if ((reach_mask & d->all) != d->all) fprintf(f, "metro__in(%uu, s->t)%s", reach_mask, track ? " && " : "");
            if (track) fprintf(f, "s->near < %.9gf", gate2(reach));
            else if ((reach_mask & d->all) == d->all) fprintf(f, "true");
        }
        fprintf(f, ";\n}\nextern \"C\" __device__ void metro_pair_delta_near_add(metro_pd_sum *s, float4 b) {\n");
        for (int k = 0; k < d->n && !lone; ++k) {
            if (k == p || d->nopair[k]) continue;
            snprintf(call, sizeof call, "%s__pair_delta(%s, s->t, s->o, b)", d->name[k], P[k]);
            pair_cond(cond, sizeof cond, d, k, "s->t", "s->o", "b");
            add_if(f, cond, "s->rest", call, 1);
        }
        fprintf(f, "}\nextern \"C\" __device__ float metro_pair_delta_end(const metro_pd_sum *s) {\n"
                   "    return %s__pair_delta_end(%s, s)%s;\n}\n", n, P[p], lone ? "" : " + s->rest");
    } else {
        fprintf(f, "extern \"C\" __device__ metro_pd_sum metro_pair_delta_begin(float4 t, float4 o) {\n"
                   "    metro_pd_sum s; s.t = t; s.o = o; s.v[0] = s.v[1] = s.v[2] = s.v[3] = s.rest = s.near = 0.0f; s.flag = false;\n"
                   "    return s;\n}\n"
                   "extern \"C\" __device__ void metro_pair_delta_add(metro_pd_sum *s, float4 b) { s->v[0] += "
                   "metro_pair_delta(s->t, s->o, b); }\n"
                   "extern \"C\" __device__ bool metro_pair_delta_near(const metro_pd_sum *s) { return false; }\n"
                   "extern \"C\" __device__ void metro_pair_delta_near_add(metro_pd_sum *s, float4 b) {}\n"
                   "extern \"C\" __device__ float metro_pair_delta_end(const metro_pd_sum *s) { return s->v[0]; }\n");
    }
    /* every term's device functions, referenced whatever the sampler calls,
     * so that a term missing one fails the link, naming it (it used to fail
     * only under a sampler that called it); a kernel, which the link keeps,
     * never launched */
    fprintf(f, "extern \"C\" __global__ void metro__terms_complete(float *out) {\n"
               "    float4 z; z.x = z.y = z.z = z.w = 0.0f;\n");
    for (int k = 0; k < d->n; ++k) {
        int seen = 0;
        for (int j = 0; j < k; ++j) seen |= !strcmp(d->name[j], d->name[k]);
        if (seen) continue;
        const char *n = d->name[k];
        fprintf(f, "    { metro_pd_sum s = %s__pair_delta_begin(%s, z, z); %s__pair_delta_add(%s, &s, z);\n"
                   "      out[%d] = %s__pair_energy(%s, z, z) + %s__external_energy(%s, z) + %s__pair_delta(%s, z, z, z) + "
                   "%s__pair_delta_end(%s, &s)",
                n, P[k], n, P[k], k, n, P[k], n, P[k], n, P[k], n, P[k]);
        if (k == d->bond) fprintf(f, " + %s__bond_energy(%s, z, z)", n, P[k]);
        fprintf(f, "; }\n");
    }
    fprintf(f, "}\n");
    /* bonds: one chain, or chains of one length, by arithmetic; else a
     * table of the chains' last particles.  false for lo < 0 as well
     * (parallel tempering asks metro_bonded(i - 1) for i = 0). */
    fprintf(f, "extern \"C\" __device__ bool metro_bonded(int lo) {\n");
    int uniform = t && t->chains > 0;
    for (int c = 1; uniform && c < t->chains; ++c) uniform &= t->length[c] == t->length[0];
    if (!t || !t->chains) {
        fprintf(f, "    return false;\n");
    } else if (uniform) {
        long long L = t->length[0], end = (long long)t->chains * L;
        if (t->chains == 1)
            fprintf(f, "    return (unsigned)lo < %lldu;\n", end - 1);
        else
            fprintf(f, "    return (unsigned)lo < %lldu && (unsigned)lo %% %lldu != %lldu;\n", end - 1, L, L - 1);
    } else {
        fprintf(f, "    static const __device__ int last[%d] = {", t->chains);
        for (int c = 0; c < t->chains; ++c) fprintf(f, "%s%d", c ? "," : "", t->first[c] + t->length[c] - 1);
        fprintf(f, "};\n    if (lo < 0) return false;\n    int a = 0, b = %d;\n"
                   "    while (a < b) { int mid = (a + b) / 2; if (last[mid] < lo) a = mid + 1; else b = mid; }\n"
                   "    return a < %d && lo != last[a]; /* chains are contiguous from 0 */\n",
                t->chains, t->chains);
    }
    fprintf(f, "}\n");
    fclose(f);
    return text;
}

char *metro__compose_source(metro_sim *sim)
{
    const metro_setup *su = &sim->setup;
    metro__compose_desc d = {.n = sim->nterms, .bond = sim->bond_term, .topology = &su->topology};
    d.all = su->species ? (1u << su->species) - 1u : 1u;
    for (int k = 0; k < sim->nterms; ++k) {
        d.name[k] = sim->terms[k].plugin->d->name;
        d.mask[k] = sim->comp ? sim->comp->t[k].mask : d.all;
        const metro_potential_api *api = sim->terms[k].plugin->d->api;
        const double rc = api->cutoff ? api->cutoff(sim->terms[k].self) : INFINITY;
        d.nopair[k] = rc == 0;
        d.range[k] = rc > 0 && rc < INFINITY ? rc : 0;
    }
    return metro__compose_text(&d);
}

int metro__compose_check_table(metro_sim *sim, metro_error *err)
{
    const metro_topology *t = &sim->setup.topology;
    int uniform = 1;
    for (int c = 1; c < t->chains; ++c) uniform &= t->length[c] == t->length[0];
    if (!uniform && t->chains > MAX_CHAIN_TABLE && sim->setup.backend == METRO_BACKEND_CUDA)
        return metro__fail(err, METRO_EUSAGE, "%s: [system] chains: %d chains of different lengths; on CUDA at most %d "
                                              "(chains of one length have no limit)",
                           where_of(sim, "system", "chains"), t->chains, MAX_CHAIN_TABLE);
    return METRO_OK;
}
