/* condensation — counterion condensation: at every temperature slot, the
 * fraction of the free particles of each species (those in no chain of
 * the topology: counterions, salt) that lie within `distance` of a chain
 * (condensation.h: centre to centre, from any particle of any chain).
 *
 * Every `every` sweeps it counts, for the replica in every slot t, the
 * free particles of each species and those of them near a chain, and
 * records the fraction near / total per species (and, with per_valence,
 * per valence: all free particles of species of that charge together).
 * Slots of the same temperature in several ladders are pooled as in
 * polymer_shape: each ladder's slot is a series of its own, the means are
 * averaged and the errors combine.
 *
 * Which species.  Every species with free particles gets a column,
 * charged or neutral; chain species whose particles all sit in chains get
 * none (a species split between chains and free particles counts only its
 * free ones).  The set is read from the species (w) of the first measured
 * configuration and kept.
 *
 * Refused in create() (exit 2, before anything is written): no chains,
 * no free particles, no species or none with a charge, a distance not
 * > 0.  A system whose free particles are all neutral (the charged
 * species all in chains) is known only from the particles' species, so it
 * fails at the first measurement with the same message.
 *
 * Files written by finish() into the run directory (names after `prefix`):
 *   condensation.csv — one row per temperature, ascending T, columns
 *     T,<name>_fraction,<name>_fraction_err,...,samples
 *     one pair per species with free particles (name = the species' name,
 *     in the species table's order), then with per_valence one pair per
 *     valence of those species (name = z+1, z-1, z+3 ...: the charge in
 *     units of e, descending); <name>_fraction is the mean fraction (0 to
 *     1) of those particles within `distance` of a chain, _err its binning
 *     error (metro/stats.h); samples = measured configurations at that
 *     temperature (all ladders).
 *   condensation.gp, condensation.png — the script and the plot of every
 *     fraction against T with error bars, drawn through host->plot once
 *     the CSV is in place (a warning when gnuplot is missing; the script
 *     stays to be run later).
 *
 * Cost: free particles x chain particles distance tests per slot and
 * measurement, on the host.  It has no device path: on CUDA the core
 * brings the host copies (st->pos, slot_replica) up to date before
 * measure() of an observable without measure_device, as for
 * pair_correlation and trajectory.  The series are kept whole up to
 * max_memory_mb; past that every other sample is dropped and recording
 * continues at twice the interval.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"
#include "metro/stats.h"

#include "condensation.h"

#define CD_MAX_COLS (2 * METRO_MAX_SPECIES) /* species, then valences */
#define CD_SAVE_MAGIC 0x444e4f43u            /* "COND" */
#define CD_SAVE_VERSION 1u

static const metro_param_decl params[] = {
    {"distance", METRO_PARAM_REAL, NULL, 0, 1e9, NULL, "length",
     "a free particle is condensed when its centre is within this distance of the centre of any chain particle "
     "(required; e.g. 1.5 bond lengths, or the Bjerrum length)"},
    {"per_valence", METRO_PARAM_BOOL, "false", 0, 0, NULL, "",
     "also the fraction of all free particles of each valence (species of equal charge together)"},
    {"plots", METRO_PARAM_BOOL, "true", 0, 0, NULL, "", "draw condensation.png with gnuplot"},
    {"max_memory_mb", METRO_PARAM_INT, "64", 1, 1048576, NULL, "MiB", "memory for the time series"},
    {"prefix", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "prepended to the name of every file written (two instances in one run, e.g. two distances)"},
    METRO_PARAM_END};

typedef struct cd {
    const metro_host_api *host;
    metro_ctx *ctx;
    int n, slots, chains, nfree, nspecies;
    int *first, *length, *free_idx;
    double distance;
    int per_valence, plots;
    char prefix[64];
    char name[METRO_MAX_SPECIES][16];
    double charge[METRO_MAX_SPECIES];
    /* the columns, fixed by the first measured configuration (or restore):
     * free particles of each species, then per column its species (>= 0)
     * or -1 for a valence column of charge col_z */
    int known;
    long long free_count[METRO_MAX_SPECIES];
    int ncol;
    int col_species[CD_MAX_COLS];
    double col_z[CD_MAX_COLS];
    char col_name[CD_MAX_COLS][24];
    size_t cap;              /* samples per series before thinning */
    long long measured;      /* measure() calls */
    long long stride;        /* record every stride-th call */
    metro_series *x;         /* slot t, column q at [t * CD_MAX_COLS + q] */
} cd;

