/* pair_correlation — pair correlations g_ab(r) of every pair of species in
 * a spherical cell, the charge density around each species, and the
 * renormalised electrostatics of seed 002 §5.1–5.2 drawn from them
 * (electrostatics.h: κ_R, renormalised valences two ways each, ε_R two
 * ways, Eq. 8, the sum rules).
 *
 * What is counted.  Central ions: those whose centre is more than
 * wall_margin from the wall, |x| < R_int = R_cell - wall_margin (default:
 * ten bare Debye lengths, κ² = 4π λ_B Σ N_i z_i² / (4/3 π R_cell³), as the
 * paper).  Partners: every other ion, anywhere.  Pairs are binned in
 * r < r_max; r_max may not exceed wall_margin - d_max/2, so every shell
 * around a central ion lies inside the region that partner centres can
 * reach (|x| <= R_cell - d/2, coulomb_hs).  g is normalised by the count
 * the measured one-body density profiles would put in each shell, averaged
 * exactly over the shell (pc_accum.h): in the homogeneous interior that is
 * n_b V_shell, and the outer shells of central ions near R_int, which reach
 * the wall's double layer, get that layer taken out instead of a spurious
 * far-field tail in g and ρ.
 * Every `every` sweeps (the core's key) is one measurement; when all
 * temperature slots have the same β every replica is measured, else only
 * the replica in slot 0.
 *
 * Where (histogram = auto).  Without the potential sums the counts come
 * from a cell list (pc_accum.h), the neighbours within about r_max only;
 * with them every pair is visited (O(N_central N)).  On the CUDA backend,
 * from PC_GPU_MIN particles, the GPU counts: from the host's cell list
 * (kernel pair_correlation_cells), or every pair with the potential sums
 * (pair_correlation_histogram); else the host (the cell list on every
 * core, every pair on one).  All paths
 * bin the same pairs with the same rounding: identical counts.
 *
 * Errors.  Measurements are kept in between `blocks` and 2 x `blocks`
 * equal blocks (pc_accum.h); every error bar is a jackknife over them.
 * Where the blocks cannot support one (short_run_note) the log says so, as
 * the energy observable's does of its series.
 * With potential = true, the potential at each central ion from every
 * other ion is summed as well, giving the excess energy per ion
 * u_a = ½ z_a λ_B <Σ_j z_j / r_ij> of ions far from the wall (compare
 * Debye–Hückel at low concentration).
 *
 * Files written by finish() into the run directory:
 *   g.csv              r, then per ordered pair (a = central, b = partner):
 *                      g_a_b, g_a_b_err, betaU_a_b (= -ln g), betaU_a_b_err
 *   rho_q.csv          r, then per species a: rho_a (e per length³, the mean
 *                      charge density at r from a central a beyond the
 *                      one-body background, Σ_b n_b z_b (g_ab - 1)),
 *                      rho_a_err, ln_abs_r_rho_a (ln|r ρ_a|, the paper's
 *                      Fig. 13; nan where |ρ_a| is below its error),
 *                      ln_abs_r_rho_a_err
 *   fits.csv           r, and over each fit window the far-field fits
 *                      (electrostatics.h): lnfit_a (the line ln|A_a| - κ_R r),
 *                      rhofit_a (A_a y + A2_a y²), betaUfit_a_b (B_ab y +
 *                      B2_ab y²), betaUline_a_b (the line (B_ab/A_a) rhofit_a
 *                      whose slope gives q_b^R)
 *   electrostatics.csv quantity,value,error,paper_value,stat_error,window_error
 *                      (electrostatics.h names them; paper_value is seed
 *                      002's number, or the exact value a sum rule or Eq. 8
 *                      demands; error = stat (jackknife) ⊕ window error;
 *                      the rows fit_rmin_a / fit_rmax_a report the windows)
 *   pair_correlation.gp the gnuplot script of g.png, ln_r_rhoq.png (Fig. 13:
 *                      data and fitted lines) and u_vs_rhoq.png (Fig. 14:
 *                      βU_ab against ρ_a over the fit windows, the lines,
 *                      dashed the two-term fits), run when gnuplot exists
 *                      (else a warning; run it later in the run directory)
 * r is the bin centre; rows where a value has no data hold "nan".  A run
 * in which no ion was ever central writes none of them (a warning says
 * so); create() refuses an interior narrower than an ion, where that is
 * all but certain, and fit windows outside [0, r_max], reversed, or
 * narrower than a fit's METRO_ES_MIN_BINS bins.
 * save()/restore() carry the blocks, so finish() after a restart analyses
 * every measurement of the run.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metro/plugin.h"
#include "metro/stats.h"

#include "electrostatics.h"
#include "pc_accum.h"

/* histogram = auto uses the GPU from this many particles on */
#define PC_GPU_MIN 8192
#define PC_SAVE_MAGIC 0x52524f43u /* "CORR" */
#define PC_SAVE_VERSION 1u

typedef struct pc {
    const metro_host_api *host;
    metro_ctx *ctx;
    metro_pc_system sys;
    double cell_radius, margin;
    int particles, use_gpu, plots;
    int timed;                   /* the first measurement's cost is logged */
    int seen[METRO_MAX_SPECIES]; /* finish(): species a was ever central */
    char prefix[64];
    metro_es_options es;
    metro_pc_accum acc;
    double *meas;                /* the record of one measurement */
    int *central;                /* [particles] */
    /* GPU */
    void *kernel;                /* pair_correlation_cells, or _histogram */
    int *d_central;              /* [particles]: the central list, or the cell list's cq */
    unsigned long long *d_hist, *h_hist;
    double *d_psi;
    metro_float4 *d_sp;          /* the cell list: [particles] */
    int *d_start, *d_ccell;      /* [cap_cells + 1], [particles] */
    int cap_cells;
} pc;

