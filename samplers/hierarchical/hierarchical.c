/* hierarchical — sequential-updating Metropolis for charged hard spheres
 * that makes, from the same random numbers, exactly the decisions of the
 * brush sampler's CPU path (the sequential reference; reference = float)
 * or of the exact sum on the float positions (reference = exact), without
 * summing over every partner for every move (DESIGN.md in this folder).
 *
 * A cycle is brush's: every particle in index order tries one move, a
 * displacement uniform in the cube of side D around it (brush.h's trial,
 * the same uniforms u[4i..4i+3]).  The reference accepts iff
 * metro_accept(ΔE_ref, u) with ΔE_ref coulomb_hs's delta() (float pair
 * energies summed in double).  Here ΔE is enclosed from an octree: near
 * partners summed as the reference sums them, far cells through solid-
 * harmonic multipole moments of order `order`, with a rigorous bound on the
 * truncation (from the cells' own moment norms) and on every rounding by
 * which ΔE_ref may differ from the exact sum.  When the enclosure lies on
 * one side of the threshold -ln u the decision is the reference's;
 * otherwise the move is looked at again at order `order_refine` (0.85
 * theta), then with the opening parameter halved (`refine` looks in all);
 * a move that only the reference's own float rounding leaves open, or one
 * still undecided, gets the exact pass (every partner's float terms, the
 * reference's bits, summed in our order), and if even that cannot decide
 * the reference's own delta() does.  Hard-core overlaps and the wall are tested with coulomb_hs's
 * own float expressions.
 *
 * reference = exact (DESIGN.md, "The exact chain"): the target is the
 * exact sum, so the floor is only the rounding of the float terms summed
 * directly in the first look; the refinements sum those in double, the
 * exact pass is in double (hier_exact_ideal) and the last resort a
 * long-double sum (hier_ideal_reference).  audit = true checks every CPU
 * decision against that long-double sum.
 *
 * Needs (checked in create() and start()): a potential that declares a
 * Bjerrum length, species with charges and diameters and a spherical cell
 * (metro_setup), has no bonds, and whose device parameter block is
 * coulomb_hs_params with those values (coulomb_hs itself): the pair energy
 * must be λ_B z_a z_b / r with hard cores, which the bounds assume.
 *
 * On CUDA (hier_gpu.c, hierarchical.cu; DESIGN.md "The GPU path") the same
 * decisions come from batches of `batch` trials enclosed in parallel and
 * decided in order; with refine > 0 the trials the first look leaves near
 * their threshold get one refined look (order_refine at 0.85 theta; 0.7
 * theta under reference = exact), and
 * what that leaves open goes to the exact pass (the further stages,
 * `tolerance` and `threads` are the CPU's).
 *
 * Parameters:
 *   step = 0       D, the side of the trial cube (brush's meaning; 0 = 2R/3)
 *   order = 10     highest multipole order of the far cells at a move's first
 *                  look (the CPU's best; on CUDA 8 is faster: 2^20 -4%,
 *                  2^23 -5%, bench/NOTES.md, seventh session; the chain is
 *                  the same either way)
 *   order_refine = 12  the same for the refinements (>= order; 0 ... 12)
 *   tolerance = 0  first look: each far cell takes the lowest order whose
 *                  rigorous truncation bound is within this fraction of
 *                  A/(d - rho) (its Σ|z| over its distance), up to `order`;
 *                  0: always `order`.  (1e-4 measured 10% faster per move
 *                  at N = 2^18, within this machine's noise, and the running
 *                  energy wanders 3x more: off by default.)
 *   tolerance_refine = 0  the same for the refinements
 *   theta = 0.65   opening parameter: a cell of radius rho at distance d is
 *                  far when rho <= theta d (and beyond the hard cores)
 *   refine = 2     undecided moves are retried this many times, first at
 *                  order_refine with theta 0.85x, then with theta halved
 *                  each time, before an exact pass of every partner's float
 *                  terms and, still undecided, the reference's delta();
 *                  further halvings (up to 7 looks) while the next look,
 *                  about 8x the last, costs less than that O(N) pass
 *   leaf = 32      particles per leaf cell, about (sets the depth; larger
 *                  leaves keep fewer moment levels, which stay in cache)
 *   direct_max = 32  far cells of the two finest levels holding at most this
 *                  many particles are summed directly (cheaper than an
 *                  expansion, and exact)
 *   trials = 0     particles that try a move per cycle, from index 0 (0:
 *                  all); partial cycles are for timing, as in brush
 *   threads = 1    OpenMP threads for a move's two enclosures (trial and
 *                  old position); 0: all cores.  A fork per move: on cores
 *                  busy with other work the second thread waits for the
 *                  scheduler and a move costs 10x more (bench/NOTES.md)
 *   energy = auto  the energies the core starts from and checks against
 *                  (total(), ABI 5): the tree's sum (O(N log N), within a
 *                  bound it logs), the core's direct sum (O(N^2)), or auto:
 *                  the tree where the direct sum would take over a second
 *   reference = float  whose decisions: brush's CPU loop's (float), or the
 *                  exact sum's on the float positions (exact)
 *   audit = false  device = cpu: each decision checked against the
 *                  long-double sum (O(N^2))
 *   bound_scale = 1  multiplies the bound; 1 is the rigorous value.  Below 1
 *                  the guarantee is gone: for the tests that show a broken
 *                  bound is caught.
 *
 * Bookkeeping as brush: st->energy[0] += each accepted ΔE (the enclosure's
 * centre, or the reference's value where it decided; an enclosure too
 * coarse for the energy, hier_energy_wide, is looked at again first),
 * acceptance.csv per cycle, save()/restore() of the cycle count, that
 * history, the uniforms drawn ahead and the summary's counts; finish() logs
 * how many moves each stage decided, over the whole run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "metro/plugin.h"

#include "brush.h"
#include "coulomb_hs.h"
#include "hier_tree.h"
#include "hier_gpu_host.h"
#include "brush_cycles.h" /* brush's history and uniform pool: the same stream, consumed alike */

#define HIER_MAX_STAGES 8

