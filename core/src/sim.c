/* core/src/sim.c — a simulation: assembly from a config, the services the
 * core gives plugins, the backends, and the run loop. */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit.h"
#include "util.h"

/* ---- interruption ------------------------------------------------------- */

/* SIGINT/SIGTERM stop a run at the next chunk boundary with a checkpoint,
 * so a run cut short (^C, a batch system's time limit) can be resumed.  A
 * second signal kills as usual. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
    signal(sig, SIG_DFL);
}

/* ---- the core's own parameters ------------------------------------------ */

static const metro_param_decl run_params[] = {
    {"seed", METRO_PARAM_INT, "1", 0, 9.2e18, NULL, "", "seed of every random stream of the run"},
    /* at most 2^62 each, so that sweeps + equilibration cannot overflow */
    {"sweeps", METRO_PARAM_INT, NULL, 0, 4.6e18, NULL, "sweeps", "production sweeps (measured)"},
    {"equilibration", METRO_PARAM_INT, "0", 0, 4.6e18, NULL, "sweeps",
     "sweeps before measuring starts"},
    {"device", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|cpu|cuda", "",
     "backend: auto takes the GPU when one is there"},
    {"output", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "run directory (default runs/<config name>)"},
    {"check_every", METRO_PARAM_INT, "0", 0, 9.2e18, NULL, "sweeps",
     "recompute the total energy this often and report the drift (0: ten times a run)"},
    {"drift_tolerance", METRO_PARAM_REAL, "1e-4", 0, 1, NULL, "",
     "largest allowed |E_running - E_recomputed| / max(|E|, N); beyond it the run stops"},
    METRO_PARAM_END};

static const metro_param_decl system_params[] = {
    {"particles", METRO_PARAM_INT, NULL, 1, 2147483647.0, NULL, "", "particles per replica"},
    METRO_PARAM_END};

static const char *const plugin_key[] = {"plugin", NULL};
static const char *const observable_keys[] = {"plugin", "every", NULL};

/* ---- services to plugins (metro_host_api) -------------------------------- */

static int h_fail(metro_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    return -1;
}

static void vlog(metro_sim *sim, const char *who, metro_log_level level, const char *fmt,
                 va_list ap)
{
    static const char *names[] = {"error", "warning", "", ""};
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    if (sim->log) {
        time_t t = time(NULL);
        char ts[32];
        strftime(ts, sizeof ts, "%H:%M:%S", localtime(&t));
        fprintf(sim->log, "%s %s%s%s%s%s\n", ts, who ? who : "", who ? ": " : "", names[level],
                level < METRO_LOG_INFO ? ": " : "", line);
        fflush(sim->log);
    }
    if (level <= METRO_LOG_WARN || (!sim->quiet && level <= METRO_LOG_INFO))
        fprintf(stderr, "%s%s%s%s%s\n", who ? who : "metro", ": ", names[level],
                level < METRO_LOG_INFO ? ": " : "", line);
}

static void h_log(metro_ctx *ctx, metro_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(ctx->sim, ctx->plugin ? ctx->plugin->d->name : ctx->section, level, fmt, ap);
    va_end(ap);
}

static void core_log(metro_sim *sim, metro_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(sim, NULL, level, fmt, ap);
    va_end(ap);
}

static int h_uniform(metro_ctx *ctx, float *out, size_t n)
{
    ctx->rng.device = ctx->sim->st.backend == METRO_BACKEND_CUDA && !ctx->host_rng;
    ctx->rng.stream = ctx->sim->stream;
    int s = metro__rng_uniform(&ctx->rng, out, n);
    if (s) return h_fail(ctx, "cuRAND could not draw %zu uniforms (status %d)", n, s);
    return 0;
}

static int h_kernel(metro_ctx *ctx, const char *name, void **kernel)
{
    if (!ctx->sim->library) return h_fail(ctx, "kernel '%s' asked for on the CPU backend", name);
    cudaKernel_t k;
    cudaError_t e = cudaLibraryGetKernel(&k, (cudaLibrary_t)ctx->sim->library, name);
    if (e != cudaSuccess)
        return h_fail(ctx, "no kernel '%s' in the linked device code (%s)", name,
                      cudaGetErrorString(e));
    *kernel = (void *)k;
    return 0;
}

static void *h_stream(metro_ctx *ctx)
{
    return ctx->sim->stream;
}

static FILE *h_open_output(metro_ctx *ctx, const char *filename)
{
    if (strchr(filename, '/') || filename[0] == '.' || !filename[0]) {
        h_fail(ctx, "'%s' is not a plain file name", filename);
        return NULL;
    }
    if (!ctx->sim->dir) return fopen("/dev/null", "w");
    size_t l = strlen(ctx->sim->dir) + strlen(filename) + 2;
    char *path = metro__xmalloc(l);
    snprintf(path, l, "%s/%s", ctx->sim->dir, filename);
    FILE *f = fopen(path, "w");
    if (!f) h_fail(ctx, "%s: cannot be written: %s", path, strerror(errno));
    free(path);
    return f;
}

static const char *h_run_dir(metro_ctx *ctx)
{
    return ctx->sim->dir ? ctx->sim->dir : "";
}

static int h_save_bytes(metro_ctx *ctx, const void *data, size_t n)
{
    if (ctx->save_n + n > ctx->save_cap) {
        while (ctx->save_n + n > ctx->save_cap) ctx->save_cap = ctx->save_cap ? 2 * ctx->save_cap : 4096;
        ctx->save_buf = metro__xrealloc(ctx->save_buf, ctx->save_cap);
    }
    if (n) memcpy(ctx->save_buf + ctx->save_n, data, n); /* data may be NULL when n is 0 */
    ctx->save_n += n;
    return 0;
}

