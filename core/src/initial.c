/* core/src/initial.c — [system] initial = FILE: the starting configuration
 * from a GSD or extended-XYZ file instead of the potential's placement.
 *
 * The frame is checked against what the potential declared before anything
 * runs, and every refusal names the file, the frame and the particle:
 *   - the particle count against [system] particles;
 *   - species by name against the potential's species table (GSD
 *     particles/types; XYZ the metro_species column, else species), the
 *     count of each, and the charges where the file has them;
 *   - the cell: each particle alone must have finite energy (the
 *     potential's own wall, e.g. coulomb_hs's |r| <= R - d/2, rounding
 *     included), and the message gives |r| against R - d/2, or, for a
 *     centre within the limit that the float test still refuses, the
 *     single-precision |r|² that refused it;
 *   - hard cores: pairs closer than (d_i + d_j)/2, found on a cell grid in
 *     O(N) and confirmed by the potential's energy of the pair;
 *   - bonds (chain potentials): each bonded pair alone must have finite
 *     energy (an overstretched FENE bond is infinite);
 *   - finally, for systems small enough to sum directly, the total energy,
 *     and where it is not finite the first particle whose delta() at its
 *     own position is not finite.
 * Every replica starts from the same frame.
 *
 * The system itself may come from the file (metro__initial_species and
 * _chains, called by compose.c before any term's create(), since terms
 * read the species table there): where [system] declares no species, a
 * composed system takes the GSD frame's particles/types with the charge
 * and diameter the particles of each type agree on; where [system]
 * declares no chains, the frame's bonds/group, which must be linear
 * chains of index neighbours placed first in index order (what
 * metro_topology holds).  Where [system] declares them and the file has
 * them too, they must agree.  The frame is read once and kept for the
 * placement.  A resume reads the file only where [system] leaves the
 * chains (or a composed system's species) to it (the checkpoint's identity
 * records what the file gave, so a resume from a file that gives other
 * species or chains is refused); otherwise the file may be gone by then.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "util.h"

/* Direct total energy as a last check up to this many particles. */
#define INITIAL_DIRECT_MAX 5000

typedef struct where {
    char prefix[4600]; /* "config.ini:12: [system] initial: FILE: frame F" */
} where;

