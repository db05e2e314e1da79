/* test_cli — the program's commands and exit statuses. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

START_TEST(help_and_version)
{
    char *o, *e;
    ck_assert_int_eq(metro_test_cli("--help", &o, &e), 0);
    ck_assert_ptr_nonnull(strstr(o, "usage: metro run CONFIG"));
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("--version", &o, &e), 0);
    ck_assert_ptr_nonnull(strstr(o, "metro " METRO_VERSION_STRING));
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("frobnicate", &o, &e), 2);
    ck_assert_ptr_nonnull(strstr(e, "unknown command 'frobnicate'"));
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("run", &o, &e), 2);
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("run x.ini --bogus", &o, &e), 2);
    ck_assert_ptr_nonnull(strstr(e, "unknown option --bogus"));
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("run /nonexistent/x.ini", &o, &e), 2);
    ck_assert_ptr_nonnull(strstr(e, "/nonexistent/x.ini: cannot be read"));
    free(o); free(e);
    /* a folder as the config: its own reason (it said "Input/output error") */
    ck_assert_int_eq(metro_test_cli("run /tmp", &o, &e), 2);
    ck_assert_msg(strstr(e, "/tmp: cannot be read: Is a directory"), "%s", e);
    free(o); free(e);
    /* the command as typed; a folder that is no run of metro's said so
     * (it said "/tmp/config.ini: cannot be read") */
    ck_assert_int_eq(metro_test_cli("analyze", &o, &e), 2);
    ck_assert_msg(strstr(e, "metro: analyze needs a RUNDIR"), "%s", e);
    free(o); free(e);
    char empty[] = "/tmp/metro-cli-XXXXXX", args[256];
    ck_assert_ptr_nonnull(mkdtemp(empty));
    snprintf(args, sizeof args, "resume %s", empty);
    ck_assert_int_eq(metro_test_cli(args, &o, &e), 2);
    ck_assert_msg(strstr(e, "not a run directory (no config.ini in it)") && strstr(e, empty), "%s", e);
    free(o); free(e);
    rmdir(empty);
    ck_assert_int_eq(metro_test_cli("resume /nonexistent", &o, &e), 2);
    ck_assert_msg(strstr(e, "resume /nonexistent: not a run directory (No such file or directory)"), "%s", e);
    free(o); free(e);
}
END_TEST

START_TEST(list_shows_plugins)
{
    char *o, *e;
    ck_assert_int_eq(metro_test_cli("list", &o, &e), 0);
    ck_assert_msg(strstr(o, "potential") && strstr(o, "lj_fene"), "%s", o);
    ck_assert_msg(strstr(o, "sampler") && strstr(o, "metropolis"), "%s", o);
    ck_assert_msg(strstr(o, "observable") && strstr(o, "energy"), "%s", o);
    free(o); free(e);
}
END_TEST

START_TEST(describe_documents_every_parameter)
{
    char *o, *e;
    ck_assert_int_eq(metro_test_cli("describe lj_fene", &o, &e), 0);
    const char *keys[] = {"r0 = 0.7", "plugin = lj_fene"};
    for (int i = 0; i < 2; ++i) ck_assert_msg(strstr(o, keys[i]) != NULL, "no '%s' in:\n%s", keys[i], o);
    /* every declared parameter is followed by its doc, allowed values and default */
    ck_assert_ptr_nonnull(strstr(o, "; real in ["));
    free(o); free(e);
    ck_assert_int_eq(metro_test_cli("describe no_such_thing", &o, &e), 2);
    ck_assert_ptr_nonnull(strstr(e, "no plugin 'no_such_thing'"));
    free(o); free(e);
}
END_TEST

START_TEST(cuda_without_a_device_fails_cleanly)
{
    if (metro_test_have_gpu()) return; /* this machine has one: nothing to show */
    char out[] = "/tmp/metro-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[1024];
    snprintf(args, sizeof args, "run %s/tests/data/config/good.ini --device cuda --output %s/run",
             METRO_TEST_SOURCE_DIR, out);
    char *o, *e;
    ck_assert_int_eq(metro_test_cli(args, &o, &e), 1);
    ck_assert_msg(strstr(e, "--device: [run] device = cuda: no usable CUDA device") != NULL, "%s", e);
    ck_assert_msg(strstr(e, "--device cpu") != NULL, "%s", e);
    free(o); free(e);
    snprintf(args, sizeof args, "rm -rf %s", out);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

START_TEST(run_says_which_backend)
{
    char out[] = "/tmp/metro-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[1024];
    snprintf(args, sizeof args, "run %s/tests/data/config/good.ini --device cpu --output %s/run",
             METRO_TEST_SOURCE_DIR, out);
    char *o, *e;
    ck_assert_int_eq(metro_test_cli(args, &o, &e), 0);
    ck_assert_msg(strstr(e, "backend cpu") != NULL, "%s", e);
    char path[1200];
    snprintf(path, sizeof path, "%s/run/log.txt", out);
    char *log = metro_test_slurp(path);
    ck_assert_ptr_nonnull(log);
    ck_assert_ptr_nonnull(strstr(log, "done: "));
    /* the sweeps' own time beside the whole run's (benchmarks read it) */
    const char *d = strstr(log, "done: ");
    double wall = 0, sampling = -1;
    ck_assert_msg(sscanf(strstr(d, " in ") ? strstr(d, " in ") : "", " in %lf s (sampling %lf s", &wall, &sampling) == 2,
                  "%s", d);
    ck_assert_msg(sampling >= 0 && sampling <= wall, "%s", d);
    free(o); free(e); free(log);
    snprintf(args, sizeof args, "rm -rf %s", out);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, list_shows_plugins);
    tcase_add_test(tc, describe_documents_every_parameter);
    tcase_add_test(tc, cuda_without_a_device_fails_cleanly);
    tcase_add_test(tc, run_says_which_backend);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
