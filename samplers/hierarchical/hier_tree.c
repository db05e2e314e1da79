/* hier_tree.c — the octree of hier_tree.h: lists, moments, and the
 * enclosure of the potential at a point (DESIGN.md, "The error bound"). */
#include "hier_tree.h"
#include "hier_math.h"
#include "metro/plugin.h" /* metro_morton_spread */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The float loops over partners in 8-wide vectors where the CPU has them:
 * AVX's sqrt and division round as SSE's and the scalar ones (IEEE), and
 * without "fma" in the target (and with -ffp-contract=off) nothing is
 * contracted, so the terms keep their bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HIER_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HIER_CLONES
#endif

/* Four lanes of doubles (GCC/Clang vector extension; SSE pairs where there
 * is no AVX): the batched recurrences below run one lane per cell or per
 * particle, each lane the same IEEE operations as the scalar code. */
typedef double v4d __attribute__((vector_size(32)));

static size_t cells_of(const hier_tree *t, int l)
{
    return (size_t)t->m[l] * (size_t)t->m[l] * (size_t)t->m[l];
}

/* The index of cell (ix, iy, iz) of a level in that level's arrays (the
 * moment blocks, the counts, the leaves' packings): its Morton code, the
 * three coordinates' bits interleaved.  So a cell's eight children are
 * side by side at 8c ... 8c + 7 of the next level (visit asks for their
 * first lines together), neighbouring cells lie near each other in memory,
 * and the leaves are packed along the curve the rebuild walks.  (Row-major
 * before; the same results bit for bit.  The layout alone measured within
 * this machine's noise; the children's prefetch it allows, 8-20% a move
 * from 2^21: bench/NOTES.md.) */
static inline size_t cell_at(int ix, int iy, int iz)
{
    return (size_t)(metro_morton_spread((uint64_t)ix) << 2 | metro_morton_spread((uint64_t)iy) << 1 |
                    metro_morton_spread((uint64_t)iz));
}

/* The factors of the solid harmonics' recurrences (moments4, expand) and
 * the norms' weights; the moments are laid out degree by degree
 * (hier_tree.h). */
static void build_tables(hier_tree *t)
{
    hier_factors(t->pm, t->ic1, &t->ic2[0][0], &t->rc1[0][0], &t->rc2[0][0], &t->gw[0][0]);
    hier_round_factors(t->pm, t->p, t->rnd_ev, t->rnd_src, t->rnd_sq);
}

/* Order p, leaf level L, cube half side Rt: the cells' block layout and the
 * grid, what the allocations are sized by (hier_tree_init and
 * hier_tree_bytes alike). */
static void layout(hier_tree *t, int p, int L, double Rt)
{
    t->p = p;
    t->pm = p + HIER_EXTRA;
    t->ncoef = (t->pm + 1) * (t->pm + 1);
    t->L = L;
    t->Rt = Rt;
    /* what a far cell's evaluation reads first and together (A, K, D, P,
     * then the moments degree by degree, so that order q reads a
     * contiguous (q+1)^2 prefix), the update-only B and G last: at 2^20 the
     * finest level's blocks do not stay in cache, and a far cell then
     * costs the cache lines it touches */
    t->roff = 1 + (t->pm + 2);
    t->aoff = t->roff + (t->pm + 1);
    t->doff = t->aoff + 1;
    t->phik = t->pm < HIER_PHI_DEG ? t->pm : HIER_PHI_DEG;
    t->moff = t->doff + 3 + HIER_PHI_DEG;
    /* A, K_0 ... K_(pm+1), R_0 ... R_pm, dA, D, P_1 ... P_PHI_DEG, M,
     * B_0 ... B_pm, G_0 ... G_pm, dG_0 ... dG_pm */
    t->boff = t->moff + t->ncoef;
    t->goff = t->boff + (t->pm + 1);
    t->eoff = t->goff + (t->pm + 1);
    t->stride = t->eoff + (t->pm + 1);
    for (int l = 0; l <= L; ++l) {
        t->m[l] = 1 << l;
        t->h[l] = 2.0 * Rt / (double)t->m[l];
        /* half the diagonal, widened a little: a coordinate rounded onto a
         * cell's face still lies within rho of its centre */
        t->rho[l] = 0.5 * sqrt(3.0) * t->h[l] * (1.0 + 1e-9);
    }
}

/* A leaf of `count` particles gets room for half as many again (moves in). */
static size_t leaf_room(size_t count)
{
    return count + count / 2 + 2;
}

/* The packed places of every leaf's room, at most (counts summing to n):
 * allocated once at this size, so no rebuild reallocates. */
static size_t packed_max(const hier_tree *t)
{
    const size_t nl = cells_of(t, t->L);
    return leaf_room((size_t)t->n) + (nl - 1) * leaf_room(0);
}

int hier_tree_init(hier_tree *t, const metro_float4 *pos, int n, const coulomb_hs_params *prm, int p, int p_lo,
                   int L, double Rt)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->pos = pos;
    t->prm = prm;
    layout(t, p, L, Rt);
    t->p_lo = p_lo < 0 ? 0 : p_lo > p ? p : p_lo;
    build_tables(t);
    t->tol[0] = t->tol[1] = 0.0;
    for (int l = 1; l < L; ++l) {
        t->mom[l] = malloc(cells_of(t, l) * (size_t)t->stride * sizeof(double));
        t->cnt[l] = malloc(cells_of(t, l) * sizeof(int));
        if (!t->mom[l] || !t->cnt[l]) return -1;
    }
    size_t nl = cells_of(t, L);
    t->start = malloc(nl * sizeof(int));
    t->count = malloc(nl * sizeof(int));
    t->cap = malloc(nl * sizeof(int));
    t->slot = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!t->start || !t->count || !t->cap || !t->slot) return -1;
    t->head = malloc(nl * sizeof(int));
    t->next = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    t->prev = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    t->leaf = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!t->head || !t->next || !t->prev || !t->leaf) return -1;
    hier_tree_rebuild(t);
    return 0;
}

size_t hier_tree_bytes(int n, int p, int L)
{
    hier_tree t;
    memset(&t, 0, sizeof t);
    t.n = n;
    layout(&t, p, L, 1.0);
    size_t bytes = 0;
    for (int l = 1; l < L; ++l) bytes += cells_of(&t, l) * ((size_t)t.stride * sizeof(double) + sizeof(int));
    const size_t nl = cells_of(&t, L), np = (size_t)(n > 0 ? n : 1);
    bytes += 4 * nl * sizeof(int);                              /* start, count, cap, head */
    bytes += 4 * np * sizeof(int);                              /* slot, next, prev, leaf */
    bytes += packed_max(&t) * (5 * sizeof(float) + sizeof(int)); /* px ... pr, pid */
    return bytes;
}

