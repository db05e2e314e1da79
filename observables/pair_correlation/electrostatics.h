/* electrostatics.h — the renormalised-electrostatics analysis of seed 002
 * §5.1–5.2 (dressed-ion theory) on pair-correlation estimates.
 *
 * Units: lengths as the profile's (Å), energies in kT, charges in e; the
 * solvent permittivity ε enters only through the Bjerrum length
 * λ_B = βe²/(4πε), so that βe²/ε = 4πλ_B.  In these units the far field of
 * dressed-ion theory reads
 *   ρ_a(r)  = A_a e^{-κ_R r}/r,  A_a = -κ_R² (ε/ε_R) q_a^R / (4π)    (Eq. 13)
 *   βU_ab(r) = B_ab e^{-κ_R r}/r, B_ab = λ_B (ε/ε_R) q_a^R q_b^R      (Eq. 15)
 * (the paper's Eq. 13 lost its minus sign: the cloud around a cation is
 * negative; Eqs. 16–18 are written with the correct sign and agree with
 * this), so
 *   q_b^R = -κ_R² βU_ab / (4π λ_B ρ_a) = -κ_R² B_ab / (4π λ_B A_a)
 *           for either central species a                              (Eq. 17)
 *   ε_R/ε = -κ_R² q_a^R / (4π A_a)  for either species a              (Eq. 18)
 *   (κ_R/κ)² = Σ_b n_b z_b q_b^R / Σ_b n_b z_b²   (Eq. 8; for two species
 *              (q_+^R - q_-^R)/(q_+ - q_-))
 *
 * How each is measured.
 *  - The far field is fitted with its leading correction:
 *      ρ_a(r) = A_a y(r) + A2_a y(r)²,  βU_ab(r) = B_ab y(r) + B2_ab y(r)²,
 *    y = e^{-κ_R r}/r (each basis function averaged over the bin's shell).
 *    The y² term is what squaring a screened Coulomb tail gives (g = e^{-βU}
 *    makes ρ carry βU²/2; -ln g = -ln(1 + h) carries h²/2): for the
 *    multivalent ions of seed 002 it is still about 1 % of ρ four Debye
 *    lengths out and would pull a straight line's slope by many error bars.
 *    With it the tail of the paper's Fig. 13 (ln|r ρ| against r) is the
 *    line ln|A_a| - κ_R r, and the paper's Fig. 14 (βU against ρ, a line
 *    through the origin in the far field) has the slope B_ab / A_a.
 *  - κ_R: weighted least squares on ρ itself (weights 1/σ², so the bins of
 *    low signal carry no log bias), linear in the amplitudes, minimised over
 *    κ_R; jointly over the species (one κ_R, the paper's "same slope") and
 *    per species for comparison.
 *  - Fit windows, unless given: species a's starts at the bin where
 *    |ρ_a|/σ is largest and ends before the first bin where it falls below
 *    snr; its inner end is then moved out to the first bin from which the
 *    model fits (χ² probability ≥ 1 %, Wilson–Hilferty) and κ no longer
 *    drifts (every window starting further out, up to PC_DRIFT_SPAN times
 *    the variance, agrees within PC_DRIFT_SIGMA σ of the difference of the
 *    nested fits).  βU_ab's fit (κ_R fixed) uses a's window with its inner
 *    end moved out by the same tests on B_ab.
 *  - Sum rules, exact for any bulk electrolyte: local electroneutrality
 *    ∫ρ_a 4πr² dr = -z_a and Stillinger–Lovett Σ_a n_a z_a ∫ r² ρ_a d³r =
 *    -6/(4πλ_B), both reported as ratios that must be 1; the integrals are
 *    exact sums over bins up to r_max (ρ is a shell average).
 *  - Excess energy per ion u_a = ½ z_a λ_B ⟨Σ_j z_j/r_ij⟩ from all partners,
 *    and the Debye–Hückel value -z_a² λ_B κ / (2(1 + κ a_a)), a_a the contact
 *    distance (d_a + d_b)/2 averaged with weights n_b z_b².
 * Quantities are named after the species (opt->name), e.g. q_R_<b>_via_<a>
 * is q_b^R from the charge density around a.
 *
 * Errors: jackknife over blocks; windows and weights are fixed from the
 * full data so every leave-one-out replica is analysed the same way.  A
 * window chosen from noisy data may still start where a faster near field
 * pulls a fit by an error bar or two, so each result also gets a window
 * error: how far it moves when every inner end moves out until the fit's
 * variance has grown ninefold (PC_SHIFT_VAR).  The total error is both in
 * quadrature.  On synthetic data of known far field (24 data sets of each
 * of several kinds, test_electrostatics.c) the pulls (value - truth) / error
 * have rms 0.7-1.8: the window systematics are estimated, not exact.
 */
