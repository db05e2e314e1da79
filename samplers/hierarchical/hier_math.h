/* hier_math.h — the far-cell arithmetic both paths of the hierarchical
 * sampler evaluate (hier_tree.c on the CPU, hierarchical.cu on the GPU):
 * the recurrences' factors, a cell's norms and truncation coefficients,
 * its expansion at a point, the truncation bound and the bound of Φ
 * (DESIGN.md, "The error bound").  Tables are [n][m] with rows of HIER_TD;
 * a cell block is laid out as hier_tree.h says (A, K, D, P, M, B, G at the
 * offsets doff, moff, boff, goff). */
#ifndef HIER_MATH_H
#define HIER_MATH_H

#include "metro/hd.h"

#include "hier_tree.h"

#define HIER_TD (HIER_MAX_DEG + 1)

/* The factors of the solid harmonics' recurrences and the norms' weights
 * (n-m)!(n+m)! (times 2 for m > 0: the pair m, -m), degrees up to pm */
METRO_HD void hier_factors(int pm, double *ic1, double *ic2, double *rc1, double *rc2, double *gw)
{
    double fact[2 * HIER_MAX_DEG + 2];
    fact[0] = 1.0;
    for (int k = 1; k < 2 * HIER_MAX_DEG + 2; ++k) fact[k] = fact[k - 1] * (double)k;
    for (int n = 0; n <= pm; ++n) {
        ic1[n] = 2.0 * n - 1.0;
        for (int m = 0; m <= n; ++m) {
            /* R_n^m = ((2n-1) s_z R_{n-1}^m - |s|^2 R_{n-2}^m) / ((n-m)(n+m)) */
            const double den = (double)((n - m) * (n + m));
            rc1[n * HIER_TD + m] = n > m ? (2.0 * n - 1.0) / den : 0.0;
            rc2[n * HIER_TD + m] = n > m ? 1.0 / den : 0.0;
            /* I_n^m = ((2n-1) y_z I_{n-1}^m - (n+m-1)(n-m-1) I_{n-2}^m) / |y|^2 */
            ic2[n * HIER_TD + m] = (double)((n + m - 1) * (n - m - 1));
            gw[n * HIER_TD + m] = fact[n - m] * fact[n + m] * (m ? 2.0 : 1.0);
        }
    }
}

/* The norms G_n of the degree-n moments of block M (cell radius rho):
 * G_n^2 = Σ_m (n-|m|)!(n+|m|)! |M_n^|m||^2 over m = -n ... n, the largest
 * value of |Σ_j z_j s_j^n P_n(cos γ_j)| over all directions; and from them
 * the truncation bound's coefficients (hier_trunc):
 *   K_n = min(G_n (1 + 1e-6) + drift A rho^n + eg_n, B'_(n-1)), n = 1 ... pm,
 *   K_(pm+1) = B'_pm,
 *   B'_q = min(B_q (1 + 1e-6) + drift A rho^(q+1) + eb, A rho^(q+1) + eb),
 * capped by what bounds them exactly (G_n <= Σ|z| s^n = B_(n-1) <= A
 * rho^n), with eg_n and eb the absolute errors of the stored G_n and
 * B_(n-1).  The CPU gives them as proven running bounds of its double
 * moments (hier_tree.c, cell_norms; drift = 0); the GPU's fixed point
 * gives its rounding count HG_FIX_SLACK rho^n for both, with drift = 1e-9
 * (an allowance it does not need: its sums do not drift).  hier_norm_g
 * gives one G_n (H: the moments, degree by degree), hier_norm_k one K_n. */
METRO_HD double hier_norm_g(const double *H, const double *gw, int n)
{
    double g2 = gw[n * HIER_TD] * H[n * n] * H[n * n];
    for (int m = 1; m <= n; ++m) {
        const double re = H[n * n + 2 * m - 1], im = H[n * n + 2 * m];
        g2 += gw[n * HIER_TD + m] * (re * re + im * im);
    }
    return sqrt(g2);
}

/* K_n for 1 <= n <= pm + 1 (and P's entry of degree n) from A, B_(n-1),
 * G_n (n <= pm), rn = rho^n and the errors above */
