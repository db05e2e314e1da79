/* test_lj_fene.c — the lj_fene potential's host table against PHYSICS.md §1
 * and against an independent double-precision formula (lj_fene_exact.h),
 * through a fake host API (no core needed).  lj_fene.c is linked in. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "fake_host.h"
#include "lj_fene.h"
#include "lj_fene_exact.h"

const metro_plugin *metro_plugin_entry(void);

static metro_ctx ctx;
static const metro_potential_api *api;
static void *pot;

/* The core's topology of one chain of every particle (what a lone lj_fene
 * gets when [system] declares no chains), for up to CHAIN_MAX particles;
 * static, as the core's lives as long as the run. */
#define CHAIN_MAX 4096
static unsigned char one_chain_bonds[CHAIN_MAX];
static int one_chain_first = 0, one_chain_length = CHAIN_MAX;
static metro_setup one_chain_setup;

/* Create the potential with key=value settings (NULL-terminated list). */
static void *make(const char *const *kv, int n)
{
    const metro_plugin *d = metro_plugin_entry();
    api = d->api;
    ck_assert(api->flags & METRO_POTENTIAL_BONDS);
    metro_params p = fake_params(d->params, kv, n);
    for (int i = 0; i + 1 < CHAIN_MAX; ++i) one_chain_bonds[i] = 1;
    one_chain_setup = (metro_setup){.particles = 13, .replicas = 1, .backend = METRO_BACKEND_CPU};
    one_chain_setup.topology = (metro_topology){1, &one_chain_first, &one_chain_length, one_chain_bonds};
    void *self = NULL;
    memset(&ctx, 0, sizeof ctx);
    ck_assert_int_eq(api->create(&fake_host, &ctx, &p, &one_chain_setup, &self), 0);
    ck_assert_double_eq(fake_fact_of("bond_length"), fake_real(&p, "r0"));
    return self;
}

static void setup_default(void) { pot = make(NULL, 0); }
static void teardown(void)
{
    if (pot) api->destroy(pot);
    pot = NULL;
}

static metro_float4 P(double x, double y, double z) { return metro_f4((float)x, (float)y, (float)z, 0); }

/* ---- PHYSICS.md numbers -------------------------------------------------- */

START_TEST(physics_numbers)
{
    size_t size = 0;
    const metro_lj_fene_params *p = api->device_params(pot, &size);
    ck_assert_uint_eq(size, sizeof *p);
    ck_assert_double_eq_tol(sqrt(p->sigma2), 0.623629, 1e-6);
    ck_assert_double_eq_tol(sqrt(p->rc2), 1.559073, 1e-6);
    ck_assert_double_eq_tol(p->shift, -0.0163169, 1e-7);
    /* the shifted well at r0, through the table: a dimer at r0 (FENE = 0) */
    metro_float4 x[2] = {P(0, 0, 0), P(0.7, 0, 0)};
    ck_assert_double_eq_tol(api->total(pot, x, 2), -0.983683, 1e-6);
    ck_assert_double_eq_tol(metro_lj_fene_lj(p, 0.49f), -0.983683, 1e-6);
    /* truncation: zero at and beyond r_c, continuous just inside */
    ck_assert_float_eq(metro_lj_fene_lj(p, p->rc2), 0.0f);
    ck_assert_float_eq(metro_lj_fene_lj(p, 4.0f), 0.0f);
    ck_assert_double_le(fabs(metro_lj_fene_lj(p, p->rc2 * 0.9999f)), 1e-5);
}
END_TEST

/* ---- hand-computed small configurations ---------------------------------- */

