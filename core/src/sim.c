/* core/src/sim.c — assembling a simulation from a config.
 *
 * The order is the point: everything that can refuse a run — the config,
 * every plugin's create() checks, the resume's checkpoint identity, the
 * memory the sizes need — is done before the run directory is touched, so a
 * refused run writes nothing.  Then the state is allocated, the particles
 * placed, the device code linked and the observables created; only when
 * all of that worked is the run directory created (or, resuming, locked).
 * The other jobs live in their own files (see sim.h).
 */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "frames.h"
#include "core_params.h"
#include "ranks.h"
#include "util.h"

static const char *const plugin_key[] = {"plugin", NULL};

/* ---- config -> plugins ----------------------------------------------------- */

/* metro__plugin_each's callback where only the opening counts (the loader
 * then knows every plugin there is, for a message) */
static void opened(const metro__plugin *p, void *user)
{
    (void)p, (void)user;
}

/* Resolve [section] plugin = NAME into ctx->plugin and ctx->params. */
static int bind_plugin(metro_sim *sim, metro_ctx *ctx, const char *section, metro_kind kind,
                       const char *const *extra, metro_error *err)
{
    ctx->sim = sim;
    ctx->section = metro__strdup(section);
    /* each plugin instance its own stream, the same on every backend */
    ctx->rng.seed = sim->setup.seed ^ metro__fnv(METRO__FNV_INIT, section, strlen(section));
    metro__entry *e = metro__config_find(sim->cfg, section, "plugin");
    if (!e) {
        int present = 0;
        for (int i = 0; i < sim->cfg->nsections; ++i) present |= !strcmp(sim->cfg->sections[i], section);
        if (!present)
            return metro__fail(err, METRO_EUSAGE, "%s: [%s]: section missing (it needs plugin = NAME of %s %s; see metro list)",
                               sim->cfg->path, section, kind == METRO_KIND_OBSERVABLE ? "an" : "a", metro__kind_name(kind));
        return metro__fail(err, METRO_EUSAGE, "%s: [%s] plugin: required but not given (the name of %s %s; see metro list)",
                           metro__config_section_where(sim->cfg, section), section,
                           kind == METRO_KIND_OBSERVABLE ? "an" : "a", metro__kind_name(kind));
    }
    metro_error perr = {0};
    if (metro__plugin_find(e->value, kind, &ctx->plugin, &perr)) {
        if (perr.msg[0]) {
            perr.msg[strcspn(perr.msg, "\n")] = 0;
            return metro__fail(err, METRO_EUSAGE, "%s: [%s] plugin: %s", e->where, section, perr.msg);
        }
        char why[3000];
        metro_error ignore = {0};
        metro__plugin_each(opened, NULL, &ignore);
        metro__plugin_not_found(e->value, kind, why, sizeof why);
        return metro__fail(err, METRO_EUSAGE, "%s: [%s] plugin: %s", e->where, section, why);
    }
    /* a user's plugin named like a bundled one takes its place: say so,
     * with both files, or a run is silently another model */
    const char *hidden = metro__plugin_shadows(ctx->plugin);
    if (hidden)
        metro__log(sim, METRO_LOG_WARN, "[%s] plugin %s %s is %s, which hides %s (the first of a name along the "
                                        "search path is taken)", section, ctx->plugin->d->name, ctx->plugin->d->version,
                   ctx->plugin->path, hidden);
    return metro__params_build(sim->cfg, section, ctx->plugin->d->params, extra, &ctx->params, err);
}

static int valid_section(const char *s)
{
    return !strcmp(s, "run") || !strcmp(s, "system") || !strcmp(s, "potential") || (!strncmp(s, "potential ", 10) && s[10]) ||
           !strcmp(s, "sampler") || (!strncmp(s, "observable ", 11) && s[11]);
}

/* The value of a parameter that names an observable's files or picks
 * which it writes (file, prefix, format, replicas, slots: plugin.h), NULL
 * when its plugin has no such parameter. */
static const char *naming_value(const metro_params *p, const char *key)
{
    for (int j = 0; j < p->n; ++j)
        if (!strcmp(p->decls[j].name, key) &&
            (p->decls[j].type == METRO_PARAM_STRING || p->decls[j].type == METRO_PARAM_CHOICE))
            return metro__param_string(p, key);
    return NULL;
}

/* Two sections of one observable plugin write the same files when every
 * parameter that names them agrees (or the plugin has none): refused here,
 * before anything runs, rather than when the second opens them.  The
 * run-time claims (rundir.c) catch what this cannot see. */