void hier_tree_free(hier_tree *t)
{
    for (int l = 0; l <= HIER_MAX_LEVEL; ++l) {
        free(t->mom[l]);
        free(t->cnt[l]);
    }
    free(t->start);
    free(t->count);
    free(t->cap);
    free(t->slot);
    free(t->px);
    free(t->py);
    free(t->pz);
    free(t->pq);
    free(t->pr);
    free(t->pid);
    free(t->head);
    free(t->next);
    free(t->prev);
    free(t->leaf);
    memset(t, 0, sizeof *t);
}

static inline float charge(const hier_tree *t, metro_float4 a)
{
    return t->prm->sp[coulomb_hs_species(a.w)].x;
}

static inline size_t cell_index(const hier_tree *t, int l, metro_float4 a)
{
    return cell_at(hier_coord(t, l, a.x), hier_coord(t, l, a.y), hier_coord(t, l, a.z));
}

static inline double centre(const hier_tree *t, int l, int i)
{
    return -t->Rt + ((double)i + 0.5) * t->h[l];
}

/* The norms, truncation coefficients and rounding coefficients of a cell's
 * block (hier_math.h), after `ops` updates (0: a rebuild, whose running
 * errors acc_close set; 1 or 2: a move's removal and addition of a charge
 * |z| = az).  The running errors (DESIGN.md, "The error bound", (c)): an
 * update rounds each real of the moments by at most u times its new value,
 * so by u G_n(after) in the norm of G, where the state between a move's two
 * updates of one cell is within G_n(new) + |z| rho^n (1 + src_n); the
 * source's own recurrence adds src_n |z| rho^n.  A, the B_q and D are sums
 * of |z| s^k (k <= pm + 1, each within 72u of its value: s^k by k - 1
 * products of s, itself within 3.5u), so an update adds at most u (A(after)
 * + 73 |z|) rho^k to each, in units of rho^k: dA.  The factor 1 + 1e-6
 * covers the rounding of these bounds themselves. */
static void cell_norms(const hier_tree *t, int l, double *M, int ops, double az)
{
    const int pm = t->pm;
    const double rho = t->rho[l], u = 0x1p-53;
    double *G = M + t->goff, *dG = M + t->eoff, *R = M + t->roff;
    for (int n = 0; n <= pm; ++n) G[n] = hier_norm_g(M + t->moff, &t->gw[0][0], n);
    const double A = M[0] > 0 ? M[0] : 0.0;
    if (ops > 0) {
        M[t->aoff] += ops * u * (A + 73.0 * az) * (1.0 + 1e-6);
        double rn = 1.0;
        for (int n = 0; n <= pm; ++n, rn *= rho) {
            const double s = t->rnd_src[n] * az * rn;
            dG[n] += ops * (u * (G[n] + az * rn + s) + s) * (1.0 + 1e-6);
        }
    }
    const double dA = M[t->aoff];
    M[1] = A; /* K_0 */
    double rn = 1.0;
    for (int n = 1; n <= pm + 1; ++n) {
        rn *= rho;
        hier_norm_k(M, pm, t->doff, t->boff, t->goff, rn, 0.0, n <= pm ? dG[n] : 0.0, dA * rn, n);
    }
    for (int n = 0; n <= pm; ++n) R[n] = (t->rnd_ev[n] * G[n] * (1.0 + 1e-6) + t->rnd_sq[n] * dG[n]) * (1.0 + 1e-6);
}

/* A rebuild's running error of one cell's moments: each addition rounds
 * each real by at most u times its new value, so the rebuild sums, real by
 * real, the magnitudes the moments pass through (acc->e), and closes the
 * cell (acc_close) when the next one begins (a level's cells come one
 * after another in the rebuild's Morton order; a cell met again would only
 * add a second, still valid, bound). */
typedef struct hier_acc {
    double *M;
    int l;
    double e[(HIER_MAX_DEG + 1) * (HIER_MAX_DEG + 1)];
} hier_acc;

static void acc_close(const hier_tree *t, hier_acc *a)
{
    if (!a->M) return;
    const int count = t->cnt[a->l][(size_t)(a->M - t->mom[a->l]) / (size_t)t->stride];
    const int pm = t->pm;
    const double rho = t->rho[a->l], u = 0x1p-53;
    double *M = a->M, *dG = M + t->eoff;
    const double A = M[0] > 0 ? M[0] : 0.0;
    double rn = 1.0;
    for (int n = 0; n <= pm; ++n, rn *= rho) {
        /* the additions' rounding, and each source's own (src_n |z| rho^n,
         * Σ|z| = A) */
        const double e = u * hier_norm_g(a->e, &t->gw[0][0], n);
        dG[n] += (e + t->rnd_src[n] * A * rn) * (1.0 + 1e-6);
    }
    /* A and the B_q sum positive terms: each partial sum is below the last */
    M[t->aoff] += u * ((double)count + 73.0) * A * (1.0 + 1e-6);
    a->M = NULL;
}

/* A particle a (with a sign) enters the moments of its cell at level l
 * (moments4): A, the B_q, and M_n^m += z R_n^m(s), s = a - c, with the
 * regular solid harmonics
 *   R_n^m(s) = |s|^n P_n^m(cos α) e^(imφ) / (n+m)!   (P_n^m without the
 *   Condon-Shortley phase), from their recurrences (no division by |s|, so
 *   a particle at the centre is fine):
 *   R_0^0 = 1,  R_m^m = (s_x + i s_y) / (2m) R_(m-1)^(m-1),
 *   R_n^m = ((2n-1) s_z R_(n-1)^m - |s|^2 R_(n-2)^m) / ((n-m)(n+m)).
 * With the irregular I_n^m(y) = (n-m)! P_n^m(cos β) e^(imφ) / |y|^(n+1) the
 * addition theorem of the Legendre polynomials gives
 *   |s|^n P_n(cos γ) / |y|^(n+1) = Σ_(m=-n..n) conj(R_n^m(s)) I_n^m(y),
 * the degree-n term of 1/|y - s| in (p+1)^2 reals per order p instead of
 * the Cartesian C(p+3,3).  Only m >= 0 is stored: the -m terms are the
 * conjugates. */
/* Four (cell, particle, sign) at once: the recurrences lane by lane,
 * vectorized across the four, then added to each cell in lane order (two
 * lanes may share a cell).  Lanes with M == NULL are padding. */
typedef struct mjob {
    double *M;
    double sx, sy, sz, z, sign;
    hier_acc *acc; /* a rebuild's running error of this level (NULL: a move's) */
} mjob;

