/* hier_local — a design study for issue 13 (no sampler uses it yet):
 * would a far field kept between batches as local expansions decide moves
 * as the first look does, and what would each place still sum directly?
 *
 * On the paper's 3:-1 electrolyte (PHYSICS.md §2: cation density
 * 1.1447e-6 Å^-3, λ_B = 7.117 Å) at N ions placed at random in the ball
 * (points, every fourth a cation; hard cores change little at this
 * density), for K random moves (a particle and a trial in the sampler's
 * default cube of side 2R/3, kept inside the ball), both places of each
 * move get
 *   first   the first look's truncation bound E (hier_eval at order 8,
 *           theta 0.65, the sampler's defaults for the GPU's runs) and its
 *           far cells and direct partners;
 *   local   the truncation bound of a far field from local expansions of
 *           order p about the centres of the place's ancestor cells, level
 *           2 to the leaves (L, the sampler's depth for 32 a leaf), each fed
 *           by its interaction list: the cells of its level whose parent is
 *           within b cells of its parent (Chebyshev) but which are not
 *           within b cells of it (189 a level for b = 1, 875 for b = 2);
 *           the leaves within b of the place's leaf are summed directly.
 *           Each source's bound is the Taylor remainder of 1/|x - s| about
 *           the centre c, |z| / (d - r) (r / d)^(p+1), d = |s - c|,
 *           r = |x - c| (the tightest per-source form: a cell-level
 *           bound, which an implementation would use, is looser).
 * Both bounds are in units of Σ |z| / distance, for the move's two places
 * together.  Prints per (b, p) the median and 90th percentile of
 * local / first over the moves, the direct partners a place, and what
 * keeping the expansions up to date would cost a batch of 1024 moves
 * (~1,040 places moved in or out: half accepted) at (p + 1)^2 terms of
 * ~18 flops per place and interaction cell (the recurrence and the
 * product).  Then, for the first K2 moves, the expansions themselves
 * (local_norms): their coefficients to degree 14, the estimate to degree
 * 8 or 12 against the exact sum over the same sources, and their bound
 * from the coefficients' norms and the sources' tail, as the tree bounds
 * its far cells, against the tree's own bounds of the first look (order
 * 8) and the refined look (order 12 at 0.7 theta); every error must lie
 * within its bound (else exit status 1).  Each layout must count every
 * other particle once (else exit status 1).
 *
 *   hier_local [N [K [seed [K2]]]]     defaults 1048576 200 1 min(K, 20)
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hier_math.h"
#include "hier_tree.h"

#define CATION_DENSITY 1.1447e-6 /* Å^-3 */

static double urand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1p-53;
}

static coulomb_hs_params params_3to1(double R)
{
    coulomb_hs_params p;
    memset(&p, 0, sizeof p);
    const double z[2] = {3, -1};
    for (int s = 0; s < METRO_MAX_SPECIES; ++s) {
        const int t = s < 2 ? s : 0;
        const double rc = R - 3.75;
        p.sp[s] = metro_f4((float)z[t], 3.75f, (float)(7.117 * z[t]), (float)(rc * rc));
    }
    p.nspecies = 2;
    p.bjerrum = 7.117f;
    p.cell_radius = (float)R;
    return p;
}

static metro_float4 in_ball(unsigned long long *s, double R, float w)
{
    for (;;) {
        const double x = (2 * urand(s) - 1) * R, y = (2 * urand(s) - 1) * R, z = (2 * urand(s) - 1) * R;
        if (x * x + y * y + z * z <= R * R) return metro_f4((float)x, (float)y, (float)z, w);
    }
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[(int)(q * (n - 1) + 0.5)];
}

/* The leaves' particles, bucketed (counting sort) */
typedef struct {
    int L, m;         /* leaf level, leaves a side */
    double Rt, h;     /* cube half side, leaf side */
    int *start, *idx; /* leaf c's particles: idx[start[c] .. start[c + 1]) */
    int *buf;         /* a cell's particles (cell_particles), n places */
} grid;

