/* core/src/ensemble.c — many independent systems of one config in one
 * process: `[run] systems = K` (K copies, seeds seed, seed+1, ...) or
 * `[run] scan = SECTION.KEY: v1, v2, ...` (one system per value, all with
 * the run's seed).
 *
 * Each system is a whole run of its own — its own seed, random streams,
 * run directory RUNDIR/system_NNN (config.ini, log, results, checkpoint) —
 * so system k is, bit for bit, the run `metro run CONFIG --set
 * run.seed=SEED_k [--set SECTION.KEY=v_k]` would give.  They advance
 * together: every system runs in its own host thread on its own CUDA
 * stream, so on a GPU their launches overlap and fill the device that one
 * small system leaves idle (brush at N = 8192 keeps about 8% of an H100's
 * SMs busy); on the CPU the threads share the cores.  Before they start,
 * a sampler with join() (plugin ABI 3) is offered this process's systems
 * and may advance them in the same launches (brush: one launch per cycle
 * of all systems of one size and layout, samplers/brush/brush_batch.h);
 * a system's thread leaves that group as soon as its run ends, so it
 * never holds the others up.
 *
 * Nothing is written until every system has been validated (each is first
 * created as a dry run).  At the end the core writes, beside the systems,
 * one combined table per small result file (at most 4096 rows, the same
 * shape in every system): ensemble_FILE.csv with the mean and the standard
 * error across systems of every numeric column, or for a scan
 * scan_FILE.csv with the scanned value in front of each system's rows.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ranks.h"
#include "util.h"

#define MAX_SYSTEMS 4096

typedef struct ensemble {
    int k;                 /* systems */
    long long seed;
    char scan_key[256];    /* "section.key" of a scan, "" for copies */
    char scan_where[1200]; /* the scan's place ("FILE:LINE" or its --set), for messages */
    char **values;         /* scan values, k of them */
    char dir[1024];
} ensemble;

static void free_ensemble(ensemble *e)
{
    for (int i = 0; e->values && i < e->k; ++i) free(e->values[i]);
    free(e->values);
}

/* Whether the n bytes at a name the key `key` (as metro__config_name
 * writes it). */
static int same_key(const char *a, size_t n, const char *key)
{
    char got[512];
    return metro__config_name(a, n, got, sizeof got) && !strcmp(got, key);
}

/* Whether the section of SECTION.KEY is a plugin's in the config. */
static int has_section(metro__config *cfg, const char *key)
{
    char sec[512];
    snprintf(sec, sizeof sec, "%.*s", (int)(strrchr(key, '.') - key), key);
    return metro__config_find(cfg, sec, "plugin") != NULL;
}