HIER_CLONES static void moments4(const hier_tree *t, const mjob *j)
{
    const int pm = t->pm;
    v4d R[(HIER_MAX_DEG + 1) * (HIER_MAX_DEG + 1)];
    v4d Bq[HIER_MAX_DEG + 1];
    const v4d sx = {j[0].sx, j[1].sx, j[2].sx, j[3].sx}, sy = {j[0].sy, j[1].sy, j[2].sy, j[3].sy},
              sz = {j[0].sz, j[1].sz, j[2].sz, j[3].sz};
    const v4d r2 = sx * sx + sy * sy + sz * sz;
    const v4d s = {sqrt(r2[0]), sqrt(r2[1]), sqrt(r2[2]), sqrt(r2[3])};
    const v4d zs = {j[0].sign * j[0].z, j[1].sign * j[1].z, j[2].sign * j[2].z, j[3].sign * j[3].z};
    const v4d az = {j[0].sign * fabs(j[0].z), j[1].sign * fabs(j[1].z), j[2].sign * fabs(j[2].z),
                    j[3].sign * fabs(j[3].z)};
    {
        v4d sq = s;
        for (int q = 0; q <= pm; ++q) {
            Bq[q] = az * sq;
            sq *= s;
        }
    }
    const v4d zero = {0.0, 0.0, 0.0, 0.0}, one = {1.0, 1.0, 1.0, 1.0};
    {
        v4d r0 = one, r1 = zero;
        R[0] = one;
        for (int n = 1; n <= pm; ++n) {
            const v4d rn = t->rc1[n][0] * sz * r0 - t->rc2[n][0] * r2 * r1;
            r1 = r0;
            r0 = rn;
            R[n * n] = rn;
        }
    }
    v4d mr = one, mi = zero;
    for (int m = 1; m <= pm; ++m) {
        const double f = 1.0 / (2.0 * m);
        const int off = m * m + 2 * m - 1; /* (Re, Im) of M_n^m at n^2 + 2m - 1 */
        const v4d nr = f * (sx * mr - sy * mi), ni = f * (sx * mi + sy * mr);
        mr = nr;
        mi = ni;
        v4d ar = nr, ai = ni, br = zero, bi = zero;
        R[off] = nr;
        R[off + 1] = ni;
        for (int n = m + 1; n <= pm; ++n) {
            const v4d e1 = t->rc1[n][m] * sz, e2 = t->rc2[n][m] * r2;
            const v4d xr = e1 * ar - e2 * br, xi = e1 * ai - e2 * bi;
            br = ar;
            bi = ai;
            ar = xr;
            ai = xi;
            const int k = n * n + 2 * m - 1;
            R[k] = xr;
            R[k + 1] = xi;
        }
    }
    for (int v = 0; v < 4; ++v) {
        double *M = j[v].M;
        if (!M) continue;
        M[0] += az[v];
        for (int q = 0; q <= pm; ++q) M[t->boff + q] += Bq[q][v];
        double *D = M + t->doff; /* Σ |z| s: the dipole of the |z| */
        D[0] += az[v] * sx[v];
        D[1] += az[v] * sy[v];
        D[2] += az[v] * sz[v];
        double *H = M + t->moff;
        const double z = zs[v];
        for (int k = 0; k < t->ncoef; ++k) H[k] += z * R[k][v];
        hier_acc *a = j[v].acc;
        if (a) {
            if (a->M != M) {
                acc_close(t, a);
                a->M = M;
                memset(a->e, 0, (size_t)t->ncoef * sizeof(double));
            }
            for (int k = 0; k < t->ncoef; ++k) a->e[k] += fabs(H[k]);
        }
    }
}

/* A queue of moment updates, expanded four at a time. */
typedef struct mqueue {
    mjob j[4];
    int n;
} mqueue;

static void mqueue_flush(const hier_tree *t, mqueue *q)
{
    if (!q->n) return;
    for (int v = q->n; v < 4; ++v) q->j[v] = (mjob){NULL, 0, 0, 0, 0, 0, NULL};
    moments4(t, q->j);
    q->n = 0;
}

/* Queue sign * (particle a) into its cell at level l (the count at once;
 * acc: a rebuild's running error of that level, or NULL). */
static void mqueue_add(hier_tree *t, mqueue *q, int l, metro_float4 a, double sign, hier_acc *acc)
{
    const int ix = hier_coord(t, l, a.x), iy = hier_coord(t, l, a.y), iz = hier_coord(t, l, a.z);
    const size_t c = cell_at(ix, iy, iz);
    q->j[q->n++] = (mjob){t->mom[l] + c * (size_t)t->stride, (double)a.x - centre(t, l, ix),
                          (double)a.y - centre(t, l, iy), (double)a.z - centre(t, l, iz), (double)charge(t, a), sign,
                          acc};
    t->cnt[l][c] += sign > 0 ? 1 : -1;
    if (q->n == 4) mqueue_flush(t, q);
}

static double *cell_of(const hier_tree *t, int l, metro_float4 a)
{
    const int ix = hier_coord(t, l, a.x), iy = hier_coord(t, l, a.y), iz = hier_coord(t, l, a.z);
    const size_t c = cell_at(ix, iy, iz);
    return t->mom[l] + c * (size_t)t->stride;
}

static void put_slot(hier_tree *t, int k, int i)
{
    const metro_float4 a = t->pos[i];
    const metro_float4 sp = t->prm->sp[coulomb_hs_species(a.w)];
    t->px[k] = a.x;
    t->py[k] = a.y;
    t->pz[k] = a.z;
    t->pq[k] = sp.x;
    t->pr[k] = sp.y;
    t->pid[k] = i;
    t->slot[i] = k;
}

/* Particle i into its leaf (by pos[i]): a free packed place, else the
 * overflow list. */
static void link_leaf(hier_tree *t, int i)
{
    const size_t c = cell_index(t, t->L, t->pos[i]);
    t->leaf[i] = (int)c;
    if (t->count[c] < t->cap[c]) {
        put_slot(t, t->start[c] + t->count[c]++, i);
        return;
    }
    t->slot[i] = -1;
    t->prev[i] = -1;
    t->next[i] = t->head[c];
    if (t->head[c] >= 0) t->prev[t->head[c]] = i;
    t->head[c] = i;
}

static void unlink_leaf(hier_tree *t, int i)
{
    const int c = t->leaf[i];
    const int k = t->slot[i];
    if (k >= 0) { /* the leaf's last packed particle fills the hole */
        const int last = t->start[c] + --t->count[c];
        if (last != k) {
            const int j = t->pid[last];
            t->px[k] = t->px[last];
            t->py[k] = t->py[last];
            t->pz[k] = t->pz[last];
            t->pq[k] = t->pq[last];
            t->pr[k] = t->pr[last];
            t->pid[k] = j;
            t->slot[j] = k;
        }
        return;
    }
    if (t->prev[i] >= 0)
        t->next[t->prev[i]] = t->next[i];
    else
        t->head[c] = t->next[i];
    if (t->next[i] >= 0) t->prev[t->next[i]] = t->prev[i];
}

