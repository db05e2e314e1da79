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
 *     bond, a missing file, a frame that does not exist, a NaN charge, a
 *     frame cut short (saying why), a directory;
 *   - the system from the file: a composed system (lj_fene on the
 *     monomers, coulomb_hs on all) writes its bonds into its GSD
 *     trajectory (read back by metro's reader and by gsd's); a run whose
 *     [system] declares no species and no chains takes them from that
 *     file (names, charges, diameters, counts, chains) and runs the same
 *     chain, byte for byte, as the run declaring them; refused, naming
 *     the file and frame: a branched bond, a bond between particles that
 *     are not index neighbours, a chain after a free particle, particles
 *     of one type with different charges, [system] species or chains that
 *     differ from the file's, an XYZ file where the species must come
 *     from the file, a NaN charge, diameter or position in a GSD file
 *     (which compare as no difference), with more particles than the
 *     direct energy check takes too;
 *   - [system] numbering = space: the placement renumbered along a curve
 *     (the same particles and energy, index neighbours close, chains kept),
 *     and refused with a file.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frames.h"
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
 * initial = file: refused, naming each of `want`. */
static void refused_file(const char *ini, const char *file, const char *extra, const char *const *want)
{
    char cfg[256], args[2048];
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

/* The same with initial = FILE holding `content` (NULL: no file). */
static void refused(const char *ini, const char *content, const char *extra, const char *const *want)
{
    char file[256];
    snprintf(file, sizeof file, "%s/start.xyz", tmp);
    if (content) {
        FILE *f = fopen(file, "w");
        ck_assert_ptr_nonnull(f);
        fputs(content, f);
        fclose(f);
    } else {
        unlink(file);
    }
    refused_file(ini, file, extra, want);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

/* four ions of diameter 2 in a cell of radius 10: centres within 9 */
static const char *ions4 =
    "[run]\nsweeps = 10\n[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 2\ncell_radius = 10\n"
    "names = Na, Cl\n[sampler]\nplugin = brush\n[system]\nparticles = 4\n";
static const char *chain3 =
    "[run]\nsweeps = 10\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n[system]\nparticles = 3\n";
/* the same chain composed with a hard core of 0.8 (coulomb_hs, no charges) */
static const char *mchain3 =
    "[run]\nsweeps = 10\n[potential chain]\nplugin = lj_fene\nspecies = m\n[potential core]\nplugin = coulomb_hs\n"
    "species = m\ncell_radius = 10\nbjerrum = 1\n[sampler]\nplugin = metropolis\ntemperature = 1\n[system]\n"
    "species = m\ncharges = 0\ndiameters = 0.8\ncounts = 3\nchains = 3\n";
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
    /* the sign counts: a file with the charges swapped is another system */
    refused(ions4, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "Na 0 3 0 -1", "Cl 0 0 3 -1"), "",
            W("particle 2 (species Na) has charge -1", "valence 1"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Na 9.5 0 0 1", "Cl 0 3 0 -1", "Cl 0 0 3 -1"), "",
            W("particle 1 (species Na)", "outside the cell", "|r| = 9.5", "R - d/2 = 9"));
    /* on the sphere |r| = R - d/2 = 9 to double precision (8.99999999),
     * but coulomb_hs tests |r|² in float, where it rounds to 81.0000076 >
     * 81: the message said "|r| = 8.99999999, but a centre must lie within
     * R - d/2 = 9", contradicting itself; it now says what the test saw */
    refused(ions4, XYZ4("Na 5.86743021 5.43977118 4.12094069 1", "Cl 3 0 0 -1", "Na 0 3 0 1", "Cl 0 0 3 -1"), "",
            W("particle 0 (species Na)", "outside the cell as the potential tests it, in single precision",
              "|r| = 8.99999999 is within R - d/2 = 9", "|r|^2 rounds to 81.0000076"));
    refused(ions4, XYZ4("Na 0 0 0 1", "Na 0 5 0 1", "Cl 0 0 5 -1", "Cl 1.5 0 0 -1"), "",
            W("particles 0 (Na) and 3 (Cl) overlap", "1.5 apart", "at least 2"));
    refused(chain3, "3\nProperties=species:S:1:pos:R:3\nC 0 0 0\nC 0.7 0 0\nC 1.9 0 0\n", "",
            W("frame 0 of 1", "bond between particles 1 and 2 (length 1.2) has infinite energy: overstretched"));
    /* too short is the hard core's doing (it was called overstretched) */
    refused(mchain3, "3\nProperties=species:S:1:pos:R:3\nm 0 0 0\nm 0.7 0 0\nm 1.6 0 0\n", "",
            W("the bond between particles 0 and 1 (length 0.7) has infinite energy: it lies inside their hard-core "
              "contact 0.8"));
    refused(chain3, NULL, "", W("cannot be read"));
    refused(chain3, "3\n\nC 0 0 0\nC 0.7 0 0\nC 1.4 0 0\n", "initial_frame = 1\n",
            W("[system] initial_frame: ", "initial_frame 1 does not exist: the file holds 1 frames"));
    /* a NaN charge passed the comparison with the valence (accepted, exit 0) */
    refused(ions4, XYZ4("Na 0 0 0 1", "Cl 3 0 0 nan", "Na 0 3 0 1", "Cl 0 0 3 -1"), "",
            W("start.xyz:4: particle 1: charge 'nan' is not a finite number"));
    refused(chain3, "4\n\nC 0 0 0\nC 0.7 0 0\nC 1.4 0 0\n", "",
            W("start.xyz:1: holds no complete frame", "the count line says 4 particles",
              "the file ends after 3 particle lines, at line 5"));
    refused_file(chain3, tmp, "", W("is a directory"));
}
END_TEST

/* Runs INI (written to tmp/c.ini) on the CPU into tmp/out_ok; its exit
 * status, stderr in *e. */
static int run_ini(const char *ini, char **e)
{
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/c.ini", tmp);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fputs(ini, f);
    fclose(f);
    return metro_test_clif(e, "run %s --device cpu --output %s/out_ok --overwrite", cfg, tmp);
}

/* What a file leaves to the config, and what the config gives without a file */
START_TEST(file_and_config)
{
    char ini[2048], *e = NULL, out[256];
    /* a frame of no file was ignored (exit 0, the placement's start) */
    snprintf(ini, sizeof ini, "%sinitial_frame = 2\n", chain3);
    int rc = run_ini(ini, &e);
    ck_assert_msg(rc == 2 && strstr(e, "c.ini:") && strstr(e, "[system] initial_frame = 2, but [system] initial names no file"),
                  "exit %d: %s", rc, e);
    free(e);
    snprintf(out, sizeof out, "%s/out_ok", tmp);
    ck_assert_msg(access(out, F_OK) != 0, "a refused run created %s", out);
    /* the default, as every resolved config writes it, is no frame */
    snprintf(ini, sizeof ini, "%sinitial = \ninitial_frame = -1\n", chain3);
    rc = run_ini(ini, &e);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    free(e);
    /* a file without charges or diameters: said, not passed over */
    char file[256];
    snprintf(file, sizeof file, "%s/nocharge.xyz", tmp);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("4\nProperties=species:S:1:pos:R:3\nNa 0 0 0\nCl 3 0 0\nNa 0 3 0\nCl 0 0 3\n", f);
    fclose(f);
    snprintf(ini, sizeof ini, "%sinitial = %s\n", ions4, file);
    rc = run_ini(ini, &e);
    ck_assert_msg(rc == 0 && strstr(e, "gives no charges or diameters (an XYZ file has no diameters") &&
                      strstr(e, "the potential's are used"),
                  "exit %d: %s", rc, e);
    free(e);
    /* species declared in [system]: the messages name [system], not a potential */
    snprintf(ini, sizeof ini,
             "[run]\nsweeps = 10\n[potential]\nplugin = coulomb_hs\ncell_radius = 10\n[sampler]\nplugin = metropolis\n"
             "temperature = 1\n[system]\nspecies = Na, Cl\ncharges = 1, -1\ndiameters = 2\ncounts = 2, 2\nparticles = 4\n");
    refused(ini, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "K 0 3 0 1", "Cl 0 0 3 -1"), "",
            W("particle 2 has species 'K', which is not one of [system]'s (Na, Cl)", "in [system] species"));
    refused(ini, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "Na 0 3 0 -1", "Cl 0 0 3 -1"), "",
            W("particle 2 (species Na) has charge -1, but [system] gives Na charge 1"));
    refused(ini, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "Na 0 3 0 1", "Na 0 0 3 1"), "",
            W("holds 3 particles of species Na, [system]'s counts ask 2"));
}
END_TEST

