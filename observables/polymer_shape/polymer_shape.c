/* polymer_shape — thermodynamics and shape of the chains at every
 * temperature slot (PHYSICS.md §1 "Observables", seed 000 §4.1, Figs. 4
 * and 5).
 *
 * Which chains.  The system's topology (metro_setup.topology,
 * docs/COMPOSITION.md): chain c is the particles first[c] .. first[c] +
 * length[c] - 1, and particles in no chain (counterions, salt) are left
 * out of the shape.  A lone lj_fene potential is one chain of every
 * particle, and a system without any topology is measured as one chain of
 * every particle too, as before chains existed: then every file below is
 * what it always was, byte for byte.
 *
 * Every `every` sweeps it records, for every slot (temperature) t, the
 * energy of the replica there and, for each chain, its squared radius of
 * gyration r_gyr^2 and squared end-to-end distance R_ee^2
 * (polymer_shape.h); the sample of r_gyr^2 (R_ee^2) of the slot is the
 * mean over the chains of that configuration.  Slots of the same
 * temperature in several ladders are pooled.  At the end it writes:
 *
 *   thermo.csv — one row per temperature, columns exactly
 *     T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples
 *     E is the energy of the whole system (every term, every particle);
 *     Rg2 and Ree2 are per-chain averages: <r_gyr^2> is the thermal mean of
 *     the chain-averaged r_gyr^2, Rg2_var the variance of that chain
 *     average (= <r^4> - <r^2>^2 of the chain for a single chain).
 *     errors of means by binning, of C_V/N = beta^2 (<E^2> - <E>^2)/N by
 *     the jackknife over bins (metro/stats.h); N is every particle of the
 *     system ([system] particles: monomers and free particles alike, as E
 *     is the whole system's energy), which for a lone chain is its number
 *     of monomers (C_V per monomer, as always);
 *     tau_int of the energy in units of measurements; with several ladders
 *     each ladder is a separate series and the errors combine.
 *   chains.csv — only when the system has 2 or more chains (with one chain
 *     thermo.csv says it all): one row per temperature and chain, columns
 *       T,chain,Rg2_mean,Rg2_err,Ree2_mean,Ree2_err,samples
 *     chain = its index in the topology (0 = the chain of the lowest
 *     particle indices); means of that chain's r_gyr^2 and R_ee^2 with
 *     binning errors, ladders pooled as in thermo.csv.
 *   thermo_reweighted.csv — the same leading columns (tau_int and samples
 *     left out) and Rg2_var_err,dRg2_dT,dRg2_dT_err, on `reweight_points`
 *     temperatures spread geometrically over the simulated range plus the
 *     simulated temperatures themselves, by multiple-histogram reweighting
 *     (polymer_shape_wham.h) of all slots' samples; errors by the
 *     jackknife over `jackknife` blocks of the time series;
 *     d<r^2>/dT = beta^2 (<r^2 E> - <r^2><E>).
 *   cv.png, rg2_fluct.png — gnuplot plots of C_V/N (points with error bars
 *     and the reweighted curve) and of the r_gyr^2 fluctuations (variance
 *     and d<r_gyr^2>/dT), and with 2+ chains chains.png (<r_gyr^2> of each
 *     chain and their average against T), when gnuplot is on PATH (else a
 *     warning); the script, plot.gp, stays in the run directory to be
 *     re-run anywhere.
 *
 * Memory: the series are kept whole up to `max_memory_mb`; past that every
 * other sample is dropped and recording continues at twice the interval.
 * On CUDA, measure_device() measures on the device instead (kernel
 * polymer_shape_record of polymer_shape.cu, one warp per slot looping over
 * the chains, reading st->d_pos and st->d_energy through
 * st->d_slot_replica, the same two-pass formula in double, the chain
 * means summed in the same order) into a buffer of up to DEVICE_ROWS
 * measurements (at
 * most about 8 MB) that is copied back to the series when full, before the
 * series are thinned, and in finish() and save(); so measuring costs no
 * host sync.  The values equal the host path's to double rounding.  The
 * log says at DEBUG level which path measured first.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"
#include "metro/stats.h"

#include "polymer_shape.h"
#include "polymer_shape_wham.h"

static const metro_param_decl params[] = {
    {"reweight", METRO_PARAM_BOOL, "true", 0, 0, NULL, "", "write thermo_reweighted.csv (multiple histograms)"},
    {"reweight_points", METRO_PARAM_INT, "200", 2, 1000000, NULL, "", "temperatures of the reweighted curve"},
    {"bin_width", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "energy",
     "energy bin of the histograms (0: T_min / 20, so beta x bin <= 0.05)"},
    {"jackknife", METRO_PARAM_INT, "8", 2, 64, NULL, "", "blocks of the jackknife of the reweighted curve"},
    {"plots", METRO_PARAM_BOOL, "true", 0, 0, NULL, "", "draw cv.png and rg2_fluct.png with gnuplot"},
    {"max_memory_mb", METRO_PARAM_INT, "512", 1, 1048576, NULL, "MiB", "memory for the time series"},
    METRO_PARAM_END};

typedef struct ps {
    const metro_host_api *host;
    metro_ctx *ctx;
    int n, slots;            /* n: every particle of the system (C_V / N) */
    int reweight, points, jack, plots;
    double bin_width;
    /* the chains measured: the topology's, or one chain of every particle
     * when the system has none; per: 1 when each chain's series are kept
     * (2+ chains, for chains.csv), lone: 1 when the one chain is the whole
     * system (the files of today) */
    int chains, per, lone;
    int *first, *length;
    size_t cap;              /* samples per series before thinning */
    long long measured;      /* measure() calls */
    long long stride;        /* record every stride-th call */
    metro_series *e, *a, *b; /* per slot: E, chain-averaged r_gyr^2 and R_ee^2 */
    metro_series *ca, *cb;   /* per: slot t, chain c at [t * chains + c]: that chain's r_gyr^2, R_ee^2 */
    double *scratch;         /* per: 2 x chains, one configuration's chain values */
    /* CUDA (measure_device): the last `pending` recorded measurements are
     * still in d_buf, row j = E[slots], r_gyr^2[slots], R_ee^2[slots] and,
     * when per, r_gyr^2[slots x chains], R_ee^2[slots x chains] (slot
     * major), row_doubles() doubles in all */
    void *k_record;
    double *d_buf, *h_buf;
    int *d_first, *d_length;
    size_t d_rows, pending;
    int said_device, said_host; /* the DEBUG line of each path was logged */
} ps;

