/* core/src/host.c — the services the core gives plugins (metro_host_api)
 * and the run's log. */
#define _GNU_SOURCE
#include "sim.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frames.h"
#include "ranks.h"
#include "util.h"

/* ---- the log ------------------------------------------------------------- */

/* Lines logged before log.txt exists (everything is validated before the
 * run directory is made) are kept and written first when it opens. */
static void log_line(metro_sim *sim, const char *text)
{
    if (!sim->writer) return; /* other MPI ranks: rank 0 logs the run */
    if (sim->log) {
        fputs(text, sim->log);
        fflush(sim->log);
        return;
    }
    size_t l = strlen(text);
    sim->early_log = metro__xrealloc(sim->early_log, sim->early_n + l + 1);
    memcpy(sim->early_log + sim->early_n, text, l + 1);
    sim->early_n += l;
}

void metro__log_flush_early(metro_sim *sim)
{
    if (!sim->log || !sim->early_n) return;
    fputs(sim->early_log, sim->log);
    fflush(sim->log);
    free(sim->early_log);
    sim->early_log = NULL;
    sim->early_n = 0;
}

static void vlog(metro_sim *sim, const char *who, metro_log_level level, const char *fmt, va_list ap)
{
    static const char *names[] = {"error", "warning", "", ""};
    char line[4096], out[4300];
    vsnprintf(line, sizeof line, fmt, ap);
    time_t t = time(NULL);
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", localtime(&t));
    snprintf(out, sizeof out, "%s %s%s%s%s%s\n", ts, who ? who : "", who ? ": " : "", names[level],
             level < METRO_LOG_INFO ? ": " : "", line);
    log_line(sim, out);
    /* over MPI the rank that writes the run says it once, not every rank */
    if ((level == METRO_LOG_ERROR || sim->writer) && (level <= METRO_LOG_WARN || (!sim->quiet && level <= METRO_LOG_INFO)))
        fprintf(stderr, "%s%s%s%s%s\n", who ? who : "metro", ": ", names[level],
                level < METRO_LOG_INFO ? ": " : "", line);
}

void metro__log(metro_sim *sim, metro_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(sim, NULL, level, fmt, ap);
    va_end(ap);
}

/* ---- plugin failures ------------------------------------------------------ */

/* Where in the config a plugin's refusal points: the key its message starts
 * with (the convention of plugin.h), else the section header ("FILE:LINE"
 * or the --set that made it). */
static const char *locate(metro_ctx *ctx)
{
    metro__config *cfg = ctx->sim->cfg;
    const char *where = metro__config_section_where(cfg, ctx->section);
    const metro_param_decl *d = ctx->plugin ? ctx->plugin->d->params : NULL;
    size_t best = 0;
    for (int i = 0; d && d[i].name; ++i) {
        size_t l = strlen(d[i].name);
        if (l > best && !strncmp(ctx->err, d[i].name, l) && strchr(": ,", ctx->err[l])) {
            metro__entry *e = metro__config_find(cfg, ctx->section, d[i].name);
            if (e) {
                where = e->where;
                best = l;
            }
        }
    }
    return where;
}

int metro__plugin_failed(metro_ctx *ctx, metro_error *err, int status, const char *what)
{
    return metro__fail(err, status, "%s: [%s] %s (%s) %s: %s", locate(ctx), ctx->section,
                       ctx->plugin ? ctx->plugin->d->name : "?",
                       ctx->plugin ? metro__kind_name(ctx->plugin->d->kind) : "", what,
                       ctx->err[0] ? ctx->err : "failed without saying why");
}

/* ---- services ------------------------------------------------------------- */

static int h_fail(metro_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    return -1;
}

static void h_log(metro_ctx *ctx, metro_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(ctx->sim, ctx->plugin ? ctx->plugin->d->name : ctx->section, level, fmt, ap);
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
    /* a dry run creates the plugins without linking: a kernel asked for
     * there is never launched */
    if (!ctx->sim->library && ctx->sim->dry && ctx->sim->setup.backend == METRO_BACKEND_CUDA) {
        *kernel = NULL;
        return 0;
    }
    if (!ctx->sim->library) return h_fail(ctx, "kernel '%s' asked for on the CPU backend", name);
    cudaKernel_t k;
    cudaError_t e = cudaLibraryGetKernel(&k, (cudaLibrary_t)ctx->sim->library, name);
    if (e != cudaSuccess)
        return h_fail(ctx, "no kernel '%s' in the linked device code (%s)", name, cudaGetErrorString(e));
    *kernel = (void *)k;
    return 0;
}

