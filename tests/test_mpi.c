/* test_mpi — runs over MPI ranks (a -DMETRO_MPI=ON build, mpirun on PATH):
 *
 *  - parallel tempering with its replicas spread over 1, 2 and 4 ranks
 *    writes the same bytes (every result and the checkpoint) as one
 *    process of the plain build;
 *  - a run stopped on 2 ranks and resumed on 4 ends as the straight run;
 *  - an ensemble whose systems are spread over 3 ranks writes what one
 *    process writes.
 *
 * Skipped ("skipped: no MPI") in a build without MPI or without mpirun. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char dir[64];

static const char *pt_ini =
    "[run]\nseed = 21\nsweeps = %d\nequilibration = 200\ncheck_every = 300\n%s\n"
    "[system]\nparticles = 13\n\n[potential]\nplugin = lj_fene\n\n"
    "[sampler]\nplugin = parallel_tempering\nt_min = 0.3\nt_max = 2\nreplicas = 7\nladders = 3\nexchange_every = 10\n\n"
    "[observable energy]\nplugin = energy\nevery = 10\n\n[observable shape]\nplugin = polymer_shape\nevery = 10\n"
    "reweight = false\nplots = false\n";

/* metro on `ranks` ranks (0: without mpirun); its status */
static int mpi(int ranks, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int mpi(int ranks, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    if (ranks)
        snprintf(cmd, sizeof cmd,
                 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                 "mpirun --oversubscribe -np %d %s/bin/metro %s >>%s/log.txt 2>&1",
                 ranks, METRO_TEST_BINARY_DIR, args, dir);
    else
        snprintf(cmd, sizeof cmd, "%s/bin/metro %s >>%s/log.txt 2>&1", METRO_TEST_BINARY_DIR, args, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void same_dirs(const char *a, const char *b)
{
    char cmd[2048];
    /* every result, and the checkpoint; not the log (times) or config.ini
     * (its time stamp) */
    snprintf(cmd, sizeof cmd,
             "cd %s/%s && for f in *.csv checkpoint.bin; do cmp -s $f %s/%s/$f || { echo \"$f differs\"; exit 1; }; done",
             dir, a, dir, b);
    ck_assert_msg(system(cmd) == 0, "%s and %s differ (see above)", a, b);
}

static void setup_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/metro-mpi-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

START_TEST(rank_count_does_not_change_the_chain)
{
    setup_dir();
    metro_test_write(dir, "pt.ini", pt_ini, 1200, "");
    ck_assert_int_eq(mpi(0, "run %s/pt.ini --device cpu --output %s/one --quiet", dir, dir), 0);
    for (int r = 1; r <= 4; r *= 2) {
        char name[16];
        snprintf(name, sizeof name, "r%d", r);
        ck_assert_msg(mpi(r, "run %s/pt.ini --device cpu --output %s/%s --quiet", dir, dir, name) == 0,
                      "%d ranks failed: see %s/log.txt", r, dir);
        same_dirs("one", name);
    }
    /* stopped on 2 ranks, resumed on 4 */
    metro_test_write(dir, "half.ini", pt_ini, 600, "");
    ck_assert_int_eq(mpi(2, "run %s/half.ini --device cpu --output %s/split --quiet", dir, dir), 0);
    ck_assert_int_eq(mpi(4, "resume %s/split --set run.sweeps=1200 --device cpu --quiet", dir), 0);
    same_dirs("one", "split");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* With a GPU: the same on CUDA, two ranks (on one GPU, or one each). */
START_TEST(rank_count_on_the_gpu)
{
    if (!metro_test_have_gpu()) {
        printf("rank_count_on_the_gpu: skipped: no CUDA device\n");
        return;
    }
    setup_dir();
    metro_test_write(dir, "pt.ini", pt_ini, 1200, "");
    ck_assert_int_eq(mpi(0, "run %s/pt.ini --device cuda --output %s/one --quiet", dir, dir), 0);
    ck_assert_msg(mpi(2, "run %s/pt.ini --device cuda --output %s/r2 --quiet", dir, dir) == 0, "see %s/log.txt", dir);
    same_dirs("one", "r2");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(ensemble_over_ranks)
{
    setup_dir();
    metro_test_write(dir, "ens.ini", pt_ini, 400, "systems = 5\n");
    ck_assert_int_eq(mpi(0, "run %s/ens.ini --device cpu --output %s/one --quiet", dir, dir), 0);
    ck_assert_msg(mpi(3, "run %s/ens.ini --device cpu --output %s/three --quiet", dir, dir) == 0, "see %s/log.txt", dir);
    for (int k = 0; k < 5; ++k) {
        char a[64], b[64];
        snprintf(a, sizeof a, "one/system_%03d", k);
        snprintf(b, sizeof b, "three/system_%03d", k);
        same_dirs(a, b);
    }
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/one/ensemble_energy_stats.csv", dir);
    snprintf(b, sizeof b, "%s/three/ensemble_energy_stats.csv", dir);
    ck_assert_msg(metro_test_same_file(a, b), "combined tables differ");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* An ensemble whose second system cannot be placed (only its start finds
 * that, on rank 1, after rank 0 made the ensemble's folder and its own
 * system's): every rank takes its part away, so nothing stays to block the
 * next run (over MPI the first rank to fail aborted the others, and the
 * folders stayed, one with a half-written config.ini.tmp); a folder that
 * was there before stays, empty */
START_TEST(failed_ensemble_leaves_nothing)
{
    setup_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/dense.ini", dir);
    metro_test_write(dir, "dense.ini", "[run]\nseed = 11\nsweeps = 8\nequilibration = 5\nscan = potential.concentration: "
                                       "0.05, 8\n[system]\nparticles = 256\n[potential]\nplugin = coulomb_hs\nvalences = "
                                       "3,-1\ndiameters = 4,4\n[sampler]\nplugin = brush\n");
    struct stat sb;
    char out[96];
    for (int ranks = 2; ranks <= 3; ++ranks) {
        ck_assert_int_ne(mpi(ranks, "run %s --device cpu --output %s/dense --quiet", path, dir), 0);
        snprintf(out, sizeof out, "%s/dense", dir);
        ck_assert_msg(stat(out, &sb) != 0, "%d ranks left %s behind", ranks, out);
    }
    ck_assert_int_eq(mkdir(out, 0777), 0);
    ck_assert_int_ne(mpi(2, "run %s --device cpu --output %s --quiet", path, out), 0);
    snprintf(path, sizeof path, "%s/system_000", out);
    ck_assert_msg(stat(out, &sb) == 0 && stat(path, &sb) != 0, "the folder given went, or system_000 stayed");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* An ensemble extended over 2 ranks whose system on rank 1 fails (the test
 * potential nanpot: total() NaN from its 7th call in a process, which the
 * extension's energy checks reach): rank 0 finished its own system, but
 * the combined table is not rewritten from a system that did not finish
 * (rank 0 combined whatever lay in the folders: the failed system's former
 * results beside the new ones) */
START_TEST(combined_only_when_every_rank_finished)
{
    setup_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/nan.ini", dir);
    metro_test_write(dir, "nan.ini", "[run]\nseed = 3\nsweeps = 8\nequilibration = 0\nscan = potential.nan_total: 0, 7\n"
                                     "[system]\nparticles = 8\n[potential]\nplugin = nanpot\nbad = -1\n[sampler]\n"
                                     "plugin = metropolis\ntemperature = 1\n[observable energy]\nplugin = energy\n");
    ck_assert_int_eq(mpi(2, "run %s --device cpu --output %s/nan --quiet", path, dir), 0);
    char table[256], before[256];
    snprintf(table, sizeof table, "%s/nan/scan_energy_stats.csv", dir);
    snprintf(before, sizeof before, "%s/before.csv", dir);
    char *text = metro_test_slurp(table);
    ck_assert_ptr_nonnull(text);
    metro_test_write(dir, "before.csv", "%s", text);
    free(text);
    ck_assert_int_ne(mpi(2, "resume %s/nan --set run.sweeps=4096 --device cpu --quiet", dir), 0);
    ck_assert_msg(metro_test_same_file(table, before), "%s was rewritten though system_001 failed", table);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The host memory a dry run of one process plans ("; host memory: X GiB") */
static double planned_gib(const char *ini, long ladders)
{
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd, "%s/bin/metro run %s --device cpu --set sampler.ladders=%ld --dry-run 2>/dev/null",
             METRO_TEST_BINARY_DIR, ini, ladders);
    FILE *p = popen(cmd, "r");
    double gib = -1;
    while (p && fgets(line, sizeof line, p))
        if (!strncmp(line, "; host memory:", 14)) gib = strtod(line + 14, NULL);
    if (p) pclose(p);
    return gib;
}

/* The ranks on one host share its memory: two systems of 60% of it on two
 * ranks of this host are refused (each rank counted its own system, and
 * they were accepted), and two of 40% on four ranks fit (each rank counted
 * the ensemble's first system as a run spread over the host's four ranks,
 * and they were refused) */
START_TEST(ensemble_memory_is_the_hosts)
{
    setup_dir();
    const double limit = metro_test_machine_gib();
    char ini[256];
    snprintf(ini, sizeof ini, "%s/pt.ini", dir);
    metro_test_write(dir, "pt.ini", "[run]\nsweeps = 10\n[system]\nparticles = 1000\n[potential]\nplugin = lj_fene\n"
                                    "[sampler]\nplugin = parallel_tempering\nreplicas = 100\n");
    const double g1 = planned_gib(ini, 1000), g2 = planned_gib(ini, 2000), per = (g2 - g1) / 1000;
    ck_assert_msg(g1 > 0 && per > 0, "no plan: %g, %g GiB", g1, g2);
    ck_assert_int_eq(mpi(2, "run %s --device cpu --set sampler.ladders=%ld --set run.systems=2 --dry-run", ini,
                         (long)(0.6 * limit / per)),
                     2);
    char *log = NULL, path[256];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    log = metro_test_slurp(path);
    ck_assert_msg(log && strstr(log, "the systems this host's 2 MPI ranks run at once (1 in this process) need"), "%s",
                  log ? log : "(no log)");
    free(log);
    ck_assert_int_eq(mpi(4, "run %s --device cpu --set sampler.ladders=%ld --set run.systems=2 --dry-run", ini,
                         (long)(0.4 * limit / per)),
                     0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
#ifndef METRO_MPI
    (void)rank_count_does_not_change_the_chain, (void)ensemble_over_ranks, (void)rank_count_on_the_gpu,
        (void)failed_ensemble_leaves_nothing, (void)combined_only_when_every_rank_finished,
        (void)ensemble_memory_is_the_hosts;
    printf("skipped: no MPI (configure with -DMETRO_MPI=ON)\n");
    return 77;
#else
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: no MPI (mpirun is not on PATH)\n");
        return 77;
    }
    /* the test potential nanpot (tests/plugins) beside the plugins */
    setenv("METRO_PLUGIN_PATH", METRO_TEST_BINARY_DIR "/tests/fake-plugins/obs", 1);
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("ranks");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, rank_count_does_not_change_the_chain);
    tcase_add_test(tc, ensemble_over_ranks);
    tcase_add_test(tc, rank_count_on_the_gpu);
    tcase_add_test(tc, failed_ensemble_leaves_nothing);
    tcase_add_test(tc, combined_only_when_every_rank_finished);
    tcase_add_test(tc, ensemble_memory_is_the_hosts);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
#endif
}