typedef struct hier {
    const metro_host_api *host;
    metro_ctx *ctx;
    double step_param;
    int order, order_hi, refine, leaf, threads, direct_max;
    double tol, tol_refine;
    double theta, bound_scale;
    long trials;
    char energy;                 /* 'a'uto, 't'ree or 'd'irect: total() */
    int ideal;                   /* reference = exact: the exact sum's decisions (DESIGN.md, "The exact chain") */
    int audit;                   /* every CPU decision checked against the long-double sum */
    float step;
    double cell_radius, dmax;
    int nspecies;
    metro_species species[METRO_MAX_SPECIES];
    double bjerrum;
    /* start() */
    metro_state *st;
    const metro_potential_api *pot;
    void *pot_self;
    coulomb_hs_params prm;
    hier_tree tree;
    int have_tree;
    int n;
    long long cycles;
    brush_cycles cyc;            /* acceptance history and uniforms drawn ahead, as brush keeps them */
    /* statistics since start: moves decided at stage s (wall and overlap
     * rejections count at stage 0), by the reference, all moves */
    long long stage[HIER_MAX_STAGES], exact, fallback, wall, overlap, moves;
    long long cells, direct;
    long long energy_looks; /* accepted moves whose energy change was looked at again (energy_change) */
    long long counts_from;  /* the cycle these counts begin at: 0, or a restart from a checkpoint without them */
    long long restarted_at; /* the cycle this process resumed at (0: a fresh run): where the seconds begin */
    long long audit_diff, audit_open; /* audit: decisions other than the exact sum's, and too close to tell */
    /* CUDA: the device path (hier_gpu.c), its batch, and whether the tree
     * must be built from the positions before the next cycle */
    hier_gpu *gpu;
    int batch, gpu_dirty;
    hier_gpu_stats gstats;
    double t_rebuild, t_moves; /* seconds spent rebuilding the tree and moving */
    double c_rebuild, c_moves; /* the same in CPU time of the process */
} hier;

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of the whole process (every thread): on a machine shared with
 * other work, the cost of the computation itself. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const metro_param_decl params[] = {
    {"step", METRO_PARAM_REAL, "0", 0, 1e9, NULL, "length",
     "side D of the trial cube around a particle (0: 2/3 of the cell radius), as brush"},
    {"order", METRO_PARAM_INT, "10", 0, HIER_MAX_ORDER, NULL, "",
     "highest multipole order of the far cells at a move's first look"},
    {"order_refine", METRO_PARAM_INT, "12", 0, HIER_MAX_ORDER, NULL, "",
     "highest multipole order of the refinements (at least order)"},
    {"tolerance", METRO_PARAM_REAL, "0", 0, 1, NULL, "",
     "first look: a far cell takes the lowest order whose truncation bound is within this fraction of its |charge|/distance (0: always order)"},
    {"tolerance_refine", METRO_PARAM_REAL, "0", 0, 1, NULL, "",
     "the same for the refinements (0: always order_refine)"},
    {"theta", METRO_PARAM_REAL, "0.65", 0.01, 0.9, NULL, "",
     "opening parameter: a cell is far when its radius is at most theta times its distance"},
    {"refine", METRO_PARAM_INT, "2", 0, HIER_MAX_STAGES - 1, NULL, "",
     "retries of an undecided move (order_refine at 0.85 theta, then theta halved) before the exact pass and the reference's direct sum, and more (theta halved, up to 7 looks) while a look costs less than the exact pass; CUDA: refine > 0 gives one refined look (0.85 theta, or 0.7 theta under reference = exact)"},
    {"leaf", METRO_PARAM_INT, "32", 1, 100000, NULL, "", "particles per leaf cell, about (within a factor 2.8: the nearest power of 8)"},
    {"direct_max", METRO_PARAM_INT, "32", 0, 1000000, NULL, "",
     "far cells (of the two finest levels) with at most this many particles are summed directly"},
    {"trials", METRO_PARAM_INT, "0", 0, 2147483647, NULL, "",
     "particles that try a move per cycle, from index 0 (0: all); partial cycles are for timing"},
    {"threads", METRO_PARAM_INT, "1", 0, 4096, NULL, "",
     "OpenMP threads for the two enclosures of a move (0: all cores; more than 1 pays only on idle cores)"},
    {"batch", METRO_PARAM_INT, "1024", 32, HG_MAX_BATCH, NULL, "",
     "CUDA: trials enclosed in parallel and then decided in order by one block (their mutual terms exact)"},
    {"energy", METRO_PARAM_CHOICE, "auto", 0, 0, "auto|tree|direct", "",
     "the energies the run starts from and checks: the tree's sum (O(N log N), within a bound it logs), the core's direct sum of every pair (O(N^2)), or auto: the tree where the direct sum would take more than about a second"},
    {"reference", METRO_PARAM_CHOICE, "float", 0, 0, "float|exact", "",
     "whose decisions the chain makes: float, brush's CPU loop's bit for bit (coulomb_hs's float pair energies; an O(N) exact pass wherever their rounding leaves a move open, a share growing as N^(2/3)); exact, those of the exact sum on the float positions (no float reference's rounding to match: far fewer exact passes, in double)"},
    {"audit", METRO_PARAM_BOOL, "false", 0, 0, NULL, "",
     "device = cpu: check every decision against the exact sum in long double (O(N^2), for tests and doubts); reference = exact stops at the first that differs, reference = float counts how often brush's float decision is not the exact sum's"},
    {"bound_scale", METRO_PARAM_REAL, "1", 0, 1e6, NULL, "",
     "factor on the rigorous error bound (1); below 1 decisions may differ from the reference: tests only"},
    METRO_PARAM_END};