/* Doubles one measurement of every slot records: the series of a slot. */
static size_t row_doubles(const ps *self)
{
    return (3 + (self->per ? 2 * (size_t)self->chains : 0)) * (size_t)self->slots;
}

/* Measurements the device buffer holds (DEVICE_ROWS and DEVICE_BUFFER_DOUBLES below). */
static size_t device_rows(const ps *self);

/* Measurements in the device buffer: at most DEVICE_ROWS, and at most
 * DEVICE_BUFFER_DOUBLES doubles (8 MB), at least one. */
#define DEVICE_ROWS 512
#define DEVICE_BUFFER_DOUBLES (1u << 20)
/* Threads per block of polymer_shape_record (a warp per slot). */
#define RECORD_THREADS 128

static size_t device_rows(const ps *self)
{
    size_t rows = DEVICE_BUFFER_DOUBLES / row_doubles(self);
    return rows < 1 ? 1 : rows > DEVICE_ROWS ? DEVICE_ROWS : rows;
}

static void destroy(void *vself);
static int chain_particles(const ps *self);

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *pp, const metro_setup *setup,
                  void **out)
{
    const metro_topology *topo = &setup->topology;
    if (topo->chains <= 0 && setup->particles < 2) return host->fail(ctx, "a chain needs at least 2 particles");
    for (int c = 0; c < topo->chains; ++c)
        if (topo->length[c] < 2)
            return host->fail(ctx, "chain %d (particles %d to %d) has %d particle%s: r_gyr^2 and R_ee^2 need a chain "
                                   "of at least 2 particles ([system] chains)",
                              c, topo->first[c], topo->first[c] + topo->length[c] - 1, topo->length[c],
                              topo->length[c] == 1 ? "" : "s");
    ps *self = calloc(1, sizeof *self);
    if (!self) return host->fail(ctx, "out of memory");
    self->host = host;
    self->ctx = ctx;
    self->n = setup->particles;
    self->slots = setup->replicas;
    /* the chains, copied: a system without a topology is one chain */
    self->chains = topo->chains > 0 ? topo->chains : 1;
    self->first = malloc((size_t)self->chains * sizeof *self->first);
    self->length = malloc((size_t)self->chains * sizeof *self->length);
    if (!self->first || !self->length) {
        destroy(self);
        return host->fail(ctx, "out of memory");
    }
    if (topo->chains > 0) {
        memcpy(self->first, topo->first, (size_t)self->chains * sizeof *self->first);
        memcpy(self->length, topo->length, (size_t)self->chains * sizeof *self->length);
    } else {
        self->first[0] = 0;
        self->length[0] = setup->particles;
    }
    self->per = self->chains >= 2;
    self->lone = self->chains == 1 && self->first[0] == 0 && self->length[0] == setup->particles;
    self->reweight = host->param_bool(pp, "reweight");
    self->points = (int)host->param_int(pp, "reweight_points");
    self->jack = (int)host->param_int(pp, "jackknife");
    self->plots = host->param_bool(pp, "plots");
    self->bin_width = host->param_real(pp, "bin_width");
    double bytes = (double)host->param_int(pp, "max_memory_mb") * 1048576.0;
    double c = bytes / ((double)row_doubles(self) * sizeof(double));
    self->cap = c < 1024 ? 1024 : c > 1e12 ? (size_t)1e12 : (size_t)c;
    self->stride = 1;
    self->e = calloc((size_t)self->slots, sizeof *self->e);
    self->a = calloc((size_t)self->slots, sizeof *self->a);
    self->b = calloc((size_t)self->slots, sizeof *self->b);
    if (self->per) {
        self->ca = calloc((size_t)self->slots * self->chains, sizeof *self->ca);
        self->cb = calloc((size_t)self->slots * self->chains, sizeof *self->cb);
        self->scratch = malloc(2 * (size_t)self->chains * sizeof *self->scratch);
    }
    if (!self->e || !self->a || !self->b || (self->per && (!self->ca || !self->cb || !self->scratch))) {
        destroy(self);
        return host->fail(ctx, "out of memory");
    }
    if (setup->backend == METRO_BACKEND_CUDA && host->kernel(ctx, "polymer_shape_record", &self->k_record)) {
        destroy(self);
        return -1;
    }
    if (!self->lone)
        host->log(ctx, METRO_LOG_INFO, "%d chain%s of %d of the %d particles; r_gyr^2 and R_ee^2 are "
                                       "averages over the chains%s",
                  self->chains, self->chains == 1 ? "" : "s", chain_particles(self), self->n,
                  self->per ? ", each chain's in chains.csv" : "");
    *out = self;
    return 0;
}