static void destroy(void *vself)
{
    cd *self = vself;
    if (!self) return;
    for (size_t i = 0; self->x && i < (size_t)self->slots * CD_MAX_COLS; ++i) metro_series_free(&self->x[i]);
    free(self->x);
    free(self->first);
    free(self->length);
    free(self->free_idx);
    free(self);
}

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *pp, const metro_setup *setup,
                  void **out)
{
    const metro_topology *topo = &setup->topology;
    double distance = host->param_real(pp, "distance");
    if (!(distance > 0))
        return host->fail(ctx, "distance: %g is not > 0 (the centre-to-centre distance from a chain particle "
                               "within which a free particle counts as condensed)",
                          distance);
    const char *pre = host->param_string(pp, "prefix");
    if (strlen(pre) >= 48 || strpbrk(pre, "/'\"\\ "))
        return host->fail(ctx, "prefix: '%s' must be a short file-name prefix (no /, quotes or spaces)", pre);
    if (topo->chains <= 0)
        return host->fail(ctx, "the system has no chains: condensation counts free particles near chains "
                               "([system] chains = ..., with a term that defines bonds such as lj_fene)");
    long in_chains = 0;
    for (int c = 0; c < topo->chains; ++c) in_chains += topo->length[c];
    if (in_chains >= setup->particles)
        return host->fail(ctx, "every one of the %d particles is in a chain: there are no free particles "
                               "(counterions, salt) to condense",
                          setup->particles);
    int charged = 0;
    for (int s = 0; s < setup->species; ++s) charged |= setup->species_table[s].charge != 0;
    if (!charged)
        return host->fail(ctx, "the system has no charged species: condensation counts free charged particles "
                               "(counterions, salt) near the chains; declare [system] species with charges");

    cd *self = calloc(1, sizeof *self);
    if (!self) return host->fail(ctx, "out of memory");
    self->host = host;
    self->ctx = ctx;
    self->n = setup->particles;
    self->slots = setup->replicas;
    self->chains = topo->chains;
    self->nspecies = setup->species;
    self->distance = distance;
    self->per_valence = host->param_bool(pp, "per_valence");
    self->plots = host->param_bool(pp, "plots");
    snprintf(self->prefix, sizeof self->prefix, "%s", pre);
    for (int s = 0; s < self->nspecies; ++s) {
        snprintf(self->name[s], sizeof self->name[s], "%s", setup->species_table[s].name[0] ? setup->species_table[s].name : "s");
        self->charge[s] = setup->species_table[s].charge;
    }
    self->nfree = (int)(setup->particles - in_chains);
    self->first = malloc((size_t)self->chains * sizeof *self->first);
    self->length = malloc((size_t)self->chains * sizeof *self->length);
    self->free_idx = malloc((size_t)self->nfree * sizeof *self->free_idx);
    self->x = calloc((size_t)self->slots * CD_MAX_COLS, sizeof *self->x);
    unsigned char *in = calloc((size_t)setup->particles, 1);
    if (!self->first || !self->length || !self->free_idx || !self->x || !in) {
        free(in);
        destroy(self);
        return host->fail(ctx, "out of memory");
    }
    memcpy(self->first, topo->first, (size_t)self->chains * sizeof *self->first);
    memcpy(self->length, topo->length, (size_t)self->chains * sizeof *self->length);
    for (int c = 0; c < self->chains; ++c)
        for (int k = 0; k < self->length[c]; ++k) in[self->first[c] + k] = 1;
    int k = 0;
    for (int i = 0; i < setup->particles; ++i)
        if (!in[i]) self->free_idx[k++] = i;
    free(in);
    double bytes = (double)host->param_int(pp, "max_memory_mb") * 1048576.0;
    int cols = self->nspecies * (self->per_valence ? 2 : 1);
    double c = bytes / ((double)cols * sizeof(double) * self->slots);
    self->cap = c < 1024 ? 1024 : c > 1e12 ? (size_t)1e12 : (size_t)c;
    self->stride = 1;
    host->log(ctx, METRO_LOG_INFO, "%d free particles near %d chain%s of %ld particles: condensed within %g of a chain "
                                   "particle",
              self->nfree, self->chains, self->chains == 1 ? "" : "s", in_chains, distance);
    *out = self;
    return 0;
}