static double dist(const metro_float4 *a, const metro_float4 *b)
{
    double dx = (double)a->x - b->x, dy = (double)a->y - b->y, dz = (double)a->z - b->z;
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* The potential's energy of a few particles alone. */
static double alone(metro_sim *sim, const metro_float4 *p, int n)
{
    return sim->pot_api->total(sim->pot_self, p, n);
}

static int check_overlaps(metro_sim *sim, const metro_float4 *pos, int n, const where *w, metro_error *err)
{
    const metro_setup *s = &sim->setup;
    double dmax = 0;
    for (int k = 0; k < s->species; ++k) dmax = fmax(dmax, s->species_table[k].diameter);
    if (!(dmax > 0) || n < 2) return METRO_OK;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < n; ++i) {
        const float c[3] = {pos[i].x, pos[i].y, pos[i].z};
        for (int k = 0; k < 3; ++k) lo[k] = fmin(lo[k], c[k]), hi[k] = fmax(hi[k], c[k]);
    }
    /* cells at least dmax wide (neighbours within the 27 around), at most
     * about 8n of them */
    long m[3];
    long mcap = (long)cbrt(8.0 * n) + 1;
    for (int k = 0; k < 3; ++k) {
        /* capped before the conversion: a wide spread over a tiny diameter
         * exceeds any long */
        double w = floor((hi[k] - lo[k]) / dmax);
        m[k] = w >= (double)mcap ? mcap : w >= 1 ? (long)w : 1;
    }
    size_t ncell = (size_t)m[0] * (size_t)m[1] * (size_t)m[2];
    int *head = malloc(ncell * sizeof *head), *next = malloc((size_t)n * sizeof *next);
    long *cell = malloc((size_t)n * 3 * sizeof *cell);
    int rc = METRO_OK;
    if (!head || !next || !cell) {
        rc = metro__fail(err, METRO_ERUN, "%s: out of memory for the overlap check of %d particles", w->prefix, n);
        goto done;
    }
    for (size_t k = 0; k < ncell; ++k) head[k] = -1;
    for (int i = 0; i < n; ++i) {
        const float c[3] = {pos[i].x, pos[i].y, pos[i].z};
        for (int k = 0; k < 3; ++k) {
            long v = (long)((c[k] - lo[k]) / (hi[k] - lo[k] > 0 ? hi[k] - lo[k] : 1) * m[k]);
            cell[3 * i + k] = v < 0 ? 0 : v >= m[k] ? m[k] - 1 : v;
        }
        size_t h = ((size_t)cell[3 * i] * m[1] + cell[3 * i + 1]) * m[2] + cell[3 * i + 2];
        next[i] = head[h];
        head[h] = i;
    }
    for (int i = 0; i < n && !rc; ++i) {
        int si = (int)pos[i].w;
        for (long ax = cell[3 * i] - 1; ax <= cell[3 * i] + 1 && !rc; ++ax)
            for (long ay = cell[3 * i + 1] - 1; ay <= cell[3 * i + 1] + 1 && !rc; ++ay)
                for (long az = cell[3 * i + 2] - 1; az <= cell[3 * i + 2] + 1 && !rc; ++az) {
                    if (ax < 0 || ay < 0 || az < 0 || ax >= m[0] || ay >= m[1] || az >= m[2]) continue;
                    for (int j = head[((size_t)ax * m[1] + ay) * m[2] + az]; j >= 0 && !rc; j = next[j]) {
                        if (j <= i) continue;
                        int sj = (int)pos[j].w;
                        double contact = (s->species_table[si].diameter + s->species_table[sj].diameter) / 2;
                        double r = dist(&pos[i], &pos[j]);
                        /* a near miss is the potential's to judge (it
                         * rounds as the run will); in a chain a pair alone
                         * would count as bonded, so there the distance
                         * decides */
                        if (!(r < contact * (1 + 1e-6))) continue;
                        metro_float4 pair[2] = {pos[i], pos[j]};
                        if (!s->topology.chains && isfinite(alone(sim, pair, 2))) continue;
                        if (s->topology.chains && !(r < contact)) continue;
                        rc = metro__fail(err, METRO_EUSAGE,
                                         "%s: particles %d (%s) and %d (%s) overlap: their centres are %.6g apart, "
                                         "their hard cores need at least %.6g",
                                         w->prefix, i, s->species_table[si].name, j, s->species_table[sj].name, r, contact);
                    }
                }
    }
done:
    free(head);
    free(next);
    free(cell);
    return rc;
}

/* Map the file's species names to the potential's species; -1 where a name
 * is not one of them. */
static void map_species(const metro_setup *s, const metro__frame_in *f, int *map)
{
    for (int t = 0; t < f->ntypes; ++t) {
        map[t] = -1;
        for (int k = 0; k < s->species && map[t] < 0; ++k)
            if (!strcmp(f->names[t], s->species_table[k].name)) map[t] = k;
        for (int k = 0; k < s->species && map[t] < 0; ++k)
            if (!strcasecmp(f->names[t], s->species_table[k].name)) map[t] = k;
    }
}

/* "config.ini:12: [system] initial", or the --set that gave it
 * ("--set #1 system.initial=a.gsd: [system] initial"), for name = initial
 * or initial_frame. */
static void system_key(metro_sim *sim, const char *name, char *key, size_t n)
{
    metro__entry *e = metro__config_find(sim->cfg, "system", name);
    snprintf(key, n, "%s: [system] %s", e ? e->where : metro__config_section_where(sim->cfg, "system"), name);
}

static void initial_key(metro_sim *sim, char *key, size_t n)
{
    system_key(sim, "initial", key, n);
}

/* Who declared the species the file is checked against, for messages:
 * [system], else the lone potential (coulomb_hs: valences, names); where
 * to name them, and what a species' charge is called there. */
typedef struct {
    const char *who, *names, *charge;
} owner;

static owner species_owner(const metro_sim *sim)
{
    return *metro__param_string(sim->system, "species")
               ? (owner){"[system]", "[system] species", "charge"}
               : (owner){"the potential", "[potential] (coulomb_hs: names = ...)", "valence"};
}

