/* ensemble_scaling — K independent brush systems on one GPU, the way
 * `[run] systems = K` runs them: one host thread and one CUDA stream per
 * system, each advancing its own chain.  With --mode shared (the default,
 * what an ensemble does) the systems are grouped (metro_sims_group) and
 * every cycle of all K is one launch (brush_batch.h); with --mode streams
 * each system launches on its own and only the streams overlap (the
 * ensemble before shared launches).
 *
 *   ensemble_scaling [--sizes 8192,65536] [--systems 1,8,32,128] [--reps 3]
 *                    [--mode shared|streams] [--set SECTION.KEY=VALUE ...]
 *
 * The system is the paper's 3:-1 electrolyte (as bench/brush_scaling).  For
 * each N and K: after a warm-up of two cycles per system, each repeat
 * advances every system by C cycles (C chosen so one repeat takes about
 * 0.1 s at K = 1) in its own thread and waits for its stream; the repeat's
 * time is the host's wall clock from the threads' start to the last
 * stream's end (the systems run on different streams, so no single stream's
 * events span them), the median of the repeats is reported.  Pair-deltas
 * per second count K x C x N(N-1); the ratio is to K = 1 of the same N in
 * the same run, and the ceiling is docs/DESIGN.md fact 7's 2.1e12 pair-deltas/s.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metro/metro.h"

#define CEILING 2.1e12

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

static const char *extra[8];
static int nextra;

static metro_sim *make(int n, int seed)
{
    char ini[1024], s[64];
    /* the paper's cation density 1.1447e-6 / A^3 in mol/L */
    snprintf(ini, sizeof ini,
             "[run]\nseed = 1\nsweeps = 0\n\n[system]\nparticles = %d\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\nconcentration = %.9g\n"
             "bjerrum = 7.117\n\n[sampler]\nplugin = brush\n",
             n, 1.1447e-6 / (6.02214076e23 * 1e-27));
    snprintf(s, sizeof s, "run.seed=%d", seed);
    const char *sets[9] = {s};
    for (int i = 0; i < nextra; ++i) sets[1 + i] = extra[i];
    metro_options opt = {0};
    opt.config_text = ini;
    opt.device = "cuda";
    opt.output = "";
    opt.quiet = 1;
    opt.sets = sets;
    opt.nsets = 1 + nextra;
    metro_sim *sim = NULL;
    metro_error err = {0};
    if (metro_sim_create(&opt, &sim, &err) != METRO_OK) fprintf(stderr, "ensemble_scaling: %s", err.msg);
    return sim;
}

typedef struct job {
    metro_sim *sim;
    long cycles;
    int rc;
} job;

static void *advance(void *arg)
{
    job *j = arg;
    metro_error err = {0};
    j->rc = metro_sim_advance(j->sim, j->cycles, &err);
    if (!j->rc) j->rc = cudaStreamSynchronize((cudaStream_t)metro_sim_stream(j->sim)) != cudaSuccess;
    if (j->rc) {
        fprintf(stderr, "ensemble_scaling: %s\n", err.msg[0] ? err.msg : "stream failed");
        metro_sim_ungroup(j->sim); /* never hold the others up */
    }
    return NULL;
}

/* Wall time of every system advancing `cycles` together; NAN on failure. */
static double together(metro_sim **sims, int k, long cycles)
{
    job *jobs = calloc((size_t)k, sizeof *jobs);
    pthread_t *th = calloc((size_t)k, sizeof *th);
    double t0 = now();
    for (int i = 0; i < k; ++i) {
        jobs[i] = (job){sims[i], cycles, 0};
        pthread_create(&th[i], NULL, advance, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < k; ++i) {
        pthread_join(th[i], NULL);
        bad |= jobs[i].rc;
    }
    double t = now() - t0;
    free(jobs);
    free(th);
    return bad ? NAN : t;
}

static int parse_list(char *s, int *out, int max)
{
    int n = 0;
    for (char *p = strtok(s, ","); p && n < max; p = strtok(NULL, ",")) out[n++] = atoi(p);
    return n;
}

int main(int argc, char **argv)
{
    int sizes[8] = {8192, 65536}, nsizes = 2, ks[8] = {1, 8, 32, 128}, nks = 4, reps = 3, shared = 1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) nsizes = parse_list(argv[++i], sizes, 8);
        else if (!strcmp(argv[i], "--systems") && i + 1 < argc) nks = parse_list(argv[++i], ks, 8);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc && (!strcmp(argv[i + 1], "shared") || !strcmp(argv[i + 1], "streams")))
            shared = !strcmp(argv[++i], "shared");
        else if (!strcmp(argv[i], "--set") && i + 1 < argc && nextra < 8)
            extra[nextra++] = argv[++i];
        else {
            fprintf(stderr, "usage: ensemble_scaling [--sizes 8192,65536] [--systems 1,8,32,128] [--reps 3] [--mode shared|streams] [--set S.K=V ...]\n");
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("ensemble_scaling: no CUDA device: nothing to measure (this benchmark is about filling a GPU)\n");
        return 0;
    }
    /* many threads wait on streams: yield rather than spin (before the
     * context exists), as metro_ensemble_run does */
    cudaSetDeviceFlags(cudaDeviceScheduleYield);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("ensemble_scaling on %s (%d SMs): K brush systems of the 3:-1 electrolyte, a thread and a stream each, %s\n\n",
           prop.name, prop.multiProcessorCount,
           shared ? "each cycle of all K in one launch (shared)" : "each system its own launches (streams)");
    for (int i = 0; i < nextra; ++i) printf("%s--set %s%s", i ? " " : "settings: ", extra[i], i + 1 == nextra ? "\n\n" : "");
    printf("%8s %5s %7s %14s %16s %14s %9s %8s\n", "N", "K", "cycles", "s per repeat", "pair-deltas/s", "vs K=1",
           "ratio", "%ceil");
    for (int a = 0; a < nsizes; ++a) {
        int n = sizes[a];
        double base = NAN;
        long cycles = n <= 8192 ? 100 : n <= 65536 ? 12 : 2;
        for (int b = 0; b < nks; ++b) {
            int k = ks[b];
            metro_sim **sims = calloc((size_t)k, sizeof *sims);
            int ok = 1;
            for (int i = 0; i < k && ok; ++i) ok = (sims[i] = make(n, 1 + i)) != NULL;
            metro_error err = {0};
            if (ok && shared && metro_sims_group(sims, k, &err) != METRO_OK) {
                fprintf(stderr, "ensemble_scaling: %s\n", err.msg);
                ok = 0;
            }
            double *t = calloc((size_t)reps, sizeof *t);
            if (ok && !isnan(together(sims, k, 2)))
                for (int r = 0; r < reps; ++r) t[r] = together(sims, k, cycles);
            else
                for (int r = 0; r < reps; ++r) t[r] = NAN;
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            double med = t[reps / 2];
            double rate = (double)k * cycles * (double)n * (n - 1) / med;
            if (k == 1) base = rate;
            printf("%8d %5d %7ld %14.4g %16.4g %14.4g %9.3g %7.1f%%\n", n, k, cycles, med, rate, base, rate / base,
                   100 * rate / CEILING);
            fflush(stdout);
            free(t);
            for (int i = 0; i < k; ++i) metro_sim_destroy(sims[i]);
            free(sims);
        }
    }
    printf("\nceiling: %.2g pair-deltas/s (docs/DESIGN.md fact 7); goal at N = 8192: K systems together >= 50%%\n", CEILING);
    return 0;
}
