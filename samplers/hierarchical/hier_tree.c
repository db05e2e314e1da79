/* hier_tree.c — the octree of hier_tree.h: lists, moments, and the
 * enclosure of the potential at a point (DESIGN.md, "The error bound"). */
#include "hier_tree.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline double ipow(double x, int e)
{
    double r = 1.0;
    for (int k = 0; k < e; ++k) r *= x;
    return r;
}

static int ncoef_of(int p)
{
    return (p + 1) * (p + 2) * (p + 3) / 6;
}

static size_t cells_of(const hier_tree *t, int l)
{
    return (size_t)t->m[l] * (size_t)t->m[l] * (size_t)t->m[l];
}

/* The multi-index tables, degree by degree (kx descending, then ky). */
static int build_indices(hier_tree *t)
{
    const int p = t->p, nc = t->ncoef;
    t->k = malloc((size_t)nc * sizeof *t->k);
    t->prev1 = malloc((size_t)nc * sizeof *t->prev1);
    t->prev2 = malloc((size_t)nc * sizeof *t->prev2);
    t->deg = malloc((size_t)nc * sizeof *t->deg);
    if (!t->k || !t->prev1 || !t->prev2 || !t->deg) return -1;
    int c = 0;
    for (int d = 0; d <= p; ++d) {
        t->deg_start[d] = c;
        for (int kx = d; kx >= 0; --kx)
            for (int ky = d - kx; ky >= 0; --ky) {
                t->k[c][0] = (signed char)kx;
                t->k[c][1] = (signed char)ky;
                t->k[c][2] = (signed char)(d - kx - ky);
                t->deg[c] = d;
                ++c;
            }
    }
    t->deg_start[p + 1] = c;
    /* the recurrence's factors -(2n - 1)/n and -(n - 1)/n */
    t->f1 = malloc((size_t)nc * sizeof *t->f1);
    t->f2 = malloc((size_t)nc * sizeof *t->f2);
    if (!t->f1 || !t->f2) return -1;
    for (int q = 0; q < nc; ++q) {
        const double n = q ? (double)t->deg[q] : 1.0;
        t->f1[q] = -(2.0 * n - 1.0) / n;
        t->f2[q] = -(n - 1.0) / n;
    }
    /* k - e_a and k - 2 e_a by search: tables are small (<= 455 entries) */
    for (int a = 0; a < nc; ++a)
        for (int ax = 0; ax < 3; ++ax)
            for (int step = 1; step <= 2; ++step) {
                int want[3] = {t->k[a][0], t->k[a][1], t->k[a][2]};
                want[ax] -= step;
                int found = nc; /* absent: the zero slot past the end (expand) */
                if (want[ax] >= 0)
                    for (int b = 0; b < nc; ++b)
                        if (t->k[b][0] == want[0] && t->k[b][1] == want[1] && t->k[b][2] == want[2]) {
                            found = b;
                            break;
                        }
                if (step == 1)
                    t->prev1[a][ax] = found;
                else
                    t->prev2[a][ax] = found;
            }
    return 0;
}

int hier_tree_init(hier_tree *t, const metro_float4 *pos, int n, const coulomb_hs_params *prm, int p, int p_lo,
                   int L, double Rt)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->p = p;
    t->ncoef = ncoef_of(p);
    t->L = L;
    t->Rt = Rt;
    t->pos = pos;
    t->prm = prm;
    t->p_lo = p_lo < 0 ? 0 : p_lo > p ? p : p_lo;
    t->ncoef_lo = ncoef_of(t->p_lo);
    t->stride = t->ncoef + p + 2; /* A, B_0 ... B_p, H */
    t->tol[0] = t->tol[1] = 0.0;
    for (int l = 0; l <= L; ++l) {
        t->m[l] = 1 << l;
        t->h[l] = 2.0 * Rt / (double)t->m[l];
        /* half the diagonal, widened a little: a coordinate rounded onto a
         * cell's face still lies within rho of its centre */
        t->rho[l] = 0.5 * sqrt(3.0) * t->h[l] * (1.0 + 1e-9);
    }
    if (build_indices(t)) return -1;
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
    free(t->k);
    free(t->prev1);
    free(t->prev2);
    free(t->deg);
    free(t->f1);
    free(t->f2);
    memset(t, 0, sizeof *t);
}

