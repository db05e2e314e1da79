/* test_parallel_tempering_gpu — the CUDA backend of the parallel tempering
 * sampler against the CPU reference: the same seed gives the same Markov
 * chain replica by replica (accept counts and slot maps equal, energies and
 * positions within float tolerance) for every group size and for the
 * global-memory path; and the dimer exact check on the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "lj_fene_exact.h"
#include "metro/stats.h"

static const metro_state *advance(metro_sim *sim, long sweeps)
{
    metro_error err = {0};
    ck_assert_msg(metro_sim_advance(sim, sweeps, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_msg(st != NULL, "%s", err.msg);
    return st;
}

/* Run the same config on both backends and compare replica by replica. */
static void compare(int n, const char *lanes, int nr, int ladders, long sweeps, int every)
{
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 29\nsweeps = 1\n[system]\nparticles = %d\n[potential]\nplugin = lj_fene\n"
             "[sampler]\nplugin = parallel_tempering\nt_min = 0.25\nt_max = 3\nreplicas = %d\nladders = %d\n"
             "exchange_every = %d\nstep = 0.05\nlanes = %s\nstep_scaling = %s\n",
             n, nr, ladders, every, lanes, n == 13 ? "sqrt" : "none");
    metro_sim *c = metro_test_sim(ini, "cpu", NULL, 0);
    metro_sim *g = metro_test_sim(ini, "cuda", NULL, 0);
    ck_assert_int_eq(metro_sim_backend(g), METRO_BACKEND_CUDA);
    const metro_state *sc = advance(c, sweeps), *sg = advance(g, sweeps);
    ck_assert_int_eq(sc->replicas, sg->replicas);
    long long acc = 0, moved = 0;
    for (int r = 0; r < sc->replicas; ++r) {
        ck_assert_msg(sc->accepted[r] == sg->accepted[r], "N %d lanes %s replica %d: accepted %lld (CPU) vs %lld (GPU)",
                      n, lanes, r, sc->accepted[r], sg->accepted[r]);
        ck_assert_int_eq(sc->attempted[r], sg->attempted[r]);
        ck_assert_msg(sc->slot_replica[r] == sg->slot_replica[r], "N %d lanes %s slot %d: replica %d vs %d", n, lanes,
                      r, sc->slot_replica[r], sg->slot_replica[r]);
        double tol = 1e-5 * fmax((double)n, fabs(sc->energy[r]));
        ck_assert_msg(fabs(sc->energy[r] - sg->energy[r]) < tol, "N %d lanes %s replica %d: E %.10g vs %.10g", n,
                      lanes, r, sc->energy[r], sg->energy[r]);
        acc += sc->accepted[r];
        moved += sc->slot_replica[r] != r;
    }
    for (size_t i = 0; i < (size_t)sc->replicas * n; ++i) {
        metro_float4 a = sc->pos[i], b = sg->pos[i];
        ck_assert_msg(fabsf(a.x - b.x) < 1e-4f && fabsf(a.y - b.y) < 1e-4f && fabsf(a.z - b.z) < 1e-4f,
                      "N %d lanes %s particle %zu differs", n, lanes, i);
    }
    /* the comparison means something only if moves and exchanges happened */
    ck_assert(acc > 0 && acc < (long long)sc->replicas * n * sweeps);
    if (nr > 1 && sweeps >= 4 * every) ck_assert_msg(moved > 0, "no exchange accepted");
    metro_sim_destroy(c);
    metro_sim_destroy(g);
}

START_TEST(gpu_equals_cpu_every_group_size)
{
    const char *lanes[] = {"4", "8", "16", "32", "auto"};
    for (int i = 0; i < 5; ++i) {
        compare(13, lanes[i], 6, 3, 60, 3);
        compare(55, lanes[i], 4, 2, 20, 2);
    }
    compare(40, "16", 5, 1, 30, 1); /* N not a multiple of the group */
    compare(2, "4", 3, 2, 100, 5);  /* the dimer: both bonds of one pair */
}
END_TEST

START_TEST(gpu_equals_cpu_global_memory_path)
{
    compare(3100, "32", 2, 1, 2, 1); /* 3100 x 16 B > 48 KiB: chains stay in global memory */
}
END_TEST