static const metro_param_decl params[] = {
    {"r_max", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "largest pair distance binned (0: wall_margin - d_max/2, the most that keeps every shell in the cell)"},
    {"bins", METRO_PARAM_INT, "250", 1, 1e6, NULL, "", "number of bins in [0, r_max)"},
    {"dr", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "bin width; > 0 overrides bins (r_max is then rounded down to whole bins)"},
    {"wall_margin", METRO_PARAM_REAL, "-1", -1, 1e9, NULL, "length",
     "central ions lie further than this from the wall (negative: ten bare Debye lengths)"},
    {"blocks", METRO_PARAM_INT, "20", 2, 10000, NULL, "",
     "independent blocks of measurements for the error bars (between this and twice as many are kept)"},
    {"histogram", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|cpu|gpu", "",
     "where pairs are binned (auto: on the CUDA backend the GPU from 8192 particles); without the potential "
     "sums from a cell list, with them every pair"},
    {"potential", METRO_PARAM_BOOL, "true", 0, 0, NULL, "",
     "also sum the potential of all ions at each central ion (excess energy per ion)"},
    {"fit_rmin", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "inner end of the far-field fit windows (0: chosen from the data)"},
    {"fit_rmax", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "outer end of the far-field fit windows (0: where the signal falls below snr error bars)"},
    {"snr", METRO_PARAM_REAL, "3", 0.5, 1e6, NULL, "",
     "signal-to-error ratio below which a fit window ends"},
    {"plots", METRO_PARAM_BOOL, "true", 0, 0, NULL, "",
     "draw g.png, ln_r_rhoq.png and u_vs_rhoq.png with gnuplot when it is installed"},
    {"prefix", METRO_PARAM_STRING, "", 0, 0, NULL, "",
     "prepended to the name of every file written (two instances in one run)"},
    METRO_PARAM_END};

/* ---- create / destroy ---------------------------------------------------- */

static void destroy(void *self);

/* Fails create(): records the message, frees c; returns -1. */
static int give_up(pc *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int rc = c->host->fail(c->ctx, "%s", msg);
    destroy(c);
    return rc;
}