static inline float charge(const hier_tree *t, metro_float4 a)
{
    return t->prm->sp[coulomb_hs_species(a.w)].x;
}

static inline size_t cell_index(const hier_tree *t, int l, metro_float4 a)
{
    size_t ix = (size_t)hier_coord(t, l, a.x), iy = (size_t)hier_coord(t, l, a.y), iz = (size_t)hier_coord(t, l, a.z);
    return (ix * (size_t)t->m[l] + iy) * (size_t)t->m[l] + iz;
}

static inline double centre(const hier_tree *t, int l, int i)
{
    return -t->Rt + ((double)i + 0.5) * t->h[l];
}

/* Add sign * (particle a) to the moments of its cell at level l.  The
 * stored moments carry (-1)^|k|, so evaluation is a plain dot product. */
static void add_moments(hier_tree *t, int l, metro_float4 a, double sign)
{
    const int ix = hier_coord(t, l, a.x), iy = hier_coord(t, l, a.y), iz = hier_coord(t, l, a.z);
    const size_t c = ((size_t)ix * (size_t)t->m[l] + (size_t)iy) * (size_t)t->m[l] + (size_t)iz;
    double *M = t->mom[l] + c * (size_t)t->stride;
    const double z = (double)charge(t, a);
    const double sv[3] = {(double)a.x - centre(t, l, ix), (double)a.y - centre(t, l, iy),
                          (double)a.z - centre(t, l, iz)};
    const double r2 = sv[0] * sv[0] + sv[1] * sv[1] + sv[2] * sv[2];
    const double s = sqrt(r2);
    M[0] += sign * fabs(z);
    /* B_q = Σ|z| s^(q+1), q = 0 ... p: the truncation bound of every order */
    {
        double sq = s;
        for (int q = 0; q <= t->p; ++q, sq *= s) M[1 + q] += sign * fabs(z) * sq;
    }
    double *Hm = M + t->p + 2;
    /* The harmonic moments: b_k(s) = |s|^(2|k|+1) a_k(s), polynomials in s
     * from the recurrence of a_k multiplied through by |s|^(2|k|-1) (no
     * division, so a particle at the centre is fine):
     *   |k| b_k = -(2|k|-1) Σ_a s_a b_{k-e_a} - (|k|-1) |s|^2 Σ_a b_{k-2e_a}.
     * The degree-n part of 1/|y - s| is Σ_{|k|=n} (-1)^n b_k(s) y^k / |y|^(2n+1)
     * (the Legendre term |s|^n P_n / |y|^(n+1) is symmetric in s and y up to
     * the factor (|s|/|y|)^(2n+1)), so a cell stores H_k = Σ_j z_j (-1)^n b_k(s_j)
     * and a far point costs one polynomial in y (expand). */
    double bk[(HIER_MAX_ORDER + 1) * (HIER_MAX_ORDER + 2) * (HIER_MAX_ORDER + 3) / 6 + 1];
    bk[t->ncoef] = 0.0;
    bk[0] = 1.0;
    Hm[0] += sign * z;
    for (int k = 1; k < t->ncoef; ++k) {
        const int *p1 = t->prev1[k], *p2 = t->prev2[k];
        bk[k] = t->f1[k] * (sv[0] * bk[p1[0]] + sv[1] * bk[p1[1]] + sv[2] * bk[p1[2]]) +
                t->f2[k] * r2 * (bk[p2[0]] + bk[p2[1]] + bk[p2[2]]);
        const double term = z * bk[k];
        Hm[k] += (t->deg[k] & 1) ? -sign * term : sign * term;
    }
    t->cnt[l][c] += sign > 0 ? 1 : -1;
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
        t->cap[c] = t->count[c] + t->count[c] / 2 + 2;
        total += (size_t)t->cap[c];
        t->count[c] = 0;
    }
    if (total > t->packed) {
        float *q[5];
        for (int a = 0; a < 5; ++a) q[a] = malloc(total * sizeof(float));
        int *id = malloc(total * sizeof(int));
        if (!q[0] || !q[1] || !q[2] || !q[3] || !q[4] || !id) {
            /* no room to pack: every particle goes to the overflow lists */
            for (int a = 0; a < 5; ++a) free(q[a]);
            free(id);
            for (size_t c = 0; c < nl; ++c) t->cap[c] = 0;
        } else {
            free(t->px), free(t->py), free(t->pz), free(t->pq), free(t->pr), free(t->pid);
            t->px = q[0], t->py = q[1], t->pz = q[2], t->pq = q[3], t->pr = q[4], t->pid = id;
            t->packed = total;
        }
    }
    for (int i = 0; i < t->n; ++i) {
        link_leaf(t, i);
        for (int l = 1; l < t->L; ++l) add_moments(t, l, t->pos[i], 1.0);
    }
}