/* The columns from free_count: each species with free particles, then
 * (per_valence) each of their charges, descending.  Fails when none of
 * them is charged. */
static int columns(cd *self)
{
    int q = 0, charged = 0;
    for (int s = 0; s < self->nspecies; ++s) {
        if (!self->free_count[s]) continue;
        charged |= self->charge[s] != 0;
        self->col_species[q] = s;
        self->col_z[q] = self->charge[s];
        snprintf(self->col_name[q], sizeof self->col_name[q], "%s", self->name[s]);
        ++q;
    }
    if (!charged) {
        char list[256] = "";
        for (int s = 0; s < self->nspecies; ++s)
            if (self->free_count[s])
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", self->name[s]);
        return self->host->fail(self->ctx, "no free charged species: the particles in no chain (%s) are all neutral, "
                                           "so there are no counterions or salt to condense",
                                list);
    }
    if (self->per_valence) {
        int q0 = q;
        for (int s = 0; s < self->nspecies; ++s) {
            if (!self->free_count[s]) continue;
            int j;
            for (j = q0; j < q && self->col_z[j] != self->charge[s]; ++j) {}
            if (j < q) continue;
            /* insert keeping descending charge */
            for (j = q; j > q0 && self->col_z[j - 1] < self->charge[s]; --j) self->col_z[j] = self->col_z[j - 1];
            self->col_z[j] = self->charge[s];
            ++q;
        }
        for (int j = q0; j < q; ++j) {
            self->col_species[j] = -1;
            snprintf(self->col_name[j], sizeof self->col_name[j], "z%+g", self->col_z[j]);
        }
    }
    self->ncol = q;
    self->known = 1;
    return 0;
}

static void thin(metro_series *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i += 2) s->x[j++] = s->x[i];
    s->n = j;
}

static int measure(void *vself, const metro_state *st)
{
    cd *self = vself;
    const metro_host_api *h = self->host;
    if (st->replicas != self->slots) return h->fail(self->ctx, "the number of replicas changed");
    if (self->measured++ % self->stride) return 0;
    if (self->known && self->x[0].n >= self->cap) { /* all series are equally long */
        for (size_t i = 0; i < (size_t)self->slots * CD_MAX_COLS; ++i) thin(&self->x[i]);
        self->stride *= 2;
        h->log(self->ctx, METRO_LOG_INFO, "series full: keeping every %lld-th measurement from now", self->stride);
    }
    for (int t = 0; t < self->slots; ++t) {
        int r = st->slot_replica[t];
        long total[METRO_MAX_SPECIES] = {0}, near[METRO_MAX_SPECIES] = {0};
        metro_condensation_count(st->pos + (size_t)r * self->n, self->free_idx, self->nfree, self->chains,
                                 self->first, self->length, self->distance, self->nspecies, total, near);
        if (!self->known) {
            for (int s = 0; s < self->nspecies; ++s) self->free_count[s] = total[s];
            if (columns(self)) return -1;
        }
        for (int s = 0; s < self->nspecies; ++s)
            if (total[s] != self->free_count[s])
                return h->fail(self->ctx, "replica %d has %ld free particles of species %s, the first measured "
                                          "configuration %lld: the particles' species changed",
                               r, total[s], self->name[s], self->free_count[s]);
        for (int q = 0; q < self->ncol; ++q) {
            long a = 0, b = 0;
            for (int s = 0; s < self->nspecies; ++s)
                if (self->col_species[q] == s || (self->col_species[q] < 0 && self->charge[s] == self->col_z[q]))
                    a += near[s], b += total[s];
            if (metro_series_push(&self->x[(size_t)t * CD_MAX_COLS + q], (double)a / (double)b))
                return h->fail(self->ctx, "out of memory");
        }
    }
    return 0;
}

