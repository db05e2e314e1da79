/* energy — the total energy of every temperature slot: its time series,
 * mean with binning error, specific heat with jackknife error, integrated
 * autocorrelation times and the autocorrelation function (PHYSICS.md §1
 * "Observables", seed 002 Eqs. 9-10).
 *
 * Every `every` sweeps of production it records, for each slot t, the
 * energy of the replica currently in that slot (st->slot_replica[t]), so
 * under parallel tempering each series belongs to one temperature.
 * finish() writes:
 *   energy.csv        sweep,slot,T,E               the time series (series = true)
 *   energy_stats.csv  slot,T,E_mean,E_err,Cv_per_N,Cv_err,tau_int,tau_int_sokal,samples
 *   energy_acf.csv    slot,t,C                     normalised autocorrelation C(t)
 * E_err: binning error of the mean (metro/stats.h); Cv_per_N =
 * beta^2 (<E^2> - <E>^2) / N with a jackknife error over bins; tau_int from
 * binning and from Sokal's window; taus and the lag t are in sweeps (the
 * sample spacing times the value in samples).  The ACF runs from t = 0 to
 * the Sokal window, or to max_lag samples when max_lag > 0.
 *
 * save()/restore() carry the whole series, so a restarted run reports the
 * statistics of all its samples.
 *
 * On CUDA, measure_device() records the samples on the device (kernel
 * energy_record of energy.cu, reading st->d_energy through
 * st->d_slot_replica) into a buffer of about 8 MB that is copied back when
 * full and in finish() and save(), so measuring costs no host sync.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"
#include "metro/stats.h"

typedef struct energy {
    const metro_host_api *host;
    metro_ctx *ctx;
    int slots, particles;
    int write_series;
    long max_lag;
    metro_series sweep;   /* sweep of each sample (exact in double to 2^53) */
    metro_series *E;      /* [slots] */
    /* CUDA: the last `pending` samples (rows of slots) are still in d_buf;
     * sweep already holds their sweeps */
    double *d_buf;
    size_t d_rows, pending;
    void *k_record;
} energy;

/* Doubles in the device buffer of samples (8 MB). */
#define DEVICE_BUFFER_DOUBLES (1u << 20)

static const metro_param_decl params[] = {
    {"series", METRO_PARAM_BOOL, "true", 0, 0, NULL, "",
     "write the time series energy.csv (sweep, slot, T, E)"},
    {"max_lag", METRO_PARAM_INT, "0", 0, 1e9, NULL, "samples",
     "last lag of energy_acf.csv (at most samples - 1; lags near the number of samples are noise); 0: up to Sokal's window"},
    METRO_PARAM_END};

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p,
                  const metro_setup *setup, void **out)
{
    energy *e = calloc(1, sizeof *e);
    if (!e) return host->fail(ctx, "out of memory");
    e->host = host;
    e->ctx = ctx;
    e->slots = setup->replicas > 0 ? setup->replicas : 1;
    e->particles = setup->particles;
    e->write_series = host->param_bool(p, "series");
    e->max_lag = host->param_int(p, "max_lag");
    e->E = calloc((size_t)e->slots, sizeof *e->E);
    if (!e->E) {
        free(e);
        return host->fail(ctx, "out of memory");
    }
    *out = e;
    return 0;
}

static void clear(energy *e)
{
    metro_series_free(&e->sweep);
    for (int t = 0; t < e->slots; t++) metro_series_free(&e->E[t]);
}

static void destroy(void *self)
{
    energy *e = self;
    if (!e) return;
    if (e->d_buf) cudaFree(e->d_buf);
    clear(e);
    free(e->E);
    free(e);
}

/* Append the samples still on the device to the host series.  Returns 0 or
 * -1 (failed). */
static int flush(energy *e)
{
    if (!e->pending) return 0;
    size_t k = e->pending * (size_t)e->slots;
    double *h = malloc(k * sizeof *h);
    if (!h) return e->host->fail(e->ctx, "out of memory");
    cudaStream_t s = (cudaStream_t)e->host->stream(e->ctx);
    if (e->host->cuda(e->ctx, cudaMemcpyAsync(h, e->d_buf, k * sizeof *h, cudaMemcpyDeviceToHost, s),
                   "download samples") ||
        e->host->cuda(e->ctx, cudaStreamSynchronize(s), "sync")) {
        free(h);
        return -1;
    }
    for (size_t j = 0; j < e->pending; j++)
        for (int t = 0; t < e->slots; t++)
            if (metro_series_push(&e->E[t], h[j * (size_t)e->slots + (size_t)t])) {
                free(h);
                return e->host->fail(e->ctx, "out of memory after %zu samples", e->E[t].n);
            }
    free(h);
    e->pending = 0;
    return 0;
}