static void destroy(void *vself)
{
    ps *self = vself;
    if (!self) return;
    for (int t = 0; t < self->slots; ++t) {
        if (self->e) metro_series_free(&self->e[t]);
        if (self->a) metro_series_free(&self->a[t]);
        if (self->b) metro_series_free(&self->b[t]);
    }
    for (size_t i = 0; self->per && i < (size_t)self->slots * self->chains; ++i) {
        if (self->ca) metro_series_free(&self->ca[i]);
        if (self->cb) metro_series_free(&self->cb[i]);
    }
    free(self->e);
    free(self->a);
    free(self->b);
    free(self->ca);
    free(self->cb);
    free(self->scratch);
    free(self->first);
    free(self->length);
    if (self->d_buf) cudaFree(self->d_buf);
    if (self->d_first) cudaFree(self->d_first);
    if (self->d_length) cudaFree(self->d_length);
    free(self->h_buf);
    free(self);
}

/* Particles in the chains measured. */
static int chain_particles(const ps *self)
{
    long m = 0;
    for (int c = 0; c < self->chains; ++c) m += self->length[c];
    return (int)m;
}

static void thin(metro_series *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i += 2) s->x[j++] = s->x[i];
    s->n = j;
}

/* Append the measurements still on the device to the series, in order.
 * Returns 0 or -1 (failed).  No CUDA call when nothing is pending. */
static int flush(ps *self)
{
    if (!self->pending) return 0;
    const size_t S = (size_t)self->slots, k = self->pending * row_doubles(self);
    cudaStream_t s = (cudaStream_t)self->host->stream(self->ctx);
    if (self->host->cuda(self->ctx, cudaMemcpyAsync(self->h_buf, self->d_buf, k * sizeof(double), cudaMemcpyDeviceToHost, s),
                   "polymer_shape: download measurements") ||
        self->host->cuda(self->ctx, cudaStreamSynchronize(s), "polymer_shape: measurements"))
        return -1;
    const size_t SC = S * (size_t)self->chains;
    for (size_t j = 0; j < self->pending; ++j) {
        const double *row = self->h_buf + j * row_doubles(self);
        for (size_t t = 0; t < S; ++t)
            if (metro_series_push(&self->e[t], row[t]) || metro_series_push(&self->a[t], row[S + t]) ||
                metro_series_push(&self->b[t], row[2 * S + t]))
                return self->host->fail(self->ctx, "out of memory");
        for (size_t i = 0; self->per && i < SC; ++i)
            if (metro_series_push(&self->ca[i], row[3 * S + i]) || metro_series_push(&self->cb[i], row[3 * S + SC + i]))
                return self->host->fail(self->ctx, "out of memory");
    }
    self->pending = 0;
    return 0;
}

/* Both paths: 1 when this call records a measurement, 0 when the stride
 * skips it, -1 on failure.  Thins the series (after bringing back what the
 * device holds) when they are full. */