/* "KEY: FILE: frame F of N", the prefix of every message about the frame. */
static void where_of_frame(metro_sim *sim, const metro__frame_in *f, where *w)
{
    char key[4300];
    initial_key(sim, key, sizeof key);
    snprintf(w->prefix, sizeof w->prefix, "%s: %s: frame %ld of %ld", key, metro__param_string(sim->system, "initial"),
             f->index, f->frames);
}

/* The frame, read now or by metro__initial_read before; the caller owns
 * it (the cache is handed over). */
static int take_frame(metro_sim *sim, metro__frame_in *f, metro_error *err)
{
    if (sim->initial_in) {
        *f = *sim->initial_in;
        free(sim->initial_in);
        sim->initial_in = NULL;
        return METRO_OK;
    }
    char key[4300], msg[4096];
    int rc = metro__frames_read(metro__param_string(sim->system, "initial"),
                                metro__param_int(sim->system, "initial_frame"), f, msg, sizeof msg);
    /* a frame the file does not have is initial_frame's fault */
    system_key(sim, rc == METRO__FRAMES_NO_FRAME ? "initial_frame" : "initial", key, sizeof key);
    return rc ? metro__fail(err, METRO_EUSAGE, "%s: %s", key, msg) : METRO_OK;
}

void metro__initial_free(metro_sim *sim)
{
    if (!sim->initial_in) return;
    metro__frame_in_free(sim->initial_in);
    free(sim->initial_in);
    sim->initial_in = NULL;
}

int metro__initial_read(metro_sim *sim, int composed, metro_error *err)
{
    const char *file = metro__param_string(sim->system, "initial");
    if (!*file) {
        /* a frame of no file: the run would start from the placement while
         * its config says otherwise (the default, -1, is written into every
         * resolved config and means nothing without a file) */
        long fr = metro__param_int(sim->system, "initial_frame");
        if (fr == -1) return METRO_OK;
        char key[4300];
        system_key(sim, "initial_frame", key, sizeof key);
        return metro__fail(err, METRO_EUSAGE, "%s = %ld, but [system] initial names no file: give the file (initial = "
                                              "FILE.gsd or FILE.xyz), or leave initial_frame out",
                           key, fr);
    }
    /* a resume starts from the checkpoint: the file matters only where the
     * system took its species or chains from it */
    int needed = (composed && !*metro__param_string(sim->system, "species")) ||
                 !*metro__param_string(sim->system, "chains");
    if (sim->resuming && !needed) return METRO_OK;
    /* an XYZ frame gives the system nothing (no bonds, no diameters): it
     * is read with the placement, as before (a dry run does not need it) */
    if (metro__frames_format_of(file) == METRO__FRAMES_XYZ) return METRO_OK;
    metro__frame_in *f = metro__xcalloc(1, sizeof *f);
    int rc = take_frame(sim, f, err);
    if (rc) {
        free(f);
        return rc;
    }
    sim->initial_in = f;
    return METRO_OK;
}

/* The name rule of [system] species (compose.c): 1 to 15 of letters,
 * digits, _ + - . */
static int species_name_ok(const char *s)
{
    size_t l = strlen(s);
    if (l < 1 || l >= sizeof ((metro_species *)0)->name) return 0;
    for (; *s; ++s)
        if (!isalnum((unsigned char)*s) && !strchr("_+-.", *s)) return 0;
    return 1;
}

