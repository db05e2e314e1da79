/* test_trajectory_readers — metro's trajectories read back by the formats'
 * own libraries: GSD by gsd.hoomd (gsd's C file layer) and by gsd.pygsd
 * (its pure-Python reader), extended XYZ by ASE.  One run per sampler and
 * potential family (metropolis + lj_fene, parallel_tempering + lj_fene by
 * temperature slot and by replica, brush + coulomb_hs), each writing both
 * formats; the last frame every reader sees must be metro's final state:
 * positions bit for bit (float32), charges, species names, the sweep.
 *
 * Exits 77 ("skipped: python3-gsd not installed") where /usr/bin/python3
 * lacks gsd or ASE (scripts/deps.sh installs both from Debian). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* Read frame -1 of file with reader; returns its output (heap) or fails. */
static char *read_back(const char *reader, const char *file)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/read_trajectory.py %s '%s' -1 2>&1", METRO_TEST_SOURCE_DIR,
             reader, file);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    size_t got;
    while ((got = fread(out + n, 1, cap - n - 1, p)) > 0)
        if ((n += got) + 1 >= cap) out = realloc(out, cap *= 2);
    out[n] = 0;
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s reading %s failed:\n%s", reader, file, out);
    return out;
}

/* The last frame of file, as reader sees it, must be replica r of st. */
static void expect_frame(const char *reader, const char *file, const metro_state *st, int r, const metro_setup *setup_like,
                         long frames)
{
    char *out = read_back(reader, file);
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    long nf = -1;
    long long step = -2;
    ck_assert_msg(line && sscanf(line, "frames %ld", &nf) == 1, "%s %s: %s", reader, file, out);
    ck_assert_msg(nf == frames, "%s sees %ld frames in %s, metro wrote %ld", reader, nf, file, frames);
    line = strtok_r(NULL, "\n", &save);
    ck_assert_msg(line && sscanf(line, "step %lld", &step) == 1, "%s %s: no step", reader, file);
    ck_assert_msg(step == st->sweep, "%s: last frame of %s at step %lld, the state is at sweep %lld", reader, file, step,
                  st->sweep);
    for (int i = 0; i < st->particles; ++i) {
        line = strtok_r(NULL, "\n", &save);
        ck_assert_msg(line != NULL, "%s: %s has fewer than %d particles", reader, file, st->particles);
        float x, y, z;
        double q;
        char name[64];
        ck_assert_int_eq(sscanf(line, "%f %f %f %lf %63s", &x, &y, &z, &q, name), 5);
        const metro_float4 *p = &st->pos[(size_t)r * st->particles + i];
        ck_assert_msg(x == p->x && y == p->y && z == p->z,
                      "%s: %s particle %d at (%.9g %.9g %.9g), metro has (%.9g %.9g %.9g)", reader, file, i, x, y, z,
                      p->x, p->y, p->z);
        if (setup_like && setup_like->species > 0) {
            const metro_species *s = &setup_like->species_table[(int)p->w];
            ck_assert_msg(q == s->charge, "%s: %s particle %d charge %g, species %s has %g", reader, file, i, q, s->name,
                          s->charge);
            ck_assert_msg(!strcmp(name, s->name), "%s: %s particle %d is '%s', metro has '%s'", reader, file, i, name,
                          s->name);
        } else {
            ck_assert_msg(q == 0, "%s: %s particle %d has charge %g without species", reader, file, i, q);
        }
    }
    free(out);
}

static void file_in_run(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", metro_test_run_dir(), name);
}

