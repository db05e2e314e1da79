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
 *     included), and the message gives |r| against R - d/2;
 *   - hard cores: pairs closer than (d_i + d_j)/2, found on a cell grid in
 *     O(N) and confirmed by the potential's energy of the pair;
 *   - bonds (chain potentials): each bonded pair alone must have finite
 *     energy (an overstretched FENE bond is infinite);
 *   - finally, for systems small enough to sum directly, the total energy,
 *     and where it is not finite the first particle whose delta() at its
 *     own position is not finite.
 * Every replica starts from the same frame.  The file is read again when a
 * run resumes (the checkpoint then replaces the positions), so it must
 * still be there.
 */
#define _GNU_SOURCE
#include "sim.h"

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
        m[k] = (long)floor((hi[k] - lo[k]) / dmax);
        if (m[k] > mcap) m[k] = mcap;
        if (m[k] < 1) m[k] = 1;
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

int metro__initial_load(metro_sim *sim, metro_error *err)
{
    const char *file = metro__param_string(sim->system, "initial");
    long want = metro__param_int(sim->system, "initial_frame");
    metro__entry *e = metro__config_find(sim->cfg, "system", "initial");
    char key[4300];
    if (e && !strcmp(e->file, "--set"))
        snprintf(key, sizeof key, "--set #%d: [system] initial", e->line);
    else if (e)
        snprintf(key, sizeof key, "%s:%d: [system] initial", e->file, e->line);
    else
        snprintf(key, sizeof key, "%s: [system] initial", sim->cfg->path);

    metro__frame_in f;
    char msg[4096];
    if (metro__frames_read(file, want, &f, msg, sizeof msg))
        return metro__fail(err, METRO_EUSAGE, "%s: %s", key, msg);
    where w;
    snprintf(w.prefix, sizeof w.prefix, "%s: %s: frame %ld of %ld", key, file, f.index, f.frames);
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
        map_species(s, &f, map);
        long count[METRO_MAX_SPECIES] = {0};
        for (int i = 0; i < n; ++i) {
            int k = map[f.type[i]];
            if (k < 0) {
                char names[METRO_MAX_SPECIES * 20] = "";
                for (int j = 0; j < s->species; ++j)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", s->species_table[j].name);
                rc = metro__fail(err, METRO_EUSAGE,
                                 "%s: particle %d has species '%s', which is not one of the potential's (%s): name the "
                                 "species alike in the file and in [potential] (coulomb_hs: names = ...)",
                                 w.prefix, i, f.names[f.type[i]], names);
                goto done;
            }
            count[k]++;
            double z = s->species_table[k].charge;
            if (f.charge && fabs(f.charge[i] - z) > 1e-6 * fmax(1.0, fabs(z))) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d (species %s) has charge %g, but the potential gives %s valence %g",
                                 w.prefix, i, s->species_table[k].name, f.charge[i], s->species_table[k].name, z);
                goto done;
            }
            pos[i] = metro_f4(f.xyz[3 * i], f.xyz[3 * i + 1], f.xyz[3 * i + 2], (float)k);
        }
        for (int k = 0; k < s->species; ++k)
            if (count[k] != s->species_table[k].count) {
                rc = metro__fail(err, METRO_EUSAGE, "%s: holds %ld particles of species %s, the potential's counts ask %ld",
                                 w.prefix, count[k], s->species_table[k].name, s->species_table[k].count);
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
    /* the cell: each particle alone */
    for (int i = 0; i < n; ++i) {
        if (isfinite(alone(sim, &pos[i], 1))) continue;
        int k = s->species > 0 ? (int)pos[i].w : 0;
        double r = sqrt((double)pos[i].x * pos[i].x + (double)pos[i].y * pos[i].y + (double)pos[i].z * pos[i].z);
        double R = 0;
        if (metro__host_api.fact(&sim->terms[0], "cell_radius", &R) && R > 0)
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: particle %d (species %s) at (%g, %g, %g) lies outside the cell: |r| = %.9g, but a centre must "
                             "lie within R - d/2 = %.9g",
                             w.prefix, i, s->species > 0 ? s->species_table[k].name : "-", (double)pos[i].x, (double)pos[i].y,
                             (double)pos[i].z, r, R - (s->species > 0 ? s->species_table[k].diameter / 2 : 0));
        else
            rc = metro__fail(err, METRO_EUSAGE, "%s: particle %d at (%g, %g, %g) has infinite energy on its own", w.prefix, i,
                             (double)pos[i].x, (double)pos[i].y, (double)pos[i].z);
        goto done;
    }
    /* bonds: a pair alone is the system's particles 0 and 1, bonded
     * whenever there are chains (they come first in index order) */
    for (int i = 0; s->topology.chains && i + 1 < n; ++i)
        if (s->topology.bond_next[i] && !isfinite(alone(sim, &pos[i], 2))) {
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: the bond between particles %d and %d is overstretched (length %.6g): the potential gives it "
                             "infinite energy",
                             w.prefix, i, i + 1, dist(&pos[i], &pos[i + 1]));
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
    if (f.partial_tail)
        metro__log(sim, METRO_LOG_WARN, "%s: ends with an incomplete frame (a run killed while writing it); it was ignored",
                   file);
done:
    free(map);
    metro__frame_in_free(&f);
    return rc;
}