METRO_HD void hier_norm_k(double *M, int pm, int doff, int boff, int goff, double rn, double drift, double eg,
                          double eb, int n)
{
    const double A = M[0] > 0 ? M[0] : 0.0;
    const double ar = A * rn;
    const double geo = ar + eb;
    double b = M[boff + n - 1] * (1.0 + 1e-6) + drift * ar + eb;
    if (b > geo) b = geo;
    if (b < 0) b = 0;
    if (n <= pm) {
        const double g = M[goff + n] * (1.0 + 1e-6) + drift * ar + eg;
        M[1 + n] = g < b ? g : b;
    } else {
        M[1 + n] = b;
    }
    /* B'_(n-1) = Σ|z| s^n, n = 2 ... PHI_DEG + 1, for hier_phi */
    if (n >= 2 && n <= HIER_PHI_DEG + 1) M[doff + 3 + (n - 2)] = b;
}

/* Our own rounding of a far cell's expansion, proven (DESIGN.md, "The
 * error bound", (c)).  hier_expand forms each irregular harmonic I_n^m by a
 * path of n steps of its recurrences, three roundings a step, from n + 1
 * inputs (1/|y|, y/|y|^2, 1/|y|^2) each within 12u of its value at the
 * float point (u = 2^-53): so |computed - exact| <= th_n J_n^m, th_n =
 * (1+u)^(3n) (1+12u)^(n+1) - 1, J the same recurrences on absolute values
 * (every coefficient is an exact small integer), and J_n^m <= L_n^m
 * sqrt((n-m)!(n+m)!) / |y|^(n+1) with L the table of J at the worst
 * direction.  By Cauchy-Schwarz the degree-n part of the dot product then
 * errs by at most (th_n + g (1 + th_n)) C_n G_n / |y|^(n+1), C_n = (L_n^0^2
 * + 4 Σ_(m>=1) L_n^m^2)^(1/2), g = γ_(3p+4) for the dot product's sums
 * (each product passes at most 2q + 3 roundings).  The moments' own error
 * dG_n (in the norm of G) adds (2n+1)^(1/2) dG_n / |y|^(n+1) (|I_n^m| <=
 * sqrt((n-m)!(n+m)!) / |y|^(n+1) exactly).  ev[n] is the factor of G_n,
 * sq[n] = (2n+1)^(1/2).  A source's R_n^m (moments4) has n steps of four
 * roundings (a rounded constant among them) from inputs within 5u, and one
 * more for the charge: src[n] bounds its error in the norm of G per
 * |z| rho^n the same way (the table of R's recurrences at the worst
 * direction, where |R_n^m| <= |s|^n / sqrt((n-m)!(n+m)!)).  Each factor is
 * widened by 1e-6 for the tables' own rounding.  Host only. */
static inline void hier_round_factors(int pm, int p, double ev[HIER_TD], double src[HIER_TD], double sq[HIER_TD])
{
    const long double u = 0x1p-53L;
    long double fact[2 * HIER_TD];
    fact[0] = 1.0L;
    for (int k = 1; k < 2 * HIER_TD; ++k) fact[k] = fact[k - 1] * (long double)k;
    long double JI[HIER_TD][HIER_TD], JR[HIER_TD][HIER_TD];
    for (int m = 0; m <= pm; ++m) {
        JI[m][m] = m == 0 ? 1.0L : (2.0L * m - 1.0L) * sqrtl(2.0L) * JI[m - 1][m - 1];
        JR[m][m] = m == 0 ? 1.0L : sqrtl(2.0L) / (2.0L * m) * JR[m - 1][m - 1];
        for (int n = m + 1; n <= pm; ++n) {
            const long double den = (long double)((n - m) * (n + m));
            JI[n][m] = (2.0L * n - 1.0L) * JI[n - 1][m] + (n - 2 >= m ? (long double)((n + m - 1) * (n - m - 1)) * JI[n - 2][m] : 0.0L);
            JR[n][m] = (2.0L * n - 1.0L) / den * JR[n - 1][m] + (n - 2 >= m ? JR[n - 2][m] / den : 0.0L);
        }
    }
    const long double k = 3.0L * p + 4.0L, g = k * u / (1.0L - k * u);
    for (int n = 0; n <= pm; ++n) {
        long double ci = 0.0L, cr = 0.0L;
        for (int m = 0; m <= n; ++m) {
            const long double f = sqrtl(fact[n - m] * fact[n + m]);
            const long double li = JI[n][m] / f, lr = JR[n][m] * f;
            ci += (m ? 4.0L : 1.0L) * li * li;
            cr += (m ? 4.0L : 1.0L) * lr * lr;
        }
        const long double thi = expm1l(3.0L * n * log1pl(u) + (n + 1.0L) * log1pl(12.0L * u));
        const long double thr = expm1l((4.0L * n + 1.0L) * log1pl(u) + (long double)n * log1pl(5.0L * u));
        ev[n] = (double)((thi + g * (1.0L + thi)) * sqrtl(ci) * (1.0L + 1e-6L));
        src[n] = (double)(thr * sqrtl(cr) * (1.0L + 1e-6L));
        sq[n] = (double)(sqrtl(2.0L * n + 1.0L) * (1.0L + 1e-12L));
    }
}

