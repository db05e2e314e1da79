/* test_ensemble — many systems in one process ([run] systems / scan): each
 * system is, byte for byte, the separate run with its seed (or scanned
 * value); the combined tables hold the mean and error across systems; an
 * ensemble resumes; a bad system is refused before anything is written.
 * With a GPU (tests/test_ensemble_gpu.c runs the same body) the systems
 * run on concurrent CUDA streams and must still equal separate runs. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#ifndef DEVICE
#define DEVICE "cpu"
#endif

static char dir[64];

static const char *brush_ini =
    "[run]\nseed = 11\nsweeps = %d\nequilibration = 5\ncheck_every = 4\n%s\n[system]\nparticles = 256\n"
    "[potential]\nplugin = coulomb_hs\nvalences = 3,-1\ndiameters = 4,4\nconcentration = 0.05\n"
    "[sampler]\nplugin = brush\n\n[observable energy]\nplugin = energy\nevery = 1\n";

static void same(const char *a, const char *b)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    ck_assert_msg(metro_test_same_file(pa, pb), "%s and %s differ", pa, pb);
}

static void setup_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/metro-ens-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void cleanup(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(systems_equal_separate_runs)
{
    setup_dir();
    char *e;
    metro_test_write(dir, "ens.ini", brush_ini, 12, "systems = 4\n");
    int rc = metro_test_clif(&e, "run %s/ens.ini --device " DEVICE " --output %s/ens --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
#ifdef METRO_TEST_GPU
    /* on CUDA the four brush systems ran in shared launches */
    for (int k = 0; k < 4; ++k) {
        char lp[512];
        snprintf(lp, sizeof lp, "%s/ens/system_%03d/log.txt", dir, k);
        char *log = metro_test_slurp(lp);
        ck_assert_msg(log && strstr(log, "shares its launches with 3 other systems"), "%s: no shared launches", lp);
        free(log);
    }
#endif
    for (int k = 0; k < 4; ++k) {
        rc = metro_test_clif(&e, "run %s/ens.ini --set run.systems=1 --set run.seed=%d --device " DEVICE " --output %s/alone%d --quiet",
                 dir, 11 + k, dir, k);
        ck_assert_msg(rc == 0, "%s", e);
        free(e);
        char a[64], b[64];
        const char *files[] = {"energy.csv", "energy_stats.csv", "acceptance.csv", "checkpoint.bin"};
        for (int f = 0; f < 4; ++f) {
            snprintf(a, sizeof a, "ens/system_%03d/%s", k, files[f]);
            snprintf(b, sizeof b, "alone%d/%s", k, files[f]);
            same(a, b);
        }
    }
    /* the combined table: one row per slot, mean and error across systems */
    char p[512];
    snprintf(p, sizeof p, "%s/ens/ensemble_energy_stats.csv", dir);
    double m = metro_test_csv(p, 0, "E_mean"), err = metro_test_csv(p, 0, "E_mean_err_across");
    double mean = 0, v[4];
    for (int k = 0; k < 4; ++k) {
        snprintf(p, sizeof p, "%s/alone%d/energy_stats.csv", dir, k);
        v[k] = metro_test_csv(p, 0, "E_mean");
        mean += v[k] / 4;
    }
    double var = 0;
    for (int k = 0; k < 4; ++k) var += (v[k] - mean) * (v[k] - mean) / 3;
    ck_assert_msg(fabs(m - mean) < 1e-8 * fabs(mean) && fabs(err - sqrt(var / 4)) < 1e-3 * err,
                  "combined %g +- %g, expected %g +- %g", m, err, mean, sqrt(var / 4));
    /* resume: stopped at 12 cycles, extended to 20, equals straight 20 */
    metro_test_write(dir, "long.ini", brush_ini, 20, "systems = 4\n");
    rc = metro_test_clif(&e, "run %s/long.ini --device " DEVICE " --output %s/long --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    rc = metro_test_clif(&e, "resume %s/ens --set run.sweeps=20 --device " DEVICE " --quiet", dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    for (int k = 0; k < 4; ++k) {
        char a[64], b[64];
        snprintf(a, sizeof a, "ens/system_%03d/energy.csv", k);
        snprintf(b, sizeof b, "long/system_%03d/energy.csv", k);
        same(a, b);
    }
    cleanup();
}
END_TEST

