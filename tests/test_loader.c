/* test_loader — the loader refuses each broken plugin with a message that
 * names the file, and finds real ones along the search path. */
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "config.h"
#include "loader.h"
#include "testutil.h"

#define FAKE METRO_TEST_BINARY_DIR "/tests/fake-plugins"

static void expect_refused(const char *file, const char *needle)
{
    metro_error err = {0};
    const metro__plugin *p = NULL;
    int rc = metro__plugin_open(file, &p, &err);
    ck_assert_int_eq(rc, METRO_EUSAGE);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.msg, file) != NULL, "message does not name %s: %s", file, err.msg);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "expected '%s' in: %s", needle, err.msg);
}

START_TEST(wrong_abi) { expect_refused(FAKE "/a/bad_abi.so", "ABI version 999"); }
END_TEST
/* the descriptor's version is METRO_PLUGIN's; the table's is the author's */
START_TEST(table_version)
{
    expect_refused(FAKE "/a/table_version.so", "its function table says .version = 1; write .version = "
                                               "METRO_ABI_VERSION");
}
END_TEST
/* the summary and version are one comment line of config.ini */
START_TEST(summary_line_break)
{
    expect_refused(FAKE "/a/summary_nl.so", "its summary holds a control character or line break (it is written on "
                                            "one comment line of config.ini: only text and tabs are allowed)");
}
END_TEST
START_TEST(wrong_kind) { expect_refused(FAKE "/a/bad_kind.so", "unknown plugin kind 7"); }
END_TEST
START_TEST(no_entry) { expect_refused(FAKE "/a/no_entry.so", "no symbol metro_plugin_entry"); }
END_TEST
START_TEST(misnamed) { expect_refused(FAKE "/a/misnamed.so", "calls itself 'something_else'"); }
END_TEST
START_TEST(missing_function) { expect_refused(FAKE "/a/missing_fn.so", "lacks the required function advance()"); }
END_TEST
/* plugin.h: bond is NULL unless flags has BONDS; a lone term was run
 * without ever calling it, and composed it failed to link on the GPU */
START_TEST(bonds_without_bond)
{
    expect_refused(FAKE "/a/bonds_no_fn.so", "potential plugin 'bonds_no_fn' has flags METRO_POTENTIAL_BONDS but no "
                                             "bond()");
}
END_TEST
/* the other way round: bond() that no system would ever call */
START_TEST(bond_without_bonds)
{
    expect_refused(FAKE "/a/fn_no_bonds.so", "potential plugin 'fn_no_bonds' has bond() but not flags "
                                             "METRO_POTENTIAL_BONDS");
}
END_TEST
/* ABI 8: a parameter a resume may change must be one the plugin declares
 * (a misspelt name would keep the key the author meant free fixed) */
START_TEST(resumable_undeclared)
{
    expect_refused(FAKE "/a/resumable.so", "sampler plugin 'resumable' names 'nob' in .resumable, but declares no "
                                           "parameter of that name");
}
END_TEST
START_TEST(not_a_file) { expect_refused(FAKE "/a/nothing_here.so", "no such plugin file"); }
END_TEST

START_TEST(bad_name)
{
    expect_refused(FAKE "/a/bad-name.so", "'bad-name' is not a plugin name");
}
END_TEST

/* a plugin's own declarations are checked when it loads, so that none of
 * their mistakes is ever blamed on a user's config line */
static const char *const decl_needles[] = {
    "parameter 'knob' is declared twice",
    "parameter 'span' has the range [5, -5]",
    "parameter 'level': its default '1.5' is invalid: '1.5' is not an integer",
    "parameter 'mode': its default 'c' is invalid: 'c' is not allowed (one of a|b)",
    "parameter 'plugin' is one of the core's own keys",
    "parameter 'x=y': not a key a config can hold",
    "parameter 'odd' has the unknown type 42",
    "parameter 'wide' has the range [-inf, 2]",
    "parameter 'label': its default 'a ; b' would not read back from config.ini: a ';' after a blank",
    "parameter 'label': its default 'a # b' would not read back from config.ini: a '#' after a blank",
    "parameter 'label': its default '\"quoted\"' would not read back from config.ini: a value in quotes",
    "parameter 'label': its default '  padded  ' would not read back from config.ini: a blank at its start or end",
    "parameter 'label': its default 'a?knob = 2' would not read back from config.ini: a control character or line "
    "break (only text and tabs are allowed)",
    "parameter 'q': its doc holds a control character or line break (it is written on one comment line of "
    "config.ini: only text and tabs are allowed)",
    "parameter 'q': its unit holds a control character or line break",
    "parameter 'mode': its choices 'soft | hard' hold one no config can give: a blank at its start or end, which "
    "config.ini drops (choices are separated by '|' without blanks: \"a|b|c\")",
};