static int cell_of(const grid *g, int l, double v)
{
    const int ml = 1 << l;
    int c = (int)floor((v + g->Rt) / (2.0 * g->Rt / ml));
    return c < 0 ? 0 : c >= ml ? ml - 1 : c;
}

/* The particles of level-l cell (cx, cy, cz) but skip, leaf by leaf, into
 * g->buf; returns how many */
static int cell_particles(const grid *g, int l, int cx, int cy, int cz, int skip)
{
    const int span = 1 << (g->L - l);
    int cnt = 0;
    for (int u = cx * span; u < (cx + 1) * span; ++u)
        for (int v = cy * span; v < (cy + 1) * span; ++v)
            for (int w = cz * span; w < (cz + 1) * span; ++w) {
                const int leaf = (u * g->m + v) * g->m + w;
                for (int k = g->start[leaf]; k < g->start[leaf + 1]; ++k)
                    if (g->idx[k] != skip) g->buf[cnt++] = g->idx[k];
            }
    return cnt;
}

/* Level l's cells around cell c for buffer b <= 2: the children of the
 * cells within b of c's parent (Chebyshev), each with [3] = whether it is
 * within b of c itself (a finer level's, or at the leaves summed directly);
 * the others are c's interaction list.  Returns how many */
#define HL_AROUND 1000 /* (2 (2b + 1))^3 at b = 2 */
static int around(int l, const int c[3], int b, int (*cells)[4])
{
    const int ml = 1 << l;
    int lo[3], hi[3], k = 0;
    for (int a = 0; a < 3; ++a) {
        lo[a] = 2 * ((c[a] >> 1) - b);
        hi[a] = 2 * ((c[a] >> 1) + b) + 1;
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] > ml - 1) hi[a] = ml - 1;
    }
    for (int dx = lo[0]; dx <= hi[0]; ++dx)
        for (int dy = lo[1]; dy <= hi[1]; ++dy)
            for (int dz = lo[2]; dz <= hi[2]; ++dz) {
                const int ax = abs(dx - c[0]), ay = abs(dy - c[1]), az = abs(dz - c[2]);
                const int ch = ax > ay ? (ax > az ? ax : az) : (ay > az ? ay : az);
                cells[k][0] = dx;
                cells[k][1] = dy;
                cells[k][2] = dz;
                cells[k][3] = ch <= b;
                ++k;
            }
    return k;
}

/* The local far field's bound at x (orders p8 and p12 in one pass) and its
 * direct partners, buffer b; particle `skip` left out */
static void local_bound(const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm, double x[3], int skip,
                        int b, double out[2], long *direct, long *seen)
{
    double e8 = 0.0, e12 = 0.0;
    long dir = 0, far = 0;
    for (int l = 2; l <= g->L; ++l) {
        const double hl = 2.0 * g->Rt / (1 << l);
        const int c[3] = {cell_of(g, l, x[0]), cell_of(g, l, x[1]), cell_of(g, l, x[2])};
        const double cc[3] = {-g->Rt + (c[0] + 0.5) * hl, -g->Rt + (c[1] + 0.5) * hl, -g->Rt + (c[2] + 0.5) * hl};
        const double r = sqrt((x[0] - cc[0]) * (x[0] - cc[0]) + (x[1] - cc[1]) * (x[1] - cc[1]) +
                              (x[2] - cc[2]) * (x[2] - cc[2]));
        static int cells[HL_AROUND][4];
        const int nc = around(l, c, b, cells);
        for (int e = 0; e < nc; ++e) {
            if (cells[e][3] && l < g->L) continue; /* a finer level's */
            const int cnt = cell_particles(g, l, cells[e][0], cells[e][1], cells[e][2], skip);
            if (cells[e][3]) { /* l == L: summed directly */
                dir += cnt;
                continue;
            }
            far += cnt;
            for (int k = 0; k < cnt; ++k) {
                const int j = g->buf[k];
                const double sx = pos[j].x - cc[0], sy = pos[j].y - cc[1], sz = pos[j].z - cc[2];
                const double d = sqrt(sx * sx + sy * sy + sz * sz), q = r / d;
                const double az = fabs((double)prm->sp[coulomb_hs_species(pos[j].w)].x);
                double q9 = q * q * q;
                q9 = q9 * q9 * q9;
                const double q13 = q9 * q * q * q * q, f = az / (d - r);
                e8 += f * q9;
                e12 += f * q13;
            }
        }
    }
    out[0] = e8;
    out[1] = e12;
    *direct = dir;
    *seen = far + dir;
}