static const metro_host_api host_api = {
    METRO_ABI_VERSION,
    h_fail,
    h_log,
    metro__param_int,
    metro__param_real,
    metro__param_bool,
    metro__param_string,
    metro__param_list,
    h_uniform,
    h_kernel,
    h_stream,
    h_open_output,
    h_run_dir,
    h_save_bytes,
};

/* ---- assembly ----------------------------------------------------------- */

/* A plugin's failure message, prefixed with its section. */
static int plugin_failed(metro_ctx *ctx, metro_error *err, int status, const char *what)
{
    return metro__fail(err, status, "[%s] %s (%s) %s: %s", ctx->section,
                       ctx->plugin ? ctx->plugin->d->name : "?", ctx->plugin ? metro__kind_name(ctx->plugin->d->kind) : "",
                       what, ctx->err[0] ? ctx->err : "failed without saying why");
}

static void list_kind(const metro__plugin *p, void *user)
{
    char **names = user;
    if (p->d->kind != (metro_kind)(intptr_t)names[1]) return;
    size_t l = strlen(names[0]);
    snprintf(names[0] + l, 1024 - l, "%s%s", l ? ", " : "", p->d->name);
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
        int line = metro__config_section_line(sim->cfg, section);
        if (!line)
            return metro__fail(err, METRO_EUSAGE, "%s: [%s]: section missing (it needs plugin = NAME of a %s; see metro list)",
                               sim->cfg->path, section, metro__kind_name(kind));
        return metro__fail(err, METRO_EUSAGE, "%s:%d: [%s] plugin: required but not given (the name of a %s; see metro list)",
                           sim->cfg->path, line, section, metro__kind_name(kind));
    }
    metro_error perr = {0};
    if (metro__plugin_find(e->value, kind, &ctx->plugin, &perr)) {
        if (perr.msg[0]) {
            perr.msg[strcspn(perr.msg, "\n")] = 0;
            return metro__fail(err, METRO_EUSAGE, "%s:%d: [%s] plugin: %s", e->file, e->line,
                               section, perr.msg);
        }
        char names[1024] = "";
        char *pass[2] = {names, (char *)(intptr_t)kind};
        metro_error ignore = {0};
        metro__plugin_each(list_kind, pass, &ignore);
        return metro__fail(err, METRO_EUSAGE, "%s:%d: [%s] plugin: no %s plugin '%s' found (available: %s)",
                           e->file, e->line, section, metro__kind_name(kind), e->value,
                           names[0] ? names : "none");
    }
    return metro__params_build(sim->cfg, section, ctx->plugin->d->params, extra, &ctx->params, err);
}

static int valid_section(const char *s)
{
    return !strcmp(s, "run") || !strcmp(s, "system") || !strcmp(s, "potential") ||
           !strcmp(s, "sampler") || (!strncmp(s, "observable ", 11) && s[11]);
}

static int read_config(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    const char *path = opt->config_path ? opt->config_path : "<text>";
    char *text = NULL;
    if (opt->config_text) {
        text = metro__strdup(opt->config_text);
    } else {
        text = metro__read_file(path, NULL);
        if (!text) return metro__fail(err, METRO_EUSAGE, "%s: cannot be read: %s", path, strerror(errno));
    }
    int rc = metro__config_parse(path, text, &sim->cfg, err);
    free(text);
    for (int i = 0; i < opt->nsets; ++i) rc |= metro__config_set(sim->cfg, opt->sets[i], i + 1, err);
    if (rc) return METRO_EUSAGE;

    for (int i = 0; i < sim->cfg->nsections; ++i)
        if (!valid_section(sim->cfg->sections[i]))
            rc = metro__fail(err, METRO_EUSAGE,
                             "%s:%d: [%s]: unknown section (allowed: [run], [system], [potential], [sampler], [observable NAME])",
                             sim->cfg->path, sim->cfg->section_line[i], sim->cfg->sections[i]);
    rc |= metro__params_build(sim->cfg, "run", run_params, NULL, &sim->run, err);
    rc |= metro__params_build(sim->cfg, "system", system_params, NULL, &sim->system, err);
    if (sim->run) sim->setup.seed = (uint64_t)metro__param_int(sim->run, "seed");
    rc |= bind_plugin(sim, &sim->pot, "potential", METRO_KIND_POTENTIAL, plugin_key, err);
    rc |= bind_plugin(sim, &sim->smp, "sampler", METRO_KIND_SAMPLER, plugin_key, err);
    for (int i = 0; i < sim->cfg->nsections; ++i) {
        const char *s = sim->cfg->sections[i];
        if (strncmp(s, "observable ", 11) || !s[11]) continue;
        sim->obs = metro__xrealloc(sim->obs, sizeof *sim->obs * (size_t)(sim->nobs + 1));
        metro_ctx *o = &sim->obs[sim->nobs++];
        memset(o, 0, sizeof *o);
        rc |= bind_plugin(sim, o, s, METRO_KIND_OBSERVABLE, observable_keys, err);
        o->every = 1;
        metro__entry *e = metro__config_find(sim->cfg, s, "every");
        if (e) {
            char *end;
            long v = strtol(e->value, &end, 10);
            if (end == e->value || *end || v < 1)
                rc |= metro__fail(err, METRO_EUSAGE, "%s:%d: [%s] every: '%s' is not a whole number of sweeps (integer >= 1)",
                                  e->file, e->line, s, e->value);
            else
                o->every = v;
        }
    }
    return rc ? METRO_EUSAGE : METRO_OK;
}