static int measure_device(void *self, const metro_state *st)
{
    energy *e = self;
    if (!e->d_buf) {
        e->d_rows = DEVICE_BUFFER_DOUBLES / (size_t)e->slots;
        if (e->d_rows < 1) e->d_rows = 1;
        if (e->host->kernel(e->ctx, "energy_record", &e->k_record) ||
            e->host->cuda(e->ctx, cudaMalloc((void **)&e->d_buf, e->d_rows * (size_t)e->slots * sizeof(double)),
                          "cudaMalloc of %zu bytes for samples", e->d_rows * (size_t)e->slots * sizeof(double)))
            return -1;
    }
    if (e->pending == e->d_rows && flush(e)) return -1;
    double *out = e->d_buf + e->pending * (size_t)e->slots;
    int slots = e->slots, threads = slots < 256 ? (slots + 31) / 32 * 32 : 256;
    void *args[] = {(void *)&st->d_energy, (void *)&st->d_slot_replica, &slots, &out};
    dim3 grid = {(unsigned)((slots + threads - 1) / threads), 1, 1}, block = {(unsigned)threads, 1, 1};
    if (e->host->cuda(e->ctx, cudaLaunchKernel((const void *)e->k_record, grid, block, args, 0,
                                       (cudaStream_t)e->host->stream(e->ctx)),
                   "launch energy_record"))
        return -1;
    e->pending++;
    if (metro_series_push(&e->sweep, (double)st->sweep))
        return e->host->fail(e->ctx, "out of memory after %zu samples", e->sweep.n);
    return 0;
}

static int measure(void *self, const metro_state *st)
{
    energy *e = self;
    if (flush(e)) return -1; /* keep the samples in order */
    if (metro_series_push(&e->sweep, (double)st->sweep)) goto oom;
    for (int t = 0; t < e->slots; t++)
        if (metro_series_push(&e->E[t], st->energy[st->slot_replica[t]])) goto oom;
    return 0;
oom:
    return e->host->fail(e->ctx, "out of memory after %zu samples", e->sweep.n);
}

/* Sweeps between samples (1 when fewer than two samples). */
static double spacing(const energy *e)
{
    return e->sweep.n >= 2 ? e->sweep.x[1] - e->sweep.x[0] : 1.0;
}

static int write_series(energy *e, const metro_state *st)
{
    FILE *f = e->host->open_output(e->ctx, "energy.csv");
    if (!f) return -1;
    fprintf(f, "sweep,slot,T,E\n");
    for (size_t k = 0; k < e->sweep.n; k++)
        for (int t = 0; t < e->slots; t++)
            fprintf(f, "%.0f,%d,%.10g,%.17g\n", e->sweep.x[k], t, 1.0 / st->beta[t], e->E[t].x[k]);
    if (fclose(f)) return e->host->fail(e->ctx, "cannot write energy.csv");
    return 0;
}

static int finish(void *self, const metro_state *st)
{
    energy *e = self;
    if (flush(e)) return -1;
    if (e->write_series && write_series(e, st)) return -1;
    FILE *fs = e->host->open_output(e->ctx, "energy_stats.csv");
    if (!fs) return -1;
    FILE *fa = e->host->open_output(e->ctx, "energy_acf.csv");
    if (!fa) {
        fclose(fs);
        return -1;
    }
    fprintf(fs, "slot,T,E_mean,E_err,Cv_per_N,Cv_err,tau_int,tau_int_sokal,samples\n");
    fprintf(fa, "slot,t,C\n");
    const double dt = spacing(e);
    int rc = 0, short_slots = 0, first_short = -1;
    size_t short_n = 0;
    for (int t = 0; t < e->slots && rc == 0; t++) {
        const double *x = e->E[t].x;
        size_t n = e->E[t].n, window = 0;
        double beta = st->beta[t], T = 1.0 / beta, tau_b, cv, cv_err;
        int plateau = 1;
        double mean = metro_mean(x, n), err = metro_binning_error_plateau(x, n, &tau_b, &plateau);
        if (!plateau && n >= 2 && !short_slots++) first_short = t, short_n = n;
        double tau_s = metro_tau_int_sokal(x, n, &window);
        metro_jackknife_cv(x, n, beta, (double)e->particles, &cv, &cv_err);
        fprintf(fs, "%d,%.10g,%.12g,%.6g,%.8g,%.6g,%.6g,%.6g,%zu\n", t, T, mean, err, cv, cv_err,
                tau_b * dt, tau_s * dt, n);
        /* a line per slot on the terminal only for a few slots; the CSV has all */
        e->host->log(e->ctx, e->slots <= 8 ? METRO_LOG_INFO : METRO_LOG_DEBUG,
                     "slot %d T = %g: E = %.6g +- %.2g, Cv/N = %.4g +- %.2g, tau_int = %.3g "
                     "(Sokal %.3g) sweeps, %zu samples",
                     t, T, mean, err, cv, cv_err, tau_b * dt, tau_s * dt, n);

        size_t last = e->max_lag > 0 ? (size_t)e->max_lag : window;
        if (n == 0) continue;
        if (last > n - 1) last = n - 1;
        double *c = malloc((last + 1) * sizeof *c);
        if (!c) {
            rc = e->host->fail(e->ctx, "out of memory for the ACF");
            break;
        }
        metro_acf(x, n, c, last + 1);
        for (size_t k = 0; k <= last; k++) fprintf(fa, "%d,%.10g,%.8g\n", t, (double)k * dt, c[k]);
        free(c);
    }
    /* an error bar the series cannot support is said to be one, once */
    if (short_slots)
        e->host->log(e->ctx, METRO_LOG_WARN,
                     "%d of %d slots (the first: slot %d, %zu samples): the series is too short for its error bar: "
                     "binning reached no plateau (too few independent samples), so E_err, Cv_err and tau_int are "
                     "likely too small; run longer (or measure more often)",
                     short_slots, e->slots, first_short, short_n);
    if (fclose(fs) | fclose(fa)) /* both closed either way */
        if (rc == 0) rc = e->host->fail(e->ctx, "cannot write energy_stats.csv / energy_acf.csv");
    return rc;
}

