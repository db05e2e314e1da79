/* trajectory — configurations written to a trajectory file every `every`
 * sweeps of production, in HOOMD-blue's GSD format or in extended XYZ
 * (what ASE and OVITO read).
 *
 *   format = gsd | xyz      default gsd
 *   file = NAME             default trajectory.gsd / trajectory.xyz; the
 *                           format's extension is added when NAME has none
 *   replicas = all | 0,3,5  which replicas (default: replica 0)
 *   slots = all | 0,7       or which temperature slots: each frame is the
 *                           replica that slot holds at that sweep (parallel
 *                           tempering permutes them)
 * One replica or slot: exactly FILE.  Several: one file each,
 * NAME_r3.gsd (replicas) or NAME_t7.gsd (slots).
 *
 * Each frame carries the positions, species (GSD particles/types and
 * typeid; XYZ species and metro_species), charges, the sweep
 * (configuration/step; XYZ sweep=), replica, slot and temperature (GSD
 * log/metro/...; XYZ comment keys) and a box: the cell's diameter for a
 * spherical cell, in open space a cube that holds the configuration.  The
 * file format code is the core's (host->frame_append, core/src/frames.c):
 * a frame appears in the file whole, never half-written.
 *
 * Restart: save() keeps each file's mark (frames and length); after a
 * resume the first measure() or finish() cuts each file back to its mark,
 * so the resumed run's file is byte for byte the straight run's.
 *
 * The CUDA backend: this observable has no measure_device(): it measures
 * from the host copy of the positions that the core brings back in bulk
 * (the sampler's sync, one cudaMemcpy of the whole state) before calling
 * measure().  The frame has to reach the host to be written anyway, so a
 * device path would only move the same copy.
 *
 * Writing does not hold up the sampler: measure() copies the frames it is
 * due to write (a memcpy of the selected replicas) and hands them to a
 * writer thread of this instance, which formats, writes and syncs them
 * while the chain goes on.  One batch is in flight at a time: the next
 * measure() (and save(), finish()) first waits for the previous batch, so
 * the marks a checkpoint saves count every frame measured before it.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "metro/plugin.h"

typedef struct target {
    int index;               /* replica or slot */
    char file[256];
    metro_frame_mark mark;
} target;

/* The batch of frames handed to the writer thread: one per target. */
typedef struct batch {
    long long sweep;
    metro_float4 *pos;       /* [ntargets * particles] */
    int *replica, *slot;     /* [ntargets] */
    double *temperature;     /* [ntargets] */
} batch;

typedef struct trajectory {
    const metro_host_api *host;
    metro_ctx *ctx;
    int by_slot;
    int ntargets;
    target *t;
    int cut_pending;         /* restored: cut the files back before writing */
    int particles, species;
    metro_species table[METRO_MAX_SPECIES];
    double cell_radius;
    const metro_topology *topology; /* the core's: bonds for GSD bonds/ */
    /* the writer thread; busy, quit, failed and the marks are shared with
     * it under mu (the marks only while busy) */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy, quit, failed;
    batch b;
} trajectory;

static const metro_param_decl params[] = {
    {"format", METRO_PARAM_CHOICE, "gsd", 0, 0, "gsd|xyz", "",
     "gsd: HOOMD-blue GSD (binary); xyz: extended XYZ (text; ASE, OVITO)"},
    {"file", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "file name in the run directory (default trajectory.gsd or trajectory.xyz)"},
    {"replicas", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "replicas to write: all, or a comma-separated list (default: replica 0)"},
    {"slots", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "or temperature slots to write: all, or a comma-separated list (each frame: the replica the slot holds)"},
    METRO_PARAM_END};

