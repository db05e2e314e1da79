/* test_checkpoint — exact restart: a run of 2000 sweeps, and the same run
 * stopped after 1000 and resumed with `metro resume`, end in byte-identical
 * checkpoints and time series.  A damaged checkpoint is refused. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *ini =
    "[run]\nseed = 5\nsweeps = %d\nequilibration = 300\ncheck_every = 100\n\n"
    "[system]\nparticles = 8\n\n[potential]\nplugin = lj_fene\n\n"
    "[sampler]\nplugin = metropolis\ntemperature = 0.6\n\n"
    "[observable energy]\nplugin = energy\nevery = 2\n";

static void write_ini(const char *path, int sweeps)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, ini, sweeps);
    fclose(f);
}

START_TEST(resume_is_exact)
{
    char d[] = "/tmp/metro-ck-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    char path[1024], args[2048], a[1024], b[1024];
    snprintf(path, sizeof path, "%s/full.ini", d);
    write_ini(path, 2000);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/full --quiet", path, d);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);

    snprintf(path, sizeof path, "%s/half.ini", d);
    write_ini(path, 1000);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/split --quiet", path, d);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    char *e;
    snprintf(args, sizeof args, "resume %s/split --set run.sweeps=2000 --device cpu --quiet", d);
    int rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "resume failed: %s", e);
    free(e);

    snprintf(a, sizeof a, "%s/full/checkpoint.bin", d);
    snprintf(b, sizeof b, "%s/split/checkpoint.bin", d);
    ck_assert_msg(metro_test_same_file(a, b), "checkpoints differ: %s %s", a, b);
    snprintf(a, sizeof a, "%s/full/energy.csv", d);
    snprintf(b, sizeof b, "%s/split/energy.csv", d);
    ck_assert_msg(metro_test_same_file(a, b), "time series differ: %s %s", a, b);

    /* a run that ended between two measurements (1001 sweeps, every = 2)
     * extended to 2000 measures where the straight run measures (it went
     * on in steps of `every` from 1001, so at odd sweeps, which no
     * observable is due at: one measurement in all, not 500) */
    snprintf(path, sizeof path, "%s/odd.ini", d);
    write_ini(path, 1001);
    snprintf(args, sizeof args, "run %s --device cpu --output %s/odd --quiet", path, d);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "resume %s/odd --set run.sweeps=2000 --device cpu --quiet", d);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    snprintf(b, sizeof b, "%s/odd/energy.csv", d);
    ck_assert_msg(metro_test_same_file(a, b), "an extended run's time series differs: %s %s", a, b);

    /* resuming a finished run redoes only the results */
    snprintf(args, sizeof args, "analyze %s/split --device cpu --quiet", d);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    ck_assert_msg(metro_test_same_file(a, b), "analyze changed the time series");

    /* a key the plugin marks resumable (energy's max_lag: the ACF's last
     * lag, read at finish() from the saved series) may change at an
     * analyze, and the results use it; one that is not (series) is refused
     * as another chain's, the resumable keys named in the message */
    snprintf(args, sizeof args, "analyze %s/odd --set \"observable energy.max_lag=3\" --device cpu --quiet", d);
    rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "analyze with a new max_lag: %s", e);
    free(e);
    snprintf(b, sizeof b, "%s/odd/energy_acf.csv", d);
    char *acf = metro_test_slurp(b);
    ck_assert_ptr_nonnull(acf);
    int lines = 0;
    for (const char *c = acf; *c; ++c) lines += *c == '\n';
    free(acf);
    ck_assert_int_eq(lines, 1 + 4); /* the header, lags 0 to 3 */
    snprintf(args, sizeof args, "analyze %s/odd --set \"observable energy.series=false\" --device cpu --quiet", d);
    rc = metro_test_cli(args, NULL, &e);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(e, "belongs to another chain") && strstr(e, "series") &&
                      strstr(e, "the keys `metro describe PLUGIN` marks as a resume's to change"),
                  "%s", e);
    free(e);

    /* a damaged checkpoint is not trusted: the previous one takes over,
     * and the run still ends where the straight run ends */
    snprintf(args, sizeof args, "printf 'XXXX' | dd of=%s/split/checkpoint.bin bs=1 seek=100 conv=notrunc status=none", d);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "resume %s/split --device cpu --quiet", d);
    rc = metro_test_cli(args, NULL, &e);
    ck_assert_msg(rc == 0, "resume from the previous checkpoint failed: %s", e);
    ck_assert_msg(strstr(e, "damaged") && strstr(e, "previous checkpoint"), "no warning: %s", e);
    free(e);
    snprintf(a, sizeof a, "%s/full/checkpoint.bin", d);
    snprintf(b, sizeof b, "%s/split/checkpoint.bin", d);
    ck_assert_msg(metro_test_same_file(a, b), "checkpoints differ after the fallback: %s %s", a, b);
    /* and the damaged file did not become the previous one (the next
     * checkpoint renamed it to .prev: a kill before the new one took its
     * name would have left no good checkpoint) */
    snprintf(a, sizeof a, "%s/full/checkpoint.bin.prev", d);
    snprintf(b, sizeof b, "%s/split/checkpoint.bin.prev", d);
    ck_assert_msg(metro_test_same_file(a, b), "the previous checkpoint after the fallback: %s %s", a, b);
    /* both damaged: refused */
    for (int k = 0; k < 2; ++k) {
        snprintf(args, sizeof args, "printf 'XXXX' | dd of=%s/split/checkpoint.bin%s bs=1 seek=100 conv=notrunc status=none",
                 d, k ? ".prev" : "");
        ck_assert_int_eq(system(args), 0);
    }
    snprintf(args, sizeof args, "resume %s/split --device cpu --quiet", d);
    rc = metro_test_cli(args, NULL, &e);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(e, "damaged") != NULL, "%s", e);
    free(e);
    snprintf(args, sizeof args, "rm -rf %s", d);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