/* ---- the local expansions themselves, bounded from their norms ---------- *
 *
 * With R_n^m(y) = r^n P_n^m(cos t) e^(i m f) / (n+m)! and I_n^m(w) = (n-m)!
 * P_n^m(cos t') e^(i m f') / |w|^(n+1) (m >= 0, P without the Condon-Shortley
 * phase), Legendre's addition theorem gives, for |y| < |w|,
 *   1 / |w - y| = Σ_n [R_n^0(y) I_n^0(w) + 2 Σ_(m>=1) Re(conj(R_n^m(y)) I_n^m(w))],
 * so a cell's local coefficients are L_n^m = Σ_s z_s I_n^m(s - c), and the
 * degree-n term at x = c + y is at most r^n H_n, H_n = sqrt(|L_n^0|^2 / n!^2
 * + 2 Σ_(m>=1) |L_n^m|^2 / ((n+m)! (n-m)!)) (Cauchy-Schwarz, with Σ_m
 * (n+m)! (n-m)! |R_n^m|^2 = r^(2n) by the same theorem at angle 0).  Beyond
 * the kept degrees HL_PM, the sources' own tail Σ_s |z_s| r^(PM+1) /
 * (d_s^(PM+1) (d_s - r)), at most r^(PM+1) Σ_s |z_s| / (d_s^(PM+1) (d_s -
 * rho)) with rho the cell's radius: one number a cell.  These are what an
 * implementation would store (the tree's first look bounds its far cells
 * the same way, from its moments' norms). */
#define HL_PM 14 /* the degrees kept: the tree's for orders 8 and 12 (12 + HIER_EXTRA) */
#define HL_W (HL_PM + 1)

/* P_n^m(ct) for 0 <= m <= n <= HL_PM (st = sin t >= 0) */
static void legendre(double ct, double st, double *P)
{
    double pmm = 1.0;
    for (int m = 0; m <= HL_PM; ++m) {
        if (m > 0) pmm *= (2.0 * m - 1.0) * st;
        P[m * HL_W + m] = pmm;
        if (m + 1 <= HL_PM) P[(m + 1) * HL_W + m] = (2.0 * m + 1.0) * ct * pmm;
        for (int n = m + 2; n <= HL_PM; ++n)
            P[n * HL_W + m] = ((2.0 * n - 1.0) * ct * P[(n - 1) * HL_W + m] - (n + m - 1.0) * P[(n - 2) * HL_W + m]) /
                              (double)(n - m);
    }
}

/* At x: the far field of buffer b's interaction lists from local
 * expansions to degree 8 and 12 (est in long double) against the exact sum
 * over the same sources (long double), and their norm bounds; phi = Σ|z|/r
 * over those sources */
