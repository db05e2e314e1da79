/* test_config — every bad config is refused before anything runs, with
 * `FILE:LINE: [section] key: what is wrong (what is allowed)`, exit status
 * 2, and no run directory left behind.  Input files are in
 * tests/data/config; each case names the message it must print. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

typedef struct bad_case {
    const char *file;
    const char *extra;     /* more command-line words */
    const char *message;   /* must appear in stderr */
} bad_case;

static const bad_case cases[] = {
    {"misspelt_key.ini", "", "misspelt_key.ini:13: [sampler] temprature: unknown key (did you mean 'temperature'?"},
    {"unknown_section.ini", "", "unknown_section.ini:11: [smapler]: unknown section (allowed: [run], [system], [potential], [sampler], [observable NAME])"},
    {"unknown_section.ini", "", "unknown_section.ini: [sampler]: section missing (it needs plugin = NAME of a sampler"},
    {"bad_number.ini", "", "bad_number.ini:2: [run] seed: 'abc' is not an integer (integer in [0, "},
    {"out_of_range.ini", "", "out_of_range.ini:13: [sampler] temperature: -1 is out of range (real in ["},
    {"missing_plugin.ini", "", "missing_plugin.ini:9: [potential] plugin: no potential plugin 'lj_fen' found (available: "},
    {"wrong_kind.ini", "", "wrong_kind.ini:9: [potential] plugin: 'metropolis' is a sampler, not a potential"},
    {"duplicate_key.ini", "", "duplicate_key.ini:4: [run] sweeps: given twice (first at line 3)"},
    {"syntax_error.ini", "", "syntax_error.ini:6: syntax error"},
    {"missing_required.ini", "", "missing_required.ini:5: [system] particles: required but not given (integer in [1, "},
    {"bad_every.ini", "", "bad_every.ini:17: [observable e] every: '0' is not a whole number of sweeps"},
    {"good.ini", "--set sampler.temperature=hot", "--set:1: [sampler] temperature: 'hot' is not a number"},
    {"good.ini", "--set run.sweeps=5 --set sampler.tempo=1", "--set:2: [sampler] tempo: unknown key"},
    {"good.ini", "--set nodot=1", "--set nodot=1: expected SECTION.KEY=VALUE"},
    {"good.ini", "--device gpu", "--device gpu: unknown backend (allowed: auto, cpu, cuda)"},
    {"long_line.ini", "", "long_line.ini:12: line longer than"},
};

START_TEST(bad_config_refused)
{
    const bad_case *c = &cases[_i];
    ck_assert_int_eq(chdir(METRO_TEST_SOURCE_DIR "/tests/data/config"), 0);
    char out[] = "/tmp/metro-cfg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[2048], dir[1100];
    snprintf(dir, sizeof dir, "%s/run", out);
    snprintf(args, sizeof args, "run %s --output %s --device cpu %s", c->file, dir, c->extra);
    char *so, *se;
    int rc = metro_test_cli(args, &so, &se);
    ck_assert_msg(rc == 2, "exit status %d, stderr: %s", rc, se);
    ck_assert_msg(strstr(se, c->message) != NULL, "expected\n  %s\nin stderr:\n%s", c->message, se);
    struct stat sb;
    ck_assert_msg(stat(dir, &sb) != 0, "a bad config left a run directory behind");
    free(so);
    free(se);
    rmdir(out);
}
END_TEST

START_TEST(override_and_resolved_config)
{
    ck_assert_int_eq(chdir(METRO_TEST_SOURCE_DIR "/tests/data/config"), 0);
    char out[] = "/tmp/metro-cfg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[1024], path[1100];
    snprintf(args, sizeof args, "run good.ini --set run.sweeps=7 --set sampler.temperature=0.75 --output %s/run --device cpu --quiet", out);
    char *so, *se;
    ck_assert_int_eq(metro_test_cli(args, &so, &se), 0);
    snprintf(path, sizeof path, "%s/run/config.ini", out);
    char *cfg = metro_test_slurp(path);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_ptr_nonnull(strstr(cfg, "\nsweeps = 7\n"));
    ck_assert_ptr_nonnull(strstr(cfg, "\ntemperature = 0.75\n"));
    ck_assert_ptr_nonnull(strstr(cfg, "\nequilibration = 0\n"));  /* defaults written out */
    ck_assert_ptr_nonnull(strstr(cfg, "\ndevice = auto\n"));
    /* the resolved config runs as it is, and resolves to itself */
    snprintf(args, sizeof args, "run %s/run/config.ini --output %s/again --device cpu --quiet", out, out);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    snprintf(path, sizeof path, "%s/again/config.ini", out);
    char *again = metro_test_slurp(path);
    ck_assert_ptr_nonnull(again);
    /* equal but for the time stamp in the first line */
    ck_assert_msg(!strcmp(strchr(cfg, '\n'), strchr(again, '\n')), "the resolved config is not a fixed point");
    /* an existing run directory is not overwritten ... */
    snprintf(args, sizeof args, "run good.ini --output %s/run --device cpu", out);
    char *se2;
    ck_assert_int_eq(metro_test_cli(args, NULL, &se2), 2);
    ck_assert_ptr_nonnull(strstr(se2, "already exists"));
    /* ... unless told to */
    snprintf(args, sizeof args, "run good.ini --output %s/run --device cpu --overwrite --quiet", out);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    free(so); free(se); free(se2); free(cfg); free(again);
    /* a comment longer than a line may be is cut, not misread */
    snprintf(args, sizeof args, "run long_comment.ini --output %s/long --device cpu --quiet", out);
    ck_assert_int_eq(metro_test_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "rm -rf %s", out);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, bad_config_refused, 0, (int)(sizeof cases / sizeof *cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("resolved");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, override_and_resolved_config);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