static int create(const metro_host_api *host, metro_ctx *ctx, const metro_params *p, metro_setup *setup,
                  void **self)
{
    if (setup->backend == METRO_BACKEND_CUDA && host->param_bool(p, "audit"))
        return host->fail(ctx, "hierarchical: audit is for device = cpu (it sums every pair on the host for every "
                               "move); on CUDA compare with a CPU run of the same seed instead");
    if (setup->backend == METRO_BACKEND_CUDA &&
        (host->param_real(p, "tolerance") > 0 || host->param_real(p, "tolerance_refine") > 0))
        return host->fail(ctx, "hierarchical: tolerance and tolerance_refine are for device = cpu; on CUDA every far "
                               "cell takes `order` (leave them 0)");
    double lb = 0, R = 0;
    int has_lb = host->fact(ctx, "bjerrum", &lb), has_r = host->fact(ctx, "cell_radius", &R);
    if (setup->terms != 1 || !has_lb || !(lb > 0) || setup->species < 1 || !has_r || !(R > 0) ||
        setup->topology.chains)
        return host->fail(ctx,
                          "hierarchical: the energy must be one Coulomb term of charged hard spheres in a spherical "
                          "cell alone (a Bjerrum length, species with charges and diameters, a cell radius, no "
                          "bonds, no other terms), as coulomb_hs is: its far field is the bare Coulomb sum; this run "
                          "has %d term(s), bjerrum = %g, %d species, cell radius %g, %s",
                          setup->terms, lb, setup->species, R, setup->topology.chains ? "bonds" : "no bonds");
    hier *b = calloc(1, sizeof *b);
    if (!b) return host->fail(ctx, "out of memory");
    b->host = host;
    b->ctx = ctx;
    b->cyc = (brush_cycles){.host = host, .ctx = ctx, .who = "hierarchical"};
    b->step_param = host->param_real(p, "step");
    b->order = (int)host->param_int(p, "order");
    b->order_hi = (int)host->param_int(p, "order_refine");
    b->tol = host->param_real(p, "tolerance");
    b->tol_refine = host->param_real(p, "tolerance_refine");
    b->theta = host->param_real(p, "theta");
    b->refine = (int)host->param_int(p, "refine");
    b->leaf = (int)host->param_int(p, "leaf");
    b->direct_max = (int)host->param_int(p, "direct_max");
    b->trials = host->param_int(p, "trials");
    b->threads = (int)host->param_int(p, "threads");
    b->bound_scale = host->param_real(p, "bound_scale");
    b->batch = (int)host->param_int(p, "batch");
    b->energy = host->param_string(p, "energy")[0];
    b->ideal = strcmp(host->param_string(p, "reference"), "exact") == 0;
    b->audit = host->param_bool(p, "audit");
    b->cell_radius = R;
    b->bjerrum = lb;
    b->nspecies = setup->species;
    memcpy(b->species, setup->species_table, sizeof b->species);
    for (int s = 0; s < b->nspecies; ++s) b->dmax = fmax(b->dmax, setup->species_table[s].diameter);
    b->step = (float)(b->step_param > 0 ? b->step_param : 2.0 * R / 3.0);
    if (b->order_hi < b->order) {
        host->fail(ctx, "order_refine: %d is below order = %d", b->order_hi, b->order);
        free(b);
        return -1;
    }
    if (b->trials > setup->particles) {
        host->fail(ctx, "trials: %ld is more than the %d particles", b->trials, setup->particles);
        free(b);
        return -1;
    }
    setup->replicas = 1;
    *self = b;
    return 0;
}

static void destroy(void *self)
{
    hier *b = self;
    if (!b) return;
    if (b->have_tree) hier_tree_free(&b->tree);
    hier_gpu_free(b->gpu);
    brush_cycles_free(&b->cyc);
    free(b);
}

/* The depth: leaves of about `leaf` particles, counting only the ball's
 * share (pi/6) of the cube; the nearest power of 8 (so a leaf holds between
 * leaf / 2.8 and 2.8 leaf particles). */
static int leaf_level(int n, int leaf)
{
    double want = 6.0 * (double)n / (M_PI * (double)leaf);
    int L = want > 1.0 ? (int)floor(log(want) / log(8.0) + 0.5) : 0;
    return L < 0 ? 0 : L > HIER_MAX_LEVEL ? HIER_MAX_LEVEL : L;
}

/* How the particles are numbered, as this sampler feels it: the mean
 * distance between index neighbours among the first 8192, over its value
 * for points at random in the cell (36 R / 35 in a ball of radius R).
 * About 1 for the placement's numbering; small along a space-filling curve
 * ([system] numbering = space, or a file from a code that sorts its atoms
 * in space). */
static double neighbour_ratio(const metro_float4 *p, int n, double R)
{
    const int m = n < 8192 ? n : 8192;
    if (m < 2 || !(R > 0)) return 1.0;
    double s = 0.0;
    for (int i = 1; i < m; ++i) {
        const double dx = (double)p[i].x - p[i - 1].x, dy = (double)p[i].y - p[i - 1].y, dz = (double)p[i].z - p[i - 1].z;
        s += sqrt(dx * dx + dy * dy + dz * dz);
    }
    return s / (m - 1) / (36.0 * R / 35.0);
}

/* On CUDA a batch's mates that are neighbours in space cost time: their
 * mutual terms are large, and most trials take the refined look (1.4-1.7x
 * slower a cycle from 2^20, bench/NOTES.md, "Numbering along a curve").
 * Said where it happens, whatever numbered them so. */
static void numbering_warning(const hier *b, const metro_state *st)
{
    const double r = neighbour_ratio(st->pos, b->n, b->cell_radius);
    if (b->n >= 2 * b->batch && r < 0.5)
        b->host->log(b->ctx, METRO_LOG_WARN,
                     "index neighbours lie close together (%.2g of the distance at random): on CUDA a batch's mates "
                     "are then neighbours and most trials take the refined look, 1.4-1.7x slower a cycle from 2^20 "
                     "than numbered at random ([system] numbering = placed, the default, for a placed system)",
                     r);
}