/* What [run] systems / scan / seed say, from the config file and --set. */
static int read_plan(const metro_options *opt, ensemble *e, metro_error *err)
{
    memset(e, 0, sizeof *e);
    e->k = 1;
    e->seed = 1;
    metro__config *cfg = NULL;
    const char *path = opt->config_path ? opt->config_path : "<text>";
    int rc = opt->config_text ? metro__config_parse(path, opt->config_text, &cfg, err)
                              : metro__config_read(path, &cfg, err);
    for (int i = 0; !rc && i < opt->nsets; ++i)
        rc |= metro__config_set(cfg, opt->sets[i], i + 1, opt->set_where ? opt->set_where[i] : NULL, err);
    if (!rc && opt->resume) rc = metro__config_resume_check(cfg, err);
    if (rc) {
        metro__config_free(cfg);
        return METRO_EUSAGE;
    }
    metro__entry *sys = metro__config_find(cfg, "run", "systems");
    metro__entry *scan = metro__config_find(cfg, "run", "scan");
    metro__entry *seed = metro__config_find(cfg, "run", "seed");
    if (seed) e->seed = strtoll(seed->value, NULL, 10);
    if (sys) {
        char *end;
        long v = strtol(sys->value, &end, 10);
        if (end == sys->value || *end || v < 1 || v > MAX_SYSTEMS)
            rc = metro__fail(err, METRO_EUSAGE, "%s: [run] systems: '%s' is not a number of systems (integer in [1, %d])",
                             sys->where, sys->value, MAX_SYSTEMS);
        else
            e->k = (int)v;
    }
    if (!rc && scan && scan->value[0]) {
        const char *colon = strchr(scan->value, ':');
        size_t kl = colon ? (size_t)(colon - scan->value) : 0;
        /* as a --set names it ("run . sweeps" is run.sweeps): the systems'
         * sets, the tables' column and the resume's checks all compare it */
        char key[sizeof e->scan_key];
        if (!colon || !metro__config_name(scan->value, kl, key, sizeof key)) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: '%s' is not SECTION.KEY: v1, v2, ... (e.g. "
                                                "potential.concentration: 0.001, 0.002)", scan->where, scan->value);
        } else if (!strcmp(key, "run.scan") || !strcmp(key, "run.systems") || !strcmp(key, "run.output")) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: %s shapes the ensemble itself and cannot be scanned "
                                                "(allowed: any other SECTION.KEY)", scan->where, key);
        } else if (sys && e->k > 1) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: give systems = K or scan, not both (a scan has one "
                                                "system per value)", scan->where);
        } else if (strncmp(key, "run.", 4) && strncmp(key, "system.", 7) && !has_section(cfg, key)) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: the config has no section [%.*s] to scan a key of (a "
                                                "scan sets a key of [run], [system] or a plugin's section)",
                             scan->where, (int)(strrchr(key, '.') - key), key);
        } else {
            memcpy(e->scan_key, key, sizeof key);
            snprintf(e->scan_where, sizeof e->scan_where, "%s", scan->where);
            e->k = 0;
            char *list = metro__strdup(colon + 1);
            /* every value between the commas is a system: an empty one
             * ("0.5,,0.6") or one past the limit is refused, not skipped */
            int item = 0, blank = 1;
            for (const char *c = list; *c; ++c) blank &= *c == ' ' || *c == '\t';
            for (char *v = list, *next; !rc && !blank && v; v = next, ++item) {
                next = strchr(v, ',');
                if (next) *next++ = 0;
                while (*v == ' ' || *v == '\t') ++v;
                size_t l = strlen(v);
                while (l && (v[l - 1] == ' ' || v[l - 1] == '\t')) v[--l] = 0;
                if (!l)
                    rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: value %d after '%s:' is empty (values are "
                                                        "separated by one comma)", scan->where, item + 1, e->scan_key);
                else if (e->k >= MAX_SYSTEMS)
                    rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: more than %d values (a system each)",
                                     scan->where, MAX_SYSTEMS);
                else {
                    e->values = metro__xrealloc(e->values, sizeof *e->values * (size_t)(e->k + 1));
                    e->values[e->k++] = metro__strdup(v);
                }
            }
            free(list);
            if (!rc && e->k < 1)
                rc = metro__fail(err, METRO_EUSAGE, "%s: [run] scan: no values after '%s:'", scan->where,
                                 e->scan_key);
        }
    }
    metro__config_free(cfg);
    /* a refusal after some values were read (an empty one) keeps none */
    if (rc) {
        free_ensemble(e);
        e->values = NULL;
        e->k = 0;
    }
    return rc;
}