START_TEST(dimer_energies)
{
    metro_lj_fene_model m = metro_lj_fene_model_default();
    const double r[] = {0.41, 0.5, 0.62, 0.7, 0.75, 0.85, 0.99};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        /* along a diagonal, so all three components count */
        double c = r[k] / sqrt(3.0);
        metro_float4 x[2] = {P(0.1, -0.2, 0.3), P(0.1 + c, -0.2 + c, 0.3 + c)};
        double want = metro_lj_fene_dimer_u(&m, r[k]);
        ck_assert_msg(fabs(api->total(pot, x, 2) - want) < 2e-5 * (1 + fabs(want)),
                      "r = %g: total %.8g, formula %.8g", r[k], api->total(pot, x, 2), want);
    }
    /* FENE by hand at r = 0.85: -(40/2) 0.09 ln(1 - 0.25) */
    double fene = -20.0 * 0.09 * log(0.75);
    double s6 = pow(0.623629 / 0.85, 6);
    metro_float4 x[2] = {P(0, 0, 0), P(0.85, 0, 0)};
    ck_assert_double_eq_tol(api->total(pot, x, 2), fene + 4 * (s6 * s6 - s6) + 0.0163169, 2e-5);
}
END_TEST

START_TEST(bent_chain)
{
    /* equilateral triangle of side r0: two bonds and the 0-2 pair all at
     * the LJ minimum, FENE = 0 */
    double r0 = 0.7;
    metro_float4 x[3] = {P(0, 0, 0), P(r0, 0, 0), P(r0 + r0 * cos(2.0943951023931957),
                                                     r0 * sin(2.0943951023931957), 0)};
    ck_assert_double_eq_tol(api->total(pot, x, 3), 3 * -0.983683, 3e-6);
    /* right angle at bead 1: the 0-2 pair at r0 sqrt(2) is non-bonded LJ */
    metro_float4 y[3] = {P(0, 0, 0), P(r0, 0, 0), P(r0, r0, 0)};
    double s6 = pow(0.623629 / (r0 * sqrt(2.0)), 6);
    ck_assert_double_eq_tol(api->total(pot, y, 3), 2 * -0.983683 + 4 * (s6 * s6 - s6) + 0.0163169,
                            3e-6);
}
END_TEST

START_TEST(overstretched)
{
    metro_float4 x[2] = {P(0, 0, 0), P(1.001, 0, 0)};
    ck_assert(isinf(api->total(pot, x, 2)) && api->total(pot, x, 2) > 0);
    x[1] = P(0.399, 0, 0);
    ck_assert(isinf(api->total(pot, x, 2)) && api->total(pot, x, 2) > 0);
    /* just inside: finite */
    x[1] = P(0.995, 0, 0);
    ck_assert(isfinite(api->total(pot, x, 2)));
    /* a move that overstretches a bond: delta = +inf; a non-bonded pair
     * at the same distance is fine */
    metro_float4 c[3] = {P(0, 0, 0), P(0.7, 0, 0), P(1.4, 0, 0)};
    double d = api->delta(pot, c, 3, 2, P(1.75, 0, 0));
    ck_assert(isinf(d) && d > 0);
    d = api->delta(pot, c, 3, 0, P(-0.35, 0, 0)); /* bond 0-1 at 1.05 */
    ck_assert(isinf(d) && d > 0);
    metro_float4 e[3] = {P(0, 0, 0), P(0.7, 0, 0), P(0.7, 0.7, 0)};
    ck_assert(isfinite(api->delta(pot, e, 3, 2, P(0.7, 0.7, 1.1))) == 0); /* bond 1-2 at 1.3 */
    ck_assert(isfinite(api->delta(pot, e, 3, 0, P(0.2, -0.5, 0)))); /* 0-2 non-bonded at 1.3 */
}
END_TEST

/* ---- delta against total ------------------------------------------------- */

static double urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (*s >> 8) / 16777216.0;
}