static int start(void *self, metro_state *st, const metro_potential_api *pot, void *pot_self)
{
    hier *b = self;
    b->st = st;
    b->pot = pot;
    b->pot_self = pot_self;
    b->n = st->particles;
    st->beta[0] = 1.0;
    st->slot_replica[0] = 0;
    if (st->replicas != 1) return b->host->fail(b->ctx, "hierarchical runs one replica, not %d", st->replicas);
    size_t size = 0;
    const void *blk = pot->device_params ? pot->device_params(pot_self, &size) : NULL;
    if (!blk || size != sizeof(coulomb_hs_params))
        return b->host->fail(b->ctx,
                             "hierarchical: the potential's parameter block (%zu bytes) is not coulomb_hs's "
                             "(%zu bytes); this sampler needs coulomb_hs's pair energy and hard cores",
                             size, sizeof(coulomb_hs_params));
    memcpy(&b->prm, blk, sizeof b->prm);
    int same = b->prm.nspecies == b->nspecies;
    for (int s = 0; same && s < b->nspecies; ++s) {
        const metro_species *sp = &b->species[s];
        same = b->prm.sp[s].x == (float)sp->charge && b->prm.sp[s].y == (float)(sp->diameter / 2) &&
               b->prm.sp[s].z == (float)(b->bjerrum * sp->charge);
    }
    if (!same)
        return b->host->fail(b->ctx, "hierarchical: the potential's parameter block does not hold the charges, "
                                     "radii and Bjerrum length it declared: not coulomb_hs's layout");
    /* the cube around the cell, a little wider so no centre sits on its
     * faces */
    const double Rt = b->cell_radius * (1.0 + 1e-6);
    const int L = leaf_level(b->n, b->leaf);
    if (st->backend == METRO_BACKEND_CUDA) {
        const hier_gpu_cfg cfg = {.prm = b->prm, .pot = pot, .pot_self = pot_self, .L = L, .order = b->order,
                                  .order_hi = b->order_hi, .direct_max = b->direct_max, .batch = b->batch, .refine = b->refine, .Rt = Rt,
                                  .theta = b->theta, .dcut = b->dmax * 1.001 + 1e-6, .bound_scale = b->bound_scale,
                                  .step = b->step, .ideal = b->ideal};
        if (hier_gpu_create(b->host, b->ctx, &cfg, st, &b->gpu)) return -1;
        b->gpu_dirty = 1;
        b->host->log(b->ctx, METRO_LOG_INFO,
                     "%d levels (leaves of %.3g Å), order %d, theta %g, batches of %d; CUDA", L,
                     2.0 * Rt / (double)(1 << L), b->order, b->theta, b->batch);
        numbering_warning(b, st);
        return 0;
    }
    if (hier_tree_init(&b->tree, st->pos, b->n, &b->prm, b->order_hi, b->order, L, Rt)) {
        hier_tree_free(&b->tree);
        return b->host->fail(b->ctx, "hierarchical: out of memory for the tree");
    }
    b->have_tree = 1;
    b->tree.direct_max = b->direct_max;
    b->tree.tol[0] = b->tol;
    b->tree.tol[1] = b->tol_refine;
    b->host->log(b->ctx, METRO_LOG_INFO,
                 "%d levels (leaves of %.3g Å), order %d, theta %g, %d refinements; CPU", b->tree.L,
                 b->tree.h[b->tree.L], b->order, b->theta, b->refine);
    return 0;
}

/* The rounding allowances (DESIGN.md, "The error bound"):
 *   hier_ref_float (hier_math.h): each float term of a move of species a
 *   is within (5.5u + |δ_ab|)(1 + 1e-6) of the exact λ z_a z_b / r of its
 *   float operands, u = 2^-24, δ_ab the prefactor's own rounding, known
 *   exactly (proof in DESIGN.md).  Charged only on the far partners: the
 *   near ones are summed as the reference's own float terms.
 *   ref_sum: the reference's double differences and its double sum of up to
 *   n + 2 terms in any order (OpenMP's reduction order included);
 *   ours: the far cells' expansions and moments (Er) and the sums
 *   (hier_own, hier_tree.h): proven bounds, DESIGN.md part (c). */
static double ref_sum(int n)
{
    return ((double)n + 4.0) * 0x1p-53 * 1.01;
}

/* The opening parameter of a look's stage: stage 0 the first look's
 * theta; stage 1 (order_refine) 0.85 of it, which also opens the cells a
 * little further (the Legendre tail beyond the stored degrees, which
 * bounds what the moments' norms do not, falls as (rho/d)^15); later
 * stages theta halved each time. */
static double stage_theta(const hier *b, int stage)
{
    return stage == 0 ? b->theta : stage == 1 ? b->theta * HIER_THETA_REFINE : b->theta * ldexp(1.0, 1 - stage);
}

/* One enclosure of both points at opening parameter theta. */
static void enclose(hier *b, metro_float4 t, metro_float4 o, int i, double theta, int hi, int dbl, hier_result *rt,
                    hier_result *ro)
{
    const double dcut = b->dmax * 1.001 + 1e-6;
#ifdef _OPENMP
    int nt = b->threads > 0 ? b->threads : omp_get_max_threads();
    if (nt >= 2) {
#pragma omp parallel sections num_threads(2)
        {
#pragma omp section
            hier_eval(&b->tree, t, i, o, theta, dcut, 1, hi, dbl, rt);
#pragma omp section
            hier_eval(&b->tree, o, i, o, theta, dcut, 0, hi, dbl, ro);
        }
        /* as one thread leaves it: an overlap or a coincidence at the trial
         * needs no old place, so its look counts nothing (the summary's
         * counts, which the checkpoint keeps, are then the same for every
         * thread count, as the chain is) */
        if (rt->overlap || rt->degenerate) memset(ro, 0, sizeof *ro);
        return;
    }
#endif
    hier_eval(&b->tree, t, i, o, theta, dcut, 1, hi, dbl, rt);
    if (!rt->overlap && !rt->degenerate) hier_eval(&b->tree, o, i, o, theta, dcut, 0, hi, dbl, ro);
    else memset(ro, 0, sizeof *ro);
}

/* CUDA: a cycle's uniforms as brush's CUDA path takes them (those a CPU
 * checkpoint left drawn ahead first), then the cycle on the device. */
static int advance_cuda(hier *b, metro_state *st, long sweeps)
{
    const size_t per = (size_t)b->n * BRUSH_UNIFORMS_PER_PARTICLE;
    const int trials = b->trials ? (int)b->trials : b->n;
    if (b->gpu_dirty) {
        const double t0 = seconds_now();
        if (hier_gpu_rebuild(b->gpu)) return -1;
        b->t_rebuild += seconds_now() - t0;
        b->gpu_dirty = 0;
    }
    for (long s = 0; s < sweeps; ++s) {
        float *dst = (float *)hier_gpu_uniforms(b->gpu);
        if (b->cyc.pool_n - b->cyc.pool_pos >= per) {
            if (b->host->cuda(b->ctx, cudaMemcpyAsync(dst, b->cyc.pool + b->cyc.pool_pos, per * sizeof(float),
                                                      cudaMemcpyHostToDevice, hier_gpu_stream(b->gpu)),
                              "hierarchical: uploading uniforms"))
                return -1;
            b->cyc.pool_pos += per;
        } else if (b->host->uniform(b->ctx, dst, per)) {
            return -1;
        }
        const double t0 = seconds_now();
        long long acc = 0;
        if (hier_gpu_cycle(b->gpu, st, b->cycles + 1, trials, &b->gstats, &acc)) return -1;
        b->t_moves += seconds_now() - t0;
        b->moves += trials;
        st->accepted[0] += acc;
        st->attempted[0] += trials;
        b->cycles++;
        if (brush_cycles_push(&b->cyc, acc)) return -1;
    }
    return 0;
}

