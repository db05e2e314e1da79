/* hier_local_fixed.c — bench/hier_local's local expansions kept as an
 * implementation would keep them, with their rounding bounded and checked
 * (bench/NOTES.md, "Local expansions in fixed point").
 *
 * A cell c of level l (side h) keeps L_n^m = Σ_s z_s I_n^m(s - c) over the
 * sources of its interaction list (buffer b: each at least (b + 1/2) h
 * from c along some axis), 0 <= m <= n <= PM, as 64-bit integers on the
 * grid Δ_(l,n,m): a power of two with Z sqrt((n-m)!(n+m)!) / ((b + 1/2)
 * h)^(n+1) <= 2^62 Δ, Z the system's Σ|z|.  Since |I_n^m(w)| <=
 * sqrt((n-m)!(n+m)!) / |w|^(n+1), no sum of rounded terms can overflow.
 * Each source's term z I is computed in double by hier_expand's
 * recurrences, scaled by 1 / Δ (exact: a power of two) and rounded to the
 * nearest integer (llrint: exact), so a cell's integers are the sum of its
 * current sources' integers, each a function of that source alone,
 * whatever the order and history of adds and removes: a removal is exact,
 * and nothing drifts, by construction, provided every add, remove and
 * rebuild computes a source's integers with the same bits (one function
 * here; on a GPU, host and device must not mix: with FMA their integers
 * differ by a unit).  hl_history checks the bookkeeping (the lists'
 * membership, each source's integers the rebuild's), not drift, which
 * cannot happen.
 *
 * The norm of degree n: ‖L_n‖ = (Σ_m w_m |L_n^m|^2 / ((n+m)!(n-m)!))^(1/2),
 * w_0 = 1, w_m = 2 (the pair m, -m).  The degree-n term at x = c + y,
 * Σ_m w_m Re(conj(R_n^m(y)) L_n^m), is at most r^n ‖L_n‖ (r = |y|; Cauchy-
 * Schwarz with Σ_m w_m (n+m)!(n-m)! |R_n^m(y)|^2 = r^(2n), Legendre's
 * addition theorem at angle 0, which also gives ‖I_n(w)‖ = 1 / |w|^(n+1)).
 *
 * The stored coefficients' error in that norm, dH_n:
 *  - a source's computed z I: at most |z| (|δI| (1 + u) + u |I|) a real,
 *    with |δI| within the tree's proven factor (hier_round_factors' ev_n at
 *    p = 0: θ_n C_n and more) per 1 / |w|^(n+1): (ev_n + u)(1 + 1e-9) |z| /
 *    |w|^(n+1) in all, bounded per cell by the list's Σ|z| at the nearest
 *    distance (b + 1/2) h (an implementation keeps its list's counts by
 *    species: integers, exact);
 *  - a source's rounding to the grid: half a step a real (the imaginary
 *    part of m = 0 is exactly 0);
 *  - the conversion of the integers to double: u a real, at most 2u ‖L̃_n‖.
 * The evaluation: y = x - c in double, R_n^m(y) by moments4's recurrences
 * (the tree's src_n per r^n in the same norm), the dot product's products
 * summed in any order over every level (γ_K, K their count):
 *   |est_n - T_n| <= r^n (src_n ‖L̃_n‖ + dH_n) + γ_K r^n (1 + src_n) ‖L̃_n‖,
 * T_n the exact degree-n term; the degrees above the order by r^n (‖L̃_n‖
 * + dH_n), those above PM by the sources' own tail Σ |z| r^(PM+1) /
 * (|w|^(PM+1) (|w| - rho)).  ‖L̃_n‖ is computed in double from the
 * converted coefficients and widened 1e-6; r is widened 1e-12. */
#include <stdio.h>
#include <string.h>

#include "hier_local.h"

#define HL_NC (HL_W * HL_W) /* (n, m) at n HL_W + m */