/* "all" or "0, 3, 5" into t->t[]: each index once, each below limit. */
static int parse_list(trajectory *t, const char *key, const char *text, int limit)
{
    const metro_host_api *h = t->host;
    while (isspace((unsigned char)*text)) ++text;
    if (!strcmp(text, "all")) {
        t->ntargets = limit;
        t->t = calloc((size_t)limit, sizeof *t->t);
        if (!t->t) return h->fail(t->ctx, "out of memory");
        for (int i = 0; i < limit; ++i) t->t[i].index = i;
        return 0;
    }
    int cap = 8;
    t->t = calloc((size_t)cap, sizeof *t->t);
    if (!t->t) return h->fail(t->ctx, "out of memory");
    const char *p = text;
    for (;;) {
        char *end;
        while (isspace((unsigned char)*p)) ++p;
        long v = strtol(p, &end, 10);
        if (end == p)
            return h->fail(t->ctx, "%s: '%s' is not 'all' or a comma-separated list of indices", key, text);
        if (v < 0 || v >= limit)
            return h->fail(t->ctx, "%s: %ld does not exist (allowed: 0 to %d)", key, v, limit - 1);
        for (int k = 0; k < t->ntargets; ++k)
            if (t->t[k].index == v) return h->fail(t->ctx, "%s: %ld is listed twice", key, v);
        if (t->ntargets == cap) {
            cap *= 2;
            target *n = realloc(t->t, sizeof *n * (size_t)cap);
            if (!n) return h->fail(t->ctx, "out of memory");
            t->t = n;
        }
        memset(&t->t[t->ntargets], 0, sizeof t->t[0]);
        t->t[t->ntargets++].index = (int)v;
        p = end;
        while (isspace((unsigned char)*p)) ++p;
        if (!*p) break;
        if (*p != ',') return h->fail(t->ctx, "%s: '%s' is not 'all' or a comma-separated list of indices", key, text);
        ++p;
    }
    return 0;
}