/* This program's rename() stands in for libc's (libmetro is a shared
 * library, so its calls come here first) and looks, at each, whether the
 * watched name is there: a kill at that moment would find what it finds. */
static char watched[1100];
static int renames, missing;

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "rename");
    if (watched[0]) {
        ++renames;
        if (access(watched, F_OK) != 0) ++missing;
    }
    return real(from, to);
}

/* Once a run has a checkpoint, checkpoint.bin names a complete one at
 * every moment, also while the next one takes its place and the last one
 * becomes .prev: it used to be renamed to .prev first, and a kill between
 * the two renames left a run that resumed from the older one, with a
 * warning that it was damaged. */
START_TEST(checkpoint_always_there)
{
    metro_sim *sim = metro_test_sim("[run]\nsweeps = 40\n[system]\nparticles = 8\n[potential]\nplugin = lj_fene\n"
                                    "[sampler]\nplugin = metropolis\ntemperature = 1\n",
                                    "cpu", NULL, 0);
    metro_error err = {0};
    ck_assert_msg(metro_sim_advance(sim, 10, &err) == METRO_OK && metro_sim_checkpoint(sim, &err) == METRO_OK, "%s",
                  err.msg);
    snprintf(watched, sizeof watched, "%s/checkpoint.bin", metro_test_run_dir());
    for (int k = 0; k < 3; ++k)
        ck_assert_msg(metro_sim_advance(sim, 10, &err) == METRO_OK && metro_sim_checkpoint(sim, &err) == METRO_OK,
                      "%s", err.msg);
    const int n = renames, gone = missing;
    watched[0] = 0;
    ck_assert_msg(n >= 3, "the checkpoints made %d renames", n);
    ck_assert_msg(gone == 0, "checkpoint.bin was missing at %d of the %d renames of three checkpoints", gone, n);
    char prev[1200], cmd[1300];
    snprintf(prev, sizeof prev, "%s/checkpoint.bin.prev", metro_test_run_dir());
    ck_assert_msg(access(prev, F_OK) == 0, "no %s", prev);
    metro_sim_destroy(sim);
    snprintf(cmd, sizeof cmd, "rm -rf %s", metro_test_run_dir());
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("restart");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, resume_is_exact);
    tcase_add_test(tc, checkpoint_always_there);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