/* ---- backends ----------------------------------------------------------- */

#define CUDA_TRY(call, what)                                                                     \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            return metro__fail(err, METRO_ERUN, "CUDA: %s failed: %s", what, cudaGetErrorString(e_)); \
    } while (0)

static int choose_backend(metro_sim *sim, const char *want, metro_error *err)
{
    int count = 0;
    cudaError_t e = strcmp(want, "cpu") ? cudaGetDeviceCount(&count) : cudaSuccess;
    if (!strcmp(want, "cpu") || (!strcmp(want, "auto") && (e != cudaSuccess || count == 0))) {
        sim->setup.backend = METRO_BACKEND_CPU;
        snprintf(sim->device_name, sizeof sim->device_name, "CPU");
        return METRO_OK;
    }
    if (e != cudaSuccess || count == 0)
        return metro__fail(err, METRO_ERUN,
                           "device = cuda: no usable CUDA device (%s); run with --device cpu",
                           e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, 0), "reading device 0");
    sim->setup.backend = METRO_BACKEND_CUDA;
    snprintf(sim->device_name, sizeof sim->device_name, "%s (sm_%d%d, %d SMs)", prop.name,
             prop.major, prop.minor, prop.multiProcessorCount);
    return METRO_OK;
}

/* Host -> device copy ordered with the plugins' work: on the run's stream
 * (non-blocking, so the legacy stream would not order it), then waited for. */
static cudaError_t upload(metro_sim *sim, void *dst, const void *src, size_t n)
{
    cudaStream_t s = (cudaStream_t)sim->stream;
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s);
    return e != cudaSuccess ? e : cudaStreamSynchronize(s);
}

static int start_cuda(metro_sim *sim, metro_error *err)
{
    int dev = 0;
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, dev), "reading device 0");
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", prop.major, prop.minor);
    metro__ir irs[3 + 64];
    int n = 0;
    irs[n++] = (metro__ir){"core", metro__core_ir, metro__core_ir_size};
    irs[n++] = (metro__ir){sim->pot.plugin->d->name, sim->pot.plugin->d->device_ir, sim->pot.plugin->d->device_ir_size};
    irs[n++] = (metro__ir){sim->smp.plugin->d->name, sim->smp.plugin->d->device_ir, sim->smp.plugin->d->device_ir_size};
    for (int i = 0; i < sim->nobs && n < 67; ++i) {
        /* an observable used twice is linked once */
        int dup = 0;
        for (int j = 0; j < i; ++j) dup |= sim->obs[j].plugin == sim->obs[i].plugin;
        if (!dup) irs[n++] = (metro__ir){sim->obs[i].plugin->d->name, sim->obs[i].plugin->d->device_ir, sim->obs[i].plugin->d->device_ir_size};
    }
    double t0 = metro__now();
    void *cubin;
    size_t size;
    int rc = metro__jit_cached(irs, n, arch, &cubin, &size, &sim->cubin_cached, err);
    if (rc) return rc;
    sim->link_seconds = metro__now() - t0;
    cudaStream_t s;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream");
    sim->stream = s;
    cudaLibrary_t lib;
    cudaError_t e = cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0);
    free(cubin);
    CUDA_TRY(e, "loading the linked device code");
    sim->library = lib;
    void *sym;
    size_t symsize;
    CUDA_TRY(cudaLibraryGetGlobal(&sym, &symsize, lib, "metro_potential_params"),
             "finding metro_potential_params");
    size_t psize = 0;
    const void *params = sim->pot_api->device_params(sim->pot.self, &psize);
    if (psize > symsize)
        return metro__fail(err, METRO_ERUN, "potential %s: parameter block of %zu bytes exceeds %zu",
                           sim->pot.plugin->d->name, psize, symsize);
    if (psize) CUDA_TRY(upload(sim, sym, params, psize), "copying potential parameters");
    cudaKernel_t k;
    CUDA_TRY(cudaLibraryGetKernel(&k, lib, "metro_core_total_energy"), "finding metro_core_total_energy");
    sim->k_total = (void *)k;
    size_t np = (size_t)sim->st.particles * (size_t)sim->st.replicas;
    CUDA_TRY(cudaMalloc((void **)&sim->st.d_pos, np * sizeof(metro_float4)), "allocating positions");
    CUDA_TRY(cudaMalloc((void **)&sim->st.d_energy, (size_t)sim->st.replicas * sizeof(double)), "allocating energies");
    CUDA_TRY(cudaMalloc((void **)&sim->d_total, (size_t)sim->st.replicas * sizeof(double)), "allocating energies");
    CUDA_TRY(upload(sim, sim->st.d_pos, sim->st.pos, np * sizeof(metro_float4)),
             "uploading positions");
    return METRO_OK;
}