/* reference = exact: a move that even the long-double sum cannot tell
 * from its threshold (never seen: it would need |ΔE + ln u| below about
 * 10^-18 of Φ).  The run stops rather than decide it some other way. */
int hier_undecidable(const metro_host_api *host, metro_ctx *ctx, long long cycle, int i, double de, float u)
{
    return host->fail(ctx,
                      "hierarchical: reference = exact: cycle %lld, particle %d: ΔE = %.17g lies within the "
                      "long-double sum's rounding of the threshold -ln u = %.17g; this decision cannot be "
                      "certified (please report it); reference = float decides it as brush does",
                      cycle, i, de, -log((double)u));
}

/* audit = true: the decision against the exact sum's (hier_ideal_reference,
 * every pair in long double).  reference = exact must agree always; under
 * reference = float a difference is the float reference's own rounding,
 * counted and logged. */
static int audit(hier *b, const metro_float4 *pos, int i, metro_float4 t, float u, int accept)
{
    double xde;
    const int x = hier_ideal_reference(&b->prm, pos, b->n, i, t, u, &xde);
    if (x < 0) {
        b->audit_open++;
    } else if (x != accept) {
        b->audit_diff++;
        if (b->ideal)
            return b->host->fail(b->ctx,
                                 "hierarchical: audit: cycle %lld, particle %d: %s, but the exact sum says %s (ΔE = "
                                 "%.17g, -ln u = %.17g)",
                                 b->cycles + 1, i, accept ? "accepted" : "rejected", x ? "accept" : "reject", xde,
                                 -log((double)u));
    }
    return 0;
}

/* The energy change of an accepted move whose deciding enclosure (stage
 * `from`) is too coarse for the running energy (hier_energy_wide): the
 * later stages' looks, as a decision would have taken them, until one is
 * narrow enough, else the exact pass's sum (the reference's terms), else
 * the reference's own value.  Only the energy: the decision is made. */
static void energy_change(hier *b, const metro_float4 *pos, metro_float4 t, metro_float4 o, int i, int from, int last,
                          double *de)
{
    b->energy_looks++;
    const double lz = (double)b->prm.sp[coulomb_hs_species(o.w)].z;
    for (int stage = from + 1; stage <= last; ++stage) {
        const double theta = stage_theta(b, stage);
        hier_result rt, ro;
        enclose(b, t, o, i, theta, 1, b->ideal, &rt, &ro);
        b->cells += rt.cells + ro.cells;
        b->direct += rt.direct + ro.direct;
        if (rt.overlap || rt.degenerate || ro.degenerate) break;
        if (!hier_energy_wide(rt.E + ro.E, rt.Phif + ro.Phif)) {
            *de = (rt.Sf - ro.Sf) + lz * (rt.S - ro.S);
            return;
        }
    }
    double sum = 0.0, abs_sum = 0.0, path = 0.0;
    const int rc = b->ideal ? hier_exact_ideal(&b->tree, t, o, i, &sum, &abs_sum, &path)
                            : hier_exact(&b->tree, t, o, i, &sum, &abs_sum);
    if (rc == 0) {
        *de = sum;
    } else if (b->ideal) {
        /* a coincidence: the long-double sum's value (its decision, on
         * some u, is not asked for: the move's is made) */
        (void)hier_ideal_reference(&b->prm, pos, b->n, i, t, 0.5f, de);
    } else {
        *de = b->pot->delta(b->pot_self, pos, b->n, i, t);
    }
}