static int admit(ps *self, const metro_state *st)
{
    if (st->replicas != self->slots) return self->host->fail(self->ctx, "the number of replicas changed");
    if (self->measured++ % self->stride) return 0;
    if (self->e[0].n + self->pending >= self->cap) { /* all series are equally long */
        if (flush(self)) return -1;
        for (int t = 0; t < self->slots; ++t) {
            thin(&self->e[t]);
            thin(&self->a[t]);
            thin(&self->b[t]);
        }
        for (size_t i = 0; self->per && i < (size_t)self->slots * self->chains; ++i) {
            thin(&self->ca[i]);
            thin(&self->cb[i]);
        }
        self->stride *= 2;
        self->host->log(self->ctx, METRO_LOG_INFO, "series full: keeping every %lld-th measurement from now",
                        self->stride);
    }
    return 1;
}

static int measure_device(void *vself, const metro_state *st)
{
    ps *self = vself;
    if (!self->k_record) return self->host->fail(self->ctx, "polymer_shape: no device kernel (not the CUDA backend)");
    if (!self->d_buf) {
        self->d_rows = device_rows(self);
        size_t bytes = self->d_rows * row_doubles(self) * sizeof(double);
        size_t tb = (size_t)self->chains * sizeof(int);
        self->h_buf = malloc(bytes);
        if (!self->h_buf) return self->host->fail(self->ctx, "out of memory");
        if (self->host->cuda(self->ctx, cudaMalloc((void **)&self->d_buf, bytes), "cudaMalloc of %zu bytes for measurements", bytes))
            return -1;
        /* the chain table, once (the topology is the same for every
         * replica and never changes), on the run's stream so that the
         * kernels after it see it; the host arrays live as long as self */
        cudaStream_t s = (cudaStream_t)self->host->stream(self->ctx);
        if (self->host->cuda(self->ctx, cudaMalloc((void **)&self->d_first, tb), "cudaMalloc of %zu bytes for the chains", tb) ||
            self->host->cuda(self->ctx, cudaMalloc((void **)&self->d_length, tb), "cudaMalloc of %zu bytes for the chains", tb) ||
            self->host->cuda(self->ctx, cudaMemcpyAsync(self->d_first, self->first, tb, cudaMemcpyHostToDevice, s),
                             "polymer_shape: upload the chain table (%zu bytes)", tb) ||
            self->host->cuda(self->ctx, cudaMemcpyAsync(self->d_length, self->length, tb, cudaMemcpyHostToDevice, s),
                             "polymer_shape: upload the chain table (%zu bytes)", tb))
            return -1;
    }
    if (!self->said_device) {
        self->said_device = 1;
        self->host->log(self->ctx, METRO_LOG_DEBUG,
                        "measuring on the device: %zu measurements of %d slots are copied back at a time", self->d_rows,
                        self->slots);
    }
    int rc = admit(self, st);
    if (rc <= 0) return rc;
    if (self->pending == self->d_rows && flush(self)) return -1;
    double *out = self->d_buf + self->pending * row_doubles(self);
    int n = self->n, slots = self->slots, chains = self->chains, per = self->per;
    void *args[] = {(void *)&st->d_pos, (void *)&st->d_energy, (void *)&st->d_slot_replica, &n, &slots,
                    &chains, (void *)&self->d_first, (void *)&self->d_length, &per, &out};
    unsigned threads = (unsigned)slots * 32u < RECORD_THREADS ? (unsigned)slots * 32u : RECORD_THREADS;
    dim3 grid = {(unsigned)(((size_t)slots * 32 + threads - 1) / threads), 1, 1}, block = {threads, 1, 1};
    if (self->host->cuda(self->ctx, cudaLaunchKernel((const void *)self->k_record, grid, block, args, 0,
                                          (cudaStream_t)self->host->stream(self->ctx)),
                   "polymer_shape: launch polymer_shape_record"))
        return -1;
    self->pending++;
    return 0;
}

static int measure(void *vself, const metro_state *st)
{
    ps *self = vself;
    if (flush(self)) return -1; /* keep the measurements in order */
    if (!self->said_host) {
        self->said_host = 1;
        self->host->log(self->ctx, METRO_LOG_DEBUG, "measuring from the host copies");
    }
    int rc = admit(self, st);
    if (rc <= 0) return rc;
    const int C = self->chains;
    for (int t = 0; t < self->slots; ++t) {
        int r = st->slot_replica[t];
        double rg2, ree2, *ca = self->per ? self->scratch : NULL, *cb = self->per ? self->scratch + C : NULL;
        metro_polymer_shape_chains(st->pos + (size_t)r * self->n, C, self->first, self->length, ca, cb, &rg2, &ree2);
        if (metro_series_push(&self->e[t], st->energy[r]) || metro_series_push(&self->a[t], rg2) ||
            metro_series_push(&self->b[t], ree2))
            return self->host->fail(self->ctx, "out of memory");
        for (int c = 0; self->per && c < C; ++c)
            if (metro_series_push(&self->ca[(size_t)t * C + c], ca[c]) ||
                metro_series_push(&self->cb[(size_t)t * C + c], cb[c]))
                return self->host->fail(self->ctx, "out of memory");
    }
    return 0;
}

