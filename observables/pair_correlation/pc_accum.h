/* pc_accum.h — pair histograms of one configuration on the CPU, their
 * accumulation into blocks of measurements, and the estimates (g, charge
 * density, excess energy, with leave-one-block-out replicas) built from
 * those blocks.  Plain C with no dependence on the core, so tests call it
 * on synthetic configurations directly.
 *
 * Normalisation.  Central ions are those with |x| < R_int = R_cell - margin;
 * partners are all other ions.  The histograms stop at r_max <= margin -
 * d_max/2 (the observable refuses more), so every shell r..r+dr around a
 * central ion lies inside the region partner centres can reach.  The
 * reference count of bin k is what the one-body densities would put there
 * without correlation:
 *   E_ab,k = sum over central ions of a of V_k <n_b>(s, r_k),
 * <n_b>(s, r) = the radial density profile n_b(t) of species b (measured,
 * PC_NT bins over [0, R_cell]) averaged over the sphere of radius r about
 * a point at distance s from the centre, exactly: the part of that sphere
 * at radii t..t+dt is t dt / (2 s r) of it.  Central ions are binned by s
 * (PC_NS bins over [0, R_int)).  In a homogeneous interior this is C_a n_b
 * V_k; near the wall's double layer (which the outer shells of central ions
 * close to R_int reach) it takes the layer out, which a constant n_b would
 * leave in the far field of g and of ρ as a spurious tail.  Then
 *   g_ab(r_k) = H_ab,k / (E_ab,k (N_b - δ_ab) / N_b)
 * (the canonical factor makes an ideal gas give 1 exactly: a central ion of
 * species b has N_b - 1 partners of its kind), and the charge density
 * around a beyond the one-body background
 *   ρ_a(r_k) = Σ_b z_b (H_ab,k - E_ab,k) / (C_a V_k)
 * (= Σ_b n_b z_b (g_ab - 1) up to O(1/N); without the canonical factor,
 * since in an electrolyte the compensating charge -z_a is the cloud itself).
 * C_a: central ions of species a summed over measurements; V_k = 4/3 π
 * (r_{k+1}^3 - r_k^3).  The bulk density n_b reported (for κ) is the mean
 * density of the interior region.
 */
#ifndef METRO_PC_ACCUM_H
#define METRO_PC_ACCUM_H

#include <stddef.h>

#include "pair_correlation.h"

/* ---- one configuration -------------------------------------------------- */

/* Radial bins of the one-body profiles and of the central ions. */
#define PC_NT 1024
#define PC_NS 256

struct metro_pc_system;

/* Indices of the particles strictly inside radius sys->r_int into
 * central[] (room for n).  Adds into the record rec (layout below) this
 * configuration's central and interior counts, the radii of the central
 * ions and the radial profile of every species.  Returns how many central
 * ions were written. */
int metro_pc_select(const metro_float4 *pos, int n, const struct metro_pc_system *sys,
                    int *central, double *rec);

/* Adds the pair counts of central ions central[0..L->n_central-1] against
 * all other particles into hist[(a*S + b)*bins + k], and (when L->psi) the
 * sums over central ions of species a of sum_j z_j / r_ij into psi[a].  The
 * same loop order and rounding as the GPU kernel. */
void metro_pc_histogram_cpu(const metro_float4 *pos, const int *central, const pc_launch *L,
                            double *hist, double *psi);

/* A cell list of one configuration (the pair counts without the potential
 * sums, O(n_central x neighbours) instead of O(n_central x n)): a grid of
 * m[0] x m[1] x m[2] cells at least r_max wide, the positions in cell order
 * (cell k holds sp[start[k] .. start[k+1])), and the central ions in that
 * order: their places cq in sp and their cells ccell.  The host's counts
 * (metro_pc_histogram_cells) and the GPU's (pair_correlation_cells) both
 * read it, partners from pc_columns. */
typedef struct metro_pc_cells {
    int m[3], ncell, nc;
    int *start;        /* [ncell + 1] */
    metro_float4 *sp;  /* [n] */
    int *cq, *ccell;   /* [nc] */
} metro_pc_cells;

/* Builds cl for the central ions central[0..L->n_central-1] (empty lists
 * when there are none).  Returns 0, or -1 when out of memory or the grid
 * would need 2^31 cells (cl then holds nothing). */
int metro_pc_cells_build(const metro_float4 *pos, const int *central, const pc_launch *L, metro_pc_cells *cl);
void metro_pc_cells_free(metro_pc_cells *cl);

/* The pair counts of metro_pc_histogram_cpu (not the potential sums) from a
 * cell list on every core: the same counts bit for bit.  Returns 0, or -1
 * when out of memory (nothing added then). */
int metro_pc_histogram_cells(const metro_float4 *pos, const int *central, const pc_launch *L, double *hist);

/* ---- blocks of measurements ---------------------------------------------- */

/* A record holds the sums of one block: [0] configurations measured,
 * [1+a] central ions of species a, [1+S+b] ions of species b in the interior
 * region, [1+2S+a] potential sums, then the S*S*bins pair counts, the S*PC_NS
 * counts of central ions by distance from the centre, the S*PC_NT counts of
 * particles by distance from the centre. */