static int advance(void *self, metro_state *st, long sweeps)
{
    hier *b = self;
    if (st->backend == METRO_BACKEND_CUDA) return advance_cuda(b, st, sweeps);
    const int n = b->n;
    const int trials = b->trials ? (int)b->trials : n;
    metro_float4 *pos = st->pos;
    const double ksum = ref_sum(n);
    b->tree.pos = pos;
    for (long s = 0; s < sweeps; ++s) {
        const float *uc = brush_cycles_uniforms(&b->cyc, b->n);
        if (!uc) return -1;
        const double t0 = seconds_now(), c0 = cpu_now();
        hier_tree_rebuild(&b->tree);
        const double t1 = seconds_now(), c1 = cpu_now();
        long long acc = 0;
        for (int i = 0; i < trials; ++i) {
            const float *u = uc + (size_t)BRUSH_UNIFORMS_PER_PARTICLE * i;
            const metro_float4 o = pos[i];
            const metro_float4 t = brush_trial(o, u[0], u[1], u[2], b->step);
            b->moves++;
            if (coulomb_hs_external(&b->prm, t) != 0.0f) { /* the reference: +inf, rejected */
                b->wall++;
                b->stage[0]++;
                continue;
            }
            const int sa = coulomb_hs_species(o.w);
            const double lz = (double)b->prm.sp[sa].z; /* λ z_a as the reference has it */
            const double reff = hier_ref_float(&b->prm, sa), ks = b->ideal ? 0.0 : ksum;
            const double T = -log((double)u[3]);
            const double dT = 1e-12 * (1.0 + T);
            int decided = 0, accept = 0;
            double de = 0.0;
            /* stage 0: order `order`; stage 1: order `order_refine`
             * (stage_theta: the opening of each) */
            int hopeless = 0; /* the reference's own rounding alone leaves the move open */
            int last = b->refine; /* the last stage, raised while a look is cheaper than the exact pass */
            for (int stage = 0; stage <= last && !decided && !hopeless; ++stage) {
                const double theta = stage_theta(b, stage);
                hier_result rt, ro;
                /* reference = exact: the refinements sum their near
                 * partners in double, so their floor is double rounding */
                const int dbl = b->ideal && stage > 0;
                enclose(b, t, o, i, theta, stage > 0, dbl, &rt, &ro);
                b->cells += rt.cells + ro.cells;
                b->direct += rt.direct + ro.direct;
                if (rt.overlap) {
                    b->overlap++;
                    b->stage[stage]++;
                    decided = 1;
                    accept = 0;
                    break;
                }
                if (rt.degenerate || ro.degenerate) break; /* a coincidence: the reference decides */
                /* near partners: the reference's own float terms; far
                 * cells: λ z_a times the expansions */
                const double est = (rt.Sf - ro.Sf) + lz * (rt.S - ro.S);
                /* what no refinement of the far field removes: the
                 * reference's float rounding of the far partners' terms and
                 * of the double sums */
                const double floor = hier_floor(b->ideal, fabs(lz), dbl ? HIER_EXACT_TERM : reff, ks, rt.Phid + ro.Phid,
                                                rt.Phif + ro.Phif, rt.Phi + ro.Phi);
                const double rest = fabs(lz) * (rt.E + ro.E + hier_own(&rt) + hier_own(&ro));
                const int d = hier_decide(est, b->bound_scale * (floor + rest) * (1.0 + 1e-9), T, dT);
                if (d != 2) {
                    decided = 1;
                    accept = d;
                    b->stage[stage]++;
                    de = est;
                    /* the running energy adds this centre: from an
                     * enclosure too coarse for it, a narrower one's */
                    if (d == 1 && hier_energy_wide(rt.E + ro.E, rt.Phif + ro.Phif))
                        energy_change(b, pos, t, o, i, stage, last, &de);
                } else {
                    /* with the truncation gone the enclosure would still
                     * straddle the threshold: refining cannot decide (up to
                     * the few far partners a smaller theta makes near).
                     * What cannot go is the floor of the next stage, not of
                     * this one: under reference = exact the first look's
                     * float near terms (f_a Φ_d) give way to double ones
                     * (HIER_EXACT_TERM Φ_d) in every refinement, and
                     * judging by the first look's floor sent ~10⁻⁵ of the
                     * moves to the O(N) exact pass that a refinement
                     * decides */
                    const double next = b->ideal && stage == 0
                                            ? hier_floor(1, fabs(lz), HIER_EXACT_TERM, ks, rt.Phi + ro.Phi, 0.0, 0.0)
                                            : floor;
                    hopeless = hier_decide(est, b->bound_scale * next * (1.0 + 1e-9), T, dT) == 2;
                    /* One more look with theta halved, while it costs less
                     * than the exact pass: it opens ~8x the cells and near
                     * partners of this one (a far cell at order 12 ~250 ns,
                     * a near partner ~1 ns, an exact pass ~2 ns a partner),
                     * and its truncation is ~2^-13 of this one's, so it
                     * decides nearly every move this one left.  Without it
                     * the exact passes' share grows with N (the undecided
                     * share after a fixed number of looks does), and their
                     * O(N) cost with it. */
                    const double work = (double)(rt.direct + ro.direct) + 250.0 * (double)(rt.cells + ro.cells);
                    if (stage == last && stage >= 1 && last + 1 < HIER_MAX_STAGES && 4.0 * work < (double)n) ++last;
                }
            }
            if (!decided) {
                /* float: every partner's float terms, exactly the
                 * reference's: only the order of the double sum differs,
                 * both sums within γ_(n+2) Σ|d_j| of the exact sum of the
                 * same terms.  exact: every term in double, within
                 * hier_ideal_eps of the exact sum */
                double sum = 0.0, abs_sum = 0.0, path = 0.0;
                const int rc = b->ideal ? hier_exact_ideal(&b->tree, t, o, i, &sum, &abs_sum, &path)
                                        : hier_exact(&b->tree, t, o, i, &sum, &abs_sum);
                if (rc == 0) {
                    const double eps = b->ideal ? hier_ideal_eps(sum, abs_sum, path, b->bound_scale)
                                                : hier_exact_eps(abs_sum, ksum, b->bound_scale);
                    const int d = hier_decide(sum, eps, T, dT);
                    if (d != 2) {
                        decided = 1;
                        accept = d;
                        b->exact++;
                        de = sum;
                    }
                }
            }
            if (!decided) {
                if (b->ideal) {
                    accept = hier_ideal_reference(&b->prm, pos, n, i, t, u[3], &de);
                    if (accept < 0) return hier_undecidable(b->host, b->ctx, b->cycles + 1, i, de, u[3]);
                } else {
                    de = b->pot->delta(b->pot_self, pos, n, i, t);
                    accept = metro_accept(de, u[3]);
                }
                b->fallback++;
            }
            if (b->audit && audit(b, pos, i, t, u[3], accept)) return -1;
            if (accept) {
                pos[i] = t;
                hier_tree_move(&b->tree, i, o);
                st->energy[0] += de;
                ++acc;
            }
        }
        b->t_rebuild += t1 - t0;
        b->t_moves += seconds_now() - t1;
        b->c_rebuild += c1 - c0;
        b->c_moves += cpu_now() - c1;
        st->accepted[0] += acc;
        st->attempted[0] += trials;
        b->cycles++;
        if (brush_cycles_push(&b->cyc, acc)) return -1;
    }
    return 0;
}

/* The CPU tree's total: each particle's first look at its own place (the
 * tree rebuilt from the positions first), U_i = Sf + λz_i S, summed as ½ Σ
 * U_i in index order whatever the number of threads. */
static int tree_total(hier *b, double *energy, double *bound, long long *bad)
{
    const int n = b->n;
    double *u = malloc(2 * (size_t)n * sizeof *u);
    if (!u) return b->host->fail(b->ctx, "hierarchical: out of memory for the energy");
    hier_tree_rebuild(&b->tree);
    const double dcut = b->dmax * 1.001 + 1e-6, ksum = ref_sum(n);
    long long nbad = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : nbad)
#endif
    for (int i = 0; i < n; ++i) {
        const metro_float4 x = b->st->pos[i];
        hier_result r;
        hier_eval(&b->tree, x, i, x, b->theta, dcut, 1, 0, 0, &r);
        /* a look too coarse for the energy (hier_energy_wide: a wide
         * theta, a low order, a tolerance) looked at again as a move's
         * refinements look: order_refine at 0.85 theta, then theta halved */
        for (int stage = 1; stage < HIER_MAX_STAGES && !r.overlap && !r.degenerate && hier_energy_wide(r.E, r.Phif);
             ++stage)
            hier_eval(&b->tree, x, i, x, stage_theta(b, stage), dcut, 1, 1, 0, &r);
        const double lz = (double)b->prm.sp[coulomb_hs_species(x.w)].z;
        u[2 * i] = r.Sf + lz * r.S;
        u[2 * i + 1] = hier_total_bound(fabs(lz), r.E + hier_own(&r), r.Phi, ksum);
        nbad += r.overlap || r.degenerate;
    }
    double e = 0.0, bd = 0.0;
    for (int i = 0; i < n; ++i) {
        e += u[2 * i];
        bd += u[2 * i + 1];
    }
    free(u);
    *energy = 0.5 * e;
    *bound = 0.5 * bd * (1.0 + 1e-9);
    *bad = nbad;
    return 0;
}

