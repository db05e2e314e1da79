/* hier_tree.h — the spatial hierarchy of the hierarchical sampler: a
 * uniform-grid octree over the cube [-Rt, Rt]^3 holding the cell, and the
 * rigorous enclosure of Σ_j z_j / |x - r_j| at a point x (DESIGN.md in
 * this folder has the argument; this header only says what each piece is).
 *
 * Levels 0..L: level l cuts the cube into 2^l cells per side.  Level L
 * (the leaves) keeps each cell's particles packed (below); levels 1..L-1
 * keep, per cell, the particle count, A = Σ|z_j|, B_q = Σ|z_j| s_j^(q+1)
 * for q = 0 ... pm (s_j = |r_j - c|, c the cell centre), the norms G_n of
 * the multipole moments of each degree n <= pm, the truncation bound's
 * coefficients K_n (hier_tree.c, cell_norms), and the complex multipole
 * moments M_n^m = Σ_j z_j R_n^m(r_j - c), 0 <= m <= n <= pm, R the regular
 * solid harmonics (hier_tree.c): (pm+1)^2 reals.  An expansion uses degrees
 * up to p (refinements) or p_lo (first look); the degrees p+1 ... pm only
 * bound the truncation (DESIGN.md, "The error bound").  Level 0 is never
 * used as a far cell (it holds every particle).
 *
 * hier_eval() walks the tree from the root for a point x and returns
 *   Sf   the near partners' pair energies, each the float of
 *        coulomb_hs_pair (the reference's own terms), summed in double,
 *   S    an approximation of Σ z_j / |x - r_j| over the far partners,
 *   E    a rigorous bound on the truncation error of the far cells,
 *   Er   a rigorous bound on their own rounding (hier_own adds the sums'),
 *   Phi  an upper bound of Σ_{j != skip} |z_j| / |x - r_j| (what every
 *        rounding bound is proportional to), Phid its near part,
 * and whether x overlaps a hard core (exactly the float test of
 * coulomb_hs_pair), or coincides with a particle (r = 0: the caller defers
 * to the reference).
 */
#ifndef HIER_TREE_H
#define HIER_TREE_H

#include <stddef.h>

#include "metro/hd.h"

#include "coulomb_hs.h"

#define HIER_MAX_LEVEL 10
#define HIER_MAX_ORDER 12
/* Degrees stored beyond the highest expansion order: their moment norms G_n
 * bound the truncation far more tightly than Legendre's worst case. */
#define HIER_EXTRA 2
#define HIER_MAX_DEG (HIER_MAX_ORDER + HIER_EXTRA)
/* Degrees of the |z|-weighted series that bounds Phi over a far cell
 * (hier_tree.c, phi_bound; at most pm) */
#define HIER_PHI_DEG 4
/* The first refinement opens the cells a little further than the first
 * look: theta times this (the Legendre tail beyond the stored degrees,
 * which bounds what the moments' norms do not, falls as (rho/d)^15) */
#define HIER_THETA_REFINE 0.85

typedef struct hier_tree {
    int n;                       /* particles */
    int p;                       /* highest expansion order (refinements) */
    int pm, ncoef;               /* stored degree p + HIER_EXTRA, and (pm+1)^2 reals of moments */
    int p_lo;                    /* the highest order a first look uses */
    double tol[2];               /* per-cell relative truncation a first look (0) and a
                                    refinement (1) aim at: a far cell takes the lowest
                                    order whose bound is within tol A/(d - rho), at
                                    most p_lo (0) or p (1); 0 = always the highest */
    int L;                       /* leaf level */
    int m[HIER_MAX_LEVEL + 1];   /* cells per side at each level */
    double Rt;                   /* half side of the cube */
    double h[HIER_MAX_LEVEL + 1];   /* cell side */
    double rho[HIER_MAX_LEVEL + 1]; /* radius of a ball around the centre holding the cell */
    int stride;                  /* doubles per cell: A, K_0 ... K_(pm+1), R_0 ... R_pm, dA, D, P,
                                    M[ncoef], B_0 ... B_pm, G_0 ... G_pm, dG_0 ... dG_pm */
    int roff;                    /* where R starts: the expansion's rounding bound per degree (hier_round) */
    int aoff;                    /* where dA is: the running error bound of A (and of B_q / rho^(q+1),
                                    |D| / rho) since the last rebuild (hier_tree.c, cell_norms) */
    int doff;                    /* where D = Σ|z| s (3) and P_n = Σ|z| s^n, n = 2 ... phik+1, start */
    int phik;                    /* degrees of phi_bound's series: min(HIER_PHI_DEG, pm), >= 2 */
    int moff;                    /* where M starts in a cell */
    int boff, goff;              /* where B and G start */
    int eoff;                    /* where dG_n starts: the running error bound of the moments of
                                    degree n in the norm of G since the last rebuild */
    double *mom[HIER_MAX_LEVEL + 1];
    int *cnt[HIER_MAX_LEVEL + 1];
    /* Leaves: each leaf's particles packed in [start, start + count) of the
     * arrays px, py, pz (position), pq (charge z), pr (hard-core radius),
     * pid (index), with room up to start + cap; slot[i] is particle i's
     * place there, or -1 when its leaf was full and it waits in the leaf's
     * overflow list (head, next, prev).  Repacked by every rebuild.
     * leaf[i]: particle i's leaf cell. */
    int *start, *count, *cap;
    float *px, *py, *pz, *pq, *pr;
    int *pid, *slot;
    size_t packed;                  /* capacity of the packed arrays */
    int *head, *next, *prev, *leaf;
    /* the moments degree by degree: M_n^0 at n^2, (Re, Im) of M_n^m at
     * n^2 + 2m - 1 and n^2 + 2m (m = 1 ... n), so order q is the first
     * (q+1)^2 */
    /* the recurrences' factors at [n][m] (hier_tree.c) and the norm weights
     * (n-m)!(n+m)! (times 2 for m > 0: the pair m, -m) */
    double rc1[HIER_MAX_DEG + 1][HIER_MAX_DEG + 1], rc2[HIER_MAX_DEG + 1][HIER_MAX_DEG + 1];
    double ic1[HIER_MAX_DEG + 1], ic2[HIER_MAX_DEG + 1][HIER_MAX_DEG + 1];
    double gw[HIER_MAX_DEG + 1][HIER_MAX_DEG + 1];
    /* our own rounding's factors per degree (hier_math.h, hier_round_factors) */
    double rnd_ev[HIER_MAX_DEG + 1], rnd_src[HIER_MAX_DEG + 1], rnd_sq[HIER_MAX_DEG + 1];
    const metro_float4 *pos;     /* the positions (the state's array) */
    const coulomb_hs_params *prm;
    int direct_max;              /* far cells of at most this many particles (at the two
                                    finest moment levels) are summed directly */
} hier_tree;