static void destroy(void *self)
{
    pc *c = self;
    if (!c) return;
    if (c->use_gpu) {
        cudaFree(c->d_central);
        cudaFree(c->d_hist);
        cudaFree(c->d_psi);
        cudaFree(c->d_sp);
        cudaFree(c->d_start);
        cudaFree(c->d_ccell);
    }
    free(c->h_hist);
    free(c->meas);
    free(c->central);
    metro_pc_accum_free(&c->acc);
    free(c);
}

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p,
                  const metro_setup *setup, void **out)
{
    pc *c = calloc(1, sizeof *c);
    if (!c) return host->fail(ctx, "out of memory");
    c->host = host;
    c->ctx = ctx;
    c->particles = setup->particles;
    metro_pc_system *s = &c->sys;
    double R = 0, lb = 0;
    if (!host->fact(ctx, "cell_radius", &R) || !(R > 0))
        return give_up(c, "needs a potential term with a spherical cell (it publishes cell_radius), such as coulomb_hs");
    if (!host->fact(ctx, "bjerrum", &lb)) lb = 0; /* no Coulomb term: g(r) only */
    c->cell_radius = R;
    s->r_cell = R;
    s->bjerrum = lb;
    if (setup->species > 0) {
        s->species = setup->species;
        for (int a = 0; a < s->species; a++) {
            const metro_species *sp = &setup->species_table[a];
            s->z[a] = sp->charge;
            s->d[a] = sp->diameter;
            s->count[a] = sp->count;
            snprintf(s->name[a], sizeof s->name[a], "%s", sp->name[0] ? sp->name : "s");
        }
    } else { /* one kind of particle */
        s->species = 1;
        s->count[0] = setup->particles;
        snprintf(s->name[0], sizeof s->name[0], "all");
    }
    double dmax = 0.0, k2 = 0.0;
    const double vol = 4.0 / 3.0 * M_PI * pow(c->cell_radius, 3);
    for (int a = 0; a < s->species; a++) {
        if (s->count[a] > 0 && s->d[a] > dmax) dmax = s->d[a];
        k2 += 4.0 * M_PI * s->bjerrum * (double)s->count[a] / vol * s->z[a] * s->z[a];
    }

    c->margin = host->param_real(p, "wall_margin");
    if (c->margin < 0) {
        if (!(k2 > 0))
            return give_up(c, "wall_margin: the default is ten Debye lengths, but the system has no "
                              "charges; give wall_margin");
        c->margin = 10.0 / sqrt(k2);
    }
    const int margin_default = host->param_real(p, "wall_margin") < 0;
    s->r_int = c->cell_radius - c->margin;
    if (!(s->r_int > 0))
        return give_up(c, "wall_margin: %g leaves no interior in a cell of radius %g", c->margin,
                       c->cell_radius);
    /* Central ions are those whose centre lies in the interior.  One
     * narrower than an ion's radius is smaller than an ion: at the cell's
     * mean density it holds on average fewer centres than the packing
     * fraction, so nearly every measurement finds no central ion and the
     * run ends with nan or noise for every result (R = 386, margin 385,
     * d = 8: 5e-5 central ions per configuration, all nan, exit 0). */
    if (s->r_int < dmax / 2)
        return give_up(c, "wall_margin: %g%s leaves an interior of radius %g in a cell of radius %g, less than the "
                          "radius of an ion (%g), so almost no configuration has a central ion in it; wall_margin "
                          "must be at most R - d_max/2 = %g",
                       c->margin, margin_default ? " (the default, ten bare Debye lengths)" : "", s->r_int,
                       c->cell_radius, dmax / 2, c->cell_radius - dmax / 2);
    double rmax = host->param_real(p, "r_max"), dr = host->param_real(p, "dr");
    const double rlim = c->margin - dmax / 2;
    if (!(rlim > 0))
        return give_up(c, "wall_margin: %g is not more than half the largest diameter, %g, so no shell around a "
                          "central ion stays inside the cell (raise wall_margin above %g)",
                       c->margin, dmax / 2, dmax / 2);
    if (rmax == 0) rmax = rlim;
    if (!(rmax > 0) || rmax > rlim * (1 + 1e-12))
        return give_up(c, "r_max: %g is more than wall_margin - d_max/2 = %g, so shells around "
                          "central ions would cross the wall (lower r_max or raise wall_margin)",
                       rmax, rlim);
    if (dr > 0) {
        s->bins = (int)floor(rmax / dr + 1e-9);
        if (s->bins < 1) return give_up(c, "dr: %g is wider than r_max = %g", dr, rmax);
    } else {
        s->bins = (int)host->param_int(p, "bins");
        dr = rmax / s->bins;
    }
    s->dr = dr;
    /* The fit windows must lie within the bins (the analysis clamped a
     * fit_rmax beyond r_max to the last bin without a word) and hold
     * enough of them; a reversed or too narrow window was reported only at
     * the end, as "too few bins with signal". */
    const double rtop = s->bins * dr, fmin = host->param_real(p, "fit_rmin"),
                 fmax = host->param_real(p, "fit_rmax");
    if (fmin > 0 && fmin >= rtop)
        return give_up(c, "fit_rmin: %g is not below r_max = %g: the fit windows would hold no bin (fit_rmin must be "
                          "less than r_max)",
                       fmin, rtop);
    if (fmax > rtop * (1 + 1e-12))
        return give_up(c, "fit_rmax: %g is beyond r_max = %g, where nothing is binned (fit_rmax must be at most "
                          "r_max, or 0 to end the windows where the signal does)",
                       fmax, rtop);
    if (fmin > 0 && fmax > 0) {
        if (fmin >= fmax)
            return give_up(c, "fit_rmin: %g is not below fit_rmax = %g: the fit window is empty (fit_rmin must be "
                              "less than fit_rmax)",
                           fmin, fmax);
        /* the bins whose centres lie in [fit_rmin, fit_rmax], as the
         * analysis picks them (electrostatics.c, bin_of) */
        const int lo = (int)ceil(fmin / dr - 0.5 - 1e-9), hi = (int)floor(fmax / dr - 0.5 + 1e-9);
        if (hi - lo + 1 < METRO_ES_MIN_BINS)
            return give_up(c, "fit_rmax: the fit window %g..%g holds %d bin centre%s (bins of %g); a far-field fit "
                              "needs at least %d (widen the window or narrow the bins)",
                           fmin, fmax, hi - lo + 1 > 0 ? hi - lo + 1 : 0, hi - lo + 1 == 1 ? "" : "s", dr,
                           METRO_ES_MIN_BINS);
    }
    s->psi = host->param_bool(p, "potential");
    c->plots = host->param_bool(p, "plots");
    const char *pre = host->param_string(p, "prefix");
    if (strlen(pre) >= sizeof c->prefix || strpbrk(pre, "/'\"\\ "))
        return give_up(c, "prefix: '%s' must be a short file-name prefix (no /, quotes or spaces)", pre);
    snprintf(c->prefix, sizeof c->prefix, "%s", pre);
    c->es.bjerrum = s->bjerrum;
    c->es.fit_rmin = host->param_real(p, "fit_rmin");
    c->es.fit_rmax = host->param_real(p, "fit_rmax");
    c->es.snr = host->param_real(p, "snr");
    for (int a = 0; a < s->species; a++) c->es.name[a] = s->name[a];

    const char *where = host->param_string(p, "histogram");
    if (!strcmp(where, "gpu") && setup->backend != METRO_BACKEND_CUDA)
        return give_up(c, "histogram: gpu needs the CUDA backend");
    c->use_gpu = setup->backend == METRO_BACKEND_CUDA &&
                 (!strcmp(where, "gpu") || (!strcmp(where, "auto") && c->particles >= PC_GPU_MIN));

    size_t rec = metro_pc_record_size(s->species, s->bins);
    c->meas = malloc(rec * sizeof(double));
    c->central = malloc((size_t)(c->particles > 0 ? c->particles : 1) * sizeof(int));
    if (!c->meas || !c->central ||
        metro_pc_accum_init(&c->acc, s->species, s->bins, (int)host->param_int(p, "blocks"))) {
        destroy(c);
        return host->fail(ctx, "out of memory");
    }
    host->log(ctx, METRO_LOG_INFO,
              "central ions within %.6g of the centre (wall margin %.6g), "
              "%d bins of %.6g up to r_max %.6g, histograms on the %s (%s)",
              s->r_int, c->margin, s->bins, s->dr, s->bins * s->dr,
              c->use_gpu ? "GPU" : "CPU", s->psi ? "all pairs" : "cell list");
    *out = c;
    return 0;
}

/* ---- measure ------------------------------------------------------------- */

static pc_launch launch_of(const pc *c, int nc)
{
    pc_launch L;
    memset(&L, 0, sizeof L);
    L.n = c->particles;
    L.n_central = nc;
    L.species = c->sys.species;
    L.bins = c->sys.bins;
    L.psi = c->sys.psi;
    const double rmax = c->sys.bins * c->sys.dr;
    L.rmax2 = (float)(rmax * rmax);
    L.inv_dr = (float)(1.0 / c->sys.dr);
    for (int a = 0; a < c->sys.species; a++) L.z[a] = (float)c->sys.z[a];
    return L;
}

/* The kernel and device buffers, at the first GPU measurement: observables
 * are created before the core links the device code. */
