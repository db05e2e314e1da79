/* test_config — every bad config is refused before anything runs, with
 * `FILE:LINE: [section] key: what is wrong (what is allowed)`, exit status
 * 2, and no run directory left behind.  Input files are in
 * tests/data/config; each case names the message it must print. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

typedef struct bad_case {
    const char *file;
    const char *extra;     /* more command-line words */
    const char *message;   /* must appear in stderr */
} bad_case;

static const bad_case cases[] = {
    {"misspelt_key.ini", "", "misspelt_key.ini:13: [sampler] temprature: unknown key (did you mean 'temperature'?"},
    {"unknown_section.ini", "", "unknown_section.ini:11: [smapler]: unknown section (allowed: [run], [system], [potential] or [potential NAME] ..., [sampler], [observable NAME])"},
    {"unknown_section.ini", "", "unknown_section.ini: [sampler]: section missing (it needs plugin = NAME of a sampler"},
    {"bad_number.ini", "", "bad_number.ini:2: [run] seed: 'abc' is not an integer (integer in [0, "},
    {"out_of_range.ini", "", "out_of_range.ini:13: [sampler] temperature: -1 is out of range (real in ["},
    {"missing_plugin.ini", "", "missing_plugin.ini:9: [potential] plugin: no potential plugin 'lj_fen' found (did you mean 'lj_fene'?); available: "},
    {"wrong_kind.ini", "", "wrong_kind.ini:9: [potential] plugin: 'metropolis' is a sampler, not a potential"},
    {"duplicate_key.ini", "", "duplicate_key.ini:4: [run] sweeps: given twice (first at line 3)"},
    {"syntax_error.ini", "", "syntax_error.ini:6: syntax error"},
    /* every syntax error at its line, in order; nothing blamed on the
     * section before a broken header (inih gave only the first error, after
     * "[potential] plugin: given twice" for the broken header's key) */
    {"broken_header.ini", "", "broken_header.ini:9: syntax error: a section header without its ']' (the keys below it "
                              "are not read) (expected '[section]', 'key = value' or a ; comment)\n"
                              "metro: broken_header.ini:14: syntax error: 'bogus line' has no '='"},
    {"twice_section.ini", "", "twice_section.ini:13: [sampler]: given twice (first at line 8): give each section once"},
    /* a # after a blank, and quotes, would have been part of the value
     * (a folder named "runs/a # mine"); both lines reported */
    {"hash_and_quotes.ini", "", "hash_and_quotes.ini:4: [run] output: 'runs/a # mine' holds ' #', which starts no comment "
                                "here (only a ';' after a blank does)"},
    {"hash_and_quotes.ini", "", "hash_and_quotes.ini:14: [observable t] file: '\"movie.gsd\"' is in quotes, which would "
                                "be part of the value: write it without them"},
    {"missing_required.ini", "", "missing_required.ini:5: [system] particles: required (the particles per replica), unless counts give them"},
    {"bad_every.ini", "", "bad_every.ini:17: [observable e] every: '0' is below 1 (integer >= 1: measure every this many sweeps)"},
    /* a --set is named by its position and its text, never a line of the file */
    {"good.ini", "--set sampler.temperature=hot", "--set #1 sampler.temperature=hot: [sampler] temperature: 'hot' is not a number (real in ["},
    {"good.ini", "--set run.sweeps=5 --set sampler.tempo=1", "--set #2 sampler.tempo=1: [sampler] tempo: unknown key"},
    /* no production with observables: said as such (it was "every: 1 is more than sweeps = 0 (allowed: 1 to sweeps)") */
    {"with_energy.ini", "--set run.sweeps=0", "--set #1 run.sweeps=0: [run] sweeps = 0: no production sweep, so [observable e] would never measure"},
    {"good.ini", "--set nodot=1", "--set #1 nodot=1: expected SECTION.KEY=VALUE"},
    {"good.ini", "--set system.particles=abc", "--set #1 system.particles=abc: [system] particles: 'abc' is not an integer (integer in [0, "},
    /* ... also when the --set makes a section the file does not have */
    {"no_system.ini", "--set run.sweeps=5 --set system.initial_frame=-1", "--set #2 system.initial_frame=-1: [system] particles: required (the particles per replica)"},
    {"no_system.ini", "--set run.sweeps=5 --set system.size=1", "--set #2 system.size=1: [system] size: unknown key (allowed: particles"},
    {"good.ini", "--device gpu", "--device: [run] device: 'gpu' is not allowed (one of auto|cpu|cuda)"},
    /* a long line is one line: its key is read (here an unknown one) at its line */
    {"long_line.ini", "", "long_line.ini:12: [potential] name: unknown key"},
    /* a long list is checked item by item, and errors name its line */
    {"long_list_bad.ini", "", "long_list_bad.ini:10: [potential] valences: 'abc' in the list is not a number (list of reals in [-100, 100] e)"},
    /* a list item out of range, and numbers that are not finite, are refused
     * (mutation testing found neither guarded by a test) */
    {"coulomb.ini", "--set potential.valences=1,-1e6", "--set #1 potential.valences=1,-1e6: [potential] valences: -1e+06 in the list is out of range (list of reals in [-100, 100] e)"},
    {"good.ini", "--set sampler.temperature=nan", "--set #1 sampler.temperature=nan: [sampler] temperature: 'nan' is not a finite number"},
    {"good.ini", "--set sampler.temperature=inf", "--set #1 sampler.temperature=inf: [sampler] temperature: 'inf' is not a finite number"},
    /* hexadecimal is no number to a real key, as to an integer key (strtod took 0x1p-3 as 0.125) */
    {"good.ini", "--set sampler.temperature=0x1p-3", "--set #1 sampler.temperature=0x1p-3: [sampler] temperature: '0x1p-3' is not a decimal number"},
    {"coulomb.ini", "--set potential.diameters=4,-0X4", "[potential] diameters: '-0X4' in the list is not a decimal number"},
    /* numbers a double cannot hold, and integers past a long, are out of range, not "not a number" */
    {"good.ini", "--set sampler.temperature=1e-400", "[sampler] temperature: '1e-400' is beyond double precision"},
    {"good.ini", "--set run.sweeps=99999999999999999999999", "[run] sweeps: '99999999999999999999999' is out of range"},
    {"coulomb.ini", "--set potential.diameters=4,nan", "--set #1 potential.diameters=4,nan: [potential] diameters: 'nan' in the list is not a finite number"},
    /* an empty item is a typo, never skipped (1,,-1 is not two species) */
    {"coulomb.ini", "--set potential.valences=1,,-1", "--set #1 potential.valences=1,,-1: [potential] valences: item 2 of the list is empty"},
    {"coulomb.ini", "--set potential.diameters=4,", "--set #1 potential.diameters=4,: [potential] diameters: item 2 of the list is empty"},
    {"coulomb.ini", "--set run.scan=potential.bjerrum:7,,8", "--set #1 run.scan=potential.bjerrum:7,,8: [run] scan: value 2 after 'potential.bjerrum:' is empty"},
    {"good.ini", "--set run.systems=2 --set run.scan=sampler.temperature=1,2", "--set #2 run.scan=sampler.temperature=1,2: [run] scan: 'sampler.temperature=1,2' is not SECTION.KEY"},
    /* a scan's value is named as the scan's, not as a --set of its own */
    {"good.ini", "--set run.scan=sampler.temperature:1,-1", "--set #1 run.scan=sampler.temperature:1,-1 ([run] scan, value 2: -1): [sampler] temperature: -1 is out of range"},
    {"good.ini", "--set run.scan=run.systems:1,2", "--set #1 run.scan=run.systems:1,2: [run] scan: run.systems shapes the ensemble itself and cannot be scanned"},
    /* ... and a dry run checks every value of a scan, not the first only */
    {"good.ini", "--dry-run --set run.scan=sampler.temperature:1,-1", "--set #1 run.scan=sampler.temperature:1,-1 ([run] scan, value 2: -1): [sampler] temperature: -1 is out of range"},
    /* species names as [system] species has them: one each, valid, none twice */
    {"coulomb.ini", "--set potential.names=Na", "names: 1 name for 2 species"},
    {"coulomb.ini", "--set potential.names=Na,Cl,K", "names: 3 names for 2 species"},
    {"coulomb.ini", "--set potential.names=Na,Na", "names: 'Na' is named twice"},
    {"coulomb.ini", "--set potential.names=N@,Cl", "names: 'N@' (species 1) is not a species name"},
    /* two observables that would write one file: refused before the run */
    {"two_energy.ini", "", "two_energy.ini:22: [observable b]: writes the same files as [observable a] (plugin energy names its files itself)"},
    {"two_trajectories.ini", "", "two_trajectories.ini:24: [observable b]: writes the same files as [observable a] (plugin trajectory, the same parameters that name them): give one of them another file"},
};