typedef struct metro_pc_accum {
    int species, bins;
    int blocks;           /* blocks wanted for error bars (at least that many
                             are kept, at most twice as many) */
    int used;             /* records in use; the last may be partial */
    long per;             /* measurements per full record */
    long fill;            /* measurements in the last record */
    size_t rec;           /* doubles per record */
    double *data;         /* 2 * blocks records */
} metro_pc_accum;

/* Index helpers into a record. */
#define METRO_PC_CONF 0
#define METRO_PC_CENTRAL(S, a) (1 + (a))
#define METRO_PC_INTERIOR(S, b) (1 + (S) + (b))
#define METRO_PC_PSI(S, a) (1 + 2 * (S) + (a))
#define METRO_PC_HIST(S) (1 + 3 * (S))
#define METRO_PC_CEN(S, bins) (METRO_PC_HIST(S) + (size_t)(S) * (S) * (bins))
#define METRO_PC_PROF(S, bins) (METRO_PC_CEN(S, bins) + (size_t)(S) * PC_NS)

/* Allocates an empty accumulator.  Returns 0, or -1 when out of memory. */
int metro_pc_accum_init(metro_pc_accum *acc, int species, int bins, int blocks);
void metro_pc_accum_free(metro_pc_accum *acc);
/* Doubles per record for S species and `bins` bins. */
size_t metro_pc_record_size(int species, int bins);
/* Adds one measurement (a record of `rec` doubles) into the current block,
 * opening a new one when the current is full; when all 2*blocks records are
 * full, neighbours are merged pairwise and the block length doubles, so
 * blocks stay equal in length and between `blocks` and 2*blocks of them are
 * full whatever the run length. */
void metro_pc_accum_add(metro_pc_accum *acc, const double *m);
/* Number of measurements so far. */
long metro_pc_accum_count(const metro_pc_accum *acc);
/* The blocks used for error bars: copies the records into out (room for
 * 2*blocks records) after merging a last block that is less than half full
 * into the one before it.  Returns their number (0 when nothing measured). */
int metro_pc_accum_blocks(const metro_pc_accum *acc, double *out);

/* ---- estimates ----------------------------------------------------------- */

/* What the structure estimates need beyond the counts. */
typedef struct metro_pc_system {
    double r_cell;                     /* radius of the cell (one-body profiles) */
    int species, bins;
    double dr;
    double z[METRO_MAX_SPECIES];       /* valences */
    double d[METRO_MAX_SPECIES];       /* hard-core diameters (for Debye-Hückel) */
    long count[METRO_MAX_SPECIES];     /* N_b per replica */
    char name[METRO_MAX_SPECIES][16];
    double r_int;                      /* radius of the interior region */
    int psi;                           /* potential sums were measured */
    double bjerrum;                    /* length units */
} metro_pc_system;

/* One estimate of the structure, from one record (all blocks, or all but
 * one).  NAN where there are no data (e.g. a species without central ions). */
typedef struct metro_pc_profile {
    int species, bins;
    double dr;
    double z[METRO_MAX_SPECIES];
    double d[METRO_MAX_SPECIES];
    double n[METRO_MAX_SPECIES];       /* bulk (interior) number densities */
    double u[METRO_MAX_SPECIES];       /* excess energy per ion of species a, kT;
                                          NAN when not measured */
    double *g;                         /* [(a*S + b)*bins + k] */
    double *rho;                       /* [a*bins + k], e per length^3 */
} metro_pc_profile;

/* Allocates g and rho (NAN-filled).  Returns 0 or -1 (out of memory). */
int metro_pc_profile_alloc(metro_pc_profile *p, int species, int bins);
void metro_pc_profile_free(metro_pc_profile *p);
/* The reference densities of every (b, k, s): V_k <n_b>(s, r_k) from the
 * one-body profiles of the record rec (normally all blocks together), into
 * W[(b*bins + k)*PC_NS + s].  Returns W
 * (heap, caller frees) or NULL when out of memory or rec holds no
 * configuration. */
double *metro_pc_weights(const metro_pc_system *sys, const double *rec);
/* Fills p from one record (sums over measurements) with the reference
 * densities W of metro_pc_weights, or, when W is NULL, a homogeneous
 * reference (the interior density n_b everywhere: for synthetic records
 * without profiles).  Returns 0, or -1 when the record holds no
 * configuration. */
int metro_pc_profile_from(metro_pc_profile *p, const metro_pc_system *sys, const double *rec,
                          const double *W);

/* Bin k's centre, lower edge volume helpers. */
static inline double metro_pc_r(double dr, int k) { return (k + 0.5) * dr; }
/* Volume of the shell of bin k. */
double metro_pc_shell(double dr, int k);

/* Jackknife: value from the full estimate, error from the B leave-one-out
 * estimates loo[0..B-1] (spaced `stride` doubles apart).  Returns the error
 * sqrt((B-1)/B * sum (loo_i - mean)^2); NAN when B < 2 or any is NAN. */
double metro_pc_jackknife(const double *loo, int B, size_t stride);

#endif