START_TEST(gpu_energies_past_65535_replicas)
{
    /* 70,400 replicas: more than one launch's grid.y of the core's energy
     * kernel (65,535), which once failed with "invalid argument".  The
     * initial chains are placed on the host, the same on both backends, so
     * the GPU's totals must equal the CPU's replica by replica; after a few
     * sweeps the running energies past the boundary must equal a fresh
     * recomputation. */
    const char *ini = "[run]\nseed = 3\nsweeps = 1\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nreplicas = 64\nladders = 1100\nstep = 0.05\n";
    metro_sim *c = metro_test_sim(ini, "cpu", NULL, 0);
    metro_sim *g = metro_test_sim(ini, "cuda", NULL, 0);
    metro_error err = {0};
    const metro_state *sc = metro_sim_state(c, &err), *sg = metro_sim_state(g, &err);
    ck_assert_int_eq(sg->replicas, 70400);
    for (int r = 0; r < sg->replicas; ++r)
        ck_assert_msg(fabs(sc->energy[r] - sg->energy[r]) < 1e-9 * fmax(13.0, fabs(sc->energy[r])),
                      "replica %d: initial E %.12g (CPU) vs %.12g (GPU)", r, sc->energy[r], sg->energy[r]);
    sg = advance(g, 3);
    for (int r = 65000; r < sg->replicas; r += 7) {
        double e = metro_sim_total_energy(g, r, &err);
        ck_assert_msg(fabs(e - sg->energy[r]) < 1e-5 * fmax(13.0, fabs(e)), "replica %d: running %.10g, recomputed %.10g (%s)",
                      r, sg->energy[r], e, err.msg);
    }
    metro_sim_destroy(c);
    metro_sim_destroy(g);
}
END_TEST

START_TEST(gpu_equals_cpu_across_advance_calls)
{
    /* exchange points falling inside and at the end of advance() calls */
    const char *ini = "[run]\nseed = 5\nsweeps = 1\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\nreplicas = 8\nexchange_every = 7\nstep = 0.05\n";
    metro_sim *c = metro_test_sim(ini, "cpu", NULL, 0);
    metro_sim *g = metro_test_sim(ini, "cuda", NULL, 0);
    const long chunks[] = {3, 4, 10, 1, 13, 7, 20};
    const metro_state *sc = NULL, *sg = NULL;
    for (int i = 0; i < 7; ++i) {
        sc = advance(c, chunks[i]);
        sg = advance(g, chunks[i]);
    }
    for (int r = 0; r < 8; ++r) {
        ck_assert_int_eq(sc->accepted[r], sg->accepted[r]);
        ck_assert_int_eq(sc->slot_replica[r], sg->slot_replica[r]);
    }
    metro_sim_destroy(c);
    metro_sim_destroy(g);
}
END_TEST

START_TEST(dimer_exact_gpu)
{
    const char *ini = "[run]\nseed = 17\nsweeps = 1\n[system]\nparticles = 2\n[potential]\nplugin = lj_fene\n"
                      "[sampler]\nplugin = parallel_tempering\ntemperatures = 0.3, 0.6, 1.0, 2.0\nladders = 64\n"
                      "step = 0.05\nexchange_every = 5\n";
    metro_sim *sim = metro_test_sim(ini, "cuda", NULL, 0);
    const int nr = 4, L = 64;
    const double T[4] = {0.3, 0.6, 1.0, 2.0};
    advance(sim, 2000);
    metro_series *s = calloc(nr * L, sizeof *s);
    for (int m = 0; m < 4000; ++m) {
        const metro_state *st = advance(sim, 10);
        for (int t = 0; t < nr * L; ++t) metro_series_push(&s[t], st->energy[st->slot_replica[t]]);
    }
    metro_lj_fene_model model = metro_lj_fene_model_default();
    for (int k = 0; k < nr; ++k) {
        double mean = 0, var = 0;
        for (int l = 0; l < L; ++l) {
            metro_series *x = &s[l * nr + k];
            double err = metro_binning_error(x->x, x->n, NULL);
            mean += metro_mean(x->x, x->n) / L;
            var += err * err / ((double)L * L);
        }
        double exact = metro_lj_fene_dimer_moments(&model, T[k], 0, NULL), err = sqrt(var);
        ck_assert_msg(err < 0.01 * fmax(1.0, T[k]), "T = %g: error bar %g too large to test", T[k], err);
        ck_assert_msg(fabs(mean - exact) < 4 * err, "T = %g: <E> = %.6f +- %.6f, exact %.6f", T[k], mean, err, exact);
    }
    for (int t = 0; t < nr * L; ++t) metro_series_free(&s[t]);
    free(s);
    metro_sim_destroy(sim);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("parallel_tempering_gpu");
    TCase *tc = tcase_create("agreement");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gpu_equals_cpu_every_group_size);
    tcase_add_test(tc, gpu_equals_cpu_global_memory_path);
    tcase_add_test(tc, gpu_equals_cpu_across_advance_calls);
    tcase_add_test(tc, gpu_energies_past_65535_replicas);
    suite_add_tcase(s, tc);
    tc = tcase_create("physics");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, dimer_exact_gpu);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