/* Saved state: u64 magic, u64 slots, u64 n, then sweep[n], then E of each
 * slot [n]. */
#define ENERGY_MAGIC 0x31796772656e45ull /* "Energy1" */

static int save(void *self)
{
    energy *e = self;
    if (flush(e)) return -1;
    uint64_t h[3] = {ENERGY_MAGIC, (uint64_t)e->slots, (uint64_t)e->sweep.n};
    if (e->host->save_bytes(e->ctx, h, sizeof h) ||
        e->host->save_bytes(e->ctx, e->sweep.x, e->sweep.n * sizeof(double)))
        return -1;
    for (int t = 0; t < e->slots; t++)
        if (e->host->save_bytes(e->ctx, e->E[t].x, e->E[t].n * sizeof(double))) return -1;
    return 0;
}

static int restore(void *self, const void *data, size_t size)
{
    energy *e = self;
    uint64_t h[3];
    if (size < sizeof h) return e->host->fail(e->ctx, "saved state too short");
    memcpy(h, data, sizeof h);
    if (h[0] != ENERGY_MAGIC) return e->host->fail(e->ctx, "saved state is not the energy's");
    if (h[1] != (uint64_t)e->slots)
        return e->host->fail(e->ctx, "saved state has %llu slots, this run %d",
                             (unsigned long long)h[1], e->slots);
    uint64_t n = h[2];
    if (n > (size - sizeof h) / sizeof(double) ||
        size != sizeof h + n * sizeof(double) * (uint64_t)(1 + e->slots))
        return e->host->fail(e->ctx, "saved state has %zu bytes, expected %llu", size,
                             (unsigned long long)(sizeof h + n * sizeof(double) * (1 + e->slots)));
    clear(e);
    e->pending = 0; /* samples still on the device belonged to the replaced state */
    /* the buffer need not be aligned for doubles: copy value by value */
    const char *v = (const char *)data + sizeof h;
    for (uint64_t k = 0; k < n * (uint64_t)(1 + e->slots); k++) {
        double x;
        memcpy(&x, v + k * sizeof x, sizeof x);
        if (metro_series_push(k < n ? &e->sweep : &e->E[k / n - 1], x)) goto oom;
    }
    return 0;
oom:
    return e->host->fail(e->ctx, "out of memory restoring %llu samples",
                         (unsigned long long)n);
}

/* The whole series is kept (for the binning errors and the ACF): a double
 * per slot and measurement, and the sweeps, with room to grow by
 * doubling; on CUDA a buffer of pending rows. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    energy *e = self;
    double m = (double)(setup->every > 0 ? setup->sweeps / setup->every : setup->sweeps) + 1;
    double bytes = 2.0 * m * ((double)e->slots + 1) * sizeof(double);
    *host = bytes > 1e18 ? (size_t)1e18 : (size_t)bytes;
    *device = (size_t)e->slots * 1024 * sizeof(double);
    return 0;
}

/* the ACF's last lag is read at finish() from the saved series: a resume
 * or an analyze may change it (series may not: switched off, the former
 * energy.csv would stay as the shorter run's) */
static const char *const resumable[] = {"max_lag", NULL};

static const metro_observable_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .measure = measure,
    .finish = finish,
    .save = save,
    .restore = restore,
    .measure_device = measure_device,
    .memory = memory,
    .resumable = resumable,
};

METRO_PLUGIN(observable, "energy", "1.0.0",
             "energy of each temperature slot: series, mean and binning error, C_V/N, tau_int, ACF",
             params, api)
