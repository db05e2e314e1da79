/* test_electrostatics.c — the renormalised-electrostatics analysis on
 * synthetic pair correlations of known far field.
 *
 * Blocks of pair counts are built from a known g_ab(r) plus Gaussian noise
 * of the size counting statistics give, run through the same estimates as
 * real data (metro_pc_profile_from) and the analysis; it must give back the
 * κ_R, renormalised valences and ε_R it was built from, within its error
 * bars (which must also be small enough to mean something).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "electrostatics.h"
#include "pc_accum.h"

/* ---- a small reproducible Gaussian generator ---------------------------- */

static uint64_t rng_state;
static double uni(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0) + 1e-17;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(uni())) * cos(2.0 * M_PI * uni());
}

/* ---- a synthetic salt ---------------------------------------------------- */

typedef struct model {
    double lb, kappa_R, qR[2], eps_ratio;  /* ε_R/ε */
    double z[2], n[2], d;                  /* valences, densities, contact */
    double sr_amp, sr_kappa;               /* short-range extra term */
    int linear;                            /* g = 1 + h instead of e^{-βU} */
} model;

/* βU_ab(r) of the model; its far field is the dressed-ion form. */
static double model_u(const model *m, int a, int b, double r)
{
    double u = m->lb / m->eps_ratio * m->qR[a] * m->qR[b] * exp(-m->kappa_R * r) / r;
    return u + m->sr_amp * m->z[a] * m->z[b] * exp(-m->sr_kappa * r) / r;
}

static double model_g(const model *m, int a, int b, double r)
{
    if (r < m->d) return 0.0;
    return m->linear ? 1.0 - model_u(m, a, b, r) : exp(-model_u(m, a, b, r));
}

/* Builds B blocks of counts for bins of width dr up to r_max with `central`
 * central ions of each species per block, noise as Poisson counts would
 * give (Gaussian of variance = mean, times noise_scale), then the full and
 * leave-one-out profiles. */
static void synth(const model *m, double dr, int bins, int B, double central, double noise_scale,
                  metro_pc_profile *full, metro_pc_profile *loo, metro_pc_system *sys)
{
    const int S = 2;
    memset(sys, 0, sizeof *sys);
    sys->species = S;
    sys->bins = bins;
    sys->dr = dr;
    sys->r_int = 1000.0;
    sys->bjerrum = m->lb;
    sys->psi = 0;
    const double v_int = 4.0 / 3.0 * M_PI * pow(sys->r_int, 3);
    for (int a = 0; a < S; a++) {
        sys->z[a] = m->z[a];
        sys->d[a] = m->d;
        sys->count[a] = 1000000000000L; /* the canonical 1/N correction vanishes */
    }
    const size_t R = metro_pc_record_size(S, bins);
    double *rec = calloc((size_t)B * R, sizeof(double)), *tot = calloc(R, sizeof(double));
    double *one = calloc(R, sizeof(double));
    for (int j = 0; j < B; j++) {
        double *x = rec + (size_t)j * R;
        x[METRO_PC_CONF] = 1.0;
        for (int a = 0; a < S; a++) {
            x[METRO_PC_CENTRAL(S, a)] = central;
            x[METRO_PC_INTERIOR(S, a)] = m->n[a] * v_int;
        }
        for (int a = 0; a < S; a++)
            for (int b = 0; b < S; b++)
                for (int k = 0; k < bins; k++) {
                    double mean = central * m->n[b] * metro_pc_shell(dr, k) *
                                  model_g(m, a, b, metro_pc_r(dr, k));
                    x[METRO_PC_HIST(S) + ((size_t)a * S + b) * bins + k] =
                        mean + noise_scale * sqrt(fabs(mean)) * gauss();
                }
        for (size_t i = 0; i < R; i++) tot[i] += x[i];
    }
    ck_assert_int_eq(metro_pc_profile_alloc(full, S, bins), 0);
    ck_assert_int_eq(metro_pc_profile_from(full, sys, tot, NULL), 0);
    for (int j = 0; j < B; j++) {
        for (size_t i = 0; i < R; i++) one[i] = tot[i] - rec[(size_t)j * R + i];
        ck_assert_int_eq(metro_pc_profile_alloc(&loo[j], S, bins), 0);
        ck_assert_int_eq(metro_pc_profile_from(&loo[j], sys, one, NULL), 0);
    }
    free(rec);
    free(tot);
    free(one);
}

static const char *names[METRO_MAX_SPECIES] = {"cation", "anion"};