struct hl_fixed {
    int b;
    double ic1[HIER_TD], ic2[HIER_TD * HIER_TD]; /* I's recurrence factors */
    double ev[HIER_TD], src[HIER_TD];           /* the tree's rounding factors (hier_round_factors) */
    double nw[HL_NC];                 /* w_m / ((n+m)!(n-m)!) */
    double step[HL_LMAX][HL_NC];      /* Δ: powers of two */
    double inv_step[HL_LMAX][HL_NC];  /* 1 / Δ */
    double grid_err[HL_LMAX][HL_W];   /* a source's rounding to the grid, in the norm */
    double dmin[HL_LMAX];             /* the interaction list's nearest distance */
};

hl_fixed *hl_fixed_new(const grid *g, int b, double zsum)
{
    hl_fixed *f = calloc(1, sizeof *f);
    if (!f || g->L >= HL_LMAX) {
        free(f);
        return NULL;
    }
    f->b = b;
    double rc1[HIER_TD * HIER_TD], rc2[HIER_TD * HIER_TD], gw[HIER_TD * HIER_TD], sq[HIER_TD]; /* unused here */
    hier_factors(HL_PM, f->ic1, f->ic2, rc1, rc2, gw);
    hier_round_factors(HL_PM, 0, f->ev, f->src, sq);
    long double fact[2 * HL_W];
    fact[0] = 1.0L;
    for (int k = 1; k < 2 * HL_W; ++k) fact[k] = fact[k - 1] * (long double)k;
    for (int n = 0; n <= HL_PM; ++n)
        for (int m = 0; m <= n; ++m) f->nw[n * HL_W + m] = (double)((m ? 2.0L : 1.0L) / (fact[n + m] * fact[n - m]));
    for (int l = 2; l <= g->L; ++l) {
        /* a source of the list lies in a cell b + 1 or more away along some
         * axis: (b + 1/2) h from the centre (less a margin for the cells'
         * floating-point boundaries) */
        const long double h = 2.0L * g->Rt / (1 << l), dmin = (b + 0.5L) * h * (1.0L - 1e-9L);
        f->dmin[l] = (double)dmin;
        for (int n = 0; n <= HL_PM; ++n) {
            long double ge = 0.0L;
            for (int m = 0; m <= n; ++m) {
                const long double most = zsum * sqrtl(fact[n - m] * fact[n + m]) / powl(dmin, n + 1.0L);
                int e;
                frexpl(most * 0x1p-62L, &e); /* most 2^-62 <= 2^e */
                const int k = n * HL_W + m;
                f->step[l][k] = ldexp(1.0, e);
                f->inv_step[l][k] = ldexp(1.0, -e);
                const long double half = 0.5L * f->step[l][k];
                ge += (m ? 2.0L : 1.0L) * (m ? 2.0L : 1.0L) * half * half / (fact[n + m] * fact[n - m]);
            }
            f->grid_err[l][n] = (double)(sqrtl(ge) * (1.0L + 1e-6L));
        }
    }
    return f;
}

/* The irregular harmonics I_n^m(w), 0 <= m <= n <= PM, by hier_expand's
 * recurrences and operations (the factor ev_n bounds the double one's
 * error), in double and, as a reference, in long double */