static int check_observable_files(metro_sim *sim, metro_error *err)
{
    static const char *const keys[] = {"file", "prefix", "format", "replicas", "slots"};
    /* a file named after one of the core's would be refused only when it is
     * first opened, perhaps at the run's end */
    for (int i = 0; i < sim->nobs; ++i) {
        const char *file = naming_value(sim->obs[i].params, "file"), *why = file ? metro__core_file(file) : NULL;
        if (!why) continue;
        metro__entry *e = metro__config_find(sim->cfg, sim->obs[i].section, "file");
        return metro__fail(err, METRO_EUSAGE, "%s: [%s] file: '%s' is %s: give another name",
                           e ? e->where : metro__config_section_where(sim->cfg, sim->obs[i].section),
                           sim->obs[i].section, file, why);
    }
    for (int j = 1; j < sim->nobs; ++j)
        for (int i = 0; i < j; ++i) {
            const metro_ctx *a = &sim->obs[i], *b = &sim->obs[j];
            if (a->plugin != b->plugin) continue;
            int differ = 0, named = 0;
            const char *name_key = NULL; /* the key that names the files: file, else prefix */
            for (int k = 0; k < 5; ++k) {
                const char *va = naming_value(a->params, keys[k]), *vb = naming_value(b->params, keys[k]);
                if (!va) continue;
                named = 1;
                differ |= strcmp(va, vb) != 0;
                if (!name_key && k < 2) name_key = keys[k];
            }
            if (!differ && named)
                return metro__fail(err, METRO_EUSAGE, "%s: [%s]: writes the same files as [%s] (plugin %s, the same "
                                                      "parameters that name them): give one of them another %s",
                                   metro__config_section_where(sim->cfg, b->section), b->section, a->section,
                                   b->plugin->d->name, name_key ? name_key : "section's parameters");
            if (!differ)
                return metro__fail(err, METRO_EUSAGE, "%s: [%s]: writes the same files as [%s] (plugin %s names its "
                                                      "files itself): a run has one section of it",
                                   metro__config_section_where(sim->cfg, b->section), b->section, a->section,
                                   b->plugin->d->name);
        }
    return METRO_OK;
}

static int read_config(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    const char *path = opt->config_path ? opt->config_path : "<text>";
    /* a file through the reader that sees NUL bytes and lines of any length */
    int rc = opt->config_text ? metro__config_parse(path, opt->config_text, &sim->cfg, err)
                              : metro__config_read(path, &sim->cfg, err);
    for (int i = 0; i < opt->nsets; ++i)
        rc |= metro__config_set(sim->cfg, opt->sets[i], i + 1, opt->set_where ? opt->set_where[i] : NULL, err);
    /* --device is [run] device: the resolved config.ini records it, so the
     * run re-runs and resumes on the backend it was given (a resume of a
     * --device cpu run took auto, the GPU, and was refused) */
    if (!rc && opt->device) {
        char set[64];
        snprintf(set, sizeof set, "run.device=%.40s", opt->device);
        rc |= metro__config_set(sim->cfg, set, opt->nsets + 1, "--device", err);
    }
    if (!rc && opt->resume) rc = metro__config_resume_check(sim->cfg, err);
    if (rc) return METRO_EUSAGE;

    for (int i = 0; i < sim->cfg->nsections; ++i)
        if (!valid_section(sim->cfg->sections[i]))
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: [%s]: unknown section (allowed: [run], [system], [potential] or [potential NAME] ..., [sampler], [observable NAME])",
                             metro__config_section_where(sim->cfg, sim->cfg->sections[i]), sim->cfg->sections[i]);
    rc |= metro__params_build(sim->cfg, "run", metro__run_params, NULL, &sim->run, err);
    rc |= metro__params_build(sim->cfg, "system", metro__system_params, NULL, &sim->system, err);
    if (sim->run) sim->setup.seed = (uint64_t)metro__param_int(sim->run, "seed");
    /* the terms of the energy, in the config's order */
    for (int i = 0; i < sim->cfg->nsections; ++i) {
        const char *s = sim->cfg->sections[i];
        if (strcmp(s, "potential") && (strncmp(s, "potential ", 10) || !s[10])) continue;
        if (sim->nterms == METRO_MAX_TERMS) {
            rc |= metro__fail(err, METRO_EUSAGE, "%s: [%s]: more than %d potential terms",
                              metro__config_section_where(sim->cfg, s), s, METRO_MAX_TERMS);
            break;
        }
        sim->terms = metro__xrealloc(sim->terms, sizeof *sim->terms * (size_t)(sim->nterms + 1));
        metro_ctx *t = &sim->terms[sim->nterms++];
        memset(t, 0, sizeof *t);
        t->host_rng = 1; /* initial configurations are drawn on the host: same on both backends */
        rc |= bind_plugin(sim, t, s, METRO_KIND_POTENTIAL, metro__core_keys(METRO_KIND_POTENTIAL), err);
    }
    if (!sim->nterms) {
        sim->terms = metro__xcalloc(1, sizeof *sim->terms);
        sim->nterms = 1;
        rc |= bind_plugin(sim, &sim->terms[0], "potential", METRO_KIND_POTENTIAL, plugin_key, err);
    }
    rc |= bind_plugin(sim, &sim->smp, "sampler", METRO_KIND_SAMPLER, plugin_key, err);
    for (int i = 0; i < sim->cfg->nsections; ++i) {
        const char *s = sim->cfg->sections[i];
        if (strncmp(s, "observable ", 11) || !s[11]) continue;
        sim->obs = metro__xrealloc(sim->obs, sizeof *sim->obs * (size_t)(sim->nobs + 1));
        metro_ctx *o = &sim->obs[sim->nobs++];
        memset(o, 0, sizeof *o);
        rc |= bind_plugin(sim, o, s, METRO_KIND_OBSERVABLE, metro__core_keys(METRO_KIND_OBSERVABLE), err);
        o->every = 1;
        metro__entry *e = metro__config_find(sim->cfg, s, "every");
        if (e) {
            char *end;
            long v = strtol(e->value, &end, 10);
            if (end == e->value || *end || v < 1)
                rc |= metro__fail(err, METRO_EUSAGE, "%s: [%s] every: '%s' is %s (integer >= 1: measure every this many "
                                                     "sweeps)",
                                  e->where, s, e->value, end == e->value || *end ? "not a whole number of sweeps" : "below 1");
            else
                o->every = v;
        }
    }
    if (!rc) rc |= check_observable_files(sim, err);
    return rc ? METRO_EUSAGE : METRO_OK;
}