static int gpu_setup(pc *c)
{
    const size_t nh = (size_t)c->sys.species * c->sys.species * c->sys.bins, n = (size_t)c->particles;
    void *kernel = NULL; /* set last: it marks the setup done */
    if (c->host->kernel(c->ctx, c->sys.psi ? "pair_correlation_histogram" : "pair_correlation_cells", &kernel))
        return -1;
    c->h_hist = malloc(nh * sizeof *c->h_hist);
    if (!c->h_hist) return c->host->fail(c->ctx, "out of memory (%zu bytes for the histogram)", nh * sizeof *c->h_hist);
    if (c->host->cuda(c->ctx, cudaMalloc((void **)&c->d_central, n * sizeof(int)),
                      "cudaMalloc of %zu bytes for the central particles", n * sizeof(int)) ||
        c->host->cuda(c->ctx, cudaMalloc((void **)&c->d_hist, nh * sizeof *c->d_hist),
                      "cudaMalloc of %zu bytes for the histogram", nh * sizeof *c->d_hist) ||
        c->host->cuda(c->ctx, cudaMalloc((void **)&c->d_psi, METRO_MAX_SPECIES * sizeof(double)),
                      "cudaMalloc of %zu bytes", METRO_MAX_SPECIES * sizeof(double)))
        return -1;
    if (!c->sys.psi && (c->host->cuda(c->ctx, cudaMalloc((void **)&c->d_sp, n * sizeof *c->d_sp),
                                   "cudaMalloc of %zu bytes for the cell list", n * sizeof *c->d_sp) ||
                     c->host->cuda(c->ctx, cudaMalloc((void **)&c->d_ccell, n * sizeof(int)),
                                   "cudaMalloc of %zu bytes for the cell list", n * sizeof(int))))
        return -1;
    c->kernel = kernel;
    return 0;
}

/* Queues the cell list's arrays to the device (the start array grows when
 * a configuration spreads over more cells). */
static cudaError_t upload_cells(pc *c, const metro_pc_cells *cl, cudaStream_t stream)
{
    if (cl->ncell > c->cap_cells) {
        cudaFree(c->d_start);
        c->d_start = NULL;
        c->cap_cells = 0;
        cudaError_t e = cudaMalloc((void **)&c->d_start, ((size_t)cl->ncell + 1) * sizeof(int));
        if (e != cudaSuccess) return e;
        c->cap_cells = cl->ncell;
    }
    cudaError_t e = cudaMemcpyAsync(c->d_sp, cl->sp, (size_t)c->particles * sizeof *cl->sp,
                                    cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->d_start, cl->start, ((size_t)cl->ncell + 1) * sizeof(int),
                            cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->d_central, cl->cq, (size_t)cl->nc * sizeof(int), cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->d_ccell, cl->ccell, (size_t)cl->nc * sizeof(int), cudaMemcpyHostToDevice, stream);
    return e;
}

/* One replica's pairs on the GPU (pos: its host copy, d_pos: its device
 * copy), added into the measurement record. */
