/* hier_tree.h — the spatial hierarchy of the hierarchical sampler: a
 * uniform-grid octree over the cube [-Rt, Rt]^3 holding the cell, and the
 * rigorous enclosure of Σ_j z_j / |x - r_j| at a point x (DESIGN.md in
 * this folder has the argument; this header only says what each piece is).
 *
 * Levels 0..L: level l cuts the cube into 2^l cells per side.  Level L
 * (the leaves) keeps each cell's particles in a doubly linked list; levels
 * 1..L-1 keep, per cell, the particle count, A = Σ|z_j|, B_q = Σ|z_j| s_j^(q+1)
 * for q = 0 ... p (s_j = |r_j - c|, c the cell centre) and the harmonic
 * moments H_k (hier_tree.c, add_moments), |k| <= p, in order of degree, so
 * that the first C(q+3,3) of them are the expansion to order q.  Level 0 is never used as a far cell (it holds
 * every particle).
 *
 * hier_eval() walks the tree from the root for a point x and returns
 *   Sf   the near partners' pair energies, each the float of
 *        coulomb_hs_pair (the reference's own terms), summed in double,
 *   S    an approximation of Σ z_j / |x - r_j| over the far partners,
 *   E    a rigorous bound on the truncation error of the far cells,
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

typedef struct hier_tree {
    int n;                       /* particles */
    int p, ncoef;                /* stored expansion order and (p+1)(p+2)(p+3)/6 */
    int p_lo, ncoef_lo;          /* the highest order a first look uses */
    double tol[2];               /* per-cell relative truncation a first look (0) and a
                                    refinement (1) aim at: a far cell takes the lowest
                                    order whose bound is within tol A/(d - rho), at
                                    most p_lo (0) or p (1); 0 = always the highest */
    int L;                       /* leaf level */
    int m[HIER_MAX_LEVEL + 1];   /* cells per side at each level */
    double Rt;                   /* half side of the cube */
    double h[HIER_MAX_LEVEL + 1];   /* cell side */
    double rho[HIER_MAX_LEVEL + 1]; /* radius of a ball around the centre holding the cell */
    int stride;                  /* doubles per cell: A, B_0 ... B_p, H[ncoef] */
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
    /* multi-indices of degree <= p in order of degree: k[c] = (kx, ky, kz);
     * prev1[c][a] = index of k - e_a, prev2[c][a] = index of k - 2 e_a
     * (ncoef when absent: a zero slot); deg[c] = |k|; deg_start[d] = first index of degree d */
    signed char (*k)[3];
    int (*prev1)[3], (*prev2)[3];
    int *deg, deg_start[HIER_MAX_ORDER + 2];
    double *f1, *f2;             /* the recurrence's factors per index */
    const metro_float4 *pos;     /* the positions (the state's array) */
    const coulomb_hs_params *prm;
    int direct_max;              /* far cells of at most this many particles (at the two
                                    finest moment levels) are summed directly */
} hier_tree;

typedef struct hier_result {
    double S, E, Phi;
    double Sf;       /* Σ of the directly summed partners' float pair energies (kT) */
    double Phid;     /* the directly summed part of Phi */
    long adds;       /* terms summed into S (for the rounding allowance) */
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

/* Recompute every list and moment from the positions (drops the rounding
 * that incremental updates accumulate). */
void hier_tree_rebuild(hier_tree *t);

/* Particle i moves from old to pos[i] (pos already updated). */
void hier_tree_move(hier_tree *t, int i, metro_float4 old);

/* The enclosure at x with opening parameter theta (a cell is used as a far
 * cell when rho <= theta d and d - rho >= dcut, d = |x - c|); particle skip
 * (-1: none) is left out, exactly when it sits at `skip_at`; check_overlap
 * asks for the hard-core test against x's species sa (its params row);
 * hi_order: expand to order p, else to p_lo. */
void hier_eval(const hier_tree *t, metro_float4 x, int skip, metro_float4 skip_at, double theta, double dcut,
               int check_overlap, int hi_order, hier_result *r);

/* The cell index of coordinate v at level l (clamped into the grid). */
static inline int hier_coord(const hier_tree *t, int l, double v)
{
    double f = (v + t->Rt) / t->h[l];
    int c = (int)floor(f);
    return c < 0 ? 0 : c >= t->m[l] ? t->m[l] - 1 : c;
}

#endif