/* ---- the system from the file ----------------------------------------------- */

/* Two chains of 4 monomers m (charge -1) and 8 counterions c (+1), all of
 * diameter 0.5: lj_fene on the monomers, coulomb_hs on everything. */
#define C_RUN "[run]\nseed = 5\nsweeps = 200\nequilibration = 20\n"
#define C_SYS "[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 8, 8\nchains = 2x4\nchain_species = m\n"
#define C_TERMS                                                                                                       \
    "[potential chain]\nplugin = lj_fene\nspecies = m\n[potential coulomb]\nplugin = coulomb_hs\ncell_radius = 6\n"   \
    "bjerrum = 1\n[sampler]\nplugin = metropolis\ntemperature = 1\nstep = 0.2\n"
#define C_TRAJ "[observable traj]\nplugin = trajectory\nevery = 50\n"

static const long long composed_bonds[] = {0, 1, 1, 2, 2, 3, 4, 5, 5, 6, 6, 7};

/* Frame `frame` of a GSD trajectory of the composed system: its species
 * (m, c with their charges and diameters) and its six bonds. */
static void has_composed_system(const char *file, long frame)
{
    metro__frame_in in;
    char err[4096];
    ck_assert_msg(metro__frames_read(file, frame, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.particles, 16);
    ck_assert(in.explicit_types);
    ck_assert_int_eq(in.ntypes, 2);
    ck_assert_str_eq(in.names[0], "m");
    ck_assert_str_eq(in.names[1], "c");
    ck_assert_ptr_nonnull(in.charge);
    ck_assert_ptr_nonnull(in.diameter);
    for (int i = 0; i < 16; ++i) {
        int t = in.type[i];
        ck_assert_msg(in.charge[i] == (t ? 1.0 : -1.0) && in.diameter[i] == 0.5, "%s: particle %d: type %d charge %g d %g",
                      file, i, t, in.charge[i], in.diameter[i]);
    }
    ck_assert_int_eq(in.bonds, 6);
    for (int k = 0; k < 12; ++k) ck_assert_msg(in.bond[k] == composed_bonds[k], "%s: bond value %d: %lld", file, k, in.bond[k]);
    metro__frame_in_free(&in);
}

/* Run ini with [system] initial = file (NULL: none) to the end; the
 * trajectory's path in traj, the final positions returned. */
static metro_float4 *run_composed(const char *ini, const char *file, char *traj, size_t ntraj, int check_topology)
{
    char set[4300];
    snprintf(set, sizeof set, "system.initial=%s", file ? file : "");
    const char *sets[] = {set};
    metro_sim *sim = metro_test_sim(ini, "cpu", sets, file ? 1 : 0);
    metro_error err = {0};
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(st->particles, 16);
    if (check_topology) {
        ck_assert_int_eq(st->topology->chains, 2);
        ck_assert_int_eq(st->topology->first[0], 0);
        ck_assert_int_eq(st->topology->first[1], 4);
        ck_assert_int_eq(st->topology->length[0], 4);
        ck_assert_int_eq(st->topology->length[1], 4);
        for (int i = 0; i < 16; ++i) ck_assert_int_eq(st->topology->bond_next[i], i < 8 && i % 4 != 3);
        for (int i = 0; i < 16; ++i) ck_assert_msg(st->pos[i].w == (i < 8 ? 0.0f : 1.0f), "particle %d species %g", i, st->pos[i].w);
    }
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    st = metro_sim_state(sim, &err);
    metro_float4 *p = malloc(sizeof *p * 16);
    memcpy(p, st->pos, sizeof *p * 16);
    snprintf(traj, ntraj, "%s/trajectory.gsd", metro_test_run_dir());
    metro_sim_destroy(sim);
    return p;
}

START_TEST(system_from_the_file)
{
    char a[4200], b[4200], c[4200];
    free(run_composed(C_RUN C_SYS C_TERMS C_TRAJ, NULL, a, sizeof a, 1));
    has_composed_system(a, 0);
    has_composed_system(a, -1); /* frame 0's bonds, inherited */
    if (system("/usr/bin/python3 -c 'import gsd.hoomd' >/dev/null 2>&1") == 0) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import gsd.hoomd,sys; t=gsd.hoomd.open('%s','rb'); f=t[-1]; "
                 "sys.exit(0 if f.bonds.N==6 and f.bonds.types==['backbone'] and list(f.bonds.typeid)==[0]*6 and "
                 "f.bonds.group.tolist()==[[0,1],[1,2],[2,3],[4,5],[5,6],[6,7]] and f.particles.types==['m','c'] "
                 "and list(f.particles.charge)==[-1]*8+[1]*8 and list(f.particles.diameter)==[0.5]*16 else 1)\"",
                 a);
        ck_assert_msg(system(cmd) == 0, "gsd does not read the bonds and species of %s", a);
    }
    /* no species, no chains in [system]: the file's; the same chain as
     * declaring them */
    metro_float4 *pb = run_composed(C_RUN "[system]\n" C_TERMS C_TRAJ, a, b, sizeof b, 1);
    metro_float4 *pc = run_composed(C_RUN C_SYS C_TERMS C_TRAJ, a, c, sizeof c, 1);
    has_composed_system(b, 0);
    ck_assert_msg(metro_test_same_file(b, c), "%s and %s differ", b, c);
    ck_assert(!memcmp(pb, pc, sizeof *pb * 16));
    free(pb);
    free(pc);
}
END_TEST

