/* hier_chain.h — what the hierarchical sampler's same-chain tests share
 * (test_hierarchical on the CPU, test_hierarchical_gpu on CUDA): the 3:-1
 * electrolyte's config and a run of it, cycle by cycle. */
#ifndef HIER_CHAIN_H
#define HIER_CHAIN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"
#include "coulomb_hs.h"
#include "testutil.h"

/* A 3:-1 electrolyte of n ions in a cell of radius R; coulomb_hs on one
 * thread so the reference's sums (and this sampler's fallbacks) are
 * reproducible to the bit. */
static void ini_electrolyte(char *buf, size_t len, int seed, int n, double R, const char *sampler)
{
    snprintf(buf, len,
             "[run]\nseed = %d\nsweeps = 0\nequilibration = 0\n\n[system]\nparticles = %d\n\n"
             "[potential]\nplugin = coulomb_hs\nvalences = 3, -1\ndiameters = 7.5\ncell_radius = %g\n"
             "bjerrum = 7.117\nthreads = %d\n\n[sampler]\n%s\n",
             seed, n, R, n > 20000 ? 0 : 1, sampler);
}

typedef struct chain {
    long long *acc; /* per cycle */
    metro_float4 *pos;
    double energy, fresh; /* running and recomputed (NAN above 70,000 ions: O(N^2)) */
} chain;

/* `cycles` cycles of ini on device ("cpu" or "cuda") */
static chain run_chain(const char *ini, const char *device, int n, int cycles)
{
    metro_sim *sim = metro_test_sim(ini, device, NULL, 0);
    metro_error err = {0};
    chain c;
    c.acc = calloc((size_t)cycles, sizeof *c.acc);
    long long prev = 0;
    for (int k = 0; k < cycles; ++k) {
        ck_assert_msg(metro_sim_advance(sim, 1, &err) == METRO_OK, "%s", err.msg);
        const metro_state *st = metro_sim_state(sim, &err);
        ck_assert_msg(st != NULL, "%s", err.msg);
        c.acc[k] = st->accepted[0] - prev;
        prev = st->accepted[0];
    }
    const metro_state *st = metro_sim_state(sim, &err);
    c.pos = malloc((size_t)n * sizeof *c.pos);
    memcpy(c.pos, st->pos, (size_t)n * sizeof *c.pos);
    c.energy = st->energy[0];
    c.fresh = n <= 70000 ? metro_sim_total_energy(sim, 0, &err) : NAN;
    metro_sim_destroy(sim);
    return c;
}

static void free_chain(chain *c)
{
    free(c->acc);
    free(c->pos);
}

/* The exact energy of the 3:-1 electrolyte at pos: λ_B z_i z_j / r_ij in
 * long double on the float positions (the core's direct sum rounds
 * fl(λ_B z_i) z_j in float, a systematic error that grows with N) */
static double exact_energy(const metro_float4 *pos, int n)
{
    long double e = 0.0L;
    for (int i = 0; i < n; ++i) {
        long double s = 0.0L;
        for (int j = i + 1; j < n; ++j) {
            const long double dx = (long double)pos[i].x - pos[j].x, dy = (long double)pos[i].y - pos[j].y,
                              dz = (long double)pos[i].z - pos[j].z;
            s += (coulomb_hs_species(pos[j].w) ? -1.0L : 3.0L) / sqrtl(dx * dx + dy * dy + dz * dz);
        }
        e += (coulomb_hs_species(pos[i].w) ? -1.0L : 3.0L) * s;
    }
    return (double)(7.117L * e);
}

/* The energies from the tree (energy = tree: the run's start and its
 * checks, total() of ABI 5) against the core's direct sum of the same
 * positions (energy = direct, the same chain) and the exact sum: at the
 * start and after each of `rounds` pairs of cycles, on device.  Returns
 * the largest difference from either, relative to max(|E|, N), the drift
 * check's scale. */
static double tree_vs_direct(const char *device, int n, double R, const char *opts, int rounds)
{
    char ini[2][2048], s[512];
    for (int k = 0; k < 2; ++k) {
        snprintf(s, sizeof s, "plugin = hierarchical\n%s\nenergy = %s", opts, k ? "direct" : "tree");
        ini_electrolyte(ini[k], sizeof ini[k], 9, n, R, s);
    }
    metro_sim *a = metro_test_sim(ini[0], device, NULL, 0), *b = metro_test_sim(ini[1], device, NULL, 0);
    metro_error err = {0};
    const metro_state *sa = metro_sim_state(a, &err), *sb = metro_sim_state(b, &err);
    ck_assert_msg(sa != NULL && sb != NULL, "%s", err.msg);
    const double e0 = sa->energy[0];
    double ex = exact_energy(sb->pos, n), scale = fmax(fabs(ex), (double)n);
    double worst = fmax(fabs(e0 - sb->energy[0]), fabs(e0 - ex)) / scale;
    printf("N = %d, R = %g, %s: start: tree %.12g, direct %.12g, exact %.12g\n", n, R, device, e0, sb->energy[0], ex);
    for (int r = 0; r < rounds; ++r) {
        ck_assert_msg(metro_sim_advance(a, 2, &err) == METRO_OK, "%s", err.msg);
        ck_assert_msg(metro_sim_advance(b, 2, &err) == METRO_OK, "%s", err.msg);
        const double et = metro_sim_total_energy(a, 0, &err), ed = metro_sim_total_energy(b, 0, &err);
        sa = metro_sim_state(a, &err);
        sb = metro_sim_state(b, &err);
        ck_assert_msg(memcmp(sa->pos, sb->pos, (size_t)n * sizeof *sa->pos) == 0, "the two chains parted");
        ex = exact_energy(sb->pos, n);
        scale = fmax(fabs(ex), (double)n);
        printf("  after %d cycles: tree %.12g, direct %.12g, exact %.12g, running %.12g\n", 2 * (r + 1), et, ed, ex,
               sa->energy[0]);
        worst = fmax(worst, fmax(fabs(et - ed), fabs(et - ex)) / scale);
    }
    metro_sim_destroy(a);
    metro_sim_destroy(b);
    printf("  largest difference %.3g of max(|E|, N)\n", worst);
    return worst;
}

#endif