int metro__initial_species(metro_sim *sim, int composed, metro_error *err)
{
    const char *file = metro__param_string(sim->system, "initial");
    const metro__frame_in *f = sim->initial_in;
    if (!*file || !composed) return METRO_OK;
    if (f ? f->format != METRO__FRAMES_GSD : metro__frames_format_of(file) == METRO__FRAMES_XYZ) {
        /* XYZ names species but has no diameters: a composed system whose
         * terms name species must have them declared */
        char key[4300];
        initial_key(sim, key, sizeof key);
        for (int k = 0; k < sim->nterms; ++k)
            if (metro__config_find(sim->cfg, sim->terms[k].section, "species"))
                return metro__fail(err, METRO_EUSAGE,
                                   "%s: %s: the species come from an initial file only when it is GSD (particles/types, "
                                   "charge, diameter); an XYZ file has no diameters: declare the species in [system] "
                                   "(species, charges, diameters, counts), or start from a .gsd file",
                                   key, file);
        return METRO_OK;
    }
    if (!f || !f->explicit_types) return METRO_OK;
    where w;
    where_of_frame(sim, f, &w);
    metro_setup *su = &sim->setup;
    if (f->ntypes > METRO_MAX_SPECIES)
        return metro__fail(err, METRO_EUSAGE, "%s: particles/types names %d types, metro holds at most %d species", w.prefix,
                           f->ntypes, METRO_MAX_SPECIES);
    for (int t = 0; t < f->ntypes; ++t) {
        char nm[300];
        if (!species_name_ok(f->names[t]))
            return metro__fail(err, METRO_EUSAGE, "%s: particles/types: '%s' is not a species name (1 to %zu of letters, "
                                                  "digits, _ + - .)",
                               w.prefix, metro__frames_shown(f->names[t], nm, sizeof nm), sizeof su->species_table[0].name - 1);
        for (int u = 0; u < t; ++u)
            if (!strcmp(f->names[u], f->names[t]))
                return metro__fail(err, METRO_EUSAGE, "%s: particles/types: '%s' is named twice", w.prefix, f->names[t]);
    }
    /* each type's charge and diameter: its first particle's, which every
     * other particle of the type must repeat (a species has one of each);
     * the schema's defaults where the file has none (0, 1) */
    int first[METRO_MAX_SPECIES];
    for (int t = 0; t < f->ntypes; ++t) {
        metro_species *sp = &su->species_table[t];
        memset(sp, 0, sizeof *sp);
        snprintf(sp->name, sizeof sp->name, "%s", f->names[t]);
        sp->diameter = 1.0;
        first[t] = -1;
    }
    for (int i = 0; i < f->particles; ++i) {
        int t = f->type[i];
        metro_species *sp = &su->species_table[t];
        double q = f->charge ? f->charge[i] : 0.0, d = f->diameter ? f->diameter[i] : 1.0;
        /* before the comparisons, which a NaN would pass */
        if (!(d >= 0) || !isfinite(d) || !isfinite(q))
            return metro__fail(err, METRO_EUSAGE, "%s: particle %d (type %s) has charge %g and diameter %g (allowed: finite, "
                                                  "the diameter 0 or more)",
                               w.prefix, i, sp->name, q, d);
        if (first[t] < 0) {
            first[t] = i;
            sp->charge = q;
            sp->diameter = d;
        } else if (q != sp->charge || d != sp->diameter) {
            int qd = q != sp->charge;
            return metro__fail(err, METRO_EUSAGE,
                               "%s: particle %d (type %s) has %s %g, but particle %d of the same type has %g: the "
                               "system's species come from this file ([system] declares none), and a species has one "
                               "charge and one diameter (give the types apart, or declare the species in [system])",
                               w.prefix, i, sp->name, qd ? "charge" : "diameter", qd ? q : d, first[t],
                               qd ? sp->charge : sp->diameter);
        }
        sp->count++;
    }
    su->species = f->ntypes;
    long np = metro__param_int(sim->system, "particles");
    if (np == 0) {
        su->particles = f->particles;
    } else if (np != f->particles) {
        return metro__fail(err, METRO_EUSAGE, "%s: holds %d particles, but [system] particles = %ld", w.prefix, f->particles,
                           np);
    }
    sim->initial_species = 1;
    return METRO_OK;
}

#define ALLOWED_BONDS                                                                                                  \
    "(allowed: linear chains, each bond joining index neighbours i and i+1, the chains first in index order and the "  \
    "particles without bonds after them)"

/* The frame's bonds as chains (first, length: heap), or a refusal naming
 * the bond. */