/* A GSD start of the composed system's kind: one chain 0-1-2-3 of m, four
 * free c; path in out. */
static void write_start(char *out, size_t n)
{
    static metro_species sp[2] = {{"m", -1, 0.5, 4}, {"c", 1, 0.5, 4}};
    static const int first[] = {0}, length[] = {4};
    static const unsigned char next[8] = {1, 1, 1, 0, 0, 0, 0, 0};
    static const metro_topology t = {1, first, length, next};
    metro_float4 p[8] = {metro_f4(0, 0, 0, 0),  metro_f4(0.7f, 0, 0, 0), metro_f4(1.4f, 0, 0, 0),  metro_f4(2.1f, 0, 0, 0),
                         metro_f4(0, 3, 0, 1), metro_f4(0, -3, 0, 1),   metro_f4(0, 0, 3, 1),    metro_f4(0, 0, -3, 1)};
    metro_frame f = {.particles = 8, .pos = p, .species = 2, .species_table = sp, .cell_radius = 6, .topology = &t};
    snprintf(out, n, "%s/start.gsd", tmp);
    metro_frame_mark m = {0};
    char err[4096];
    ck_assert_msg(metro__frames_append(out, &f, &m, err, sizeof err) == 0, "%s", err);
}

/* Overwrite element k of chunk `name` of frame 0 in a GSD file metro wrote
 * (4-byte values: uint32 or float). */