static int histogram_gpu(pc *c, const metro_float4 *pos, const metro_float4 *d_pos, int nc, double *hist,
                         double *psi)
{
    const int S = c->sys.species;
    const size_t nh = (size_t)S * S * c->sys.bins;
    cudaStream_t stream = (cudaStream_t)c->host->stream(c->ctx);
    pc_launch L = launch_of(c, nc);
    if (!c->kernel && gpu_setup(c)) return -1;
    /* 48 KB of shared memory without opting in; the kernels' own static
     * arrays take a few bytes of it */
    size_t smem = c->sys.psi ? PC_TILE * sizeof(float4) + METRO_MAX_SPECIES * sizeof(double) : 0;
    /* its 32-bit counters hold at most PC_TILE x n pairs: below 2^32 */
    int use_shared = smem + nh * sizeof(unsigned int) <= 48 * 1024 - 256 &&
                     (unsigned long long)PC_TILE * (unsigned long long)c->particles < (1ull << 32);
    if (use_shared) smem += nh * sizeof(unsigned int);
    metro_pc_cells cl = {0};
    cudaError_t e;
    if (!c->sys.psi) {
        if (metro_pc_cells_build(pos, c->central, &L, &cl))
            return c->host->fail(c->ctx, "no room for the cell list of %d particles (out of memory)", c->particles);
        if (cl.nc == 0) { /* no central ion in this configuration: no pairs */
            metro_pc_cells_free(&cl);
            return 0;
        }
        e = upload_cells(c, &cl, stream);
        L.n_central = nc = cl.nc;
    } else {
        e = cudaMemcpyAsync(c->d_central, c->central, (size_t)nc * sizeof(int), cudaMemcpyHostToDevice, stream);
    }
    if (e == cudaSuccess) e = cudaMemsetAsync(c->d_hist, 0, nh * sizeof *c->d_hist, stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(c->d_psi, 0, METRO_MAX_SPECIES * sizeof(double), stream);
    if (e == cudaSuccess && nc > 0) {
        const float4 *dp = (const float4 *)d_pos;
        void *pairs[] = {&dp, &c->d_central, &L, &c->d_hist, &c->d_psi, &use_shared};
        void *cells[] = {&c->d_sp, &c->d_start, &c->d_central, &c->d_ccell, &cl.m[0], &cl.m[1], &cl.m[2],
                         &L, &c->d_hist, &use_shared};
        e = cudaLaunchKernel((const void *)c->kernel, (dim3){(unsigned)((nc + PC_TILE - 1) / PC_TILE), 1, 1},
                             (dim3){PC_TILE, 1, 1}, c->sys.psi ? pairs : cells, smem, stream);
    }
    double dpsi[METRO_MAX_SPECIES] = {0};
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->h_hist, c->d_hist, nh * sizeof *c->h_hist, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dpsi, c->d_psi, sizeof dpsi, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    metro_pc_cells_free(&cl); /* after the copies from it */
    if (c->host->cuda(c->ctx, e, "the GPU histogram (%zu bins)", nh)) return -1;
    for (size_t i = 0; i < nh; i++) hist[i] += (double)c->h_hist[i];
    for (int a = 0; a < S; a++) psi[a] += dpsi[a];
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int measure(void *self, const metro_state *st)
{
    pc *c = self;
    const double t0 = now();
    const int S = c->sys.species, n = c->particles;
    double *m = c->meas;
    memset(m, 0, c->acc.rec * sizeof(double));
    /* Every replica when all slots share one temperature, else slot 0's. */
    int all = 1;
    for (int t = 1; t < st->replicas; t++) all &= st->beta[t] == st->beta[0];
    for (int r = 0; r < st->replicas; r++) {
        int rep = all ? r : st->slot_replica[0];
        const metro_float4 *pos = st->pos + (size_t)rep * n;
        int nc = metro_pc_select(pos, n, &c->sys, c->central, m);
        double *hist = m + METRO_PC_HIST(S), *psi = m + METRO_PC_PSI(S, 0);
        if (c->use_gpu) {
            if (histogram_gpu(c, pos, st->d_pos + (size_t)rep * n, nc, hist, psi)) return -1;
        } else {
            pc_launch L = launch_of(c, nc);
            /* without the potential sums (O(N) per central ion whatever
             * the method) the counts come from a cell list; the same counts */
            if (L.psi || metro_pc_histogram_cells(pos, c->central, &L, hist))
                metro_pc_histogram_cpu(pos, c->central, &L, hist, psi);
        }
        m[METRO_PC_CONF] += 1.0;
        if (!all) break;
    }
    metro_pc_accum_add(&c->acc, m);
    if (!c->timed) { /* what a measurement costs, for planning how often */
        c->timed = 1;
        c->host->log(c->ctx, METRO_LOG_INFO, "one measurement took %.3g s", now() - t0);
    }
    return 0;
}

/* ---- finish: estimates, analysis, files ---------------------------------- */

static FILE *out(pc *c, const char *name)
{
    char fn[128];
    snprintf(fn, sizeof fn, "%s%s", c->prefix, name);
    return c->host->open_output(c->ctx, fn);
}

/* A value for the CSVs: "nan" where it has no data, never "-nan" (-log of
 * a missing g, 0/0 on x86 carry the sign bit, which readers may not parse) */
static double nn(double v)
{
    return isnan(v) ? NAN : v;
}

static int write_csvs(pc *c, const metro_pc_profile *full, const metro_es_result *res)
{
    const int S = c->sys.species, bins = c->sys.bins;
    const double dr = c->sys.dr;
    const char(*nm)[16] = c->sys.name;
    FILE *f = out(c, "g.csv");
    if (!f) return -1;
    fprintf(f, "r");
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            fprintf(f, ",g_%s_%s,g_%s_%s_err,betaU_%s_%s,betaU_%s_%s_err", nm[a], nm[b], nm[a], nm[b],
                    nm[a], nm[b], nm[a], nm[b]);
    fprintf(f, "\n");
    for (int k = 0; k < bins; k++) {
        fprintf(f, "%.8g", metro_pc_r(dr, k));
        for (int i = 0; i < S * S; i++) {
            size_t o = (size_t)i * bins + k;
            fprintf(f, ",%.10g,%.4g,%.10g,%.4g", nn(full->g[o]), nn(res->g_err[o]), nn(-log(full->g[o])),
                    nn(res->u_err[o]));
        }
        fprintf(f, "\n");
    }
    fclose(f);

    if (!(f = out(c, "rho_q.csv"))) return -1;
    fprintf(f, "r");
    for (int a = 0; a < S; a++)
        fprintf(f, ",rho_%s,rho_%s_err,ln_abs_r_rho_%s,ln_abs_r_rho_%s_err", nm[a], nm[a], nm[a],
                nm[a]);
    fprintf(f, "\n");
    for (int k = 0; k < bins; k++) {
        const double r = metro_pc_r(dr, k);
        fprintf(f, "%.8g", r);
        for (int a = 0; a < S; a++) {
            const double q = full->rho[(size_t)a * bins + k], e = res->rho_err[(size_t)a * bins + k];
            const int sig = fabs(q) > e; /* the log of noise is noise */
            fprintf(f, ",%.10g,%.4g,%.10g,%.4g", nn(q), nn(e), sig ? nn(log(fabs(r * q))) : NAN, sig ? nn(e / fabs(q)) : NAN);
        }
        fprintf(f, "\n");
    }
    fclose(f);

    if (!(f = out(c, "fits.csv"))) return -1;
    fprintf(f, "r");
    for (int a = 0; a < S; a++) fprintf(f, ",lnfit_%s,rhofit_%s", nm[a], nm[a]);
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++) fprintf(f, ",betaUfit_%s_%s,betaUline_%s_%s", nm[a], nm[b], nm[a], nm[b]);
    fprintf(f, "\n");
    const double kR = res->kappa_R;
    for (int k = 0; k < bins; k++) {
        double y1, y2;
        if (isfinite(kR) && kR > 0)
            metro_es_basis(kR, dr, k, &y1, &y2);
        else
            y1 = y2 = NAN;
        fprintf(f, "%.8g", metro_pc_r(dr, k));
        for (int a = 0; a < S; a++) {
            int in = res->fitted[a] && k >= res->lo[a] && k <= res->hi[a];
            fprintf(f, ",%.10g,%.10g", in ? nn(log(fabs(res->A[a])) - kR * metro_pc_r(dr, k)) : NAN,
                    in ? nn(res->A[a] * y1 + res->A2[a] * y2) : NAN);
        }
        for (int a = 0; a < S; a++)
            for (int b = 0; b < S; b++) {
                int in = res->fitted[a] && k >= res->ulo[a * S + b] && k <= res->hi[a];
                double rf = res->A[a] * y1 + res->A2[a] * y2;
                fprintf(f, ",%.10g,%.10g", in ? nn(res->B[a * S + b] * y1 + res->B2[a * S + b] * y2) : NAN,
                        in ? nn(res->B[a * S + b] / res->A[a] * rf) : NAN);
            }
        fprintf(f, "\n");
    }
    fclose(f);

    if (!(f = out(c, "electrostatics.csv"))) return -1;
    fprintf(f, "quantity,value,error,paper_value,stat_error,window_error\n");
    for (int i = 0; i < res->nq; i++) {
        const metro_es_quantity *q = &res->q[i];
        fprintf(f, "%s,%.10g,%.4g,", q->name, nn(q->value), nn(q->error));
        if (isfinite(q->paper)) fprintf(f, "%.10g", q->paper);
        fprintf(f, ",%.4g,%.4g\n", nn(q->stat_error), nn(q->window_error));
    }
    fclose(f);
    return 0;
}

/* The gnuplot script; columns are addressed by name. */
static int write_plots(pc *c, const metro_es_result *res)
{
    const int S = c->sys.species;
    const char(*nm)[16] = c->sys.name;
    const char *P = c->prefix;
    FILE *f = out(c, "pair_correlation.gp");
    if (!f) return -1;
    fprintf(f, "# gnuplot script written by pair_correlation: run it in this directory.\n"
               "set datafile separator ','\nset terminal pngcairo size 900,650\nset grid\n");
    fprintf(f, "set output '%sg.png'\nset xlabel 'r'\nset ylabel 'g_{ab}(r)'\nset key right bottom\nplot ", P);
    /* a species never central has only nan in its g columns, on which
     * gnuplot fails the whole plot */
    int first = 1;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S && c->seen[a]; b++) {
            fprintf(f, "%s'%sg.csv' using 'r':'g_%s_%s' with lines title '%s-%s'", first ? "" : ", ", P,
                    nm[a], nm[b], nm[a], nm[b]);
            first = 0;
        }
    fprintf(f, "\n");
    int any = 0;
    for (int a = 0; a < S; a++) any |= res->fitted[a];
    if (!any) {
        fprintf(f, "# no far-field fits: no Fig. 13 / Fig. 14 plots\n");
        fclose(f);
        return 0;
    }
    /* the ranges of the fits, with room around them */
    double xmax = 0.0, ymin = INFINITY, ymax = -INFINITY;
    for (int a = 0; a < S; a++) {
        if (!res->fitted[a]) continue;
        double lo = res->lo[a] * c->sys.dr, hi = (res->hi[a] + 1) * c->sys.dr;
        double y0 = log(fabs(res->A[a])) - res->kappa_R * lo, y1 = log(fabs(res->A[a])) - res->kappa_R * hi;
        xmax = fmax(xmax, hi);
        ymin = fmin(ymin, fmin(y0, y1));
        ymax = fmax(ymax, fmax(y0, y1));
    }
    xmax = fmin(1.4 * xmax, c->sys.bins * c->sys.dr);
    fprintf(f, "set output '%sln_r_rhoq.png'\nset xlabel 'r'\nset ylabel 'ln |r {/Symbol r}_q(r) / e|'\n"
               "set key right top\nset xrange [0:%g]\nset yrange [%g:%g]\nplot ",
            P, xmax, ymin - 2.0, ymax + 2.0);
    first = 1;
    for (int a = 0; a < S; a++) {
        if (!res->fitted[a]) continue;
        fprintf(f, "%s'%srho_q.csv' using 'r':'ln_abs_r_rho_%s':'ln_abs_r_rho_%s_err' with yerrorbars pt 7 "
                   "ps 0.4 title 'around %s', '%sfits.csv' using 'r':'lnfit_%s' with lines lw 2 title "
                   "'fit, 1/{/Symbol k}_R = %.4g'",
                first ? "" : ", ", P, nm[a], nm[a], nm[a], P, nm[a], 1.0 / res->kappa_R);
        first = 0;
    }
    fprintf(f, "\nset output '%su_vs_rhoq.png'\nset xlabel '{/Symbol r}_q / e'\nset ylabel '{/Symbol b}U'\n"
               "set key left top\nset autoscale\nplot ",
            P);
    first = 1;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S && res->fitted[a]; b++) {
            int lo = res->ulo[a * S + b], hi = res->hi[a];
            fprintf(f,
                    "%s'< paste -d, %srho_q.csv %sg.csv' every ::%d::%d using 'rho_%s':'betaU_%s_%s' "
                    "with points pt 7 ps 0.5 title 'U_{%s-%s} against {/Symbol r}_{%s}', "
                    "'%sfits.csv' using 'rhofit_%s':'betaUline_%s_%s' with lines lw 2 notitle, "
                    "'%sfits.csv' using 'rhofit_%s':'betaUfit_%s_%s' with lines dt 2 lc 'gray' notitle",
                    first ? "" : ", ", P, P, lo, hi, nm[a], nm[a], nm[b], nm[a], nm[b], nm[a], P, nm[a],
                    nm[a], nm[b], P, nm[a], nm[a], nm[b]);
            first = 0;
        }
    fprintf(f, "\n");
    fclose(f);
    return 0;
}