static void local_norms(const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm, const double x[3],
                        int skip, int b, double bound[2], double err[2], double *phi)
{
    static const int ps[2] = {8, 12};
    double fact[2 * HL_W + 1];
    fact[0] = 1.0;
    for (int k = 1; k <= 2 * HL_W; ++k) fact[k] = fact[k - 1] * k;
    long double est[2] = {0.0L, 0.0L}, exact = 0.0L, ph = 0.0L;
    double bnd[2] = {0.0, 0.0};
    static double P[HL_W * HL_W];
    static double complex Lc[HL_W * HL_W];
    for (int l = 2; l <= g->L; ++l) {
        const double hl = 2.0 * g->Rt / (1 << l), rcell = 0.5 * sqrt(3.0) * hl;
        const int c[3] = {cell_of(g, l, x[0]), cell_of(g, l, x[1]), cell_of(g, l, x[2])};
        const double cc[3] = {-g->Rt + (c[0] + 0.5) * hl, -g->Rt + (c[1] + 0.5) * hl, -g->Rt + (c[2] + 0.5) * hl};
        memset(Lc, 0, sizeof Lc);
        double ktail = 0.0;
        static int cells[HL_AROUND][4];
        const int nc = around(l, c, b, cells);
        for (int e = 0; e < nc; ++e) {
            if (cells[e][3]) continue; /* a finer level's, or near */
            const int cnt = cell_particles(g, l, cells[e][0], cells[e][1], cells[e][2], skip);
            for (int k = 0; k < cnt; ++k) {
                const int j = g->buf[k];
                const double z = (double)prm->sp[coulomb_hs_species(pos[j].w)].x;
                const long double ex = (long double)pos[j].x - x[0], ey = (long double)pos[j].y - x[1],
                                  ez = (long double)pos[j].z - x[2];
                const long double dist = sqrtl(ex * ex + ey * ey + ez * ez);
                exact += z / dist;
                ph += fabs(z) / dist;
                const double wx = pos[j].x - cc[0], wy = pos[j].y - cc[1], wz = pos[j].z - cc[2];
                const double rho = sqrt(wx * wx + wy * wy + wz * wz), rxy = sqrt(wx * wx + wy * wy);
                legendre(wz / rho, rxy / rho, P);
                const double complex e1 = rxy > 0.0 ? (wx + I * wy) / rxy : 1.0;
                double complex em = 1.0;
                for (int m = 0; m <= HL_PM; ++m) {
                    double rinv = pow(rho, -(double)(m + 1));
                    for (int n = m; n <= HL_PM; ++n) {
                        Lc[n * HL_W + m] += z * fact[n - m] * P[n * HL_W + m] * rinv * em;
                        rinv /= rho;
                    }
                    em *= e1;
                }
                ktail += fabs(z) / (pow(rho, HL_PM + 1.0) * (rho - rcell));
            }
        }
        /* the place in its cell */
        const double yx = x[0] - cc[0], yy = x[1] - cc[1], yz = x[2] - cc[2];
        const double r = sqrt(yx * yx + yy * yy + yz * yz), rxy = sqrt(yx * yx + yy * yy);
        if (r > 0.0) legendre(yz / r, rxy / r, P);
        else memset(P, 0, sizeof P), P[0] = 1.0;
        const double complex e1 = rxy > 0.0 ? (yx + I * yy) / rxy : 1.0;
        long double term[HL_W];
        double rn = 1.0;
        for (int n = 0; n <= HL_PM; ++n, rn *= r) {
            double complex em = 1.0;
            long double t = 0.0L;
            double h2 = 0.0;
            for (int m = 0; m <= n; ++m) {
                const double complex Rnm = rn * P[n * HL_W + m] / fact[n + m] * em, Lnm = Lc[n * HL_W + m];
                const double re = creal(conj(Rnm) * Lnm);
                t += (m ? 2.0L : 1.0L) * re;
                h2 += (m ? 2.0 : 1.0) * (creal(Lnm) * creal(Lnm) + cimag(Lnm) * cimag(Lnm)) / (fact[n + m] * fact[n - m]);
                em *= e1;
            }
            term[n] = t;
            for (int q = 0; q < 2; ++q)
                if (n > ps[q]) bnd[q] += rn * sqrt(h2);
        }
        for (int q = 0; q < 2; ++q) {
            for (int n = 0; n <= ps[q]; ++n) est[q] += term[n];
            bnd[q] += rn * ktail; /* rn = r^(PM + 1) */
        }
    }
    for (int q = 0; q < 2; ++q) {
        bound[q] = bnd[q];
        err[q] = (double)fabsl(exact - est[q]);
    }
    *phi = (double)ph;
}

