/* pt_speedup — the speed protocol of seed 000 §4.2 on metro's parallel
 * tempering sampler: N = 55 (also 13 and 256), 4000 sweeps per replica,
 * exchanges every 1000 sweeps, for n_r = 1 ... 65536 replicas; the time on
 * the GPU includes the transfer of every replica's coordinates and energy
 * back to the host at the end (as the paper's did).
 *
 *   pt_speedup [--sizes 13,55,256] [--max-replicas R] [--repeats K]
 *              [--lanes auto|4|8|16|32] [--no-cpu] [--collapse S] [--quick]
 *
 * GPU: after a warm-up of 1000 sweeps (which also JIT-links and loads the
 * module), each repeat times advance(4000) + metro_sim_state() (the state
 * call waits for the device and copies positions, energies and slot maps
 * back) with CUDA events recorded on the run's stream (metro_sim_stream):
 * the start event before the first launch, the stop event after the copy
 * back, so the interval is device time plus transfers plus any gaps the
 * host leaves between launches; the median of the repeats is reported.
 *
 * --collapse S: the paper's start is a straight rod, and at step 0.01 the
 * 5000 sweeps of the protocol leave it nearly straight, so most pairs lie
 * beyond the LJ cutoff, which is not what a production run sees (compact
 * globules below T ~ 1.5).  With --collapse S every timed system first
 * runs S sweeps at step 0.05 (same ladder, on the GPU when there is one),
 * is checkpointed and resumed at the protocol's step 0.01: the timings of
 * collapsed chains, for GPU and CPU alike.  CPU: the same sampler on the CPU backend, one thread and all
 * threads (OpenMP), timed on fewer sweeps (enough for >= 0.3 s) and on at
 * most 256 replicas, then scaled linearly to 4000 sweeps and n_r replicas:
 * the CPU time of these chains is linear in both (independent replicas,
 * a fixed cost per trial); the table marks scaled figures with '*'.
 * Without a GPU it prints the CPU rows and says so.
 *
 * The ceiling: the H100's instruction issue rate (132 SMs x 4 schedulers x
 * 1.98 GHz = 1.045e12 warp instructions/s) over the warp instructions one
 * update needs in the sampler's kernel, modelled from its sm_90 SASS as
 * (ceil(N/G) x 44 + 185 + 80/G) / (32/G) for G lanes per replica, best G
 * (44 per pass with the branch-free lj_fene of this version; it was 88)
 * (bench/NOTES.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metro/metro.h"

#define SWEEPS 4000L
#define EXCHANGE_EVERY 1000
#define ISSUE_RATE (132.0 * 4.0 * 1.98e9)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static long collapse = 0;     /* --collapse S: prepare compact chains first */
static int have_gpu = 0;
static char collapse_dir[256];

static metro_sim *make_at(int n, int nr, const char *device, int threads, const char *lanes, double step,
                          const char *output, int resume)
{
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 1\nsweeps = 1\n[system]\nparticles = %d\n[potential]\nplugin = lj_fene\n"
             "[sampler]\nplugin = parallel_tempering\nt_min = 0.2\nt_max = 2.0\nreplicas = %d\n"
             "exchange_every = %d\nstep = %g\nthreads = %d\nlanes = %s\n",
             n, nr, EXCHANGE_EVERY, step, threads, lanes);
    metro_options opt = {0};
    opt.config_text = ini;
    opt.config_path = "<pt_speedup>";
    opt.device = device;
    opt.output = output;
    opt.overwrite = !resume && *output;
    opt.resume = resume;
    opt.quiet = 1;
    metro_error err = {0};
    metro_sim *sim = NULL;
    if (metro_sim_create(&opt, &sim, &err) != METRO_OK) {
        fprintf(stderr, "pt_speedup: %s\n", err.msg);
        return NULL;
    }
    return sim;
}

/* The timed system: from the rod (the paper's start), or with --collapse
 * resumed from a checkpoint after `collapse` sweeps at step 0.05 (run on
 * prep_device). */
static metro_sim *make(int n, int nr, const char *device, int threads, const char *lanes)
{
    if (!collapse) return make_at(n, nr, device, threads, lanes, 0.01, "", 0);
    metro_sim *prep = make_at(n, nr, have_gpu ? "cuda" : device, 0, "auto", 0.05, collapse_dir, 0);
    if (!prep) return NULL;
    metro_error err = {0};
    if (metro_sim_advance(prep, collapse, &err) != METRO_OK || !metro_sim_state(prep, &err) ||
        metro_sim_checkpoint(prep, &err) != METRO_OK) {
        fprintf(stderr, "pt_speedup: collapsing: %s\n", err.msg);
        metro_sim_destroy(prep);
        return NULL;
    }
    metro_sim_destroy(prep);
    return make_at(n, nr, device, threads, lanes, 0.01, collapse_dir, 1);
}