START_TEST(bad_declarations)
{
    char file[512];
    snprintf(file, sizeof file, FAKE "/a/decl%d.so", _i + 1);
    expect_refused(file, decl_needles[_i]);
}
END_TEST

/* METRO_PLUGIN checks the api table against the kind at compile time: a
 * table of another kind is an error, not a warning that left a potential's
 * table to be read as a sampler's (the loader then named a function it
 * lacked); a table need not be const */
START_TEST(wrong_kind_does_not_compile)
{
    static const char *const sources[] = {
        "static const metro_potential_api api = {METRO_ABI_VERSION};\nMETRO_PLUGIN(potential, \"t\", \"1\", \"s\", NULL, api)",
        "static metro_sampler_api api = {METRO_ABI_VERSION};\nMETRO_PLUGIN(sampler, \"t\", \"1\", \"s\", NULL, api)",
        "static const metro_potential_api api = {METRO_ABI_VERSION};\nMETRO_PLUGIN(sampler, \"t\", \"1\", \"s\", NULL, api)",
    };
    char dir[] = "/tmp/metro-kind-XXXXXX", cmd[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int k = 0; k < 3; ++k) {
        metro_test_write(dir, "t.c", "#include \"metro/plugin.h\"\n%s\n", sources[k]);
        snprintf(cmd, sizeof cmd, "%s -std=c11 -fsyntax-only -I%s/core/include %s %s/t.c > %s/log 2>&1", METRO_TEST_CC,
                 METRO_TEST_SOURCE_DIR, METRO_TEST_CUDA_INC, dir, dir);
        const int rc = system(cmd);
        snprintf(cmd, sizeof cmd, "%s/log", dir);
        char *log = metro_test_slurp(cmd);
        if (k < 2) ck_assert_msg(rc == 0, "%s did not compile: %s", sources[k], log ? log : "");
        else ck_assert_msg(rc != 0 && log && strstr(log, "METRO_PLUGIN(sampler, ...): the api table is not a "
                                                         "metro_sampler_api"),
                           "%s compiled (exit %d): %s", sources[k], rc, log ? log : "");
        free(log);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A potential whose total() turns NaN is named at the next energy check:
 * no drift of the sampler's, and no delta(), is to blame (the message said
 * so).  tests/plugins/nanpot.c: NaN from total()'s second call on. */
START_TEST(nan_total_is_named)
{
    setenv("METRO_PLUGIN_PATH", FAKE "/obs", 1);
    char dir[] = "/tmp/metro-nantotal-XXXXXX", cmd[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    metro_test_write(dir, "t.ini", "[run]\nsweeps = 4\nequilibration = 0\n[system]\nparticles = 8\n[potential]\n"
                                   "plugin = nanpot\nbad = -1\nnan_total = 2\n[sampler]\nplugin = metropolis\n"
                                   "temperature = 1\n");
    char *e;
    const int rc = metro_test_clif(&e, "run %s/t.ini --device cpu --output %s/out --quiet", dir, dir);
    ck_assert_msg(rc == 1 && strstr(e, "energy check at sweep 1: replica 0 runs at E = 0 but recomputes to nan: the "
                                       "potential's total() gave a non-finite energy ([potential] nanpot)") &&
                      !strstr(e, "bookkeeping"),
                  "exit %d: %s", rc, e);
    free(e);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* reading a parameter the plugin never declared ends the process with a
 * message and exit 1 (run time), not abort() */
START_TEST(undeclared_read_exits)
{
    static const metro_param_decl decls[] = {{"knob", METRO_PARAM_REAL, "1", 0, 2, NULL, "", "a knob"},
                                             METRO_PARAM_END};
    metro__config *c = NULL;
    metro_error err = {0};
    metro_params *p = NULL;
    /* no ck_assert here: in an exit test a failed one exits 1 as well */
    if (metro__config_parse("t.ini", "[sampler]\nknob = 1.5\n", &c, &err) ||
        metro__params_build(c, "sampler", decls, NULL, &p, &err) || metro__param_real(p, "knob") != 1.5)
        _exit(99);
    (void)metro__param_real(p, _i ? "knob_typo" : "knob");
    if (!_i) (void)metro__param_int(p, "knob"); /* declared a real */
    _exit(98); /* neither read ended the process */
}
END_TEST

START_TEST(duplicate)
{
    metro_error err = {0};
    const metro__plugin *p = NULL;
    ck_assert_int_eq(metro__plugin_open(FAKE "/a/twin.so", &p, &err), METRO_OK);
    ck_assert_str_eq(p->d->name, "twin");
    /* the same file again is the same plugin, not a duplicate */
    const metro__plugin *q = NULL;
    ck_assert_int_eq(metro__plugin_open(FAKE "/a/twin.so", &q, &err), METRO_OK);
    ck_assert_ptr_eq(p, q);
    expect_refused(FAKE "/b/twin.so", "duplicate plugin name 'twin'");
}
END_TEST

START_TEST(search_path_order)
{
    /* METRO_PLUGIN_PATH comes first; kinds are checked */
    setenv("METRO_PLUGIN_PATH", FAKE "/b:" FAKE "/a", 1);
    const char *const *dirs = metro__plugin_dirs();
    ck_assert_str_eq(dirs[0], FAKE "/b");
    ck_assert_str_eq(dirs[1], FAKE "/a");
    ck_assert_ptr_nonnull(strstr(dirs[2], "/lib/metro/plugins"));
    metro_error err = {0};
    const metro__plugin *p = NULL;
    ck_assert_int_eq(metro__plugin_find("twin", METRO_KIND_SAMPLER, &p, &err), METRO_OK);
    ck_assert_ptr_nonnull(strstr(p->path, "/fake-plugins/b/twin.so"));
    ck_assert_int_eq(metro__plugin_find("twin", METRO_KIND_POTENTIAL, &p, &err), METRO_EUSAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "'twin' is a sampler, not a potential"));
    ck_assert_int_eq(metro__plugin_find("no_such_plugin", 0, &p, &err), METRO_EUSAGE);
}
END_TEST

/* a plugin named like a bundled one is taken, and says which file it hides;
 * a name not found says where the loader looked and what is near */
START_TEST(shadows_and_not_found)
{
    setenv("METRO_PLUGIN_PATH", FAKE "/shadow:/no/such/folder", 1);
    metro_error err = {0};
    const metro__plugin *p = NULL;
    ck_assert_int_eq(metro__plugin_find("metropolis", METRO_KIND_SAMPLER, &p, &err), METRO_OK);
    ck_assert_ptr_nonnull(strstr(p->path, "/fake-plugins/shadow/metropolis.so"));
    const char *hidden = metro__plugin_shadows(p);
    ck_assert_msg(hidden && strstr(hidden, "/lib/metro/plugins/metropolis.so"), "%s", hidden ? hidden : "(none)");
    ck_assert_int_eq(metro__plugin_find("lj_fene", METRO_KIND_POTENTIAL, &p, &err), METRO_OK);
    ck_assert_ptr_null(metro__plugin_shadows(p));
    char why[3000];
    metro__plugin_not_found("lj_fen", METRO_KIND_POTENTIAL, why, sizeof why);
    ck_assert_msg(strstr(why, "no potential plugin 'lj_fen' found (did you mean 'lj_fene'?)") &&
                      strstr(why, "/no/such/folder (no such folder)"),
                  "%s", why);
}
END_TEST

START_TEST(real_plugins_found)
{
    unsetenv("METRO_PLUGIN_PATH");
    metro_error err = {0};
    const metro__plugin *p = NULL;
    ck_assert_int_eq(metro__plugin_find("lj_fene", METRO_KIND_POTENTIAL, &p, &err), METRO_OK);
    ck_assert_int_eq(p->d->kind, METRO_KIND_POTENTIAL);
    ck_assert_msg(p->d->device_ir_size > 0, "lj_fene carries no device code");
    ck_assert_int_eq(metro__plugin_find("metropolis", METRO_KIND_SAMPLER, &p, &err), METRO_OK);
    ck_assert_int_eq(metro__plugin_find("energy", METRO_KIND_OBSERVABLE, &p, &err), METRO_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("refusals");
    tcase_add_test(tc, wrong_abi);
    tcase_add_test(tc, wrong_kind);
    tcase_add_test(tc, table_version);
    tcase_add_test(tc, summary_line_break);
    tcase_add_test(tc, no_entry);
    tcase_add_test(tc, misnamed);
    tcase_add_test(tc, missing_function);
    tcase_add_test(tc, bonds_without_bond);
    tcase_add_test(tc, bond_without_bonds);
    tcase_add_test(tc, resumable_undeclared);
    tcase_add_test(tc, wrong_kind_does_not_compile);
    tcase_add_test(tc, not_a_file);
    tcase_add_test(tc, duplicate);
    tcase_add_test(tc, bad_name);
    tcase_add_loop_test(tc, bad_declarations, 0, (int)(sizeof decl_needles / sizeof *decl_needles));
    tcase_add_loop_exit_test(tc, undeclared_read_exits, METRO_ERUN, 0, 2);
    tcase_add_test(tc, nan_total_is_named);
    suite_add_tcase(s, tc);
    tc = tcase_create("search");
    tcase_add_test(tc, search_path_order);
    tcase_add_test(tc, real_plugins_found);
    tcase_add_test(tc, shadows_and_not_found);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