/* Messages that must not appear for a case (a wrong place). */
static const char *const never[] = {"no_system.ini:2:", "no_system.ini:1:", "--set:", "[potential] plugin: given twice"};

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
    for (size_t k = 0; k < sizeof never / sizeof *never; ++k)
        ck_assert_msg(!strstr(se, never[k]), "'%s' in stderr:\n%s", never[k], se);
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
    /* --device is recorded: the run re-runs and resumes on its backend */
    ck_assert_ptr_nonnull(strstr(cfg, "\ndevice = cpu\n"));
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

/* A ladder of 400 temperatures on one line (3 kB) runs, and the resolved
 * config holds it whole. */
START_TEST(long_list_runs)
{
    ck_assert_int_eq(chdir(METRO_TEST_SOURCE_DIR "/tests/data/config"), 0);
    char out[] = "/tmp/metro-cfg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    char args[1024], path[1100];
    snprintf(args, sizeof args, "run long_list.ini --output %s/run --device cpu --quiet", out);
    char *se;
    int rc = metro_test_cli(args, NULL, &se);
    ck_assert_msg(rc == 0, "exit status %d, stderr: %s", rc, se);
    snprintf(path, sizeof path, "%s/run/config.ini", out);
    char *cfg = metro_test_slurp(path);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_msg(strstr(cfg, "\ntemperatures = 0.2000, 0.2010, ") && strstr(cfg, ", 0.5980, 0.5990\n"),
                  "the list is not whole in the resolved config");
    ck_assert_ptr_nonnull(strstr(cfg, "\nexchange_every = 5\n"));
    free(cfg);
    free(se);
    snprintf(args, sizeof args, "rm -rf %s", out);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

/* Parse text of the given size; the errors, or "" (caller frees c). */
static const char *parse(const char *text, size_t size, metro__config **c)
{
    static metro_error err;
    memset(&err, 0, sizeof err);
    metro__config_parse_text("t.ini", text, size, c, &err);
    return err.msg;
}

START_TEST(nul_byte_refused)
{
    static const char text[] = "[run]\nseed = 3\nsweeps = 1\0\nequilibration = 5\n";
    metro__config *c;
    const char *msg = parse(text, sizeof text - 1, &c);
    ck_assert_msg(strstr(msg, "t.ini:3: NUL byte (the file is not text)"), "got: %s", msg);
    metro__config_free(c);
    /* and only once, however many follow */
    static const char bin[] = "[run]\n\0\0\n\0\n";
    msg = parse(bin, sizeof bin - 1, &c);
    ck_assert_str_eq(msg, "t.ini:2: NUL byte (the file is not text)\n");
    metro__config_free(c);
}
END_TEST

START_TEST(long_values_as_inih_reads_short_ones)
{
    /* the same key = value, short and far past inih's buffer: trimmed the
     * same, the inline comment cut the same, at the right line */
    size_t n = 5000;
    char *text = malloc(2 * n + 200), *list = malloc(n + 1);
    for (size_t i = 0; i < n; ++i) list[i] = i % 5 == 4 ? ',' : '1';
    list[n] = 0;
    snprintf(text, 2 * n + 200, "[a]\n\n   k = \t %s  ; comment ; more\r\nq:  %s\n[b]\nx = 1 ;c\n", list, list);
    metro__config *c;
    const char *msg = parse(text, strlen(text), &c);
    ck_assert_str_eq(msg, "");
    metro__entry *e = metro__config_find(c, "a", "k");
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(!strcmp(e->value, list), "k: %zu characters, not %zu: %.60s", strlen(e->value), n, e->value);
    ck_assert_int_eq(e->line, 3);
    e = metro__config_find(c, "a", "q");
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(!strcmp(e->value, list), "q: %zu characters, not %zu: %.60s", strlen(e->value), n, e->value);
    ck_assert_int_eq(e->line, 4);
    e = metro__config_find(c, "b", "x");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->value, "1");
    ck_assert_int_eq(e->line, 6);
    metro__config_free(c);
    /* a ';' right after "=" and blanks is a comment, right after "=" it is
     * not (found by fuzz_config: the long path skipped the blanks first) */
    snprintf(text, 2 * n + 200, "[a]\nk = ;%s\nq =;%s\n", list, list);
    ck_assert_str_eq(parse(text, strlen(text), &c), "");
    ck_assert_str_eq(metro__config_find(c, "a", "k")->value, "");
    ck_assert_str_eq(metro__config_find(c, "a", "q")->value + 1, list);
    metro__config_free(c);
    /* a long line without '=' is a syntax error at its line */
    memset(text, 'x', n);
    memcpy(text, "[a]\n", 4);
    text[n] = 0;
    msg = parse(text, strlen(text), &c);
    ck_assert_msg(strstr(msg, "t.ini:2: syntax error"), "got: %s", msg);
    metro__config_free(c);
    free(list);
    free(text);
}
END_TEST