static void patch(const char *path, const char *name, int k, const void *value)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    uint64_t h[5];
    ck_assert_int_eq(fread(h, 8, 5, f), 5); /* magic, index at, entries, names at, name blocks */
    char names[1024] = {0};
    fseek(f, (long)h[3], SEEK_SET);
    ck_assert_int_gt(fread(names, 1, sizeof names - 1, f), 0);
    int id = 0;
    for (const char *x = names; *x && strcmp(x, name); x += strlen(x) + 1) ++id;
    for (uint64_t e = 0; e < h[2]; ++e) {
        struct {
            uint64_t frame, N;
            int64_t location;
            uint32_t M;
            uint16_t id;
            uint8_t type, flags;
        } ent;
        fseek(f, (long)(h[1] + 32 * e), SEEK_SET);
        ck_assert_int_eq(fread(&ent, 32, 1, f), 1);
        ck_assert_int_ne(ent.location, 0);
        if (ent.id != id) continue;
        fseek(f, (long)(ent.location + 4 * k), SEEK_SET);
        ck_assert_int_eq(fwrite(value, 4, 1, f), 1);
        fclose(f);
        return;
    }
    ck_abort_msg("no chunk %s in %s", name, path);
}

static void patch_bond(const char *path, int k, uint32_t a, uint32_t b)
{
    patch(path, "bonds/group", 2 * k, &a);
    patch(path, "bonds/group", 2 * k + 1, &b);
}