/* Recompute every replica's total energy into out[] (host). */
static int total_all(metro_sim *sim, double *out, metro_error *err)
{
    metro_state *st = &sim->st;
    if (st->backend == METRO_BACKEND_CPU) {
        for (int r = 0; r < st->replicas; ++r)
            out[r] = sim->pot_api->total(sim->pot.self, st->pos + (size_t)r * st->particles, st->particles);
        return METRO_OK;
    }
    cudaStream_t s = (cudaStream_t)sim->stream;
    CUDA_TRY(cudaMemsetAsync(sim->d_total, 0, (size_t)st->replicas * sizeof(double), s), "clearing energies");
    int threads = 256;
    int blocks = (st->particles + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;
    dim3 grid = {(unsigned)blocks, (unsigned)st->replicas, 1}, block = {(unsigned)threads, 1, 1};
    const metro_float4 *pos = st->d_pos;
    int n = st->particles, chain = st->chain;
    double *o = sim->d_total;
    void *args[] = {&pos, &n, &chain, &o};
    CUDA_TRY(cudaLaunchKernel((const void *)sim->k_total, grid, block, args, 0, s), "launching the energy check");
    CUDA_TRY(cudaMemcpyAsync(out, sim->d_total, (size_t)st->replicas * sizeof(double), cudaMemcpyDeviceToHost, s),
             "reading energies");
    CUDA_TRY(cudaStreamSynchronize(s), "computing total energies");
    return METRO_OK;
}

/* ---- run directory ------------------------------------------------------ */

static int rm_tree_files(const char *dir)
{
    /* a run directory holds plain files only: remove them, keep the folder */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 -maxdepth 1 -type f -delete", dir);
    return system(cmd);
}

static void write_resolved(metro_sim *sim, FILE *f)
{
    time_t t = time(NULL);
    char ts[64];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", localtime(&t));
    fprintf(f, "; metro %s: the resolved configuration of this run (%s), every default written out.\n"
               "; Re-run it as is: metro run config.ini --output OTHER_DIR\n\n",
            METRO_VERSION_STRING, ts);
    fprintf(f, "[run]\n");
    metro__params_write(f, sim->run);
    fprintf(f, "\n[system]\n");
    metro__params_write(f, sim->system);
    metro_ctx *all[2] = {&sim->pot, &sim->smp};
    for (int i = 0; i < 2 + sim->nobs; ++i) {
        metro_ctx *c = i < 2 ? all[i] : &sim->obs[i - 2];
        fprintf(f, "\n[%s]\n; %s %s %s: %s\nplugin = %s\n", c->section, metro__kind_name(c->plugin->d->kind),
                c->plugin->d->name, c->plugin->d->version, c->plugin->d->summary, c->plugin->d->name);
        if (i >= 2) fprintf(f, "; measure every this many sweeps\nevery = %ld\n", c->every);
        metro__params_write(f, c->params);
    }
}

static int make_run_dir(metro_sim *sim, const metro_options *opt, metro_error *err)
{
    const char *out = opt->output ? opt->output : metro__param_string(sim->run, "output");
    char deflt[1024];
    if (!out || (!*out && !opt->output)) {
        const char *p = opt->config_path ? opt->config_path : "run";
        const char *b = strrchr(p, '/');
        b = b ? b + 1 : p;
        size_t l = strcspn(b, ".");
        snprintf(deflt, sizeof deflt, "runs/%.*s", (int)l, b);
        out = deflt;
    }
    if (!*out) return METRO_OK; /* no run directory (tests) */
    struct stat sb;
    if (opt->resume) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/checkpoint.bin", out);
        if (stat(probe, &sb) != 0)
            return metro__fail(err, METRO_EUSAGE, "%s: no checkpoint.bin to resume from", out);
        sim->dir = metro__strdup(out);
        if (opt->nsets) { /* the resolved config records the change */
            snprintf(probe, sizeof probe, "%s/config.ini", out);
            FILE *f = fopen(probe, "w");
            if (!f) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", probe, strerror(errno));
            write_resolved(sim, f);
            fclose(f);
        }
        snprintf(probe, sizeof probe, "%s/log.txt", out);
        sim->log = fopen(probe, "a");
        if (!sim->log) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", probe, strerror(errno));
        return METRO_OK;
    }
    if (stat(out, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return metro__fail(err, METRO_EUSAGE, "%s: exists and is not a directory", out);
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/config.ini", out);
        if (!opt->overwrite && stat(probe, &sb) == 0)
            return metro__fail(err, METRO_EUSAGE,
                               "%s: a run directory already exists there (choose another --output, or --overwrite)",
                               out);
        if (opt->overwrite) rm_tree_files(out);
    }
    if (metro__mkdirs(out))
        return metro__fail(err, METRO_EUSAGE, "%s: cannot create the run directory: %s", out, strerror(errno));
    sim->dir = metro__strdup(out);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.ini", out);
    FILE *f = fopen(path, "w");
    if (!f) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    write_resolved(sim, f);
    if (fclose(f)) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/log.txt", out);
    sim->log = fopen(path, "w");
    if (!sim->log) return metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    return METRO_OK;
}

/* ---- checkpoints --------------------------------------------------------- */

static int do_sync(metro_sim *sim, metro_error *err);

/* checkpoint.bin: "METROCK1", then the counts and the state arrays, then for
 * every plugin instance (potential, sampler, observables in config order)
 * its random stream's offset and its saved bytes, then an FNV-1a checksum
 * of everything before it.  Written to a temporary file and renamed. */

typedef struct cbuf {
    unsigned char *p;
    size_t n, cap;
} cbuf;

static void cput(cbuf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        while (b->n + n > b->cap) b->cap = b->cap ? 2 * b->cap : 1 << 16;
        b->p = metro__xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static int cget(const unsigned char **p, const unsigned char *end, void *d, size_t n)
{
    if ((size_t)(end - *p) < n) return -1;
    memcpy(d, *p, n);
    *p += n;
    return 0;
}

static metro_ctx *ctx_at(metro_sim *sim, int i)
{
    return i == 0 ? &sim->pot : i == 1 ? &sim->smp : &sim->obs[i - 2];
}

static int ctx_save(metro_ctx *c, int i)
{
    c->save_n = 0;
    if (i == 0) return 0; /* potentials are stateless */
    if (i == 1) return ((const metro_sampler_api *)c->plugin->d->api)->save(c->self);
    return ((const metro_observable_api *)c->plugin->d->api)->save(c->self);
}

int metro_sim_checkpoint(metro_sim *sim, metro_error *err)
{
    if (!sim->dir) return METRO_OK;
    int rc = do_sync(sim, err);
    if (rc) return rc;
    metro_state *st = &sim->st;
    cbuf b = {0};
    int32_t nctx = 2 + sim->nobs, n = st->particles, r = st->replicas, meas = st->measuring;
    int64_t sweep = st->sweep;
    cput(&b, "METROCK1", 8);
    cput(&b, &nctx, 4); cput(&b, &n, 4); cput(&b, &r, 4); cput(&b, &meas, 4); cput(&b, &sweep, 8);
    cput(&b, st->pos, sizeof *st->pos * (size_t)n * (size_t)r);
    cput(&b, st->energy, sizeof *st->energy * (size_t)r);
    cput(&b, st->beta, sizeof *st->beta * (size_t)r);
    cput(&b, st->slot_replica, sizeof *st->slot_replica * (size_t)r);
    cput(&b, st->accepted, sizeof *st->accepted * (size_t)r);
    cput(&b, st->attempted, sizeof *st->attempted * (size_t)r);
    for (int i = 0; i < nctx && !rc; ++i) {
        metro_ctx *c = ctx_at(sim, i);
        uint64_t off = c->rng.offset, size;
        if (ctx_save(c, i)) {
            rc = plugin_failed(c, err, METRO_ERUN, "could not save its state");
            break;
        }
        size = c->save_n;
        cput(&b, &off, 8);
        cput(&b, &size, 8);
        if (size) cput(&b, c->save_buf, size);
    }
    uint64_t sum = metro__fnv(METRO__FNV_INIT, b.p, b.n);
    cput(&b, &sum, 8);
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/checkpoint.bin", sim->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = rc ? NULL : fopen(tmp, "wb");
    if (!rc && (!f || fwrite(b.p, 1, b.n, f) != b.n || fclose(f) || rename(tmp, path)))
        rc = metro__fail(err, METRO_ERUN, "%s: cannot be written: %s", path, strerror(errno));
    free(b.p);
    return rc;
}

/* Read checkpoint.bin into the state (before the sampler starts). The
 * plugin blobs stay in *data for resume_plugins(). */
static int resume_state(metro_sim *sim, unsigned char **data, size_t *size, const unsigned char **rest,
                        metro_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.bin", sim->dir);
    *data = (unsigned char *)metro__read_file(path, size);
    if (!*data) return metro__fail(err, METRO_ERUN, "%s: cannot be read: %s", path, strerror(errno));
    metro_state *st = &sim->st;
    const unsigned char *p = *data, *end = *data + *size;
    uint64_t sum;
    if (*size < 16 || memcmp(p, "METROCK1", 8) ||
        (memcpy(&sum, end - 8, 8), sum != metro__fnv(METRO__FNV_INIT, p, *size - 8)))
        return metro__fail(err, METRO_ERUN, "%s: damaged (bad magic or checksum): cannot resume", path);
    end -= 8;
    p += 8;
    int32_t nctx = 0, n = 0, r = 0, meas = 0;
    int64_t sweep = 0;
    cget(&p, end, &nctx, 4); cget(&p, end, &n, 4); cget(&p, end, &r, 4); cget(&p, end, &meas, 4);
    cget(&p, end, &sweep, 8);
    if (nctx != 2 + sim->nobs || n != st->particles || r != st->replicas)
        return metro__fail(err, METRO_EUSAGE,
                           "%s: written for %d particles x %d replicas with %d observables; the config now asks %d x %d with %d",
                           path, n, r, nctx - 2, st->particles, st->replicas, sim->nobs);
    if (cget(&p, end, st->pos, sizeof *st->pos * (size_t)n * (size_t)r) ||
        cget(&p, end, st->energy, sizeof *st->energy * (size_t)r))
        return metro__fail(err, METRO_ERUN, "%s: truncated", path);
    st->sweep = sweep;
    st->measuring = meas;
    *rest = p;
    if (st->backend == METRO_BACKEND_CUDA &&
        (upload(sim, st->d_pos, st->pos, sizeof *st->pos * (size_t)n * (size_t)r) ||
         upload(sim, st->d_energy, st->energy, sizeof *st->energy * (size_t)r)))
        return metro__fail(err, METRO_ERUN, "CUDA: uploading the checkpoint failed");
    return METRO_OK;
}

/* After the sampler started: the rest of the state and every plugin's. */
static int resume_plugins(metro_sim *sim, const unsigned char *p, const unsigned char *end, metro_error *err)
{
    metro_state *st = &sim->st;
    size_t r = (size_t)st->replicas;
    if (cget(&p, end, st->beta, sizeof *st->beta * r) || cget(&p, end, st->slot_replica, sizeof *st->slot_replica * r) ||
        cget(&p, end, st->accepted, sizeof *st->accepted * r) || cget(&p, end, st->attempted, sizeof *st->attempted * r))
        return metro__fail(err, METRO_ERUN, "checkpoint.bin: truncated");
    for (int i = 0; i < 2 + sim->nobs; ++i) {
        metro_ctx *c = ctx_at(sim, i);
        uint64_t off, size;
        if (cget(&p, end, &off, 8) || cget(&p, end, &size, 8) || (size_t)(end - p) < size)
            return metro__fail(err, METRO_ERUN, "checkpoint.bin: truncated");
        metro__rng_free(&c->rng);
        c->rng.offset = off;
        int bad = 0;
        if (i == 1) bad = ((const metro_sampler_api *)c->plugin->d->api)->restore(c->self, p, size);
        if (i >= 2) bad = ((const metro_observable_api *)c->plugin->d->api)->restore(c->self, p, size);
        if (bad) return plugin_failed(c, err, METRO_ERUN, "could not restore its state");
        p += size;
    }
    return METRO_OK;
}

/* ---- public API --------------------------------------------------------- */

int metro_sim_create(const metro_options *opt, metro_sim **out, metro_error *err)
{
    *out = NULL;
    metro_sim *sim = metro__xcalloc(1, sizeof *sim);
    sim->quiet = opt->quiet;
    int rc = read_config(sim, opt, err);
    if (rc) goto fail;
    sim->sweeps = metro__param_int(sim->run, "sweeps");
    sim->equilibration = metro__param_int(sim->run, "equilibration");
    sim->check_every = metro__param_int(sim->run, "check_every");
    sim->drift_tolerance = metro__param_real(sim->run, "drift_tolerance");
    if (opt->device && strcmp(opt->device, "auto") && strcmp(opt->device, "cpu") && strcmp(opt->device, "cuda")) {
        rc = metro__fail(err, METRO_EUSAGE, "--device %s: unknown backend (allowed: auto, cpu, cuda)", opt->device);
        goto fail;
    }
    rc = choose_backend(sim, opt->device ? opt->device : metro__param_string(sim->run, "device"), err);
    if (rc) goto fail;
    rc = make_run_dir(sim, opt, err);
    if (rc) goto fail;
    sim->pot_api = sim->pot.plugin->d->api;
    sim->smp_api = sim->smp.plugin->d->api;
    sim->setup.particles = (int)metro__param_int(sim->system, "particles");
    sim->setup.replicas = 1;
    sim->pot.host_rng = 1; /* initial configurations are drawn on the host: same on both backends */

    if (sim->pot_api->create(&host_api, &sim->pot, sim->pot.params, &sim->setup, &sim->pot.self)) {
        rc = plugin_failed(&sim->pot, err, METRO_EUSAGE, "refused its parameters");
        sim->pot.self = NULL;
        goto fail;
    }
    if (sim->smp_api->create(&host_api, &sim->smp, sim->smp.params, &sim->setup, &sim->smp.self)) {
        rc = plugin_failed(&sim->smp, err, METRO_EUSAGE, "refused its parameters");
        sim->smp.self = NULL;
        goto fail;
    }
    metro_state *st = &sim->st;
    st->backend = sim->setup.backend;
    st->particles = sim->setup.particles;
    st->replicas = sim->setup.replicas;
    st->chain = sim->setup.chain;
    size_t np = (size_t)st->particles * (size_t)st->replicas;
    st->pos = metro__xcalloc(np, sizeof *st->pos);
    st->energy = metro__xcalloc((size_t)st->replicas, sizeof *st->energy);
    st->beta = metro__xcalloc((size_t)st->replicas, sizeof *st->beta);
    st->slot_replica = metro__xcalloc((size_t)st->replicas, sizeof *st->slot_replica);
    st->accepted = metro__xcalloc((size_t)st->replicas, sizeof *st->accepted);
    st->attempted = metro__xcalloc((size_t)st->replicas, sizeof *st->attempted);
    for (int r = 0; r < st->replicas; ++r) {
        st->slot_replica[r] = r;
        if (sim->pot_api->initial(sim->pot.self, &sim->pot, st->pos + (size_t)r * st->particles, st->particles)) {
            rc = plugin_failed(&sim->pot, err, METRO_ERUN, "could not place the particles");
            goto fail;
        }
    }
    if (st->backend == METRO_BACKEND_CUDA && (rc = start_cuda(sim, err))) goto fail;
    /* after linking, so that observables can look up their kernels */
    for (int i = 0; i < sim->nobs; ++i) {
        metro_ctx *o = &sim->obs[i];
        const metro_observable_api *a = o->plugin->d->api;
        if (a->create(&host_api, o, o->params, &sim->setup, &o->self)) {
            rc = plugin_failed(o, err, METRO_EUSAGE, "refused its parameters");
            o->self = NULL;
            goto fail;
        }
    }
    if ((rc = total_all(sim, st->energy, err))) goto fail;
    for (int r = 0; r < st->replicas; ++r)
        if (!isfinite(st->energy[r])) {
            rc = metro__fail(err, METRO_ERUN, "[potential] %s: the initial configuration of replica %d has energy %g",
                             sim->pot.plugin->d->name, r, st->energy[r]);
            goto fail;
        }
    if (st->backend == METRO_BACKEND_CUDA &&
        upload(sim, st->d_energy, st->energy, (size_t)st->replicas * sizeof(double))) {
        rc = metro__fail(err, METRO_ERUN, "CUDA: uploading energies failed");
        goto fail;
    }
    unsigned char *ck = NULL;
    size_t cksize = 0;
    const unsigned char *ckrest = NULL;
    if (opt->resume && (rc = resume_state(sim, &ck, &cksize, &ckrest, err))) {
        free(ck);
        goto fail;
    }
    if (sim->smp_api->start(sim->smp.self, st, sim->pot_api, sim->pot.self)) {
        free(ck);
        rc = plugin_failed(&sim->smp, err, METRO_ERUN, "could not start");
        goto fail;
    }
    if (ck) {
        rc = resume_plugins(sim, ckrest, ck + cksize - 8, err);
        free(ck);
        if (rc) goto fail;
        core_log(sim, METRO_LOG_INFO, "resumed from %s/checkpoint.bin at sweep %lld", sim->dir, st->sweep);
    }
    /* the program prints the backend line itself, even with --quiet */
    if (sim->log)
        fprintf(sim->log, "backend %s: %s\n", st->backend == METRO_BACKEND_CUDA ? "cuda" : "cpu", sim->device_name);
    if (st->backend == METRO_BACKEND_CUDA)
        core_log(sim, METRO_LOG_INFO, "device code linked for this GPU in %.2f s%s", sim->link_seconds,
                 sim->cubin_cached ? " (from the cache)" : "");
    core_log(sim, METRO_LOG_INFO, "%s + %s, %d particles x %d replicas, seed %llu%s%s", sim->pot.plugin->d->name,
             sim->smp.plugin->d->name, st->particles, st->replicas, (unsigned long long)sim->setup.seed,
             sim->dir ? ", run directory " : "", sim->dir ? sim->dir : "");
    *out = sim;
    return METRO_OK;
fail:
    metro_sim_destroy(sim);
    return rc ? rc : METRO_ERUN;
}

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

static int do_sync(metro_sim *sim, metro_error *err)
{
    if (sim->smp_api->sync(sim->smp.self, &sim->st))
        return plugin_failed(&sim->smp, err, METRO_ERUN, "could not bring the state back");
    return METRO_OK;
}

const metro_state *metro_sim_state(metro_sim *sim, metro_error *err)
{
    return do_sync(sim, err) ? NULL : &sim->st;
}

int metro_sim_advance(metro_sim *sim, long sweeps, metro_error *err)
{
    if (sweeps <= 0) return METRO_OK;
    if (sim->smp_api->advance(sim->smp.self, &sim->st, sweeps))
        return plugin_failed(&sim->smp, err, METRO_ERUN, "failed");
    sim->st.sweep += sweeps;
    return METRO_OK;
}

double metro_sim_total_energy(metro_sim *sim, int r, metro_error *err)
{
    double *e = metro__xcalloc((size_t)sim->st.replicas, sizeof *e);
    double v = NAN;
    if (do_sync(sim, err) == METRO_OK && total_all(sim, e, err) == METRO_OK) v = e[r];
    free(e);
    return v;
}

/* Compare the running energies with a fresh computation; resynchronise
 * them so rounding cannot accumulate. */
static int check_energy(metro_sim *sim, double *worst, metro_error *err)
{
    metro_state *st = &sim->st;
    double *e = metro__xcalloc((size_t)st->replicas, sizeof *e);
    int rc = total_all(sim, e, err);
    for (int r = 0; !rc && r < st->replicas; ++r) {
        double scale = fmax(fabs(e[r]), (double)st->particles);
        double drift = fabs(st->energy[r] - e[r]) / scale;
        if (!(drift <= *worst)) *worst = drift;
        if (!isfinite(e[r]) || !(drift <= sim->drift_tolerance))
            rc = metro__fail(err, METRO_ERUN,
                             "energy check at sweep %lld: replica %d runs at E = %.10g but recomputes to %.10g "
                             "(relative drift %.3g > drift_tolerance %.3g): the sampler's bookkeeping or the potential's delta() is wrong",
                             st->sweep, r, st->energy[r], e[r], drift, sim->drift_tolerance);
        st->energy[r] = e[r];
    }
    if (!rc && st->backend == METRO_BACKEND_CUDA &&
        upload(sim, st->d_energy, st->energy, (size_t)st->replicas * sizeof(double)))
        rc = metro__fail(err, METRO_ERUN, "CUDA: uploading energies failed");
    free(e);
    return rc;
}

static long gcd(long a, long b)
{
    while (b) { long t = a % b; a = b; b = t; }
    return a;
}

static void progress(metro_sim *sim, const char *phase, long done, long total, double t0, int final)
{
    static double last;
    double now = metro__now();
    if (sim->quiet || !isatty(2) || (!final && now - last < 0.5)) return;
    last = now;
    double rate = done / fmax(now - t0, 1e-9);
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\r%s: sweep %ld/%ld (%.1f%%), %.4g sweeps/s, ETA %.0f s   %s", phase, done, total,
            total ? 100.0 * done / total : 100.0, rate, eta, final ? "\n" : "");
    fflush(stderr);
}

static int stop_requested(metro_sim *sim, metro_error *err)
{
    if (!interrupted) return METRO_OK;
    int rc = metro_sim_checkpoint(sim, err);
    if (rc) return rc;
    return metro__fail(err, METRO_ERUN, "interrupted by signal %d at sweep %lld; the checkpoint is written: metro resume %s continues",
                       (int)interrupted, sim->st.sweep, sim->dir ? sim->dir : "RUNDIR");
}

int metro_sim_run(metro_sim *sim, metro_error *err)
{
    metro_state *st = &sim->st;
    interrupted = 0;
    void (*old_int)(int) = signal(SIGINT, on_signal);
    void (*old_term)(int) = signal(SIGTERM, on_signal);
    double t0 = metro__now();
    long check = sim->check_every ? sim->check_every : (sim->sweeps + sim->equilibration) / 10;
    if (check < 1) check = 1;
    double worst = 0;
    int rc = METRO_OK;
    long next_check;
    long long first = st->sweep, att0 = 0; /* resumed runs: rates count this invocation */
    for (int r = 0; r < st->replicas; ++r) att0 += st->attempted[r];

    /* equilibration, in chunks for progress and energy checks */
    long chunk = 1;
    long eq_done = st->sweep < sim->equilibration ? (long)st->sweep : sim->equilibration;
    long prod_done = (long)st->sweep - eq_done;
    next_check = (st->sweep / check + 1) * check;
    st->measuring = eq_done == sim->equilibration;
    for (long done = eq_done; done < sim->equilibration && !rc;) {
        long k = chunk;
        if (k > sim->equilibration - done) k = sim->equilibration - done;
        if (k > next_check - st->sweep) k = next_check - st->sweep;
        if (k < 1) k = 1;
        double c0 = metro__now();
        rc = metro_sim_advance(sim, k, err);
        if (!rc && st->sweep >= next_check) {
            rc = do_sync(sim, err);
            if (!rc) rc = check_energy(sim, &worst, err);
            if (!rc) rc = metro_sim_checkpoint(sim, err);
            next_check += check;
        }
        if (st->backend == METRO_BACKEND_CUDA) cudaStreamSynchronize((cudaStream_t)sim->stream);
        done += k;
        if (metro__now() - c0 < 0.2 && chunk < (1 << 20)) chunk *= 2;
        progress(sim, "equilibration", done, sim->equilibration, t0, done == sim->equilibration);
        if (!rc) rc = stop_requested(sim, err);
    }
    if (!rc && sim->equilibration)
        core_log(sim, METRO_LOG_DEBUG, "equilibration: %ld sweeps done at %.1f s", sim->equilibration, metro__now() - t0);
    /* production: advance to the next measurement, sync, measure */
    long step = 0;
    for (int i = 0; i < sim->nobs; ++i) step = step ? gcd(step, sim->obs[i].every) : sim->obs[i].every;
    if (!step) step = sim->sweeps ? sim->sweeps : 1;
    st->measuring = 1;
    double p0 = metro__now();
    for (long done = prod_done; done < sim->sweeps && !rc;) {
        long k = step;
        if (k > sim->sweeps - done) k = sim->sweeps - done;
        rc = metro_sim_advance(sim, k, err);
        done += k;
        if (rc) break;
        /* Observables measure from host copies, which costs a sync, unless
         * on CUDA every one due can measure on the device. */
        int due = 0, host = 0;
        for (int i = 0; i < sim->nobs; ++i) {
            const metro_observable_api *a = sim->obs[i].plugin->d->api;
            int d = done % sim->obs[i].every == 0;
            due |= d;
            host |= d && (st->backend != METRO_BACKEND_CUDA || !a->measure_device);
        }
        if (host || st->sweep >= next_check) rc = do_sync(sim, err);
        for (int i = 0; i < sim->nobs && !rc && due; ++i) {
            metro_ctx *o = &sim->obs[i];
            const metro_observable_api *a = o->plugin->d->api;
            if (done % o->every) continue;
            if (host ? a->measure(o->self, st) : a->measure_device(o->self, st))
                rc = plugin_failed(o, err, METRO_ERUN, "could not measure");
        }
        if (!rc && st->sweep >= next_check) {
            rc = check_energy(sim, &worst, err);
            if (!rc) rc = metro_sim_checkpoint(sim, err);
            next_check += check;
        }
        progress(sim, "production", done - prod_done, sim->sweeps - prod_done, p0, done == sim->sweeps);
        if (!rc && done % (sim->sweeps / 10 > step ? sim->sweeps / 10 / step * step : step) == 0)
            core_log(sim, METRO_LOG_DEBUG, "production: %ld of %ld sweeps at %.1f s", done, sim->sweeps, metro__now() - t0);
        if (!rc) rc = stop_requested(sim, err);
    }
    double t_finish = metro__now();
    if (!rc) rc = do_sync(sim, err);
    if (!rc) rc = check_energy(sim, &worst, err);
    if (!rc) rc = metro_sim_checkpoint(sim, err);
    if (!rc && sim->smp_api->finish(sim->smp.self, st))
        rc = plugin_failed(&sim->smp, err, METRO_ERUN, "could not write its results");
    for (int i = 0; i < sim->nobs && !rc; ++i) {
        metro_ctx *o = &sim->obs[i];
        if (((const metro_observable_api *)o->plugin->d->api)->finish(o->self, st))
            rc = plugin_failed(o, err, METRO_ERUN, "could not write its results");
    }
    core_log(sim, METRO_LOG_DEBUG, "results written in %.1f s", metro__now() - t_finish);
    signal(SIGINT, old_int);
    signal(SIGTERM, old_term);
    double wall = metro__now() - t0;
    long long att = 0, acc = 0;
    for (int r = 0; r < st->replicas; ++r) { att += st->attempted[r]; acc += st->accepted[r]; }
    if (!rc) {
        core_log(sim, METRO_LOG_INFO, "done: %lld sweeps in %.3f s (%.4g sweeps/s, %.4g moves/s), acceptance %.4f, largest energy drift %.3g",
                 st->sweep, wall, (st->sweep - first) / fmax(wall, 1e-9), (att - att0) / fmax(wall, 1e-9),
                 att ? (double)acc / att : 0.0, worst);
    } else if (sim->log) { /* the program prints err itself */
        fprintf(sim->log, "run stopped: %s", err->msg);
        fflush(sim->log);
    }
    return rc;
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
    for (int i = 0; i < sim->nobs; ++i) free_ctx(&sim->obs[i], METRO_KIND_OBSERVABLE);
    free(sim->obs);
    free_ctx(&sim->smp, METRO_KIND_SAMPLER);
    free_ctx(&sim->pot, METRO_KIND_POTENTIAL);
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
    if (sim->log) fclose(sim->log);
    free(sim->dir);
    free(sim);
}