/* The plots are drawn by the core once the results are committed
 * (host->plot): the script and the CSVs it reads are temporaries until
 * then, so running gnuplot from finish() found no files. */
static void run_gnuplot(pc *c)
{
    char gp[128];
    snprintf(gp, sizeof gp, "%spair_correlation.gp", c->prefix);
    c->host->plot(c->ctx, gp);
}

static void log_results(pc *c, const metro_es_result *res)
{
    static const char *keys[] = {"kappa_inv", "kappa_R_inv", "eps_R_over_eps", "eq8_lhs", "eq8_rhs",
                                 "eq8_diff", "stillinger_lovett", "u_ex", "u_ex_debye_huckel"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const metro_es_quantity *q = metro_es_find(res, keys[i]);
        if (q && isfinite(q->value))
            c->host->log(c->ctx, METRO_LOG_INFO, "%s = %.6g +- %.2g", q->name, q->value,
                         q->error);
    }
    for (int a = 0; a < c->sys.species; a++) {
        char nm[64];
        snprintf(nm, sizeof nm, "q_R_%s", c->sys.name[a]);
        const metro_es_quantity *q = metro_es_find(res, nm);
        if (q && isfinite(q->value))
            c->host->log(c->ctx, METRO_LOG_INFO, "%s = %.6g +- %.2g", q->name, q->value,
                         q->error);
        snprintf(nm, sizeof nm, "neutrality_%s", c->sys.name[a]);
        if ((q = metro_es_find(res, nm)) && isfinite(q->value))
            c->host->log(c->ctx, METRO_LOG_INFO, "%s = %.6g +- %.2g", q->name, q->value,
                         q->error);
    }
    if (res->warn[0]) c->host->log(c->ctx, METRO_LOG_WARN, "%s", res->warn);
}