void hier_tree_move(hier_tree *t, int i, metro_float4 old)
{
    unlink_leaf(t, i);
    link_leaf(t, i);
    for (int l = 1; l < t->L; ++l) {
        add_moments(t, l, old, -1.0);
        add_moments(t, l, t->pos[i], 1.0);
    }
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
    double tol;
    float sa_y, sa_z; /* x's hard-core radius and λ z */
    hier_result *r;
} walk;

/* A leaf's particles one by one, as the reference computes them: the float
 * pair energy of coulomb_hs_pair (hard-core test included), summed into Sf
 * in double; Phi and Phid get |z_b| / r from the same float distance,
 * widened by 1e-6 (more than its rounding). */
static void direct(walk *w, size_t c)
{
    const hier_tree *t = w->t;
    hier_result *r = w->r;
    const float xx = w->x.x, xy = w->x.y, xz = w->x.z, sa_y = w->sa_y, sa_z = w->sa_z;
    /* the packed particles, the skipped one left out by its place */
    const int k0 = t->start[c], k1 = k0 + t->count[c];
    const int ks = (w->skip >= 0 && t->leaf[w->skip] == (int)c) ? t->slot[w->skip] : -1;
    double sf = 0.0, phi = 0.0;
    for (int k = k0; k < k1; ++k) {
        if (k == ks) continue;
        /* metro_dist2 and coulomb_hs_pair's test, operation for operation */
        const float dx = xx - t->px[k], dy = xy - t->py[k], dz = xz - t->pz[k];
        const float r2 = dx * dx + dy * dy + dz * dz;
        const float dmin = sa_y + t->pr[k];
        if (r2 < dmin * dmin || r2 == 0.0f) {
            if (r2 == 0.0f) r->degenerate = 1; /* the reference would form inf * 0 or inf / 0 */
            else if (w->check) r->overlap = 1;
            else r->degenerate = 1;            /* never for an allowed configuration */
            return;
        }
        /* coulomb_hs_pair of a pair that does not overlap: the same float
         * operations on the same operands, so the same bits */
        const float inv = coulomb_hs_rsqrt(r2);
        sf += (double)((sa_z * t->pq[k]) * inv);
        phi += fabs((double)t->pq[k]) * (double)inv;
    }
    long m = k1 - k0 - (ks >= 0);
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
        sf += (double)((sa_z * sb.x) * inv);
        phi += fabs((double)sb.x) * (double)inv;
        ++m;
    }
    /* Phi and Phid: |z_b| / r from the float distance, widened by 1e-6
     * (more than its rounding) */
    r->Sf += sf;
    r->Phi += phi * (1.0 + 1e-6);
    r->Phid += phi * (1.0 + 1e-6);
    r->adds += m;
    r->direct += m;
}

