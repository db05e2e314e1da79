/* tests/testutil.h — helpers shared by every Check suite. */
#ifndef METRO_TESTUTIL_H
#define METRO_TESTUTIL_H

#include <check.h>

#include "metro/metro.h"

/* 1 when a CUDA device is usable (checked in a child process, so that no
 * CUDA context exists before Check forks its tests). */
int metro_test_have_gpu(void);

/* For main() of a suite labelled gpu: print "skipped: no CUDA device" and
 * return 77 (CTest's skip code) when there is none. */
#define METRO_TEST_REQUIRE_GPU()                                   \
    do {                                                           \
        if (!metro_test_have_gpu()) {                              \
            printf("skipped: no CUDA device\n");                   \
            return 77;                                             \
        }                                                          \
    } while (0)

/* A simulation from INI text on `device` ("cpu" or "cuda") with overrides
 * sets[0..nsets-1]; its run directory is a fresh temporary folder (see
 * metro_test_run_dir).  Fails the current test, with the core's message, if
 * the config is refused. */
metro_sim *metro_test_sim(const char *ini_text, const char *device, const char *const *sets,
                          int nsets);

/* Fails the current test unless the core refuses INI text (read as file
 * `path`, which may be NULL) on the CPU with a message containing `want`. */
void metro_test_refused(const char *ini_text, const char *path, const char *want);

/* The run directory metro_test_sim made for its last simulation. */
const char *metro_test_run_dir(void);

/* Run the built `metro` program with the shell words `args`; its stdout and
 * stderr come back as heap strings (caller frees).  Returns its exit
 * status. */
int metro_test_cli(const char *args, char **out, char **err);

/* metro_test_cli with printf-formatted arguments; stderr in *err when err
 * is not NULL (caller frees). */
int metro_test_clif(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write a file dir/name with printf-formatted contents (fails the test if
 * it cannot). */
void metro_test_write(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when the two files exist and are byte for byte the same. */
int metro_test_same_file(const char *a, const char *b);

/* Read a whole file into a heap string (NULL if it cannot be read). */
char *metro_test_slurp(const char *path);
/* This machine's memory and swap in GiB, as the core's memory check
 * counts them (/proc/meminfo) */
double metro_test_machine_gib(void);

/* Value of column `col` in row `row` (0 = first data row) of a CSV with a
 * header row; NAN when absent. */
double metro_test_csv(const char *path, int row, const char *col);

/* Run a Check suite the usual way; returns the exit status for main(). */
int metro_test_main(Suite *s);

#endif