void hier_tree_rebuild(hier_tree *t)
{
    for (int l = 1; l < t->L; ++l) {
        memset(t->mom[l], 0, cells_of(t, l) * (size_t)t->stride * sizeof(double));
        memset(t->cnt[l], 0, cells_of(t, l) * sizeof(int));
    }
    /* pack the leaves with room for half as many again (moves in) */
    const size_t nl = cells_of(t, t->L);
    for (size_t c = 0; c < nl; ++c) {
        t->head[c] = -1;
        t->count[c] = 0;
    }
    for (int i = 0; i < t->n; ++i) t->count[cell_index(t, t->L, t->pos[i])]++;
    size_t total = 0;
    for (size_t c = 0; c < nl; ++c) {
        t->start[c] = (int)total;
        t->cap[c] = (int)leaf_room((size_t)t->count[c]);
        total += (size_t)t->cap[c];
        t->count[c] = 0;
    }
    if (total > t->packed) {
        /* the most any packing needs, at once: no rebuild after the first
         * reallocates (hier_tree_bytes counts this) */
        const size_t want = packed_max(t) > total ? packed_max(t) : total;
        float *q[5];
        for (int a = 0; a < 5; ++a) q[a] = malloc(want * sizeof(float));
        int *id = malloc(want * sizeof(int));
        if (!q[0] || !q[1] || !q[2] || !q[3] || !q[4] || !id) {
            /* no room to pack: every particle goes to the overflow lists */
            for (int a = 0; a < 5; ++a) free(q[a]);
            free(id);
            for (size_t c = 0; c < nl; ++c) t->cap[c] = 0;
        } else {
            free(t->px), free(t->py), free(t->pz), free(t->pq), free(t->pr), free(t->pid);
            t->px = q[0], t->py = q[1], t->pz = q[2], t->pq = q[3], t->pr = q[4], t->pid = id;
            t->packed = want;
        }
    }
    for (int i = 0; i < t->n; ++i) link_leaf(t, i);
    /* the moments leaf by leaf in Morton order (the leaves' own), so that
     * every level's cell stays in cache while its particles are added (in
     * particle order the cells are random: a rebuild streamed gigabytes at
     * 2^20) */
    mqueue q = {.n = 0};
    const int L = t->L;
    hier_acc *acc = malloc((size_t)(L > 1 ? L : 1) * sizeof *acc);
    for (int l = 1; l < L; ++l) {
        acc[l].M = NULL;
        acc[l].l = l;
    }
    /* (out of memory for the error sums: every cell gets the crude
     * bound instead, its count times the largest value, below) */
    for (size_t c = 0; c < nl; ++c) {
        for (int k = t->start[c]; k < t->start[c] + t->count[c]; ++k)
            for (int l = 1; l < L; ++l) mqueue_add(t, &q, l, t->pos[t->pid[k]], 1.0, acc ? &acc[l] : NULL);
        for (int j = t->head[c]; j >= 0; j = t->next[j])
            for (int l = 1; l < L; ++l) mqueue_add(t, &q, l, t->pos[j], 1.0, acc ? &acc[l] : NULL);
    }
    mqueue_flush(t, &q);
    for (int l = 1; l < L; ++l) {
        if (acc) acc_close(t, &acc[l]);
        for (size_t c = 0; c < cells_of(t, l); ++c) {
            double *M = t->mom[l] + c * (size_t)t->stride;
            if (!acc) {
                /* each partial sum of the moments is within B_(n-1) <= A
                 * rho^n of 0 in the norm of G */
                const double A = M[0] > 0 ? M[0] : 0.0;
                double rn = 1.0;
                for (int n = 0; n <= t->pm; ++n, rn *= t->rho[l])
                    M[t->eoff + n] = (0x1p-53 * t->cnt[l][c] + t->rnd_src[n]) * A * rn * (1.0 + 1e-6);
                M[t->aoff] = 0x1p-53 * (t->cnt[l][c] + 73.0) * A * (1.0 + 1e-6);
            }
            cell_norms(t, l, M, 0, 0.0);
        }
    }
    free(acc);
}

void hier_tree_move(hier_tree *t, int i, metro_float4 old)
{
    unlink_leaf(t, i);
    link_leaf(t, i);
    mqueue q = {.n = 0};
    for (int l = 1; l < t->L; ++l) {
        mqueue_add(t, &q, l, old, -1.0, NULL);
        mqueue_add(t, &q, l, t->pos[i], 1.0, NULL);
    }
    mqueue_flush(t, &q);
    const double az = fabs((double)charge(t, old));
    for (int l = 1; l < t->L; ++l) {
        double *a = cell_of(t, l, old), *b = cell_of(t, l, t->pos[i]);
        if (b == a) {
            cell_norms(t, l, a, 2, az);
        } else {
            cell_norms(t, l, a, 1, az);
            cell_norms(t, l, b, 1, az);
        }
    }
}

double hier_own(const hier_result *r)
{
    return hier_own_bound(r->Er, (double)r->adds, r->Phi, r->E);
}

/* ---- evaluation ---------------------------------------------------------- */

typedef struct walk {
    const hier_tree *t;
    metro_float4 x;
    double xd[3];
    int skip;
    double skip_z, skip_r; /* the skipped particle's charge and distance to x */
    int skip_cell[HIER_MAX_LEVEL + 1][3];
    double theta, dcut;
    int check;
    int hi; /* orders up to p (1) or p_lo (0), per-cell tolerance tol[hi] */
    int dbl; /* the directly summed terms in double (reference = exact's refinements) */
    double tol;
    float sa_y, sa_z; /* x's hard-core radius and λ z */
    hier_result *r;
    /* far cells of one order waiting to be expanded four at a time
     * (expand4): moments, y and 1/d */
    int nb, qb;
    const double *bh[4];
    double by[4][3], bv[4];
} walk;

/* Eight partners (positions b*, charges bq, radii br) against x: the
 * float pair energy of coulomb_hs_pair (the same operations on the same
 * operands, so the same bits) into as[v] in double, |z_b| / r into ap[v]
 * in float (Phi: widened by the caller).  No branch and no select, so it
 * vectorizes: lanes to leave out are given a partner with no charge far
 * away (pad8), whose terms are exactly 0.  Returns nonzero when a lane
 * overlaps x's hard core or sits at distance 0. */
static inline __attribute__((always_inline)) int block8(float xx, float xy, float xz, float sa_y, float sa_z,
                                                        const float *bx, const float *by, const float *bz,
                                                        const float *bq, const float *br, double as[8], float ap[8])
{
    float e[8];
    int b8 = 0;
    for (int v = 0; v < 8; ++v) {
        /* metro_dist2 and coulomb_hs_pair's test, operation for operation */
        const float dx = xx - bx[v], dy = xy - by[v], dz = xz - bz[v];
        const float r2 = dx * dx + dy * dy + dz * dz;
        const float dmin = sa_y + br[v];
        b8 |= (r2 < dmin * dmin) | (r2 == 0.0f);
        const float inv = 1.0f / sqrtf(r2); /* coulomb_hs_rsqrt on the host */
        e[v] = (sa_z * bq[v]) * inv;
        ap[v] += fabsf(bq[v]) * inv;
    }
    for (int v = 0; v < 8; ++v) as[v] += (double)e[v];
    return b8;
}