START_TEST(overlong_line_refused)
{
    size_t n = METRO__CONFIG_MAX_LINE + 100;
    char *text = malloc(n + 1);
    memset(text, '1', n);
    memcpy(text, "[run]\nseed = ", 13);
    text[n] = 0;
    metro__config *c;
    const char *msg = parse(text, n, &c);
    char want[128];
    snprintf(want, sizeof want, "t.ini:2: line longer than %d characters", METRO__CONFIG_MAX_LINE);
    ck_assert_msg(strstr(msg, want), "got: %s", msg);
    metro__config_free(c);
    /* a long key is read whole (and later refused as unknown) */
    memset(text, 'k', 5000);
    memcpy(text, "[run]\n", 6);
    strcpy(text + 5000, " = 1\n");
    ck_assert_str_eq(parse(text, strlen(text), &c), "");
    ck_assert_int_eq(c->n, 1);
    ck_assert_uint_eq(strlen(c->e[0].key), 5000 - 6);
    metro__config_free(c);
    free(text);
}
END_TEST

/* inih keeps 49 characters of a section name: two long observable names
 * would merge into one section (found by fuzz_config: a --set made a name
 * that config.ini could not hold) */
START_TEST(long_section_names_kept_whole)
{
    char name[300], text[1000];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = 0;
    snprintf(text, sizeof text, "[observable %.60s1]\nplugin = energy\n[observable %.60s2] ; c\nplugin = energy\n"
             "[observable %s]\nevery = 2\n", name, name, name);
    metro__config *c;
    ck_assert_str_eq(parse(text, strlen(text), &c), "");
    ck_assert_int_eq(c->nsections, 3);
    ck_assert_uint_eq(strlen(c->sections[0]), 11 + 61);
    ck_assert_int_eq(c->section_line[1], 3);
    ck_assert_uint_eq(strlen(c->sections[2]), 11 + 299);
    ck_assert_int_eq(c->section_line[2], 5);
    ck_assert_str_eq(c->e[2].section, c->sections[2]);
    metro__config_free(c);
    /* and a header inih would refuse is still refused */
    ck_assert_ptr_nonnull(strstr(parse("[run ;x]\nseed = 1\n", 17, &c), "t.ini:1: syntax error"));
    metro__config_free(c);
}
END_TEST