/* ---- per-temperature results ------------------------------------------ */

/* Distinct temperatures of the slots (metro/stats.h). */
static int temperatures(const metro_state *st, double *beta_k, int *kidx)
{
    return metro_temperatures(st->beta, st->replicas, beta_k, kidx);
}

static int write_thermo(ps *self, const metro_state *st, const double *beta_k, const int *kidx, int K)
{
    FILE *f = self->host->open_output(self->ctx, "thermo.csv");
    if (!f) return -1;
    fprintf(f, "T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n");
    for (int k = 0; k < K; ++k) {
        double em = 0, ee = 0, cv = 0, ce = 0, am = 0, ae = 0, av = 0, bm = 0, be = 0, tau = 0;
        int L = 0;
        size_t samples = 0;
        for (int t = 0; t < st->replicas; ++t) {
            if (kidx[t] != k) continue;
            const metro_series *E = &self->e[t], *A = &self->a[t], *B = &self->b[t];
            double tu, err, c, cerr;
            err = metro_binning_error(E->x, E->n, &tu);
            em += metro_mean(E->x, E->n);
            ee += err * err;
            tau += tu;
            metro_jackknife_cv(E->x, E->n, beta_k[k], self->n, &c, &cerr);
            cv += c;
            ce += cerr * cerr;
            am += metro_mean(A->x, A->n);
            err = metro_binning_error(A->x, A->n, NULL);
            ae += err * err;
            av += metro_variance(A->x, A->n);
            bm += metro_mean(B->x, B->n);
            err = metro_binning_error(B->x, B->n, NULL);
            be += err * err;
            samples += E->n;
            ++L;
        }
        /* L independent ladders: means of their estimates */
        fprintf(f, "%.9g,%.10g,%.4g,%.8g,%.4g,%.8g,%.4g,%.6g,%.8g,%.4g,%.4g,%zu\n", 1.0 / beta_k[k], em / L,
                sqrt(ee) / L, cv / L, sqrt(ce) / L, am / L, sqrt(ae) / L, av / L, bm / L, sqrt(be) / L, tau / L,
                samples);
    }
    if (fclose(f)) return self->host->fail(self->ctx, "thermo.csv: write error");
    return 0;
}

/* chains.csv (2+ chains): each chain's means, ladders pooled as in
 * thermo.csv. */
static int write_chains(ps *self, const metro_state *st, const double *beta_k, const int *kidx, int K)
{
    FILE *f = self->host->open_output(self->ctx, "chains.csv");
    if (!f) return -1;
    const int C = self->chains;
    fprintf(f, "T,chain,Rg2_mean,Rg2_err,Ree2_mean,Ree2_err,samples\n");
    for (int k = 0; k < K; ++k)
        for (int c = 0; c < C; ++c) {
            double am = 0, ae = 0, bm = 0, be = 0;
            int L = 0;
            size_t samples = 0;
            for (int t = 0; t < st->replicas; ++t) {
                if (kidx[t] != k) continue;
                const metro_series *A = &self->ca[(size_t)t * C + c], *B = &self->cb[(size_t)t * C + c];
                double err;
                am += metro_mean(A->x, A->n);
                err = metro_binning_error(A->x, A->n, NULL);
                ae += err * err;
                bm += metro_mean(B->x, B->n);
                err = metro_binning_error(B->x, B->n, NULL);
                be += err * err;
                samples += A->n;
                ++L;
            }
            fprintf(f, "%.9g,%d,%.8g,%.4g,%.8g,%.4g,%zu\n", 1.0 / beta_k[k], c, am / L, sqrt(ae) / L, bm / L,
                    sqrt(be) / L, samples);
        }
    if (fclose(f)) return self->host->fail(self->ctx, "chains.csv: write error");
    return 0;
}

/* ---- reweighting -------------------------------------------------------- */

/* The quantities of the reweighted curve at one temperature. */
enum { RW_E, RW_CV, RW_A, RW_AVAR, RW_B, RW_DADT, RW_N };

static void derived(const metro__wham_avg *a, double beta, int n, double *v)
{
    v[RW_E] = a->e;
    v[RW_CV] = beta * beta * (a->e2 - a->e * a->e) / n;
    v[RW_A] = a->a;
    v[RW_AVAR] = a->a2 - a->a * a->a;
    v[RW_B] = a->b;
    v[RW_DADT] = beta * beta * (a->ae - a->a * a->e);
}

/* Histogram of all samples of the slots, leaving out block `skip` (of
 * self->jack) of every series (-1: none). */
