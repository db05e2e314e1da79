/* test_rundir — runs that lose nothing (issue 9): one case per way a run
 * directory used to be damaged or mixed up.
 *
 *  1. a refused `resume --set` leaves config.ini as it was
 *  2. a checkpoint of another chain is refused, naming the keys; a second
 *     process on a run directory is refused with the holder's PID
 *  3. sizes that cannot fit are refused up front, before anything exists
 *  4. a refused run writes nothing; a write error (file-size limit) leaves
 *     no truncated result and says so; stale temporaries are removed
 *  5. sweeps + equilibration cannot overflow
 *  6. a plugin's cross-parameter refusal names FILE:LINE; `every` beyond
 *     `sweeps` is refused; checkpoints come by wall time too, and a run
 *     killed between two of them resumes to the same bytes
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "testutil.h"

static const char *chain_ini =
    "[run]\nseed = %d\nsweeps = %d\nequilibration = 100\ncheck_every = %d\n%s\n"
    "[system]\nparticles = 8\n\n[potential]\nplugin = lj_fene\n\n"
    "[sampler]\nplugin = metropolis\ntemperature = %g\n\n"
    "[observable energy]\nplugin = energy\nevery = 2\n";

static char dir[64];

static void fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/metro-rundir-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void cleanup(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static int exists(const char *rel)
{
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return stat(path, &sb) == 0;
}

/* Run metro with args (printf-style, %s of dir allowed); stderr in *e. */
static void chain_run(const char *name, int seed, int sweeps, double T, const char *extra)
{
    char ini[64];
    snprintf(ini, sizeof ini, "%s.ini", name);
    metro_test_write(dir, ini, chain_ini, seed, sweeps, 100, extra ? extra : "", T);
    char *e;
    int rc = metro_test_clif(&e, "run %s/%s --device cpu --output %s/%s --quiet", dir, ini, dir, name);
    ck_assert_msg(rc == 0, "run %s failed: %s", name, e);
    free(e);
}

/* ---- 1 ---- */

START_TEST(refused_resume_set_keeps_config)
{
    fresh_dir();
    chain_run("a", 5, 400, 0.6, NULL);
    char cfg[512], *before, *after, *e;
    snprintf(cfg, sizeof cfg, "%s/a/config.ini", dir);
    before = metro_test_slurp(cfg);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/a --set system.particles=14 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "particles") != NULL, "%s", e);
    free(e);
    after = metro_test_slurp(cfg);
    ck_assert_msg(!strcmp(before, after), "a refused resume --set rewrote config.ini");
    free(after);
    /* a --set on a damaged checkpoint: refused, config.ini untouched */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp %s/a/checkpoint.bin %s/good.bin && for f in %s/a/checkpoint.bin %s/a/checkpoint.bin.prev; do "
                              "[ -f $f ] && printf XXXX | dd of=$f bs=1 seek=60 conv=notrunc status=none; done; true",
             dir, dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/a --set run.sweeps=800 --device cpu --quiet", dir), 1);
    ck_assert_msg(strstr(e, "damaged") != NULL, "%s", e);
    free(e);
    after = metro_test_slurp(cfg);
    ck_assert_msg(!strcmp(before, after), "a resume --set on a damaged checkpoint rewrote config.ini");
    free(after);
    /* the plain resume still works once the checkpoint is good again */
    snprintf(cmd, sizeof cmd, "cp %s/good.bin %s/a/checkpoint.bin", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(NULL, "resume %s/a --device cpu --quiet", dir), 0);
    free(before);
    cleanup();
}
END_TEST

/* ---- 2 ---- */

START_TEST(foreign_checkpoint_refused)
{
    fresh_dir();
    chain_run("a", 5, 400, 0.6, NULL);
    chain_run("b", 6, 400, 0.7, NULL);
    char cmd[1024], *e;
    snprintf(cmd, sizeof cmd, "cp %s/a/energy.csv %s/a.csv && cp %s/b/checkpoint.bin %s/a/checkpoint.bin", dir, dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/a --set run.sweeps=800 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "another chain") && strstr(e, "seed") && strstr(e, "temperature"),
                  "the keys that differ are not named: %s", e);
    ck_assert_msg(!strstr(e, "sweeps:"), "sweeps may change on resume: %s", e);
    free(e);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a/energy.csv", dir);
    snprintf(b, sizeof b, "%s/a.csv", dir);
    ck_assert_msg(metro_test_same_file(a, b), "the refused resume touched the results");
    /* an observable's spacing is part of the chain's record: a resume that
     * changes it would mix two spacings in one series (mutation testing
     * found no test of it) */
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/b --set run.sweeps=800 --set \"observable energy.every=4\" "
                                         "--device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "another chain") && strstr(e, "every"), "every is not named: %s", e);
    free(e);
    /* a term's species by their names (it showed the masks: '0x1', '0x3') */
    metro_test_write(dir, "sp.ini", "[run]\nsweeps = 4\n[system]\nspecies = m, c\ncharges = 0, 0\ndiameters = 0.5\n"
                                    "counts = 4, 4\n[potential a]\nplugin = coulomb_hs\ncell_radius = 5\nspecies = m, c\n"
                                    "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/sp.ini --device cpu --output %s/sp --quiet", dir, dir), 0);
    free(e);
    metro_test_write(dir, "sp.ini", "[run]\nsweeps = 4\n[system]\nspecies = m, c\ncharges = 0, 0\ndiameters = 0.5\n"
                                    "counts = 4, 4\n[potential a]\nplugin = coulomb_hs\ncell_radius = 5\nspecies = m\n"
                                    "[potential b]\nplugin = coulomb_hs\ncell_radius = 5\nspecies = c\n[sampler]\n"
                                    "plugin = metropolis\ntemperature = 1\n");
    snprintf(cmd, sizeof cmd, "cp %s/sp.ini %s/sp/config.ini", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/sp --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "[potential a] species: the checkpoint has 'm, c', the config 'm'"), "%s", e);
    free(e);
    /* [system] species is a list of names, not a mask (it read as '' ),
     * and a term's species are each side's own names */
    metro_test_write(dir, "sp.ini", "[run]\nsweeps = 4\n[system]\nspecies = c, m\ncharges = 0, 0\ndiameters = 0.5\n"
                                    "counts = 4, 4\n[potential a]\nplugin = coulomb_hs\ncell_radius = 5\nspecies = c\n"
                                    "[potential b]\nplugin = coulomb_hs\ncell_radius = 5\nspecies = m\n[sampler]\n"
                                    "plugin = metropolis\ntemperature = 1\n");
    snprintf(cmd, sizeof cmd, "cp %s/sp.ini %s/sp/config.ini", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/sp --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "[system] species: the checkpoint has 'm, c', the config 'c, m'") &&
                      strstr(e, "[potential a] species: the checkpoint has 'm, c', the config 'c'"),
                  "%s", e);
    free(e);
    cleanup();
}
END_TEST

START_TEST(second_process_refused)
{
    fresh_dir();
    chain_run("a", 5, 400, 0.6, NULL);
    /* a child holds the run directory's lock as a running metro would */
    int go[2], ready[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char path[512];
        snprintf(path, sizeof path, "%s/a/.lock", dir);
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        char c = fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1) _exit(2);
        if (read(go[0], &c, 1) < 0) _exit(2);
        _exit(0);
    }
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    char *e, want[64];
    snprintf(want, sizeof want, "PID %ld", (long)pid);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/a --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, want) != NULL, "holder not named (%s): %s", want, e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/a.ini --device cpu --output %s/a --overwrite --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, want) != NULL, "%s", e);
    free(e);
    ck_assert_msg(exists("a/energy.csv"), "--overwrite removed files of a locked directory");
    /* a run that has not checkpointed yet is named too, not "no checkpoint" */
    char ck[600], hide[600];
    snprintf(ck, sizeof ck, "%s/a/checkpoint.bin", dir);
    snprintf(hide, sizeof hide, "%s/a/hidden.bin", dir);
    ck_assert_int_eq(rename(ck, hide), 0);
    snprintf(ck, sizeof ck, "%s/a/checkpoint.bin.prev", dir);
    unlink(ck);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/a --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, want) && strstr(e, "written no checkpoint yet"), "%s", e);
    free(e);
    snprintf(ck, sizeof ck, "%s/a/checkpoint.bin", dir);
    ck_assert_int_eq(rename(hide, ck), 0);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    waitpid(pid, NULL, 0);
    /* the holder is gone: its lock went with it */
    ck_assert_int_eq(metro_test_clif(NULL, "resume %s/a --device cpu --quiet", dir), 0);
    cleanup();
}
END_TEST