START_TEST(delta_matches_total)
{
    enum { N = 13 };
    metro_float4 x[N];
    ck_assert_int_eq(api->initial(pot, &ctx, x, N), 0);
    unsigned s = 12345;
    int finite = 0, infinite = 0;
    for (int move = 0; move < 4000; move++) {
        int i = (int)(urand(&s) * N);
        double h = move < 2000 ? 0.05 : 0.3; /* small and bond-breaking moves */
        metro_float4 t = P(x[i].x + h * (2 * urand(&s) - 1), x[i].y + h * (2 * urand(&s) - 1),
                           x[i].z + h * (2 * urand(&s) - 1));
        double before = api->total(pot, x, N), d = api->delta(pot, x, N, i, t);
        metro_float4 old = x[i];
        x[i] = t;
        double after = api->total(pot, x, N);
        if (isinf(after)) {
            ck_assert_msg(isinf(d) && d > 0, "move %d: total inf but delta %g", move, d);
            x[i] = old;
            infinite++;
            continue;
        }
        ck_assert_msg(fabs(d - (after - before)) < 1e-9 * (1 + fabs(after)),
                      "move %d of %d: delta %.12g, total diff %.12g", move, i, d, after - before);
        finite++;
        if (urand(&s) < 0.5) x[i] = old; /* keep half the moves */
    }
    ck_assert_int_gt(finite, 1000);
    ck_assert_int_gt(infinite, 10);
}
END_TEST

/* ---- lj_bonded ------------------------------------------------------------ */

START_TEST(lj_bonded_off_changes_only_bonds)
{
    static const char *const off[] = {"lj_bonded=false"};
    void *nob = make(off, 1);
    const metro_potential_api *a = api;
    enum { N = 13 };
    metro_float4 x[N];
    a->initial(pot, &ctx, x, N);
    unsigned s = 777;
    /* a crumpled chain so non-bonded pairs are inside r_c too */
    for (int sweep = 0; sweep < 200; sweep++)
        for (int i = 0; i < N; i++) {
            metro_float4 t = P(x[i].x + 0.1 * (2 * urand(&s) - 1), x[i].y + 0.1 * (2 * urand(&s) - 1),
                               x[i].z + 0.1 * (2 * urand(&s) - 1));
            if (a->delta(pot, x, N, i, t) < 0.5) x[i] = t;
        }
    metro_lj_fene_model on = metro_lj_fene_model_default(), offm = on;
    offm.lj_bonded = 0;
    double want = 0.0;
    int near = 0;
    for (int i = 0; i + 1 < N; i++) {
        double r = sqrt(metro_dist2(x[i], x[i + 1]));
        want += metro_lj_fene_dimer_u(&on, r) - metro_lj_fene_dimer_u(&offm, r);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 2; j < N; j++) near += metro_dist2(x[i], x[j]) < 1.5f * 1.5f;
    ck_assert_int_gt(near, 5);
    double e_on = a->total(pot, x, N), e_off = a->total(nob, x, N);
    ck_assert_msg(fabs((e_on - e_off) - want) < 1e-4, "on - off = %.8g, bonded LJ sum %.8g",
                  e_on - e_off, want);
    /* and delta agrees with total for the off model too */
    metro_float4 t = P(x[5].x + 0.02, x[5].y, x[5].z - 0.01);
    double before = a->total(nob, x, N), d = a->delta(nob, x, N, 5, t);
    x[5] = t;
    ck_assert_double_eq_tol(d, a->total(nob, x, N) - before, 1e-9);
    a->destroy(nob);
}
END_TEST

/* ---- start configuration and parameter checks ----------------------------- */

START_TEST(initial_chain)
{
    enum { N = 55 };
    metro_float4 x[N];
    ck_assert_int_eq(api->initial(pot, &ctx, x, N), 0);
    for (int i = 0; i + 1 < N; i++)
        ck_assert_double_eq_tol(sqrt(metro_dist2(x[i], x[i + 1])), 0.7, 1e-5);
    double e = api->total(pot, x, N);
    ck_assert(isfinite(e));
    /* straight chain: N-1 bonds at the well, N-2 pairs at 2 r0 inside r_c */
    double s6 = pow(0.623629 / 1.4, 6);
    ck_assert_double_eq_tol(e, (N - 1) * -0.983683 + (N - 2) * (4 * (s6 * s6 - s6) + 0.0163169),
                            1e-4);
}
END_TEST