/* ---- memory, before anything large is allocated ------------------------- */

static double gib(double bytes)
{
    return bytes / (1024.0 * 1024.0 * 1024.0);
}

/* Physical memory and swap, or a lower address-space limit: a run that
 * needs more cannot work.  (MemAvailable is only a warning: on machines
 * whose memory grows as it is used it reads far too low at the start.) */
static void host_memory(double *limit, double *available, double *process)
{
    double total = 0, swap = 0, avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        double kb;
        if (sscanf(line, "MemTotal: %lf", &kb) == 1) total = kb * 1024;
        else if (sscanf(line, "SwapTotal: %lf", &kb) == 1) swap = kb * 1024;
        else if (sscanf(line, "MemAvailable: %lf", &kb) == 1) avail = kb * 1024;
    }
    if (f) fclose(f);
    if (total <= 0) total = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    *limit = total + swap;
    *available = avail > 0 ? avail : total;
    /* a process's own address-space limit (ulimit -v, a batch system's
     * h_vmem) bounds this process alone, not the ranks beside it */
    *process = *limit;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (double)rl.rlim_cur < *limit)
        *process = (double)rl.rlim_cur;
}

static const void *const *memory_fn(metro_ctx *c)
{
    const metro_plugin *d = c->plugin->d;
    if (((const uint32_t *)d->api)[0] < 2) return NULL; /* version 1 tables end before memory() */
    switch (d->kind) {
    case METRO_KIND_POTENTIAL: return (const void *const *)&((const metro_potential_api *)d->api)->memory;
    case METRO_KIND_SAMPLER: return (const void *const *)&((const metro_sampler_api *)d->api)->memory;
    default: return (const void *const *)&((const metro_observable_api *)d->api)->memory;
    }
}

/* What the run will need: the core's state (positions, per-replica arrays,
 * the checkpoint's buffer of the same size) plus what each plugin reports. */
static int estimate_memory(metro_sim *sim, int created_obs, double *host, double *device, metro_error *err)
{
    double np = (double)sim->setup.particles * (double)sim->setup.replicas, nr = sim->setup.replicas;
    *host = 2 * np * sizeof(metro_float4) + nr * (8 + 8 + 4 + 8 + 8);
    *device = sim->setup.backend == METRO_BACKEND_CUDA ? np * sizeof(metro_float4) + 2 * nr * 8 : 0;
    sim->mem_top[0] = 0;
    sim->mem_top_bytes = 0;
    for (int i = 0; i < sim->nterms + 1 + created_obs; ++i) {
        metro_ctx *c = metro__ctx_at(sim, i);
        const void *const *fn = memory_fn(c);
        if (!fn || !*fn || !c->self) continue;
        size_t h = 0, d = 0;
        sim->setup.every = metro__ctx_kind(sim, i) == METRO_KIND_OBSERVABLE ? c->every : 0;
        int (*mem)(void *, const metro_setup *, size_t *, size_t *) = (int (*)(void *, const metro_setup *, size_t *, size_t *))*fn;
        if (mem(c->self, &sim->setup, &h, &d)) return metro__plugin_failed(c, err, METRO_EUSAGE, "cannot size itself");
        if ((double)h + (double)d > sim->mem_top_bytes) {
            sim->mem_top_bytes = (double)h + (double)d;
            snprintf(sim->mem_top, sizeof sim->mem_top, "[%s] %s", c->section, c->plugin->d->name);
        }
        *host += (double)h;
        *device += sim->setup.backend == METRO_BACKEND_CUDA ? (double)d : 0;
    }
    sim->setup.every = 0;
    return METRO_OK;
}