/* lj_fene on m, coulomb_hs on all; [system] (last) declares nothing */
static const char *composed_bare =
    "[run]\nsweeps = 10\n[potential chain]\nplugin = lj_fene\nspecies = m\n[potential coulomb]\nplugin = coulomb_hs\n"
    "cell_radius = 6\nbjerrum = 1\n[sampler]\nplugin = metropolis\ntemperature = 1\n[system]\n";

START_TEST(system_from_the_file_refused)
{
    char f[256];
    write_start(f, sizeof f);
    /* the file as written starts the bare config, and the declared one */
    char set[300];
    snprintf(set, sizeof set, "system.initial=%s", f);
    const char *sets[] = {set};
    metro_error err = {0};
    metro_sim *sim = metro_test_sim(composed_bare, "cpu", sets, 1);
    ck_assert_int_eq(metro_sim_state(sim, &err)->topology->chains, 1);
    metro_sim_destroy(sim);

    write_start(f, sizeof f);
    patch_bond(f, 2, 1, 3);
    refused_file(composed_bare, f, "", W("frame 0 of 1", "bond 2 (particles 1 and 3) gives particle 1 a third bond", "branched",
                                         "allowed: linear chains"));
    write_start(f, sizeof f);
    patch_bond(f, 2, 0, 3);
    refused_file(composed_bare, f, "", W("frame 0 of 1", "bond 2 joins particles 0 and 3, which are not neighbours in index order",
                                         "allowed: linear chains"));
    write_start(f, sizeof f);
    patch_bond(f, 2, 4, 5);
    refused_file(composed_bare, f, "", W("frame 0 of 1", "bond 2 (particles 4 and 5) lies after particle 3, which has no bond",
                                         "chains must come first in index order"));
    write_start(f, sizeof f);
    float two = 2;
    patch(f, "particles/charge", 6, &two);
    refused_file(composed_bare, f, "", W("frame 0 of 1", "particle 6 (type c) has charge 2, but particle 4 of the same type has 1"));
    /* [system] against the file */
    write_start(f, sizeof f);
    const char *decl = "species = m, c\ncounts = 4, 4\ndiameters = 0.5\nchain_species = m\n";
    char extra[512];
    snprintf(extra, sizeof extra, "%scharges = -1, 1\nchains = 2x2\n", decl);
    refused_file(composed_bare, f, extra, W("frame 0 of 1", "the file's bonds do not make the chains of [system] chains = 2x2",
                                            "chain 0 is particles 0 to 3 in the file, particles 0 to 1 in [system]"));
    snprintf(extra, sizeof extra, "%scharges = -2, 2\nchains = 4\n", decl);
    refused_file(composed_bare, f, extra, W("frame 0 of 1", "particle 0 (species m) has charge -1", "but [system] gives m charge -2"));
    snprintf(extra, sizeof extra, "species = m, c\ncounts = 4, 4\ndiameters = 0.5, 0.6\nchain_species = m\ncharges = -1, 1\n");
    refused_file(composed_bare, f, extra, W("frame 0 of 1", "particle 4 (species c) has diameter 0.5", "c diameter 0.6"));
    /* NaN values: no comparison with them fails, so the reader refuses
     * them, the species declared or taken from the file */
    const float qnan = NAN;
    snprintf(extra, sizeof extra, "%scharges = -1, 1\nchains = 4\n", decl);
    write_start(f, sizeof f);
    patch(f, "particles/charge", 6, &qnan);
    refused_file(composed_bare, f, extra, W("frame 0: particle 6: particles/charge is nan, not a finite number"));
    refused_file(composed_bare, f, "", W("frame 0: particle 6: particles/charge is nan, not a finite number"));
    write_start(f, sizeof f);
    patch(f, "particles/diameter", 2, &qnan);
    refused_file(composed_bare, f, extra, W("frame 0: particle 2: particles/diameter is nan, not a finite number"));
    write_start(f, sizeof f);
    patch(f, "particles/position", 3 * 5 + 1, &qnan);
    refused_file(composed_bare, f, extra, W("frame 0: particle 5: particles/position has y = nan, not a finite number"));
    /* XYZ has no diameters: a composed system's species cannot come from it */
    refused(composed_bare, "2\nProperties=species:S:1:pos:R:3\nm 0 0 0\nc 2 0 0\n", "",
            W("an XYZ file has no diameters: declare the species in [system]"));
}
END_TEST