static void *h_stream(metro_ctx *ctx)
{
    return ctx->sim->stream;
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

static int h_cuda(metro_ctx *ctx, int status, const char *what, ...)
{
    if (status == cudaSuccess) return 0;
    char w[1024];
    va_list ap;
    va_start(ap, what);
    vsnprintf(w, sizeof w, what, ap);
    va_end(ap);
    /* the sticky error is cleared where it can be, so the message is this call's */
    cudaGetLastError();
    return h_fail(ctx, "CUDA: %s failed: %s (%s)", w, cudaGetErrorName((cudaError_t)status),
                  cudaGetErrorString((cudaError_t)status));
}

/* Trajectories (frames.c): plain names in the run directory only, like
 * open_output; without a run directory (library use, tests) nothing is
 * written. */
static int trajectory_path(metro_ctx *ctx, const char *filename, char *path, size_t n)
{
    if (metro__output_claim(ctx, filename, 1)) return -1;
    snprintf(path, n, "%s/%s", ctx->sim->dir ? ctx->sim->dir : "", filename);
    return 0;
}

static int h_frame_append(metro_ctx *ctx, const char *filename, const metro_frame *frame, metro_frame_mark *mark)
{
    char path[4200];
    if (trajectory_path(ctx, filename, path, sizeof path)) return -1;
    if (!ctx->sim->dir) return 0;
    return metro__frames_append(path, frame, mark, ctx->err, sizeof ctx->err) ? -1 : 0;
}

static int h_frame_truncate(metro_ctx *ctx, const char *filename, const metro_frame_mark *mark)
{
    char path[4200];
    if (trajectory_path(ctx, filename, path, sizeof path)) return -1;
    if (!ctx->sim->dir) return 0;
    return metro__frames_truncate(path, mark, ctx->err, sizeof ctx->err) ? -1 : 0;
}

/* A system spreads over the ranks only when it is the run's one system
 * (an ensemble gives each rank whole systems instead). */
static void h_replicas_here(metro_ctx *ctx, int replicas, int *first, int *last)
{
    ctx->sim->asked_ranks = 1;
    if (ctx->sim->spread) metro__rank_range(metro__rank(), metro__ranks(), replicas, first, last);
    else *first = 0, *last = replicas;
}

static int h_share_replicas(metro_ctx *ctx, void *array, int replicas, size_t bytes)
{
    if (!ctx->sim->spread) return 0;
    if (metro__ranks_share(array, replicas, bytes))
        return h_fail(ctx, "MPI: sharing %d replicas of %zu bytes between ranks failed", replicas, bytes);
    return 0;
}

/* Facts a term publishes (plugin.h); a second term may publish the same
 * value again, a different one is a contradiction. */
static int h_fact_set(metro_ctx *ctx, const char *name, double value)
{
    metro_sim *sim = ctx->sim;
    if (strlen(name) >= sizeof sim->facts[0].name) return h_fail(ctx, "fact name '%s' is too long", name);
    if (!strcmp(name, "cell_radius")) ctx->walls = 1; /* a cell's term: its wall acts on its species */
    for (int i = 0; i < sim->nfacts; ++i) {
        if (strcmp(sim->facts[i].name, name)) continue;
        if (sim->facts[i].value == value) return 0;
        return h_fail(ctx, "%s = %g here, but [%s] gives %s = %g: the terms contradict each other", name, value,
                      sim->facts[i].section, name, sim->facts[i].value);
    }
    sim->facts = metro__xrealloc(sim->facts, sizeof *sim->facts * (size_t)(sim->nfacts + 1));
    struct metro__fact *f = &sim->facts[sim->nfacts++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->value = value;
    f->section = ctx->section;
    return 0;
}

static int h_fact(metro_ctx *ctx, const char *name, double *value)
{
    const metro_sim *sim = ctx->sim;
    for (int i = 0; i < sim->nfacts; ++i)
        if (!strcmp(sim->facts[i].name, name)) {
            *value = sim->facts[i].value;
            return 1;
        }
    return 0;
}

static int h_claim_output(metro_ctx *ctx, const char *filename)
{
    return metro__output_claim(ctx, filename, 0);
}

const metro_host_api metro__host_api = {
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
    metro__output_open,
    h_run_dir,
    h_save_bytes,
    h_cuda,
    metro__plot_request,
    h_frame_append,
    h_frame_truncate,
    h_replicas_here,
    h_share_replicas,
    h_fact_set,
    h_fact,
    h_claim_output,
};