/* "N particles x R replicas", and the plugin that asks for most of it
 * through its memory() when that is most of the whole (a plugin's own
 * estimate, not the system's size, is then what to look at) */
static void memory_who(const metro_sim *sim, double total, char *who, size_t n)
{
    snprintf(who, n, "%d particles x %d replicas", sim->setup.particles, sim->setup.replicas);
    if (sim->mem_top[0] && sim->mem_top_bytes > 0.5 * total)
        snprintf(who + strlen(who), n - strlen(who), " (%.3g GiB of it by the memory() of %s)",
                 gib(sim->mem_top_bytes), sim->mem_top);
}

int metro__memory_fits(metro_sim *sim, const char *who, double host, double host_here, double device,
                       metro_error *err)
{
    double limit, avail, process;
    host_memory(&limit, &avail, &process);
    int rc = METRO_OK;
    if (host > limit)
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: %s need %.3g GiB of host memory, the machine has %.3g GiB (memory and swap): choose "
                         "fewer particles or replicas%s",
                         sim->cfg->path, who, gib(host), gib(limit), strstr(who, "ranks") ? ", or fewer ranks a host" : "");
    else if (host_here > process)
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: %s need %.3g GiB of host memory in this process, whose limit is %.3g GiB (ulimit -v, or "
                         "the batch system's): choose fewer particles or replicas, or raise the limit",
                         sim->cfg->path, who, gib(host_here), gib(process));
    else if (host > avail)
        metro__log(sim, METRO_LOG_WARN, "%s need %.3g GiB of host memory; %.3g GiB are available now", who, gib(host),
                   gib(avail));
    if (sim->setup.backend == METRO_BACKEND_CUDA) {
        size_t free_b = 0, total_b = 0;
        if (metro__device_memory(&free_b, &total_b, err)) return METRO_ERUN;
        if (device > (double)free_b)
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: %s need %.3g GiB of device memory, the GPU has %.3g GiB free (of %.3g): choose fewer "
                             "particles or replicas, or --device cpu",
                             sim->cfg->path, who, gib(device), gib((double)free_b), gib((double)total_b));
    }
    return rc;
}

static int check_memory(metro_sim *sim, double host, double device, metro_error *err)
{
    /* a spread run's ranks each hold every replica (they are shared after
     * each segment): the ranks on one host need that many times the memory */
    const int local = sim->spread ? metro__ranks_on_host() : 1;
    char who[400];
    memory_who(sim, host + device, who, sizeof who - 64);
    if (local > 1) snprintf(who + strlen(who), sizeof who - strlen(who), " on each of this host's ranks");
    if (local > 1) snprintf(who + strlen(who), sizeof who - strlen(who), " (%d ranks)", local);
    return metro__memory_fits(sim, who, host * local, host, device, err);
}

/* ---- assembly ------------------------------------------------------------- */

static int create_plugin(metro_sim *sim, metro_ctx *c, metro_error *err)
{
    const void *api = c->plugin->d->api;
    int bad;
    sim->creating = 1;
    switch (c->plugin->d->kind) {
    case METRO_KIND_POTENTIAL:
        bad = ((const metro_potential_api *)api)->create(&metro__host_api, c, c->params, &sim->setup, &c->self);
        break;
    case METRO_KIND_SAMPLER:
        bad = ((const metro_sampler_api *)api)->create(&metro__host_api, c, c->params, &sim->setup, &c->self);
        break;
    default:
        sim->setup.every = c->every;
        bad = ((const metro_observable_api *)api)->create(&metro__host_api, c, c->params, &sim->setup, &c->self);
    }
    sim->setup.every = 0;
    sim->creating = 0;
    if (!bad) return METRO_OK;
    c->self = NULL;
    return metro__plugin_failed(c, err, METRO_EUSAGE, "refused its parameters");
}

/* A dry run's observables: created on the run's backend, so that their
 * own checks (a cell the potential must publish, a species they name, a
 * histogram on the GPU) refuse a config as the run would.  No device code
 * is linked: a kernel one asks for in create() is NULL (host.c), and their
 * device buffers come only at the first measurement. */
/* A sampler's trial step below the float spacing of the coordinates moves
 * nothing, or moves in a few steps of that spacing: the chain stands still
 * and counts every trial that rounded to no move as accepted (a cell of
 * radius 1e9 with step 0.3 reported acceptance 1).  Said in the log, for
 * samplers whose "step" is a length (0: their own choice). */
