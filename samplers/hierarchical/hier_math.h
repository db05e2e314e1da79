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
 *   K_n = min(G_n (1 + 1e-6) + 1e-9 A rho^n + e_n, B'_(n-1)), n = 1 ... pm,
 *   K_(pm+1) = B'_pm,
 *   B'_q = min(B_q (1 + 1e-6) + 1e-9 A rho^(q+1) + e_(q+1), A rho^(q+1) + e_(q+1)),
 * e_n = quant rho^n.  The CPU keeps G_n and B_q incrementally in doubles:
 * each is allowed 1e-6 relative and 1e-9 A rho^n absolute for its drift,
 * and capped by what bounds it exactly (G_n <= Σ|z| s^n = B_(n-1) <= A
 * rho^n); quant = 0.  The GPU's fixed point adds its rounding: quant =
 * count HG_FIX_SLACK (hier_gpu.h).  hier_norm_g gives one G_n (H: the
 * moments, degree by degree), hier_norm_k one K_n, hier_norms all. */
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
 * G_n (n <= pm) and rn = rho^n */
METRO_HD void hier_norm_k(double *M, int pm, int doff, int boff, int goff, double rn, double quant, int n)
{
    const double A = M[0] > 0 ? M[0] : 0.0;
    const double ar = A * rn, e = quant * rn;
    const double geo = ar + e;
    double b = M[boff + n - 1] * (1.0 + 1e-6) + 1e-9 * ar + e;
    if (b > geo) b = geo;
    if (b < 0) b = 0;
    if (n <= pm) {
        const double g = M[goff + n] * (1.0 + 1e-6) + 1e-9 * ar + e;
        M[1 + n] = g < b ? g : b;
    } else {
        M[1 + n] = b;
    }
    /* B'_(n-1) = Σ|z| s^n, n = 2 ... PHI_DEG + 1, for hier_phi */
    if (n >= 2 && n <= HIER_PHI_DEG + 1) M[doff + 3 + (n - 2)] = b;
}

/* All of them in order (the CPU; on the GPU a warp's lanes take a degree
 * each, hg_finalize) */
METRO_HD void hier_norms(double *M, int pm, int doff, int moff, int boff, int goff, const double *gw, double rho,
                         double quant)
{
    for (int n = 0; n <= pm; ++n) M[goff + n] = hier_norm_g(M + moff, gw, n);
    M[1] = M[0] > 0 ? M[0] : 0.0; /* K_0 = A */
    double rn = 1.0; /* rho^n */
    for (int n = 1; n <= pm + 1; ++n) {
        rn *= rho;
        hier_norm_k(M, pm, doff, boff, goff, rn, quant, n);
    }
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

/* An upper bound of Σ_j |z_j| / |x - r_j| over a far cell (y = x - c, v =
 * 1/d, idr = 1/(d - rho)): the same Legendre series for the weights |z_j|,
 * whose degree-0 and degree-1 terms are known exactly (A / d and D·y / d^3,
 * D = Σ|z| s kept per cell), degrees 2 ... K bounded by Σ|z| s^n (|P_n|
 * <= 1), the rest per source by B_K / (d^(K+1) (d - rho)), K = phik =
 * min(PHI_DEG, pm) >= 2.  D is kept incrementally: allowed 1e-9 A rho of
 * drift.  Never above the cruder A / (d - rho) (each source at most rho
 * from the centre), which it replaces: at rho/d = 0.65 about 1.3 A/d
 * instead of 2.9 A/d, and Phi sets the floor of the enclosure (the
 * reference's rounding, 7 float ulps of it). */
METRO_HD double hier_phi(const double *M, int doff, int phik, const double y[3], double v, double idr, double rho)
{
    const double A = M[0] > 0 ? M[0] : 0.0;
    const double *D = M + doff, *P = M + doff + 3;
    const double v2 = v * v, v3 = v2 * v;
    double ph = A * v + (D[0] * y[0] + D[1] * y[1] + D[2] * y[2]) * v3 + 1e-9 * A * rho * v2;
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

/* The exact pass's ±eps: its sum and the reference's add the same terms in
 * two orders, each within ksum Σ|d_j| of their exact sum (DESIGN.md, "The
 * error bound", (d)) */
METRO_HD double hier_exact_eps(double abs_sum, double ksum, double bound_scale)
{
    return bound_scale * 2.0 * ksum * abs_sum * (1.0 + 1e-6);
}

/* A particle's share of the bound on |E_tree - E_direct| (DESIGN.md, "The
 * energy"), from its walk at its own place (|λ z|, truncation E, Φ, terms
 * added) and the reference's double-sum allowance ksum: the truncation,
 * the float terms on both sides, both double sums, our own rounding */
METRO_HD double hier_total_bound(double alz, double E, double Phi, double adds, double ksum)
{
    return alz * (E + (2.0 * HIER_REF_FLOAT + 2.0 * ksum + 1e-9 + adds * 0x1p-50) * Phi);
}

#endif
