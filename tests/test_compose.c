/* test_compose — systems of several potential terms (docs/COMPOSITION.md):
 * contradictions refused with FILE:LINE, a lone term declared through
 * [system] species and chains equal to today's configs bit for bit, a
 * composed system whose running energy matches its totals, and the exact
 * check: a bonded dimer of opposite charges (LJ + FENE + Coulomb) in the
 * spherical cell against 1-D quadrature at three temperatures, which also
 * checks the energy unit (λ_B at the run's unit temperature).
 * Built twice: test_compose (CPU) and test_compose_gpu (COMPOSE_GPU, the
 * same checks on CUDA plus CUDA = CPU for a composed chain). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/metro.h"
#include "testutil.h"

#include "../potentials/lj_fene/lj_fene_exact.h"

#ifdef COMPOSE_GPU
#define DEVICE "cuda"
#else
#define DEVICE "cpu"
#endif

/* ---- refusals ------------------------------------------------------------ */

#ifndef COMPOSE_GPU
static void refused(const char *ini, const char *want)
{
    metro_test_refused(ini, "compose.ini", want);
}

#define RUN "[run]\nseed = 3\nsweeps = 10\n\n"
#define SYS2 "[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 8, 8\nchains = 8\nchain_species = m\n\n"
#define CHAIN "[potential chain]\nplugin = lj_fene\nspecies = m\n\n"
#define COUL "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 6\nbjerrum = 1\n\n"
#define SMP "[sampler]\nplugin = metropolis\ntemperature = 1\nstep = 0.2\n"

START_TEST(contradictions_refused)
{
    /* two terms claim the bonds: the second one's section line */
    refused(RUN SYS2 CHAIN COUL "[potential chain2]\nplugin = lj_fene\nspecies = m\n\n" SMP,
            "compose.ini:22: [potential chain2]: lj_fene defines bonds, and so does [potential chain]");
    /* charges given twice: [system] and the Coulomb term's own valences */
    refused(RUN SYS2 CHAIN "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 6\nvalences = -1, 1\n\n" SMP,
            "compose.ini:20: [potential coulomb] coulomb_hs (potential) refused its parameters: valences: the species "
            "are declared for the whole system");
    /* a species in the cell that no term with the cell's wall acts on would
     * leave the cell (seen at |r| = 37 in a cell of radius 15) */
    refused(RUN SYS2 "[potential chain]\nplugin = lj_fene\nspecies = m, c\n\n"
                "[potential coulomb]\nplugin = coulomb_hs\nspecies = m\ncell_radius = 6\nbjerrum = 1\n\n" SMP,
            "compose.ini:19: [potential coulomb] species: species 'c' is not among them, and no other term with the "
            "cell's wall acts on it");
    /* a species no term knows */
    refused(RUN SYS2 CHAIN "[potential coulomb]\nplugin = coulomb_hs\nspecies = m\ncell_radius = 6\n\n" SMP,
            "compose.ini:6: [system] species: no potential term acts on species 'c'");
    /* a term naming a species that does not exist */
    refused(RUN SYS2 "[potential chain]\nplugin = lj_fene\nspecies = monomer\n\n" COUL SMP,
            "compose.ini:15: [potential chain] species: no species 'monomer' in [system] (allowed: m, c)");
    /* chains with no term that defines bonds */
    refused(RUN SYS2 COUL SMP, "compose.ini:10: [system] chains: no potential term defines bonds");
    /* counts that do not add up */
    refused(RUN "[system]\nparticles = 10\nspecies = a\ncharges = 0\ndiameters = 1\ncounts = 12\n\n"
                "[potential]\nplugin = lj_fene\n\n" SMP,
            "compose.ini:10: [system] counts: they sum to 12, but particles = 10");
    /* counts beyond what a system holds (the advice was to give that many) */
    refused(RUN "[system]\nspecies = a, b\ncharges = 0, 0\ndiameters = 1\ncounts = 2147483647, 1\n\n"
                "[potential]\nplugin = lj_fene\n\n" SMP,
            "compose.ini:9: [system] counts: they sum to 2147483648, more than the 2147483647 particles a system may hold");
    /* chain species outside the bond term's species */
    refused(RUN "[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 8, 8\nchains = 8\n"
                "chain_species = c\n\n" CHAIN COUL SMP,
            "[system] chain_species: species 'c' is in the chains, but [potential chain]");
    /* a chain whose bond lies inside the hard core cannot be grown at any
     * density (it was called too dense for random placement) */
    refused(RUN SYS2 "[potential chain]\nplugin = lj_fene\nspecies = m\nr0 = 0.3\nR = 0.2\n\n" COUL SMP,
            "two bonded particles (species m and m) at the bond length 0.3 have infinite energy (it lies inside their "
            "hard-core contact)");
    refused(RUN SYS2 "[potential chain]\nplugin = lj_fene\nspecies = m\nr0 = 20\nR = 2\n\n" COUL SMP,
            "the bond length 20 does not fit in the cell (radius 6)");
    /* a species named twice in a term's list, as [system] refuses it */
    refused(RUN SYS2 "[potential chain]\nplugin = lj_fene\nspecies = m, m\n\n" COUL SMP,
            "compose.ini:15: [potential chain] species: 'm' is named twice");
    /* the hierarchical sampler needs the Coulomb term alone */
    refused(RUN SYS2 CHAIN COUL "[sampler]\nplugin = hierarchical\n", "one Coulomb term of charged hard spheres");
}
END_TEST
#endif