/* Our own rounding of one point's enclosure, in the units of S: the far
 * cells' Er (hier_round, summed) and that of the sums S and Sf, every term
 * of which passes at most `adds` roundings (+ 4: the move's differences
 * and the product by λ z_a), so within γ Σ|terms| <= γ (Phi + E + Er) of
 * their exact sums (DESIGN.md, "The error bound", (c)). */
METRO_HD double hier_own_bound(double Er, double adds, double Phi, double E)
{
    return Er + (adds + 4.0) * 0x1p-53 * 1.01 * (Phi + E + Er);
}

/* The rounding bound of a far cell's expansion at order q and v = 1/d:
 * Σ_(n<=q) R_n v^(n+1), R_n = ev[n] G_n + sq[n] dG_n (hier_tree.c,
 * cell_norms), by Horner */
METRO_HD double hier_round(const double *R, double v, int q)
{
    double h = R[q];
    for (int n = q - 1; n >= 0; --n) h = R[n] + v * h;
    return h * v;
}

/* The expansion of one far cell (moments H) at y = x - c to order q:
 *   Σ_(n<=q) [M_n^0 I_n^0 + 2 Σ_(m>=1) Re(conj(M_n^m) I_n^m)],
 *   I_0^0 = 1/|y|,  I_m^m = (2m-1) (y_x + i y_y) / |y|^2 I_(m-1)^(m-1),
 *   I_n^m = ((2n-1) y_z I_(n-1)^m - (n+m-1)(n-m-1) I_(n-2)^m) / |y|^2,
 * column by column (the moments are laid out degree by degree). */
METRO_HD double hier_expand(const double *ic1, const double *ic2, const double *H, const double y[3], double inv,
                            int q)
{
    const double inv2 = inv * inv;
    const double ux = y[0] * inv2, uy = y[1] * inv2, uz = y[2] * inv2;
    double phi;
    {
        double i0 = inv, i1 = 0.0; /* I_n^0, I_(n-1)^0 */
        double acc = H[0] * i0;
        for (int n = 1; n <= q; ++n) {
            const double in = ic1[n] * uz * i0 - ic2[n * HIER_TD] * inv2 * i1;
            i1 = i0;
            i0 = in;
            acc += H[n * n] * in;
        }
        phi = acc;
    }
    double mr = inv, mi = 0.0; /* I_m^m */
    double acc2 = 0.0;
    for (int m = 1; m <= q; ++m) {
        const double f = 2.0 * m - 1.0;
        const double nr = f * (ux * mr - uy * mi), ni = f * (ux * mi + uy * mr);
        mr = nr;
        mi = ni;
        const double *cm = H + m * m + 2 * m - 1;
        double ar = mr, ai = mi, br = 0.0, bi = 0.0;
        double acc = cm[0] * ar + cm[1] * ai;
        for (int n = m + 1; n <= q; ++n) {
            const double c1 = ic1[n] * uz, c2 = ic2[n * HIER_TD + m] * inv2;
            const double xr = c1 * ar - c2 * br, xi = c1 * ai - c2 * bi;
            br = ar;
            bi = ai;
            ar = xr;
            ai = xi;
            acc += H[n * n + 2 * m - 1] * ar + H[n * n + 2 * m] * ai;
        }
        acc2 += acc;
    }
    return phi + 2.0 * acc2;
}

/* The GPU's blocks keep the moments order by order (hierarchical.cu; the
 * CPU's tree degree by degree).  Host-compiled too, so that
 * test_hierarchical holds them to hier_expand and hier_norm_g bit for bit.
 * Where moment (n, m) of degree-major index j = n^2 (m = 0), n^2 + 2m - 1
 * (Re) or n^2 + 2m (Im) lies in the device's block: order by order (order
 * 0's n = 0 ... pm, padded to mc0; then each order m >= 1's degrees n = m
 * ... pm as (Re, Im) pairs), the order a far cell's expansion reads them
 * (hier_expand_orders; hier_gpu.c, geometry, says why) */
