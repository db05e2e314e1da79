/* test_stats.c — metro/stats.h against series whose answers are known:
 * AR(1) processes x_{k+1} = a x_k + g_k (C(t) = a^t, tau_int =
 * (1 + a) / (2 (1 - a)), variance 1 / (1 - a^2)) and iid Gaussians. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "metro/stats.h"

static uint64_t rng_state;

static double unif(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
    return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif());
}

/* n values of the AR(1) process with coefficient a, started in equilibrium. */
static double *ar1(size_t n, double a, uint64_t seed)
{
    rng_state = seed;
    double *x = malloc(n * sizeof *x);
    x[0] = gauss() / sqrt(1 - a * a);
    for (size_t i = 1; i < n; i++) x[i] = a * x[i - 1] + gauss();
    return x;
}

START_TEST(series_grows)
{
    metro_series s = {0};
    for (int i = 0; i < 5000; i++) ck_assert_int_eq(metro_series_push(&s, i * 0.5), 0);
    ck_assert_uint_eq(s.n, 5000);
    ck_assert_uint_ge(s.cap, 5000);
    for (int i = 0; i < 5000; i++) ck_assert_double_eq(s.x[i], i * 0.5);
    metro_series_free(&s);
    ck_assert_ptr_null(s.x);
    ck_assert_uint_eq(s.n, 0);
    metro_series_free(&s); /* twice is fine */
}
END_TEST

START_TEST(moments)
{
    double x[] = {1, 2, 3, 4, 10};
    ck_assert_double_eq_tol(metro_mean(x, 5), 4.0, 1e-15);
    ck_assert_double_eq_tol(metro_variance(x, 5), (9 + 4 + 1 + 0 + 36) / 4.0, 1e-14);
    /* a large offset must not eat the spread */
    size_t n = 100000;
    double *y = ar1(n, 0.0, 7), *z = malloc(n * sizeof *z);
    for (size_t i = 0; i < n; i++) z[i] = 1e9 + y[i];
    ck_assert_double_eq_tol(metro_variance(z, n), metro_variance(y, n), 1e-6);
    ck_assert(isnan(metro_mean(x, 0)));
    ck_assert(isnan(metro_variance(x, 1)));
    free(y);
    free(z);
}
END_TEST

START_TEST(binning_ar1)
{
    const double a[] = {0.0, 0.5, 0.8, 0.95};
    size_t n = 1 << 19;
    for (int k = 0; k < 4; k++) {
        double *x = ar1(n, a[k], 1234 + k), tau;
        double err = metro_binning_error(x, n, &tau);
        double tau_exact = (1 + a[k]) / (2 * (1 - a[k]));
        double err_exact = sqrt(2 * tau_exact / (1 - a[k] * a[k]) / (double)n);
        ck_assert_msg(fabs(tau / tau_exact - 1) < 0.15, "a = %g: tau %g, exact %g", a[k], tau,
                      tau_exact);
        ck_assert_msg(fabs(err / err_exact - 1) < 0.08, "a = %g: err %g, exact %g", a[k], err,
                      err_exact);
        free(x);
    }
}
END_TEST

START_TEST(sokal_ar1)
{
    const double a[] = {0.0, 0.5, 0.8, 0.95};
    size_t n = 1 << 19;
    for (int k = 0; k < 4; k++) {
        double *x = ar1(n, a[k], 99 + k);
        size_t w;
        double tau = metro_tau_int_sokal(x, n, &w);
        double tau_exact = (1 + a[k]) / (2 * (1 - a[k]));
        ck_assert_msg(fabs(tau / tau_exact - 1) < 0.05, "a = %g: tau %g, exact %g", a[k], tau,
                      tau_exact);
        /* the window is the first M >= 6 tau(M) */
        ck_assert_msg(w >= METRO_SOKAL_C * tau - 1e-9 && w < METRO_SOKAL_C * tau + 2,
                      "a = %g: window %zu, tau %g", a[k], w, tau);
        free(x);
    }
}
END_TEST

START_TEST(acf)
{
    size_t n = 50000;
    double *x = ar1(n, 0.7, 5), c[40];
    ck_assert_int_eq(metro_acf(x, n, c, 40), 0);
    ck_assert_double_eq_tol(c[0], 1.0, 1e-12);
    for (size_t t = 0; t < 40; t++)
        ck_assert_msg(fabs(c[t] - metro_autocorr(x, n, t)) < 1e-10, "t = %zu: fft %.15g direct %.15g",
                      t, c[t], metro_autocorr(x, n, t));
    for (int t = 1; t <= 5; t++) ck_assert_double_eq_tol(c[t], pow(0.7, t), 0.03);
    /* lags past the series are NAN */
    double s[4] = {1, 2, 4, 3}, cs[6];
    ck_assert_int_eq(metro_acf(s, 4, cs, 6), 0);
    ck_assert(!isnan(cs[3]) && isnan(cs[4]) && isnan(cs[5]));
    ck_assert_double_eq_tol(cs[3], ((1 - 2.5) * (3 - 2.5)) / ((2.25 + 0.25 + 2.25 + 0.25) / 4), 1e-12);
    free(x);
}
END_TEST