/* Packed places k ... k+7 into local lanes, those at or past k1 and place
 * ks replaced by a partner with no charge 10^6 Å from x. */
static inline void pad8(const hier_tree *t, float xx, float xy, float xz, int k, int k1, int ks, float bx[8],
                        float by[8], float bz[8], float bq[8], float br[8])
{
    for (int v = 0; v < 8; ++v) {
        const int in = k + v < k1 && k + v != ks;
        bx[v] = in ? t->px[k + v] : xx + 1e6f;
        by[v] = in ? t->py[k + v] : xy;
        bz[v] = in ? t->pz[k + v] : xz;
        bq[v] = in ? t->pq[k + v] : 0.0f;
        br[v] = in ? t->pr[k + v] : 0.0f;
    }
}

/* Packed particles k0 ... k1-1 but place ks against x, eight at a time,
 * running sums per lane: our order of additions is free (DESIGN.md).
 * *sf += Σ energies (double), *phi += an upper bound of Σ |z_b| / r.
 * Returns nonzero when some partner overlaps x's hard core or sits at
 * distance 0 (the caller then looks again one by one). */
HIER_CLONES static int direct_run(const hier_tree *t, float xx, float xy, float xz, float sa_y, float sa_z, int k0,
                                  int k1, int ks, double *sf, double *phi)
{
    double as[8] = {0};
    float ap[8] = {0};
    int bad = 0, k = k0;
    for (; k < k1; k += 8) {
        if (k + 8 <= k1 && (ks < k || ks >= k + 8)) {
            bad |= block8(xx, xy, xz, sa_y, sa_z, t->px + k, t->py + k, t->pz + k, t->pq + k, t->pr + k, as, ap);
        } else {
            float bx[8], by[8], bz[8], bq[8], br[8];
            pad8(t, xx, xy, xz, k, k1, ks, bx, by, bz, bq, br);
            bad |= block8(xx, xy, xz, sa_y, sa_z, bx, by, bz, bq, br, as, ap);
        }
    }
    double s0 = 0.0, p0 = 0.0;
    for (int v = 0; v < 8; ++v) {
        s0 += as[v];
        p0 += (double)ap[v];
    }
    *sf += s0;
    /* each |z| inv within 7.5 float ulps of |z| / r, a lane's float sum of
     * n terms within n - 1 more: widened by (n + 8) 2^-23 */
    const int n = (k1 - k0 + 7) / 8;
    *phi += p0 * (1.0 + (double)(n + 8) * 0x1p-23);
    return bad;
}

/* A leaf's particles, as the reference computes them: the float pair
 * energy of coulomb_hs_pair (hard-core test included), summed into Sf in
 * double; Phi and Phid get |z_b| / r from the same float distance, widened
 * by 1e-6 (more than its rounding). */
/* The packed particles k0 ... k1-1 but place ks against x in double:
 * (λ z_a z_b) / sqrt(r^2) from the float positions (hier_exact_r2), each
 * within HIER_EXACT_TERM of the exact term, four running sums */