METRO_HD int hier_mslot(int pm, int mc0, int j)
{
    int n = (int)sqrtf((float)j); /* within one of it (j < 2^24), corrected */
    while (n * n > j) --n;
    while ((n + 1) * (n + 1) <= j) ++n;
    const int r = j - n * n, m = (r + 1) >> 1;
    return r == 0 ? n : mc0 + (m - 1) * (2 * pm + 2 - m) + 2 * (n - m) + !(r & 1);
}

/* hier_norm_g's G_n (the same operations in the same order) from the
 * device's block (hier_mslot) */
METRO_HD double hier_norm_g_orders(const double *H, const double *gw, int pm, int mc0, int n)
{
    double g2 = gw[n * HIER_TD] * H[n] * H[n];
    const double *c = H + mc0; /* order 1 */
    for (int m = 1; m <= n; ++m) {
        const double re = c[2 * (n - m)], im = c[2 * (n - m) + 1];
        g2 += gw[n * HIER_TD + m] * (re * re + im * im);
        c += 2 * (pm - m + 1);
    }
    return sqrt(g2);
}

/* hier_expand's sum (the same operations in the same order) from the
 * device's block: each order's moments in memory order, a (Re, Im) pair a
 * 16-byte load, and the recurrences' integer factors 2n - 1 and (n + m -
 * 1)(n - m - 1) counted in double (exact) instead of read from the tables
 * (two loads a step less; the same values, so the same bits) */
METRO_HD double hier_expand_orders(const double *H, int pm, int mc0, const double y[3], double inv, int q)
{
    const double inv2 = inv * inv;
    const double ux = y[0] * inv2, uy = y[1] * inv2, uz = y[2] * inv2;
    double phi;
    {
        double i0 = inv, i1 = 0.0, f1 = 1.0, c2 = 0.0; /* 2n - 1 and (n - 1)^2 at n = 1 */
        double acc = H[0] * i0;
        for (int n = 1; n <= q; ++n) {
            const double in = f1 * uz * i0 - c2 * inv2 * i1;
            i1 = i0;
            i0 = in;
            acc += H[n] * in;
            c2 += f1;
            f1 += 2.0;
        }
        phi = acc;
    }
    double mr = inv, mi = 0.0; /* I_m^m */
    double acc2 = 0.0;
    const double2 *col = (const double2 *)(H + mc0); /* order m's pairs */
    /* each order's first pair is loaded an order ahead: it starts a new
     * line, and loaded where it is used the walks waited for it (ncu: a
     * third of the first look's stall samples) */
    double2 first = {0.0, 0.0};
    if (q >= 1) first = col[0];
    for (int m = 1; m <= q; ++m) {
        double2 h = first;
        if (m < q) first = col[pm - m + 1];
        const double f = 2.0 * m - 1.0;
        const double nr = f * (ux * mr - uy * mi), ni = f * (ux * mi + uy * mr);
        mr = nr;
        mi = ni;
        double ar = mr, ai = mi, br = 0.0, bi = 0.0;
        double acc = h.x * ar + h.y * ai;
        double f1 = 2.0 * m + 1.0, c2 = 0.0; /* 2n - 1 and (n + m - 1)(n - m - 1) at n = m + 1 */
        for (int n = m + 1; n <= q; ++n) {
            const double c1 = f1 * uz, cc = c2 * inv2;
            const double xr = c1 * ar - cc * br, xi = c1 * ai - cc * bi;
            br = ar;
            bi = ai;
            ar = xr;
            ai = xi;
            h = col[n - m];
            acc += h.x * ar + h.y * ai;
            c2 += f1;
            f1 += 2.0;
        }
        acc2 += acc;
        col += pm - m + 1;
    }
    return phi + 2.0 * acc2;
}