#ifndef METRO_ELECTROSTATICS_H
#define METRO_ELECTROSTATICS_H

#include <stddef.h>

#include "pc_accum.h"

typedef struct metro_es_options {
    double bjerrum;          /* λ_B */
    double fit_rmin;         /* > 0: inner end of every fit window; 0: from the data */
    double fit_rmax;         /* > 0: outer end; 0: from the data */
    double snr;              /* signal-to-error ratio ending the window (0: 3) */
    int min_bins;            /* fewest bins in a window (0: METRO_ES_MIN_BINS) */
    const char *name[METRO_MAX_SPECIES]; /* species names in quantity names
                                            (NULL: the index) */
} metro_es_options;

#define METRO_ES_MAXQ 200
/* Fewest bins a fit window may have unless min_bins says otherwise: the
 * observable refuses a given fit_rmin..fit_rmax narrower than this. */
#define METRO_ES_MIN_BINS 8

typedef struct metro_es_quantity {
    char name[64];
    double value;
    double error;            /* total: stat_error and window_error in
                                quadrature; 0 for choices such as windows */
    double stat_error;       /* jackknife over blocks, windows fixed */
    double window_error;     /* shift of the value when the windows' inner
                                ends move out */
    double paper;            /* seed 002's number, or the exact value an
                                identity demands; NAN when none */
} metro_es_quantity;

typedef struct metro_es_result {
    int nq;
    metro_es_quantity q[METRO_ES_MAXQ];
    int blocks;
    /* Per-bin jackknife errors of g ([(a*S+b)*bins+k]), ρ ([a*bins+k]) and
     * βU = -ln g; owned, freed by metro_es_free. */
    double *g_err, *rho_err, *u_err;
    /* The fits of the full data, for plots. */
    int fitted[METRO_MAX_SPECIES];     /* species a has a window */
    int lo[METRO_MAX_SPECIES], hi[METRO_MAX_SPECIES]; /* ρ_a window bins, inclusive */
    int ulo[METRO_MAX_SPECIES * METRO_MAX_SPECIES];   /* βU_ab from bin ulo to hi[a] */
    double kappa_R;                    /* joint fit, 1/length */
    double A[METRO_MAX_SPECIES], A2[METRO_MAX_SPECIES];
    double B[METRO_MAX_SPECIES * METRO_MAX_SPECIES], B2[METRO_MAX_SPECIES * METRO_MAX_SPECIES];
    char warn[512];                    /* what the analysis could not do, or "" */
} metro_es_result;

/* Analyses the estimate `full` (all blocks) with errors from the B
 * leave-one-block-out estimates loo[0..B-1].  Fills res (free it with
 * metro_es_free).  Returns 0; -1 when out of memory.  Quantities that the
 * data do not allow (no fit window, fewer than 2 blocks) come out NAN, with
 * the reason in res->warn. */
int metro_es_analyze(const metro_pc_profile *full, const metro_pc_profile *loo, int B,
                     const metro_es_options *opt, metro_es_result *res);

/* The quantity called name, or NULL. */
const metro_es_quantity *metro_es_find(const metro_es_result *res, const char *name);

/* The fit basis of bin k: the shell averages (weight r²) of y = e^{-κr}/r
 * into *y1 and of y² into *y2. */
void metro_es_basis(double kappa, double dr, int k, double *y1, double *y2);

void metro_es_free(metro_es_result *res);

#endif