static double direct_double(const hier_tree *t, metro_float4 x, float sa_z, int k0, int k1, int ks)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    int m = 0;
    for (int k = k0; k < k1; ++k) {
        if (k == ks) continue;
        acc[m++ & 3] += (double)sa_z * (double)t->pq[k] / sqrt(hier_exact_r2(x, t->px[k], t->py[k], t->pz[k]));
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static void direct(walk *w, size_t c)
{
    const hier_tree *t = w->t;
    hier_result *r = w->r;
    const float xx = w->x.x, xy = w->x.y, xz = w->x.z, sa_y = w->sa_y, sa_z = w->sa_z;
    /* the packed particles, the skipped one left out by its place */
    const int k0 = t->start[c], k1 = k0 + t->count[c];
    const int ks = (w->skip >= 0 && t->leaf[w->skip] == (int)c) ? t->slot[w->skip] : -1;
    double sf = 0.0, phi = 0.0;
    const int bad = direct_run(t, xx, xy, xz, sa_y, sa_z, k0, k1, ks, &sf, &phi);
    if (bad) { /* which one, and how */
        for (int k = k0; k < k1; ++k) {
            if (k == ks) continue;
            const float dx = xx - t->px[k], dy = xy - t->py[k], dz = xz - t->pz[k];
            const float r2 = dx * dx + dy * dy + dz * dz;
            const float dmin = sa_y + t->pr[k];
            if (r2 == 0.0f) {
                r->degenerate = 1; /* the reference would form inf * 0 or inf / 0 */
                return;
            }
            if (r2 < dmin * dmin) {
                if (w->check) r->overlap = 1;
                else r->degenerate = 1; /* never for an allowed configuration */
                return;
            }
        }
    }
    long m = k1 - k0 - (ks >= 0);
    if (w->dbl) sf = direct_double(t, w->x, sa_z, k0, k1, ks); /* the float sum served the tests above */
    /* the overflow list: particles that moved into a full leaf */
    for (int j = t->head[c]; j >= 0; j = t->next[j]) {
        if (j == w->skip) continue;
        const metro_float4 b = t->pos[j];
        const metro_float4 sb = t->prm->sp[coulomb_hs_species(b.w)];
        const float r2 = metro_dist2(w->x, b);
        const float dmin = sa_y + sb.y;
        if (r2 < dmin * dmin || r2 == 0.0f) {
            if (r2 == 0.0f) r->degenerate = 1;
            else if (w->check) r->overlap = 1;
            else r->degenerate = 1;
            return;
        }
        const float inv = coulomb_hs_rsqrt(r2);
        sf += w->dbl ? (double)sa_z * (double)sb.x / sqrt(hier_exact_r2(w->x, b.x, b.y, b.z))
                     : (double)((sa_z * sb.x) * inv);
        phi += fabs((double)sb.x) * (double)inv;
        ++m;
    }
    /* Phi and Phid: |z_b| / r from the float distance, widened by 1e-6
     * (more than its rounding) */
    r->Sf += sf;
    r->Phi += phi * (1.0 + 1e-6);
    r->Phid += phi * (1.0 + 1e-6);
    r->adds += m + 10; /* a lane's share, the lanes' sum, the leaf's total into Sf */
    r->direct += m;
}

/* The expansion of one far cell at y = x - c to order q (hier_math.h) */
static double expand(const hier_tree *t, const double *H, const double y[3], double inv, int q)
{
    return hier_expand(t->ic1, &t->ic2[0][0], H, y, inv, q);
}

/* expand() for four cells at once, lane by lane the same operations (so
 * the same values), so that the recurrences vectorize across the cells. */
HIER_CLONES static void expand4(const hier_tree *t, const double *const H[4], const double y[4][3],
                                const double inv[4], int q, double out[4])
{
    const v4d iv = {inv[0], inv[1], inv[2], inv[3]};
    const v4d inv2 = iv * iv;
    const v4d ux = (v4d){y[0][0], y[1][0], y[2][0], y[3][0]} * inv2,
              uy = (v4d){y[0][1], y[1][1], y[2][1], y[3][1]} * inv2,
              uz = (v4d){y[0][2], y[1][2], y[2][2], y[3][2]} * inv2;
    const v4d zero = {0.0, 0.0, 0.0, 0.0};
    v4d i0 = iv, i1 = zero;
    v4d acc = (v4d){H[0][0], H[1][0], H[2][0], H[3][0]} * i0;
    for (int n = 1; n <= q; ++n) {
        const v4d in = t->ic1[n] * uz * i0 - t->ic2[n][0] * inv2 * i1;
        i1 = i0;
        i0 = in;
        const int k = n * n;
        acc += (v4d){H[0][k], H[1][k], H[2][k], H[3][k]} * in;
    }
    v4d mr = iv, mi = zero, acc2 = zero;
    for (int m = 1; m <= q; ++m) {
        const double f = 2.0 * m - 1.0;
        const int off = m * m + 2 * m - 1;
        const v4d nr = f * (ux * mr - uy * mi), ni = f * (ux * mi + uy * mr);
        mr = nr;
        mi = ni;
        v4d ar = nr, ai = ni, br = zero, bi = zero;
        v4d am = (v4d){H[0][off], H[1][off], H[2][off], H[3][off]} * ar +
                 (v4d){H[0][off + 1], H[1][off + 1], H[2][off + 1], H[3][off + 1]} * ai;
        for (int n = m + 1; n <= q; ++n) {
            const v4d e1 = t->ic1[n] * uz, e2 = t->ic2[n][m] * inv2;
            const v4d xr = e1 * ar - e2 * br, xi = e1 * ai - e2 * bi;
            br = ar;
            bi = ai;
            ar = xr;
            ai = xi;
            const int k = n * n + 2 * m - 1;
            am += (v4d){H[0][k], H[1][k], H[2][k], H[3][k]} * xr +
                  (v4d){H[0][k + 1], H[1][k + 1], H[2][k + 1], H[3][k + 1]} * xi;
        }
        acc2 += am;
    }
    const v4d res = acc + 2.0 * acc2;
    for (int v = 0; v < 4; ++v) out[v] = res[v];
}

/* A far cell's expansion: into the batch of four (expanded when full or
 * when the order changes), or at once. */
static void far_expand(walk *w, const double *H, const double y[3], double v, int q)
{
    if (w->nb > 0 && q != w->qb) { /* another order: expand the waiting ones singly */
        for (int b = 0; b < w->nb; ++b) w->r->S += expand(w->t, w->bh[b], w->by[b], w->bv[b], w->qb);
        w->nb = 0;
    }
    w->qb = q;
    w->bh[w->nb] = H;
    w->by[w->nb][0] = y[0];
    w->by[w->nb][1] = y[1];
    w->by[w->nb][2] = y[2];
    w->bv[w->nb] = v;
    if (++w->nb == 4) {
        double out[4];
        expand4(w->t, w->bh, (const double(*)[3])w->by, w->bv, q, out);
        w->r->S += (out[0] + out[1]) + (out[2] + out[3]);
        w->nb = 0;
    }
}

/* An upper bound of Σ_j |z_j| / |x - r_j| over a far cell, and its
 * truncation bound at order q (hier_math.h) */
static double phi_bound(const hier_tree *t, const double *M, const double y[3], double v, double idr, double rho)
{
    const double dA = M[t->aoff];
    return hier_phi(M, t->doff, t->phik, y, v, idr, rho, dA, 1.7320508075688774 * dA * (1.0 + 1e-6));
}

static double trunc_bound(const hier_tree *t, const double *M, double v, double idr, int q)
{
    return hier_trunc(M + 1, t->pm, v, idr, q);
}

/* Every leaf under cell (ix, iy, iz) of level l, directly. */
static void direct_all(walk *w, int l, int ix, int iy, int iz)
{
    const hier_tree *t = w->t;
    if (l == t->L) {
        direct(w, cell_at(ix, iy, iz));
        return;
    }
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
            for (int e = 0; e < 2; ++e) {
                direct_all(w, l + 1, 2 * ix + a, 2 * iy + b, 2 * iz + e);
                if (w->r->overlap || w->r->degenerate) return;
            }
}

static void visit(walk *w, int l, int ix, int iy, int iz)
{
    const hier_tree *t = w->t;
    const size_t c = cell_at(ix, iy, iz);
    if (l == t->L) {
        if (t->count[c] == 0 && t->head[c] < 0) return;
    } else if (l > 0 && t->cnt[l][c] == 0) {
        return;
    }
    if (l > 0 && l < t->L) {
        const double y[3] = {w->xd[0] - centre(t, l, ix), w->xd[1] - centre(t, l, iy), w->xd[2] - centre(t, l, iz)};
        const double d = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
        const double rho = t->rho[l];
        if (rho <= w->theta * d && d - rho >= w->dcut) {
            /* a far cell of few particles costs less summed directly (and
             * then carries no truncation error) */
            if (t->cnt[l][c] <= t->direct_max && l >= t->L - 2) {
                direct_all(w, l, ix, iy, iz);
                return;
            }
            const double *M = t->mom[l] + c * (size_t)t->stride;
            hier_result *r = w->r;
            /* the lowest order whose truncation bound is within tol of the
             * cell's share of Phi (tol = 0: the highest), at most p or p_lo */
            const double A = M[0] > 0 ? M[0] : 0.0;
            const int qmax = w->hi ? t->p : t->p_lo;
            int q = qmax;
            /* one division each, shared by the bound, Phi and the expansion */
            const double v = 1.0 / d, idr = 1.0 / (d - rho);
            double Eq = trunc_bound(t, M, v, idr, q);
            if (w->tol > 0.0) {
                const double want = w->tol * A * idr;
                for (int qq = 0; qq < qmax; ++qq) {
                    const double e = trunc_bound(t, M, v, idr, qq);
                    if (e <= want) {
                        q = qq;
                        Eq = e;
                        break;
                    }
                }
            }
            far_expand(w, M + t->moff, y, v, q);
            r->E += Eq;
            r->Er += hier_round(M + t->roff, v, q);
            const double phc = phi_bound(t, M, y, v, idr, rho);
            r->Phi += phc;
            r->Phif += phc;
            r->adds += 3; /* the batch's pair sums, then S */
            r->cells++;
            if (w->skip >= 0 && w->skip_cell[l][0] == ix && w->skip_cell[l][1] == iy && w->skip_cell[l][2] == iz) {
                /* the skipped particle is inside this cell's moments: its
                 * term, from a distance within 4.5u and one division, is
                 * within 5.5u */
                r->S -= w->skip_z / w->skip_r;
                r->Er += 6.0 * 0x1p-53 * fabs(w->skip_z) / w->skip_r;
                r->adds += 1;
            }
            return;
        }
    }
    if (l == t->L) {
        direct(w, c);
        return;
    }
    /* the eight children lie side by side (Morton order, cell_at): ask for
     * their first lines at once, so that their misses overlap instead of
     * each waiting behind its elder siblings' work */
    const size_t c8 = 8 * c;
    if (l + 1 < t->L) {
        __builtin_prefetch(&t->cnt[l + 1][c8]);
        const char *M8 = (const char *)(t->mom[l + 1] + c8 * (size_t)t->stride);
        for (int k = 0; k < 8; ++k) __builtin_prefetch(M8 + (size_t)k * (size_t)t->stride * sizeof(double));
    } else {
        __builtin_prefetch(&t->count[c8]);
        __builtin_prefetch(&t->start[c8]);
        __builtin_prefetch(&t->head[c8]);
    }
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
            for (int e = 0; e < 2; ++e) {
                visit(w, l + 1, 2 * ix + a, 2 * iy + b, 2 * iz + e);
                if (w->r->overlap || w->r->degenerate) return;
            }
}

void hier_eval(const hier_tree *t, metro_float4 x, int skip, metro_float4 skip_at, double theta, double dcut,
               int check_overlap, int hi_order, int exact_near, hier_result *r)
{
    memset(r, 0, sizeof *r);
    walk w;
    w.t = t;
    w.x = x;
    w.xd[0] = x.x;
    w.xd[1] = x.y;
    w.xd[2] = x.z;
    w.skip = skip;
    w.theta = theta;
    w.dcut = dcut;
    w.check = check_overlap;
    w.hi = hi_order;
    w.dbl = exact_near;
    w.tol = t->tol[hi_order ? 1 : 0];
    w.sa_y = t->prm->sp[coulomb_hs_species(x.w)].y;
    w.sa_z = t->prm->sp[coulomb_hs_species(x.w)].z;
    w.r = r;
    w.skip_z = 0.0;
    w.skip_r = 1.0;
    if (skip >= 0) {
        w.skip_z = (double)charge(t, skip_at);
        const double dx = w.xd[0] - (double)skip_at.x, dy = w.xd[1] - (double)skip_at.y,
                     dz = w.xd[2] - (double)skip_at.z;
        w.skip_r = sqrt(dx * dx + dy * dy + dz * dz);
        for (int l = 0; l <= t->L; ++l) {
            w.skip_cell[l][0] = hier_coord(t, l, skip_at.x);
            w.skip_cell[l][1] = hier_coord(t, l, skip_at.y);
            w.skip_cell[l][2] = hier_coord(t, l, skip_at.z);
        }
        /* x at the skipped particle's own position: the skip is never in a
         * far cell then (the cell holding x is always opened) */
        if (w.skip_r == 0.0) w.skip_r = 1.0;
    }
    w.nb = 0;
    w.qb = 0;
    visit(&w, 0, 0, 0, 0);
    for (int b = 0; b < w.nb; ++b) r->S += expand(t, w.bh[b], w.by[b], w.bv[b], w.qb);
}

/* ---- the exact pass (hier_exact) ------------------------------------------ */

/* The packed particles k0 ... k1-1 of one leaf, none of them the skipped
 * one.  Eight running sums, so that the float part vectorizes: our own
 * order of the additions is free (DESIGN.md: any order is within the
 * bound).  Returns nonzero when some distance is 0 or overlaps. */
static inline __attribute__((always_inline)) int exact8(const float x[3], const float y[3], float sa_y, float sa_z,
                                                        const float *bx, const float *by, const float *bz,
                                                        const float *bq, const float *br, double acc[8],
                                                        double aab[8])
{
    double dd[8];
    int b8 = 0;
    for (int v = 0; v < 8; ++v) {
        const float tx = x[0] - bx[v], ty = x[1] - by[v], tz = x[2] - bz[v];
        const float ox = y[0] - bx[v], oy = y[1] - by[v], oz = y[2] - bz[v];
        const float rt2 = tx * tx + ty * ty + tz * tz, ro2 = ox * ox + oy * oy + oz * oz;
        const float dmin = sa_y + br[v], dm2 = dmin * dmin;
        b8 |= (rt2 < dm2) | (ro2 < dm2) | (rt2 == 0.0f) | (ro2 == 0.0f);
        const float c = sa_z * bq[v];
        const float et = c * (1.0f / sqrtf(rt2)), eo = c * (1.0f / sqrtf(ro2));
        dd[v] = (double)et - (double)eo;
    }
    for (int v = 0; v < 8; ++v) {
        acc[v] += dd[v];
        aab[v] += fabs(dd[v]);
    }
    return b8;
}

/* The packed places k0 ... k1-1 of one leaf but ks, eight at a time, the
 * last block and the skipped place padded with an uncharged partner far
 * away (exactly 0 to both sums).  Our own order of the additions is free
 * (DESIGN.md).  Returns nonzero when some distance is 0 or overlaps. */
HIER_CLONES static int exact_run(const hier_tree *t, const float x[3], const float y[3], float sa_y, float sa_z,
                                 int k0, int k1, int ks, double acc[8], double aab[8])
{
    int bad = 0;
    for (int k = k0; k < k1; k += 8) {
        if (k + 8 <= k1 && (ks < k || ks >= k + 8)) {
            bad |= exact8(x, y, sa_y, sa_z, t->px + k, t->py + k, t->pz + k, t->pq + k, t->pr + k, acc, aab);
        } else {
            float bx[8], by[8], bz[8], bq[8], br[8];
            pad8(t, x[0], x[1], x[2], k, k1, ks, bx, by, bz, bq, br);
            bad |= exact8(x, y, sa_y, sa_z, bx, by, bz, bq, br, acc, aab);
        }
    }
    return bad;
}

int hier_exact(const hier_tree *t, metro_float4 tx, metro_float4 ox, int skip, double *sum, double *abs_sum)
{
    /* coulomb_hs_pair(p, a, b) with a = t or o (o's species: the moving
     * ion's), b the partner: r2 = metro_dist2(a, b) (a - b per coordinate),
     * the overlap test r2 < (sa.y + sb.y)^2, E = (sa.z * sb.x) * rsqrt(r2),
     * rsqrt = 1.0f / sqrtf on the host */
    const metro_float4 sa = t->prm->sp[coulomb_hs_species(ox.w)];
    const float x[3] = {tx.x, tx.y, tx.z}, y[3] = {ox.x, ox.y, ox.z};
    double acc[8] = {0}, aab[8] = {0};
    const size_t nl = cells_of(t, t->L);
    const int skip_leaf = skip >= 0 ? t->leaf[skip] : -1;
    const int ks = skip >= 0 ? t->slot[skip] : -1;
    for (size_t c = 0; c < nl; ++c) {
        const int k0 = t->start[c], k1 = k0 + t->count[c];
        if (exact_run(t, x, y, sa.y, sa.z, k0, k1, (int)c == skip_leaf ? ks : -1, acc, aab)) return -1;
        for (int j = t->head[c]; j >= 0; j = t->next[j]) {
            if (j == skip) continue;
            const metro_float4 b = t->pos[j];
            const metro_float4 sb = t->prm->sp[coulomb_hs_species(b.w)];
            const float rt2 = metro_dist2(tx, b), ro2 = metro_dist2(ox, b);
            const float dmin = sa.y + sb.y;
            if (rt2 < dmin * dmin || ro2 < dmin * dmin || rt2 == 0.0f || ro2 == 0.0f) return -1;
            const float cc = sa.z * sb.x;
            const double d = (double)(cc * coulomb_hs_rsqrt(rt2)) - (double)(cc * coulomb_hs_rsqrt(ro2));
            acc[0] += d;
            aab[0] += fabs(d);
        }
    }
    double s = 0.0, a = 0.0;
    for (int v = 0; v < 8; ++v) {
        s += acc[v];
        a += aab[v];
    }
    *sum = s;
    *abs_sum = a;
    return 0;
}

/* ---- reference = exact: the exact pass and the last resort ---------------- */

/* hi + lo += x, hi exact (Knuth's TwoSum: the rounding error of hi + x is
 * exactly e), lo rounding: L such additions of terms of Σ|x| <= A err by at
 * most L^2 u^2 A (each |e| <= u A, so |lo| <= L u A, each rounding of lo
 * at most u |lo|) */
static inline void dd_add(double *hi, double *lo, double x)
{
    const double s = *hi + x, bp = s - *hi, e = (*hi - (s - bp)) + (x - bp);
    *hi = s;
    *lo += e;
}

int hier_exact_ideal(const hier_tree *t, metro_float4 tx, metro_float4 ox, int skip, double *sum, double *abs_sum,
                     double *path)
{
    const metro_float4 sa = t->prm->sp[coulomb_hs_species(ox.w)];
    const double lz = (double)sa.z;
    double hi = 0.0, lo = 0.0, A = 0.0;
    int bad = 0, longest = 0;
    double adds = 0.0;
    const size_t nl = cells_of(t, t->L);
    const int skip_leaf = skip >= 0 ? t->leaf[skip] : -1;
    const int ks = skip >= 0 ? t->slot[skip] : -1;
    for (size_t c = 0; c < nl; ++c) {
        const int k0 = t->start[c], k1 = k0 + t->count[c], kx = (int)c == skip_leaf ? ks : -1;
        if (k1 > k0) {
            double acc[4] = {0.0, 0.0, 0.0, 0.0};
            int m = 0;
            for (int k = k0; k < k1; ++k) {
                if (k == kx) continue;
                const double dm = ((double)sa.y + (double)t->pr[k]) * (1.0 + 1e-6);
                acc[m++ & 3] += hier_ideal_delta(lz * (double)t->pq[k], tx, ox, t->px[k], t->py[k], t->pz[k],
                                                 dm * dm, &A, &bad);
            }
            /* a lane adds ceil(m / 4) terms, then two levels */
            longest = (m + 3) / 4 + 2 > longest ? (m + 3) / 4 + 2 : longest;
            dd_add(&hi, &lo, (acc[0] + acc[1]) + (acc[2] + acc[3]));
            adds += 1.0;
        }
        for (int j = t->head[c]; j >= 0; j = t->next[j]) {
            if (j == skip) continue;
            const metro_float4 b = t->pos[j];
            const metro_float4 sb = t->prm->sp[coulomb_hs_species(b.w)];
            const double dm = ((double)sa.y + (double)sb.y) * (1.0 + 1e-6);
            dd_add(&hi, &lo, hier_ideal_delta(lz * (double)sb.x, tx, ox, b.x, b.y, b.z, dm * dm, &A, &bad));
            adds += 1.0;
        }
    }
    if (bad) return -1;
    *sum = hi + lo;
    *abs_sum = A;
    /* the double-double part's L^2 u^2 A as a height: L^2 u */
    *path = (double)longest + adds * adds * 0x1p-53;
    return 0;
}

int hier_ideal_reference(const coulomb_hs_params *p, const metro_float4 *pos, int n, int i, metro_float4 t, float u,
                         double *de)
{
    *de = INFINITY;
    if (coulomb_hs_external(p, t) != 0.0f) return 0;
    const metro_float4 o = pos[i], sa = p->sp[coulomb_hs_species(o.w)];
    long double hi = 0.0L, lo = 0.0L, A = 0.0L;
    int up = 0, down = 0; /* infinite terms of either sign: point charges at one place */
    for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const metro_float4 b = pos[j], sb = p->sp[coulomb_hs_species(b.w)];
        const float dmin = sa.y + sb.y;
        if (metro_dist2(t, b) < dmin * dmin) return 0; /* the hard cores: the reference's +inf */
        const long double c = (long double)sa.z * (long double)sb.x;
        if (c == 0.0L) continue;
        const long double tx = (long double)t.x - b.x, ty = (long double)t.y - b.y, tz = (long double)t.z - b.z;
        const long double ox = (long double)o.x - b.x, oy = (long double)o.y - b.y, oz = (long double)o.z - b.z;
        const long double rt2 = tx * tx + ty * ty + tz * tz, ro2 = ox * ox + oy * oy + oz * oz;
        if (rt2 == 0.0L || ro2 == 0.0L) {
            up += (rt2 == 0.0L && c > 0) || (ro2 == 0.0L && c < 0);
            down += (rt2 == 0.0L && c < 0) || (ro2 == 0.0L && c > 0);
            continue;
        }
        const long double et = c / sqrtl(rt2), eo = c / sqrtl(ro2), d = et - eo;
        A += fabsl(et) + fabsl(eo);
        const long double s = hi + d, bp = s - hi, e = (hi - (s - bp)) + (d - bp);
        hi = s;
        lo += e;
    }
    if (up || down) { /* ±∞, or ∞ - ∞: rejected as metro_accept rejects NaN */
        *de = up && down ? NAN : up ? INFINITY : -INFINITY;
        return !up;
    }
    const long double s = hi + lo, ul = 0x1p-64L, nn = (long double)n;
    const long double eps = ((6.5L + 2.0L) * ul + nn * nn * ul * ul) * A * (1.0L + 1e-6L) + ul * fabsl(s);
    const long double T = -logl((long double)u), dT = 0x1p-58L * (1.0L + T);
    *de = (double)s;
    if (s + eps <= 0.0L || s + eps <= T - dT) return 1;
    if (s - eps >= T + dT) return 0;
    return -1;
}
