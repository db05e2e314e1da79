/* test_polymer_shape — the shape of a known configuration by hand, the
 * multiple-histogram reweighting on samples of a known density of states,
 * and a parallel tempering run whose reweighted curve reproduces the
 * direct estimates at the simulated temperatures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#include "polymer_shape.h"
#include "polymer_shape_wham.h"

START_TEST(shape_by_hand)
{
    /* corners of a staircase: mean (3/4, 1/2, 1/4); squared distances to it
     * 7/8, 3/8, 3/8, 7/8 -> r_gyr^2 = 5/8; end to end (1,1,1) -> 3 */
    metro_float4 p[4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}};
    double rg2, ree2;
    metro_polymer_shape(p, 4, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - 0.625) < 1e-15, "rg2 = %.17g", rg2);
    ck_assert_msg(fabs(ree2 - 3.0) < 1e-15, "ree2 = %.17g", ree2);
    /* far from the origin: the same (two passes, no cancellation) */
    for (int k = 0; k < 4; ++k) { p[k].x += 1024; p[k].y -= 512; p[k].z += 8; }
    metro_polymer_shape(p, 4, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - 0.625) < 1e-12 && fabs(ree2 - 3.0) < 1e-12, "shifted: %.17g %.17g", rg2, ree2);
    /* a random chain against r_gyr^2 = (1/2N^2) sum_ij |r_i - r_j|^2 */
    metro_float4 q[37];
    unsigned s = 12345;
    for (int k = 0; k < 37; ++k) {
        s = s * 1103515245u + 12345u; q[k].x = (float)(s >> 8) / 16777216.0f;
        s = s * 1103515245u + 12345u; q[k].y = (float)(s >> 8) / 16777216.0f;
        s = s * 1103515245u + 12345u; q[k].z = (float)(s >> 8) / 16777216.0f;
        q[k].w = 0;
    }
    double pairs = 0;
    for (int i = 0; i < 37; ++i)
        for (int j = 0; j < 37; ++j) {
            double dx = (double)q[i].x - q[j].x, dy = (double)q[i].y - q[j].y, dz = (double)q[i].z - q[j].z;
            pairs += dx * dx + dy * dy + dz * dz;
        }
    metro_polymer_shape(q, 37, &rg2, &ree2);
    ck_assert_msg(fabs(rg2 - pairs / (2.0 * 37 * 37)) < 1e-12, "%.17g vs %.17g", rg2, pairs / (2.0 * 37 * 37));
}
END_TEST

/* Samples of g(E) ~ E^(m-1) (E > 0) at beta: a Gamma(m, 1/beta) variable,
 * the sum of m exponentials.  <E> = m / beta, beta^2 var(E) = m. */
static double gamma_sample(unsigned long long *s, int m, double beta)
{
    double e = 0;
    for (int i = 0; i < m; ++i) {
        *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
        e -= log(((double)(*s >> 11) + 0.5) / 9007199254740992.0);
    }
    return e / beta;
}