typedef struct hier_result {
    double S, E, Phi;
    double Er;       /* a proven bound of the far cells' own rounding (expansions, moments) */
    double Sf;       /* Σ of the directly summed partners' float pair energies (kT) */
    double Phid;     /* the directly summed part of Phi */
    double Phif;     /* the far cells' part of Phi */
    long adds;       /* the most roundings between a term and S or Sf (their sums' own
                        rounding is within adds 2^-53 (1.01) Σ|terms|: hier_own) */
    long cells;      /* far cells used */
    long direct;     /* particles summed directly */
    int overlap;     /* x overlaps some hard core (reference: +inf) */
    int degenerate;  /* x coincides with a particle */
} hier_result;

/* Build for n particles at pos (kept by pointer), order p, leaf level L,
 * cube half side Rt.  Returns 0, or -1 when out of memory. */
int hier_tree_init(hier_tree *t, const metro_float4 *pos, int n, const coulomb_hs_params *prm, int p, int p_lo,
                   int L, double Rt);
void hier_tree_free(hier_tree *t);
/* The bytes hier_tree_init allocates for n particles, order p and leaf level
 * L, with what its rebuilds add (the packed leaves): the sampler's memory(). */
size_t hier_tree_bytes(int n, int p, int L);

/* Recompute every list and moment from the positions (drops the rounding
 * that incremental updates accumulate, and its running bound). */
void hier_tree_rebuild(hier_tree *t);

/* Particle i moves from old to pos[i] (pos already updated). */
void hier_tree_move(hier_tree *t, int i, metro_float4 old);

/* The enclosure at x with opening parameter theta (a cell is used as a far
 * cell when rho <= theta d and d - rho >= dcut, d = |x - c|); particle skip
 * (-1: none) is left out, exactly when it sits at `skip_at`; check_overlap
 * asks for the hard-core test against x's species sa (its params row);
 * hi_order: expand to order p, else to p_lo; exact_near: Sf from terms in
 * double (reference = exact: within HIER_EXACT_TERM of the exact terms),
 * else the reference's float terms. */
void hier_eval(const hier_tree *t, metro_float4 x, int skip, metro_float4 skip_at, double theta, double dcut,
               int check_overlap, int hi_order, int exact_near, hier_result *r);

/* Every partner at once, as the reference's delta() forms its terms: for
 * each particle j != skip the float pair energies E(t, j) and E(o, j) of
 * coulomb_hs_pair (same operations, same bits) and their double difference
 * d_j; *sum = Σ d_j (in an order of its own), *abs_sum = Σ |d_j|.  Returns
 * 0, or -1 when a float distance is 0 or a hard core overlaps at t or o
 * (the caller leaves those to the reference).  O(N): the last resort
 * before the reference's own delta(), whose value differs from *sum only
 * by the order of the same double additions (DESIGN.md). */
int hier_exact(const hier_tree *t, metro_float4 tx, metro_float4 ox, int skip, double *sum, double *abs_sum);

/* reference = exact (DESIGN.md, "The exact chain"): every partner's term
 * of hier_ideal_delta (hier_math.h), in double from the float positions;
 * *sum their sum, *abs_sum = Σ(|e_t| + |e_o|), *path the summation's
 * height for hier_ideal_eps (a leaf's terms in four running sums, the
 * leaves' totals in a double-double sum).  Returns 0, or -1 when some
 * distance is within a hard core (times 1 + 1e-6) or 0: the last resort
 * decides those. */
int hier_exact_ideal(const hier_tree *t, metro_float4 tx, metro_float4 ox, int skip, double *sum, double *abs_sum,
                     double *path);

/* reference = exact, the last resort: the move of particle i (of n at pos)
 * to t decided against the exact sum in long double: the wall and the
 * hard cores by coulomb_hs's float tests (the model's definition, as the
 * reference has them), every term in long double, their sum by
 * double-long-double additions, the threshold -ln u by logl.  Returns 1
 * (accept) or 0 (reject) with *de the sum, or -1 when even that cannot
 * tell ΔE from the threshold (within ~10^-18 of Φ: never seen). */
int hier_ideal_reference(const coulomb_hs_params *p, const metro_float4 *pos, int n, int i, metro_float4 t, float u,
                         double *de);

/* Our own rounding of one enclosure (hier_math.h, hier_own_bound) */
double hier_own(const hier_result *r);

/* The cell index of coordinate v at level l (clamped into the grid). */
static inline int hier_coord(const hier_tree *t, int l, double v)
{
    double f = (v + t->Rt) / t->h[l];
    int c = (int)floor(f);
    return c < 0 ? 0 : c >= t->m[l] ? t->m[l] - 1 : c;
}

#endif
