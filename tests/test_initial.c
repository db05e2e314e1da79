/* test_initial — [system] initial = FILE:
 *
 *   - round trip: run A writes GSD and XYZ trajectories; run B started
 *     from A's last frame (either file) begins, in every replica, exactly
 *     at A's final state (positions and species), for lj_fene with
 *     metropolis and parallel tempering and for coulomb_hs with brush;
 *   - refusals, each naming the config line, the file, the frame and the
 *     particle, with exit status 2 and no run directory: wrong particle
 *     count, unknown species, wrong species counts, wrong charge, a
 *     particle outside the cell, overlapping hard cores, an overstretched
 *     bond, a missing file, a frame that does not exist.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Run ini (a format with one %s for the [system] extra keys) to the end
 * and copy its final state; the run directory is kept in dir. */
static metro_float4 *final_state(const char *ini, int *n, char *dir, size_t ndir)
{
    metro_sim *sim = metro_test_sim(ini, "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    *n = st->particles;
    metro_float4 *p = malloc(sizeof *p * (size_t)st->particles);
    memcpy(p, st->pos, sizeof *p * (size_t)st->particles);
    snprintf(dir, ndir, "%s", metro_test_run_dir());
    metro_sim_destroy(sim);
    return p;
}

/* Start ini_b with initial = file: every replica must be at want. */
static void starts_at(const char *ini_b, const char *file, const metro_float4 *want, int n)
{
    char set[4300];
    snprintf(set, sizeof set, "system.initial=%s", file);
    const char *sets[] = {set};
    metro_sim *sim = metro_test_sim(ini_b, "cpu", sets, 1);
    metro_error err = {0};
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(st->particles, n);
    for (int r = 0; r < st->replicas; ++r)
        for (int i = 0; i < n; ++i) {
            const metro_float4 *a = &st->pos[(size_t)r * n + i], *b = &want[i];
            ck_assert_msg(a->x == b->x && a->y == b->y && a->z == b->z && a->w == b->w,
                          "%s: replica %d particle %d starts at (%.9g %.9g %.9g | %g), the file's last frame has "
                          "(%.9g %.9g %.9g | %g)",
                          file, r, i, a->x, a->y, a->z, a->w, b->x, b->y, b->z, b->w);
        }
    /* and it runs from there */
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
}

static const char *polymer =
    "[run]\nseed = 11\nsweeps = 200\nequilibration = 50\n[system]\nparticles = 9\n"
    "[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 0.4\n"
    "[observable g]\nplugin = trajectory\nevery = 100\n"
    "[observable x]\nplugin = trajectory\nevery = 200\nformat = xyz\n";
static const char *polymer_pt =
    "[run]\nseed = 12\nsweeps = 20\n[system]\nparticles = 9\n"
    "[potential]\nplugin = lj_fene\n[sampler]\nplugin = parallel_tempering\nreplicas = 3\n";
static const char *ions =
    "[run]\nseed = 13\nsweeps = 60\nequilibration = 10\n[system]\nparticles = 30\n"
    "[potential]\nplugin = coulomb_hs\nvalences = 2, -1\ndiameters = 4\ncell_radius = 30\nbjerrum = 7.117\n"
    "names = Ca, anion\n[sampler]\nplugin = brush\nstep = 10\n"
    "[observable g]\nplugin = trajectory\nevery = 30\n"
    "[observable x]\nplugin = trajectory\nevery = 20\nformat = xyz\n";

START_TEST(round_trip)
{
    char dir[4096], f[4200];
    int n;
    metro_float4 *a = final_state(polymer, &n, dir, sizeof dir);
    snprintf(f, sizeof f, "%s/trajectory.gsd", dir);
    starts_at(polymer, f, a, n);
    starts_at(polymer_pt, f, a, n);
    snprintf(f, sizeof f, "%s/trajectory.xyz", dir);
    starts_at(polymer, f, a, n);
    starts_at(polymer_pt, f, a, n);
    free(a);

    a = final_state(ions, &n, dir, sizeof dir);
    snprintf(f, sizeof f, "%s/trajectory.gsd", dir);
    starts_at(ions, f, a, n);
    snprintf(f, sizeof f, "%s/trajectory.xyz", dir);
    starts_at(ions, f, a, n);
    free(a);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------ */

static char tmp[64];

static void setup(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/metro-initial-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) { /* best effort */ }
}

/* Config `ini` (its [system] ends the file, so `extra` lands there) with
 * initial = FILE holding `content`: refused, naming each of `want`. */
static void refused(const char *ini, const char *content, const char *extra, const char *const *want)
{
    char cfg[256], file[256], args[2048];
    snprintf(file, sizeof file, "%s/start.xyz", tmp);
    if (content) {
        FILE *f = fopen(file, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        fclose(f);
    } else {
        unlink(file);
    }
    snprintf(cfg, sizeof cfg, "%s/b.ini", tmp);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%sinitial = %s\n%s", ini, file, extra);
    fclose(f);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/out --quiet", cfg, tmp);
    char *e = NULL;
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 2, "exit %d (want 2): %s", rc, e);
    ck_assert_msg(strstr(e, "b.ini:") && strstr(e, "[system] initial") && strstr(e, file), "no config line or file: %s", e);
    for (int k = 0; want[k]; ++k) ck_assert_msg(strstr(e, want[k]), "'%s' not in: %s", want[k], e);
    free(e);
    snprintf(args, sizeof args, "%s/out", tmp);
    ck_assert_msg(access(args, F_OK) != 0, "a refused run created %s", args);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

/* four ions of diameter 2 in a cell of radius 10: centres within 9 */
static const char *ions4 =
    "[run]\nsweeps = 10\n[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 2\ncell_radius = 10\n"
    "names = Na, Cl\n[sampler]\nplugin = brush\n[system]\nparticles = 4\n";
static const char *chain3 =
    "[run]\nsweeps = 10\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n[system]\nparticles = 3\n";
#define XYZ4(a, b, c, d) "4\nProperties=species:S:1:pos:R:3:charge:R:1\n" a "\n" b "\n" c "\n" d "\n"

START_TEST(refusals)
{
    refused(ions4, "3\nProperties=species:S:1:pos:R:3\nNa 0 0 0\nCl 3 0 0\nNa 0 3 0\n", "",
            W("frame 0 of 1", "holds 3 particles, but [system] particles = 4"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "K 0 3 0 1", "Cl 0 0 3 -1"), "",
            W("frame 0 of 1", "particle 2 has species 'K', which is not one of the potential's (Na, Cl)"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "Na 0 3 0 1", "Na 0 0 3 1"), "",
            W("holds 3 particles of species Na, the potential's counts ask 2"));
    refused(ions4, XYZ4("Na 0 0 0 2", "Cl 3 0 0 -1", "Na 0 3 0 1", "Cl 0 0 3 -1"), "",
            W("particle 0 (species Na) has charge 2", "valence 1"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Na 9.5 0 0 1", "Cl 0 3 0 -1", "Cl 0 0 3 -1"), "",
            W("particle 1 (species Na)", "outside the cell", "|r| = 9.5", "R - d/2 = 9"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Na 0 5 0 1", "Cl 0 0 5 -1", "Cl 1.5 0 0 -1"), "",
            W("particles 0 (Na) and 3 (Cl) overlap", "1.5 apart", "at least 2"));
    refused(chain3, "3\nProperties=species:S:1:pos:R:3\nC 0 0 0\nC 0.7 0 0\nC 1.9 0 0\n", "",
            W("frame 0 of 1", "bond between particles 1 and 2 is overstretched", "1.2"));
    refused(chain3, NULL, "", W("cannot be read"));
    refused(chain3, "3\n\nC 0 0 0\nC 0.7 0 0\nC 1.4 0 0\n", "initial_frame = 1\n",
            W("initial_frame 1 does not exist: the file holds 1 frames"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("initial");
    TCase *tc = tcase_create("initial");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
