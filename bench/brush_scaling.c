/* brush_scaling — the speed protocol of seed 002 §4 inside metro: one cycle
 * (N trial moves, N(N-1) pair-deltas) of the paper's 3:-1 electrolyte
 * (PHYSICS.md §2: ion radius 3.75 Å, λ_B = 7.117 Å, cation density
 * 1.1447e-6 Å^-3) for N = 8192 ... 1048576:
 *
 *   brush GPU     the brush sampler on CUDA: median time of one cycle after
 *                 two warm-up cycles, from CUDA events recorded on the run's
 *                 stream (metro_sim_stream) around metro_sim_advance(1): the
 *                 cycle's uniforms and its kernel, not the host's launch and
 *                 synchronisation latency
 *   chained       the same around metro_sim_advance(8) (4 from N = 2^20),
 *                 per cycle: one launch runs the cycles as one chain of
 *                 groups (sampler.cycles_per_launch), so a cycle's first
 *                 groups overlap the previous cycle's last
 *   conv. GPU     metropolis, scheme = reduction, order = sequential: the
 *                 conventional scheme (one trial at a time, a parallel
 *                 reduction over the N - 1 pair terms); one whole sweep,
 *                 timed the same way
 *   CPU 1 / all   coulomb_hs's delta() loop, the loop the brush CPU backend
 *                 runs, on 1 thread and on all cores: K trials (about 2e8
 *                 pair-deltas), scaled by the exact pair count N(N-1)/(K(N-1)).
 *                 It is driven directly (the plugin's table through a small
 *                 host table here) because a CPU-backend simulation computes
 *                 the O(N^2) initial energy on the CPU first: 40 minutes at
 *                 N = 2^20 on one core.
 *
 * Prints a table with pair-deltas per second, the percentage of the
 * arithmetic ceiling of docs/DESIGN.md fact 7 (2.1e12 pair-deltas/s: two
 * reciprocal square roots each on the H100's special-function units) and
 * the ratios.  Without a GPU it prints the CPU columns and says so.
 *
 *   brush_scaling [--sizes 8192,16384] [--reps K] [--no-conventional]
 *                 [--no-cpu] [--set section.key=value]...
 * (--set goes to the brush simulation, e.g. --set sampler.eta=8.)
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metro/metro.h"

#define CEILING 2.1e12
#define CATION_DENSITY 1.1447e-6 /* Å^-3 */
#define AVOGADRO 6.02214076e23

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double molar(void)
{
    return CATION_DENSITY / (AVOGADRO * 1e-27);
}

static void ini_text(char *buf, size_t n, int particles, const char *sampler)
{
    snprintf(buf, n,
             "[run]\nseed = 1\nsweeps = 0\n\n[system]\nparticles = %d\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\nconcentration = %.9g\n"
             "bjerrum = 7.117\n\n[sampler]\n%s\n",
             particles, molar(), sampler);
}

static metro_sim *make_sim(const char *ini, const char *device, const char *const *sets, int nsets)
{
    metro_options opt = {0};
    opt.config_text = ini;
    opt.device = device;
    opt.output = "";
    opt.quiet = 1;
    opt.sets = sets;
    opt.nsets = nsets;
    metro_sim *sim = NULL;
    metro_error err = {0};
    if (metro_sim_create(&opt, &sim, &err) != METRO_OK) {
        fprintf(stderr, "brush_scaling: %s\n", err.msg);
        return NULL;
    }
    return sim;
}

/* Median time of one sweep over `reps` advances of `batch` sweeps each,
 * after `warm` sweeps; NAN on failure.  CUDA events recorded on the run's own stream
 * (metro_sim_stream) bracket each sweep: the GPU time from the first to
 * the last piece of the sweep's work on that stream (the cycle's uniforms
 * and the kernel), without the host's launch and synchronisation latency.
 * Without a stream (CPU) it falls back to the wall clock. */