/* An upper bound of Σ_j |z_j| / |x - r_j| over a far cell (y = x - c, v =
 * 1/d, idr = 1/(d - rho)): the same Legendre series for the weights |z_j|,
 * whose degree-0 and degree-1 terms are known exactly (A / d and D·y / d^3,
 * D = Σ|z| s kept per cell), degrees 2 ... K bounded by Σ|z| s^n (|P_n|
 * <= 1), the rest per source by B_K / (d^(K+1) (d - rho)), K = phik =
 * min(PHI_DEG, pm) >= 2.  dA and dD bound the errors of the stored A and
 * of |D| / rho (the CPU: its running bound; the GPU: 0 and an allowance of
 * 1e-9 A).  Never above the cruder A / (d - rho) (each source at most rho
 * from the centre), which it replaces: at rho/d = 0.65 about 1.3 A/d
 * instead of 2.9 A/d, and Phi sets the floor of the enclosure (the
 * reference's rounding, 7 float ulps of it). */
METRO_HD double hier_phi(const double *M, int doff, int phik, const double y[3], double v, double idr, double rho,
                         double dA, double dD)
{
    const double A = (M[0] > 0 ? M[0] : 0.0) + dA;
    const double *D = M + doff, *P = M + doff + 3;
    const double v2 = v * v, v3 = v2 * v;
    double ph = A * v + (D[0] * y[0] + D[1] * y[1] + D[2] * y[2]) * v3 + dD * rho * v2;
    /* degrees 2 ... PHI_DEG: P[n-2] v^(n+1); the tail P[PHI_DEG-1] v^(PHI_DEG+1) idr */
    const int K = phik;
    double h = P[K - 1] * idr + P[K - 2]; /* the coefficient of v^(K+1) */
    for (int n = K - 1; n >= 2; --n) h = P[n - 2] + v * h; /* down to that of v^3 */
    ph += h * v3;
    const double crude = A * idr;
    return ph < crude ? ph : crude;
}

/* The truncation bound of a far cell (coefficients K = M + 1, distance d >
 * rho) at order q: the degrees q+1 ... pm through their norms, |term_n| <=
 * K_n / d^(n+1), the rest by Legendre's per-source bound K_(pm+1) /
 * (d^(pm+1) (d - rho)) (hier_norms), summed by Horner in v = 1/d (all
 * terms positive); idr = 1/(d - rho). */
METRO_HD double hier_trunc(const double *K, int pm, double v, double idr, int q)
{
    if (q >= pm) { /* never with HIER_EXTRA >= 1: the tail alone */
        double vp = v;
        for (int n = 0; n < pm; ++n) vp *= v;
        return vp * K[pm + 1] * idr;
    }
    double h = K[pm] + K[pm + 1] * idr; /* the coefficient of v^(pm+1) */
    for (int n = pm - 1; n > q; --n) h = K[n] + v * h;
    double vq = v * v; /* v^(q+2) */
    for (int n = 0; n < q; ++n) vq *= v;
    return vq * h;
}

/* Each float pair energy of the reference is within 7 float ulps (u =
 * 2^-24) of the exact λ z_a z_b / r of its float operands (DESIGN.md, "The
 * error bound", (a)): the energy's bound, where a pair's two halves round
 * their prefactors apart */
#define HIER_REF_FLOAT (7.0 * 0x1p-24)

/* The same for the terms of a move of species a, relative to |λ z_a z_b| / r:
 * the distance, the square root, the reciprocal and the last product
 * round to at most 5.5u + 18u^2; the prefactor c = fl(λ z_a · z_b) is one
 * float product whose rounding δ_ab = c / (λ z_a z_b) - 1 is known exactly
 * (the product of two floats is exact in double, and c minus it is exact
 * by Sterbenz's lemma), 0 where |z_b| is a power of two.  So (5.5u + max_b
 * |δ_ab|)(1 + 1e-6), the factor covering the u^2 terms and the division's
 * rounding here (DESIGN.md, "The error bound", (a)).  It narrows the floor
 * of the enclosure by 1/7 to 3/14 against HIER_REF_FLOAT. */
METRO_HD double hier_ref_float(const coulomb_hs_params *p, int a)
{
    const float lza = p->sp[a].z;
    double worst = 0.0;
    for (int b = 0; b < p->nspecies; ++b) {
        const double exact = (double)lza * (double)p->sp[b].x;
        if (exact == 0.0) continue; /* an uncharged partner's terms are exactly 0 */
#ifdef __CUDA_ARCH__
        const float c = __fmul_rn(lza, p->sp[b].x);
#else
        const float c = lza * p->sp[b].x;
#endif
        const double d = fabs(((double)c - exact) / exact);
        worst = d > worst ? d : worst;
    }
    return (5.5 * 0x1p-24 + worst) * (1.0 + 1e-6);
}