static void step_resolution(metro_sim *sim)
{
    int has = 0;
    for (const metro_param_decl *d = sim->smp.plugin->d->params; d && d->name; ++d)
        has |= !strcmp(d->name, "step") && d->type == METRO_PARAM_REAL;
    const double step = has ? metro__param_real(sim->smp.params, "step") : 0.0;
    if (!(step > 0)) return;
    const metro_state *st = &sim->st;
    float far = 0.0f;
    for (size_t i = 0; i < (size_t)st->particles * (size_t)st->replicas; ++i)
        far = fmaxf(far, fmaxf(fabsf(st->pos[i].x), fmaxf(fabsf(st->pos[i].y), fabsf(st->pos[i].z))));
    const double spacing = (double)nextafterf(far, INFINITY) - (double)far;
    if (step < 16.0 * spacing)
        metro__log(sim, METRO_LOG_WARN, "[sampler] step = %g is below 16 times the float spacing of the coordinates, %g "
                                        "at |x| = %g: most trial moves round to no move (and count as accepted); give "
                                        "a larger step",
                   step, spacing, (double)far);
}

static int dry_observables(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    int rc = METRO_OK;
    for (int i = 0; i < sim->nobs && !rc; ++i) rc = create_plugin(sim, &sim->obs[i], err);
    /* --arch: the device code a CUDA run would link, linked here for that
     * architecture (a plugin author's check on a machine without a GPU) */
    if (!rc && opt->arch) {
        void *cubin = NULL;
        snprintf(sim->dry_arch, sizeof sim->dry_arch, "%s", opt->arch);
        rc = metro__link_device(sim, opt->arch, 0, &cubin, &sim->dry_cubin, err); /* no cache: a dry run writes nothing */
        free(cubin);
        if (rc) metro__fail(err, rc, "--arch %s: the run's device code does not link (above)", opt->arch);
    }
    return rc;
}

/* Cross-checks of the core's own keys that no single range can express. */
static int check_run_keys(metro_sim *sim, metro_error *err)
{
    int rc = METRO_OK;
    for (int i = 0; i < sim->nobs; ++i) {
        metro_ctx *o = &sim->obs[i];
        if (o->every <= sim->sweeps) continue;
        metro__entry *e = metro__config_find(sim->cfg, o->section, "every");
        if (sim->sweeps == 0) {
            /* no production: no every could do, so say what could */
            metro__entry *sw = metro__config_find(sim->cfg, "run", "sweeps");
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s: [run] sweeps = 0: no production sweep, so [%s] would never measure (give sweeps "
                             "> 0, or leave the observables out of a run of equilibration only)",
                             sw ? sw->where : metro__config_section_where(sim->cfg, "run"), o->section);
            break;
        }
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: [%s] every: %ld is more than [run] sweeps = %ld, so it would never measure "
                         "(allowed: 1 to sweeps)",
                         e ? e->where : metro__config_section_where(sim->cfg, o->section), o->section, o->every,
                         sim->sweeps);
    }
    return rc;
}

int metro_sim_create(const metro_options *opt, metro_sim **out, metro_error *err)
{
    return metro__sim_create(opt, 1, out, err);
}