static int bonds_to_chains(const metro__frame_in *f, const where *w, int **first_out, int **length_out, int *chains_out,
                           metro_error *err)
{
    const int n = f->particles;
    unsigned char *deg = calloc((size_t)n + 1, 1), *next = calloc((size_t)n + 1, 1);
    int *first = NULL, *length = NULL, chains = 0, rc = METRO_OK;
    if (!deg || !next) {
        rc = metro__fail(err, METRO_ERUN, "%s: out of memory for %ld bonds", w->prefix, f->bonds);
        goto done;
    }
    for (long k = 0; k < f->bonds; ++k) {
        long long a = f->bond[2 * k], b = f->bond[2 * k + 1];
        if (a < 0 || b < 0 || a >= n || b >= n) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: bond %ld joins particles %lld and %lld, but the frame has %d particles",
                             w->prefix, k, a, b, n);
            goto done;
        }
        long long lo = a < b ? a : b, hi = a < b ? b : a;
        if (a == b) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: bond %ld joins particle %lld to itself " ALLOWED_BONDS, w->prefix, k, a);
            goto done;
        }
        if (deg[a] == 2 || deg[b] == 2) {
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: bond %ld (particles %lld and %lld) gives particle %lld a third bond: a branched "
                             "molecule, which metro cannot hold " ALLOWED_BONDS,
                             w->prefix, k, a, b, deg[a] == 2 ? a : b);
            goto done;
        }
        if (hi != lo + 1) {
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: bond %ld joins particles %lld and %lld, which are not neighbours in index order " ALLOWED_BONDS,
                             w->prefix, k, a, b);
            goto done;
        }
        if (next[lo]) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: bond %ld joins particles %lld and %lld a second time", w->prefix, k, a,
                             b);
            goto done;
        }
        next[lo] = 1;
        deg[a]++, deg[b]++;
    }
    /* chains first: no bond beyond the first particle without one */
    int free_at = 0;
    while (free_at < n && deg[free_at]) ++free_at;
    for (long k = 0; k < f->bonds; ++k) {
        long long a = f->bond[2 * k], b = f->bond[2 * k + 1];
        if ((a < b ? a : b) > free_at) {
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: bond %ld (particles %lld and %lld) lies after particle %d, which has no bond: the chains "
                             "must come first in index order " ALLOWED_BONDS,
                             w->prefix, k, a, b, free_at);
            goto done;
        }
    }
    int cap = 0;
    for (int i = 0; i < free_at;) {
        int j = i;
        while (next[j]) ++j; /* the chain i .. j */
        if (chains == cap) {
            cap = cap ? 2 * cap : 16;
            first = metro__xrealloc(first, sizeof(int) * (size_t)cap);
            length = metro__xrealloc(length, sizeof(int) * (size_t)cap);
        }
        first[chains] = i;
        length[chains++] = j - i + 1;
        i = j + 1;
    }
done:
    free(deg);
    free(next);
    if (rc) {
        free(first);
        free(length);
        return rc;
    }
    *first_out = first;
    *length_out = length;
    *chains_out = chains;
    return METRO_OK;
}

int metro__initial_chains(metro_sim *sim, metro_error *err)
{
    const metro__frame_in *f = sim->initial_in;
    if (!f || f->bonds == 0) return METRO_OK;
    where w;
    where_of_frame(sim, f, &w);
    metro_setup *su = &sim->setup;
    if (f->particles != su->particles)
        return metro__fail(err, METRO_EUSAGE, "%s: holds %d particles, but [system] particles = %d", w.prefix, f->particles,
                           su->particles);
    int *first, *length, chains;
    int rc = bonds_to_chains(f, &w, &first, &length, &chains, err);
    if (rc) return rc;
    metro_topology *t = &su->topology;
    if (!t->chains) {
        free(sim->chain_first);
        free(sim->chain_length);
        sim->chain_first = first;
        sim->chain_length = length;
        t->chains = chains;
        sim->initial_chains = 1;
        return METRO_OK;
    }
    /* [system] chains as well: the same chains, or a refusal at the first
     * that differs */
    int c = 0;
    while (c < chains && c < t->chains && first[c] == sim->chain_first[c] && length[c] == sim->chain_length[c]) ++c;
    if (c < chains || c < t->chains) {
        char fil[96], sys[96];
        if (c < chains) snprintf(fil, sizeof fil, "particles %d to %d", first[c], first[c] + length[c] - 1);
        else snprintf(fil, sizeof fil, "none (the file's bonds make %d chains)", chains);
        if (c < t->chains)
            snprintf(sys, sizeof sys, "particles %d to %d", sim->chain_first[c],
                     sim->chain_first[c] + sim->chain_length[c] - 1);
        else
            snprintf(sys, sizeof sys, "none ([system] chains makes %d)", t->chains);
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: the file's bonds do not make the chains of [system] chains = %s: chain %d is %s in the "
                         "file, %s in [system] (declare the chains in one place: leave chains out of [system] to take "
                         "the file's)",
                         w.prefix, metro__param_string(sim->system, "chains"), c, fil, sys);
    }
    free(first);
    free(length);
    return rc;
}