START_TEST(refuses_R_ge_r0)
{
    static const char *const bad[] = {"R=0.8"};
    const metro_plugin *d = metro_plugin_entry();
    metro_params p = fake_params(d->params, bad, 1);
    metro_setup setup = {.particles = 2};
    void *self = NULL;
    memset(&ctx, 0, sizeof ctx);
    ck_assert_int_ne(((const metro_potential_api *)d->api)->create(&fake_host, &ctx, &p, &setup, &self), 0);
    ck_assert_ptr_null(self);
    ck_assert_int_eq(ctx.fails, 1);
    ck_assert_ptr_nonnull(strstr(ctx.msg, "R = 0.8"));
}
END_TEST

START_TEST(parameters_change_model)
{
    /* K, R, epsilon, rc_sigma, r0 all reach the energy: compare with the
     * independent formula for a non-default model */
    static const char *const kv[] = {"r0=0.9", "K=25", "R=0.35", "epsilon=1.5", "rc_sigma=2"};
    void *o = make(kv, 5);
    metro_lj_fene_model m = {0.9, 25, 0.35, 1.5, 2.0, 1};
    const double r[] = {0.6, 0.9, 1.2};
    for (int k = 0; k < 3; k++) {
        metro_float4 x[2] = {P(0, 0, 0), P(0, r[k], 0)};
        double want = metro_lj_fene_dimer_u(&m, r[k]);
        ck_assert_msg(fabs(api->total(o, x, 2) - want) < 2e-5 * (1 + fabs(want)), "r %g: %.8g vs %.8g",
                      r[k], api->total(o, x, 2), want);
    }
    api->destroy(o);
}
END_TEST

/* ---- the exact dimer helper itself ---------------------------------------- */

START_TEST(exact_dimer_converged)
{
    metro_lj_fene_model m = metro_lj_fene_model_default();
    const double T[] = {0.05, 0.2, 0.5, 1.0, 3.0, 10.0};
    for (int k = 0; k < 6; k++) {
        double a2, b2, a = metro_lj_fene_dimer_moments(&m, T[k], 0, &a2);
        double b = metro_lj_fene_dimer_moments(&m, T[k], 9, &b2);
        ck_assert_msg(fabs(a - b) < 1e-12 && fabs(a2 - b2) < 1e-12, "T %g: %.15g vs %.15g", T[k],
                      a, b);
        /* low T: near the bottom of the well, E -> U_min + (3/2)T-ish
         * (harmonic radial + free angles gives T/2 from the radial mode
         * only; just demand the ordering) */
        ck_assert_double_gt(a, -0.983683 - 1e-6);
    }
    /* <E> rises with T and C_V > 0 */
    ck_assert_double_lt(metro_lj_fene_dimer_energy(&m, 0.5), metro_lj_fene_dimer_energy(&m, 1.0));
    ck_assert_double_gt(metro_lj_fene_dimer_cv(&m, 0.5), 0.0);
    /* harmonic limit: at low T the radial mode gives <E> ~ U_min + T/2 */
    double t = 0.002, e = metro_lj_fene_dimer_energy(&m, t);
    ck_assert_msg(fabs((e + 0.983683) / t - 0.5) < 0.05, "(E - Umin)/T = %g", (e + 0.983683) / t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lj_fene");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup_default, teardown);
    tcase_add_test(tc, physics_numbers);
    tcase_add_test(tc, dimer_energies);
    tcase_add_test(tc, bent_chain);
    tcase_add_test(tc, overstretched);
    tcase_add_test(tc, delta_matches_total);
    tcase_add_test(tc, lj_bonded_off_changes_only_bonds);
    tcase_add_test(tc, initial_chain);
    tcase_add_test(tc, refuses_R_ge_r0);
    tcase_add_test(tc, parameters_change_model);
    tcase_add_test(tc, exact_dimer_converged);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