/* Distinct temperatures of the slots (metro/stats.h). */
static int temperatures(const metro_state *st, double *beta_k, int *kidx)
{
    return metro_temperatures(st->beta, st->replicas, beta_k, kidx);
}

static FILE *out(cd *self, const char *name)
{
    char fn[128];
    snprintf(fn, sizeof fn, "%s%s", self->prefix, name);
    return self->host->open_output(self->ctx, fn);
}

static int write_csv(cd *self, const metro_state *st, const double *beta_k, const int *kidx, int K)
{
    FILE *f = out(self, "condensation.csv");
    if (!f) return -1;
    fprintf(f, "T");
    for (int q = 0; q < self->ncol; ++q) fprintf(f, ",%s_fraction,%s_fraction_err", self->col_name[q], self->col_name[q]);
    fprintf(f, ",samples\n");
    for (int k = 0; k < K; ++k) {
        fprintf(f, "%.9g", 1.0 / beta_k[k]);
        size_t samples = 0;
        for (int q = 0; q < self->ncol; ++q) {
            double m = 0, e2 = 0;
            int L = 0;
            for (int t = 0; t < st->replicas; ++t) {
                if (kidx[t] != k) continue;
                const metro_series *X = &self->x[(size_t)t * CD_MAX_COLS + q];
                double e = metro_binning_error(X->x, X->n, NULL);
                m += metro_mean(X->x, X->n);
                e2 += e * e;
                if (q == 0) samples += X->n;
                ++L;
            }
            /* L independent ladders: the mean of their estimates */
            fprintf(f, ",%.8g,%.4g", m / L, sqrt(e2) / L);
        }
        fprintf(f, ",%zu\n", samples);
    }
    if (fclose(f)) return self->host->fail(self->ctx, "%scondensation.csv: write error", self->prefix);
    return 0;
}

static void plots(cd *self)
{
    FILE *f = out(self, "condensation.gp");
    if (!f) return;
    const char *P = self->prefix;
    fprintf(f,
            "# gnuplot script of the condensation observable; run it in the run directory: gnuplot %scondensation.gp\n"
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 960,640 } else { set terminal png size 960,640 }\n"
            "set datafile separator ','\n"
            "set key top right\nset grid\nset xlabel 'T'\nset ylabel 'fraction condensed'\nset yrange [0:1]\n"
            "set offsets graph 0.03, graph 0.03, 0, 0\n"
            "set title 'Free particles within %g of a chain particle'\n"
            "set output '%scondensation.png'\nplot ",
            P, self->distance, P);
    for (int q = 0; q < self->ncol; ++q)
        fprintf(f, "%s'%scondensation.csv' skip 1 using 1:%d:%d with yerrorlines pt 7 ps 0.6 title '%s%s'",
                q ? ", " : "", P, 2 + 2 * q, 3 + 2 * q, self->col_species[q] >= 0 ? "" : "valence ",
                self->col_name[q]);
    fprintf(f, "\n");
    fclose(f);
    char gp[128];
    snprintf(gp, sizeof gp, "%scondensation.gp", P);
    self->host->plot(self->ctx, gp);
}

static int finish(void *vself, const metro_state *st)
{
    cd *self = vself;
    if (!self->known || self->x[0].n < 1) {
        self->host->log(self->ctx, METRO_LOG_WARN, "no measurements: no %scondensation.csv", self->prefix);
        return 0;
    }
    double *beta_k = malloc((size_t)st->replicas * sizeof *beta_k);
    int *kidx = malloc((size_t)st->replicas * sizeof *kidx);
    if (!beta_k || !kidx) {
        free(beta_k);
        free(kidx);
        return self->host->fail(self->ctx, "out of memory");
    }
    int K = temperatures(st, beta_k, kidx);
    int rc = write_csv(self, st, beta_k, kidx, K);
    if (!rc && self->plots) plots(self);
    free(beta_k);
    free(kidx);
    return rc;
}