/* Whether no ion was ever a central ion (the whole record tot): then
 * every estimate is 0/0, and the files would be all nan (kappa_inv inf)
 * with gnuplot failing on them as the only sign; said here instead, and
 * nothing written.  A species never central is named too: its g and ρ
 * rows are nan and its curves are left out of g.png. */
static int no_central(pc *c, const double *tot)
{
    const int S = c->sys.species;
    double all = 0.0;
    for (int a = 0; a < S; a++) {
        c->seen[a] = tot[METRO_PC_CENTRAL(S, a)] > 0;
        all += tot[METRO_PC_CENTRAL(S, a)];
    }
    const long n = metro_pc_accum_count(&c->acc);
    if (!(all > 0)) {
        c->host->log(c->ctx, METRO_LOG_WARN,
                     "no ion was ever a central ion: none of the %ld measurements found an ion centre within %g of "
                     "the cell's centre (cell radius %g less wall_margin %g), so there is no g(r) and nothing to "
                     "analyse; nothing written (lower wall_margin)",
                     n, c->sys.r_int, c->cell_radius, c->margin);
        return 1;
    }
    for (int a = 0; a < S; a++)
        if (c->sys.count[a] > 0 && !(tot[METRO_PC_CENTRAL(S, a)] > 0))
            c->host->log(c->ctx, METRO_LOG_WARN,
                         "no %s ion was ever a central ion (within %g of the centre) in %ld measurements: its g and "
                         "rho rows are nan",
                         c->sys.name[a], c->sys.r_int, n);
    return 0;
}

/* The sum rules are integrals to infinity; the CSV's are sums over the
 * bins, up to r_max.  A screened tail ρ ∝ e^{-κr}/r beyond r_max holds the
 * fraction e^{-x}(1 + x) of the neutrality integral and e^{-x}(1 + x + x²/2
 * + x³/6) of the Stillinger–Lovett moment, x = κ r_max: at a few Debye
 * lengths the ratios come out well below their exact 1 by construction
 * (configs/electrolyte_dh_1to1.ini, r_max 3.2 Debye lengths: 0.40 of
 * Stillinger–Lovett's moment is within r_max, measured 0.43 +- 0.03), which
 * nothing said.  Estimated with the bare κ (the renormalised one is close);
 * said when either part exceeds PC_TAIL_NOTE. */
#define PC_TAIL_NOTE 0.02
static void truncation_note(pc *c, const metro_es_result *res)
{
    const metro_es_quantity *k = metro_es_find(res, "kappa_inv");
    if (!k || !(k->value > 0) || !isfinite(k->value)) return;
    const double rmax = c->sys.bins * c->sys.dr, x = rmax / k->value, e = exp(-x);
    const double t0 = e * (1 + x), t2 = e * (1 + x + x * x / 2 + x * x * x / 6);
    if (t0 > PC_TAIL_NOTE || t2 > PC_TAIL_NOTE)
        c->host->log(c->ctx, METRO_LOG_WARN,
                     "r_max = %g is %.3g Debye lengths (1/kappa = %.4g): the sum rules are integrated only up to it, "
                     "and a screened tail beyond it would hold %.2g%% of the neutrality integral and %.2g%% of the "
                     "Stillinger-Lovett moment, so neutrality_* and stillinger_lovett are expected near %.3g and %.3g, "
                     "not 1 (raise wall_margin and r_max to about 10 Debye lengths for the full sum rules)",
                     rmax, x, k->value, 100 * t0, 100 * t2, 1 - t0, 1 - t2);
}

/* Error bars the blocks cannot support are said to be, as the energy
 * observable says of its series (metro/stats.h): its binning reaches no
 * plateau below 2 x METRO_BINNING_MIN_BINS samples, and its jackknife
 * takes at least METRO_JACKKNIFE_MIN_BINS bins.  Here the jackknife runs
 * over the blocks, so the same floors: fewer measurements than the
 * energy's could ever trust, fewer blocks than its jackknife would use, or
 * blocks of one measurement each (successive measurements taken as
 * independent, whatever their correlation). */
static void short_run_note(pc *c, int B)
{
    const long n = metro_pc_accum_count(&c->acc);
    const char *why = NULL;
    if (B < METRO_JACKKNIFE_MIN_BINS)
        why = "too few blocks for a jackknife";
    else if (n < 2 * METRO_BINNING_MIN_BINS)
        why = "too few measurements for a binning plateau";
    else if (n < 2L * B)
        why = "blocks of one measurement each leave the correlation between measurements out";
    if (why)
        c->host->log(c->ctx, METRO_LOG_WARN,
                     "%ld measurements in %d blocks: the run is too short for its error bars: %s (the energy "
                     "observable's binning needs at least %d samples, its jackknife %d bins), so the errors of g.csv, rho_q.csv and "
                     "electrostatics.csv are likely too small; run longer (or measure more often)",
                     n, B, why, 2 * METRO_BINNING_MIN_BINS, METRO_JACKKNIFE_MIN_BINS);
}