#define HL_IRREGULAR(T, NAME, SQRT)                                                                                    \
    static void NAME(const hl_fixed *f, const T w[3], T *Ir, T *Ii)                                                     \
    {                                                                                                                  \
        const T inv = (T)1 / SQRT(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);                                            \
        const T inv2 = inv * inv, ux = w[0] * inv2, uy = w[1] * inv2, uz = w[2] * inv2;                                \
        T i0 = inv, i1 = 0;                                                                                            \
        Ir[0] = inv;                                                                                                   \
        Ii[0] = 0;                                                                                                     \
        for (int n = 1; n <= HL_PM; ++n) {                                                                             \
            const T in = (T)f->ic1[n] * uz * i0 - (T)f->ic2[n * HIER_TD] * inv2 * i1;                                  \
            i1 = i0;                                                                                                   \
            i0 = in;                                                                                                   \
            Ir[n * HL_W] = in;                                                                                         \
            Ii[n * HL_W] = 0;                                                                                          \
        }                                                                                                              \
        T mr = inv, mi = 0;                                                                                            \
        for (int m = 1; m <= HL_PM; ++m) {                                                                             \
            const T fm = (T)(2 * m - 1);                                                                               \
            const T nr = fm * (ux * mr - uy * mi), ni = fm * (ux * mi + uy * mr);                                      \
            mr = nr;                                                                                                   \
            mi = ni;                                                                                                   \
            T ar = mr, ai = mi, br = 0, bi = 0;                                                                        \
            Ir[m * HL_W + m] = ar;                                                                                     \
            Ii[m * HL_W + m] = ai;                                                                                     \
            for (int n = m + 1; n <= HL_PM; ++n) {                                                                     \
                const T c1 = (T)f->ic1[n] * uz, c2 = (T)f->ic2[n * HIER_TD + m] * inv2;                                \
                const T xr = c1 * ar - c2 * br, xi = c1 * ai - c2 * bi;                                                \
                br = ar;                                                                                               \
                bi = ai;                                                                                               \
                ar = xr;                                                                                               \
                ai = xi;                                                                                               \
                Ir[n * HL_W + m] = ar;                                                                                 \
                Ii[n * HL_W + m] = ai;                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }
HL_IRREGULAR(double, irregular, sqrt)
HL_IRREGULAR(long double, irregular_ld, sqrtl)

/* The regular harmonics R_n^m(y) by moments4's recurrences and operations
 * (the factor src_n bounds the double one's error); the constants
 * (2n-1)/((n-m)(n+m)), 1/((n-m)(n+m)) and 1/(2m) rounded once in T, as
 * hier_factors rounds them */
#define HL_REGULAR(T, NAME)                                                                                            \
    static void NAME(const T y[3], T *Rr, T *Ri)                                                                       \
    {                                                                                                                  \
        const T r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];                                                          \
        T r0 = 1, r1 = 0;                                                                                              \
        Rr[0] = 1;                                                                                                     \
        Ri[0] = 0;                                                                                                     \
        for (int n = 1; n <= HL_PM; ++n) {                                                                             \
            const T den = (T)(n * n), rn = (T)(2 * n - 1) / den * y[2] * r0 - (T)1 / den * r2 * r1;                    \
            r1 = r0;                                                                                                   \
            r0 = rn;                                                                                                   \
            Rr[n * HL_W] = rn;                                                                                         \
            Ri[n * HL_W] = 0;                                                                                          \
        }                                                                                                              \
        T mr = 1, mi = 0;                                                                                              \
        for (int m = 1; m <= HL_PM; ++m) {                                                                             \
            const T fm = (T)1 / ((T)2 * m);                                                                            \
            const T nr = fm * (y[0] * mr - y[1] * mi), ni = fm * (y[0] * mi + y[1] * mr);                              \
            mr = nr;                                                                                                   \
            mi = ni;                                                                                                   \
            T ar = nr, ai = ni, br = 0, bi = 0;                                                                        \
            Rr[m * HL_W + m] = ar;                                                                                     \
            Ri[m * HL_W + m] = ai;                                                                                     \
            for (int n = m + 1; n <= HL_PM; ++n) {                                                                     \
                const T den = (T)((n - m) * (n + m));                                                                  \
                const T e1 = (T)(2 * n - 1) / den * y[2], e2 = (T)1 / den * r2;                                        \
                const T xr = e1 * ar - e2 * br, xi = e1 * ai - e2 * bi;                                                \
                br = ar;                                                                                               \
                bi = ai;                                                                                               \
                ar = xr;                                                                                               \
                ai = xi;                                                                                               \
                Rr[n * HL_W + m] = ar;                                                                                 \
                Ri[n * HL_W + m] = ai;                                                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }
HL_REGULAR(double, regular)
HL_REGULAR(long double, regular_ld)

/* What one source (w = s - c, charge z) adds to a level-l cell: the
 * integers of z I_n^m(w) on the grid, Re and Im at 2k and 2k + 1.  The one
 * function every add, remove and rebuild calls: the same source, the same
 * integers. */
static void source_terms(const hl_fixed *f, int l, const double w[3], double z, int64_t *t)
{
    double Ir[HL_NC], Ii[HL_NC];
    irregular(f, w, Ir, Ii);
    memset(t, 0, 2 * HL_NC * sizeof *t); /* m > n: unused, 0 */
    for (int n = 0; n <= HL_PM; ++n)
        for (int m = 0; m <= n; ++m) {
            const int k = n * HL_W + m;
            t[2 * k] = llrint(z * Ir[k] * f->inv_step[l][k]);
            t[2 * k + 1] = llrint(z * Ii[k] * f->inv_step[l][k]);
        }
}

/* Neumaier's compensated sum in long double: the references' own error
 * stays at a few 2^-64 of Σ|terms| whatever their number */
static void kahan(long double *s, long double *c, long double v)
{
    const long double t = *s + v;
    *c += fabsl(*s) >= fabsl(v) ? (*s - t) + v : (v - t) + *s;
    *s = t;
}

/* x must lie inside the cube (|x_a| < Rt): cell_of clamps, and a point
 * outside its cell would break r <= rcell, which the tail bound and the
 * series' convergence need (the study's places are in the ball) */
void hl_far_field(const hl_fixed *f, const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm,
                  const double x[3], int skip, hl_far *out)
{
    static const int ps[2] = {8, 12};
    const double u = 0x1p-53, K = (double)(g->L - 1) * HL_NC + g->L, gam = K * u / (1.0 - K * u);
    long double ex = 0.0L, exc = 0.0L, ph = 0.0L, phc = 0.0L, estl[2] = {0.0L, 0.0L};
    double est[2] = {0.0, 0.0}, trunc[2] = {0.0, 0.0}, rnd[2] = {0.0, 0.0}, crude = 0.0, fine = 0.0;
    static int64_t acc[2 * HL_NC];
    static long double Ll[2 * HL_NC], Lc[2 * HL_NC];
    static int cells[HL_AROUND][4];
    for (int l = 2; l <= g->L; ++l) {
        int c[3];
        double cc[3];
        cell_at_level(g, l, x, c, cc);
        const double rcell = 0.5 * sqrt(3.0) * 2.0 * g->Rt / (1 << l);
        memset(acc, 0, sizeof acc);
        for (int k = 0; k < 2 * HL_NC; ++k) Ll[k] = Lc[k] = 0.0L;
        double zs = 0.0, cnt = 0.0, ktail = 0.0, psrc[HL_W] = {0.0};
        const int nc = around(l, c, f->b, cells);
        for (int e = 0; e < nc; ++e) {
            if (cells[e][3]) continue; /* a finer level's, or near */
            const int cn = cell_particles(g, l, cells[e][0], cells[e][1], cells[e][2], skip);
            for (int k = 0; k < cn; ++k) {
                const int j = g->buf[k];
                const double z = (double)prm->sp[coulomb_hs_species(pos[j].w)].x;
                const long double dx = (long double)pos[j].x - x[0], dy = (long double)pos[j].y - x[1],
                                  dz = (long double)pos[j].z - x[2], dist = sqrtl(dx * dx + dy * dy + dz * dz);
                kahan(&ex, &exc, z / dist);
                kahan(&ph, &phc, fabs(z) / dist);
                /* the implementation's integers */
                const double w[3] = {pos[j].x - cc[0], pos[j].y - cc[1], pos[j].z - cc[2]};
                int64_t t[2 * HL_NC];
                source_terms(f, l, w, z, t);
                for (int q = 0; q < 2 * HL_NC; ++q) acc[q] += t[q];
                /* the reference coefficients */
                const long double wl[3] = {(long double)pos[j].x - cc[0], (long double)pos[j].y - cc[1],
                                           (long double)pos[j].z - cc[2]};
                long double Ir[HL_NC], Ii[HL_NC];
                irregular_ld(f, wl, Ir, Ii);
                for (int n = 0; n <= HL_PM; ++n)
                    for (int q = n * HL_W; q <= n * HL_W + n; ++q) { /* m <= n: what irregular_ld wrote */
                        kahan(&Ll[2 * q], &Lc[2 * q], z * Ir[q]);
                        kahan(&Ll[2 * q + 1], &Lc[2 * q + 1], z * Ii[q]);
                    }
                zs += fabs(z);
                cnt += 1.0;
                const double d = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
                ktail += fabs(z) / (pow(d, HL_PM + 1.0) * (d - rcell));
                double dn = 1.0 / d;
                for (int n = 0; n <= HL_PM; ++n, dn /= d) psrc[n] += fabs(z) * dn;
            }
        }
        /* the place in its cell */
        const double y[3] = {x[0] - cc[0], x[1] - cc[1], x[2] - cc[2]};
        const long double yl[3] = {(long double)x[0] - cc[0], (long double)x[1] - cc[1], (long double)x[2] - cc[2]};
        double Rr[HL_NC], Ri[HL_NC];
        long double Rlr[HL_NC], Rli[HL_NC];
        regular(y, Rr, Ri);
        regular_ld(yl, Rlr, Rli);
        const double r = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]) * (1.0 + 1e-12);
        double rn = 1.0, dmn = 1.0 / f->dmin[l];
        for (int n = 0; n <= HL_PM; ++n, rn *= r, dmn /= f->dmin[l]) {
            double tn = 0.0, h2 = 0.0;
            long double tl = 0.0L;
            for (int m = 0; m <= n; ++m) {
                const int k = n * HL_W + m;
                const double Lr = (double)acc[2 * k] * f->step[l][k], Li = (double)acc[2 * k + 1] * f->step[l][k];
                const double wm = m ? 2.0 : 1.0;
                tn += wm * (Rr[k] * Lr + Ri[k] * Li);
                h2 += f->nw[k] * (Lr * Lr + Li * Li);
                tl += (long double)wm * (Rlr[k] * (Ll[2 * k] + Lc[2 * k]) + Rli[k] * (Ll[2 * k + 1] + Lc[2 * k + 1]));
            }
            const double H = sqrt(h2) * (1.0 + 1e-6), ecoef = (f->ev[n] + u) * (1.0 + 1e-9);
            const double dH = ecoef * zs * dmn * (1.0 + 1e-9) + cnt * f->grid_err[l][n] + 2.0 * u * H;
            for (int q = 0; q < 2; ++q)
                if (n <= ps[q]) {
                    est[q] += tn;
                    estl[q] += tl;
                    rnd[q] += rn * (f->src[n] * H + dH) + gam * rn * (1.0 + f->src[n]) * H;
                } else
                    trunc[q] += rn * (H + dH);
            if (n <= ps[1]) {
                crude += rn * ecoef * zs * dmn;
                fine += rn * ecoef * psrc[n];
            }
        }
        for (int q = 0; q < 2; ++q) trunc[q] += rn * ktail * (1.0 + 1e-6); /* rn = r^(PM + 1) */
    }
    for (int q = 0; q < 2; ++q) {
        out->est[q] = est[q];
        out->trunc[q] = trunc[q];
        out->round[q] = rnd[q];
        out->err[q] = (double)fabsl((ex + exc) - (long double)est[q]);
        out->rerr[q] = (double)fabsl((long double)est[q] - estl[q]);
    }
    out->crude = fine > 0.0 ? crude / fine : 1.0;
    out->phi = (double)(ph + phc);
}

/* Whether level-l cell s is in cell c's interaction list (buffer b): its
 * parent within b of c's parent, itself not within b of c (around's set) */
static int in_list(const int c[3], const int s[3], int b)
{
    const int pc[3] = {c[0] >> 1, c[1] >> 1, c[2] >> 1}, pq[3] = {s[0] >> 1, s[1] >> 1, s[2] >> 1};
    return chebyshev(pc, pq) <= b && chebyshev(c, s) > b;
}

/* The tracked cells' integers from the positions (a rebuild: every
 * source of each list, gathered) */
static void rebuild(const hl_fixed *f, const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm,
                    const int (*tc)[4], int T, int64_t *L)
{
    static int cells[HL_AROUND][4];
    for (int i = 0; i < T; ++i) {
        const int l = tc[i][3];
        double cc[3];
        cell_centre(g, l, tc[i], cc);
        int64_t *Li = L + (size_t)i * 2 * HL_NC;
        memset(Li, 0, 2 * HL_NC * sizeof *Li);
        const int nc = around(l, tc[i], f->b, cells);
        for (int e = 0; e < nc; ++e) {
            if (cells[e][3]) continue;
            const int cn = cell_particles(g, l, cells[e][0], cells[e][1], cells[e][2], -1);
            for (int k = 0; k < cn; ++k) {
                const int j = g->buf[k];
                const double w[3] = {pos[j].x - cc[0], pos[j].y - cc[1], pos[j].z - cc[2]};
                int64_t t[2 * HL_NC];
                source_terms(f, l, w, (double)prm->sp[coulomb_hs_species(pos[j].w)].x, t);
                for (int q = 0; q < 2 * HL_NC; ++q) Li[q] += t[q];
            }
        }
    }
}

int hl_history(const hl_fixed *f, grid *g, metro_float4 *pos, int n, const coulomb_hs_params *prm, int moves,
               int cells, double side, double rin, unsigned long long *seed, long *updates, int *updated)
{
    const int T = (g->L - 1) * cells;
    int(*tc)[4] = malloc((size_t)T * sizeof *tc);
    int64_t *inc = malloc((size_t)T * 2 * HL_NC * sizeof *inc), *reb = malloc((size_t)T * 2 * HL_NC * sizeof *reb);
    if (!tc || !inc || !reb) {
        free(tc);
        free(inc);
        free(reb);
        return -1;
    }
    /* each tracked cell holds a particle, so its list sees the moves near it */
    for (int l = 2, i = 0; l <= g->L; ++l)
        for (int k = 0; k < cells; ++k, ++i) {
            const metro_float4 p = pos[(int)(urand(seed) * n)];
            const double xp[3] = {p.x, p.y, p.z};
            double cc[3];
            cell_at_level(g, l, xp, tc[i], cc);
            tc[i][3] = l;
        }
    rebuild(f, g, pos, prm, (const int(*)[4])tc, T, inc);
    long upd = 0;
    char *touched = calloc((size_t)T, 1);
    for (int mv = 0; mv < moves; ++mv) {
        const int j = (int)(urand(seed) * n);
        const metro_float4 o = pos[j], t = trial_move(seed, o, side, rin);
        const double z = (double)prm->sp[coulomb_hs_species(o.w)].x;
        const double xo[3] = {o.x, o.y, o.z}, xt[3] = {t.x, t.y, t.z};
        for (int i = 0; i < T; ++i) {
            const int l = tc[i][3];
            double cc[3];
            cell_centre(g, l, tc[i], cc);
            int so[3], sn[3];
            double scratch[3];
            cell_at_level(g, l, xo, so, scratch);
            cell_at_level(g, l, xt, sn, scratch);
            int64_t *Li = inc + (size_t)i * 2 * HL_NC, d[2 * HL_NC];
            if (in_list(tc[i], so, f->b)) { /* the old place's terms out */
                const double w[3] = {o.x - cc[0], o.y - cc[1], o.z - cc[2]};
                source_terms(f, l, w, z, d);
                for (int q = 0; q < 2 * HL_NC; ++q) Li[q] -= d[q];
                ++upd;
                if (touched) touched[i] = 1;
            }
            if (in_list(tc[i], sn, f->b)) { /* the new place's in */
                const double w[3] = {t.x - cc[0], t.y - cc[1], t.z - cc[2]};
                source_terms(f, l, w, z, d);
                for (int q = 0; q < 2 * HL_NC; ++q) Li[q] += d[q];
                ++upd;
                if (touched) touched[i] = 1;
            }
        }
        pos[j] = t;
    }
    bucket(g, pos, n);
    rebuild(f, g, pos, prm, (const int(*)[4])tc, T, reb);
    int differ = 0;
    for (int i = 0; i < T; ++i)
        differ += memcmp(inc + (size_t)i * 2 * HL_NC, reb + (size_t)i * 2 * HL_NC, 2 * HL_NC * sizeof *inc) != 0;
    *updates = upd;
    *updated = 0;
    for (int i = 0; touched && i < T; ++i) *updated += touched[i];
    free(touched);
    free(tc);
    free(inc);
    free(reb);
    return differ;
}