START_TEST(scan_equals_separate_runs)
{
    setup_dir();
    char *e;
    metro_test_write(dir, "scan.ini", brush_ini, 8, "scan = potential.concentration: 0.02, 0.08\n");
    int rc = metro_test_clif(&e, "run %s/scan.ini --device " DEVICE " --output %s/scan --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    rc = metro_test_clif(&e, "run %s/scan.ini --set run.scan= --set potential.concentration=0.08 --device " DEVICE
                 " --output %s/alone --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    same("scan/system_001/energy.csv", "alone/energy.csv");
    char p[512];
    snprintf(p, sizeof p, "%s/scan/scan_energy_stats.csv", dir);
    ck_assert_double_eq_tol(metro_test_csv(p, 1, "potential.concentration"), 0.08, 1e-12);
    snprintf(p, sizeof p, "%s/alone/energy_stats.csv", dir);
    double alone = metro_test_csv(p, 0, "E_mean");
    snprintf(p, sizeof p, "%s/scan/scan_energy_stats.csv", dir);
    ck_assert_double_eq_tol(metro_test_csv(p, 1, "E_mean"), alone, 1e-9 * fabs(alone));
    /* a scan of one value is that value's run (it was run at the config's
     * own value, as a single run, without a word) */
    metro_test_write(dir, "one.ini", brush_ini, 8, "scan = potential.concentration: 0.08\n");
    rc = metro_test_clif(&e, "run %s/one.ini --device " DEVICE " --output %s/one --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    same("one/system_000/energy.csv", "alone/energy.csv");
    cleanup();
}
END_TEST

static int exists_in(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return access(p, F_OK) == 0;
}

/* The ensemble's own config.ini is its resolved config, --set overrides
 * and all: re-run as is it is the same ensemble, a scan given by --set
 * stays a scan when resumed, and an extension is recorded there (the
 * config as given, its overrides as comments, ran another ensemble and
 * resumed a scan as an ensemble).  A resume may not set the scanned key
 * for all, nor combine a system extended on its own with the others. */
START_TEST(ensemble_config_is_the_ensemble)
{
    setup_dir();
    char *e, p[512];
    metro_test_write(dir, "base.ini", brush_ini, 6, "");
    int rc = metro_test_clif(&e, "run %s/base.ini --set run.systems=2 --set potential.concentration=0.08 --device " DEVICE
                             " --output %s/a --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    rc = metro_test_clif(&e, "run %s/a/config.ini --output %s/again --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    same("a/system_001/energy.csv", "again/system_001/energy.csv");
    same("a/ensemble_energy_stats.csv", "again/ensemble_energy_stats.csv");
    /* extended together: the top config says so; one system alone: refused */
    rc = metro_test_clif(&e, "resume %s/a --set run.sweeps=9 --quiet", dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/a/config.ini", dir);
    char *top = metro_test_slurp(p);
    ck_assert_msg(top && strstr(top, "\nsweeps = 9\n") && strstr(top, "\nsystems = 2\n") &&
                      strstr(top, "\ndevice = " DEVICE "\n"),
                  "%s", top);
    free(top);
    rc = metro_test_clif(&e, "resume %s/a/system_001 --set run.sweeps=12 --quiet", dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    rc = metro_test_clif(&e, "resume %s/a --quiet", dir);
    ck_assert_msg(rc == 2 && strstr(e, "system_001: runs 12 sweeps, system_000 9: an ensemble's systems run alike"),
                  "exit %d: %s", rc, e);
    free(e);
    /* a scan given by --set: resumed (here: its results redone) it stays
     * one; its key spaced is the key (run . sweeps was refused as systems
     * of different sweeps, and the spaced key slipped past the resume's
     * check) */
    rc = metro_test_clif(&e, "run %s/base.ini --set \"run.scan=run . sweeps: 4, 6\" --device " DEVICE
                             " --output %s/s --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/s/scan_energy_stats.csv", dir);
    unlink(p);
    rc = metro_test_clif(&e, "resume %s/s --quiet", dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    ck_assert_msg(exists_in("s/scan_energy_stats.csv") && !exists_in("s/ensemble_energy_stats.csv"),
                  "the scan was resumed as an ensemble");
    ck_assert_double_eq(metro_test_csv(p, 1, "run.sweeps"), 6);
    /* sweeps a resume may change, but not the scanned ones for all, however
     * the --set is spaced */
    rc = metro_test_clif(&e, "resume %s/s --set run.sweeps=9 --quiet", dir);
    ck_assert_msg(rc == 2 && strstr(e, "the ensemble scans run.sweeps (each system its own value)"), "exit %d: %s", rc, e);
    free(e);
    rc = metro_test_clif(&e, "resume %s/s --set \" run.sweeps =9\" --quiet", dir);
    ck_assert_msg(rc == 2 && strstr(e, "the ensemble scans run.sweeps"), "exit %d: %s", rc, e);
    free(e);
    /* an ensemble whose initial file has moved away is extended all the
     * same (its whole config, made again for config.ini, could not read
     * it; the resume does not need it) */
    metro_test_write(dir, "chain.xyz", "3\n\nC 0 0 0\nC 0.7 0 0\nC 1.4 0 0\n");
    metro_test_write(dir, "chain.ini", "[run]\nsweeps = 10\nsystems = 2\n[system]\nparticles = 3\ninitial = %s/chain.xyz\n"
                     "[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\n", dir);
    rc = metro_test_clif(&e, "run %s/chain.ini --device " DEVICE " --output %s/c --quiet", dir, dir);
    ck_assert_msg(rc == 0, "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/chain.xyz", dir);
    unlink(p);
    rc = metro_test_clif(&e, "resume %s/c --set run.sweeps=20 --quiet", dir);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    free(e);
    cleanup();
}
END_TEST

/* A combined table keeps every column in its place where a system's CSV
 * has an empty field (electrostatics.csv: no paper value for these ions);
 * the columns after it had slid one to the left (docs/results were
 * written so until 2026-11-29) */
START_TEST(combined_table_keeps_empty_fields)
{
    setup_dir();
    char *e;
    metro_test_write(dir, "ions.ini",
                     "[run]\nseed = 7\nsweeps = 300\nequilibration = 100\nsystems = 2\n[system]\nparticles = 2\n"
                     "[potential]\nplugin = coulomb_hs\nvalences = 1, -1\ndiameters = 4\ncell_radius = 12\n"
                     "bjerrum = 7.117\n[sampler]\nplugin = brush\nstep = 12\n[observable g]\n"
                     "plugin = pair_correlation\nwall_margin = 8\nbins = 12\npotential = false\nplots = false\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/ions.ini --device cpu --output %s/ions --quiet", dir, dir), 0);
    free(e);
    char p[512];
    double sum = 0;
    for (int i = 0; i < 2; ++i) {
        snprintf(p, sizeof p, "%s/ions/system_%03d/electrostatics.csv", dir, i);
        sum += metro_test_csv(p, 0, "stat_error");
    }
    ck_assert_msg(sum > 0, "no statistical error to compare");
    snprintf(p, sizeof p, "%s/ions/ensemble_electrostatics.csv", dir);
    ck_assert_double_eq_tol(metro_test_csv(p, 0, "stat_error"), sum / 2, 1e-9 * sum);
    ck_assert_msg(metro_test_csv(p, 0, "window_error") == 0, "window_error moved");
    cleanup();
}
END_TEST

/* The combined tables are the systems' as they stand: a scan writes its
 * systems' rows whatever their number (a scan over energy.every lost
 * scan_energy.csv without a word); K systems whose tables differ in rows
 * are not averaged and say so; and a table no longer combined (energy.csv
 * grown past 4096 rows by an extension) goes, rather than stay beside the
 * new ones as the shorter run's */
START_TEST(combined_tables_as_the_systems_stand)
{
    setup_dir();
    char *e;
    metro_test_write(dir, "every.ini", brush_ini, 12, "scan = observable energy.every: 1, 2\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/every.ini --device " DEVICE " --output %s/every --quiet", dir, dir), 0);
    free(e);
    char p[512];
    snprintf(p, sizeof p, "%s/every/scan_energy.csv", dir);
    char *text = metro_test_slurp(p);
    ck_assert_msg(text != NULL, "%s is missing", p);
    int lines = 0;
    for (const char *c = text; *c; ++c) lines += *c == '\n';
    free(text);
    ck_assert_int_eq(lines, 1 + 12 + 6);
    metro_test_write(dir, "two.ini", brush_ini, 8, "systems = 2\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/two.ini --device " DEVICE " --output %s/two --quiet", dir, dir), 0);
    free(e);
    struct stat sb;
    snprintf(p, sizeof p, "%s/two/ensemble_energy.csv", dir);
    ck_assert_msg(stat(p, &sb) == 0, "%s is missing", p);
    ck_assert_int_eq(metro_test_clif(&e, "resume %s/two --set run.sweeps=4200 --device " DEVICE " --quiet", dir), 0);
    free(e);
    ck_assert_msg(stat(p, &sb) != 0, "%s stayed from the shorter run", p);
    snprintf(p, sizeof p, "%s/two/ensemble_energy_stats.csv", dir);
    ck_assert_msg(stat(p, &sb) == 0, "%s is missing", p);
    /* the ACF's length is each system's own (its window): the lags every
     * system has are averaged (the table was left out, with a warning at
     * every run of the defaults) */
    int rows[3];
    for (int i = 0; i < 3; ++i) {
        if (i < 2) snprintf(p, sizeof p, "%s/two/system_%03d/energy_acf.csv", dir, i);
        else snprintf(p, sizeof p, "%s/two/ensemble_energy_acf.csv", dir);
        char *t = metro_test_slurp(p);
        ck_assert_msg(t != NULL, "%s is missing", p);
        rows[i] = 0;
        for (const char *c = t; *c; ++c) rows[i] += *c == '\n';
        free(t);
    }
    printf("energy_acf.csv: %d and %d lines, ensemble_energy_acf.csv %d\n", rows[0], rows[1], rows[2]);
    ck_assert_int_eq(rows[2], rows[0] < rows[1] ? rows[0] : rows[1]);
    cleanup();
}
END_TEST

/* The host memory of a dry run's plan ("; host memory: X GiB"), -1 if none */
static double planned_gib(const char *args)
{
    char *out = NULL, *e = NULL;
    double gib = -1;
    if (metro_test_cli(args, &out, &e) == 0 && out) {
        const char *p = strstr(out, "; host memory:");
        if (p) gib = strtod(p + strlen("; host memory:"), NULL);
    }
    free(out);
    free(e);
    return gib;
}

/* An ensemble's systems run at once, so together they must fit: two that
 * each fit the machine but not both are refused up front (each alone
 * passed, and the run would have been killed for memory partway) */
START_TEST(systems_fit_together)
{
    setup_dir();
    const double limit = metro_test_machine_gib();
    metro_test_write(dir, "pt.ini", "[run]\nsweeps = 10\n[system]\nparticles = 1000\n[potential]\nplugin = lj_fene\n"
                                    "[sampler]\nplugin = parallel_tempering\nreplicas = 100\n");
    char args[1024];
    snprintf(args, sizeof args, "run %s/pt.ini --device cpu --set sampler.ladders=1000 --dry-run", dir);
    const double g1 = planned_gib(args);
    snprintf(args, sizeof args, "run %s/pt.ini --device cpu --set sampler.ladders=2000 --dry-run", dir);
    const double g2 = planned_gib(args), per = (g2 - g1) / 1000;
    ck_assert_msg(g1 > 0 && per > 0, "no plan: %g, %g GiB", g1, g2);
    const long ladders = (long)(0.6 * limit / per); /* one system: 60% of the machine */
    char *e;
    ck_assert_int_eq(metro_test_clif(&e, "run %s/pt.ini --device cpu --set sampler.ladders=%ld --dry-run", dir, ladders), 0);
    free(e);
    const int rc = metro_test_clif(&e, "run %s/pt.ini --device cpu --set sampler.ladders=%ld --set run.systems=2 "
                                       "--dry-run", dir, ladders);
    ck_assert_msg(rc == 2 && strstr(e, "the 2 systems this process runs at once need"), "exit %d: %s", rc, e);
    free(e);
    cleanup();
}
END_TEST

START_TEST(bad_system_writes_nothing)
{
    setup_dir();
    char *e;
    /* the second value is out of range: refused before any system starts */
    metro_test_write(dir, "scan.ini", brush_ini, 8, "scan = potential.concentration: 0.02, -1\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/scan.ini --device " DEVICE " --output %s/scan --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "concentration") && strstr(e, "system_001"), "%s", e);
    free(e);
    metro_test_write(dir, "bad.ini", brush_ini, 8, "scan = concentration 0.02\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/bad.ini --device " DEVICE " --output %s/bad --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "SECTION.KEY") != NULL, "%s", e);
    free(e);
    /* a scan of a section the config does not have (it was "[potential x]
     * plugin: required but not given") */
    metro_test_write(dir, "nosec.ini", brush_ini, 8, "scan = potential x.bjerrum: 1, 2\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/nosec.ini --device " DEVICE " --output %s/nosec --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "[run] scan: the config has no section [potential x] to scan a key of"), "%s", e);
    free(e);
    metro_test_write(dir, "both.ini", brush_ini, 8, "systems = 3\nscan = potential.concentration: 0.02, 0.03\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/both.ini --device " DEVICE " --output %s/both --quiet", dir, dir), 2);
    free(e);
    /* the second system cannot be placed (volume fraction 0.65), which
     * only its start finds, after the first system's folder was made:
     * nothing stays (the folder blocked the next run as a run directory) */
    metro_test_write(dir, "dense.ini", brush_ini, 8, "scan = potential.concentration: 0.05, 8\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/dense.ini --device " DEVICE " --output %s/dense --quiet", dir, dir), 2);
    ck_assert_msg(strstr(e, "could not place") && strstr(e, "system_001"), "%s", e);
    free(e);
    struct stat sb;
    char p[512];
    const char *names[] = {"scan", "bad", "both", "dense"};
    for (int i = 0; i < 4; ++i) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        ck_assert_msg(stat(p, &sb) != 0, "%s was created", p);
    }
    /* that clean-up takes only what the failed run made: an --overwrite
     * refused before it wrote anything (a system folder holds a folder of
     * the user's) leaves the old ensemble as it was (its config.ini and
     * tables went) */
    metro_test_write(dir, "two.ini", brush_ini, 8, "systems = 2\n");
    ck_assert_int_eq(metro_test_clif(&e, "run %s/two.ini --device " DEVICE " --output %s/two --quiet", dir, dir), 0);
    free(e);
    snprintf(p, sizeof p, "%s/two/system_001/mine", dir);
    ck_assert_int_eq(mkdir(p, 0777), 0);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/two.ini --device " DEVICE " --output %s/two --overwrite --quiet", dir, dir),
                     2);
    ck_assert_msg(strstr(e, "holds a folder of its own"), "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/two/config.ini", dir);
    ck_assert_msg(stat(p, &sb) == 0, "the refused --overwrite removed %s", p);
    /* an --overwrite whose second system cannot be placed leaves the
     * former ensemble's results as they were, as a single run's refusal
     * does (the folder was emptied before the systems started) */
    snprintf(p, sizeof p, "%s/two/system_001/mine", dir);
    ck_assert_int_eq(rmdir(p), 0);
    ck_assert_int_eq(metro_test_clif(&e, "run %s/dense.ini --device " DEVICE " --output %s/two --overwrite --quiet", dir,
                                     dir), 2);
    ck_assert_msg(strstr(e, "could not place"), "%s", e);
    free(e);
    const char *kept[] = {"config.ini", "ensemble_energy_stats.csv", "system_000/energy.csv", "system_001/checkpoint.bin"};
    for (int i = 0; i < 4; ++i) {
        snprintf(p, sizeof p, "%s/two/%s", dir, kept[i]);
        ck_assert_msg(stat(p, &sb) == 0, "the refused --overwrite removed %s", p);
    }
    cleanup();
}
END_TEST

int main(void)
{
#ifdef METRO_TEST_GPU
    METRO_TEST_REQUIRE_GPU();
#endif
    Suite *s = suite_create("ensemble");
    TCase *tc = tcase_create(DEVICE);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, systems_equal_separate_runs);
    tcase_add_test(tc, scan_equals_separate_runs);
    tcase_add_test(tc, ensemble_config_is_the_ensemble);
    tcase_add_test(tc, combined_table_keeps_empty_fields);
    tcase_add_test(tc, combined_tables_as_the_systems_stand);
    tcase_add_test(tc, systems_fit_together);
    tcase_add_test(tc, bad_system_writes_nothing);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