/* More particles than INITIAL_DIRECT_MAX (initial.c), so no direct sum
 * catches what the checks before it let through: a NaN position went as
 * far as the run (exit 1, "energy nan"). */
START_TEST(big_nan_position)
{
    enum { BIG = 6000 };
    static metro_species sp[2] = {{"Na", 1, 4, BIG / 2}, {"Cl", -1, 4, BIG / 2}};
    metro_float4 *p = malloc(sizeof *p * BIG);
    int i = 0;
    for (int a = -12; a <= 12 && i < BIG; ++a)
        for (int b = -12; b <= 12 && i < BIG; ++b)
            for (int c = -12; c <= 12 && i < BIG; ++c, ++i) p[i] = metro_f4(4.5f * a, 4.5f * b, 4.5f * c, (float)(i % 2));
    metro_frame fr = {.particles = BIG, .pos = p, .species = 2, .species_table = sp, .cell_radius = 120};
    char file[256], err[4096];
    snprintf(file, sizeof file, "%s/big.gsd", tmp);
    metro_frame_mark m = {0};
    ck_assert_msg(metro__frames_append(file, &fr, &m, err, sizeof err) == 0, "%s", err);
    free(p);
    const float qnan = NAN;
    patch(file, "particles/position", 3 * 10, &qnan);
    static const char *big =
        "[run]\nsweeps = 1\n[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 4\ncell_radius = 120\n"
        "bjerrum = 7.117\nnames = Na, Cl\n[sampler]\nplugin = brush\n[system]\nparticles = 6000\n";
    refused_file(big, file, "", W("frame 0: particle 10: particles/position has x = nan, not a finite number"));
}
END_TEST

/* ---- [system] numbering = space ----------------------------------------------- */

static int by_place(const void *a, const void *b)
{
    const metro_float4 *x = a, *y = b;
    const float u[4] = {x->x, x->y, x->z, x->w}, v[4] = {y->x, y->y, y->z, y->w};
    for (int k = 0; k < 4; ++k)
        if (u[k] != v[k]) return u[k] < v[k] ? -1 : 1;
    return 0;
}