/* ---- save / restore ----------------------------------------------------- */

/* head: magic, version, measured, stride, samples per series, known,
 * free particles of each species; then the series of each slot's columns */
enum { H_MAGIC, H_VERSION, H_MEASURED, H_STRIDE, H_N, H_KNOWN, H_FREE, H_LEN = H_FREE + METRO_MAX_SPECIES };

static int save(void *vself)
{
    cd *self = vself;
    const metro_host_api *h = self->host;
    long long head[H_LEN] = {CD_SAVE_MAGIC, CD_SAVE_VERSION, self->measured, self->stride,
                             self->known ? (long long)self->x[0].n : 0, self->known};
    for (int s = 0; s < METRO_MAX_SPECIES; ++s) head[H_FREE + s] = self->free_count[s];
    if (h->save_bytes(self->ctx, head, sizeof head)) return -1;
    for (int t = 0; t < self->slots; ++t)
        for (int q = 0; q < self->ncol; ++q) {
            const metro_series *X = &self->x[(size_t)t * CD_MAX_COLS + q];
            if (h->save_bytes(self->ctx, X->x, X->n * sizeof(double))) return -1;
        }
    return 0;
}

static int restore(void *vself, const void *data, size_t size)
{
    cd *self = vself;
    long long head[H_LEN];
    if (size < sizeof head) return self->host->fail(self->ctx, "checkpoint: truncated");
    memcpy(head, data, sizeof head);
    if (head[H_MAGIC] != CD_SAVE_MAGIC || head[H_VERSION] != CD_SAVE_VERSION || head[H_STRIDE] < 1)
        return self->host->fail(self->ctx, "checkpoint: not a condensation record of version %u", CD_SAVE_VERSION);
    self->known = 0;
    self->ncol = 0;
    if (head[H_KNOWN]) {
        for (int s = 0; s < METRO_MAX_SPECIES; ++s) self->free_count[s] = head[H_FREE + s];
        if (columns(self)) return -1;
    }
    size_t n = (size_t)head[H_N];
    if (size != sizeof head + n * sizeof(double) * (size_t)self->ncol * (size_t)self->slots)
        return self->host->fail(self->ctx, "checkpoint: %zu bytes do not fit %d slots of %d columns", size,
                                self->slots, self->ncol);
    const double *x = (const double *)((const char *)data + sizeof head);
    for (int t = 0; t < self->slots; ++t)
        for (int q = 0; q < self->ncol; ++q) {
            metro_series *X = &self->x[(size_t)t * CD_MAX_COLS + q];
            X->n = 0;
            for (size_t i = 0; i < n; ++i)
                if (metro_series_push(X, x[i])) return self->host->fail(self->ctx, "out of memory");
            x += n;
        }
    self->measured = head[H_MEASURED];
    self->stride = head[H_STRIDE];
    return 0;
}

/* The series (at most one per species and valence per slot), kept whole up
 * to max_memory_mb and thinned past it, and the tables. */
static int memory(void *vself, const metro_setup *setup, size_t *host, size_t *device)
{
    cd *self = vself;
    double m = (double)(setup->every > 0 ? setup->sweeps / setup->every : setup->sweeps) + 1;
    double cols = (double)self->nspecies * (self->per_valence ? 2 : 1);
    double bytes = m * cols * (double)self->slots * sizeof(double);
    double cap = (double)self->cap * cols * (double)self->slots * sizeof(double);
    *host = (size_t)(bytes < cap ? bytes : cap) + (size_t)(2 * self->chains + self->nfree) * sizeof(int);
    *device = 0;
    return 0;
}

static const metro_observable_api api = {METRO_ABI_VERSION, create, destroy, measure, finish, save, restore,
                                         NULL, memory, NULL};

METRO_PLUGIN(observable, "condensation", "1.0.0",
             "per temperature: the fraction of each free species (counterions, salt) within a distance of a chain; "
             "plot",
             params, api)