/* advance + state (the barrier and the copy back); returns seconds, or -1.
 * On CUDA the interval is taken by events on the run's stream: start
 * before the first launch, stop after the state's copy back. */
static double timed(metro_sim *sim, long sweeps)
{
    metro_error err = {0};
    cudaStream_t s = (cudaStream_t)metro_sim_stream(sim);
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (s && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
              cudaEventRecord(e0, s) != cudaSuccess)) {
        fprintf(stderr, "pt_speedup: CUDA events failed\n");
        return -1;
    }
    double t0 = now();
    if (metro_sim_advance(sim, sweeps, &err) != METRO_OK || !metro_sim_state(sim, &err)) {
        fprintf(stderr, "pt_speedup: %s\n", err.msg);
        if (s) { cudaEventDestroy(e0); cudaEventDestroy(e1); }
        return -1;
    }
    double t = now() - t0;
    if (s) {
        float ms = 0;
        /* the state call synchronised the stream after its copies; this
         * event follows them */
        if (cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
            fprintf(stderr, "pt_speedup: CUDA events failed\n");
            t = -1;
        } else {
            t = 1e-3 * ms;
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median GPU seconds of 4000 sweeps of nr replicas, or -1. */
static double gpu_time(int n, int nr, int repeats, const char *lanes)
{
    metro_sim *sim = make(n, nr, "cuda", 0, lanes);
    if (!sim) return -1;
    double t[16];
    if (timed(sim, EXCHANGE_EVERY) < 0) { metro_sim_destroy(sim); return -1; } /* warm-up */
    for (int k = 0; k < repeats; ++k)
        if ((t[k] = timed(sim, SWEEPS)) < 0) { metro_sim_destroy(sim); return -1; }
    metro_sim_destroy(sim);
    qsort(t, repeats, sizeof *t, cmp);
    return t[repeats / 2];
}

/* CPU seconds of 4000 sweeps of nr replicas, measured on at most 256
 * replicas and >= 0.3 s, scaled; *scaled set when it was.  The 256-replica
 * measurement is made once per (N, threads) and reused for larger n_r. */
static double cpu_time(int n, int nr, int threads, int *scaled)
{
    static int cn[2] = {-1, -1};
    static double c256[2];
    int m = nr < 256 ? nr : 256, ci = threads == 1 ? 0 : 1;
    if (m == 256 && cn[ci] == n) {
        *scaled = 1;
        return c256[ci] * ((double)nr / m);
    }
    metro_sim *sim = make(n, m, "cpu", threads, "auto");
    if (!sim) return -1;
    long s = 1;
    double t = 0;
    timed(sim, 1); /* first touch */
    for (;;) {
        t = timed(sim, s);
        if (t < 0) { metro_sim_destroy(sim); return -1; }
        if (t >= 0.3 || s >= SWEEPS) break;
        s = s * 4 > SWEEPS ? SWEEPS : s * 4;
    }
    metro_sim_destroy(sim);
    *scaled = s < SWEEPS || m < nr;
    double t_m = t * ((double)SWEEPS / s); /* 4000 sweeps of m replicas */
    if (m == 256) { cn[ci] = n; c256[ci] = t_m; }
    return t_m * ((double)nr / m);
}

/* Warp instructions per update (model, bench/NOTES.md) for the best G. */
static double ceiling(int n, int *best_g)
{
    double best = 0;
    for (int G = 4; G <= 32; G *= 2) {
        double per = (((n + G - 1) / G) * 44.0 + 185.0 + 80.0 / G) / (32.0 / G);
        if (ISSUE_RATE / per > best) { best = ISSUE_RATE / per; *best_g = G; }
    }
    return best;
}

int main(int argc, char **argv)
{
    int sizes[8] = {13, 55, 256}, nsizes = 3, max_r = 65536, repeats = 3, do_cpu = 1;
    const char *lanes = "auto";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *p = strtok(argv[++i], ","); p && nsizes < 8; p = strtok(NULL, ",")) sizes[nsizes++] = atoi(p);
        } else if (!strcmp(argv[i], "--max-replicas") && i + 1 < argc) max_r = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lanes") && i + 1 < argc) lanes = argv[++i];
        else if (!strcmp(argv[i], "--no-cpu")) do_cpu = 0;
        else if (!strcmp(argv[i], "--collapse") && i + 1 < argc) collapse = atol(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) { max_r = 4096; repeats = 1; }
        else {
            fprintf(stderr, "usage: pt_speedup [--sizes 13,55,256] [--max-replicas R] [--repeats K] "
                            "[--lanes auto|4|8|16|32] [--no-cpu] [--collapse S] [--quick]\n");
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    if (repeats > 15) repeats = 15;
    int ndev = 0;
    int gpu = cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    have_gpu = gpu;
    if (collapse > 0) {
        snprintf(collapse_dir, sizeof collapse_dir, "/tmp/pt_speedup_collapse_%ld", (long)getpid());
        if (collapse < 0) collapse = 0;
    }
    char gpu_name[256] = "absent (no CUDA device): CPU rows only";
    if (gpu) {
        struct cudaDeviceProp p;
        cudaGetDeviceProperties(&p, 0);
        snprintf(gpu_name, sizeof gpu_name, "%s", p.name);
    }
    printf("pt_speedup: seed 000 §4.2 protocol, %ld sweeps per replica, exchanges every %d sweeps, step 0.01, "
           "T 0.2-2.0 geometric\nGPU: %s; GPU times (CUDA events on the run's stream): median of %d after a 1000-sweep warm-up, "
           "transfers included; '*' = CPU time measured on fewer sweeps/replicas and scaled linearly\n",
           SWEEPS, EXCHANGE_EVERY, gpu_name, repeats);
    if (collapse)
        printf("start: collapsed chains (%ld sweeps at step 0.05 first, then resumed at step 0.01)\n", collapse);
    else
        printf("start: the paper's straight rod (nearly straight still after 5000 sweeps at step 0.01; "
               "--collapse S for compact chains)\n");

    for (int si = 0; si < nsizes; ++si) {
        int n = sizes[si], g;
        double ceil_rate = ceiling(n, &g);
        printf("\nN = %d   (ceiling %.3g updates/s at %d lanes per replica)\n", n, ceil_rate, g);
        printf("%8s %12s %12s %12s %9s %9s %14s %7s\n", "n_r", "CPU 1 [s]", "CPU all [s]", "GPU [s]", "vs 1", "vs all",
               "GPU upd/s", "%ceil");
        double best_rate = 0, best_c1 = 0, best_ca = 0;
        int best_nr = 0;
        for (int nr = 1; nr <= max_r; nr *= 2) {
            int s1 = 0, sa = 0;
            double c1 = do_cpu ? cpu_time(n, nr, 1, &s1) : NAN;
            double ca = do_cpu ? cpu_time(n, nr, 0, &sa) : NAN;
            double tg = gpu ? gpu_time(n, nr, repeats, lanes) : NAN;
            double upd = (double)nr * n * SWEEPS;
            double rate = upd / tg;
            printf("%8d %11.4g%s %11.4g%s %12.4g %9.3g %9.3g %14.4g %6.1f%%\n", nr, c1, s1 ? "*" : " ", ca,
                   sa ? "*" : " ", tg, c1 / tg, ca / tg, rate, 100.0 * rate / ceil_rate);
            fflush(stdout);
            if (gpu && rate > best_rate) { best_rate = rate; best_c1 = c1; best_ca = ca; best_nr = nr; }
            if (!gpu && nr >= 4096) break;
        }
        double cpu1_rate = (double)best_nr * n * SWEEPS / best_c1, cpua_rate = (double)best_nr * n * SWEEPS / best_ca;
        char head[64];
        snprintf(head, sizeof head, "figure (N = %d)", n);
        printf("\n%-44s %-10s %14s %9s %8s\n", head, "unit", "CPU figure", "ratio", "%ceil");
        if (gpu) {
            printf("%-44s %-10s %14.4g %9.3g %7.1f%%\n", "GPU updates/s (best n_r) vs one core", "updates/s", cpu1_rate,
                   best_rate / cpu1_rate, 100 * best_rate / ceil_rate);
            printf("%-44s %-10s %14.4g %9.3g %7.1f%%\n", "GPU updates/s (best n_r) vs all cores", "updates/s", cpua_rate,
                   best_rate / cpua_rate, 100 * best_rate / ceil_rate);
            printf("  best n_r = %d: %.4g updates/s; goal for N = 55: 5e9 (%.0f%% of it)\n", best_nr, best_rate,
                   100 * best_rate / 5e9);
        } else {
            printf("%-44s %-10s %14s %9s %8s\n", "GPU updates/s", "updates/s", "-", "-", "absent");
        }
    }
    return 0;
}