int metro__sim_create(const metro_options *opt, int open_dir, metro_sim **out, metro_error *err)
{
    *out = NULL;
    metro_sim *sim = metro__xcalloc(1, sizeof *sim);
    sim->quiet = opt->quiet;
    sim->lock_fd = -1;
    /* under MPI one system is spread over the ranks and rank 0 writes it;
     * an ensemble's system is whole on its rank */
    sim->spread = !opt->whole && metro__ranks() > 1;
    sim->writer = opt->whole || metro__rank() == 0;
    if (!sim->writer) sim->quiet = 1;
    int rc = read_config(sim, opt, err);
    if (rc) goto fail;
    sim->sweeps = metro__param_int(sim->run, "sweeps");
    sim->equilibration = metro__param_int(sim->run, "equilibration");
    sim->check_every = metro__param_int(sim->run, "check_every");
    sim->checkpoint_minutes = metro__param_real(sim->run, "checkpoint_minutes");
    sim->drift_tolerance = metro__param_real(sim->run, "drift_tolerance");
    if ((rc = check_run_keys(sim, err))) goto fail;
    sim->dry = opt->dry_run;
    if ((rc = metro__rundir_check(sim, opt, err))) goto fail;
    const char *want = metro__param_string(sim->run, "device"); /* --device is in it (read_config) */
    /* a dry run that links for an architecture needs no GPU: without one, a
     * config of device = cuda is planned on the CPU backend */
    if (opt->dry_run && opt->arch && !strcmp(want, "cuda")) want = "auto";
    rc = metro__choose_backend(sim, want, err);
    if (rc) goto fail;
    sim->smp_api = sim->smp.plugin->d->api;
    sim->setup.replicas = 1;
    sim->setup.sweeps = sim->sweeps;
    sim->setup.equilibration = sim->equilibration;
    sim->resuming = opt->resume;
    if ((rc = metro__system_read(sim, err)) || (rc = metro__compose_check_table(sim, err))) goto fail;
    for (int k = 0; k < sim->nterms; ++k)
        if ((rc = create_plugin(sim, &sim->terms[k], err))) goto fail;
    if ((rc = metro__terms_finish(sim, err)) || (rc = create_plugin(sim, &sim->smp, err))) goto fail;
    metro_state *st = &sim->st;
    st->backend = sim->setup.backend;
    st->particles = sim->setup.particles;
    st->replicas = sim->setup.replicas;
    st->chain = sim->setup.topology.chains > 0;
    st->topology = &sim->setup.topology;
    if (opt->resume) {
        char buf[1024];
        sim->dir = metro__strdup(metro__rundir_path(sim, opt, buf, sizeof buf));
        rc = metro__checkpoint_check(sim, err);
        free(sim->dir);
        sim->dir = NULL;
        if (rc) goto fail;
    }
    double host_need, device_need;
    if ((rc = estimate_memory(sim, 0, &host_need, &device_need, err))) goto fail;
    if ((rc = check_memory(sim, host_need, device_need, err))) goto fail;
    sim->host_need = host_need;
    sim->device_need = device_need;
    /* a dry run checks everything a run would, the initial file's frame
     * included (its count, species, cell and overlaps: initial.c), but
     * places nothing of its own (the potential's placement can take
     * seconds and cannot fail on a valid config) */
    const int initial_file = *metro__param_string(sim->system, "initial") != 0;
    if (opt->dry_run && !initial_file) {
        /* the species and chains laid out as the run would (O(N)): chains
         * that need more particles of a species than it has are refused
         * here, not only by the run */
        metro_float4 *one = metro__xcalloc((size_t)sim->setup.particles + 1, sizeof *one);
        rc = metro__assign_species(sim, one, 1, err);
        free(one);
        if (rc) goto fail;
        if ((rc = dry_observables(sim, opt, err))) goto fail;
        *out = sim;
        return METRO_OK;
    }

    size_t np = (size_t)st->particles * (size_t)st->replicas;
    st->pos = metro__xcalloc(np, sizeof *st->pos);
    st->energy = metro__xcalloc((size_t)st->replicas, sizeof *st->energy);
    st->beta = metro__xcalloc((size_t)st->replicas, sizeof *st->beta);
    st->slot_replica = metro__xcalloc((size_t)st->replicas, sizeof *st->slot_replica);
    st->accepted = metro__xcalloc((size_t)st->replicas, sizeof *st->accepted);
    st->attempted = metro__xcalloc((size_t)st->replicas, sizeof *st->attempted);
    double t0 = metro__now();
    /* resuming: the checkpoint's positions, so that nothing is placed (and
     * an initial file may be gone); else the initial file (initial.c) or
     * the potential's own placement */
    int placed = sim->ck != NULL;
    if (placed && (rc = metro__resume_positions(sim, err))) goto fail;
    if (!placed && initial_file) {
        if ((rc = metro__initial_load(sim, err))) goto fail;
        placed = 1;
    }
    if (opt->dry_run) {
        if ((rc = dry_observables(sim, opt, err))) goto fail;
        *out = sim;
        return METRO_OK;
    }
    if (!placed && (rc = metro__assign_species(sim, st->pos, st->replicas, err))) goto fail;
    for (int r = 0; r < st->replicas; ++r) {
        st->slot_replica[r] = r;
        metro_ctx *pc = metro__placing_ctx(sim);
        if (!placed && sim->pot_api->initial(sim->pot_self, pc, st->pos + (size_t)r * st->particles, st->particles)) {
            rc = metro__plugin_failed(pc, err, METRO_EUSAGE, "could not place the particles");
            goto fail;
        }
    }
    if (!placed && !strcmp(metro__param_string(sim->system, "numbering"), "space")) {
        /* the free particles follow the chains (compose.c) and keep their
         * species; every replica along its own curve */
        int free0 = 0;
        for (int c = 0; c < st->topology->chains; ++c)
            if (st->topology->first[c] + st->topology->length[c] > free0)
                free0 = st->topology->first[c] + st->topology->length[c];
        for (int r = 0; r < st->replicas; ++r)
            if (metro_number_by_space(st->pos + (size_t)r * st->particles + free0, st->particles - free0)) {
                rc = metro__fail(err, METRO_ERUN, "out of memory numbering %d particles along a curve",
                                 st->particles - free0);
                goto fail;
            }
    }
    metro__log(sim, METRO_LOG_DEBUG, "placed %zu particles in %.2f s", np, metro__now() - t0);
    step_resolution(sim);
    if (st->backend == METRO_BACKEND_CUDA && (rc = metro__start_cuda(sim, err))) goto fail;
    /* after linking, so that observables can look up their kernels */
    for (int i = 0; i < sim->nobs; ++i)
        if ((rc = create_plugin(sim, &sim->obs[i], err))) goto fail;
    if ((rc = estimate_memory(sim, sim->nobs, &host_need, &device_need, err)) ||
        (rc = check_memory(sim, host_need, device_need, err)))
        goto fail;
    if (sim->ck && (rc = metro__resume_state(sim, err))) goto fail;
    if (sim->smp_api->start(sim->smp.self, st, sim->pot_api, sim->pot_self)) {
        rc = metro__plugin_failed(&sim->smp, err, METRO_ERUN, "could not start");
        goto fail;
    }
    /* a fresh run's energies: after start(), so a sampler with a faster
     * sum of its own (total()) has its structures built; a resumed run has
     * the checkpoint's */
    if (!sim->ck) {
        t0 = metro__now();
        if ((rc = metro__total_all(sim, st->energy, err))) goto fail;
        for (int r = 0; r < st->replicas; ++r)
            if (!isfinite(st->energy[r])) {
                /* who made it, where the config says so: a refusal of the
                 * start, before anything is written (it was exit 1 with no
                 * line, naming neither initial() nor total()) */
                const metro__entry *file = initial_file ? metro__config_find(sim->cfg, "system", "initial") : NULL;
                const metro_ctx *pc = metro__placing_ctx(sim);
                const int lone = !sim->comp;
                char who[300];
                snprintf(who, sizeof who, file ? "[system] initial" : "[%s] %s", pc->section, sim->pot_name);
                rc = metro__fail(err, METRO_EUSAGE, "%s: %s: the initial configuration of replica %d has energy %g: %s",
                                 file ? file->where : metro__config_section_where(sim->cfg, pc->section), who, r,
                                 st->energy[r],
                                 file ? "the file holds a configuration the potential forbids"
                                 : lone ? "the potential's own initial() placed particles where its total() is not "
                                          "finite (a bug in one of the two; or give an initial file: [system] initial)"
                                        : "a term's total() is not finite where its pair() and external() let the core "
                                          "place the particles (a bug of that term)");
                goto fail;
            }
        metro__log(sim, METRO_LOG_DEBUG, "initial energies in %.2f s (replica 0: E = %.12g)", metro__now() - t0,
                   st->energy[0]);
        if (st->backend == METRO_BACKEND_CUDA &&
            (rc = metro__upload(sim, st->d_energy, st->energy, (size_t)st->replicas * sizeof(double), err, "energies")))
            goto fail;
    }
    if (sim->ck && (rc = metro__resume_plugins(sim, err))) goto fail;
    if (open_dir && (rc = metro__sim_open(sim, opt, err))) goto fail;
    *out = sim;
    return METRO_OK;
fail:
    metro_sim_destroy(sim);
    return rc ? rc : METRO_ERUN;
}