/* What metro__params_write writes reads back as the same values, a value
 * that starts with ';' included (found by fuzz_config). */
START_TEST(written_values_read_back)
{
    static const metro_param_decl decls[] = {
        {"a", METRO_PARAM_STRING, "", 0, 0, NULL, "", "a"},
        {"b", METRO_PARAM_STRING, "", 0, 0, NULL, "", "b"},
        {"c", METRO_PARAM_STRING, "dflt", 0, 0, NULL, "", "c"},
        METRO_PARAM_END};
    const char *text = "[s]\na =;x ; y\nb = p;q\n";
    metro__config *c, *again;
    metro_params *p, *q;
    metro_error err = {0};
    ck_assert_str_eq(parse(text, strlen(text), &c), "");
    ck_assert_int_eq(metro__params_build(c, "s", decls, NULL, &p, &err), METRO_OK);
    ck_assert_str_eq(metro__param_string(p, "a"), ";x");
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    fprintf(f, "[s]\n");
    metro__params_write(f, p);
    fclose(f);
    ck_assert_str_eq(parse(buf, size, &again), "");
    ck_assert_int_eq(metro__params_build(again, "s", decls, NULL, &q, &err), METRO_OK);
    for (int j = 0; j < 3; ++j)
        ck_assert_str_eq(metro__param_string(q, decls[j].name), metro__param_string(p, decls[j].name));
    metro__params_free(p);
    metro__params_free(q);
    metro__config_free(c);
    metro__config_free(again);
    free(buf);
}
END_TEST

