/* lj_fene_exact.h — exact thermal averages of the lj_fene dimer (N = 2:
 * one FENE bond plus, by default, the LJ between the two), host-only C11
 * in double precision, written independently of lj_fene.h so that a test
 * compares a simulation with a separate implementation of the model.
 *
 * With the centre of mass free, the bond vector is distributed as
 * r^2 exp(-beta U(r)) dr on (r0 - R, r0 + R) (PHYSICS.md §1), so
 *   <E^k>(T) = int r^2 e^{-U/T} U^k dr / int r^2 e^{-U/T} dr.
 * The integrands vanish at both ends like (1 - x^2)^(K R^2 / 2T), x =
 * (r - r0)/R, a power that is not smooth at high T (Simpson on 2^18
 * intervals was only good to 2e-7 at T = 3), so the integrals use the
 * tanh-sinh substitution x = tanh((pi/2) sinh t), which makes the
 * integrand decay double-exponentially in t; the trapezoid rule in t then
 * converges exponentially (the test checks that halving the step changes
 * nothing at 1e-12).
 */
#ifndef METRO_LJ_FENE_EXACT_H
#define METRO_LJ_FENE_EXACT_H

#include <math.h>
#include <stddef.h>

typedef struct metro_lj_fene_model {
    double r0, K, R, epsilon, rc_sigma;
    int lj_bonded;
} metro_lj_fene_model;

/* Returns the model with the plugin's defaults (r0 0.7, K 40, R 0.3,
 * epsilon 1, rc_sigma 2.5, lj_bonded on). */
static inline metro_lj_fene_model metro_lj_fene_model_default(void)
{
    metro_lj_fene_model m = {0.7, 40.0, 0.3, 1.0, 2.5, 1};
    return m;
}

/* Returns the dimer energy U(r) of model m: FENE (+ shifted LJ when
 * lj_bonded); +INFINITY outside (r0 - R, r0 + R). */
static inline double metro_lj_fene_dimer_u(const metro_lj_fene_model *m, double r)
{
    double x = (r - m->r0) / m->R;
    if (!(x * x < 1.0)) return INFINITY;
    double u = -0.5 * m->K * m->R * m->R * log(1.0 - x * x);
    if (m->lj_bonded) {
        double s = pow(2.0, -1.0 / 6.0) * m->r0, rc = m->rc_sigma * s;
        double a = pow(s / (r < rc ? r : rc), 6.0), c = pow(s / rc, 6.0);
        u += 4.0 * m->epsilon * ((a * a - a) - (c * c - c));
    }
    return u;
}

/* Exact <E> and <E^2> of the dimer at temperature T, by tanh-sinh
 * quadrature at step 2^-level in t (level <= 0 takes the default 8: converged to
 * 1e-12 for T >= 0.05; lower T needs a higher level, the peak being narrow).
 * Returns <E>; sets *e2 to <E^2> when e2 is not NULL. */
static inline double metro_lj_fene_dimer_moments(const metro_lj_fene_model *m, double T,
                                                 int level, double *e2)
{
    const double half_pi = 1.57079632679489661923;
    double h = ldexp(1.0, -(level > 0 ? level : 8));
    long kmax = (long)(4.5 / h);
    /* Boltzmann factors relative to the minimum on a coarse grid, so that
     * exp() neither overflows nor underflows at low T */
    double umin = INFINITY;
    for (long k = 1; k < 1000; k++) {
        double u = metro_lj_fene_dimer_u(m, m->r0 - m->R + 2.0 * m->R * (double)k / 1000.0);
        if (u < umin) umin = u;
    }
    double z = 0.0, s1 = 0.0, s2 = 0.0;
    for (long k = -kmax; k <= kmax; k++) {
        double t = h * (double)k, a = half_pi * sinh(t), ca = cosh(a);
        double x = tanh(a), dx = half_pi * cosh(t) / (ca * ca);
        double r = m->r0 + m->R * x, u = metro_lj_fene_dimer_u(m, r);
        if (!(u < INFINITY)) continue; /* x rounded to +-1: weight ~ 0 */
        double w = dx * r * r * exp(-(u - umin) / T);
        z += w;
        s1 += w * u;
        s2 += w * u * u;
    }
    if (e2) *e2 = s2 / z;
    return s1 / z;
}

/* Returns the exact <E>(T) of the dimer of model m. */
static inline double metro_lj_fene_dimer_energy(const metro_lj_fene_model *m, double T)
{
    return metro_lj_fene_dimer_moments(m, T, 0, NULL);
}

/* Returns the exact specific heat C_V = (<E^2> - <E>^2) / T^2 of the dimer
 * (whole, not per monomer). */
static inline double metro_lj_fene_dimer_cv(const metro_lj_fene_model *m, double T)
{
    double e2, e1 = metro_lj_fene_dimer_moments(m, T, 0, &e2);
    return (e2 - e1 * e1) / (T * T);
}

#endif