int metro__sim_open(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    const metro_state *st = &sim->st;
    int rc;
    /* everything is valid: now, and only now, the run directory */
    if (sim->writer && (rc = metro__rundir_open(sim, opt, err))) return rc;
    if (sim->spread && !sim->asked_ranks && metro__rank() == 0)
        metro__log(sim, METRO_LOG_WARN, "%s does not spread its work over MPI ranks: each of the %d ranks runs the whole "
                                        "system (the same chain)", sim->smp.plugin->d->name, metro__ranks());
    if (opt->resume)
        metro__log(sim, METRO_LOG_INFO, "resumed from %s/checkpoint.bin%s at sweep %lld", sim->dir,
                   sim->ck_used_prev ? ".prev" : "", st->sweep);
    /* the program prints the backend line itself, even with --quiet */
    if (sim->log)
        fprintf(sim->log, "backend %s: %s\n", st->backend == METRO_BACKEND_CUDA ? "cuda" : "cpu", sim->device_name);
    if (st->backend == METRO_BACKEND_CUDA)
        metro__log(sim, METRO_LOG_INFO, "device code linked for this GPU in %.2f s%s", sim->link_seconds,
                   sim->cubin_cached ? " (from the cache)" : "");
    metro__log(sim, METRO_LOG_INFO, "%s + %s, %d particles x %d replicas, seed %llu%s%s", sim->pot_name,
               sim->smp.plugin->d->name, st->particles, st->replicas, (unsigned long long)sim->setup.seed,
               sim->dir ? ", run directory " : "", sim->dir ? sim->dir : "");
    return METRO_OK;
}

/* ---- dry run ---------------------------------------------------------------- */