START_TEST(jackknife_cv)
{
    /* iid: C = beta^2 sigma^2 / per, error ~ beta^2 sigma^2 sqrt(2/n) / per */
    size_t n = 1 << 16;
    double *x = ar1(n, 0.0, 31), cv, err;
    for (size_t i = 0; i < n; i++) x[i] = -50 + 1.5 * x[i];
    metro_jackknife_cv(x, n, 2.0, 4.0, &cv, &err);
    double exact = 4.0 * 2.25 / 4.0, theory = 4.0 * 2.25 * sqrt(2.0 / n) / 4.0;
    ck_assert_msg(fabs(cv - exact) < 4 * err, "cv %g +- %g, exact %g", cv, err, exact);
    ck_assert_msg(fabs(err / theory - 1) < 0.3, "err %g, theory %g", err, theory);
    ck_assert_double_eq_tol(cv, 4.0 * metro_variance(x, n) * (n - 1) / n / 4.0, 1e-12);
    free(x);
    /* correlated: the bins see the correlation, the error is larger than
     * the iid one and still covers the exact variance 1/(1 - a^2) */
    double a = 0.9;
    x = ar1(n, a, 77);
    metro_jackknife_cv(x, n, 1.0, 1.0, &cv, &err);
    exact = 1 / (1 - a * a);
    ck_assert_msg(fabs(cv - exact) < 4 * err, "cv %g +- %g, exact %g", cv, err, exact);
    ck_assert_double_gt(err, 2 * exact * sqrt(2.0 / n));
    free(x);
}
END_TEST

START_TEST(jackknife_honest_when_correlated)
{
    /* tau_int = 199.5 and n = 8192: 64 bins would be shorter than tau
     * and the error ~25% too small; over 400 independent series the mean
     * jackknife error must match the actual spread of C */
    enum { R = 400 };
    size_t n = 8192;
    double s = 0, s2 = 0, se = 0;
    for (int r = 0; r < R; r++) {
        double *x = ar1(n, 0.995, 1000 + r), cv, err;
        metro_jackknife_cv(x, n, 1.0, 1.0, &cv, &err);
        s += cv;
        s2 += cv * cv;
        se += err;
        free(x);
    }
    double spread = sqrt(s2 / R - (s / R) * (s / R)), ratio = (se / R) / spread;
    printf("jackknife: mean error %g, spread %g\n", se / R, spread);
    ck_assert_msg(ratio > 0.85 && ratio < 1.15, "mean error %g, spread %g", se / R, spread);
}
END_TEST

START_TEST(degenerate)
{
    double c5[5] = {3, 3, 3, 3, 3}, tau, cv, err, acf[3];
    size_t w = 7;
    ck_assert(isnan(metro_binning_error(c5, 1, &tau)) && isnan(tau));
    ck_assert_double_eq(metro_binning_error(c5, 5, &tau), 0.0);
    ck_assert_double_eq(tau, 0.5);
    ck_assert(isnan(metro_tau_int_sokal(c5, 5, &w)));
    ck_assert_uint_eq(w, 0);
    ck_assert_int_eq(metro_acf(c5, 5, acf, 3), -1);
    ck_assert(isnan(acf[0]));
    ck_assert(isnan(metro_autocorr(c5, 5, 1)));
    metro_jackknife_cv(c5, 3, 1, 1, &cv, &err);
    ck_assert(isnan(cv) && isnan(err));
    metro_jackknife_cv(c5, 5, 1, 1, &cv, &err);
    ck_assert_double_eq(cv, 0.0);
    ck_assert_double_eq(err, 0.0);
    /* a short series (too few bins for two levels): the naive error */
    double s[40];
    for (int i = 0; i < 40; i++) s[i] = i % 3;
    ck_assert_double_eq_tol(metro_binning_error(s, 40, &tau), sqrt(metro_variance(s, 40) / 40), 1e-15);
    ck_assert_double_eq(tau, 0.5);
}
END_TEST

/* whether binning reached its plateau: not for a series too short for two
 * levels, nor for a long one whose correlation time is a large part of it
 * (tau ~ 200 in 2,000 samples); yes for the same process with n/tau ~ 500;
 * a constant is exactly known */
START_TEST(binning_plateau)
{
    int plateau = -1;
    double tau, c5[5] = {3, 3, 3, 3, 3};
    metro_binning_error_plateau(c5, 5, &tau, &plateau);
    ck_assert_int_eq(plateau, 1);
    double *x = ar1(40, 0.5, 3);
    metro_binning_error_plateau(x, 40, &tau, &plateau);
    ck_assert_int_eq(plateau, 0);
    free(x);
    x = ar1(2000, 0.995, 4);
    metro_binning_error_plateau(x, 2000, &tau, &plateau);
    ck_assert_msg(plateau == 0, "a plateau with tau = %g in 2000 samples", tau);
    free(x);
    x = ar1(1 << 20, 0.995, 5);
    const double e = metro_binning_error_plateau(x, 1 << 20, &tau, &plateau);
    ck_assert_msg(plateau == 1, "no plateau with tau = %g in 2^20 samples", tau);
    ck_assert_double_eq(e, metro_binning_error(x, 1 << 20, NULL)); /* the same error either way */
    free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, series_grows);
    tcase_add_test(tc, binning_plateau);
    tcase_add_test(tc, moments);
    tcase_add_test(tc, binning_ar1);
    tcase_add_test(tc, sokal_ar1);
    tcase_add_test(tc, acf);
    tcase_add_test(tc, jackknife_cv);
    tcase_add_test(tc, jackknife_honest_when_correlated);
    tcase_add_test(tc, degenerate);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