static void destroy(void *self)
{
    trajectory *t = self;
    if (!t) return;
    if (t->started) {
        pthread_mutex_lock(&t->mu);
        t->quit = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL); /* a batch in flight is finished first */
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t->b.pos);
    free(t->b.replica);
    free(t->b.slot);
    free(t->b.temperature);
    free(t->t);
    free(t);
}

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p, const metro_setup *setup,
                  void **out)
{
    if (host->version < 7) return host->fail(ctx, "this metro core cannot write trajectories");
    trajectory *t = calloc(1, sizeof *t);
    if (!t) return host->fail(ctx, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->host = host;
    t->ctx = ctx;
    t->particles = setup->particles;
    t->species = setup->species;
    memcpy(t->table, setup->species_table, sizeof t->table);
    if (!host->fact(ctx, "cell_radius", &t->cell_radius)) t->cell_radius = 0; /* open space */
    t->topology = &setup->topology;
    const char *fmt = host->param_string(p, "format");
    const char *ext = !strcmp(fmt, "xyz") ? ".xyz" : ".gsd";
    const char *file = host->param_string(p, "file");
    const char *reps = host->param_string(p, "replicas"), *slots = host->param_string(p, "slots");
    int replicas = setup->replicas > 0 ? setup->replicas : 1;
    char stem[200];
    if (!file[0]) file = !strcmp(fmt, "xyz") ? "trajectory.xyz" : "trajectory.gsd";
    if (strchr(file, '/') || file[0] == '.' || strlen(file) > 180) {
        host->fail(ctx, "file: '%s' is not a plain file name of at most 180 characters in the run directory", file);
        goto fail;
    }
    /* extensions in any case, as the core's reader takes them */
    const char *dot = strrchr(file, '.');
    if (dot && strcasecmp(dot, ext) && !(!strcmp(ext, ".xyz") && !strcasecmp(dot, ".extxyz"))) {
        if (!strcasecmp(dot, ".gsd") || !strcasecmp(dot, ".xyz") || !strcasecmp(dot, ".extxyz")) {
            host->fail(ctx, "file: '%s' has the extension of another format than format = %s", file, fmt);
            goto fail;
        }
        dot = NULL; /* a dot inside the name: the extension is added */
    }
    if (dot) {
        snprintf(stem, sizeof stem, "%.*s", (int)(dot - file), file);
        ext = dot;
    } else {
        snprintf(stem, sizeof stem, "%s", file);
    }
    if (reps[0] && slots[0]) {
        host->fail(ctx, "replicas and slots: give one of them, not both");
        goto fail;
    }
    t->by_slot = slots[0] != 0;
    if (parse_list(t, t->by_slot ? "slots" : "replicas", t->by_slot ? slots : reps[0] ? reps : "0", replicas)) goto fail;
    for (int k = 0; k < t->ntargets; ++k) {
        if (t->ntargets == 1)
            snprintf(t->t[k].file, sizeof t->t[k].file, "%s%s", stem, ext);
        else
            snprintf(t->t[k].file, sizeof t->t[k].file, "%s_%c%d%s", stem, t->by_slot ? 't' : 'r', t->t[k].index, ext);
        /* named now: another section writing it (`file = trajectory`
         * beside the default, or movie_r1.gsd beside replicas = 0, 1) is
         * refused before the run, not at its first frame */
        if (host->claim_output(ctx, t->t[k].file)) goto fail;
    }
    *out = t;
    return 0;
fail:
    destroy(t);
    return -1;
}

static int cut_back(trajectory *t)
{
    if (!t->cut_pending) return 0;
    for (int k = 0; k < t->ntargets; ++k)
        if (t->host->frame_truncate(t->ctx, t->t[k].file, &t->t[k].mark)) return -1;
    t->cut_pending = 0;
    return 0;
}

/* Write a batch: each target's frame appended to its file.  On the writer
 * thread; a failure is recorded by host->frame_append in the instance's
 * error message, which the next call on the main thread reports. */
static int write_batch(trajectory *t)
{
    for (int k = 0; k < t->ntargets; ++k) {
        metro_frame f = {
            .particles = t->particles,
            .pos = t->b.pos + (size_t)k * (size_t)t->particles,
            .species = t->species,
            .species_table = t->table,
            .cell_radius = t->cell_radius,
            .topology = t->topology,
            .sweep = t->b.sweep,
            .replica = t->b.replica[k],
            .slot = t->b.slot[k],
            .temperature = t->b.temperature[k],
        };
        if (t->host->frame_append(t->ctx, t->t[k].file, &f, &t->t[k].mark)) return -1;
    }
    return 0;
}

static void *writer(void *arg)
{
    trajectory *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->busy && !t->quit) pthread_cond_wait(&t->cv, &t->mu);
        if (!t->busy) break; /* quit, nothing left to write */
        pthread_mutex_unlock(&t->mu);
        int bad = write_batch(t);
        pthread_mutex_lock(&t->mu);
        t->failed |= bad;
        t->busy = 0;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Wait for the batch in flight; -1 when writing it failed (the message is
 * the one frame_append recorded). */
static int wait_idle(trajectory *t)
{
    if (!t->started) return 0;
    pthread_mutex_lock(&t->mu);
    while (t->busy) pthread_cond_wait(&t->cv, &t->mu);
    int failed = t->failed;
    pthread_mutex_unlock(&t->mu);
    return failed ? -1 : 0;
}

static int measure(void *self, const metro_state *st)
{
    trajectory *t = self;
    if (wait_idle(t) || cut_back(t)) return -1;
    if (!t->b.pos) {
        t->b.pos = malloc(sizeof *t->b.pos * (size_t)t->ntargets * (size_t)t->particles);
        t->b.replica = malloc(sizeof *t->b.replica * (size_t)t->ntargets);
        t->b.slot = malloc(sizeof *t->b.slot * (size_t)t->ntargets);
        t->b.temperature = malloc(sizeof *t->b.temperature * (size_t)t->ntargets);
        if (!t->b.pos || !t->b.replica || !t->b.slot || !t->b.temperature)
            return t->host->fail(t->ctx, "out of memory for %d frames of %d particles", t->ntargets, t->particles);
    }
    t->b.sweep = st->sweep;
    for (int k = 0; k < t->ntargets; ++k) {
        int r = t->t[k].index, slot = -1;
        if (t->by_slot) {
            slot = r;
            r = st->slot_replica ? st->slot_replica[slot] : slot;
        } else {
            for (int s = 0; s < st->replicas && slot < 0; ++s)
                if ((st->slot_replica ? st->slot_replica[s] : s) == r) slot = s;
        }
        memcpy(t->b.pos + (size_t)k * (size_t)t->particles, st->pos + (size_t)r * (size_t)st->particles,
               sizeof *t->b.pos * (size_t)t->particles);
        t->b.replica[k] = r;
        t->b.slot[k] = slot;
        t->b.temperature[k] = slot >= 0 && st->beta && st->beta[slot] > 0 ? 1.0 / st->beta[slot] : 0.0;
    }
    if (!t->started) {
        if (pthread_create(&t->thread, NULL, writer, t) != 0)
            return write_batch(t); /* no thread to be had: write here */
        t->started = 1;
    }
    pthread_mutex_lock(&t->mu);
    t->busy = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static int finish(void *self, const metro_state *st)
{
    trajectory *t = self;
    (void)st;
    if (wait_idle(t) || cut_back(t)) return -1;
    for (int k = 0; k < t->ntargets && k < 4; ++k)
        t->host->log(t->ctx, METRO_LOG_INFO, "%s: %llu frames", t->t[k].file, (unsigned long long)t->t[k].mark.frames);
    if (t->ntargets > 4) t->host->log(t->ctx, METRO_LOG_INFO, "... and %d more files", t->ntargets - 4);
    return 0;
}

/* Saved state: u64 magic, u64 files, then each file's mark. */
#define TRAJ_MAGIC 0x316a617254ull /* "Traj1" */

static int save(void *self)
{
    trajectory *t = self;
    if (wait_idle(t)) return -1; /* the marks must count every frame measured */
    uint64_t h[2] = {TRAJ_MAGIC, (uint64_t)t->ntargets};
    if (t->host->save_bytes(t->ctx, h, sizeof h)) return -1;
    for (int k = 0; k < t->ntargets; ++k)
        if (t->host->save_bytes(t->ctx, &t->t[k].mark, sizeof t->t[k].mark)) return -1;
    return 0;
}

static int restore(void *self, const void *data, size_t size)
{
    trajectory *t = self;
    uint64_t h[2];
    if (size < sizeof h) return t->host->fail(t->ctx, "saved state too short");
    memcpy(h, data, sizeof h);
    if (h[0] != TRAJ_MAGIC) return t->host->fail(t->ctx, "saved state is not the trajectory's");
    if (h[1] != (uint64_t)t->ntargets || size != sizeof h + (size_t)t->ntargets * sizeof(metro_frame_mark))
        return t->host->fail(t->ctx, "saved state is for %llu files, this run writes %d", (unsigned long long)h[1],
                             t->ntargets);
    for (int k = 0; k < t->ntargets; ++k)
        memcpy(&t->t[k].mark, (const char *)data + sizeof h + (size_t)k * sizeof(metro_frame_mark), sizeof(metro_frame_mark));
    /* the run directory is locked only after restore(): cut later */
    t->cut_pending = 1;
    return 0;
}

/* The copy handed to the writer, and a frame staged whole before it is
 * written: GSD chunks (about 28 bytes a particle) or XYZ text (at most
 * about 100). */
static int memory(void *self, const metro_setup *setup, size_t *host_bytes, size_t *device_bytes)
{
    trajectory *t = self;
    /* the batch of positions, plus the staging of one frame */
    *host_bytes = (size_t)t->ntargets * (size_t)setup->particles * sizeof(metro_float4) +
                  (size_t)setup->particles * 100 + 65536;
    *device_bytes = 0;
    return 0;
}

static const metro_observable_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .measure = measure,
    .finish = finish,
    .save = save,
    .restore = restore,
    .memory = memory,
};

METRO_PLUGIN(observable, "trajectory", "1.0.0",
             "configurations every K sweeps into a GSD (HOOMD-blue) or extended XYZ (ASE, OVITO) trajectory file",
             params, api)