int metro_sim_plan(metro_sim *sim, FILE *f)
{
    metro__write_resolved(sim, f, NULL);
    const metro_setup *s = &sim->setup;
    double n = s->particles, r = s->replicas;
    /* The direct sum: each of the N moves of a sweep evaluates the N-1
     * partners.  At the measured rates (METRO_DIRECT_RATE_*, plugin.h) the
     * estimate is a lower bound for small systems, which are latency-bound
     * on a GPU.  A sampler that sums otherwise (a tree) gives its own
     * estimate (cost(), ABI 6). */
    double pairs = r * n * (n - 1);
    /* one core: the core cannot know whether a sampler spreads its moves
     * over threads (parallel_tempering's replicas do; brush's and
     * metropolis's chain does not), and every core assumed made a 2-core
     * machine's brush runs 5-12x longer than planned */
    double rate = s->backend == METRO_BACKEND_CUDA ? METRO_DIRECT_RATE_CUDA : METRO_DIRECT_RATE_CPU;
    double sweep = pairs / rate, own = 0.0;
    const int by_sampler = sim->smp_api->cost && sim->smp_api->cost(sim->smp.self, s, &own) == 0 && own > 0.0;
    char basis[64];
    if (by_sampler) {
        sweep = own;
        snprintf(basis, sizeof basis, "the sampler's estimate");
    } else {
        snprintf(basis, sizeof basis, "at %.3g pair terms/s%s", rate,
                 s->backend == METRO_BACKEND_CUDA ? "" : " on one core");
    }
    fprintf(f, "\n; ---- the work (dry run: nothing was created) ----\n"
               "; backend:                %s: %s\n"
               "; particles x replicas:   %d x %d\n"
               "; sweeps:                 %ld equilibration + %ld production\n"
               "; pair evaluations/sweep: %.4g (direct sum%s)\n"
               "; host memory:            %.3g GiB\n"
               "; device memory:          %.3g GiB\n"
               "; time per sweep:         about %.3g s (%s)\n"
               "; whole run:              about %.3g s (the moves; the observables' measurements come on top,\n"
               ";                         e.g. pair_correlation's g(r), O(N^2) a measurement)\n",
            s->backend == METRO_BACKEND_CUDA ? "cuda" : "cpu", sim->device_name, s->particles, s->replicas,
            sim->equilibration, sim->sweeps, pairs, by_sampler ? "; this sampler needs far fewer" : "",
            gib(sim->host_need), gib(sim->device_need), sweep, basis,
            sweep * (double)(sim->sweeps + sim->equilibration));
    if (sim->dry_arch[0])
        fprintf(f, "; device code:            links for %s (%zu bytes of cubin, in %.2f s)\n", sim->dry_arch,
                sim->dry_cubin, sim->link_seconds);
    return METRO_OK;
}

/* ---- accessors, teardown --------------------------------------------------- */

metro_backend metro_sim_backend(const metro_sim *sim)
{
    return sim->st.backend;
}

void *metro_sim_stream(const metro_sim *sim)
{
    return sim->stream;
}

const char *metro_sim_device_name(const metro_sim *sim)
{
    return sim->device_name;
}

static void free_ctx(metro_ctx *c, int kind)
{
    if (c->self && c->plugin) {
        switch (kind) {
        case METRO_KIND_POTENTIAL: ((const metro_potential_api *)c->plugin->d->api)->destroy(c->self); break;
        case METRO_KIND_SAMPLER: ((const metro_sampler_api *)c->plugin->d->api)->destroy(c->self); break;
        default: ((const metro_observable_api *)c->plugin->d->api)->destroy(c->self); break;
        }
    }
    metro__rng_free(&c->rng);
    metro__params_free(c->params);
    free(c->section);
    free(c->save_buf);
}

void metro_sim_destroy(metro_sim *sim)
{
    if (!sim) return;
    metro_sim_ungroup(sim);
    for (int i = 0; i < sim->nobs; ++i) free_ctx(&sim->obs[i], METRO_KIND_OBSERVABLE);
    free(sim->obs);
    free_ctx(&sim->smp, METRO_KIND_SAMPLER);
    for (int k = 0; k < sim->nterms; ++k) free_ctx(&sim->terms[k], METRO_KIND_POTENTIAL);
    free(sim->terms);
    metro__compose_free(sim);
    metro__initial_free(sim);
    metro__output_claims_free(sim);
    free(sim->facts);
    if (sim->st.d_pos) cudaFree(sim->st.d_pos);
    if (sim->st.d_energy) cudaFree(sim->st.d_energy);
    if (sim->d_total) cudaFree(sim->d_total);
    if (sim->library) cudaLibraryUnload((cudaLibrary_t)sim->library);
    if (sim->stream) cudaStreamDestroy((cudaStream_t)sim->stream);
    free(sim->st.pos);
    free(sim->st.energy);
    free(sim->st.beta);
    free(sim->st.slot_replica);
    free(sim->st.accepted);
    free(sim->st.attempted);
    metro__params_free(sim->run);
    metro__params_free(sim->system);
    metro__config_free(sim->cfg);
    metro__rundir_close(sim);
    free(sim->early_log);
    free(sim->ck);
    free(sim->dir);
    free(sim);
}
