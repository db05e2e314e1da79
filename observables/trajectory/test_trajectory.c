/* test_trajectory — the trajectory observable through the `metro` program:
 *
 *   - restart: a straight run of 2000 sweeps and the same run stopped at
 *     800, continued past its checkpoint to 1500 (its index moving on the
 *     way), set back to the 800 checkpoint (as a run killed after it would be), its files damaged by
 *     a half-written frame, and resumed to 2000, end with byte-identical
 *     GSD and XYZ files (200 GSD frames: the index moves twice); on the
 *     way, `metro resume` of the set-back run with sweeps = 800 (results
 *     only) restores the 800-sweep files exactly;
 *   - bad parameters are refused, naming the key, before anything runs;
 *   - a failed write (a file-size limit) stops the run naming the file,
 *     and the frames before it read back.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const char *ini =
    "[run]\nseed = 9\nsweeps = %d\nequilibration = 100\ncheck_every = 250\n\n"
    "[system]\nparticles = 10\n\n[potential]\nplugin = lj_fene\n\n"
    "[sampler]\nplugin = metropolis\ntemperature = 0.7\n\n"
    "[observable gsd]\nplugin = trajectory\nevery = 10\n\n"
    "[observable xyz]\nplugin = trajectory\nevery = 50\nformat = xyz\n";

static void write_ini(const char *path, int sweeps)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, ini, sweeps);
    fclose(f);
}

static void run_ok(const char *args)
{
    char *e = NULL;
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "metro %s: exit %d: %s", args, rc, e);
    free(e);
}

static void sh(const char *fmt, const char *d)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, d, d, d, d);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

START_TEST(resume_continues_the_same_files)
{
    char d[] = "/tmp/metro-traj-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    char path[1024], args[2048], a[1024], b[1024];
    snprintf(path, sizeof path, "%s/full.ini", d);
    write_ini(path, 2000);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/full --quiet", path, d);
    run_ok(args);

    snprintf(path, sizeof path, "%s/half.ini", d);
    write_ini(path, 800);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/split --quiet", path, d);
    run_ok(args);
    sh("mkdir %s/ref800 && cp %s/split/checkpoint.bin %s/split/trajectory.* %s/ref800/", d);
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=1500 --device cpu --quiet", d);
    run_ok(args);
    /* as if killed after the 800-sweep checkpoint: frames past it remain,
     * and the last write was cut short */
    sh("cp %s/ref800/checkpoint.bin %s/split/checkpoint.bin && rm -f %s/split/checkpoint.bin.prev", d);
    sh("printf '13\\nLattice=\"1 0 0' >> %s/split/trajectory.xyz && head -c 700 /dev/urandom >> %s/split/trajectory.gsd", d);
    /* a finished run (sweeps = 800 is where the checkpoint is) only redoes
     * its results, and its files must be the 800-sweep run's again: frames
     * past the checkpoint gone, also from the GSD index they had moved */
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=800 --device cpu --quiet", d);
    run_ok(args);
    for (int k = 0; k < 2; ++k) {
        const char *fn[] = {"trajectory.gsd", "trajectory.xyz"};
        snprintf(a, sizeof a, "%s/ref800/%s", d, fn[k]);
        snprintf(b, sizeof b, "%s/split/%s", d, fn[k]);
        ck_assert_msg(metro_test_same_file(a, b), "%s was not cut back to the checkpoint: %s %s", fn[k], a, b);
    }
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=2000 --device cpu --quiet", d);
    run_ok(args);

    const char *files[] = {"trajectory.gsd", "trajectory.xyz", "checkpoint.bin"};
    for (int k = 0; k < 3; ++k) {
        snprintf(a, sizeof a, "%s/full/%s", d, files[k]);
        snprintf(b, sizeof b, "%s/split/%s", d, files[k]);
        ck_assert_msg(metro_test_same_file(a, b), "%s differs between the straight and the resumed run: %s %s", files[k],
                      a, b);
    }
    /* 200 frames of 12 entries: the first index (1024 entries) was
     * outgrown twice, and the file still reads back */
    char *t = NULL;
    snprintf(args, sizeof args, "run %s/full.ini --device cpu --output %s/again --quiet "
             "--set system.initial=%s/full/trajectory.gsd --set system.initial_frame=199", d, d, d);
    int rc = metro_test_cli(args, NULL, &t);
    ck_assert_msg(rc == 0, "frame 199 of the straight run's GSD cannot start a run: %s", t);
    free(t);
    snprintf(args, sizeof args, "run %s/full.ini --device cpu --output %s/again2 --quiet "
             "--set system.initial=%s/full/trajectory.gsd --set system.initial_frame=200", d, d, d);
    rc = metro_test_cli(args, NULL, &t);
    ck_assert_msg(rc == 2 && strstr(t, "holds 200 frames"), "frame 200 must not exist: exit %d: %s", rc, t);
    free(t);
    sh("rm -rf %s", d);
}
END_TEST