static int fill(ps *self, const metro_state *st, metro__wham *w, const double *beta_k, const int *kidx, int K,
                double lo, double hi, double width, int skip)
{
    if (metro__wham_init(w, K, beta_k, lo, hi, width)) return -1;
    for (int t = 0; t < st->replicas; ++t) {
        size_t n = self->e[t].n, b0 = 0, b1 = 0;
        if (skip >= 0) {
            b0 = n * (size_t)skip / (size_t)self->jack;
            b1 = n * (size_t)(skip + 1) / (size_t)self->jack;
        }
        for (size_t i = 0; i < n; ++i)
            if (i < b0 || i >= b1) metro__wham_add(w, kidx[t], self->e[t].x[i], self->a[t].x[i], self->b[t].x[i]);
    }
    return 0;
}

static int write_reweighted(ps *self, const metro_state *st, const double *beta_k, const int *kidx, int K)
{
    const metro_host_api *host = self->host;
    double lo = INFINITY, hi = -INFINITY;
    for (int t = 0; t < st->replicas; ++t)
        for (size_t i = 0; i < self->e[t].n; ++i) {
            if (self->e[t].x[i] < lo) lo = self->e[t].x[i];
            if (self->e[t].x[i] > hi) hi = self->e[t].x[i];
        }
    double tmin = 1.0 / beta_k[0], tmax = 1.0 / beta_k[K - 1];
    double width = self->bin_width > 0 ? self->bin_width : tmin / 20.0;
    if ((hi - lo) / width > 2e6) width = (hi - lo) / 2e6; /* at most 2 million bins */

    /* the grid: geometric points over the range and the simulated T */
    int G = self->points + K;
    double *T = malloc((size_t)G * sizeof *T);
    double *val = calloc((size_t)G * RW_N * (self->jack + 1), sizeof *val);
    if (!T || !val) { free(T); free(val); return host->fail(self->ctx, "out of memory"); }
    for (int i = 0; i < self->points; ++i) T[i] = tmin * pow(tmax / tmin, (double)i / (self->points - 1));
    for (int k = 0; k < K; ++k) T[self->points + k] = 1.0 / beta_k[k];
    for (int i = 1; i < G; ++i)
        for (int j = i; j > 0 && T[j] < T[j - 1]; --j) { double x = T[j]; T[j] = T[j - 1]; T[j - 1] = x; }
    int g = 0; /* a simulated temperature on the grid appears once */
    for (int i = 0; i < G; ++i)
        if (!g || T[i] > T[g - 1] * (1 + 1e-9)) T[g++] = T[i];
    G = g;

    metro__wham full;
    if (fill(self, st, &full, beta_k, kidx, K, lo, hi, width, -1)) {
        free(T); free(val);
        return host->fail(self->ctx, "out of memory");
    }
    long it = metro__wham_solve(&full, 1e-10, 200000, 0);
    if (it < 0) host->log(self->ctx, METRO_LOG_WARN, "reweighting: the free energies did not converge to 1e-10");
    else host->log(self->ctx, METRO_LOG_INFO, "reweighting: %d temperatures, %d bins of %g, converged in %ld iterations",
                   K, full.nbins, width, it);
    for (int i = 0; i < G; ++i) {
        metro__wham_avg a;
        metro__wham_average(&full, 1.0 / T[i], &a);
        derived(&a, 1.0 / T[i], self->n, val + (size_t)i * RW_N);
    }
    /* jackknife: the same with one block of every series left out */
    for (int j = 0; j < self->jack; ++j) {
        metro__wham w;
        if (fill(self, st, &w, beta_k, kidx, K, lo, hi, width, j)) break;
        memcpy(w.f, full.f, (size_t)K * sizeof *w.f);
        metro__wham_solve(&w, 1e-10, 200000, 1);
        for (int i = 0; i < G; ++i) {
            metro__wham_avg a;
            metro__wham_average(&w, 1.0 / T[i], &a);
            derived(&a, 1.0 / T[i], self->n, val + ((size_t)(j + 1) * G + i) * RW_N);
        }
        metro__wham_free(&w);
    }
    metro__wham_free(&full);

    FILE *f = host->open_output(self->ctx, "thermo_reweighted.csv");
    if (!f) { free(T); free(val); return -1; }
    fprintf(f, "T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,Rg2_var_err,dRg2_dT,"
               "dRg2_dT_err\n");
    for (int i = 0; i < G; ++i) {
        double err[RW_N];
        for (int q = 0; q < RW_N; ++q) {
            double m = 0, s = 0;
            for (int j = 0; j < self->jack; ++j) m += val[((size_t)(j + 1) * G + i) * RW_N + q] / self->jack;
            for (int j = 0; j < self->jack; ++j) {
                double d = val[((size_t)(j + 1) * G + i) * RW_N + q] - m;
                s += d * d;
            }
            err[q] = sqrt((double)(self->jack - 1) / self->jack * s);
        }
        const double *v = val + (size_t)i * RW_N;
        fprintf(f, "%.9g,%.10g,%.4g,%.8g,%.4g,%.8g,%.4g,%.6g,%.8g,%.4g,%.4g,%.6g,%.4g\n", T[i], v[RW_E], err[RW_E],
                v[RW_CV], err[RW_CV], v[RW_A], err[RW_A], v[RW_AVAR], v[RW_B], err[RW_B], err[RW_AVAR], v[RW_DADT],
                err[RW_DADT]);
    }
    free(T);
    free(val);
    if (fclose(f)) return host->fail(self->ctx, "thermo_reweighted.csv: write error");
    return 0;
}