/* ---- decomposition: a lone term through [system] is today's chain ---------- */

static metro_float4 *run_positions(const char *ini, long sweeps, int *n)
{
    metro_sim *sim = metro_test_sim(ini, DEVICE, NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_advance(sim, sweeps, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_msg(st != NULL, "%s", err.msg);
    *n = st->particles * st->replicas;
    metro_float4 *p = malloc(sizeof *p * (size_t)*n);
    memcpy(p, st->pos, sizeof *p * (size_t)*n);
    metro_sim_destroy(sim);
    return p;
}

static void same_chain(const char *a, const char *b, long sweeps)
{
    int na, nb;
    metro_float4 *pa = run_positions(a, sweeps, &na), *pb = run_positions(b, sweeps, &nb);
    ck_assert_int_eq(na, nb);
    ck_assert_msg(!memcmp(pa, pb, sizeof *pa * (size_t)na), "the two configs gave different chains");
    free(pa);
    free(pb);
}

#ifndef COMPOSE_GPU
/* A composed Coulomb term without bjerrum takes λ_B from kelvin and a
 * permittivity (7.1 at 300 K in water), which beside LJ units is rarely
 * meant and reads as "no coupling" when 0: the run says so, --quiet or not */
START_TEST(composed_bjerrum_default_warned)
{
    char d[] = "/tmp/metro-compose-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    metro_test_write(d, "c.ini", RUN SYS2 CHAIN "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 6\n\n" SMP);
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/c.ini --dry-run --device cpu --quiet", d), 0);
    ck_assert_msg(strstr(e, "coulomb_hs: warning: bjerrum = 0 (given or by default) means λ_B = 7.11"), "%s", e);
    free(e);
    metro_test_write(d, "b.ini", RUN SYS2 CHAIN COUL SMP);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/b.ini --dry-run --device cpu --quiet", d), 0);
    ck_assert_msg(!strstr(e, "bjerrum") && !strstr(e, "warning"), "warned with bjerrum given: %s", e);
    free(e);
    /* allowed but rarely meant, and said: species that no term acts on
     * together (they pass through each other), and two terms of one plugin
     * on the same pairs (a second coulomb_hs doubled λ_B without a word) */
    metro_test_write(d, "x.ini", RUN "[system]\nspecies = m, c, s\ncharges = -1, 1, 0\ndiameters = 0.5\ncounts = 8, 8, 2\n"
                                     "chains = 8\nchain_species = m\n\n" CHAIN
                                     "[potential coulomb]\nplugin = coulomb_hs\nspecies = m, c\ncell_radius = 6\n"
                                     "bjerrum = 1\n\n[potential wall]\nplugin = coulomb_hs\nspecies = c, s\n"
                                     "cell_radius = 6\nbjerrum = 1\n\n" SMP);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/x.ini --dry-run --device cpu --quiet", d), 0);
    ck_assert_msg(strstr(e, "so they do not interact at all (no hard core, no Coulomb between them): m-s;"), "%s", e);
    ck_assert_msg(strstr(e, "counts twice (first [potential coulomb] and [potential wall]): c-c"), "%s", e);
    free(e);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST
#endif

START_TEST(lone_terms_are_todays_chains)
{
    /* the chain term alone, declared through [system] species and chains */
    same_chain("[run]\nseed = 5\nsweeps = 100\n\n[system]\nparticles = 13\n\n[potential]\nplugin = lj_fene\n\n"
               "[sampler]\nplugin = parallel_tempering\nt_min = 0.5\nt_max = 2\nreplicas = 4\n",
               "[run]\nseed = 5\nsweeps = 100\n\n[system]\nspecies = mono\ncharges = 0\ndiameters = 0.5\ncounts = 13\n"
               "chains = 13\n\n[potential]\nplugin = lj_fene\n\n"
               "[sampler]\nplugin = parallel_tempering\nt_min = 0.5\nt_max = 2\nreplicas = 4\n",
               100);
    /* the ions with the Coulomb term alone, species in [system] */
    same_chain("[run]\nseed = 6\nsweeps = 20\n\n[system]\nparticles = 400\n\n[potential]\nplugin = coulomb_hs\n"
               "valences = 3, -1\ndiameters = 4\ncell_radius = 80\nbjerrum = 7.117\n\n[sampler]\nplugin = brush\n",
               "[run]\nseed = 6\nsweeps = 20\n\n[system]\nspecies = z+3, z-1\ncharges = 3, -1\ndiameters = 4\n"
               "counts = 100, 300\n\n[potential]\nplugin = coulomb_hs\ncell_radius = 80\nbjerrum = 7.117\n\n"
               "[sampler]\nplugin = brush\n",
               20);
}
END_TEST

/* ---- a composed system's running energy agrees with its totals ------------- */

START_TEST(composed_energy_consistent)
{
    /* four charged chains of 8 with their counterions and a salt pair; the
     * core recomputes the total every 50 sweeps and stops on a drift */
    const char *ini = "[run]\nseed = 9\nsweeps = 400\ncheck_every = 50\ndrift_tolerance = 1e-9\n\n"
                      "[system]\nspecies = m, c, s+, s-\ncharges = -1, 1, 1, -1\ndiameters = 0.5, 0.5, 0.6, 0.6\n"
                      "counts = 32, 32, 2, 2\nchains = 4x8\nchain_species = m\n\n"
                      "[potential chain]\nplugin = lj_fene\nspecies = m\n\n"
                      "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 8\nbjerrum = 2\n\n"
                      "[sampler]\nplugin = metropolis\ntemperature = 1\nstep = 0.2\n\n"
                      "[observable energy]\nplugin = energy\nevery = 10\n";
    metro_sim *sim = metro_test_sim(ini, DEVICE, NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    double e = metro_sim_total_energy(sim, 0, &err);
    ck_assert_msg(fabs(st->energy[0] - e) < 1e-6 * (1 + fabs(e)), "running %g, total %g", st->energy[0], e);
    /* bonds exist only inside chains: 0-7 bonded, 7-8 not */
    ck_assert_int_eq(st->topology->chains, 4);
    ck_assert(st->topology->bond_next[6] && !st->topology->bond_next[7]);
    /* the species along the index: chains of m first, then the ions */
    ck_assert_int_eq((int)st->pos[31].w, 0);
    for (int i = 32; i < 68; ++i) ck_assert_int_ne((int)st->pos[i].w, 0);
    metro_sim_destroy(sim);
}
END_TEST

/* ---- every charge zero: the neutral chain ----------------------------------- */

#ifndef COMPOSE_GPU
/* thermo.csv of polymer_shape after running ini: <E>, <r_gyr^2> and
 * <R_ee^2> with their errors */
static void chain_averages(const char *ini, double v[6])
{
    metro_sim *sim = metro_test_sim(ini, DEVICE, NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    char path[1200];
    snprintf(path, sizeof path, "%s/thermo.csv", metro_test_run_dir());
    static const char *const col[6] = {"E_mean", "E_err", "Rg2_mean", "Rg2_err", "Ree2_mean", "Ree2_err"};
    for (int k = 0; k < 6; ++k) v[k] = metro_test_csv(path, 0, col[k]);
}

/* A charged chain with its counterions and the Coulomb term, every charge
 * set to 0: the chain is lj_fene's neutral chain (the ions and the wall
 * are hard spheres, dilute enough to change nothing measurable). */
START_TEST(zero_charges_give_the_neutral_chain)
{
    const char *tail = "[sampler]\nplugin = metropolis\ntemperature = 1\nstep = 0.3\n\n"
                       "[observable shape]\nplugin = polymer_shape\nevery = 5\nreweight = false\nplots = false\n";
    char a[2048], b[2048];
    snprintf(a, sizeof a,
             "[run]\nseed = 31\nsweeps = 300000\nequilibration = 2000\n\n"
             "[system]\nspecies = m, c\ncharges = 0, 0\ndiameters = 0.5\ncounts = 16, 16\nchains = 16\n"
             "chain_species = m\n\n[potential chain]\nplugin = lj_fene\nspecies = m\n\n"
             "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 15\nbjerrum = 2\n\n%s",
             tail);
    snprintf(b, sizeof b,
             "[run]\nseed = 32\nsweeps = 300000\nequilibration = 2000\n\n[system]\nparticles = 16\n\n"
             "[potential]\nplugin = lj_fene\n\n%s",
             tail);
    double x[6], y[6];
    chain_averages(a, x);
    chain_averages(b, y);
    static const char *const what[3] = {"<E>", "<r_gyr^2>", "<R_ee^2>"};
    for (int k = 0; k < 3; ++k) {
        double d = x[2 * k] - y[2 * k], e = sqrt(x[2 * k + 1] * x[2 * k + 1] + y[2 * k + 1] * y[2 * k + 1]);
        printf("zero charges: %s = %.4f +- %.4f, neutral chain %.4f +- %.4f\n", what[k], x[2 * k], x[2 * k + 1],
               y[2 * k], y[2 * k + 1]);
        ck_assert_msg(e > 0 && e < 0.1 * fabs(y[2 * k]) + 0.05, "%s: error bar %g", what[k], e);
        ck_assert_msg(fabs(d) < 4 * e, "%s: %g against the neutral chain's %g (+- %g)", what[k], x[2 * k], y[2 * k], e);
    }
}
END_TEST
#endif

/* ---- exact: a bonded dimer of opposite charges ------------------------------ */

/* <E> and C_V of the dimer +1 / -1 (diameters d, LJ + FENE bond, Coulomb
 * B z z / r with B the Bjerrum length at T = 1) in a cell of radius Rc:
 * both centres within a = Rc - d/2 of the origin, so at separation r the
 * centre of mass moves in the intersection of two balls of radius a whose
 * centres are r apart, of volume pi (4a + r)(2a - r)^2 / 12. */
static void dimer_exact(double T, double B, double d, double Rc, double *E, double *Cv)
{
    metro_lj_fene_model m = metro_lj_fene_model_default();
    double a = Rc - d / 2, lo = fmax(m.r0 - m.R, d), hi = fmin(m.r0 + m.R, 2 * a);
    const int n = 400000;
    double h = (hi - lo) / n, z = 0, s1 = 0, s2 = 0;
    for (int k = 0; k <= n; ++k) {
        double r = lo + k * h;
        double u = metro_lj_fene_dimer_u(&m, r);
        double w = (k == 0 || k == n) ? 1 : (k & 1) ? 4 : 2;
        if (!isfinite(u)) continue;
        u += B * (1.0) * (-1.0) / r;
        double g = w * r * r * M_PI * (4 * a + r) * (2 * a - r) * (2 * a - r) / 12 * exp(-u / T);
        z += g;
        s1 += g * u;
        s2 += g * u * u;
    }
    *E = s1 / z;
    *Cv = (s2 / z - *E * *E) / (T * T);
}

START_TEST(bonded_charged_dimer_exact)
{
    const double B = 1.5, d = 0.5, Rc = 3.0, temps[] = {0.4, 1.0, 2.5};
    for (int k = 0; k < 3; ++k) {
        char ini[2048];
        snprintf(ini, sizeof ini,
                 "[run]\nseed = %d\nsweeps = 400000\nequilibration = 4000\n\n"
                 "[system]\nspecies = plus, minus\ncharges = 1, -1\ndiameters = %g\ncounts = 1, 1\nchains = 2\n"
                 "chain_species = plus, minus\n\n"
                 "[potential chain]\nplugin = lj_fene\n\n"
                 "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = %g\nbjerrum = %g\n\n"
                 "[sampler]\nplugin = metropolis\ntemperature = %g\nstep = 0.6\n\n"
                 "[observable energy]\nplugin = energy\n",
                 11 + k, d, Rc, B, temps[k]);
        metro_sim *sim = metro_test_sim(ini, DEVICE, NULL, 0);
        metro_error err = {0};
        ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
        metro_sim_destroy(sim);
        char path[1200];
        snprintf(path, sizeof path, "%s/energy_stats.csv", metro_test_run_dir());
        double e = metro_test_csv(path, 0, "E_mean"), de = metro_test_csv(path, 0, "E_err");
        double cv = 2 * metro_test_csv(path, 0, "Cv_per_N"), dcv = 2 * metro_test_csv(path, 0, "Cv_err");
        double ex, cvx;
        dimer_exact(temps[k], B, d, Rc, &ex, &cvx);
        printf("dimer (%s) T = %g: <E> = %.5f +- %.5f (exact %.5f), C_V = %.4f +- %.4f (exact %.4f)\n", DEVICE,
               temps[k], e, de, ex, cv, dcv, cvx);
        ck_assert_msg(de > 0 && de < 0.05, "error bar %g", de);
        ck_assert_msg(fabs(e - ex) < 4 * de, "T = %g: <E> = %g +- %g, exact %g", temps[k], e, de, ex);
        ck_assert_msg(fabs(cv - cvx) < 4 * dcv + 0.02 * cvx, "T = %g: C_V = %g +- %g, exact %g", temps[k], cv, dcv, cvx);
    }
}
END_TEST

#ifdef COMPOSE_GPU
/* CUDA follows the CPU's chain for a composed system: the same
 * acceptances, positions within 1e-4. */
static void cuda_follows_cpu(const char *system, const char *sampler, long sweeps)
{
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 4\nsweeps = %ld\n\n%s"
             "[potential chain]\nplugin = lj_fene\nspecies = m\n\n"
             "[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 8\nbjerrum = 2\n\n"
             "[sampler]\n%s",
             sweeps, system, sampler);
    metro_float4 *p[2];
    long long acc[2] = {0, 0};
    int n = 0;
    for (int b = 0; b < 2; ++b) {
        metro_sim *sim = metro_test_sim(ini, b ? "cuda" : "cpu", NULL, 0);
        metro_error err = {0};
        ck_assert_msg(metro_sim_advance(sim, sweeps, &err) == METRO_OK, "%s: %s", sampler, err.msg);
        const metro_state *st = metro_sim_state(sim, &err);
        n = st->particles * st->replicas;
        p[b] = malloc(sizeof *p[b] * (size_t)n);
        memcpy(p[b], st->pos, sizeof *p[b] * (size_t)n);
        for (int r = 0; r < st->replicas; ++r) acc[b] += st->accepted[r];
        metro_sim_destroy(sim);
    }
    ck_assert_msg(acc[0] == acc[1], "%s: accepted %lld (CPU) against %lld (CUDA)", sampler, acc[0], acc[1]);
    ck_assert_int_gt(acc[0], 0);
    double worst = 0;
    for (int i = 0; i < n; ++i)
        worst = fmax(worst, fmax(fabs(p[0][i].x - p[1][i].x), fmax(fabs(p[0][i].y - p[1][i].y), fabs(p[0][i].z - p[1][i].z))));
    ck_assert_msg(worst < 1e-4, "%s: positions differ by %g", sampler, worst);
    free(p[0]);
    free(p[1]);
}

/* Every sampler, chains of different lengths (8, 5, 11: the generated
 * metro_bonded() is then a table of chain ends, asked also for i - 1 = -1
 * by parallel tempering).  48 particles are one of brush's groups, so
 * brush sums pairs one by one here, not in runs. */
START_TEST(cuda_equals_cpu)
{
    static const char *const samplers[] = {"plugin = brush\nstep = 0.5\n",
                                           "plugin = metropolis\nstep = 0.5\ntemperature = 1\n",
                                           "plugin = parallel_tempering\nstep = 0.3\nt_min = 0.5\nt_max = 2\nreplicas = 4\n"};
    for (int k = 0; k < 3; ++k)
        cuda_follows_cpu("[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 24, 24\n"
                         "chains = 8, 5, 11\nchain_species = m\n\n",
                         samplers[k], 200);
}
END_TEST

/* Brush's runs of 32 partners: 384 particles are several groups, and
 * monomers of neighbouring chains meet within the LJ cutoff, so runs take
 * the second pass over the chain term (metro_pair_delta_near_add). */
START_TEST(cuda_equals_cpu_runs)
{
    cuda_follows_cpu("[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 192, 192\n"
                     "chains = 8, 5, 11, 21x8\nchain_species = m\n\n",
                     "plugin = brush\nstep = 0.5\n", 200);
}
END_TEST
#endif

int main(void)
{
#ifdef COMPOSE_GPU
    METRO_TEST_REQUIRE_GPU();
#endif
    Suite *s = suite_create("compose");
    TCase *tc = tcase_create(DEVICE);
    tcase_set_timeout(tc, 600);
#ifndef COMPOSE_GPU
    tcase_add_test(tc, contradictions_refused);
    tcase_add_test(tc, composed_bjerrum_default_warned);
#else
    tcase_add_test(tc, cuda_equals_cpu);
#endif
    tcase_add_test(tc, lone_terms_are_todays_chains);
#ifndef COMPOSE_GPU
    tcase_add_test(tc, zero_charges_give_the_neutral_chain);
#endif
    tcase_add_test(tc, composed_energy_consistent);
    tcase_add_test(tc, bonded_charged_dimer_exact);
    suite_add_tcase(s, tc);
#ifdef COMPOSE_GPU
    /* its own case: CK_RUN_CASE=runs runs it alone */
    TCase *runs = tcase_create("runs");
    tcase_set_timeout(runs, 600);
    tcase_add_test(runs, cuda_equals_cpu_runs);
    suite_add_tcase(s, runs);
#endif
    return metro_test_main(s);
}