/* ---- 3 ---- */

START_TEST(sizes_refused_up_front)
{
    fresh_dir();
    char *e;
    metro_test_write(dir, "big.ini", "[run]\nsweeps = 10\n[system]\nparticles = 2000000000\n[potential]\nplugin = lj_fene\n"
                          "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/big.ini --device cpu --output %s/big --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "GiB of host memory") != NULL, "%s", e);
    free(e);
    ck_assert_msg(!exists("big"), "a refused run created its directory");
    metro_test_write(dir, "ions.ini", "[run]\nsweeps = 10\n[system]\nparticles = 2000000000\n[potential]\nplugin = coulomb_hs\n"
                           "valences = 1,-1\ndiameters = 4\nconcentration = 0.01\n[sampler]\nplugin = brush\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ions.ini --device cpu --output %s/ions --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "GiB of host memory") != NULL, "%s", e);
    free(e);
    ck_assert_msg(!exists("ions"), "a refused run created its directory");
    /* 4096 x 4096 replicas of 1000 particles */
    metro_test_write(dir, "pt.ini", "[run]\nsweeps = 10\n[system]\nparticles = 1000\n[potential]\nplugin = lj_fene\n"
                         "[sampler]\nplugin = parallel_tempering\nreplicas = 4096\nladders = 4096\nt_min = 0.5\nt_max = 2\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/pt.ini --device cpu --output %s/pt --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "GiB of host memory") != NULL, "%s", e);
    free(e);
    ck_assert_msg(!exists("pt"), "a refused run created its directory");
    /* most of it asked for by a plugin's own memory(): named, since the
     * system's size is then not what to change */
    metro_test_write(dir, "mem.ini", "[run]\nsweeps = 10\n[system]\nparticles = 8\n[potential]\nplugin = nanfar\n"
                          "memory = 1e8\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/mem.ini --device cpu --output %s/mem --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "8 particles x 1 replicas (1e+08 GiB of it by the memory() of [potential] nanfar) need"),
                  "%s", e);
    free(e);
    ck_assert_msg(!exists("mem"), "a refused run created its directory");
    cleanup();
}
END_TEST

/* ---- 4 ---- */

START_TEST(refused_run_writes_nothing)
{
    fresh_dir();
    char *e;
    /* a cross-parameter refusal in create(): not electroneutral */
    metro_test_write(dir, "ions.ini", "[run]\nsweeps = 10\n[system]\nparticles = 7\n[potential]\nplugin = coulomb_hs\n"
                           "valences = 1,-1\ndiameters = 4\ncell_radius = 50\n[sampler]\nplugin = brush\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ions.ini --device cpu --output %s/ions --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "ions.ini:") != NULL, "no FILE:LINE: %s", e);
    free(e);
    ck_assert_msg(!exists("ions"), "a refusal in create() left a run directory");
    /* a placement failure: far too dense */
    metro_test_write(dir, "dense.ini", "[run]\nsweeps = 10\n[system]\nparticles = 2000\n[potential]\nplugin = coulomb_hs\n"
                            "valences = 1,-1\ndiameters = 4\ncell_radius = 12\n[sampler]\nplugin = brush\n");
    ck_assert_int_ne(metro_test_clif(&e, "run %s/dense.ini --device cpu --output %s/dense --quiet", dir, dir), 0);
    free(e);
    ck_assert_msg(!exists("dense"), "a placement failure left a run directory");
    /* an observable refusing its potential */
    metro_test_write(dir, "obs.ini", "[run]\nsweeps = 10\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                          "[sampler]\nplugin = metropolis\ntemperature = 1\n[observable g]\nplugin = pair_correlation\n");
    ck_assert_int_ne(metro_test_clif(&e, "run %s/obs.ini --device cpu --output %s/obs --quiet", dir, dir), 0);
    free(e);
    ck_assert_msg(!exists("obs"), "an observable's refusal left a run directory");
    cleanup();
}
END_TEST

/* The claims themselves: a name is its first section's, a section may
 * reopen its own, and the core's files are no plugin's. */
START_TEST(claims_of_files)
{
    metro_sim *sim = calloc(1, sizeof *sim);
    ck_assert_ptr_nonnull(sim);
    metro_ctx a = {.sim = sim, .section = "observable a"}, b = {.sim = sim, .section = "observable b"};
    ck_assert_int_eq(metro__output_claim(&a, "x.csv", 1), 0);
    ck_assert_int_eq(metro__output_claim(&a, "x.csv", 1), 0);
    ck_assert_int_eq(metro__output_claim(&b, "y.csv", 1), 0);
    ck_assert_int_eq(metro__output_claim(&b, "x.csv", 1), -1);
    ck_assert_msg(strstr(b.err, "'x.csv' is written by [observable a] already"), "%s", b.err);
    for (const char *const *f = (const char *const[]){"config.ini", "log.txt", "checkpoint.bin", "checkpoint.bin.prev",
                                                       "gnuplot.log", NULL};
         *f; ++f) {
        ck_assert_int_eq(metro__output_claim(&a, *f, 1), -1);
        ck_assert_msg(strstr(a.err, "is the core's own file"), "%s: %s", *f, a.err);
    }
    ck_assert_int_eq(metro__output_claim(&a, "x.csv.tmp", 1), -1);
    ck_assert_msg(strstr(a.err, "a temporary's name"), "%s", a.err);
    for (const char *const *f = (const char *const[]){"", "../x.csv", "d/x.csv", ".hidden", NULL}; *f; ++f) {
        ck_assert_int_eq(metro__output_claim(&a, *f, 0), -1);
        ck_assert_msg(strstr(a.err, "is not a plain file name"), "'%s': %s", *f, a.err);
    }
    /* in create() a name is claimed ahead, not opened: the later open by
     * its section passes, another section's is refused */
    sim->creating = 1;
    ck_assert_int_eq(metro__output_claim(&a, "z.gsd", 0), 0);
    ck_assert_int_eq(metro__output_claim(&b, "z.gsd", 0), -1);
    ck_assert_int_eq(metro__output_claim(&a, "w.csv", 1), -1);
    ck_assert_msg(strstr(a.err, "opened in create()"), "%s", a.err);
    sim->creating = 0;
    ck_assert_int_eq(metro__output_claim(&a, "z.gsd", 1), 0);
    metro__output_claims_free(sim);
    free(sim);
}
END_TEST

/* Two sections writing one file that their parameters' text does not
 * show (one names the other's default): the trajectories name their files
 * in create() (host->claim_output), so the second is refused before the
 * run, dry or not, with both sections named (it used to be stopped at its
 * first frame, exit 1, the run directory made). */
START_TEST(one_writer_a_file)
{
    fresh_dir();
    char *e;
    metro_test_write(dir, "t.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = coulomb_hs\n"
                        "valences = 1,-1\ndiameters = 4\ncell_radius = 30\n[sampler]\nplugin = brush\n"
                        "[observable t1]\nplugin = trajectory\nformat = xyz\n"
                        "[observable t2]\nplugin = trajectory\nformat = xyz\nfile = trajectory.xyz\n");
    for (int dry = 0; dry < 2; ++dry) {
        int rc = metro_test_clif(&e, "run %s/t.ini --device cpu --output %s/t --quiet%s", dir, dir, dry ? " --dry-run" : "");
        ck_assert_msg(rc == 2 && strstr(e, "t.ini:15: [observable t2] trajectory (observable) refused its parameters") &&
                          strstr(e, "'trajectory.xyz' is written by [observable t1] already"),
                      "exit %d: %s", rc, e);
        free(e);
        ck_assert_msg(!exists("t"), "a refused run made its directory");
    }
    /* by replica and by slot: other files (trajectory_r0.gsd, trajectory_t0.gsd, ...), not refused */
    metro_test_write(dir, "pt.ini", "[run]\nsweeps = 4\n[system]\nparticles = 4\n[potential]\nplugin = lj_fene\n"
                         "[sampler]\nplugin = parallel_tempering\ntemperatures = 1, 2\n"
                         "[observable by_replica]\nplugin = trajectory\nreplicas = 0, 1\n"
                         "[observable by_slot]\nplugin = trajectory\nslots = 0, 1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/pt.ini --device cpu --output %s/pt --quiet", dir, dir), 0);
    free(e);
    ck_assert_msg(exists("pt/trajectory_r1.gsd") && exists("pt/trajectory_t1.gsd"), "by replica and by slot");
    cleanup();
}
END_TEST

/* A plugin opening its output in create(), before the run directory
 * exists, is refused (its file went nowhere, and the run said "results
 * written"); a `file` naming one of the core's files, or a temporary's, is
 * refused before the run starts, not at its end (tests/plugins/writer.c) */
START_TEST(output_rules_of_plugins)
{
    fresh_dir();
    static const char *const cases[][3] = {
        {"open_in = create", "'writer.txt' opened in create(): result files are opened in measure() or finish()", ""},
        {"file = log.txt", "w.ini:12: [observable w] file: 'log.txt' is the core's own file", "--dry-run"},
        {"file = log.txt", "w.ini:12: [observable w] file: 'log.txt' is the core's own file", ""},
        {"file = checkpoint.bin.tmp", "[observable w] file: 'checkpoint.bin.tmp' is a temporary's name", ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        metro_test_write(dir, "w.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                       "[sampler]\nplugin = metropolis\ntemperature = 1\n\n[observable w]\n%s\nplugin = writer\n",
                         cases[k][0]);
        char *e;
        const int rc = metro_test_clif(&e, "run %s/w.ini --device cpu --output %s/w --quiet %s", dir, dir, cases[k][2]);
        ck_assert_msg(rc == 2 && strstr(e, cases[k][1]), "case %zu: exit %d: %s", k, rc, e);
        ck_assert_msg(!exists("w"), "case %zu: a refused run wrote its directory", k);
        free(e);
    }
    /* the same plugin opening its file in finish() writes it */
    metro_test_write(dir, "w.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n[observable w]\nplugin = writer\n");
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/w.ini --device cpu --output %s/w --quiet", dir, dir), 0);
    free(e);
    char path[256];
    snprintf(path, sizeof path, "%s/w/writer.txt", dir);
    char *text = metro_test_slurp(path);
    ck_assert_msg(text && !strcmp(text, "written in finish()\n"), "%s", text ? text : "(no writer.txt)");
    free(text);
    cleanup();
}
END_TEST

/* A potential's delta() that gives NaN stops the run on every sampler's
 * CPU path, naming the particle (metro_accept rejects NaN as it rejects an
 * overlap, so the chain was biased without a word: tests/plugins/nanpot.c) */
START_TEST(nan_delta_stops_the_run)
{
    fresh_dir();
    static const char *const samplers[] = {"metropolis\ntemperature = 1", "parallel_tempering\ntemperatures = 1, 2",
                                           "brush\nstep = 1"};
    static const char *const far_samplers[] = {"metropolis\ntemperature = 1\nstep = 4",
                                               "parallel_tempering\ntemperatures = 1, 2\nstep = 4", "brush\nstep = 4"};
    for (int k = 0; k < 3; ++k) {
        metro_test_write(dir, "n.ini", "[run]\nsweeps = 10\nequilibration = 0\n[system]\nparticles = 8\n"
                                       "[potential]\nplugin = nanpot\n[sampler]\nplugin = %s\n", samplers[k]);
        char *e;
        const int rc = metro_test_clif(&e, "run %s/n.ini --device cpu --output %s/n --overwrite --quiet", dir, dir);
        ck_assert_msg(rc == 1 && strstr(e, "delta() returned NaN for particle 3"), "%s: exit %d: %s", samplers[k], rc, e);
        free(e);
        /* a term of a composed system that gives NaN (nanfar: beyond `far`
         * from the origin) stops it too: the composite's sum turned NaN
         * into +inf, a hidden wall, and the run went on */
        metro_test_write(dir, "c.ini", "[run]\nsweeps = 50\nequilibration = 0\n[system]\nspecies = a, b\ncounts = 20, 20\n"
                                       "[potential x]\nplugin = nanfar\nspecies = a\nfar = 8\n[potential y]\nplugin = nanfar\n"
                                       "species = b\nfar = 1000\n[sampler]\nplugin = %s\n", far_samplers[k]);
        const int rc2 = metro_test_clif(&e, "run %s/c.ini --device cpu --output %s/c --overwrite --quiet", dir, dir);
        ck_assert_msg(rc2 == 1 && strstr(e, "delta() returned NaN for particle"), "%s, composed: exit %d: %s", samplers[k],
                      rc2, e);
        free(e);
    }
    /* a potential whose own initial() places particles where its total()
     * is not finite: refused at the start with the section's line, exit 2,
     * nothing written (it was exit 1, naming neither initial() nor total()) */
    {
        metro_test_write(dir, "ie.ini", "[run]\nsweeps = 5\n[system]\nparticles = 40\n[potential]\nplugin = nanfar\n"
                                        "far = 5\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
        char *e;
        ck_assert_int_eq(metro_test_clif(&e, "run %s/ie.ini --device cpu --output %s/ie --quiet", dir, dir), 2);
        ck_assert_msg(strstr(e, "ie.ini:5: [potential] nanfar: the initial configuration of replica 0 has energy nan: "
                                "the potential's own initial() placed particles where its total() is not finite"),
                      "%s", e);
        ck_assert_msg(!exists("ie"), "a refused start wrote its run directory");
        free(e);
    }
    /* a step below the float spacing where the particles are moves nothing
     * and counts every trial as accepted: said (a cell of radius 1e9 with
     * step 0.3 reported acceptance 1 without a word); not said for the
     * paper's step at the paper's sizes */
    for (int big = 0; big < 2; ++big) {
        metro_test_write(dir, "f.ini", "[run]\nsweeps = 2\nequilibration = 0\n[system]\nparticles = 8\n[potential]\n"
                                       "plugin = coulomb_hs\nvalences = 1, -1\ndiameters = 1\ncell_radius = %s\n"
                                       "[sampler]\nplugin = metropolis\ntemperature = 1\nstep = %s\n",
                         big ? "1e9" : "50", big ? "0.3" : "0.01");
        char *e;
        ck_assert_int_eq(metro_test_clif(&e, "run %s/f.ini --device cpu --output %s/f --overwrite --quiet", dir, dir), 0);
        ck_assert_msg(!strstr(e, "is below 16 times the float spacing of the coordinates") == !big, "%s", e);
        free(e);
    }
    /* a delta() that is not the change of total(): the energy check stops
     * the run (mutation testing found no test that reached it) */
    metro_test_write(dir, "b.ini", "[run]\nsweeps = 40\nequilibration = 0\ncheck_every = 10\n[system]\n"
                                   "particles = 8\n[potential]\nplugin = nanpot\nbad = -1\nbias = -0.5\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *e;
    const int rc = metro_test_clif(&e, "run %s/b.ini --device cpu --output %s/b --quiet", dir, dir);
    ck_assert_msg(rc == 1 && strstr(e, "energy check at sweep 10: replica 0 runs at E = ") &&
                      strstr(e, "but recomputes to 0"),
                  "exit %d: %s", rc, e);
    free(e);
    cleanup();
}
END_TEST

/* The energy checks resync the running energies at points that do not
 * depend on the run's length, so a run extended later is the run straight
 * through.  On the CPU the resync changes nothing for a correct potential;
 * on the GPU it changes the last bits (parallel tempering's exchanges then
 * differed).  nanpot's bias makes every move's delta() -1e-6 while total()
 * stays 0, so energy.csv shows each resync (ten checks a run, at a tenth of
 * its length, resynced a 20-sweep run extended to 64 elsewhere than a
 * 64-sweep run). */
START_TEST(extended_resyncs_where_straight_does)
{
    fresh_dir();
    static const char *const ini = "[run]\nsweeps = %d\nequilibration = 0\n[system]\nparticles = 8\n[potential]\n"
                                   "plugin = nanpot\nbad = -1\nbias = -1e-6\n[sampler]\nplugin = metropolis\n"
                                   "temperature = 1\n[observable energy]\nplugin = energy\n";
    metro_test_write(dir, "s.ini", ini, 64);
    metro_test_write(dir, "x.ini", ini, 20);
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/s.ini --device cpu --output %s/s --quiet", dir, dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/x.ini --device cpu --output %s/x --quiet", dir, dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/x --set run.sweeps=64 --quiet", dir), 0);
    free(e);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/s/energy.csv", dir);
    snprintf(b, sizeof b, "%s/x/energy.csv", dir);
    ck_assert_msg(metro_test_same_file(a, b), "extended and straight differ: %s, %s", a, b);
    cleanup();
}
END_TEST

/* --dry-run --arch sm_90 links the run's device code for that GPU on a
 * machine without one (a plugin author's check) and writes nothing, not
 * even to the cubin cache; a potential without device code does not link,
 * with nvJitLink's reason */
START_TEST(dry_run_links_for_an_arch)
{
    fresh_dir();
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("METRO_CACHE_DIR", cache, 1);
    metro_test_write(dir, "q.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *out = NULL, *e = NULL, args[1024];
    snprintf(args, sizeof args, "run %s/q.ini --device cpu --output %s/q --dry-run --arch sm_90", dir, dir);
    int rc = metro_test_cli(args, &out, &e);
    ck_assert_msg(rc == 0 && strstr(out, "; device code:            links for sm_90"), "exit %d: %s%s", rc, out, e);
    ck_assert_msg(!exists("q") && !exists("cache"), "a dry run wrote something");
    free(out);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/q.ini --device cpu --arch sm_90", dir), 2);
    ck_assert_msg(strstr(e, "--arch goes with --dry-run"), "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/q.ini --device cpu --dry-run --arch compute90", dir), 2);
    free(e);
    metro_test_write(dir, "n.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = nanpot\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    rc = metro_test_clif(&e, "run %s/n.ini --device cpu --dry-run --arch sm_90", dir);
    ck_assert_msg(rc == 1 && strstr(e, "[potential] nanpot: the potential has no device code") &&
                      strstr(e, "--arch sm_90: the run's device code does not link"),
                  "exit %d: %s", rc, e);
    free(e);
    /* device code without three of the term functions: refused whatever
     * the sampler (metropolis calls none of them; the link passed) */
    metro_test_write(dir, "h.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = halfterm\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    rc = metro_test_clif(&e, "run %s/h.ini --device cpu --dry-run --arch sm_90", dir);
    ck_assert_msg(rc == 1 && strstr(e, "Unresolved extern function 'halfterm__pair_delta_") &&
                      strstr(e, "every potential defines the term functions metro/device.h lists"),
                  "exit %d: %s", rc, e);
    free(e);
    unsetenv("METRO_CACHE_DIR");
    cleanup();
}
END_TEST

/* DIR/NAME.ini run into DIR/NAME under a file-size limit of `kb` kB,
 * which must fail (exit 1) with a message naming `file` and EFBIG, leave
 * no part of `file` (nor its temporary), and not claim results in the log */
static void fails_under_file_limit(const char *name, int kb, const char *file)
{
    char cmd[2048], err[512], rel[256];
    snprintf(err, sizeof err, "%s/err.txt", dir);
    /* bash: its ulimit -f counts kilobytes (dash's counts 512-byte blocks) */
    snprintf(cmd, sizeof cmd,
             "bash -c 'ulimit -f %d; exec %s/bin/metro run %s/%s.ini --device cpu --output %s/%s --quiet' 2>%s", kb,
             METRO_TEST_BINARY_DIR, dir, name, dir, name, err);
    const int st = system(cmd);
    char *e = metro_test_slurp(err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit %d, not 1: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, e);
    ck_assert_msg(strstr(e, file) && strstr(e, "File too large"), "no message: %s", e);
    free(e);
    snprintf(rel, sizeof rel, "%s/%s", name, file);
    ck_assert_msg(!exists(rel), "%s was written in part", file);
    snprintf(rel, sizeof rel, "%s/%s.tmp", name, file);
    ck_assert_msg(!exists(rel), "a temporary was left behind");
    snprintf(err, sizeof err, "%s/%s/log.txt", dir, name);
    char *log = metro_test_slurp(err);
    ck_assert_msg(log && !strstr(log, "results written"), "the log claims results: %s", log ? log : "(none)");
    free(log);
}

START_TEST(write_error_leaves_no_result)
{
    fresh_dir();
    /* energy.csv of 20000 samples (about 630 kB) does not fit under a
     * 540 kB file-size limit; the checkpoints (about 470 kB) do */
    metro_test_write(dir, "a.ini", chain_ini, 5, 40000, 40000, "", 0.6);
    fails_under_file_limit("a", 540, "energy.csv");
    ck_assert_msg(!exists("a/energy_stats.csv"), "a result was written");
    cleanup();
}
END_TEST

/* A write error that the plugin itself ignores (its finish() succeeds) is
 * caught when the results are committed: exit 1, the file named, nothing
 * of it left (mutation testing found the commit's check unguarded) */
START_TEST(ignored_write_error_caught_at_commit)
{
    fresh_dir();
    metro_test_write(dir, "w.ini", "[run]\nsweeps = 4\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n[observable w]\nplugin = writer\n"
                                   "pad = 400000\ncareless = true\n");
    fails_under_file_limit("w", 300, "writer.txt");
    cleanup();
}
END_TEST

START_TEST(stale_temporaries_removed)
{
    fresh_dir();
    chain_run("a", 5, 400, 0.6, NULL);
    metro_test_write(dir, "a/checkpoint.bin.tmp", "half a checkpoint");
    metro_test_write(dir, "a/energy.csv.tmp", "half a result");
    ck_assert_int_eq(metro_test_clif(NULL, "resume %s/a --device cpu --quiet", dir), 0);
    ck_assert_msg(!exists("a/checkpoint.bin.tmp") && !exists("a/energy.csv.tmp"), "stale temporaries left");
    cleanup();
}
END_TEST

/* ---- 5 ---- */

START_TEST(sweep_counts_cannot_overflow)
{
    fresh_dir();
    char *e;
    metro_test_write(dir, "a.ini", chain_ini, 5, 400, 100, "", 0.6);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/a.ini --set run.sweeps=5000000000000000000 --set run.equilibration=5000000000000000000 "
                             "--device cpu --output %s/a --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "sweeps") && strstr(e, "equilibration"), "%s", e);
    free(e);
    ck_assert_msg(!exists("a"), "a refused run created its directory");
    cleanup();
}
END_TEST

/* ---- 6 ---- */

START_TEST(refusals_name_the_line)
{
    fresh_dir();
    char *e;
    metro_test_write(dir, "ions.ini", "[run]\nsweeps = 10\n\n[system]\nparticles = 8\n\n[potential]\nplugin = coulomb_hs\n"
                           "valences = 1,-1\ndiameters = 4\ncell_radius = 50\nconcentration = 0.1\n[sampler]\nplugin = brush\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ions.ini --device cpu --output %s/x --quiet", dir, dir), 2);
    /* "cell_radius and concentration: ..." points at cell_radius, line 11 */
    ck_assert_msg(strstr(e, "ions.ini:11:") != NULL, "not at the key's line: %s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ions.ini --set potential.concentration=0.2 --device cpu --output %s/x --quiet", dir, dir),
                     2);
    ck_assert_msg(strstr(e, "ions.ini:") != NULL, "%s", e);
    free(e);
    metro_test_write(dir, "a.ini", chain_ini, 5, 10, 100, "", 0.6);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/a.ini --set 'observable energy.every=20' --device cpu --output %s/x --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "never measure") != NULL, "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/a.ini --set run.sweeps=0 --device cpu --output %s/x --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "never measure") != NULL, "%s", e);
    free(e);
    /* a plugin name is a file stem: a path would load any library */
    ck_assert_int_eq(metro_test_clif(&e, "run %s/a.ini --set sampler.plugin=../../tmp/evil --device cpu --output %s/x --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "not a plugin name") != NULL, "%s", e);
    free(e);
    /* a NUL byte in the file is an error, through the program too */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "printf '[run]\\nsweeps = 10\\000\\n' > %s/nul.ini", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/nul.ini --device cpu --output %s/x --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "NUL byte") != NULL, "%s", e);
    free(e);
    ck_assert_msg(!exists("x"), "a refused run created its directory");
    cleanup();
}
END_TEST

/* `metro run DIR/a.ini --output DIR/a` in the background, its stderr to
 * DIR/stderr.txt (to be read) or, without `keep_stderr`, to /dev/null */
static pid_t spawn_run_a(int keep_stderr)
{
    char cmd[2048], ini[512], out[512], log[512];
    snprintf(cmd, sizeof cmd, "%s/bin/metro", METRO_TEST_BINARY_DIR);
    snprintf(ini, sizeof ini, "%s/a.ini", dir);
    snprintf(out, sizeof out, "%s/a", dir);
    snprintf(log, sizeof log, "%s/stderr.txt", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = keep_stderr ? open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        execl(cmd, "metro", "run", ini, "--device", "cpu", "--output", out, "--quiet", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* DIR/a resumed to its end gives the energies of DIR/b.ini run straight */
static void resumed_equals_straight(const char *how)
{
    char *e;
    int rc = metro_test_clif(&e, "resume %s/a --device cpu --quiet", dir);
    ck_assert_msg(rc == 0, "resume failed: %s", e);
    free(e);
    rc = metro_test_clif(&e, "run %s/b.ini --device cpu --output %s/b --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a/energy.csv", dir);
    snprintf(b, sizeof b, "%s/b/energy.csv", dir);
    ck_assert_msg(metro_test_same_file(a, b), "%s + resumed differs from straight: %s %s", how, a, b);
    /* the resumed run's time is its own: the log says how many sweeps it ran */
    snprintf(a, sizeof a, "%s/a/log.txt", dir);
    char *log = metro_test_slurp(a);
    ck_assert_msg(log && strstr(log, "of them since the resume at sweep"), "the log does not say the run was resumed: %s",
                  log ? log : "(none)");
    free(log);
}

START_TEST(checkpoints_by_wall_time)
{
    fresh_dir();
    /* the energy check (and with it the sweep-based checkpoint) only at
     * the end; a checkpoint every 0.05 s of wall time in between */
    const int sweeps = 600000;
    metro_test_write(dir, "a.ini", chain_ini, 7, sweeps, sweeps, "checkpoint_minutes = 0.001\n", 0.6);
    pid_t pid = spawn_run_a(0);
    /* (up to 30 s: a loaded CI machine starts slowly) */
    for (int i = 0; i < 600 && !exists("a/checkpoint.bin.prev"); ++i) usleep(50000);
    usleep(200000);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFSIGNALED(st), "the run ended before it was killed");
    /* killed wherever, also while a checkpoint takes the name (test_checkpoint
     * looks at that moment) */
    ck_assert_msg(exists("a/checkpoint.bin"), "no checkpoint by wall time before the first energy check");
    metro_test_write(dir, "b.ini", chain_ini, 7, sweeps, sweeps, "checkpoint_minutes = 0\n", 0.6);
    resumed_equals_straight("killed");
    cleanup();
}
END_TEST

/* A stop request that arrives as two signals (timeout(1) sends TERM to the
 * process and then to its group; a batch system signals every process of
 * the job) still ends with a checkpoint: the second, 10 ms after the first,
 * is the same request, not a kill, whichever chunk (production's grow to
 * ~0.2 s; a measurement every 500,000 sweeps of 8 particles) either lands
 * in. */
static const char *long_chunks_ini =
    "[run]\nseed = 7\nsweeps = 2000000\nequilibration = 100\ncheck_every = 2000000\ncheckpoint_minutes = %g\n"
    "[system]\nparticles = 8\n\n[potential]\nplugin = lj_fene\n\n"
    "[sampler]\nplugin = metropolis\ntemperature = 0.6\n\n"
    "[observable energy]\nplugin = energy\nevery = 500000\n";

/* The run spawned as pid stops at the signal sent to it: it exits
 * METRO_ESTOPPED (not killed by it), saying so in DIR/stderr.txt */
static void stopped_by_the_signal(pid_t pid)
{
    int st;
    waitpid(pid, &st, 0);
    char log[512];
    snprintf(log, sizeof log, "%s/stderr.txt", dir);
    char *e = metro_test_slurp(log);
    ck_assert_msg(WIFEXITED(st), "killed by signal %d instead of stopping: %s", WIFSIGNALED(st) ? WTERMSIG(st) : 0, e);
    ck_assert_msg(WEXITSTATUS(st) == METRO_ESTOPPED, "a stopped run exits %d, not %d: %s", WEXITSTATUS(st),
                  METRO_ESTOPPED, e);
    ck_assert_msg(strstr(e, "interrupted by signal 15") && strstr(e, "checkpoint is written"), "%s", e);
    free(e);
}

START_TEST(signal_twice_checkpoints)
{
    fresh_dir();
    metro_test_write(dir, "a.ini", long_chunks_ini, 0.0001);
    pid_t pid = spawn_run_a(1);
    /* in production: its first chunk's wall-time checkpoint is written */
    for (int i = 0; i < 1500 && !exists("a/checkpoint.bin"); ++i) usleep(20000);
    usleep(100000);
    kill(pid, SIGTERM);
    usleep(10000);
    kill(pid, SIGTERM);
    stopped_by_the_signal(pid);
    metro_test_write(dir, "b.ini", long_chunks_ini, 0.0);
    resumed_equals_straight("stopped");
    cleanup();
}
END_TEST

/* An ensemble whose first system has ended still stops at a signal, every
 * other system with its checkpoint (the first to end put back the default
 * handlers, so the signal killed the process) */
START_TEST(ensemble_stops_after_a_system_ended)
{
    fresh_dir();
    metro_test_write(dir, "a.ini", "[run]\nseed = 3\nequilibration = 0\ncheck_every = 1000000000\n"
                                   "scan = run.sweeps: 300000, 1000000000\n[system]\nparticles = 8\n"
                                   "[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\n"
                                   "temperature = 1\n[observable energy]\nplugin = energy\nevery = 10\n");
    pid_t pid = spawn_run_a(1);
    for (int i = 0; i < 3000 && !exists("a/system_000/energy_stats.csv"); ++i) usleep(20000);
    ck_assert_msg(exists("a/system_000/energy_stats.csv"), "the short system did not end");
    usleep(200000);
    kill(pid, SIGTERM);
    stopped_by_the_signal(pid);
    ck_assert_msg(exists("a/system_001/checkpoint.bin"), "the long system stopped without its checkpoint");
    cleanup();
}
END_TEST

/* A folder that is not a run directory of metro's (`--output .`, a
 * project folder with the user's own config.ini) is neither written among
 * nor, with --overwrite, emptied: refused with exit 2 and left as it was
 * (--overwrite had removed every plain file in it, the config being run
 * among them, and a run without it had replaced energy.csv and removed
 * *.tmp).  A new, empty, or metro's folder is taken as before. */
START_TEST(folders_not_metros)
{
    fresh_dir();
    static const char *const ini = "[run]\nsweeps = 20\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                   "[sampler]\nplugin = metropolis\ntemperature = 1\n[observable e]\nplugin = energy\n";
    static const char *const how[] = {"", " --overwrite", " --set run.systems=2", " --set run.systems=2 --overwrite",
                                      " --dry-run"};
    /* the last: a resolved config copied into a project folder to run again
     * (--overwrite had emptied the folder, taking it for a run's) */
    static const char *const mine[][2] = {{"thesis.tex", "mine"}, {"energy.csv", "mine"}, {"draft.tmp", "mine"},
                                          {"config.ini", "[run]\nsweeps = 5\n"},
                                          {"config.ini", "; metro 0.1.0: the resolved configuration of this run\n"}};
    for (size_t m = 0; m < sizeof mine / sizeof *mine; ++m)
        for (size_t k = 0; k < sizeof how / sizeof *how; ++k) {
            char u[512], name[600], *e;
            snprintf(u, sizeof u, "%s/u", dir);
            ck_assert_int_eq(mkdir(u, 0755), 0);
            snprintf(name, sizeof name, "u/%s", mine[m][0]);
            metro_test_write(dir, "u/run.ini", "%s", ini);
            metro_test_write(dir, name, "%s", mine[m][1]);
            const int rc = metro_test_clif(&e, "run %s/u/run.ini --device cpu --output %s/u --quiet%s", dir, dir, how[k]);
            ck_assert_msg(rc == 2 && strstr(e, "that are not a metro run's") && strstr(e, "choose another --output"),
                          "%s, run%s: exit %d: %s", mine[m][0], how[k], rc, e);
            free(e);
            char full[1200];
            snprintf(full, sizeof full, "%s/%s", dir, name);
            char *kept = metro_test_slurp(full);
            ck_assert_msg(exists("u/run.ini") && kept && !strcmp(kept, mine[m][1]) && !exists("u/log.txt") &&
                              !exists("u/system_000"),
                          "%s, run%s: the folder was changed", mine[m][0], how[k]);
            free(kept);
            cleanup();
            fresh_dir();
        }
    /* an empty folder is new, and so is one holding only what a run killed
     * at its start left: its lock and a temporary */
    char u[512], *e;
    snprintf(u, sizeof u, "%s/u", dir);
    ck_assert_int_eq(mkdir(u, 0755), 0);
    metro_test_write(dir, "run.ini", "%s", ini);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/run.ini --device cpu --output %s/u --quiet", dir, dir), 0);
    free(e);
    snprintf(u, sizeof u, "%s/k", dir);
    ck_assert_int_eq(mkdir(u, 0755), 0);
    metro_test_write(dir, "k/.lock", "1\n");
    metro_test_write(dir, "k/config.ini.tmp", "; half");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/run.ini --device cpu --output %s/k --quiet", dir, dir), 0);
    free(e);
    ck_assert_msg(!exists("k/config.ini.tmp") && exists("k/energy.csv"), "a killed start's folder");
    /* (a temporary without the lock may be anyone's: draft.tmp above) */
    /* metro's own: refused without --overwrite, emptied with it */
    metro_test_write(dir, "u/mine.txt", "x");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/run.ini --device cpu --output %s/u --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "a run directory already exists there"), "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/run.ini --device cpu --output %s/u --quiet --overwrite", dir, dir), 0);
    free(e);
    ck_assert_msg(!exists("u/mine.txt") && exists("u/energy.csv"), "--overwrite of a run directory");
    cleanup();
}
END_TEST

/* An ensemble's folder is locked like any run directory: an ensemble run
 * --overwrite into a directory another run is using is refused and
 * changes nothing (it took over the other run's config.ini); --overwrite
 * clears a former ensemble's system folders (left behind, a single run
 * there resumed them as an ensemble, and 2 systems over 3 could not be
 * resumed at all) */
START_TEST(overwrite_and_ensembles)
{
    fresh_dir();
    metro_test_write(dir, "a.ini", long_chunks_ini, 0.0001);
    pid_t pid = spawn_run_a(0);
    for (int i = 0; i < 1500 && !exists("a/checkpoint.bin"); ++i) usleep(20000);
    char before[512], *old, *e;
    snprintf(before, sizeof before, "%s/a/config.ini", dir);
    old = metro_test_slurp(before);
    metro_test_write(dir, "e.ini", "[run]\nsweeps = 20\nsystems = 2\n[system]\nparticles = 8\n[potential]\n"
                                   "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    const int rc = metro_test_clif(&e, "run %s/e.ini --device cpu --output %s/a --overwrite --quiet", dir, dir);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_msg(rc == 2 && strstr(e, "in use by another metro process"), "exit %d: %s", rc, e);
    free(e);
    char *now = metro_test_slurp(before);
    ck_assert_msg(old && now && !strcmp(old, now), "the running run's config.ini was changed");
    ck_assert_msg(!exists("a/system_000"), "system folders were made in a running run's directory");
    free(old);
    free(now);
    /* 3 systems, then 2 over them, then a single run over those */
    metro_test_write(dir, "e.ini", "[run]\nsweeps = 20\nsystems = 3\n[system]\nparticles = 8\n[potential]\n"
                                   "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    ck_assert_int_eq(metro_test_clif(NULL, "run %s/e.ini --device cpu --output %s/b --quiet", dir, dir), 0);
    ck_assert_int_eq(metro_test_clif(NULL, "run %s/e.ini --set run.systems=2 --device cpu --output %s/b --overwrite "
                                           "--quiet", dir, dir), 0);
    ck_assert_msg(exists("b/system_001") && !exists("b/system_002"), "a former system folder was left");
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/b --set run.sweeps=40 --device cpu --quiet", dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(NULL, "run %s/e.ini --set run.systems=1 --device cpu --output %s/b --overwrite "
                                           "--quiet", dir, dir), 0);
    ck_assert_msg(!exists("b/system_000") && exists("b/checkpoint.bin"), "a single run over an ensemble");
    /* a folder named like a system but not metro's is left alone */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/b/system_2024 && echo x > %s/b/system_2024/notes.txt", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(NULL, "run %s/e.ini --device cpu --output %s/b --overwrite --quiet", dir, dir), 0);
    ck_assert_msg(exists("b/system_2024/notes.txt"), "a user's folder was emptied");
    /* a system folder resumed on its own by another process is not removed
     * by an --overwrite of its ensemble (its run lost its directory) */
    pid = fork();
    if (pid == 0) {
        char bin[512], sys[512];
        snprintf(bin, sizeof bin, "%s/bin/metro", METRO_TEST_BINARY_DIR);
        snprintf(sys, sizeof sys, "%s/b/system_001", dir);
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        execl(bin, "metro", "resume", sys, "--set", "run.sweeps=2000000000", "--device", "cpu", "--quiet", (char *)NULL);
        _exit(127);
    }
    char lock[512];
    snprintf(lock, sizeof lock, "%s/b/system_001/.lock", dir);
    for (int i = 0; i < 1500; ++i) { /* until the resumed run holds its lock */
        int fd = open(lock, O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        const int held = fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
        if (fd >= 0) close(fd);
        if (held) break;
        usleep(20000);
    }
    metro_test_write(dir, "one.ini", "[run]\nsweeps = 20\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                     "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    const int rc2 = metro_test_clif(&e, "run %s/one.ini --device cpu --output %s/b --overwrite --quiet", dir, dir);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_msg(rc2 == 2 && strstr(e, "system_001: in use by another metro process"), "exit %d: %s", rc2, e);
    free(e);
    ck_assert_msg(exists("b/system_001/checkpoint.bin") && exists("b/config.ini"), "the overwrite removed files first");
    cleanup();
}
END_TEST

/* An ensemble's resume whose second system is in use by another process
 * (here this test, holding its lock) is refused before it writes into any
 * system: the first system's config.ini took the resume's --set, and the
 * ensemble, its systems then of different sweeps, could not be resumed */
START_TEST(ensemble_resume_in_use_writes_nothing)
{
    fresh_dir();
    metro_test_write(dir, "en.ini", "[run]\nsweeps = 10\nsystems = 2\n[system]\nparticles = 4\n[potential]\n"
                                    "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *e, path[512];
    ck_assert_int_eq(metro_test_clif(&e, "run %s/en.ini --device cpu --output %s/en --quiet", dir, dir), 0);
    free(e);
    snprintf(path, sizeof path, "%s/en/system_001/.lock", dir);
    const int fd = open(path, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ck_assert_msg(fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0, "cannot lock %s", path);
    snprintf(path, sizeof path, "%s/en/system_000/config.ini", dir);
    char *before = metro_test_slurp(path);
    const int rc = metro_test_clif(&e, "resume %s/en --set run.sweeps=20 --device cpu --quiet", dir);
    ck_assert_msg(rc == 2 && strstr(e, "system_001: in use by another metro process"), "exit %d: %s", rc, e);
    free(e);
    char *after = metro_test_slurp(path);
    ck_assert_msg(before && after && !strcmp(before, after), "the refused resume rewrote %s", path);
    free(before);
    free(after);
    close(fd); /* the lock goes with it: the resume now runs */
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/en --set run.sweeps=20 --device cpu --quiet", dir), 0);
    free(e);
    /* an ensemble whose system has no checkpoint (killed before its
     * first) is started again as a whole: the advice was to run that
     * system alone, which the ensemble then refuses */
    snprintf(path, sizeof path, "rm %s/en/system_001/checkpoint.bin*", dir);
    ck_assert_int_eq(system(path), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/en --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "system_001: no checkpoint.bin to resume from") && strstr(e, "an ensemble resumes as a whole") &&
                      strstr(e, "/en/config.ini --output ") && !strstr(e, "system_001/config.ini"),
                  "%s", e);
    free(e);
    cleanup();
}
END_TEST

/* --dry-run of every shipped config: the resolved config and the work
 * come out, and nothing is created, not even the default run directory.
 * A config of the hierarchical sampler is timed by the sampler's own
 * estimate (cost(), ABI 6), the others by the direct sum's pair terms.
 * A dry run reads a config's initial file as a run would, so a salt.xyz
 * for own_system_salt.ini is written first (as make_salt.py's, without
 * needing ASE: 250 Na and 250 Cl on a rock-salt lattice of spacing 6), and
 * without it that config is refused. */
static void write_salt(const char *path)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "500\nProperties=species:S:1:pos:R:3:charge:R:1\n");
    int na = 0, cl = 0;
    for (int i = -8; i <= 8; ++i)
        for (int j = -8; j <= 8; ++j)
            for (int l = -8; l <= 8; ++l) {
                const int even = ((i + j + l) % 2 + 2) % 2 == 0;
                if (i * i + j * j + l * l > 64 || (even ? na : cl) == 250) continue;
                fprintf(f, "%s %d %d %d %d\n", even ? "Na" : "Cl", 6 * i, 6 * j, 6 * l, even ? 1 : -1);
                ++*(even ? &na : &cl);
            }
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(na == 250 && cl == 250, "the lattice gave %d Na and %d Cl", na, cl);
}

START_TEST(dry_run_creates_nothing)
{
    fresh_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/bin/metro run %s/configs/own_system_salt.ini --dry-run --device cpu >out.txt 2>err.txt; "
             "[ $? = 2 ] && grep -q 'salt.xyz: cannot be read' err.txt || { cat err.txt; exit 1; }; "
             "mv salt.made salt.xyz || exit 1; "
             "for f in %s/configs/*.ini; do %s/bin/metro run $f --dry-run --device cpu >out.txt 2>err.txt || "
             "{ echo \"$f\"; cat err.txt; exit 1; }; grep -q 'the work (dry run' out.txt || { echo \"$f: no plan\"; exit 1; }; "
             "grep -q '^\\[run\\]' out.txt || { echo \"$f: no config\"; exit 1; }; "
             "if grep -q '^plugin = hierarchical' $f; then want=\"the sampler's estimate\"; else want='pair terms/s'; fi; "
             "grep -q \"time per sweep: .*$want\" out.txt || { echo \"$f: not timed by $want\"; exit 1; }; "
             "done; rm out.txt err.txt salt.xyz; "
             "[ -z \"$(ls -A)\" ] || { ls -A; exit 1; }",
             dir, METRO_TEST_BINARY_DIR, METRO_TEST_SOURCE_DIR, METRO_TEST_SOURCE_DIR, METRO_TEST_BINARY_DIR);
    char salt[600];
    snprintf(salt, sizeof salt, "%s/salt.made", dir);
    write_salt(salt);
    ck_assert_int_eq(system(cmd), 0);
    cleanup();
}
END_TEST

/* A resume may extend a run, never cut it below what it has done (the
 * resolved config would describe a shorter run than its results). */
START_TEST(resume_cannot_shorten)
{
    fresh_dir();
    metro_test_write(dir, "s.ini", "[run]\nsweeps = 30\nequilibration = 10\n[system]\nparticles = 4\n[potential]\n"
                        "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/s.ini --device cpu --output %s/s --quiet", dir, dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/s --set run.sweeps=20 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "--set #1 run.sweeps=20: [run] sweeps: 20 would end the run before where it stands (40 sweeps "
                            "done, 10 of them equilibration; allowed: sweeps >= 30"),
                  "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/s --set run.sweeps=35 --device cpu --quiet", dir), 0);
    free(e);
    cleanup();
}
END_TEST

/* A checkpoint that cannot take its name (a directory in its place) fails
 * the run, and the last good one, .prev, stays as it was: it used to be
 * removed before a link that then failed. */
START_TEST(failed_checkpoint_keeps_the_previous)
{
    fresh_dir();
    metro_test_write(dir, "p.ini", "[run]\nsweeps = 30\nequilibration = 10\n[system]\nparticles = 4\n[potential]\n"
                        "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *e, cmd[1024];
    ck_assert_int_eq(metro_test_clif(&e, "run %s/p.ini --device cpu --output %s/p --quiet", dir, dir), 0);
    free(e);
    ck_assert_msg(exists("p/checkpoint.bin.prev"), "no previous checkpoint after a run of several");
    snprintf(cmd, sizeof cmd, "cd %s/p && cp checkpoint.bin.prev ../saved && mv checkpoint.bin ../moved && mkdir checkpoint.bin",
             dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/p --set run.sweeps=60 --device cpu --quiet", dir), 1);
    ck_assert_msg(strstr(e, "checkpoint.bin: cannot be written"), "%s", e);
    free(e);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/p/checkpoint.bin.prev", dir);
    snprintf(b, sizeof b, "%s/saved", dir);
    ck_assert_msg(metro_test_same_file(a, b), "the previous checkpoint was lost or changed");
    cleanup();
}
END_TEST

/* What a resume cannot change: the layout of an ensemble (its folders),
 * nor make a single run one; a missing system folder is named, not
 * quietly left out of the averages. */
START_TEST(resume_keeps_the_layout)
{
    fresh_dir();
    metro_test_write(dir, "en.ini", "[run]\nsweeps = 10\nsystems = 3\n[system]\nparticles = 4\n[potential]\n"
                         "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    metro_test_write(dir, "one.ini", "[run]\nsweeps = 10\n[system]\nparticles = 4\n[potential]\n"
                          "plugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n");
    char *e, cmd[1024];
    ck_assert_int_eq(metro_test_clif(&e, "run %s/en.ini --device cpu --output %s/en --quiet", dir, dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/one.ini --device cpu --output %s/one --quiet", dir, dir), 0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/en --set run.systems=5 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "--set #1 run.systems=5: [run] systems: a resume cannot change it"), "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/one --set run.scan=sampler.temperature:1,2 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "[run] scan: a resume cannot change it"), "%s", e);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/one --set run.output=elsewhere --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "[run] output: a resume cannot change it (a resume continues in the run directory itself)"),
                  "%s", e);
    free(e);
    /* another plugin: named as such (it listed the old plugin's keys as unknown) */
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/one --set sampler.plugin=brush --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "--set #1 sampler.plugin=brush: [sampler] plugin: a resume cannot change it") &&
                      !strstr(e, "unknown key"),
                  "%s", e);
    free(e);
    /* a missing folder is named, in the middle too (that one was counted
     * as the end: "1 system folders are there (system_000 ... system_000)") */
    snprintf(cmd, sizeof cmd, "mv %s/en/system_001 %s/en/away", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/en --set run.sweeps=20 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "an ensemble of 3 systems (its config.ini's first line), but its folder system_001 is missing"),
                  "%s", e);
    free(e);
    snprintf(cmd, sizeof cmd, "mv %s/en/away %s/en/system_001 && rm -r %s/en/system_002", dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/en --set run.sweeps=20 --device cpu --quiet", dir), 2);
    ck_assert_msg(strstr(e, "an ensemble of 3 systems (its config.ini's first line), but its folder system_002 is missing"),
                  "%s", e);
    free(e);
    /* an ensemble made by a --set (its config.ini as given says one system)
     * resumes from its folders */
    ck_assert_int_eq(metro_test_clif(&e, "run %s/one.ini --set run.systems=3 --device cpu --output %s/by_set --quiet", dir,
                                     dir),
                     0);
    free(e);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/by_set --set run.sweeps=20 --device cpu --quiet", dir), 0);
    free(e);
    cleanup();
}
END_TEST

/* A dry run refuses what the run would: an observable's own checks in
 * create() (pair_correlation needs a potential that publishes a cell). */
START_TEST(dry_run_refuses_what_a_run_refuses)
{
    fresh_dir();
    metro_test_write(dir, "obs.ini", "[run]\nsweeps = 10\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                          "[sampler]\nplugin = metropolis\ntemperature = 1\n[observable g]\nplugin = pair_correlation\n");
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/obs.ini --dry-run --device cpu --output %s/obs", dir, dir), 2);
    ck_assert_msg(strstr(e, "obs.ini:10: [observable g] pair_correlation (observable) refused its parameters"), "%s", e);
    free(e);
    ck_assert_msg(!exists("obs"), "a dry run created its directory");
    /* chains that need more monomers than [system] counts give: the run
     * refused them when it laid out the species, the dry run said OK */
    metro_test_write(dir, "ch.ini", "[run]\nsweeps = 10\n[system]\nspecies = m, c\ncharges = -1, 1\n"
                                    "diameters = 0.8\ncounts = 20, 20\nchains = 30\nchain_species = m\n"
                                    "[potential chain]\nplugin = lj_fene\nspecies = m\nr0 = 1\n[potential coulomb]\n"
                                    "plugin = coulomb_hs\ncell_radius = 15\nbjerrum = 2\n"
                                    "[sampler]\nplugin = metropolis\ntemperature = 1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ch.ini --dry-run --device cpu --output %s/ch", dir, dir), 2);
    ck_assert_msg(strstr(e, "[system] chains: the chains need more particles of species m than counts gives it (20)"),
                  "%s", e);
    free(e);
    cleanup();
}
END_TEST

/* The hierarchical sampler's tree is counted before a run starts (its
 * memory()): at 2^23 ions on the CPU the core's state and coulomb_hs's
 * placement grid come to 0.53 GiB, the tree, its packed leaves, a cycle's
 * uniforms and the energy's terms to 0.75 GiB more. */
START_TEST(dry_run_counts_the_tree)
{
    fresh_dir();
    metro_test_write(dir, "h.ini",
                     "[run]\nsweeps = 10\n[system]\nparticles = 8388608\n[potential]\nplugin = coulomb_hs\n"
                     "valences = 3, -1\ndiameters = 7.5\nconcentration = 0.0019008922\nbjerrum = 7.117\n"
                     "[sampler]\nplugin = hierarchical\n");
    char args[512], *out = NULL, *e = NULL;
    snprintf(args, sizeof args, "run %s/h.ini --dry-run --device cpu --output %s/h", dir, dir);
    ck_assert_msg(metro_test_cli(args, &out, &e) == 0, "%s", e);
    const char *m = strstr(out, "; host memory:");
    double gib = 0;
    ck_assert_msg(m && sscanf(m, "; host memory: %lf", &gib) == 1, "%s", out);
    ck_assert_msg(gib > 1.2 && gib < 1.4, "host memory %g GiB, want about 1.28 (without the tree 0.53)", gib);
    free(out);
    free(e);
    ck_assert_msg(!exists("h"), "a dry run created its directory");
    cleanup();
}
END_TEST

int main(void)
{
    /* tests/plugins/writer.so, for output_rules_of_plugins (the runs are
     * child processes: they inherit it) */
    setenv("METRO_PLUGIN_PATH", METRO_TEST_BINARY_DIR "/tests/fake-plugins/obs", 1);
    Suite *s = suite_create("rundir");
    TCase *tc = tcase_create("lose_nothing");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, refused_resume_set_keeps_config);
    tcase_add_test(tc, foreign_checkpoint_refused);
    tcase_add_test(tc, second_process_refused);
    tcase_add_test(tc, sizes_refused_up_front);
    tcase_add_test(tc, refused_run_writes_nothing);
    tcase_add_test(tc, one_writer_a_file);
    tcase_add_test(tc, claims_of_files);
    tcase_add_test(tc, output_rules_of_plugins);
    tcase_add_test(tc, nan_delta_stops_the_run);
    tcase_add_test(tc, extended_resyncs_where_straight_does);
    tcase_add_test(tc, dry_run_links_for_an_arch);
    tcase_add_test(tc, write_error_leaves_no_result);
    tcase_add_test(tc, stale_temporaries_removed);
    tcase_add_test(tc, ignored_write_error_caught_at_commit);
    tcase_add_test(tc, sweep_counts_cannot_overflow);
    tcase_add_test(tc, refusals_name_the_line);
    tcase_add_test(tc, checkpoints_by_wall_time);
    tcase_add_test(tc, signal_twice_checkpoints);
    tcase_add_test(tc, ensemble_stops_after_a_system_ended);
    tcase_add_test(tc, folders_not_metros);
    tcase_add_test(tc, overwrite_and_ensembles);
    tcase_add_test(tc, ensemble_resume_in_use_writes_nothing);
    tcase_add_test(tc, dry_run_creates_nothing);
    tcase_add_test(tc, dry_run_counts_the_tree);
    tcase_add_test(tc, dry_run_refuses_what_a_run_refuses);
    tcase_add_test(tc, resume_cannot_shorten);
    tcase_add_test(tc, failed_checkpoint_keeps_the_previous);
    tcase_add_test(tc, resume_keeps_the_layout);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