START_TEST(set_names_itself)
{
    metro__config *c;
    const char *text = "[run]\nseed = 1\n";
    ck_assert_str_eq(parse(text, strlen(text), &c), "");
    metro_error err = {0};
    ck_assert_int_eq(metro__config_set(c, "observable   e.every = 3 ", 1, NULL, &err), METRO_OK);
    ck_assert_int_eq(metro__config_set(c, "run.seed=2", 2, NULL, &err), METRO_OK);
    ck_assert_str_eq(err.msg, "");
    /* a section only a --set makes has no line in the file */
    ck_assert_int_eq(metro__config_section_line(c, "observable e"), 0);
    ck_assert_str_eq(metro__config_section_where(c, "observable e"), "--set #1 observable   e.every = 3 ");
    ck_assert_str_eq(metro__config_section_where(c, "run"), "t.ini:1");
    ck_assert_str_eq(metro__config_section_where(c, "system"), "t.ini");
    ck_assert_str_eq(metro__config_find(c, "observable e", "every")->value, "3");
    ck_assert_str_eq(metro__config_find(c, "run", "seed")->where, "--set #2 run.seed=2");
    /* malformed, and control characters that config.ini could not keep */
    ck_assert_int_eq(metro__config_set(c, " .k=1", 3, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run. =1", 4, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run.output=a\n[x]", 5, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run.output=a\tb", 6, NULL, &err), METRO_OK);
    /* found by fuzz_config: what config.ini would read back otherwise */
    ck_assert_int_eq(metro__config_set(c, "run.output=a ;b", 7, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "observable a]b.every=1", 8, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run.output=a;b", 9, NULL, &err), METRO_OK);
    size_t big = METRO__CONFIG_MAX_LINE + 10;
    char *huge = malloc(big + 1);
    memset(huge, 'x', big);
    memcpy(huge, "run.output=", 11);
    huge[big] = 0;
    metro_error err2 = {0};
    ck_assert_int_eq(metro__config_set(c, huge, 10, NULL, &err2), METRO_EUSAGE);
    ck_assert_msg(strstr(err2.msg, "--set #10 run.output=xxx"), "got %s", err2.msg);
    ck_assert_msg(strstr(err2.msg, "...: longer than a line of config.ini may be (1048576 characters)"), "got %s", err2.msg);
    free(huge);
    /* what the file refuses, config.ini written from a --set must not hold */
    ck_assert_int_eq(metro__config_set(c, "run.output=runs/a # mine", 11, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run.output=\"a b\"", 12, NULL, &err), METRO_EUSAGE);
    ck_assert_int_eq(metro__config_set(c, "run.output=a#b", 13, NULL, &err), METRO_OK);
    ck_assert_str_eq(err.msg, "--set #3  .k=1: expected SECTION.KEY=VALUE (e.g. --set sampler.temperature=0.5)\n"
                              "--set #4 run. =1: expected SECTION.KEY=VALUE (e.g. --set sampler.temperature=0.5)\n"
                              "--set #5 run.output=a?[x]: a control character or line break (only text and tabs are allowed)\n"
                              "--set #7 run.output=a ;b: [run] output: a ';' after a blank would start a comment in config.ini (a value cannot hold it)\n"
                              "--set #8 observable a]b.every=1: [observable a]b]: a section name cannot hold '[', ']' or a ';' after a blank\n"
                              "--set #11 run.output=runs/a # mine: [run] output: a '#' after a blank, which config.ini refuses (other INI dialects read a comment there)\n"
                              "--set #12 run.output=\"a b\": [run] output: a value in quotes, which config.ini refuses (the quotes would be part of the value)\n");
    metro__config_free(c);
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
    tcase_add_test(tc, long_list_runs);
    suite_add_tcase(s, tc);
    tc = tcase_create("reader");
    tcase_add_test(tc, nul_byte_refused);
    tcase_add_test(tc, long_values_as_inih_reads_short_ones);
    tcase_add_test(tc, overlong_line_refused);
    tcase_add_test(tc, long_section_names_kept_whole);
    tcase_add_test(tc, written_values_read_back);
    tcase_add_test(tc, set_names_itself);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