static int finish(void *self, const metro_state *st)
{
    pc *c = self;
    const int S = c->sys.species, bins = c->sys.bins;
    const size_t R = c->acc.rec;
    if (metro_pc_accum_count(&c->acc) == 0) {
        c->host->log(c->ctx, METRO_LOG_WARN, "no measurements, nothing written");
        return 0;
    }
    double *blk = malloc((size_t)2 * c->acc.blocks * R * sizeof(double));
    double *tot = calloc(R, sizeof(double)), *one = malloc(R * sizeof(double)), *W = NULL;
    int B = 0, rc = -1;
    metro_pc_profile full, *loo = NULL;
    memset(&full, 0, sizeof full);
    if (!blk || !tot || !one) goto oom;
    B = metro_pc_accum_blocks(&c->acc, blk);
    for (int j = 0; j < B; j++)
        for (size_t i = 0; i < R; i++) tot[i] += blk[(size_t)j * R + i];
    if (no_central(c, tot)) {
        rc = 0;
        goto done;
    }
    loo = calloc((size_t)B, sizeof *loo);
    W = metro_pc_weights(&c->sys, tot);
    if (!loo || !W || metro_pc_profile_alloc(&full, S, bins)) goto oom;
    metro_pc_profile_from(&full, &c->sys, tot, W);
    for (int j = 0; j < B; j++) {
        if (metro_pc_profile_alloc(&loo[j], S, bins)) goto oom;
        for (size_t i = 0; i < R; i++) one[i] = tot[i] - blk[(size_t)j * R + i];
        if (!(one[METRO_PC_CONF] > 0)) {
            /* a block holding every configuration: no replica without it */
            metro_pc_profile_free(&loo[j]);
            B = j;
            break;
        }
        /* the replica's own reference densities: the one-body profiles are
         * measured too, and a jackknife that kept the whole run's left
         * their noise out of every error (inside the hard core, where the
         * pair counts are 0 and rho is all profile, ~200x too small) */
        double *Wj = metro_pc_weights(&c->sys, one);
        if (!Wj) goto oom;
        metro_pc_profile_from(&loo[j], &c->sys, one, Wj);
        free(Wj);
    }
    metro_es_result res;
    if (metro_es_analyze(&full, loo, B, &c->es, &res)) goto oom;
    rc = write_csvs(c, &full, &res);
    if (!rc) rc = write_plots(c, &res);
    if (!rc && c->plots) run_gnuplot(c);
    log_results(c, &res);
    truncation_note(c, &res);
    short_run_note(c, B);
    metro_es_free(&res);
    goto done;
oom:
    rc = c->host->fail(c->ctx, "pair_correlation: out of memory in finish");
done:
    metro_pc_profile_free(&full);
    for (int j = 0; loo && j < B; j++) metro_pc_profile_free(&loo[j]);
    free(loo);
    free(blk);
    free(tot);
    free(one);
    free(W);
    return rc;
}

/* ---- save / restore ------------------------------------------------------ */

typedef struct pc_saved {
    uint32_t magic, version;
    int32_t species, bins, blocks, used;
    int64_t per, fill, rec;
    double dr, r_int;
} pc_saved;

static int save(void *self)
{
    pc *c = self;
    pc_saved h = {PC_SAVE_MAGIC, PC_SAVE_VERSION, c->sys.species, c->sys.bins, c->acc.blocks,
                  c->acc.used, c->acc.per, c->acc.fill, (int64_t)c->acc.rec, c->sys.dr, c->sys.r_int};
    if (c->host->save_bytes(c->ctx, &h, sizeof h)) return -1;
    return c->host->save_bytes(c->ctx, c->acc.data, (size_t)c->acc.used * c->acc.rec * sizeof(double));
}

static int restore(void *self, const void *data, size_t size)
{
    pc *c = self;
    pc_saved h;
    if (size < sizeof h) return c->host->fail(c->ctx, "pair_correlation: checkpoint too short");
    memcpy(&h, data, sizeof h);
    if (h.magic != PC_SAVE_MAGIC || h.version != PC_SAVE_VERSION)
        return c->host->fail(c->ctx, "pair_correlation: not a pair_correlation checkpoint of version %u",
                             PC_SAVE_VERSION);
    if (h.species != c->sys.species || h.bins != c->sys.bins || h.blocks != c->acc.blocks ||
        h.dr != c->sys.dr || h.r_int != c->sys.r_int || h.rec != (int64_t)c->acc.rec)
        return c->host->fail(c->ctx,
                             "pair_correlation: the checkpoint has %d species, %d bins of %g, %d blocks, "
                             "interior radius %g; the config now gives %d, %d of %g, %d, %g",
                             h.species, h.bins, h.dr, h.blocks, h.r_int, c->sys.species, c->sys.bins,
                             c->sys.dr, c->acc.blocks, c->sys.r_int);
    if (h.used < 0 || h.used > 2 * c->acc.blocks ||
        size != sizeof h + (size_t)h.used * c->acc.rec * sizeof(double))
        return c->host->fail(c->ctx, "pair_correlation: checkpoint of the wrong size");
    memset(c->acc.data, 0, (size_t)2 * c->acc.blocks * c->acc.rec * sizeof(double));
    memcpy(c->acc.data, (const char *)data + sizeof h, (size_t)h.used * c->acc.rec * sizeof(double));
    c->acc.used = h.used;
    c->acc.per = h.per;
    c->acc.fill = h.fill;
    return 0;
}

/* What a measurement allocates for n particles: the central list
 * (create()'s), and the cell list on the host (pc_accum.c: positions in
 * cell order, the cell of each, two flags, the cells' starts and fill
 * counts, the central ions' places and cells) and its copy on the device,
 * or the central list the all-pairs kernel reads. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    pc *c = self;
    const size_t n = (size_t)(setup->particles > 0 ? setup->particles : 0);
    /* at most about 2n cells: (floor(cbrt(2n + 1)) + 1)^3 where that cap binds */
    const size_t side = (size_t)cbrt(2.0 * (double)n + 1.0) + 1, cells = side * side * side + 1;
    *host = n * sizeof(int) +
            (c->sys.psi ? 0 : n * (sizeof(metro_float4) + 3 * sizeof(int) + 2) + 2 * cells * sizeof(int));
    *device = !c->use_gpu ? 0
              : c->sys.psi ? n * sizeof(int)
                           : n * (sizeof(metro_float4) + 2 * sizeof(int)) + cells * sizeof(int);
    return 0;
}

/* the fit windows and their signal-to-error ratio are read only by the
 * analysis in finish(), from the saved blocks (restore() keeps them): a
 * finished run is fitted again by `metro analyze RUNDIR --set ...` */
static const char *const resumable[] = {"fit_rmin", "fit_rmax", "snr", NULL};

static const metro_observable_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .measure = measure,
    .finish = finish,
    .save = save,
    .restore = restore,
    .memory = memory,
    .resumable = resumable,
};

METRO_PLUGIN(observable, "pair_correlation", "1.0.0",
             "g_ab(r) of ions far from the wall, charge densities, renormalised electrostatics (seed 002 §5)",
             params, api)