/* What no refinement of the far field removes from a stage's ε (the
 * floor), for the moving ion's |λ z_a| and its factor f (hier_ref_float);
 * phid, phif and phi are the bounds of Φ at t plus at o of the directly
 * summed partners, of the far cells, and in all (DESIGN.md, "The error
 * bound" and "The exact chain"):
 *   reference = float: the reference's rounding of the far partners' float
 *   terms (the directly summed ones are its own terms) and of its double
 *   sums (ksum);
 *   reference = exact: the rounding of the float terms summed directly
 *   (the target is the exact sum, which the far cells' expansions
 *   approach without a floor). */
METRO_HD double hier_floor(int exact, double alz, double f, double ksum, double phid, double phif, double phi)
{
    return exact ? alz * f * phid : alz * (f * phif + ksum * phi);
}

/* reference = exact: the squared distance of x and b in double from the
 * float positions, and the term c / sqrt(r^2) that every exact-mode sum
 * adds (c = λ z_a z_b, a product of two floats: exact in double).  Each
 * difference of coordinates rounds once, each square once, the two
 * additions once each: r^2 within (1 ± u)^5 of the exact one; then the
 * square root and the quotient: the term within 4.5u(1 + u) of c / r
 * (u = 2^-53; a fused multiply-add only rounds less).  HIER_EXACT_TERM
 * bounds that with room for one more rounding (a difference of two
 * terms). */
#define HIER_EXACT_TERM (6.5 * 0x1p-53)
METRO_HD double hier_exact_r2(metro_float4 x, float bx, float by, float bz)
{
    const double dx = (double)x.x - (double)bx, dy = (double)x.y - (double)by, dz = (double)x.z - (double)bz;
    return dx * dx + dy * dy + dz * dz;
}

/* reference = exact: partner b's term of a move o -> t, e_x = c /
 * sqrt(r_x^2) (hier_exact_r2), d = e_t - e_o, within HIER_EXACT_TERM
 * (|e_t| + |e_o|) of the exact difference; adds |e_t| + |e_o| to *abs and
 * flags *bad where a squared distance is at most dm2 (an overlap or a
 * coincidence, with a margin: the float hard-core test decides those, in
 * the last resort). */
METRO_HD double hier_ideal_delta(double c, metro_float4 t, metro_float4 o, float bx, float by, float bz, double dm2,
                                 double *abs, int *bad)
{
    const double rt2 = hier_exact_r2(t, bx, by, bz), ro2 = hier_exact_r2(o, bx, by, bz);
    *bad |= rt2 <= dm2 || ro2 <= dm2;
    const double et = c / sqrt(rt2), eo = c / sqrt(ro2);
    *abs += fabs(et) + fabs(eo);
    return et - eo;
}

/* reference = exact: the exact pass's ±eps around its sum of the terms
 * hier_ideal_delta forms, A = Σ(|e_t| + |e_o|) over them, `path` the most
 * additions between a term and the sum (a summation tree of height h is
 * within γ_h Σ|d_j| of the exact sum of its terms, whatever its shape:
 * Higham, Accuracy and Stability, §4.2), plus one rounding of the sum
 * itself.  (1 + 1e-6) covers A's own rounding up to 10^9 partners. */
METRO_HD double hier_ideal_eps(double sum, double A, double path, double bound_scale)
{
    return bound_scale * ((HIER_EXACT_TERM + (path + 1.0) * 0x1p-53 * 1.01) * A + 0x1p-53 * fabs(sum)) * (1.0 + 1e-6);
}

/* metro_accept's decision where ΔE is known within ±eps (DESIGN.md, "The
 * chain", step 4): 1 accept, 0 reject, 2 open.  T = -ln u, dT the margin
 * for glibc's exp and log. */
METRO_HD int hier_decide(double de, double eps, double T, double dT)
{
    if (de + eps <= 0.0 || de + eps <= T - dT) return 1;
    if (de - eps >= T + dT) return 0;
    return 2;
}

/* The CUDA chain's decisions fixed before a chunk's earlier ones are
 * known (hier_dev_chain.h, hg_decide; DESIGN.md, "The GPU path").  A
 * trial's running sum will be v plus the changes c of those of its chunk's
 * earlier mates that are accepted, added one by one in index order.
 * hier_chunk_add gathers, over those mates, lo = Σ min(c, 0), hi =
 * Σ max(c, 0) and sab = Σ|c|, in index order. */