static double time_sweeps(metro_sim *sim, int warm, int reps, int batch)
{
    metro_error err = {0};
    cudaStream_t st = (cudaStream_t)metro_sim_stream(sim);
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (warm && metro_sim_advance(sim, warm, &err) != METRO_OK) goto fail;
    if (st && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)) {
        snprintf(err.msg, sizeof err.msg, "CUDA events: %s", cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    cudaDeviceSynchronize();
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; ++r) {
        double t0 = now();
        if (st) cudaEventRecord(e0, st);
        if (metro_sim_advance(sim, batch, &err) != METRO_OK) goto fail;
        if (st) cudaEventRecord(e1, st);
        if ((st ? cudaEventSynchronize(e1) : cudaDeviceSynchronize()) != cudaSuccess) {
            snprintf(err.msg, sizeof err.msg, "CUDA: %s", cudaGetErrorString(cudaGetLastError()));
            goto fail;
        }
        t[r] = now() - t0;
        if (st) {
            float ms = 0.0f;
            if (cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
                snprintf(err.msg, sizeof err.msg, "CUDA events: %s", cudaGetErrorString(cudaGetLastError()));
                goto fail;
            }
            t[r] = 1e-3 * (double)ms;
        }
        t[r] /= batch;
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
fail:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    fprintf(stderr, "brush_scaling: %s\n", err.msg);
    return NAN;
}

/* ---- the CPU loop, driven directly --------------------------------------- */

typedef struct kv {
    const char *key[16], *val[16];
    int n;
} kv;

struct metro_params { const kv *kv; const metro_param_decl *decls; };
struct metro_ctx { char msg[1024]; uint64_t rng; };

static const char *text_of(const metro_params *p, const char *name)
{
    for (int i = 0; i < p->kv->n; ++i)
        if (!strcmp(p->kv->key[i], name)) return p->kv->val[i];
    for (const metro_param_decl *d = p->decls; d->name; ++d)
        if (!strcmp(d->name, name)) return d->default_value ? d->default_value : "";
    return "";
}
static long h_int(const metro_params *p, const char *n) { return atol(text_of(p, n)); }
static double h_real(const metro_params *p, const char *n) { return atof(text_of(p, n)); }
static int h_bool(const metro_params *p, const char *n) { return !strcmp(text_of(p, n), "true"); }
static const char *h_string(const metro_params *p, const char *n) { return text_of(p, n); }
static const double *h_list(const metro_params *p, const char *n, int *count)
{
    static double store[4][16];
    static int turn;
    double *out = store[turn++ & 3];
    const char *t = text_of(p, n);
    int k = 0;
    while (*t && k < 16) {
        char *end;
        out[k] = strtod(t, &end);
        if (end == t) break;
        ++k;
        t = end + strspn(end, ", ");
    }
    *count = k;
    return out;
}
static int h_fail(metro_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return -1;
}
static void h_log(metro_ctx *c, metro_log_level l, const char *fmt, ...) {}
static int h_uniform(metro_ctx *c, float *out, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        out[i] = (float)((double)((c->rng >> 40) + 1) / 16777216.0);
    }
    return 0;
}

typedef struct cpu_loop {
    const metro_potential_api *api;
    const metro_param_decl *decls;
} cpu_loop;

/* The coulomb_hs plugin next to this program (build tree or install). */
static int load_potential(cpu_loop *L)
{
    char exe[4096], path[4200];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/../lib/metro/plugins/coulomb_hs.so", exe);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "brush_scaling: %s\n", dlerror());
        return -1;
    }
    metro_plugin_entry_fn entry = (metro_plugin_entry_fn)dlsym(h, METRO_PLUGIN_ENTRY);
    if (!entry) return -1;
    const metro_plugin *d = entry();
    L->api = d->api;
    L->decls = d->params;
    return 0;
}

/* The cell radius coulomb_hs publishes (host->fact_set). */
static double published_radius;
static int h_fact_set(metro_ctx *ctx, const char *name, double v)
{
    (void)ctx;
    if (!strcmp(name, "cell_radius")) published_radius = v;
    return 0;
}

/* Seconds per cycle of the CPU loop on `threads` threads (0 = all), from
 * about 2e8 pair-deltas of real trials; *pd gets pair-deltas/s.  NAN on
 * failure. */