/* value within k error bars of want, and the error below rel * |want|.
 * The error bars include an estimate of the fit-window systematics, which
 * is not exact: over 24 synthetic data sets of each kind the rms pull is
 * 0.7-1.8 and the largest about 5 of 144, so the tests ask for 4. */
static void expect(const metro_es_result *res, const char *name, double want, double k, double rel)
{
    const metro_es_quantity *q = metro_es_find(res, name);
    ck_assert_msg(q != NULL, "no quantity %s", name);
    ck_assert_msg(isfinite(q->value) && isfinite(q->error), "%s = %g +- %g", name, q->value,
                  q->error);
    ck_assert_msg(fabs(q->value - want) <= k * q->error, "%s = %g +- %g, built from %g", name,
                  q->value, q->error, want);
    ck_assert_msg(q->error <= rel * fabs(want) || want == 0.0, "%s error %g too large for %g",
                  name, q->error, want);
}

/* The 3:-1 salt of seed 002 with the renormalised parameters the paper
 * found, a short-range term the window must leave out, and noise. */
static void paper_like(model *m)
{
    memset(m, 0, sizeof *m);
    m->lb = 7.117;
    m->z[0] = 3.0;
    m->z[1] = -1.0;
    m->n[0] = 1.1447e-6;
    m->n[1] = 3.0 * m->n[0];
    m->d = 7.5;
    m->kappa_R = 1.0 / 25.57;
    double kappa2 = 4.0 * M_PI * m->lb * (m->n[0] * 9.0 + m->n[1]);
    m->qR[0] = 4.125;
    /* Eq. 8 makes the model a consistent dressed-ion far field */
    m->qR[1] = m->qR[0] - m->kappa_R * m->kappa_R / kappa2 * (m->z[0] - m->z[1]);
    m->eps_ratio = 1.15;
    m->sr_amp = 0.5 * m->lb;
    m->sr_kappa = 4.0 * m->kappa_R;
    m->linear = 1;
}

START_TEST(recovers_dressed_ion_far_field)
{
    model m;
    paper_like(&m);
    rng_state = 0x9e3779b97f4a7c15ull;
    const int B = 20, bins = 285;
    metro_pc_profile full, loo[20];
    metro_pc_system sys;
    synth(&m, 1.0, bins, B, 2e7, 1.0, &full, loo, &sys);
    metro_es_options opt = {.bjerrum = m.lb};
    memcpy(opt.name, names, sizeof names);
    metro_es_result res;
    ck_assert_int_eq(metro_es_analyze(&full, loo, B, &opt, &res), 0);

    expect(&res, "kappa_R_inv", 25.57, 4.0, 0.01);
    expect(&res, "kappa_R_inv_cation", 25.57, 4.0, 0.02);
    expect(&res, "kappa_R_inv_anion", 25.57, 4.0, 0.02);
    expect(&res, "q_R_cation_via_cation", m.qR[0], 4.0, 0.02);
    expect(&res, "q_R_cation_via_anion", m.qR[0], 4.0, 0.02);
    expect(&res, "q_R_anion_via_cation", m.qR[1], 4.0, 0.02);
    expect(&res, "q_R_anion_via_anion", m.qR[1], 4.0, 0.02);
    expect(&res, "eps_R_over_eps_via_cation", m.eps_ratio, 4.0, 0.02);
    expect(&res, "eps_R_over_eps_via_anion", m.eps_ratio, 4.0, 0.02);
    expect(&res, "eq8_diff", 0.0, 4.0, 0.0);
    /* and it is not the bare screening: κ_R differs from κ beyond error */
    const metro_es_quantity *k = metro_es_find(&res, "kappa_R_inv");
    ck_assert(fabs(k->value - 28.53) > 10.0 * k->error);
    /* the window starts where the short-range term is below the noise */
    const metro_es_quantity *lo = metro_es_find(&res, "fit_rmin_cation");
    ck_assert(lo && lo->value > m.d && lo->value < 200.0);
    ck_assert_msg(res.warn[0] == 0, "warning: %s", res.warn);
    ck_assert(k->window_error > 0 && metro_es_find(&res, "kappa_inv")->window_error == 0);
    metro_es_free(&res);
    /* a rho window given (fit_rmin) is not shifted: κ_R has no window error to give,
     * nan and said, and the error the statistical one (it was 0, and the
     * error column silently the statistical error) */
    opt.fit_rmin = 60;
    ck_assert_int_eq(metro_es_analyze(&full, loo, B, &opt, &res), 0);
    static const char *const fitted[] = {"kappa_R_inv", "kappa_R_inv_cation", "kappa_R_inv_anion"};
    for (size_t i = 0; i < sizeof fitted / sizeof *fitted; ++i) {
        const metro_es_quantity *q = metro_es_find(&res, fitted[i]);
        ck_assert_msg(q && isnan(q->window_error) && q->error == q->stat_error && q->stat_error > 0,
                      "%s: window_error %g, error %g, stat_error %g", fitted[i], q ? q->window_error : 0,
                      q ? q->error : 0, q ? q->stat_error : 0);
    }
    ck_assert(metro_es_find(&res, "kappa_inv")->window_error == 0);
    ck_assert_msg(strstr(res.warn, "could not be estimated (the fit window could not be shifted"), "%s", res.warn);
    metro_es_free(&res);
    metro_pc_profile_free(&full);
    for (int j = 0; j < B; j++) metro_pc_profile_free(&loo[j]);
}
END_TEST

