/* polymer_shape_wham.h — multiple-histogram reweighting (Ferrenberg &
 * Swendsen 1989; "WHAM") of canonical samples taken at K inverse
 * temperatures, onto any temperature between them.
 *
 * The energies of all samples go into one histogram of fine bins; each
 * bin keeps its count and the sums of E, E^2, A, A^2, A E and B (A = r_gyr^2,
 * B = R_ee^2), so microcanonical averages of the observables come with it.
 * With N_k samples at beta_k, the density of states g_b and the free
 * energies f_k = -ln Z_k solve
 *   ln g_b = ln H_b - ln sum_k N_k exp(f_k - beta_k E_b)
 *   f_k    = -ln sum_b g_b exp(-beta_k E_b)
 * are the stationarity conditions of the convex function
 *   A(f) = sum_b H_b ln sum_k N_k exp(f_k - beta_k E_b) - sum_k N_k f_k,
 * minimised by Newton's method with a line search (a handful of passes
 * over the bins, where the plain self-consistent iteration needs thousands
 * when neighbouring histograms overlap poorly, as at a freezing
 * transition), in log space (log-sum-exp: beta E reaches 10^3 and more),
 * from the thermodynamic-integration guess
 * f_{k+1} = f_k + (beta_{k+1} - beta_k)(<E>_k + <E>_{k+1})/2.
 * E_b is the mean energy of the samples in bin b (not the bin centre), so
 * the binning error is of second order in beta x bin width.
 */
#ifndef METRO_POLYMER_SHAPE_WHAM_H
#define METRO_POLYMER_SHAPE_WHAM_H

#include <stddef.h>

/* Sums of the samples that fell into one energy bin. */
typedef struct metro__wham_bin {
    double n, e, e2, a, a2, ae, b;
} metro__wham_bin;

typedef struct metro__wham {
    int K;                 /* temperatures */
    const double *beta;    /* K inverse temperatures (not owned) */
    double *nk;            /* samples at each temperature */
    double *ek;            /* mean energy at each temperature (the guess) */
    double e0, width;      /* bin b covers [e0 + b width, e0 + (b+1) width) */
    int nbins;
    metro__wham_bin *bin;
    double *f;             /* K free energies, f[0] = 0 */
    double *lng;           /* ln g of each bin (-inf when empty) */
} metro__wham;

/* Averages at one temperature. */
typedef struct metro__wham_avg {
    double e, e2, a, a2, ae, b;
} metro__wham_avg;

/* Set up an empty histogram of bins of `width` from e_min to e_max for K
 * temperatures.  Returns 0, or -1 when out of memory. */
int metro__wham_init(metro__wham *w, int K, const double *beta, double e_min, double e_max, double width);

/* Add one sample (energy e, observables a and b) taken at temperature k. */
void metro__wham_add(metro__wham *w, int k, double e, double a, double b);

/* Solve for the free energies (f[] as the start when `warm`, else the
 * thermodynamic-integration guess).  Converged when one self-consistent
 * iteration would move no f_k by tol (or a full Newton step is below tol).
 * Returns the Newton iterations used, or -1 when not converged within
 * max_iter (f then holds the best point found). */
long metro__wham_solve(metro__wham *w, double tol, long max_iter, int warm);

/* Reweighted averages at inverse temperature beta (after solve). */
void metro__wham_average(const metro__wham *w, double beta, metro__wham_avg *out);

void metro__wham_free(metro__wham *w);

#endif