START_TEST(metropolis_lj_fene)
{
    metro_sim *sim = metro_test_sim("[run]\nseed = 3\nsweeps = 300\nequilibration = 100\n"
                                    "[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n"
                                    "[sampler]\nplugin = metropolis\ntemperature = 0.5\n"
                                    "[observable g]\nplugin = trajectory\nevery = 50\n"
                                    "[observable x]\nplugin = trajectory\nevery = 100\nformat = xyz\nfile = chain\n",
                                    "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    char f[4200];
    file_in_run(f, sizeof f, "trajectory.gsd");
    expect_frame("gsd", f, st, 0, NULL, 6);
    expect_frame("pygsd", f, st, 0, NULL, 6);
    file_in_run(f, sizeof f, "chain.xyz");
    expect_frame("ase", f, st, 0, NULL, 3);
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(parallel_tempering_lj_fene)
{
    metro_sim *sim = metro_test_sim("[run]\nseed = 4\nsweeps = 400\nequilibration = 0\n"
                                    "[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                    "[sampler]\nplugin = parallel_tempering\nreplicas = 4\nt_min = 0.3\nt_max = 1.5\n"
                                    "step = 0.05\nexchange_every = 10\n"
                                    "[observable slots]\nplugin = trajectory\nevery = 40\nslots = all\nfile = pt.gsd\n"
                                    "[observable reps]\nplugin = trajectory\nevery = 100\nformat = xyz\nreplicas = 0, 2\n",
                                    "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    int moved = 0;
    char f[4200], name[64];
    for (int t = 0; t < 4; ++t) {
        snprintf(name, sizeof name, "pt_t%d.gsd", t);
        file_in_run(f, sizeof f, name);
        /* the slot's file holds the replica the slot holds now */
        expect_frame("gsd", f, st, st->slot_replica[t], NULL, 10);
        expect_frame("pygsd", f, st, st->slot_replica[t], NULL, 10);
        moved |= st->slot_replica[t] != t;
    }
    ck_assert_msg(moved, "no exchange happened: the slot files test nothing");
    for (int r = 0; r < 4; r += 2) {
        snprintf(name, sizeof name, "trajectory_r%d.xyz", r);
        file_in_run(f, sizeof f, name);
        expect_frame("ase", f, st, r, NULL, 4);
    }
    metro_sim_destroy(sim);
}
END_TEST

START_TEST(brush_coulomb_hs)
{
    metro_sim *sim = metro_test_sim("[run]\nseed = 5\nsweeps = 100\nequilibration = 10\n"
                                    "[system]\nparticles = 24\n[potential]\nplugin = coulomb_hs\nvalences = 2, -1\n"
                                    "diameters = 4, 3\ncell_radius = 25\nbjerrum = 7.117\nnames = Ca, anion\n"
                                    "[sampler]\nplugin = brush\nstep = 10\n"
                                    "[observable g]\nplugin = trajectory\nevery = 20\n"
                                    "[observable x]\nplugin = trajectory\nevery = 25\nformat = xyz\n",
                                    "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    /* the species as the potential declared them */
    metro_setup s = {0};
    s.species = 2;
    snprintf(s.species_table[0].name, 16, "Ca");
    s.species_table[0].charge = 2;
    snprintf(s.species_table[1].name, 16, "anion");
    s.species_table[1].charge = -1;
    char f[4200];
    file_in_run(f, sizeof f, "trajectory.gsd");
    expect_frame("gsd", f, st, 0, &s, 5);
    expect_frame("pygsd", f, st, 0, &s, 5);
    file_in_run(f, sizeof f, "trajectory.xyz");
    expect_frame("ase", f, st, 0, &s, 4);
    /* ASE needs chemical symbols: Ca stays Ca, the anion gets a stand-in */
    char *x = metro_test_slurp(f);
    ck_assert_ptr_nonnull(x);
    ck_assert_msg(strstr(x, "\nCa ") && strstr(x, "\nCl ") && strstr(x, " anion\n"), "species columns: %.400s", x);
    ck_assert_msg(strstr(x, "Lattice=\"50 0 0 0 50 0 0 0 50\" Origin=\"-25 -25 -25\""), "cell: %.300s", x);
    free(x);
    metro_sim_destroy(sim);
}
END_TEST

/* The README's "Your own system" steps, shortened: ASE writes the start,
 * metro runs from it, the picture is drawn from the trajectory. */
START_TEST(readme_workflow)
{
    char d[] = "/tmp/metro-readme-XXXXXX", cmd[8192];
    ck_assert_ptr_nonnull(mkdtemp(d));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/docs/own_system/make_salt.py %s/salt.xyz >/dev/null", METRO_TEST_SOURCE_DIR, d);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "run %s/configs/own_system_salt.ini --device cpu --output %s/run --quiet "
             "--set run.sweeps=500 --set system.initial=%s/salt.xyz", METRO_TEST_SOURCE_DIR, d, d);
    char *e = NULL;
    int rc = metro_test_cli(cmd, NULL, &e);
    ck_assert_msg(rc == 0, "the README's config does not run from make_salt.py's file: %s", e);
    free(e);
    char f[4200];
    snprintf(f, sizeof f, "%s/run/trajectory.gsd", d);
    char *out = read_back("gsd", f);
    ck_assert_msg(strstr(out, "frames 25\nstep 500\n"), "%.200s", out);
    free(out);
    if (system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/docs/own_system/render.py %s/salt.xyz %s %s/p.png >/dev/null 2>&1",
                 METRO_TEST_SOURCE_DIR, d, f, d);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A GSD file written by gsd itself (as HOOMD-blue writes them) starts a
 * run: positions as written, species by particles/types. */
START_TEST(start_from_gsd_of_gsd)
{
    char d[] = "/tmp/metro-gsdin-XXXXXX", cmd[8192];
    ck_assert_ptr_nonnull(mkdtemp(d));
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import gsd.hoomd\n"
             "f = gsd.hoomd.Snapshot() if hasattr(gsd.hoomd, 'Snapshot') else gsd.hoomd.Frame()\n"
             "f.particles.N = 4\nf.particles.types = ['Cl', 'Na']\nf.particles.typeid = [1, 0, 1, 0]\n"
             "f.particles.position = [[0, 0, 0], [3.25, 0, 0], [0, -3.5, 0], [0, 0, 4.125]]\n"
             "f.configuration.box = [20, 20, 20, 0, 0, 0]\nf.configuration.step = 7\n"
             "t = gsd.hoomd.open('%s/start.gsd', 'wb')\nt.append(f)\nt.close()\n\"",
             d);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    char set[4200];
    snprintf(set, sizeof set, "system.initial=%s/start.gsd", d);
    const char *sets[] = {set};
    metro_sim *sim = metro_test_sim("[run]\nsweeps = 10\n[system]\nparticles = 4\n[potential]\nplugin = coulomb_hs\n"
                                    "valences = 1, -1\nnames = Na, Cl\ndiameters = 2\ncell_radius = 10\n"
                                    "[sampler]\nplugin = brush\n",
                                    "cpu", sets, 1);
    metro_error err = {0};
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    const float want[4][4] = {{0, 0, 0, 0}, {3.25f, 0, 0, 1}, {0, -3.5f, 0, 0}, {0, 0, 4.125f, 1}};
    for (int i = 0; i < 4; ++i)
        ck_assert_msg(st->pos[i].x == want[i][0] && st->pos[i].y == want[i][1] && st->pos[i].z == want[i][2] &&
                          st->pos[i].w == want[i][3],
                      "particle %d: (%g %g %g | %g)", i, st->pos[i].x, st->pos[i].y, st->pos[i].z, st->pos[i].w);
    metro_sim_destroy(sim);
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    if (system("/usr/bin/python3 -c 'import gsd.hoomd, gsd.pygsd' >/dev/null 2>&1") != 0) {
        printf("skipped: python3-gsd not installed (scripts/deps.sh installs it)\n");
        return 77;
    }
    if (system("/usr/bin/python3 -c 'import ase.io' >/dev/null 2>&1") != 0) {
        printf("skipped: python3-ase not installed (scripts/deps.sh installs it)\n");
        return 77;
    }
    Suite *s = suite_create("trajectory_readers");
    TCase *tc = tcase_create("families");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, metropolis_lj_fene);
    tcase_add_test(tc, parallel_tempering_lj_fene);
    tcase_add_test(tc, brush_coulomb_hs);
    tcase_add_test(tc, readme_workflow);
    tcase_add_test(tc, start_from_gsd_of_gsd);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