/* Point ions in the Debye–Hückel limit (g = 1 + h, h the linearised
 * screened Coulomb): κ_R = κ, q^R = z, ε_R = ε, and both sum rules hold. */
START_TEST(debye_huckel_limit_and_sum_rules)
{
    model m;
    memset(&m, 0, sizeof m);
    m.lb = 7.117;
    m.z[0] = 1.0;
    m.z[1] = -1.0;
    m.n[0] = m.n[1] = 2e-5;
    m.d = 0.0;
    m.linear = 1;
    double kappa = sqrt(4.0 * M_PI * m.lb * (m.n[0] + m.n[1]));
    m.kappa_R = kappa;
    m.qR[0] = 1.0;
    m.qR[1] = -1.0;
    m.eps_ratio = 1.0;
    rng_state = 12345;
    const int B = 16;
    const double dr = 0.25;
    const int bins = (int)(25.0 / kappa / dr);
    metro_pc_profile full, loo[16];
    metro_pc_system sys;
    synth(&m, dr, bins, B, 1e9, 1.0, &full, loo, &sys);
    metro_es_options opt = {.bjerrum = m.lb};
    memcpy(opt.name, names, sizeof names);
    metro_es_result res;
    ck_assert_int_eq(metro_es_analyze(&full, loo, B, &opt, &res), 0);
    expect(&res, "kappa_inv", 1.0 / kappa, 4.0, 0.01);
    expect(&res, "kappa_R_inv", 1.0 / kappa, 4.0, 0.01);
    expect(&res, "q_R_cation", 1.0, 4.0, 0.02);
    expect(&res, "q_R_anion", -1.0, 4.0, 0.02);
    expect(&res, "eps_R_over_eps", 1.0, 4.0, 0.02);
    expect(&res, "eq8_lhs", 1.0, 4.0, 0.02);
    expect(&res, "eq8_rhs", 1.0, 4.0, 0.02);
    expect(&res, "neutrality_cation", 1.0, 4.0, 0.01);
    expect(&res, "neutrality_anion", 1.0, 4.0, 0.01);
    expect(&res, "stillinger_lovett", 1.0, 4.0, 0.1); /* r^4 weighs the noisy tail */
    metro_es_free(&res);
    metro_pc_profile_free(&full);
    for (int j = 0; j < B; j++) metro_pc_profile_free(&loo[j]);
}
END_TEST

/* A wrong Bjerrum length must show: the analysis is not just echoing. */
START_TEST(wrong_bjerrum_is_detected)
{
    model m;
    paper_like(&m);
    rng_state = 777;
    const int B = 20, bins = 285;
    metro_pc_profile full, loo[20];
    metro_pc_system sys;
    synth(&m, 1.0, bins, B, 2e7, 1.0, &full, loo, &sys);
    metro_es_options opt = {.bjerrum = 1.2 * m.lb};
    metro_es_result res;
    ck_assert_int_eq(metro_es_analyze(&full, loo, B, &opt, &res), 0);
    const metro_es_quantity *q = metro_es_find(&res, "q_R_0");
    ck_assert(q != NULL);
    ck_assert_msg(fabs(q->value - m.qR[0]) > 3.0 * q->error, "q = %g +- %g", q->value, q->error);
    metro_es_free(&res);
    metro_pc_profile_free(&full);
    for (int j = 0; j < B; j++) metro_pc_profile_free(&loo[j]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("electrostatics");
    TCase *tc = tcase_create("synthetic");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, recovers_dressed_ion_far_field);
    tcase_add_test(tc, debye_huckel_limit_and_sum_rules);
    tcase_add_test(tc, wrong_bjerrum_is_detected);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