/* The expansion of one far cell at y = x - c, order p: with the harmonic
 * moments H (add_moments),
 *   Σ_{n<=p} |y|^-(2n+1) Σ_{|k|=n} H_k y^k,
 * the multi-indices in the order of build_indices (degree, then kx and ky
 * descending). */
static double expand(const double *H, const double y[3], double d, int p)
{
    double px[HIER_MAX_ORDER + 1], py[HIER_MAX_ORDER + 1], pz[HIER_MAX_ORDER + 1];
    px[0] = py[0] = pz[0] = 1.0;
    for (int e = 1; e <= p; ++e) {
        px[e] = px[e - 1] * y[0];
        py[e] = py[e - 1] * y[1];
        pz[e] = pz[e - 1] * y[2];
    }
    const double inv = 1.0 / d, inv2 = inv * inv;
    double q = inv, phi = 0.0;
    int idx = 0;
    for (int n = 0; n <= p; ++n) {
        double sn = 0.0;
        for (int kx = n; kx >= 0; --kx) {
            const double ax = px[kx];
            for (int ky = n - kx; ky >= 0; --ky) sn += H[idx++] * (ax * py[ky]) * pz[n - kx - ky];
        }
        phi += sn * q;
        q *= inv2;
    }
    return phi;
}

/* Every leaf under cell (ix, iy, iz) of level l, directly. */
static void direct_all(walk *w, int l, int ix, int iy, int iz)
{
    const hier_tree *t = w->t;
    if (l == t->L) {
        direct(w, ((size_t)ix * (size_t)t->m[l] + (size_t)iy) * (size_t)t->m[l] + (size_t)iz);
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
    const size_t c = ((size_t)ix * (size_t)t->m[l] + (size_t)iy) * (size_t)t->m[l] + (size_t)iz;
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
             * cell's share of Phi (tol = 0: the highest), at most p or p_lo.
             * Legendre remainder: each source at s <= rho from the centre
             * contributes at most |z| (s/d)^(q+1) / (d - s); B_q = Σ|z|
             * s^(q+1) is kept incrementally, so it is allowed a relative 1e-6
             * and an absolute 1e-9 A rho^(q+1), and never more than
             * A rho^(q+1), which bounds it exactly. */
            const double A = M[0] > 0 ? M[0] : 0.0;
            const int qmax = w->hi ? t->p : t->p_lo;
            const double want = w->tol * A;
            double dq = d, rq = rho, Eq = 0.0;
            int q = 0;
            for (;; ++q, dq *= d, rq *= rho) {
                const double geo = A * rq;
                double B = M[1 + q] * (1.0 + 1e-6) + 1e-9 * geo;
                if (B > geo) B = geo;
                if (B < 0) B = 0;
                Eq = B / dq; /* times 1/(d - rho) below */
                if (q == qmax || Eq <= want) break;
            }
            r->S += expand(M + t->p + 2, y, d, q);
            r->E += Eq / (d - rho);
            r->Phi += A / (d - rho);
            r->adds += (q + 1) * (q + 2) * (q + 3) / 6;
            r->cells++;
            if (w->skip >= 0 && w->skip_cell[l][0] == ix && w->skip_cell[l][1] == iy && w->skip_cell[l][2] == iz)
                r->S -= w->skip_z / w->skip_r; /* the skipped particle is inside this cell's moments */
            return;
        }
    }
    if (l == t->L) {
        direct(w, c);
        return;
    }
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
            for (int e = 0; e < 2; ++e) {
                visit(w, l + 1, 2 * ix + a, 2 * iy + b, 2 * iz + e);
                if (w->r->overlap || w->r->degenerate) return;
            }
}

void hier_eval(const hier_tree *t, metro_float4 x, int skip, metro_float4 skip_at, double theta, double dcut,
               int check_overlap, int hi_order, hier_result *r)
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
    visit(&w, 0, 0, 0, 0);
}