/* ---- plots -------------------------------------------------------------- */

static void plots(ps *self)
{
    const metro_host_api *host = self->host;
    FILE *f = host->open_output(self->ctx, "plot.gp");
    if (!f) return;
    int rw = self->reweight;
    /* N of C_V / N: the monomers of a lone chain, every particle otherwise */
    char title[128];
    if (self->lone) snprintf(title, sizeof title, "Specific heat per monomer (N = %d)", self->n);
    else snprintf(title, sizeof title, "Specific heat per particle (N = %d: every particle of the system)", self->n);
    fprintf(f,
            "# gnuplot script of the polymer_shape observable; run it in the run directory: gnuplot plot.gp\n"
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 960,640 } else { set terminal png size 960,640 }\n"
            "set datafile separator ','\n"
            "set key top right\nset grid\nset xlabel 'T'\n"
            "set output 'cv.png'\nset ylabel 'C_V / N'\nset title '%s'\n"
            "plot 'thermo.csv' skip 1 using 1:4:5 with yerrorbars pt 7 ps 0.6 title 'simulated temperatures'%s\n"
            "set output 'rg2_fluct.png'\nset multiplot layout 2,1\n"
            "set ylabel 'var(r_{gyr}^2)'\nset title 'Fluctuations of the squared radius of gyration'\n"
            "plot 'thermo.csv' skip 1 using 1:8 with points pt 7 ps 0.6 title 'simulated temperatures'%s\n"
            "set ylabel 'd<r_{gyr}^2>/dT'\nset title ''\n"
            "%s\nunset multiplot\n",
            title,
            rw ? ", 'thermo_reweighted.csv' skip 1 using 1:4 with lines lw 2 title 'multiple-histogram reweighting'" : "",
            rw ? ", 'thermo_reweighted.csv' skip 1 using 1:8 with lines lw 2 title 'reweighted'" : "",
            rw ? "plot 'thermo_reweighted.csv' skip 1 using 1:12:13 with yerrorlines pt 0 lw 2 title 'reweighted, beta^2 (<r^2 E> - <r^2><E>)'"
               : "plot 'thermo.csv' skip 1 using 1:6:7 with yerrorbars title '<r_{gyr}^2>'");
    if (self->per)
        /* chain c's rows are every chains-th from row c; too many chains
         * make the key useless, so it goes beyond a dozen */
        fprintf(f,
                "set output 'chains.png'\nset ylabel '<r_{gyr}^2>'\nset key bottom right\nset offsets graph 0.03, graph 0.03, 0, 0\n"
                "set title 'Squared radius of gyration of each chain (%d chains)'\n%s"
                "plot for [c=0:%d] 'chains.csv' skip 1 every %d::c using 1:3:4 with yerrorlines pt 7 ps 0.5 "
                "title sprintf('chain %%d', c), 'thermo.csv' skip 1 using 1:6:7 with yerrorlines lw 3 lc rgb 'black' "
                "title 'average over the chains'\n",
                self->chains, self->chains > 12 ? "set key off\n" : "", self->chains - 1, self->chains);
    fclose(f);
    /* drawn by the core once thermo*.csv are in place */
    host->plot(self->ctx, "plot.gp");
}

static int finish(void *vself, const metro_state *st)
{
    ps *self = vself;
    if (flush(self)) return -1;
    if (self->e[0].n < 1) {
        self->host->log(self->ctx, METRO_LOG_WARN, "no measurement: no thermo.csv");
        return 0;
    }
    double *beta_k = malloc((size_t)st->replicas * sizeof *beta_k);
    int *kidx = malloc((size_t)st->replicas * sizeof *kidx);
    if (!beta_k || !kidx) { free(beta_k); free(kidx); return self->host->fail(self->ctx, "out of memory"); }
    int K = temperatures(st, beta_k, kidx);
    int rc = write_thermo(self, st, beta_k, kidx, K);
    if (!rc && self->per) rc = write_chains(self, st, beta_k, kidx, K);
    if (!rc && self->reweight) rc = write_reweighted(self, st, beta_k, kidx, K);
    if (!rc && self->plots) plots(self);
    free(beta_k);
    free(kidx);
    return rc;
}