/* The placement of ini (no run), with extra --set's. */
static metro_float4 *placement(const char *ini, const char *const *sets, int nsets, int *n, double *e0)
{
    metro_sim *sim = metro_test_sim(ini, "cpu", sets, nsets);
    metro_error err = {0};
    const metro_state *st = metro_sim_state(sim, &err);
    ck_assert_ptr_nonnull(st);
    *n = st->particles;
    metro_float4 *p = malloc(sizeof *p * (size_t)*n);
    memcpy(p, st->pos, sizeof *p * (size_t)*n);
    if (e0) *e0 = st->energy[0];
    ck_assert_msg(metro_sim_run(sim, &err) == METRO_OK, "%s", err.msg);
    metro_sim_destroy(sim);
    return p;
}

/* mean distance between index neighbours among p[a..b) */
static double hop(const metro_float4 *p, int a, int b)
{
    double s = 0;
    for (int i = a + 1; i < b; ++i)
        s += sqrt(pow(p[i].x - p[i - 1].x, 2) + pow(p[i].y - p[i - 1].y, 2) + pow(p[i].z - p[i - 1].z, 2));
    return s / (b - a - 1);
}

/* Renumbered, the placement is the same set of particles (places and
 * species), the same energy, with index neighbours close in space; the
 * chains of a composed system keep their particles. */
START_TEST(numbering_space)
{
    static const char *salt = "[run]\nseed = 21\nsweeps = 2\n[potential]\nplugin = coulomb_hs\nvalences = 3, -1\n"
                              "diameters = 4\ncell_radius = 200\nbjerrum = 7.117\n[sampler]\nplugin = brush\n"
                              "[system]\nparticles = 4000\n";
    const char *space[] = {"system.numbering=space"};
    int n, m;
    double ea, eb;
    metro_float4 *a = placement(salt, NULL, 0, &n, &ea), *b = placement(salt, space, 1, &m, &eb);
    ck_assert_int_eq(n, m);
    const double ha = hop(a, 0, n), hb = hop(b, 0, n);
    /* placed: about the cell's size apart; along the curve: a few spacings */
    ck_assert_msg(hb < 0.25 * ha, "index neighbours %.3g Å apart renumbered, %.3g Å as placed", hb, ha);
    ck_assert_msg(fabs(ea - eb) <= 1e-9 * fabs(ea), "energy %.15g renumbered, %.15g as placed", eb, ea);
    qsort(a, (size_t)n, sizeof *a, by_place);
    qsort(b, (size_t)n, sizeof *b, by_place);
    for (int i = 0; i < n; ++i) ck_assert_msg(!by_place(&a[i], &b[i]), "the renumbered placement is not the placed one");
    free(a);
    free(b);

    /* the chains (particles 0-7) stay; the counterions are renumbered */
    static const char *comp = C_RUN "[system]\nspecies = m, c\ncharges = -1, 1\ndiameters = 0.5\ncounts = 32, 32\n"
                                    "chains = 2x4\nchain_species = m\n" C_TERMS;
    a = placement(comp, NULL, 0, &n, &ea);
    b = placement(comp, space, 1, &m, &eb);
    for (int i = 0; i < 8; ++i) ck_assert_msg(!by_place(&a[i], &b[i]), "chain particle %d renumbered", i);
    ck_assert_msg(hop(b, 8, n) < hop(a, 8, n), "counterions not renumbered");
    qsort(a + 8, (size_t)n - 8, sizeof *a, by_place);
    qsort(b + 8, (size_t)n - 8, sizeof *b, by_place);
    for (int i = 8; i < n; ++i) ck_assert_msg(!by_place(&a[i], &b[i]), "the renumbered counterions are not the placed ones");
    free(a);
    free(b);

    /* a file's configuration keeps the file's numbering */
    refused(ions4, XYZ4("Na 0 0 0 1", "Cl 3 0 0 -1", "Na 0 3 0 1", "Cl 0 0 3 -1"), "numbering = space\n",
            W("numbering = space renumbers the potential's placement", "allowed with initial: placed"));
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
    tcase_add_test(tc, file_and_config);
    tcase_add_test(tc, system_from_the_file);
    tcase_add_test(tc, system_from_the_file_refused);
    tcase_add_test(tc, big_nan_position);
    tcase_add_test(tc, numbering_space);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
