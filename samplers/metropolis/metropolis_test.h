/* metropolis_test.h — test bodies shared by the CPU suite (test_metropolis.c)
 * and the GPU suite (test_metropolis_gpu.c), so both backends are held to
 * the same checks.  Include from one .c file. */
#ifndef METRO_METROPOLIS_TEST_H
#define METRO_METROPOLIS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "../../potentials/lj_fene/lj_fene_exact.h"

/* Config text of an lj_fene chain of n monomers under metropolis. */
static inline void chain_ini(char *buf, size_t size, int n, long sweeps, double T, double step,
                      const char *order, const char *scheme, int every)
{
    snprintf(buf, size,
             "[run]\nseed = 2024\nsweeps = %ld\nequilibration = 2000\n"
             "[system]\nparticles = %d\n"
             "[potential]\nplugin = lj_fene\n"
             "[sampler]\nplugin = metropolis\ntemperature = %.17g\nstep = %.17g\n"
             "order = %s\nscheme = %s\n"
             "[observable energy]\nplugin = energy\nevery = %d\nseries = false\n",
             sweeps, n, T, step, order, scheme, every);
}

/* Run the dimer at T on `device` and hold <E> and C_V/N to the exact
 * quadrature of lj_fene_exact.h: within 4 error bars, and the error bars
 * small enough (max_err) for that to mean something. */
static inline void dimer_exact(const char *device, double T, const char *order, const char *scheme,
                        long sweeps, double max_err)
{
    char ini[2048];
    /* step ~ the bond's thermal spread sqrt(T / 190), for acceptance ~ 0.5 */
    chain_ini(ini, sizeof ini, 2, sweeps, T, 0.17 * sqrt(T), order, scheme, 2);
    metro_sim *sim = metro_test_sim(ini, device, NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    char path[4200];
    snprintf(path, sizeof path, "%s/energy_stats.csv", metro_test_run_dir());
    double E = metro_test_csv(path, 0, "E_mean"), dE = metro_test_csv(path, 0, "E_err");
    double cv = metro_test_csv(path, 0, "Cv_per_N"), dcv = metro_test_csv(path, 0, "Cv_err");
    metro_lj_fene_model m = metro_lj_fene_model_default();
    double exact = metro_lj_fene_dimer_energy(&m, T), exact_cv = metro_lj_fene_dimer_cv(&m, T) / 2;
    printf("dimer %s T = %g order %s scheme %s: E = %.6f +- %.6f (exact %.6f, %.2f sigma), "
           "Cv/N = %.4f +- %.4f (exact %.4f, %.2f sigma)\n",
           device, T, order, scheme, E, dE, exact, (E - exact) / dE, cv, dcv, exact_cv,
           (cv - exact_cv) / dcv);
    ck_assert_msg(dE > 0 && dE < max_err, "E_err = %g not in (0, %g)", dE, max_err);
    ck_assert_msg(fabs(E - exact) < 4 * dE, "T = %g: E = %.6f +- %.6f, exact %.6f", T, E, dE, exact);
    ck_assert_msg(dcv > 0 && dcv < 0.05 * exact_cv, "Cv_err = %g", dcv);
    ck_assert_msg(fabs(cv - exact_cv) < 4 * dcv, "T = %g: Cv/N = %.5f +- %.5f, exact %.5f", T, cv,
                  dcv, exact_cv);
    snprintf(path, sizeof path, "%s/acceptance.csv", metro_test_run_dir());
    double rate = metro_test_csv(path, 0, "rate");
    ck_assert_msg(rate > 0.2 && rate < 0.9, "acceptance %g", rate);
    metro_sim_destroy(sim);
}

/* A copy of the state after `sweeps` sweeps of an n-chain on `device`. */
typedef struct traj {
    metro_float4 *pos;
    double energy;
    long long accepted, attempted;
} traj;

static inline traj run_chain(const char *device, int n, long sweeps, double T, double step,
                      const char *order, const char *scheme)
{
    char ini[2048];
    chain_ini(ini, sizeof ini, n, sweeps, T, step, order, scheme, 1);
    metro_sim *sim = metro_test_sim(ini, device, NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_advance(sim, sweeps, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_msg(st != NULL, "%s", err.msg);
    traj t = {malloc((size_t)n * sizeof(metro_float4)), st->energy[0], st->accepted[0],
              st->attempted[0]};
    memcpy(t.pos, st->pos, (size_t)n * sizeof(metro_float4));
    /* the running energy is the energy of the positions */
    double fresh = metro_sim_total_energy(sim, 0, &err);
    ck_assert_msg(fabs(t.energy - fresh) <= 1e-9 * (1 + fabs(fresh)),
                  "%s: running energy %.12g, recomputed %.12g", device, t.energy, fresh);
    metro_sim_destroy(sim);
    return t;
}

/* CPU and CUDA follow the same chain: same accepted count, positions within
 * 1e-5, energies within float rounding. */
static inline void same_trajectory(int n, long sweeps, double T, double step, const char *order,
                            const char *scheme)
{
    traj c = run_chain("cpu", n, sweeps, T, step, order, scheme);
    traj g = run_chain("cuda", n, sweeps, T, step, order, scheme);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(c.pos[i].x - g.pos[i].x));
        worst = fmax(worst, fabs(c.pos[i].y - g.pos[i].y));
        worst = fmax(worst, fabs(c.pos[i].z - g.pos[i].z));
    }
    printf("n = %d %s %s: accepted cpu %lld cuda %lld of %lld, max |dx| %.3g, E %.9g vs %.9g\n", n,
           order, scheme, c.accepted, g.accepted, c.attempted, worst, c.energy, g.energy);
    ck_assert_int_eq(c.attempted, (long long)n * sweeps);
    ck_assert_int_eq(g.attempted, c.attempted);
    ck_assert_int_eq(g.accepted, c.accepted);
    ck_assert_msg(worst < 1e-5, "positions differ by %g", worst);
    ck_assert_msg(fabs(c.energy - g.energy) < 1e-5 * (1 + fabs(c.energy)), "E %.9g vs %.9g",
                  c.energy, g.energy);
    free(c.pos);
    free(g.pos);
}

#endif