static double cpu_cycle(const cpu_loop *L, int n, int threads, double *pd)
{
    char conc[64], thr[32], cnt[32];
    snprintf(conc, sizeof conc, "%.9g", molar());
    snprintf(thr, sizeof thr, "%d", threads);
    snprintf(cnt, sizeof cnt, "%d", n);
    kv kvs = {{"valences", "diameters", "concentration", "bjerrum", "threads"}, {"3, -1", "7.5", conc, "7.117", thr}, 5};
    metro_params p = {&kvs, L->decls};
    metro_ctx ctx = {{0}, 88172645463325252ull};
    metro_host_api host = {0};
    host.version = METRO_ABI_VERSION;
    host.fail = h_fail;
    host.log = h_log;
    host.param_int = h_int;
    host.param_real = h_real;
    host.param_bool = h_bool;
    host.param_string = h_string;
    host.param_list = h_list;
    host.uniform = h_uniform;
    host.fact_set = h_fact_set;
    metro_setup setup = {0};
    setup.particles = n;
    setup.replicas = 1;
    setup.backend = METRO_BACKEND_CPU;
    void *self = NULL;
    metro_float4 *pos = malloc((size_t)n * sizeof *pos);
    int bad = !pos || L->api->create(&host, &ctx, &p, &setup, &self);
    /* the species along the index as the core assigns them */
    long count[METRO_MAX_SPECIES];
    for (int k = 0; !bad && k < setup.species; ++k) count[k] = setup.species_table[k].count;
    if (!bad) metro_species_interleave(pos, n, count, setup.species);
    if (bad || L->api->initial(self, &ctx, pos, n)) {
        fprintf(stderr, "brush_scaling: coulomb_hs: %s\n", ctx.msg);
        free(pos);
        return NAN;
    }
    const float D = (float)(2.0 * published_radius / 3.0);
    long k = (long)(2e8 / (double)n);
    if (k < 2) k = 2;
    if (k > n) k = n;
    float u[4];
    double t0 = now();
    for (long i = 0; i < k; ++i) {
        h_uniform(&ctx, u, 4);
        metro_float4 t = pos[i];
        t.x += (u[0] - 0.5f) * D;
        t.y += (u[1] - 0.5f) * D;
        t.z += (u[2] - 0.5f) * D;
        double de = L->api->delta(self, pos, n, (int)i, t);
        if (metro_accept(de, u[3])) pos[i] = t;
    }
    double dt = now() - t0;
    L->api->destroy(self);
    free(pos);
    double pairs = (double)k * (double)(n - 1);
    *pd = pairs / dt;
    return dt * (double)n / (double)k;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int sizes[32] = {8192, 16384, 32768, 65536, 262144, 1048576}, nsizes = 6;
    int reps = 0, conventional = 1, cpu = 1;
    const char *sets[32];
    int nsets = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < 32; t = strtok(NULL, ",")) sizes[nsizes++] = atoi(t);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--no-conventional")) {
            conventional = 0;
        } else if (!strcmp(argv[i], "--no-cpu")) {
            cpu = 0;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && nsets < 32) {
            sets[nsets++] = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--sizes N,N,...] [--reps K] [--no-conventional] [--no-cpu] "
                            "[--set section.key=value]...\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    const int gpu = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    char devname[256] = "no GPU";
    if (gpu) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(devname, sizeof devname, "%s", prop.name);
    }
    cpu_loop L = {0};
    if (cpu && load_potential(&L)) cpu = 0;
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);

    printf("brush_scaling: 3:-1 electrolyte, radius 3.75 Å, λ_B = 7.117 Å, cation density %.4g Å^-3\n",
           CATION_DENSITY);
    printf("GPU: %s%s; CPU: %d cores\n", devname, gpu ? "" : " (CPU columns only)", cores);
    printf("ceiling: %.2g pair-deltas/s (docs/DESIGN.md fact 7)\n\n", CEILING);
    printf("brush GPU: one cycle per launch; chained: 8 cycles per launch (4 at N >= 2^20), time per cycle;\n"
           "pd/s, %%ceil and the ratios use the chained time\n\n");
    printf("%8s | %11s %11s %9s %6s | %11s | %10s %10s | %8s %8s %8s | %9s %9s\n", "N", "brush GPU", "chained",
           "pd/s", "%ceil", "conv. GPU", "CPU 1", "CPU all", "conv/br", "1core/br", "all/br", "CPU1 pd/s",
           "CPUall pd/s");
    for (int s = 0; s < nsizes; ++s) {
        const int n = sizes[s];
        const double pairs = (double)n * (double)(n - 1);
        const int batch = n >= 1048576 ? 4 : 8;
        double t_brush = NAN, t_chain = NAN, t_conv = NAN, t_cpu1 = NAN, t_cpua = NAN, pd1 = NAN, pda = NAN;
        char ini[2048];
        if (gpu) {
            ini_text(ini, sizeof ini, n, "plugin = brush");
            metro_sim *sim = make_sim(ini, "cuda", sets, nsets);
            if (sim) {
                int r = reps ? reps : n <= 65536 ? 21 : n <= 262144 ? 7 : 3;
                t_brush = time_sweeps(sim, 2, r, 1);
                t_chain = time_sweeps(sim, 0, r, batch);
                metro_sim_destroy(sim);
            }
            if (conventional) {
                char smp[256];
                /* metropolis' step is the half-width: D/2 with D = 2R/3 */
                double R = cbrt(3.0 * (n / 4.0) / CATION_DENSITY / (4.0 * M_PI));
                snprintf(smp, sizeof smp,
                         "plugin = metropolis\ntemperature = 1\nstep = %.6g\norder = sequential\nscheme = reduction",
                         R / 3.0);
                ini_text(ini, sizeof ini, n, smp);
                sim = make_sim(ini, "cuda", NULL, 0);
                if (sim) {
                    t_conv = time_sweeps(sim, n <= 65536 ? 1 : 0, n <= 65536 ? 3 : 1, 1);
                    metro_sim_destroy(sim);
                }
            }
        }
        if (cpu) {
            t_cpu1 = cpu_cycle(&L, n, 1, &pd1);
            t_cpua = cpu_cycle(&L, n, 0, &pda);
        }
        const double tb = gpu ? t_chain : t_brush;
        printf("%8d | %9.4g s %9.4g s %9.3g %5.1f%% | %9.4g s | %8.4g s %8.4g s | %8.3g %8.3g %8.3g | %9.3g %9.3g\n",
               n, t_brush, t_chain, pairs / tb, 100.0 * pairs / tb / CEILING, t_conv, t_cpu1, t_cpua, t_conv / tb,
               t_cpu1 / tb, t_cpua / tb, pd1, pda);
        fflush(stdout);
    }
    return 0;
}