/* A write that fails on the writer thread (a file-size limit) stops the
 * run with the file's name and the reason; the frames written before stay
 * whole and readable. */
START_TEST(write_failure_stops_the_run)
{
    char d[] = "/tmp/metro-trajfull-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    char path[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/full.ini", d);
    write_ini(path, 2000);
    /* 64 KiB (ulimit -f counts 512-byte blocks in sh): the GSD header,
     * its first index and 85 frames fit, the larger index the 86th needs
     * does not; no checkpoint before that */
    snprintf(cmd, sizeof cmd, "ulimit -f 128; %s/bin/metro run %s --device cpu --output %s/out --quiet "
             "--set run.check_every=100000 2>%s/err",
             METRO_TEST_BINARY_DIR, path, d, d);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    snprintf(path, sizeof path, "%s/err", d);
    char *e = metro_test_slurp(path);
    ck_assert_msg(e && strstr(e, "trajectory.gsd: cannot be written: File too large") && strstr(e, "[observable gsd]"),
                  "%s", e);
    free(e);
    snprintf(cmd, sizeof cmd, "run %s/full.ini --device cpu --output %s/again --quiet --set system.initial=%s/out/trajectory.gsd",
             d, d, d);
    e = NULL;
    int rc = metro_test_cli(cmd, NULL, &e);
    ck_assert_msg(rc == 0, "the frames before the failure do not read back: %s", e);
    free(e);
    sh("rm -rf %s", d);
}
END_TEST

/* A config whose trajectory section has `extra`: refused with `want`. */
static void refused(const char *extra, const char *want)
{
    char d[] = "/tmp/metro-trajbad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    char path[1024], args[2048];
    snprintf(path, sizeof path, "%s/bad.ini", d);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[run]\nsweeps = 10\n[system]\nparticles = 4\n[potential]\nplugin = lj_fene\n"
               "[sampler]\nplugin = parallel_tempering\nreplicas = 3\n"
               "[observable t]\nplugin = trajectory\n%s\n", extra);
    fclose(f);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/out --quiet", path, d);
    char *e = NULL;
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 2 && strstr(e, want) && strstr(e, "bad.ini:"), "'%s': exit %d, wanted '%s' in: %s", extra, rc,
                  want, e);
    free(e);
    snprintf(args, sizeof args, "%s/out", d);
    ck_assert_msg(access(args, F_OK) != 0, "a refused run created %s", args);
    sh("rm -rf %s", d);
}

START_TEST(bad_parameters)
{
    refused("replicas = 3", "replicas: 3 does not exist (allowed: 0 to 2)");
    refused("slots = 0, 0", "slots: 0 is listed twice");
    refused("replicas = 0\nslots = 1", "give one of them, not both");
    refused("replicas = one", "is not 'all' or a comma-separated list");
    refused("format = xyz\nfile = t.gsd", "file: 't.gsd' has the extension of another format");
    /* extensions in any case, as the reader takes them (t.GSD was written as t.GSD.gsd) */
    refused("format = xyz\nfile = t.GSD", "file: 't.GSD' has the extension of another format");
    /* two sections naming one file in different words: refused before the
     * run (they had run until the second wrote its first frame, exit 1) */
    refused("file = trajectory\n[observable u]\nplugin = trajectory",
            "[observable u] trajectory (observable) refused its parameters: 'trajectory.gsd' is written by [observable t] already");
    refused("replicas = 0, 1\nfile = movie.gsd\n[observable u]\nplugin = trajectory\nfile = movie_r1.gsd",
            "'movie_r1.gsd' is written by [observable t] already");
    refused("file = a\n[observable u]\nplugin = trajectory\nfile = a.gsd", "'a.gsd' is written by [observable t] already");
    refused("file = ../t.gsd", "file: '../t.gsd' is not a plain file name");
    refused("format = pdb", "format");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trajectory");
    TCase *tc = tcase_create("restart");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, resume_continues_the_same_files);
    tcase_add_test(tc, bad_parameters);
    tcase_add_test(tc, write_failure_stops_the_run);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
