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
 * product).  Then, for the first K2 moves, the expansions themselves as
 * an implementation would keep them (hier_local_fixed.c): coefficients
 * to degree 14 accumulated in 64-bit fixed point, the estimate to degree 8
 * or 12 in double, bounded by the coefficients' norms and the sources'
 * tail (truncation) and by the accumulation's, conversion's and
 * evaluation's rounding, against the tree's own bounds of the first look
 * (order 8) and the refined look (order 12 at 0.7 theta).  Exit status 1
 * unless (1) every estimate lies within its rounding bound of the same
 * degrees in long double, (2) every error against the exact sum within
 * truncation and rounding, (3) a tracked set of cells, after 1,000 moves
 * applied as removes and adds of the moved particles' terms, equals its
 * rebuild from the moved positions bit for bit, and each layout counts
 * every other particle once.
 *
 *   hier_local [N [K [seed [K2]]]]     defaults 1048576 200 1 min(K, 20)
 */
#include <stdio.h>
#include <string.h>

#include "hier_local.h"

#define CATION_DENSITY 1.1447e-6 /* Å^-3 */

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

/* The local far field's bound at x (orders p8 and p12 in one pass) and its
 * direct partners, buffer b; particle `skip` left out */
static void local_bound(const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm, double x[3], int skip,
                        int b, double out[2], long *direct, long *seen)
{
    double e8 = 0.0, e12 = 0.0;
    long dir = 0, far = 0;
    for (int l = 2; l <= g->L; ++l) {
        int c[3];
        double cc[3];
        cell_at_level(g, l, x, c, cc);
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
    const int ci[3] = {cx, cy, cz};
    double c[3];
    cell_centre(g, l, ci, c);
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
    double zsum = 0.0; /* the system's Σ|z|: the fixed point's range */
    for (int i = 0; i < n; ++i) {
        pos[i] = in_ball(&seed, R - 3.75, (float)(i % 4 != 0));
        zsum += fabs((double)prm.sp[coulomb_hs_species(pos[i].w)].x);
    }
    hier_tree t;
    if (hier_tree_init(&t, pos, n, &prm, 12, 8, L, Rt)) {
        fprintf(stderr, "hier_local: out of memory\n");
        return 1;
    }
    grid g = {.L = L, .m = 1 << L, .Rt = Rt, .h = 2.0 * Rt / (1 << L)};
    const size_t nl = (size_t)g.m * g.m * g.m;
    g.start = malloc((nl + 1) * sizeof *g.start);
    g.idx = malloc((size_t)n * sizeof *g.idx);
    g.buf = malloc((size_t)n * sizeof *g.buf);
    g.leaf = malloc((size_t)n * sizeof *g.leaf);
    g.fill = malloc(nl * sizeof *g.fill);
    hl_fixed *fx[2] = {hl_fixed_new(&g, 1, zsum), hl_fixed_new(&g, 2, zsum)};
    if (!g.start || !g.idx || !g.buf || !g.leaf || !g.fill || !fx[0] || !fx[1]) {
        fprintf(stderr, "hier_local: out of memory\n");
        return 1;
    }
    bucket(&g, pos, n);

    const double theta = 0.65, dcut = 7.5 * 1.001 + 1e-6, side = 2.0 * R / 3.0;
    double *ratio[2][2], *first = malloc((size_t)K * sizeof *first), *ideal = malloc((size_t)K * sizeof *ideal);
    double *iratio[2][2];
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) {
            ratio[b][p] = malloc((size_t)K * sizeof(double));
            iratio[b][p] = malloc((size_t)K * sizeof(double));
        }
    double cells = 0.0, fdirect = 0.0, ldirect[2] = {0.0, 0.0};
    /* the first K2 moves: the expansions themselves, in fixed point
     * (hl_far_field), against the tree's first look (order 8) and refined
     * look (order 12 at 0.7 theta, the refined look's under reference =
     * exact); per place, the rounding bound over the truncation bound, the
     * two checks' ratios, the per-cell source term over the per-source one */
    double *nratio[2][2], *rratio[2][2], *crude[2], worst = 0.0, rworst = 0.0;
    for (int b = 0; b < 2; ++b) {
        crude[b] = malloc((size_t)2 * K2 * sizeof(double));
        for (int p = 0; p < 2; ++p) {
            nratio[b][p] = malloc((size_t)K2 * sizeof(double));
            rratio[b][p] = malloc((size_t)2 * K2 * sizeof(double));
        }
    }
    for (int k = 0; k < K; ++k) {
        const int i = (int)(urand(&seed) * n);
        const metro_float4 o = pos[i], tr = trial_move(&seed, o, side, R - 3.75);
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
                    hl_far h;
                    hl_far_field(fx[b], &g, pos, &prm, xd, i, &h);
                    crude[b][2 * k + s] = h.crude;
                    for (int p = 0; p < 2; ++p) {
                        /* (2) the estimate's error within truncation and
                         * rounding, against the exact sum in long double
                         * (compensated: a few 2^-64 of phi); (1) its
                         * difference from the same degrees in long double
                         * within the rounding bound, with 2^-8 of it for
                         * the long double's own rounding */
                        const double w = h.err[p] / (h.trunc[p] + h.round[p] + 0x1p-60 * h.phi);
                        const double v = h.rerr[p] / (h.round[p] * (1.0 + 0x1p-8));
                        if (w > worst) worst = w;
                        if (v > rworst) rworst = v;
                        nb[b][p] += h.trunc[p] + h.round[p];
                        rratio[b][p][2 * k + s] = h.round[p] / h.trunc[p];
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
    printf("\nThe expansions themselves in fixed point (the first %d moves, both places; degrees to %d kept, "
           "their norms and the sources' tail beyond bound the rest; the rounding of the accumulation, the "
           "conversion and the evaluation bounded), against the tree's own bounds: the first look (order 8, theta "
           "%.2f) and the refined look (order 12, theta %.3f).  Largest error over its bound (truncation and "
           "rounding): %.3g; largest difference from the same degrees in long double over the rounding bound: %.3g "
           "(each must be at most 1)\n\n",
           K2, HL_PM, theta, 0.7 * theta, worst, rworst);
    printf("| buffer b | order p | local bound / tree's bound at that order, median | 90th percentile | rounding / "
           "truncation bound, median | largest | the rounding's source term per cell / per source (order 12), "
           "median |\n|---|---|---|---|---|---|---|\n");
    for (int b = 0; b < 2; ++b)
        for (int p = 0; p < 2; ++p) {
            const double rmed = quantile(rratio[b][p], 2 * K2, 0.5), rmax = quantile(rratio[b][p], 2 * K2, 1.0);
            printf("| %d | %d | %.3g | %.3g | %.3g | %.3g | %.3g |\n", b + 1, p ? 12 : 8, quantile(nratio[b][p], K2, 0.5),
                   quantile(nratio[b][p], K2, 0.9), rmed, rmax, quantile(crude[b], 2 * K2, 0.5));
        }
    /* (3) the integers after moves applied as removes and adds equal the
     * cells rebuilt from the moved positions (this moves pos: last) */
    long updates = 0;
    int updated = 0;
    const int hmoves = 1000, hcells = 3;
    const int differ =
        hl_history(fx[0], &g, pos, n, &prm, hmoves, hcells, side, R - 3.75, &seed, &updates, &updated);
    printf("\nHistory: %d cells (%d a level, levels 2 ... %d, b = 1), %d moves applied as %ld removes and adds of "
           "their terms, reaching %d of the cells: %d cells differ from their rebuild (must be 0)\n",
           hcells * (L - 1), hcells, L, hmoves, updates, updated, differ);
    int bad = 0;
    if (worst > 1.0 || rworst > 1.0) {
        fprintf(stderr, "hier_local: an error exceeded its bound (%.3g, %.3g of it)\n", worst, rworst);
        bad = 1;
    }
    if (differ != 0 || updates == 0) {
        fprintf(stderr, "hier_local: the fixed-point history check failed (%d cells differ, %ld updates)\n", differ,
                updates);
        bad = 1;
    }
    for (int b = 0; b < 2; ++b) {
        free(crude[b]);
        free(fx[b]);
        for (int p = 0; p < 2; ++p) {
            free(nratio[b][p]);
            free(rratio[b][p]);
            free(ratio[b][p]);
            free(iratio[b][p]);
        }
    }
    hier_tree_free(&t);
    free(pos);
    free(g.start);
    free(g.idx);
    free(g.buf);
    free(g.leaf);
    free(g.fill);
    free(first);
    free(ideal);
    return bad;
}