START_TEST(wham_known_density_of_states)
{
    const int K = 6, m = 20, n = 40000;
    double beta[6];
    for (int k = 0; k < K; ++k) beta[k] = 3.0 * pow(1.0 / 3.0, k / 5.0); /* 3 ... 1 */
    unsigned long long s = 88172645463325252ull;
    double *e = malloc(sizeof *e * K * n);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) {
            double x = gamma_sample(&s, m, beta[k]);
            e[k * n + i] = x;
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
    metro__wham w;
    ck_assert_int_eq(metro__wham_init(&w, K, beta, lo, hi, 0.01), 0);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) metro__wham_add(&w, k, e[k * n + i], 2 * e[k * n + i], 0);
    long it = metro__wham_solve(&w, 1e-10, 100000, 0);
    ck_assert_msg(it > 0, "did not converge");
    /* exact free energies: Z(beta) ~ beta^-m, so f_k - f_0 = m ln(beta_k / beta_0) */
    for (int k = 1; k < K; ++k)
        ck_assert_msg(fabs(w.f[k] - m * log(beta[k] / beta[0])) < 0.02, "f_%d = %g, exact %g", k, w.f[k],
                      m * log(beta[k] / beta[0]));
    const double probe[] = {2.7, 2.0, 1.6, 1.13};
    for (int i = 0; i < 4; ++i) {
        metro__wham_avg a;
        metro__wham_average(&w, probe[i], &a);
        double E = m / probe[i], cv = probe[i] * probe[i] * (a.e2 - a.e * a.e);
        ck_assert_msg(fabs(a.e - E) < 0.005 * E, "beta %g: <E> = %g, exact %g", probe[i], a.e, E);
        ck_assert_msg(fabs(cv - m) < 0.04 * m, "beta %g: beta^2 var E = %g, exact %d", probe[i], cv, m);
        ck_assert_msg(fabs(a.a - 2 * a.e) < 1e-9 * a.e, "observable A = 2E reweights to %g, 2<E> = %g", a.a, 2 * a.e);
    }
    metro__wham_free(&w);
    free(e);
}
END_TEST

/* A two-phase density of states, g = g_s + A g_l with Gamma-shaped
 * branches (g_s(E) = (E - Es)^(cs-1) / Gamma(cs), the same for l): the
 * "solid" coexists with the "liquid" at T = 0.32 with a latent heat, so
 * the histograms near it are bimodal and overlap poorly, as at the
 * freezing of the 55-mer.  Z(beta) = e^(-beta Es) beta^-cs + A e^(-beta El) beta^-cl.
 * The plain self-consistent iteration needed about 1500 passes here (a
 * minute for the p55 run's 31000 bins x 64 temperatures); Newton's method
 * on the convex WHAM objective takes a handful. */
START_TEST(wham_two_phases_converges_fast)
{
    enum { K = 16, n = 20000 };
    const double cs = 81, Es = -200, cl = 90, El = -185, Tf = 0.32;
    const double lnA = (cs - cl) * log(Tf) + (El - Es) / Tf;
    double beta[K], lnz[K];
    for (int k = 0; k < K; ++k) {
        beta[k] = 1.0 / (0.2 * pow(2.5 / 0.2, k / (K - 1.0)));
        double zs = -beta[k] * Es - cs * log(beta[k]), zl = lnA - beta[k] * El - cl * log(beta[k]);
        lnz[k] = fmax(zs, zl) + log1p(exp(-fabs(zs - zl)));
    }
    unsigned long long s = 0x9e3779b97f4a7c15ull;
    double *e = malloc(sizeof *e * K * n);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; ++k) {
        double zs = -beta[k] * Es - cs * log(beta[k]);
        double ps = exp(zs - lnz[k]); /* probability of the solid */
        for (int i = 0; i < n; ++i) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            int solid = ((double)(s >> 11) + 0.5) / 9007199254740992.0 < ps;
            double x = solid ? Es + gamma_sample(&s, (int)cs, beta[k]) : El + gamma_sample(&s, (int)cl, beta[k]);
            e[k * n + i] = x;
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
    }
    metro__wham w;
    ck_assert_int_eq(metro__wham_init(&w, K, beta, lo, hi, 0.01), 0);
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < n; ++i) metro__wham_add(&w, k, e[k * n + i], 1, 0);
    long it = metro__wham_solve(&w, 1e-10, 100000, 0);
    ck_assert_msg(it > 0 && it <= 30, "%ld iterations", it);
    /* f_k - f_0 = -(ln Z_k - ln Z_0) */
    for (int k = 1; k < K; ++k)
        ck_assert_msg(fabs(w.f[k] + lnz[k] - lnz[0]) < 0.15, "f_%d = %.6f, exact %.6f", k, w.f[k], lnz[0] - lnz[k]);
    /* a warm start from the answer is done at once */
    ck_assert_int_le(metro__wham_solve(&w, 1e-10, 100000, 1), 2);
    /* the peak of C_V at the coexistence */
    metro__wham_avg a;
    metro__wham_average(&w, 1 / Tf, &a);
    double cv = (a.e2 - a.e * a.e) / (Tf * Tf);
    ck_assert_msg(cv > 5 * cl, "C_V(T_f) = %g: no latent heat", cv);
    metro__wham_free(&w);
    free(e);
}
END_TEST

