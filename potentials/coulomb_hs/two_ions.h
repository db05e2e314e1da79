/* two_ions.h — the exact check of PHYSICS.md §2 for tests: two ions alone
 * in the cell.  Their centres are independent and uniform in the ball the
 * centres live in, of radius a = R_cell - d/2 (coulomb_hs confines a centre
 * to |r| <= R_cell - d/2), so their distance has the density
 *   p(r) = 3r^2/a^3 - 9r^3/(4a^4) + 3r^5/(16a^6),   0 <= r <= 2a,
 * and <βU> = ∫ p e^{-βU} βU dr / ∫ p e^{-βU} dr with βU = λ_B z1 z2 / r for
 * r >= d and +inf below (the hard core).  Also a runner that measures <βU>
 * with blocking error bars from any config.  Test-only; include from one .c
 * file of a suite that links libmetro. */
#ifndef COULOMB_HS_TWO_IONS_H
#define COULOMB_HS_TWO_IONS_H

#include <math.h>
#include <stdio.h>

#include "testutil.h"

/* <βU> by Simpson's rule on [d, 2a] (200000 intervals). */
static double two_ions_exact(double bjerrum, double z1z2, double d, double cell_radius)
{
    const double a = cell_radius - d / 2;
    const int n = 200000;
    const double h = (2 * a - d) / n;
    double num = 0.0, den = 0.0;
    for (int k = 0; k <= n; ++k) {
        double r = d + k * h;
        double p = 3 * r * r / (a * a * a) - 9 * r * r * r / (4 * a * a * a * a) +
                   3 * pow(r, 5) / (16 * pow(a, 6));
        double u = bjerrum * z1z2 / r;
        double w = (k == 0 || k == n) ? 1 : (k & 1) ? 4 : 2;
        num += w * p * exp(-u) * u;
        den += w * p * exp(-u);
    }
    return num / den;
}

/* The config of the two ions (+1 and -1, diameter d, λ_B = 7.117 Å in a
 * cell of radius R) with the given [sampler] body. */
static void two_ions_ini(char *buf, size_t n, int seed, double d, double R, const char *sampler)
{
    snprintf(buf, n,
             "[run]\nseed = %d\nsweeps = 0\n\n[system]\nparticles = 2\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = %g\ncell_radius = %g\n"
             "bjerrum = 7.117\n\n[sampler]\n%s\n",
             seed, d, R, sampler);
}

typedef struct two_ions_result {
    double mean, err;     /* <βU> and its blocking error */
    double acceptance;
} two_ions_result;

/* Run `blocks` blocks of `per_block` sweeps after `equil` sweeps on
 * `device`, reading the running energy after every sweep. */
static two_ions_result two_ions_measure(const char *ini, const char *device, long equil, int blocks,
                                        long per_block)
{
    metro_sim *sim = metro_test_sim(ini, device, NULL, 0);
    metro_error err = {0};
    ck_assert_int_eq(metro_sim_advance(sim, equil, &err), METRO_OK);
    double sum = 0.0, sum2 = 0.0;
    for (int b = 0; b < blocks; ++b) {
        double s = 0.0;
        for (long k = 0; k < per_block; ++k) {
            ck_assert_msg(metro_sim_advance(sim, 1, &err) == METRO_OK, "%s", err.msg);
            const metro_state *st = metro_sim_state(sim, &err);
            ck_assert_ptr_nonnull(st);
            s += st->energy[0];
        }
        s /= (double)per_block;
        sum += s;
        sum2 += s * s;
    }
    const metro_state *st = metro_sim_state(sim, &err);
    two_ions_result r;
    r.mean = sum / blocks;
    r.err = sqrt(fmax(sum2 / blocks - r.mean * r.mean, 0.0) / (blocks - 1));
    r.acceptance = (double)st->accepted[0] / (double)st->attempted[0];
    /* the running energy is the energy of the final state: to rounding in
     * double on the CPU; the GPU sums float pair terms over tiles, so its
     * running energy wanders by ~1e-6 over a long run (the core's drift
     * check, 1e-4, watches the same thing in production) */
    double e = metro_sim_total_energy(sim, 0, &err);
    double tol = metro_sim_backend(sim) == METRO_BACKEND_CUDA ? 1e-5 : 1e-9;
    ck_assert_double_eq_tol(st->energy[0], e, tol * fmax(1.0, fabs(e)));
    metro_sim_destroy(sim);
    return r;
}

#endif