int metro_ensemble_systems(const metro_options *opt, metro_error *err)
{
    if (opt->resume) {
        /* an ensemble's run directory holds system_000/ (with or without
         * its checkpoint: a system that has none is named by its own
         * resume, not taken for a single run that has none) */
        char probe[4200];
        struct stat sb;
        snprintf(probe, sizeof probe, "%s/system_000", opt->output ? opt->output : "");
        if (stat(probe, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
        int k = 0;
        for (;; ++k) {
            snprintf(probe, sizeof probe, "%s/system_%03d", opt->output, k);
            if (stat(probe, &sb) != 0) break;
        }
        /* the config as given (its --set only as comments) with the
         * resume's own --set, which may not change the layout */
        ensemble e;
        if (read_plan(opt, &e, err)) return -1;
        free_ensemble(&e);
        /* the folders are the ensemble, and its config.ini's first line
         * says how many it started with (written below, in the run) */
        int started = 0;
        FILE *f = fopen(opt->config_path, "r");
        if (f) {
            char line[512];
            if (fgets(line, sizeof line, f) && !strstr(line, "an ensemble of")) line[0] = 0;
            const char *p = strstr(line, "an ensemble of ");
            if (p) started = atoi(p + 15);
            fclose(f);
        }
        /* k counts the folders up to the first gap: a missing one is
         * named as such, wherever it is (one in the middle was counted as
         * the end: "1 system folders are there (system_000 ... system_000)") */
        if (started > 0 && k < started) {
            metro__fail(err, METRO_EUSAGE,
                        "%s: an ensemble of %d systems (its config.ini's first line), but its folder system_%03d is "
                        "missing: a resume continues the systems it started with, so restore it",
                        opt->output, started, k);
            return -1;
        }
        if (started > 0 && k > started) {
            metro__fail(err, METRO_EUSAGE,
                        "%s: an ensemble of %d systems (its config.ini's first line), but %d system folders are there "
                        "(system_000 ... system_%03d): a resume continues the systems it started with, so remove the "
                        "extra ones (system_%03d on)",
                        opt->output, started, k, k - 1, started);
            return -1;
        }
        return metro__ensemble_resumable(opt->output, k, err) ? -1 : k;
    }
    ensemble e;
    if (read_plan(opt, &e, err)) return -1;
    free_ensemble(&e);
    /* a scan is an ensemble even of one value: its value must reach the
     * system (run alone, the scan's key would keep the config's value) */
    return e.k > 1 || e.scan_key[0] ? e.k : 0;
}

/* The options of system i: the run's, with its seed, its directory and
 * (scan) its value set, and systems/scan cleared so it is one run. */
typedef struct sys_opt {
    metro_options o;
    const char **sets, **where;
    char seed[64], out[1200], value[1400], cfg[1300], value_where[1500];
} sys_opt;

static void system_options(const metro_options *opt, const ensemble *e, int i, sys_opt *s)
{
    s->o = *opt;
    s->o.quiet = 1;
    s->o.whole = 1; /* under MPI a system belongs to one rank, whole */
    s->sets = metro__xcalloc((size_t)opt->nsets + 4, sizeof *s->sets);
    s->where = metro__xcalloc((size_t)opt->nsets + 4, sizeof *s->where);
    for (int j = 0; j < opt->nsets; ++j) {
        s->sets[j] = opt->sets[j];
        s->where[j] = opt->set_where ? opt->set_where[j] : NULL;
    }
    int n = opt->nsets;
    snprintf(s->out, sizeof s->out, "%s/system_%03d", e->dir, i);
    s->o.output = s->out;
    if (!opt->resume) {
        snprintf(s->seed, sizeof s->seed, "run.seed=%lld", e->seed + (e->scan_key[0] ? 0 : i));
        s->sets[n++] = s->seed;
        s->sets[n++] = "run.systems=1";
        s->sets[n++] = "run.scan=";
        if (e->scan_key[0]) {
            snprintf(s->value, sizeof s->value, "%s=%s", e->scan_key, e->values[i]);
            /* its errors name the scan, not a --set the user never gave */
            snprintf(s->value_where, sizeof s->value_where, "%s ([run] scan, value %d: %s)", e->scan_where, i + 1,
                     e->values[i]);
            s->where[n] = s->value_where;
            s->sets[n++] = s->value;
        }
    } else {
        snprintf(s->cfg, sizeof s->cfg, "%s/config.ini", s->out);
        s->o.config_path = s->cfg;
    }
    s->o.sets = s->sets;
    s->o.set_where = s->where;
    s->o.nsets = n;
}

typedef struct job {
    metro_sim *sim;
    metro_error err;
    int rc;
} job;

static void *run_one(void *arg)
{
    job *j = arg;
    j->rc = metro_sim_run(j->sim, &j->err);
    metro_sim_ungroup(j->sim); /* advances no more: never hold the others up */
    return NULL;
}

/* ---- shared launches ------------------------------------------------------- */

static const metro_sampler_api *batching_api(const metro_sim *s)
{
    const metro_sampler_api *a = s ? s->smp_api : NULL;
    return a && a->version >= 3 && a->join && a->leave ? a : NULL;
}

int metro_sims_group(metro_sim *const *sims, int k, metro_error *err)
{
    /* one offer per sampler plugin, its instances in system order */
    void **selves = metro__xcalloc((size_t)(k > 0 ? k : 1), sizeof *selves);
    metro_sim **who = metro__xcalloc((size_t)(k > 0 ? k : 1), sizeof *who);
    unsigned char *done = metro__xcalloc((size_t)(k > 0 ? k : 1), 1);
    int rc = METRO_OK;
    for (int i = 0; i < k && !rc; ++i) {
        const metro_sampler_api *a = batching_api(sims[i]);
        if (!a || done[i] || sims[i]->grouped) continue;
        int m = 0;
        for (int j = i; j < k; ++j)
            /* the same sampler, and (CUDA) the same device, code and
             * constants: one system's kernel may then run for another */
            if (!done[j] && sims[j] && sims[j]->smp_api == a && !sims[j]->grouped &&
                sims[j]->st.backend == sims[i]->st.backend && sims[j]->device_digest == sims[i]->device_digest) {
                done[j] = 1;
                who[m] = sims[j];
                selves[m++] = sims[j]->smp.self;
            }
        if (m < 2) continue;
        if (a->join(selves, m)) {
            rc = metro__plugin_failed(&who[0]->smp, err, METRO_ERUN, "could not share launches");
        } else {
            for (int j = 0; j < m; ++j) who[j]->grouped = 1;
        }
    }
    free(selves);
    free(who);
    free(done);
    return rc;
}

void metro_sim_ungroup(metro_sim *sim)
{
    if (!sim || !sim->grouped) return;
    sim->grouped = 0;
    batching_api(sim)->leave(sim->smp.self);
}

/* ---- combined tables -------------------------------------------------------- */

typedef struct table {
    char *header;
    int rows, cols;
    int stored;    /* rows read (rows may be cut to the systems' common ones) */
    char **cell;   /* stored x cols, text */
} table;

static void free_table(table *t)
{
    for (int i = 0; t->cell && i < t->stored * t->cols; ++i) free(t->cell[i]);
    free(t->cell);
    free(t->header);
    memset(t, 0, sizeof *t);
}

static int count_cols(const char *line)
{
    int c = 1;
    for (; *line && *line != '\n'; ++line) c += *line == ',';
    return c;
}

/* A small CSV with a header row (at most 4096 rows), or -1. */
static int read_table(const char *path, table *t)
{
    memset(t, 0, sizeof *t);
    char *text = metro__read_file(path, NULL);
    if (!text) return -1;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    if (!line) { free(text); return -1; }
    t->header = metro__strdup(line);
    t->cols = count_cols(line);
    while ((line = strtok_r(NULL, "\n", &save))) {
        if (count_cols(line) != t->cols || t->rows >= 4096) { free(text); free_table(t); return -1; }
        t->cell = metro__xrealloc(t->cell, sizeof *t->cell * (size_t)(t->rows + 1) * (size_t)t->cols);
        /* field by field, an empty one kept in its place ("a,,b": strtok
         * would merge the commas and shift every later column left) */
        int c = 0;
        for (char *f = line; c < t->cols; ++c) {
            char *comma = strchr(f, ',');
            if (comma) *comma = '\0';
            t->cell[t->rows * t->cols + c] = metro__strdup(f);
            f = comma ? comma + 1 : f + strlen(f);
        }
        t->stored = ++t->rows;
    }
    free(text);
    return 0;
}

static int numeric(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end;
}

/* RUNDIR/ensemble_NAME (or scan_NAME) from every system's NAME, where
 * each is a small table of one header: a scan puts the value in front of
 * each system's rows, whatever their number; K systems are averaged row by
 * row, over the rows every system has when their first column agrees
 * there (an autocorrelation's lags: its length is the data's, so it
 * differs from system to system at the defaults), and where it does not
 * the table is left out with a warning, not silently.  A table not
 * written this time is removed: one from before (a shorter run, since
 * extended) would no longer be the systems'. */
static int combine(const ensemble *e, const char *name, metro_error *err)
{
    table *t = metro__xcalloc((size_t)e->k, sizeof *t);
    int ok = 1, odd = -1; /* odd: the first system whose rows differ from system_000's */
    for (int i = 0; i < e->k && ok; ++i) {
        char path[4400];
        snprintf(path, sizeof path, "%s/system_%03d/%s", e->dir, i, name);
        ok = read_table(path, &t[i]) == 0 && t[i].cols == t[0].cols && !strcmp(t[i].header, t[0].header);
        if (ok && t[i].rows != t[0].rows && odd < 0) odd = i;
    }
    if (ok && odd >= 0 && !e->scan_key[0]) {
        /* the rows' key: the leading columns up to the first that varies
         * down system_000's common rows (slot, then the lag t of a lone
         * slot's ACF; the slot alone where there are several, whose lags
         * then start each slot at the same row in every system) */
        int common = t[0].rows, keyed = 1, key = 0;
        for (int i = 1; i < e->k; ++i) common = t[i].rows < common ? t[i].rows : common;
        for (int varies = 0; key < t[0].cols - 1 && !varies; key += !varies)
            for (int r = 1; r < common && !varies; ++r) varies = strcmp(t[0].cell[r * t[0].cols + key], t[0].cell[key]) != 0;
        for (int i = 1; i < e->k && keyed; ++i)
            for (int r = 0; r < common && keyed; ++r)
                for (int c = 0; c <= key && keyed; ++c) keyed = !strcmp(t[i].cell[r * t[i].cols + c], t[0].cell[r * t[0].cols + c]);
        if (keyed && common > 0) {
            for (int i = 0; i < e->k; ++i) t[i].rows = common;
        } else {
            fprintf(stderr, "metro: warning: ensemble_%s is not written: system_000's %s has %d rows, system_%03d's %d, "
                            "and their first columns differ (K systems are averaged row by row)\n",
                    name, name, t[0].rows, odd, t[odd].rows);
            ok = 0;
        }
    }
    char *text = NULL;
    size_t n = 0;
    int rc = METRO_OK;
    char out[4400];
    snprintf(out, sizeof out, "%s/%s_%s", e->dir, e->scan_key[0] ? "scan" : "ensemble", name);
    int rows = 0; /* in all the systems' tables */
    for (int i = 0; i < e->k && ok; ++i) rows += t[i].rows;
    if (!ok || !rows) unlink(out);
    if (ok && rows) {
        FILE *f = open_memstream(&text, &n);
        if (e->scan_key[0]) {
            fprintf(f, "%s,%s\n", e->scan_key, t[0].header);
            for (int i = 0; i < e->k; ++i)
                for (int r = 0; r < t[i].rows; ++r) {
                    fprintf(f, "%s", e->values[i]);
                    for (int c = 0; c < t[i].cols; ++c) fprintf(f, ",%s", t[i].cell[r * t[i].cols + c]);
                    fputc('\n', f);
                }
        } else {
            /* numeric columns: mean and standard error across systems; a
             * column that is the same text everywhere (a slot, a name) as is */
            char *save = NULL, *h = metro__strdup(t[0].header);
            int c = 0;
            for (char *col = strtok_r(h, ",", &save); col; col = strtok_r(NULL, ",", &save), ++c) {
                int same = 1;
                for (int i = 1; i < e->k && same; ++i)
                    for (int r = 0; r < t[0].rows && same; ++r)
                        same = !strcmp(t[i].cell[r * t[i].cols + c], t[0].cell[r * t[0].cols + c]);
                fprintf(f, "%s%s", c ? "," : "", col);
                if (!same) fprintf(f, ",%s_err_across", col);
            }
            free(h);
            fputc('\n', f);
            for (int r = 0; r < t[0].rows; ++r) {
                for (c = 0; c < t[0].cols; ++c) {
                    int same = 1;
                    for (int i = 1; i < e->k && same; ++i)
                        same = !strcmp(t[i].cell[r * t[i].cols + c], t[0].cell[r * t[0].cols + c]);
                    for (int rr = 0; rr < t[0].rows && same; ++rr)
                        for (int i = 1; i < e->k && same; ++i)
                            same = !strcmp(t[i].cell[rr * t[i].cols + c], t[0].cell[rr * t[0].cols + c]);
                    if (same) {
                        fprintf(f, "%s%s", c ? "," : "", t[0].cell[r * t[0].cols + c]);
                        continue;
                    }
                    /* averaged only where every system has a finite number:
                     * a mean over the systems that happen to have one (g = 0
                     * in one, so -ln g infinite there) is not the ensemble's.
                     * Two passes, so that a spread far below the mean's size
                     * is not lost to cancellation */
                    double s = 0, v;
                    int m = 0;
                    for (int i = 0; i < e->k; ++i)
                        if (numeric(t[i].cell[r * t[i].cols + c], &v) && isfinite(v)) s += v, ++m;
                    const double mean = m == e->k ? s / m : NAN;
                    double ss = 0;
                    for (int i = 0; i < e->k && m == e->k; ++i)
                        if (numeric(t[i].cell[r * t[i].cols + c], &v)) ss += (v - mean) * (v - mean);
                    const double sem = m == e->k && m > 1 ? sqrt(ss / (m - 1) / m) : NAN;
                    fprintf(f, "%s%.12g,%.4g", c ? "," : "", mean, sem);
                }
                fputc('\n', f);
            }
        }
        fclose(f);
        rc = metro__write_atomic(out, text, n, NULL, err);
        free(text);
    }
    for (int i = 0; i < e->k; ++i) free_table(&t[i]);
    free(t);
    return rc;
}

static int combine_all(const ensemble *e, metro_error *err)
{
    char d0[1200];
    snprintf(d0, sizeof d0, "%s/system_000", e->dir);
    DIR *d = opendir(d0);
    if (!d) return METRO_OK;
    struct dirent *de;
    int rc = METRO_OK;
    while ((de = readdir(d)) && !rc) {
        size_t l = strlen(de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".csv")) rc = combine(e, de->d_name, err);
    }
    closedir(d);
    return rc;
}

/* ---- the run ------------------------------------------------------------------ */

int metro_ensemble_run(const metro_options *opt, metro_error *err)
{
    ensemble e;
    int rc;
    /* the ensemble as one config (the scan's first value set): its
     * resolved form, the top-level config.ini, is rendered at once and the
     * sim let go (it would hold memory through the run) */
    metro_sim *top = NULL;
    char *top_text = NULL;
    size_t top_n = 0;
    /* K threads wait on K streams: on CUDA let them yield the cores rather
     * than spin (it must come before the context exists; on the CPU
     * backend, or without a driver, it does nothing) */
    cudaSetDeviceFlags(cudaDeviceScheduleYield);
    cudaGetLastError();
    if (opt->resume) {
        memset(&e, 0, sizeof e);
        e.k = metro_ensemble_systems(opt, err);
        snprintf(e.dir, sizeof e.dir, "%s", opt->output);
        /* the scan, if any, from the top-level config for the tables */
        ensemble plan;
        metro_options saved = *opt;
        saved.nsets = 0;
        if (read_plan(&saved, &plan, err) == METRO_OK && plan.scan_key[0] && plan.k == e.k) {
            memcpy(e.scan_key, plan.scan_key, sizeof e.scan_key);
            e.values = plan.values;
            plan.values = NULL;
        }
        free_ensemble(&plan);
        /* the scanned key is each system's own: one value set for all
         * would make the systems alike under their old labels */
        for (int j = 0; e.scan_key[0] && j < opt->nsets; ++j) {
            const char *a = opt->sets[j], *eq = strchr(a, '=');
            if (eq && same_key(a, (size_t)(eq - a), e.scan_key)) {
                metro__fail(err, METRO_EUSAGE, "--set #%d %s: the ensemble scans %s (each system its own value): a "
                                               "resume cannot set it for all", j + 1, a, e.scan_key);
                free_ensemble(&e);
                return METRO_EUSAGE;
            }
        }
        /* extended (--set run.sweeps=...): its config.ini says so, as a
         * single run's does.  Where the whole config cannot be made again
         * (its initial file moved away, an older metro's config.ini as
         * given), the old file stays: the resume needs neither */
        if (opt->nsets && e.k > 0) {
            metro_options o = *opt;
            o.resume = 0, o.dry_run = 1, o.quiet = 1, o.output = "", o.arch = NULL;
            o.whole = 1; /* a system of the ensemble, whole on its rank (not spread over them) */
            metro_error ignored = {0};
            if (metro_sim_create(&o, &top, &ignored)) top = NULL;
        }
    } else {
        if ((rc = read_plan(opt, &e, err))) return rc;
        char buf[1024], first[1400];
        metro_options o = *opt;
        o.dry_run = 1;
        o.arch = NULL;
        o.whole = 1; /* its memory a system's on one rank: spread, it was counted once a rank on the host */
        /* the run directory the config asks for, through the one rule
         * (and its folder checked); a scan's first value set (the scan may
         * supply a required key) */
        const char **sets = metro__xcalloc((size_t)opt->nsets + 1, sizeof *sets),
                   **where = metro__xcalloc((size_t)opt->nsets + 1, sizeof *where);
        for (int j = 0; j < opt->nsets; ++j) sets[j] = opt->sets[j], where[j] = opt->set_where ? opt->set_where[j] : NULL;
        o.nsets = opt->nsets;
        if (e.scan_key[0]) {
            snprintf(first, sizeof first, "%s=%s", e.scan_key, e.values[0]);
            where[o.nsets] = e.scan_where;
            sets[o.nsets++] = first;
        }
        o.sets = sets;
        o.set_where = where;
        rc = metro_sim_create(&o, &top, err);
        if (!rc) snprintf(e.dir, sizeof e.dir, "%s", metro__rundir_path(top, opt, buf, sizeof buf));
        else top = NULL;
        free(sets);
        free(where);
        if (rc) { free_ensemble(&e); return rc; }
    }
    if (top) {
        char what[160];
        /* "an ensemble of K": a resume compares it with the folders */
        snprintf(what, sizeof what, "an ensemble of %d system%s, one run directory each (system_NNN/, each with its "
                                    "own resolved config.ini)", e.k, e.k == 1 ? "" : "s");
        FILE *f = open_memstream(&top_text, &top_n);
        metro__write_resolved(top, f, what);
        fclose(f);
        metro_sim_destroy(top);
        top = NULL;
    }
    sys_opt *so = metro__xcalloc((size_t)e.k, sizeof *so);
    job *jobs = metro__xcalloc((size_t)e.k, sizeof *jobs);
    for (int i = 0; i < e.k; ++i) system_options(opt, &e, i, &so[i]);
    rc = METRO_OK;
    /* every system valid before anything is written, and this rank's
     * systems together within the machine's memory (each alone was) */
    const int me0 = metro__rank(), S0 = metro__ranks();
    double host_need = 0, device_need = 0;
    int mine = 0;
    metro_sim *probe_sim = NULL;
    long sweeps0 = 0;
    for (int i = 0; i < e.k && !rc; ++i) {
        metro_options dry = so[i].o;
        dry.dry_run = 1;
        dry.arch = NULL; /* --arch: the plan's system links, once */
        metro_sim *s = NULL;
        if ((rc = metro_sim_create(&dry, &s, err))) metro__fail(err, rc, "(system_%03d, %d of %d)", i, i + 1, e.k);
        /* one system extended on its own is not the ensemble's any more:
         * its tables would be combined with the others' (the sweeps of a
         * scan over them aside) */
        const long sw = rc ? 0 : metro__param_int(s->run, "sweeps");
        if (!i) sweeps0 = sw;
        else if (!rc && sw != sweeps0 && strcmp(e.scan_key, "run.sweeps"))
            rc = metro__fail(err, METRO_EUSAGE, "%s/system_%03d: runs %ld sweeps, system_000 %ld: an ensemble's systems "
                                                "run alike (extend them together: metro resume %s --set run.sweeps=N)",
                             e.dir, i, sw, sweeps0, e.dir);
        if (!rc && i % S0 == me0) {
            host_need += s->host_need, device_need += s->device_need, ++mine;
            if (!probe_sim) probe_sim = s, s = NULL;
        }
        metro_sim_destroy(s);
    }
    /* over MPI the ranks on one host share its memory: their systems
     * together (each rank's alone let 2 ranks accept 4 systems that need
     * 33 GiB on a 24 GiB machine) */
    const double host_all = S0 > 1 ? metro__ranks_host_sum(host_need) : host_need;
    if (!rc && probe_sim && (mine > 1 || host_all > host_need)) {
        char who[160];
        if (host_all > host_need)
            snprintf(who, sizeof who, "the systems this host's %d MPI ranks run at once (%d in this process)",
                     metro__ranks_on_host(), mine);
        else
            snprintf(who, sizeof who, "the %d systems this process runs at once", mine);
        rc = metro__memory_fits(probe_sim, who, host_all, host_need, device_need, err);
    }
    metro_sim_destroy(probe_sim);
    /* a dry run of an ensemble checks every system, as above, and plans
     * the first (its scanned value set, as the run would) */
    if (opt->dry_run) {
        metro_sim *s = NULL;
        metro_options dry = so[0].o;
        dry.dry_run = 1;
        if (!rc && !(rc = metro_sim_create(&dry, &s, err)) && metro__rank() == 0) {
            printf("; ---- an ensemble of %d system%s; the plan below is system_000's%s%s ----\n", e.k, e.k == 1 ? "" : "s",
                   e.scan_key[0] ? ", at " : "", e.scan_key[0] ? so[0].value : "");
            rc = metro_sim_plan(s, stdout);
        }
        metro_sim_destroy(s);
        goto done;
    }
    /* under MPI, rank s runs systems s, s + S, s + 2S, ...; rank 0 writes
     * the ensemble's own files */
    const int me = metro__rank(), S = metro__ranks();
    /* the ensemble's own folder is checked and locked as a run directory
     * is, before anything is written there: a second run, an --overwrite
     * above all, is refused while this one runs (its config.ini and system
     * folders were taken over).  Rank 0's view of whether it was there */
    int lock_fd = -1;
    struct stat before;
    const int fresh = metro__ranks_agree(!opt->resume && stat(e.dir, &before) != 0); /* this run makes the folder */
    if (!rc && me == 0) rc = metro__ensemble_dir_open(e.dir, opt->resume, opt->overwrite, &lock_fd, err);
    /* a failure on any rank (rank 0's lock, or a check of this rank's own
     * systems, as their memory together) stops every rank: rank 0's value
     * alone let another rank run systems it had refused */
    if (S > 1) rc = metro__ranks_any(rc);
    /* every system started (placed, linked, its energy checked) before any
     * folder is written: one that cannot start, which only its start
     * finds, leaves the folders as they were, a former run's results under
     * --overwrite included, as a single run's refusal does (the folder was
     * emptied first, and the results were lost), and a resume's systems as
     * they stopped */
    const int later = !opt->resume;
    for (int i = me; i < e.k && !rc; i += S)
        if ((rc = metro__sim_create(&so[i].o, 0, &jobs[i].sim, err)))
            metro__fail(err, rc, "(system_%03d, %d of %d)", i, i + 1, e.k);
    /* a resume writes into the systems' folders (config.ini with --set,
     * the log): every one of them locked first, so one in use elsewhere
     * (a system resumed on its own) leaves the others as they were (the
     * first systems' config.ini took the --set, and the ensemble was then
     * refused as systems of different sweeps) */
    for (int i = me; i < e.k && !rc && !later; i += S)
        if ((rc = metro__rundir_lock(jobs[i].sim, &so[i].o, err)))
            metro__fail(err, rc, "(system_%03d, %d of %d)", i, i + 1, e.k);
    if (!rc) {
        /* this rank's systems: the sampler may share launches among them */
        metro_sim **mine = metro__xcalloc((size_t)e.k, sizeof *mine);
        int nm = 0;
        for (int i = me; i < e.k; i += S) mine[nm++] = jobs[i].sim;
        rc = metro_sims_group(mine, nm, err);
        free(mine);
    }
    /* every rank hears of a failure on any (the failing one says why) */
    if (S > 1) rc = metro__ranks_any(rc);
    if (!rc && later && opt->overwrite && me == 0) rc = metro__ensemble_dir_clear(e.dir, err);
    if (!rc && top_text && me == 0) {
        /* the ensemble's own resolved config (systems or scan kept, the
         * --set overrides in it): re-run as is, it is this ensemble (the
         * config as given, the overrides only as comments, ran something
         * else, and a scan given by --set resumed as an ensemble) */
        char path[1200];
        snprintf(path, sizeof path, "%s/config.ini", e.dir);
        rc = metro__write_atomic(path, top_text, top_n, NULL, err);
    }
    /* the folder is this run's: locked, emptied, its config.ini written */
    const int made = metro__ranks_agree(!rc && lock_fd >= 0 && later);
    if (S > 1) rc = metro__ranks_any(rc);
    metro__ranks_barrier(); /* the ensemble's folder is ready before any system's */
    for (int i = me; i < e.k && !rc; i += S)
        if ((rc = metro__sim_open(jobs[i].sim, &so[i].o, err)))
            metro__fail(err, rc, "(system_%03d, %d of %d)", i, i + 1, e.k);
    if (S > 1) rc = metro__ranks_any(rc);
    /* a failure after the folder was made or emptied: a new run leaves
     * nothing behind, or the next run into the folder is refused as a run
     * directory.  Every rank takes its own systems' folders away, and rank
     * 0, which made the ensemble's folder, takes that last (over MPI the
     * first rank to fail aborted the others, and the folders stayed) */
    if (rc && made) {
        for (int i = 0; i < e.k; ++i)
            if (jobs[i].sim) {
                char *sys = jobs[i].sim->dir ? metro__strdup(jobs[i].sim->dir) : NULL;
                metro_sim_destroy(jobs[i].sim);
                jobs[i].sim = NULL;
                if (sys) metro__rundir_unmake(sys);
                free(sys);
            }
        metro__ranks_barrier();
    }
    if (rc && me == 0 && lock_fd >= 0 && later) {
        metro__ensemble_dir_undo(e.dir, lock_fd, fresh, made);
        lock_fd = -1;
    }
    metro__ranks_barrier(); /* a failed rank's abort ends the others: not before rank 0 is done */
    if (!rc) {
        char last[32] = "";
        if (e.k > 1) snprintf(last, sizeof last, " ... system_%03d", e.k - 1);
        if (me == 0)
            fprintf(stderr, "metro: ensemble of %d system%s on %s%s, in %s/system_000%s\n", e.k, e.k == 1 ? "" : "s",
                    metro_sim_device_name(jobs[0].sim), S > 1 ? " (spread over the MPI ranks)" : "", e.dir, last);
        pthread_t *th = metro__xcalloc((size_t)e.k, sizeof *th);
        for (int i = me; i < e.k; i += S)
            if (pthread_create(&th[i], NULL, run_one, &jobs[i])) run_one(&jobs[i]), th[i] = 0;
        for (int i = me; i < e.k; i += S)
            if (th[i]) pthread_join(th[i], NULL);
        free(th);
        int stopped = 0, first = -1;
        for (int i = me; i < e.k; i += S)
            if (jobs[i].rc) {
                /* a failure outranks a clean stop of another system */
                if (!rc || rc == METRO_ESTOPPED) rc = jobs[i].rc;
                /* a stop is the ensemble's, said once below: each system's
                 * own "metro resume RUNDIR/system_NNN continues" would
                 * resume one system, which the ensemble then refuses */
                if (jobs[i].rc == METRO_ESTOPPED && !stopped++) first = i;
                else if (jobs[i].rc != METRO_ESTOPPED) metro__fail(err, jobs[i].rc, "system %d: %s", i, jobs[i].err.msg);
            }
        if (stopped) {
            const char *msg = jobs[first].err.msg, *cut = strstr(msg, "; the checkpoint is written");
            char more[64] = "";
            if (stopped > 1) snprintf(more, sizeof more, " (and %d more system%s)", stopped - 1, stopped > 2 ? "s" : "");
            metro__fail(err, METRO_ESTOPPED, "system %d: %.*s%s; each system's checkpoint is written: metro resume %s "
                        "continues the ensemble", first, cut ? (int)(cut - msg) : (int)strcspn(msg, "\n"), msg, more,
                        e.dir);
        }
        /* every rank's systems are done; the tables are combined only
         * when every system on every rank finished (rank 0's own alone
         * mixed a stopped rank's former results with the new ones) */
        const int all = S > 1 ? metro__ranks_any(rc) : rc;
        if (!rc) rc = all;
        if (!all && me == 0) rc = combine_all(&e, err);
    }
    if (lock_fd >= 0) close(lock_fd);
done:
    free(top_text);
    for (int i = 0; i < e.k; ++i) {
        metro_sim_destroy(jobs[i].sim);
        free(so[i].sets);
        free(so[i].where);
    }
    free(jobs);
    free(so);
    free_ensemble(&e);
    return rc;
}