/* The energies the core starts from and checks against (ABI 5).  The
 * tree's sum differs from the direct sum of the reference's float pair
 * energies by its truncation and both sides' rounding: at most the bound
 * (DESIGN.md, "The energy"), in practice 10^-9 of it or less.  auto: the
 * tree where the direct sum would take more than about a second at the
 * core's measured rates (METRO_DIRECT_RATE_*). */
static int total(void *self, const metro_state *st, double *out)
{
    hier *b = self;
    const double pairs = 0.5 * (double)b->n * (double)b->n;
    const double rate = st->backend == METRO_BACKEND_CUDA ? METRO_DIRECT_RATE_CUDA : METRO_DIRECT_RATE_CPU;
    if (b->energy == 'd' || (b->energy == 'a' && pairs < rate)) return 1;
    double e = 0.0, bound = 0.0;
    long long bad = 0;
    const double t0 = seconds_now();
    if (st->backend == METRO_BACKEND_CUDA) {
        if (b->gpu_dirty && hier_gpu_rebuild(b->gpu)) return -1;
        b->gpu_dirty = 0;
        if (hier_gpu_total(b->gpu, &e, &bound, &bad)) return -1;
    } else if (tree_total(b, &e, &bound, &bad)) {
        return -1;
    }
    out[0] = bad ? INFINITY : e;
    b->host->log(b->ctx, METRO_LOG_DEBUG,
                 "energy %.12g from the tree in %.3g s (within %.3g of the direct sum)%s", e,
                 seconds_now() - t0, bound, bad ? "; particles overlap" : "");
    return 0;
}

static int sync_state(void *self, metro_state *st)
{
    hier *b = self;
    if (st->backend != METRO_BACKEND_CUDA || !b->gpu) return 0;
    return b->host->cuda(b->ctx, cudaMemcpy(st->pos, st->d_pos, (size_t)b->n * sizeof(metro_float4), cudaMemcpyDeviceToHost),
                         "hierarchical: copying positions") ||
           b->host->cuda(b->ctx, cudaMemcpy(st->energy, st->d_energy, sizeof(double), cudaMemcpyDeviceToHost),
                         "hierarchical: copying the energy");
}

static int finish(void *self, metro_state *st)
{
    hier *b = self;
    if (sync_state(b, st) || brush_cycles_write(&b->cyc, b->cycles, b->trials ? b->trials : b->n)) return -1;
    /* an older checkpoint kept no counts: say where they begin */
    char since[96] = "";
    char secs[64] = "";
    if (b->counts_from > 0)
        snprintf(since, sizeof since, " (since the restart at cycle %lld: the checkpoint kept no counts)",
                 b->counts_from);
    if (b->restarted_at > 0) snprintf(secs, sizeof secs, " since the restart at cycle %lld", b->restarted_at);
    if (b->gpu) {
        b->host->log(b->ctx, METRO_LOG_INFO,
                     "%lld cycles, acceptance %.4f; moves%s %lld: enclosure %lld (refined look %lld), exact %lld (in the "
                     "chain %lld, after a stop %lld), reference %lld; %.6g s building the tree, %.6g s moving%s (CUDA)",
                     b->cycles, st->attempted[0] ? (double)st->accepted[0] / (double)st->attempted[0] : 0.0, since,
                     b->moves, b->gstats.enclosure, b->gstats.refined, b->gstats.chain + b->gstats.exact, b->gstats.chain,
                     b->gstats.exact, b->gstats.fallback, b->t_rebuild, b->t_moves, secs);
        return 0;
    }
    const double m = b->moves ? (double)b->moves : 1.0;
    long long later = 0; /* stages 3 and on: taken while cheaper than an exact pass */
    for (int k = 3; k < HIER_MAX_STAGES; ++k) later += b->stage[k];
    b->host->log(b->ctx, METRO_LOG_INFO,
                 "%lld cycles, acceptance %.4f; moves%s %lld: stage0 %lld, stage1 %lld, stage2 %lld, "
                 "exact %lld, reference %lld (wall %lld, overlap %lld); far cells %.1f and direct partners %.1f per move; "
                 "%.6g s rebuilding the tree, %.6g s moving (CPU %.6g s, %.6g s)%s; decided by a later look %lld; "
                 "energy change looked at again %lld",
                 b->cycles, st->attempted[0] ? (double)st->accepted[0] / (double)st->attempted[0] : 0.0, since, b->moves,
                 b->stage[0], b->stage[1], b->stage[2], b->exact, b->fallback, b->wall, b->overlap, (double)b->cells / m,
                 (double)b->direct / m, b->t_rebuild, b->t_moves, b->c_rebuild, b->c_moves, secs, later, b->energy_looks);
    if (b->audit)
        b->host->log(b->ctx, METRO_LOG_INFO,
                     "audit: %lld of %lld decisions differ from the exact sum's (long double), %lld too close to tell",
                     b->audit_diff, b->moves, b->audit_open);
    return 0;
}

#define HIER_MAGIC 0x52454948u /* "HIER" */
#define HIER_COUNTS_MAGIC 0x544e4348u /* "HCNT" */
#define HIER_COUNTS 28 /* the long long counts of counts_io */

/* The summary's counts (finish()), kept through a checkpoint so a resumed
 * run's summary counts the whole run, as its cycles do (they counted only
 * since the restart: "32 cycles ... moves 44000").  Copied out of (dir 0)
 * or into (dir 1) an array of HIER_COUNTS long longs.  Not the seconds:
 * they differ from run to run, and a resumed run's checkpoint must be a
 * straight run's, byte for byte (the summary says they are this process's). */