/* ---- save / restore ----------------------------------------------------- */

static int save(void *vself)
{
    ps *self = vself;
    const metro_host_api *h = self->host;
    if (flush(self)) return -1;
    long long head[3] = {self->measured, self->stride, (long long)self->e[0].n};
    if (h->save_bytes(self->ctx, head, sizeof head)) return -1;
    for (int t = 0; t < self->slots; ++t)
        if (h->save_bytes(self->ctx, self->e[t].x, self->e[t].n * sizeof(double)) ||
            h->save_bytes(self->ctx, self->a[t].x, self->a[t].n * sizeof(double)) ||
            h->save_bytes(self->ctx, self->b[t].x, self->b[t].n * sizeof(double)))
            return -1;
    /* with 2+ chains each chain's series follow (all of the same length):
     * a checkpoint of one chain is as before */
    for (size_t i = 0; self->per && i < (size_t)self->slots * self->chains; ++i)
        if (h->save_bytes(self->ctx, self->ca[i].x, self->ca[i].n * sizeof(double)) ||
            h->save_bytes(self->ctx, self->cb[i].x, self->cb[i].n * sizeof(double)))
            return -1;
    return 0;
}

static int restore(void *vself, const void *data, size_t size)
{
    ps *self = vself;
    long long head[3];
    if (size < sizeof head) return self->host->fail(self->ctx, "checkpoint: truncated");
    memcpy(head, data, sizeof head);
    size_t n = (size_t)head[2];
    if (head[1] < 1 || size != sizeof head + n * sizeof(double) * row_doubles(self))
        return self->host->fail(self->ctx, "checkpoint: %zu bytes do not fit %d slots of %d chain%s", size,
                                self->slots, self->chains, self->chains == 1 ? "" : "s");
    const double *x = (const double *)((const char *)data + sizeof head);
    for (int t = 0; t < self->slots; ++t) {
        metro_series *s[3] = {&self->e[t], &self->a[t], &self->b[t]};
        for (int q = 0; q < 3; ++q) {
            s[q]->n = 0;
            for (size_t i = 0; i < n; ++i)
                if (metro_series_push(s[q], x[i])) return self->host->fail(self->ctx, "out of memory");
            x += n;
        }
    }
    for (size_t i = 0; self->per && i < (size_t)self->slots * self->chains; ++i) {
        metro_series *s[2] = {&self->ca[i], &self->cb[i]};
        for (int q = 0; q < 2; ++q) {
            s[q]->n = 0;
            for (size_t j = 0; j < n; ++j)
                if (metro_series_push(s[q], x[j])) return self->host->fail(self->ctx, "out of memory");
            x += n;
        }
    }
    self->measured = head[0];
    self->stride = head[1];
    self->pending = 0; /* measurements still on the device belonged to the replaced state */
    return 0;
}

/* Three series per slot (and two per slot and chain with 2+ chains), kept
 * whole up to max_memory_mb and thinned past it, the device buffer of
 * pending measurements and its host copy (at most about 8 MB unless one
 * measurement is larger) and the chain table. */
static int memory(void *vself, const metro_setup *setup, size_t *host, size_t *device)
{
    ps *self = vself;
    double m = (double)(setup->every > 0 ? setup->sweeps / setup->every : setup->sweeps) + 1;
    double bytes = m * (double)row_doubles(self) * sizeof(double);
    double cap = (double)self->cap * (double)row_doubles(self) * sizeof(double);
    size_t table = 2 * (size_t)self->chains * sizeof(int);
    size_t buffer = device_rows(self) * row_doubles(self) * sizeof(double); /* at most about 8 MB but for huge rows */
    *host = (size_t)(bytes < cap ? bytes : cap) + buffer + table + (self->per ? 2 * (size_t)self->chains * sizeof(double) : 0);
    *device = buffer + table;
    return 0;
}

/* read only by finish(), from the saved series: a resume or an analyze may
 * change them (reweight and plots may not: switched off, the former files
 * would stay as the shorter run's) */
static const char *const resumable[] = {"reweight_points", "jackknife", NULL};

static const metro_observable_api api = {METRO_ABI_VERSION, create,  destroy, measure,
                                         finish,            save,    restore, measure_device, memory, resumable};

METRO_PLUGIN(observable, "polymer_shape", "1.0.0",
             "per temperature: energy, C_V/N, r_gyr^2 and its fluctuation, R_ee^2 (averages over the chains, each "
             "chain's in chains.csv); multiple-histogram curve; plots",
             params, api)