METRO_HD void hier_chunk_add(double c, double *lo, double *hi, double *sab)
{
    *lo += fmin(c, 0.0);
    *hi += fmax(c, 0.0);
    *sab += fabs(c);
}

/* The sum then lies in [v + lo, v + hi] up to the rounding of at most 31
 * additions, γ_31 (|v| + sab) < 2^-48 (|v| + sab), and of forming lo, hi
 * (2^-48 sab) and the ends (2^-53 (|v| + sab)); the margin 2^-46 (|v| +
 * sab) holds it all with room for its own rounding (test_hierarchical,
 * chunk_range_lemma). */
METRO_HD void hier_chunk_range(double v, double lo, double hi, double sab, double *vl, double *vh)
{
    const double slack = 0x1p-46 * (fabs(v) + sab);
    *vl = (v + lo) - slack;
    *vh = (v + hi) + slack;
}

/* The CUDA chain's rule on ΔE = de within ±eps (hier_decide's, with its
 * thresholds formed once: acc_thr = max(0, T - dT), rej_thr = T + dT): 1
 * accept, 0 reject, 2 open */
METRO_HD int hier_rule(double de, double eps, double acc_thr, double rej_thr)
{
    return de + eps <= acc_thr ? 1 : de - eps >= rej_thr ? 0 : 2;
}

/* The rule on fl(est + v) is monotone in v (accept below, reject above),
 * so when both ends of the range give one decision every sum between
 * does: that decision (1 accept, 0 reject, 2 open); 3 when the ends
 * differ. */
METRO_HD int hier_rule_fixed(double est, double eps, double acc_thr, double rej_thr, double v, double lo, double hi,
                             double sab)
{
    double vl, vh;
    hier_chunk_range(v, lo, hi, sab, &vl, &vh);
    const int rl = hier_rule(est + vl, eps, acc_thr, rej_thr), rh = hier_rule(est + vh, eps, acc_thr, rej_thr);
    return rl == rh ? rl : 3;
}

/* The exact pass's ±eps: its sum and the reference's add the same terms in
 * two orders, each within ksum Σ|d_j| of their exact sum (DESIGN.md, "The
 * error bound", (d)) */
METRO_HD double hier_exact_eps(double abs_sum, double ksum, double bound_scale)
{
    return bound_scale * 2.0 * ksum * abs_sum * (1.0 + 1e-6);
}

/* Whether an enclosure is too coarse for the running energy (and a
 * particle's look for the tree's total): its far cells' truncation bound E
 * above HIER_ENERGY_REL of their Σ|z_j|/r (Phif), the same for the trial
 * and the old place summed.  A decision only needs the enclosure on one
 * side of its threshold, but the running energy adds the centre of every
 * accepted one, and at low orders, with a tolerance or at a wide theta
 * those centres were off by enough, and with a bias (the accepted moves
 * favour the missed multipoles' downhill), to drift past drift_tolerance
 * in a few sweeps (order 0: 0.9% after 12 sweeps of 1000 ions).  Such an
 * accepted move's change is looked at again for the energy alone (CPU:
 * the refinements, then the exact pass; CUDA: the refined look, then the
 * exact pass).  At the defaults (order 10, theta 0.65) the bound is
 * within 1.3e-4 of Phif at 1000 ions, 2e-5 from 8000 (order 8: 3e-5), and
 * nothing is looked at again; the moves' drift stays below 1e-5 of
 * max(|E|, N) at every setting measured (DESIGN.md, "The energy"). */
#define HIER_ENERGY_REL 2e-4
METRO_HD int hier_energy_wide(double E, double phif)
{
    return E > HIER_ENERGY_REL * phif;
}

/* A particle's share of the bound on |E_tree - E_direct| (DESIGN.md, "The
 * energy"), from its walk at its own place (|λ z|, E: the truncation and
 * our own rounding, hier_own_bound; Φ) and the reference's double-sum
 * allowance ksum: E, the float terms on both sides, both double sums, and
 * a margin of 1e-9 Φ (this bound is only logged, a worst case) */
METRO_HD double hier_total_bound(double alz, double E, double Phi, double ksum)
{
    return alz * (E + (2.0 * HIER_REF_FLOAT + 2.0 * ksum + 1e-9) * Phi);
}

#endif