static void counts_io(hier *b, long long *c, int dir)
{
    long long *f[HIER_COUNTS] = {&b->exact, &b->fallback, &b->wall, &b->overlap, &b->moves, &b->cells, &b->direct,
                                 &b->audit_diff, &b->audit_open, &b->energy_looks, &b->gstats.enclosure,
                                 &b->gstats.chain, &b->gstats.exact, &b->gstats.fallback, &b->gstats.refined};
    for (int k = 0; k < HIER_MAX_STAGES; ++k) f[15 + k] = &b->stage[k];
    for (int k = 15 + HIER_MAX_STAGES; k < HIER_COUNTS - 1; ++k) f[k] = NULL; /* room for later counts: 0 */
    /* the cycle the counts begin at (0, or a resume from a checkpoint
     * without them): kept, or the next checkpoint's counts passed for the
     * whole run's */
    f[HIER_COUNTS - 1] = &b->counts_from;
    for (int k = 0; k < HIER_COUNTS; ++k) {
        if (dir) {
            if (f[k]) *f[k] = c[k];
        } else {
            c[k] = f[k] ? *f[k] : 0;
        }
    }
}

/* The checkpoint: brush's blob (cycles, history, uniforms drawn ahead),
 * then the counts: magic, version 1, HIER_COUNTS long longs. */
static int save(void *self)
{
    hier *b = self;
    const unsigned hdr[2] = {HIER_COUNTS_MAGIC, 1u};
    long long c[HIER_COUNTS];
    counts_io(b, c, 0);
    return brush_cycles_save(&b->cyc, HIER_MAGIC, b->cycles) || b->host->save_bytes(b->ctx, hdr, sizeof hdr) ||
           b->host->save_bytes(b->ctx, c, sizeof c);
}

/* A checkpoint from before the counts were kept (brush's blob alone) still
 * resumes; its summary then says its counts begin at the restart. */
static int restore(void *self, const void *data, size_t size)
{
    hier *b = self;
    b->gpu_dirty = 1; /* the positions may have changed under the tree */
    /* the counts follow brush's blob, whose own header says where it ends */
    const size_t blob = brush_cycles_blob_size(data, size);
    if (brush_cycles_restore(&b->cyc, HIER_MAGIC, data, blob, &b->cycles)) return -1;
    const unsigned char *p = (const unsigned char *)data + blob;
    const size_t rest = size - blob, want = 2 * sizeof(unsigned) + HIER_COUNTS * sizeof(long long);
    b->restarted_at = b->cycles;
    if (rest == 0) {
        b->counts_from = b->cycles; /* an older checkpoint: no counts */
        return 0;
    }
    unsigned hdr[2] = {0, 0};
    if (rest >= sizeof hdr) memcpy(hdr, p, sizeof hdr);
    if (rest != want || hdr[0] != HIER_COUNTS_MAGIC || hdr[1] != 1u)
        return b->host->fail(b->ctx,
                             "hierarchical: the checkpoint's counts (%zu bytes after the cycles' state) are not version "
                             "1's %zu bytes with magic HCNT: written by another version of this sampler",
                             rest, want);
    long long c[HIER_COUNTS];
    memcpy(c, p + sizeof hdr, sizeof c);
    counts_io(b, c, 1);
    return 0;
}

/* The dry run's estimate of a sweep (ABI 6): this sampler's measured
 * cost per move (bench/NOTES.md, 2026-11-25) as a power law in N, not the
 * direct sum's N² pair terms.  One CPU thread: 16.5 µs a move at 4096 ions,
 * 48-61 µs at 2^20, 108 at 2^22 (~ N^0.25); one H100 (the table of
 * commit ca02116): 0.87 µs a move up to 2^18, 1.3 at 2^20 and 2^22, 1.9 at
 * 2^23 (~ N^0.23 above 2^18).
 * Within ~30% on the paper's electrolyte; a denser system needs more exact
 * passes. */
static int cost(void *self, const metro_setup *setup, double *seconds)
{
    (void)self;
    const double n = setup->particles > 0 ? (double)setup->particles : 1.0;
    const double per_move = setup->backend == METRO_BACKEND_CUDA ? 0.87e-6 * pow(fmax(1.0, n / 262144.0), 0.23)
                                                                 : 16.5e-6 * pow(fmax(1.0, n / 4096.0), 0.25);
    *seconds = per_move * n * (double)(setup->replicas > 0 ? setup->replicas : 1);
    return 0;
}

/* The tree (hier_tree_bytes: moments, leaf lists, packed leaves) on the
 * CPU, or its device copy and the batch's scratch on CUDA (hier_gpu_bytes),
 * at the depth start() picks; on the host also a cycle's uniforms drawn
 * ahead (on CUDA only after restoring a CPU checkpoint) and, on the CPU,
 * tree_total's per-particle terms. */
static int memory(void *self, const metro_setup *setup, size_t *host, size_t *device)
{
    hier *b = self;
    const int n = setup->particles;
    const int L = leaf_level(n, b->leaf);
    const size_t np = (size_t)(n > 0 ? n : 1);
    *host = np * BRUSH_UNIFORMS_PER_PARTICLE * sizeof(float);
    *device = 0;
    if (setup->backend == METRO_BACKEND_CUDA) {
        const hier_gpu_cfg cfg = {.L = L, .order = b->order, .order_hi = b->order_hi, .batch = b->batch,
                                  .Rt = b->cell_radius};
        *device = hier_gpu_bytes(&cfg, n);
        *host += np * sizeof(metro_float4); /* the positions the host's reference reads (hier_gpu.c) */
        return *device ? 0 : -1;
    }
    *host += hier_tree_bytes(n, b->order_hi, L) + 2 * np * sizeof(double);
    return 0;
}

/* the thread count gives the same chain and the same sums (DESIGN.md): a
 * resume on a machine with other cores may change it */
static const char *const resumable[] = {"threads", NULL};

static const metro_sampler_api api = {
    .version = METRO_ABI_VERSION,
    .create = create,
    .destroy = destroy,
    .start = start,
    .advance = advance,
    .sync = sync_state,
    .finish = finish,
    .save = save,
    .restore = restore,
    .total = total,
    .cost = cost,
    .memory = memory,
    .resumable = resumable,
};

METRO_PLUGIN(sampler, "hierarchical", "0.1.0",
             "sequential Metropolis for coulomb_hs with brush's decisions (reference = float) or the exact sum's "
             "(reference = exact) from an octree with rigorous bounds (CPU and CUDA; needs a Coulomb hard-sphere "
             "potential with coulomb_hs's parameters)",
             params, api)