/* Row of csv whose column T equals T (within 1e-7), or -1. */
static int row_of(const char *path, double T)
{
    for (int r = 0;; ++r) {
        double t = metro_test_csv(path, r, "T");
        if (isnan(t)) return -1;
        if (fabs(t - T) < 1e-7 * T) return r;
    }
}

START_TEST(reweighting_reproduces_direct_estimates)
{
    const char *ini = "[run]\nseed = 7\nsweeps = 40000\nequilibration = 4000\n"
                      "[system]\nparticles = 13\n"
                      "[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nt_min = 0.6\nt_max = 1.6\nreplicas = 6\n"
                      "step = 0.1\nexchange_every = 10\n"
                      "[observable polymer_shape]\nplugin = polymer_shape\nevery = 10\nreweight_points = 50\n";
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    char direct[4200], rw[4200];
    snprintf(direct, sizeof direct, "%s/thermo.csv", metro_test_run_dir());
    snprintf(rw, sizeof rw, "%s/thermo_reweighted.csv", metro_test_run_dir());
    char *text = metro_test_slurp(direct);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(!strncmp(text, "T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n",
                           strlen("T,E_mean,E_err,Cv_per_N,Cv_err,Rg2_mean,Rg2_err,Rg2_var,Ree2_mean,Ree2_err,tau_int,samples\n")),
                  "header: %.120s", text);
    free(text);
    const char *cols[][2] = {{"E_mean", "E_err"}, {"Cv_per_N", "Cv_err"}, {"Rg2_mean", "Rg2_err"}, {"Ree2_mean", "Ree2_err"}};
    for (int k = 0; k < 6; ++k) {
        double T = metro_test_csv(direct, k, "T");
        ck_assert_int_eq((int)metro_test_csv(direct, k, "samples"), 4000);
        int r = row_of(rw, T);
        ck_assert_msg(r >= 0, "T = %g missing from the reweighted curve", T);
        for (int c = 0; c < 4; ++c) {
            double a = metro_test_csv(direct, k, cols[c][0]), ea = metro_test_csv(direct, k, cols[c][1]);
            double b = metro_test_csv(rw, r, cols[c][0]), eb = metro_test_csv(rw, r, cols[c][1]);
            ck_assert_msg(ea > 0 && eb > 0 && isfinite(a) && isfinite(b), "T = %g %s: %g +- %g, %g +- %g", T, cols[c][0], a,
                          ea, b, eb);
            ck_assert_msg(fabs(a - b) < 2 * sqrt(ea * ea + eb * eb), "T = %g %s: direct %g +- %g, reweighted %g +- %g", T,
                          cols[c][0], a, ea, b, eb);
        }
    }
    /* the grid: reweight_points temperatures plus the simulated ones */
    int rows = 0;
    while (!isnan(metro_test_csv(rw, rows, "T"))) ++rows;
    ck_assert_msg(rows >= 50 && rows <= 50 + 6, "%d rows", rows); /* the ends coincide */
    struct stat sb;
    char png[4200];
    snprintf(png, sizeof png, "%s/cv.png", metro_test_run_dir());
    if (system("command -v gnuplot >/dev/null 2>&1") == 0)
        ck_assert_msg(stat(png, &sb) == 0 && sb.st_size > 1000, "cv.png missing");
    metro_sim_destroy(sim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("polymer_shape");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, shape_by_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("reweighting");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, wham_known_density_of_states);
    tcase_add_test(tc, wham_two_phases_converges_fast);
    tcase_add_test(tc, reweighting_reproduces_direct_estimates);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