/* The first look's far field with the same per-source bound: the walk's
 * test (a cell of radius rho = sqrt(3)/2 side is far when rho <= theta d
 * and d - rho >= dcut, d = |x - c|; else opened; the leaves summed
 * directly), and for each source of a far cell the multipole remainder
 * |z| / (d - s) (s / d)^(p+1), s = |s_j - c|: the like-for-like comparison
 * of the two layouts (the tree's own bound, from its cells' norms, is the
 * looser one hier_eval returns) */
static double first_ideal(const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm, const double x[3],
                          int skip, double theta, double dcut, int l, int cx, int cy, int cz, long *seen)
{
    const double hl = 2.0 * g->Rt / (1 << l), rho = 0.5 * sqrt(3.0) * hl;
    const double c[3] = {-g->Rt + (cx + 0.5) * hl, -g->Rt + (cy + 0.5) * hl, -g->Rt + (cz + 0.5) * hl};
    const double d = sqrt((x[0] - c[0]) * (x[0] - c[0]) + (x[1] - c[1]) * (x[1] - c[1]) + (x[2] - c[2]) * (x[2] - c[2]));
    if (l == g->L) { /* a near leaf: summed directly */
        *seen += cell_particles(g, l, cx, cy, cz, skip);
        return 0.0;
    }
    if (l >= 1 && rho <= theta * d && d - rho >= dcut) {
        double e = 0.0;
        const int cnt = cell_particles(g, l, cx, cy, cz, skip);
        *seen += cnt;
        for (int k = 0; k < cnt; ++k) {
            const int j = g->buf[k];
            const double sx = pos[j].x - c[0], sy = pos[j].y - c[1], sz = pos[j].z - c[2];
            const double sd = sqrt(sx * sx + sy * sy + sz * sz), q = sd / d;
            double q9 = q * q * q;
            q9 = q9 * q9 * q9;
            e += fabs((double)prm->sp[coulomb_hs_species(pos[j].w)].x) / (d - sd) * q9;
        }
        return e;
    }
    double e = 0.0;
    for (int ch = 0; ch < 8; ++ch)
        e += first_ideal(g, pos, prm, x, skip, theta, dcut, l + 1, 2 * cx + (ch >> 2), 2 * cy + ((ch >> 1) & 1),
                         2 * cz + (ch & 1), seen);
    return e;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 20, K = argc > 2 ? atoi(argv[2]) : 200;
    unsigned long long seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    const int K2 = argc > 4 ? atoi(argv[4]) : (K < 20 ? K : 20);
    if (n < 4096 || K < 1 || K2 < 1 || K2 > K) {
        fprintf(stderr, "usage: %s [N >= 4096 [K >= 1 [seed [K2, 1 ... K]]]]\n", argv[0]);
        return 2;
    }
    const double R = cbrt(3.0 * (n / 4.0) / CATION_DENSITY / (4.0 * M_PI)), Rt = R * (1 + 1e-6);
    /* the sampler's depth (hierarchical.c, leaf_level) for 32 a leaf */
    const double want = 6.0 * n / (M_PI * 32.0);
    const int L = want > 1.0 ? (int)floor(log(want) / log(8.0) + 0.5) : 0;
    const coulomb_hs_params prm = params_3to1(R);
    metro_float4 *pos = malloc((size_t)n * sizeof *pos);
    for (int i = 0; i < n; ++i) pos[i] = in_ball(&seed, R - 3.75, (float)(i % 4 != 0));
    hier_tree t;
    if (hier_tree_init(&t, pos, n, &prm, 12, 8, L, Rt)) {
        fprintf(stderr, "hier_local: out of memory\n");
        return 1;
    }
    grid g = {.L = L, .m = 1 << L, .Rt = Rt, .h = 2.0 * Rt / (1 << L)};
    const size_t nl = (size_t)g.m * g.m * g.m;
    g.start = calloc(nl + 1, sizeof *g.start);
    g.idx = malloc((size_t)n * sizeof *g.idx);
    g.buf = malloc((size_t)n * sizeof *g.buf);
    int *leaf = malloc((size_t)n * sizeof *leaf);
    for (int i = 0; i < n; ++i) {
        leaf[i] = (cell_of(&g, L, pos[i].x) * g.m + cell_of(&g, L, pos[i].y)) * g.m + cell_of(&g, L, pos[i].z);
        g.start[leaf[i] + 1]++;
    }
    for (size_t c = 0; c < nl; ++c) g.start[c + 1] += g.start[c];
    int *fill = calloc(nl, sizeof *fill);
    for (int i = 0; i < n; ++i) g.idx[g.start[leaf[i]] + fill[leaf[i]]++] = i;

    const double theta = 0.65, dcut = 7.5 * 1.001 + 1e-6, side = 2.0 * R / 3.0;
    double *ratio[2][2], *first = malloc((size_t)K * sizeof *first), *ideal = malloc((size_t)K * sizeof *ideal);
    double *iratio[2][2];
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) {
            ratio[b][p] = malloc((size_t)K * sizeof(double));
            iratio[b][p] = malloc((size_t)K * sizeof(double));
        }
    double cells = 0.0, fdirect = 0.0, ldirect[2] = {0.0, 0.0};
    /* the first K2 moves: the expansions themselves (local_norms) against
     * the tree's first look (order 8) and refined look (order 12 at 0.7
     * theta, the refined look's under reference = exact) */
    double *nratio[2][2], worst = 0.0;
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) nratio[b][p] = malloc((size_t)K2 * sizeof(double));
    for (int k = 0; k < K; ++k) {
        const int i = (int)(urand(&seed) * n);
        const metro_float4 o = pos[i];
        metro_float4 tr;
        do {
            tr = metro_f4((float)(o.x + (urand(&seed) - 0.5) * side), (float)(o.y + (urand(&seed) - 0.5) * side),
                          (float)(o.z + (urand(&seed) - 0.5) * side), o.w);
        } while ((double)tr.x * tr.x + (double)tr.y * tr.y + (double)tr.z * tr.z > (R - 3.75) * (R - 3.75));
        double ef = 0.0, ei = 0.0, el[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
        for (int s = 0; s < 2; ++s) {
            const metro_float4 x = s ? o : tr;
            hier_result r;
            hier_eval(&t, x, i, o, theta, dcut, 0, 0, 1, &r);
            ef += r.E;
            cells += (double)r.cells;
            fdirect += (double)r.direct;
            double xd[3] = {x.x, x.y, x.z};
            /* each layout must count every other particle once: a check
             * of the study's own partitions */
            long seen = 0;
            ei += first_ideal(&g, pos, &prm, xd, i, theta, dcut, 0, 0, 0, 0, &seen);
            if (seen != n - 1) {
                fprintf(stderr, "hier_local: the walk counted %ld of %d partners\n", seen, n - 1);
                return 1;
            }
            for (int b = 0; b < 2; ++b) {
                double e[2];
                long dir, lseen;
                local_bound(&g, pos, &prm, xd, i, b + 1, e, &dir, &lseen);
                if (lseen != n - 1) {
                    fprintf(stderr, "hier_local: the local layout (b = %d) counted %ld of %d partners\n", b + 1, lseen,
                            n - 1);
                    return 1;
                }
                el[b][0] += e[0];
                el[b][1] += e[1];
                ldirect[b] += (double)dir;
            }
        }
        first[k] = ef;
        ideal[k] = ei;
        if (k < K2) {
            double tree[2] = {0.0, 0.0}, nb[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
            for (int s = 0; s < 2; ++s) {
                const metro_float4 x = s ? o : tr;
                const double xd[3] = {x.x, x.y, x.z};
                hier_result r0, r1;
                hier_eval(&t, x, i, o, theta, dcut, 0, 0, 1, &r0);
                hier_eval(&t, x, i, o, 0.7 * theta, dcut, 0, 1, 1, &r1);
                tree[0] += r0.E;
                tree[1] += r1.E;
                for (int b = 0; b < 2; ++b) {
                    double bound[2], err[2], phi;
                    local_norms(&g, pos, &prm, xd, i, b + 1, bound, err, &phi);
                    for (int p = 0; p < 2; ++p) {
                        /* the bound must hold: the error of a long-double
                         * estimate against the long-double exact sum, with
                         * room for the coefficients' double rounding */
                        const double w = err[p] / (bound[p] + 1e-13 * phi);
                        if (w > worst) worst = w;
                        nb[b][p] += bound[p];
                    }
                }
            }
            for (int b = 0; b < 2; ++b)
                for (int p = 0; p < 2; ++p) nratio[b][p][k] = nb[b][p] / tree[p];
        }
        for (int b = 0; b < 2; ++b)
            for (int p = 0; p < 2; ++p) {
                ratio[b][p][k] = el[b][p] / ef;
                iratio[b][p][k] = el[b][p] / ei;
            }
    }
    printf("hier_local: N = %d, R = %.1f Å, leaves 2^%d a side (%.0f Å), %d moves (trial cube 2R/3), first look "
           "order 8 at theta %.2f: %.0f far cells and %.0f direct partners a place, truncation bound (both places) "
           "median %.3g (the same walk with per-source bounds: %.3g)\n\n",
           n, R, L, g.h, K, theta, cells / (2.0 * K), fdirect / (2.0 * K), quantile(first, K, 0.5),
           quantile(ideal, K, 0.5));
    printf("| buffer b | order p | local / first (tree's bound), median | 90th percentile | local / first "
           "(per-source both), median | 90th percentile | direct partners a place | interaction cells a level | "
           "upkeep, GFLOP a batch |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) {
            const int bb = b + 1, pp = p ? 12 : 8;
            const int il = (2 * (2 * bb + 1)) * (2 * (2 * bb + 1)) * (2 * (2 * bb + 1)) -
                           (2 * bb + 1) * (2 * bb + 1) * (2 * bb + 1);
            const double flops = 1040.0 * (L - 1) * il * (pp + 1) * (pp + 1) * 18.0;
            printf("| %d | %d | %.3g | %.3g | %.3g | %.3g | %.0f | %d | %.2f |\n", bb, pp, quantile(ratio[b][p], K, 0.5),
                   quantile(ratio[b][p], K, 0.9), quantile(iratio[b][p], K, 0.5), quantile(iratio[b][p], K, 0.9),
                   ldirect[b] / (2.0 * K), il, flops * 1e-9);
        }
    printf("\nThe expansions themselves (the first %d moves; degrees to %d kept, their norms and the sources' tail "
           "beyond bound the rest), against the tree's own bounds: the first look (order 8, theta %.2f) and the "
           "refined look (order 12, theta %.3f).  Largest error over its bound: %.3g (must be at most 1)\n\n",
           K2, HL_PM, theta, 0.7 * theta, worst);
    printf("| buffer b | order p | local bound / tree's bound at that order, median | 90th percentile |\n|---|---|---|---|\n");
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p)
            printf("| %d | %d | %.3g | %.3g |\n", b + 1, p ? 12 : 8, quantile(nratio[b][p], K2, 0.5),
                   quantile(nratio[b][p], K2, 0.9));
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) free(nratio[b][p]);
    if (worst > 1.0) {
        fprintf(stderr, "hier_local: an error exceeded its bound (%.3g of it)\n", worst);
        return 1;
    }
    hier_tree_free(&t);
    free(pos);
    free(g.start);
    free(g.idx);
    free(g.buf);
    free(leaf);
    free(fill);
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) {
            free(ratio[b][p]);
            free(iratio[b][p]);
        }
    free(first);
    free(ideal);
    return 0;
}