int metro__initial_load(metro_sim *sim, metro_error *err)
{
    const char *file = metro__param_string(sim->system, "initial");
    metro__frame_in f;
    int rc0 = take_frame(sim, &f, err);
    if (rc0) return rc0;
    where w;
    where_of_frame(sim, &f, &w);
    const metro_setup *s = &sim->setup;
    metro_state *st = &sim->st;
    const int n = st->particles;
    int rc = METRO_OK;
    int *map = NULL;
    metro_float4 *pos = st->pos; /* replica 0 first, copied to the others at the end */
    if (f.particles != n) {
        rc = metro__fail(err, METRO_EUSAGE, "%s: holds %d particles, but [system] particles = %d", w.prefix, f.particles, n);
        goto done;
    }
    map = malloc(sizeof *map * (size_t)(f.ntypes ? f.ntypes : 1));
    if (!map) {
        rc = metro__fail(err, METRO_ERUN, "%s: out of memory", w.prefix);
        goto done;
    }
    if (s->species > 0) {
        const owner o = species_owner(sim);
        map_species(s, &f, map);
        long count[METRO_MAX_SPECIES] = {0};
        for (int i = 0; i < n; ++i) {
            int k = map[f.type[i]];
            if (k < 0) {
                char names[METRO_MAX_SPECIES * 20] = "", nm[300];
                for (int j = 0; j < s->species; ++j)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", s->species_table[j].name);
                rc = metro__fail(err, METRO_EUSAGE,
                                 "%s: particle %d has species '%s', which is not one of %s's (%s): name the species "
                                 "alike in the file and in %s",
                                 w.prefix, i, metro__frames_shown(f.names[f.type[i]], nm, sizeof nm), o.who, names,
                                 o.names);
                goto done;
            }
            count[k]++;
            /* "not within", so that a NaN (the reader refuses them) would
             * be refused here too */
            double z = s->species_table[k].charge;
            if (f.charge && !(fabs(f.charge[i] - z) <= 1e-6 * fmax(1.0, fabs(z)))) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d (species %s) has charge %g, but %s gives %s %s %g",
                                 w.prefix, i, s->species_table[k].name, f.charge[i], o.who, s->species_table[k].name,
                                 o.charge, z);
                goto done;
            }
            double d = s->species_table[k].diameter;
            if (f.diameter && !(fabs(f.diameter[i] - d) <= 1e-6 * fmax(1.0, d))) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d (species %s) has diameter %g, but %s gives %s diameter %g",
                                 w.prefix, i, s->species_table[k].name, f.diameter[i], o.who,
                                 s->species_table[k].name, d);
                goto done;
            }
            pos[i] = metro_f4(f.xyz[3 * i], f.xyz[3 * i + 1], f.xyz[3 * i + 2], (float)k);
        }
        /* nothing to check against is said, not passed over: gsd.hoomd
         * writes no chunk whose values are all the schema's default (charge
         * 0, diameter 1), so such a file is read as giving none */
        if (!f.charge || !f.diameter)
            metro__log(sim, METRO_LOG_INFO, "%s: gives no %s%s%s (%s); %s's are used", w.prefix, f.charge ? "" : "charges",
                       !f.charge && !f.diameter ? " or " : "", f.diameter ? "" : "diameters",
                       metro__frames_format_of(file) == METRO__FRAMES_XYZ
                           ? "an XYZ file has no diameters, and charges only in a column of its own"
                           : "a GSD file leaves out a chunk whose values are all the schema's default, charge 0 and "
                             "diameter 1",
                       o.who);
        for (int k = 0; k < s->species; ++k)
            if (count[k] != s->species_table[k].count) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: holds %ld particles of species %s, %s's counts ask %ld",
                                 w.prefix, count[k], s->species_table[k].name, o.who,
                                 s->species_table[k].count);
                goto done;
            }
    } else {
        for (int i = 0; i < n; ++i) {
            if (f.charge && f.charge[i] != 0) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d has charge %g, but the potential (%s) has no charges",
                                 w.prefix, i, f.charge[i], sim->pot_name);
                goto done;
            }
            pos[i] = metro_f4(f.xyz[3 * i], f.xyz[3 * i + 1], f.xyz[3 * i + 2], 0.0f);
        }
    }
    /* the species along the chains: [system] chain_species where given,
     * and in any case species the term owning the bonds acts on (else the
     * bond would silently be no bond) */
    for (int c = 0; s->species > 0 && c < s->topology.chains; ++c)
        for (int k = 0; k < s->topology.length[c]; ++k) {
            int i = s->topology.first[c] + k, sp = (int)pos[i].w;
            if (sim->chain_pattern_n && sp != sim->chain_pattern[k % sim->chain_pattern_n]) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d (monomer %d of chain %d) has species %s, but [system] "
                                                    "chain_species gives %s there",
                                 w.prefix, i, k, c, s->species_table[sp].name,
                                 s->species_table[sim->chain_pattern[k % sim->chain_pattern_n]].name);
                goto done;
            }
            const metro_ctx *bt = sim->bond_term >= 0 ? &sim->terms[sim->bond_term] : NULL;
            if (bt && !((bt->mask >> sp) & 1u)) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d (monomer %d of chain %d) has species %s, but [%s] (%s, "
                                                    "which owns the bonds) does not act on it",
                                 w.prefix, i, k, c, s->species_table[sp].name, bt->section, bt->plugin->d->name);
                goto done;
            }
        }
    /* the cell: each particle alone */
    for (int i = 0; i < n; ++i) {
        if (isfinite(alone(sim, &pos[i], 1))) continue;
        int k = s->species > 0 ? (int)pos[i].w : 0;
        double r = sqrt((double)pos[i].x * pos[i].x + (double)pos[i].y * pos[i].y + (double)pos[i].z * pos[i].z);
        double R = 0;
        if (metro__host_api.fact(&sim->terms[0], "cell_radius", &R) && R > 0) {
            const double lim = R - (s->species > 0 ? s->species_table[k].diameter / 2 : 0);
            /* The potential tests |r|² in single precision (coulomb_hs:
             * x² + y² + z² > (R - d/2)² in float), so a centre on the
             * sphere, |r| = 98 - 1e-7 in double, can round to 9604.001 >
             * 9604 and be refused: then the exact |r| is within the limit,
             * and a message giving only it against R - d/2 contradicted
             * itself.  It says what the float test saw instead. */
            /* in coulomb_hs's order, (x² + y²) + z², each step in float */
            volatile float r2f = pos[i].x * pos[i].x + pos[i].y * pos[i].y;
            r2f = r2f + pos[i].z * pos[i].z;
            if (r <= lim && (double)r2f <= lim * lim)
                /* within the sphere in float too: another wall refused it
                 * (a term's external()), not the cell's rounding */
                rc = metro__fail(err, METRO_EUSAGE,
                                 "%s: particle %d (species %s) at (%g, %g, %g) has infinite energy on its own, though it "
                                 "lies in the cell (|r| = %.9g, within R - d/2 = %.9g): a term's external() forbids it there",
                                 w.prefix, i, s->species > 0 ? s->species_table[k].name : "-", (double)pos[i].x,
                                 (double)pos[i].y, (double)pos[i].z, r, lim);
            else if (r <= lim)
                rc = metro__fail(err, METRO_EUSAGE,
                                 "%s: particle %d (species %s) at (%.9g, %.9g, %.9g) lies outside the cell as the potential "
                                 "tests it, in single precision: |r| = %.9g is within R - d/2 = %.9g, but |r|^2 rounds to "
                                 "%.9g in single precision (|r| = %.9g), beyond (R - d/2)^2 = %.9g; move it inward (by about "
                                 "%.2g)",
                                 w.prefix, i, s->species > 0 ? s->species_table[k].name : "-", (double)pos[i].x,
                                 (double)pos[i].y, (double)pos[i].z, r, lim, (double)r2f, sqrt((double)r2f), lim * lim,
                                 4 * (double)FLT_EPSILON * lim);
            else
                rc = metro__fail(err, METRO_EUSAGE,
                                 "%s: particle %d (species %s) at (%g, %g, %g) lies outside the cell: |r| = %.9g, but a centre "
                                 "must lie within R - d/2 = %.9g",
                                 w.prefix, i, s->species > 0 ? s->species_table[k].name : "-", (double)pos[i].x,
                                 (double)pos[i].y, (double)pos[i].z, r, lim);
        } else
            rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d at (%g, %g, %g) has infinite energy on its own", w.prefix, i,
                             (double)pos[i].x, (double)pos[i].y, (double)pos[i].z);
        goto done;
    }
    /* bonds: a pair alone is the system's particles 0 and 1, bonded
     * whenever there are chains (they come first in index order) */
    for (int i = 0; s->topology.chains && i + 1 < n; ++i)
        if (s->topology.bond_next[i] && !isfinite(alone(sim, &pos[i], 2))) {
            /* too short is a hard core's doing, not the bond's */
            const double l = dist(&pos[i], &pos[i + 1]);
            const double contact = s->species > 0 ? 0.5 * (s->species_table[(int)pos[i].w].diameter +
                                                          s->species_table[(int)pos[i + 1].w].diameter)
                                                  : 0.0;
            char why[160];
            if (l < contact)
                snprintf(why, sizeof why, "it lies inside their hard-core contact %.6g", contact);
            else
                snprintf(why, sizeof why, "overstretched");
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: the bond between particles %d and %d (length %.6g) has infinite energy: %s", w.prefix, i,
                             i + 1, l, why);
            goto done;
        }
    if ((rc = check_overlaps(sim, pos, n, &w, err))) goto done;
    /* anything else the potential refuses, where a direct sum is cheap */
    if (n <= INITIAL_DIRECT_MAX && !isfinite(alone(sim, pos, n))) {
        int bad = 0;
        while (bad < n && isfinite(sim->pot_api->delta(sim->pot_self, pos, n, bad, pos[bad]))) ++bad;
        if (bad < n)
            rc = metro__fail(err, METRO_EUSAGE, "%s: the potential gives this configuration infinite energy, first at particle %d",
                             w.prefix, bad);
        else
            rc = metro__fail(err, METRO_EUSAGE, "%s: the potential gives this configuration infinite energy", w.prefix);
        goto done;
    }
    for (int r = 1; r < st->replicas; ++r) memcpy(st->pos + (size_t)r * n, pos, sizeof *pos * (size_t)n);
    if (f.step >= 0)
        metro__log(sim, METRO_LOG_INFO, "initial configuration: %s, frame %ld of %ld (written at sweep %lld)", file, f.index,
                   f.frames, f.step);
    else
        metro__log(sim, METRO_LOG_INFO, "initial configuration: %s, frame %ld of %ld", file, f.index, f.frames);
    if (sim->initial_species || sim->initial_chains) {
        char what[512] = "";
        for (int k = 0; sim->initial_species && k < s->species; ++k)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s (%ld, charge %g, diameter %g)", k ? ", " : "species ",
                     s->species_table[k].name, s->species_table[k].count, s->species_table[k].charge,
                     s->species_table[k].diameter);
        if (sim->initial_chains)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d chains", *what ? "; " : "", s->topology.chains);
        metro__log(sim, METRO_LOG_INFO, "the system from %s ([system] declares none): %s", file, what);
    }
    if (f.partial_tail)
        metro__log(sim, METRO_LOG_WARN, "%s: ends with an incomplete frame, ignored (a run killed while writing it leaves one; in a "
                                        "file made by hand, a frame short of a line)",
                   file);
done:
    free(map);
    metro__frame_in_free(&f);
    return rc;
}
