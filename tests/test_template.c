/* test_template — a plugin written later needs no change to the core, and
 * needs nothing of metro but its CMake package:
 *
 *  - installed_sdk: this build tree is `cmake --install`ed into a fresh
 *    prefix; the SDK template (plugins/template) is configured OUTSIDE
 *    metro's tree with only CMAKE_PREFIX_PATH=<prefix>, built, found through
 *    METRO_PLUGIN_PATH and run on the CPU by the INSTALLED `metro`.  Its
 *    physics is checked exactly (ideal particles in a harmonic trap have
 *    <E> = (3/2) N T, equipartition), and its device code is linked for
 *    sm_90 with the core's and the installed metropolis sampler's by
 *    nvJitLink (no GPU needed).  On the way: the prefix holds every plugin
 *    of the build tree, the installed `metro` finds its libmetro and those
 *    plugins with no LD_LIBRARY_PATH, and the plugin project installs its
 *    .so into <its prefix>/lib/metro/plugins.
 *  - build_tree_sdk: the same template against this build tree, never
 *    installed (-Dmetro_DIR=<build>); then the template's trap composed
 *    with the in-tree lj_fene in one system (docs/COMPOSITION.md): three
 *    trapped particles beside a free LJ + FENE dimer, whose <E> is
 *    (3/2) 3 T plus the dimer's exact <U> (lj_fene_exact.h), on the CPU;
 *    and the composite's generated device code links with the trap's and
 *    lj_fene's for sm_90.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit.h"
#include "loader.h"
#include "lone_source.h"
#include "testutil.h"
#include "../potentials/lj_fene/lj_fene_exact.h"

/* Commands start from a clean slate: no CUDA libraries or plugins borrowed
 * from the caller's environment, the toolkit's nvcc on PATH, and Ninja
 * where the project's scripts would use it. */
#define ENV "env -u LD_LIBRARY_PATH -u METRO_PLUGIN_PATH PATH=/usr/local/cuda/bin:$PATH "

__attribute__((format(printf, 1, 2))) static int sh(const char *f, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(cmd, sizeof cmd, f, ap);
    va_end(ap);
    ck_assert_int_lt(n, (int)sizeof cmd);
    return system(cmd);
}

/* snprintf into a buffer of PATH_LEN, failing the test when it is cut. */
#define PATH_LEN 4096
__attribute__((format(printf, 2, 3))) static void fmt(char *buf, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, PATH_LEN, f, ap);
    va_end(ap);
    ck_assert_int_lt(n, PATH_LEN);
}

static int exists(const char *dir, const char *name)
{
    char path[PATH_LEN];
    struct stat st;
    fmt(path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Every entry of `from` ending in `suffix` is also in `to`; returns the
 * number checked. */
static int all_copied(const char *from, const char *to, const char *suffix)
{
    DIR *d = opendir(from);
    ck_assert_msg(d != NULL, "cannot list %s", from);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (l <= s || strcmp(e->d_name + l - s, suffix)) continue;
        ck_assert_msg(exists(to, e->d_name), "%s/%s was not installed into %s", from, e->d_name, to);
        ++n;
    }
    closedir(d);
    return n;
}

/* Configure and build plugins/template in dir/trap with the extra cmake
 * arguments `how`. */
static void build_template(const char *dir, const char *how)
{
    ck_assert_msg(sh(ENV "cmake -S %s/plugins/template -B %s/trap $(command -v ninja >/dev/null && echo -G Ninja) %s "
                         ">%s/cmake.log 2>&1",
                     METRO_TEST_SOURCE_DIR, dir, how, dir) == 0,
                  "the template did not configure with %s: see %s/cmake.log", how, dir);
    ck_assert_msg(sh(ENV "cmake --build %s/trap >%s/build.log 2>&1", dir, dir) == 0,
                  "the template did not build: see %s/build.log", dir);
}

/* The folder find_package(metro) used, from the template's cache (its type
 * is PATH when found, UNINITIALIZED when given with -D). */
static void check_metro_dir(const char *dir, const char *want)
{
    char path[PATH_LEN];
    fmt(path, "%s/trap/CMakeCache.txt", dir);
    char *cache = metro_test_slurp(path);
    ck_assert_ptr_nonnull(cache);
    const char *line = strstr(cache, "\nmetro_DIR:");
    ck_assert_msg(line != NULL, "no metro_DIR in %s", path);
    const char *eq = strchr(line, '=');
    size_t n = strlen(want);
    ck_assert_msg(eq && !strncmp(eq + 1, want, n) && eq[1 + n] == '\n',
                  "find_package(metro) did not use %s (see %s)", want, path);
    free(cache);
}

static void harmonic_trap_ini(const char *path, int N, double T)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[run]\nseed = 11\nsweeps = 40000\nequilibration = 2000\n\n[system]\nparticles = %d\n\n"
               "[potential]\nplugin = harmonic_trap\nk = 2.0\n\n[sampler]\nplugin = metropolis\ntemperature = %g\nstep = 0.8\n\n"
               "[observable energy]\nplugin = energy\nevery = 1\n", N, T);
    fclose(f);
}

START_TEST(installed_sdk)
{
    char tmp[] = "/tmp/metro-template-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    char *dir = realpath(tmp, NULL);   /* as the loader will print it */
    ck_assert_ptr_nonnull(dir);
    char prefix[PATH_LEN], sub[PATH_LEN], want[PATH_LEN];
    fmt(prefix, "%s/prefix", dir);

    /* 1. install this build tree */
    ck_assert_msg(sh(ENV "cmake --install %s --prefix %s >%s/install.log 2>&1", METRO_TEST_BINARY_DIR, prefix, dir) == 0,
                  "cmake --install failed: see %s/install.log", dir);
    static const char *const package[] = {"bin/metro", "lib/libmetro.so", "lib/cmake/metro/metroConfig.cmake",
                                          "lib/cmake/metro/metroConfigVersion.cmake",
                                          "lib/cmake/metro/metroTargets.cmake",
                                          "lib/cmake/metro/MetroPlugin.cmake", "lib/cmake/metro/embed.cmake"};
    for (size_t i = 0; i < sizeof package / sizeof *package; ++i)
        ck_assert_msg(exists(prefix, package[i]), "the install lacks %s", package[i]);
    fmt(sub, "%s/include/metro", prefix);
    ck_assert_int_ge(all_copied(METRO_TEST_SOURCE_DIR "/core/include/metro", sub, ".h"), 5);
    fmt(sub, "%s/lib/metro/plugins", prefix);
    int nplugins = all_copied(METRO_TEST_BINARY_DIR "/lib/metro/plugins", sub, ".so");
    ck_assert_int_ge(nplugins, 3);

    /* 2. the installed program runs from its RUNPATH alone and finds the
     * installed plugins beside the installed libmetro, all of them loadable */
    ck_assert_msg(sh(ENV "%s/bin/metro list >%s/list.out 2>&1", prefix, dir) == 0,
                  "installed metro list failed: see %s/list.out", dir);
    fmt(sub, "%s/list.out", dir);
    char *out = metro_test_slurp(sub);
    ck_assert_ptr_nonnull(out);
    int lines = 0;
    for (const char *c = out; *c; ++c) lines += *c == '\n';
    ck_assert_msg(lines == nplugins, "installed metro lists %d plugins, the build has %d:\n%s", lines, nplugins, out);
    free(out);
    ck_assert_int_eq(sh(ENV "%s/bin/metro describe metropolis >%s/describe.out 2>&1", prefix, dir), 0);
    fmt(sub, "%s/describe.out", dir);
    out = metro_test_slurp(sub);
    ck_assert_ptr_nonnull(out);
    fmt(want, "file: %s/lib/metro/plugins/metropolis.so\n", prefix);
    ck_assert_msg(strstr(out, want) != NULL, "installed metro did not use its own plugins:\n%s", out);
    free(out);

    /* 3. the template, with nothing but CMAKE_PREFIX_PATH */
    fmt(sub, "-DCMAKE_PREFIX_PATH=%s", prefix);
    build_template(dir, sub);
    fmt(want, "%s/lib/cmake/metro", prefix);
    check_metro_dir(dir, want);
    ck_assert_msg(sh(ENV "cmake --install %s/trap --prefix %s/plugins >%s/install-trap.log 2>&1", dir, dir, dir) == 0,
                  "the template did not install: see %s/install-trap.log", dir);
    fmt(sub, "%s/plugins/lib/metro/plugins", dir);
    ck_assert_msg(exists(sub, "harmonic_trap.so"), "the template did not install into %s", sub);

    /* 4. run by the installed metro on the CPU: equipartition */
    const double T = 0.8;
    const int N = 5;
    fmt(sub, "%s/trap.ini", dir);
    harmonic_trap_ini(sub, N, T);
    ck_assert_msg(sh("env -u LD_LIBRARY_PATH METRO_PLUGIN_PATH=%s/trap %s/bin/metro run %s/trap.ini --device cpu "
                     "--output %s/run --quiet >%s/run.log 2>&1",
                     dir, prefix, dir, dir, dir) == 0,
                  "the installed metro did not run the template: see %s/run.log", dir);
    fmt(sub, "%s/run/energy_stats.csv", dir);
    double mean = metro_test_csv(sub, 0, "E_mean"), err = metro_test_csv(sub, 0, "E_err");
    double exact = 1.5 * N * T;
    printf("harmonic trap (installed metro): <E> = %.4f +- %.4f, exact %.4f\n", mean, err, exact);
    ck_assert_msg(err > 0 && err < 0.05 * exact, "error bar %g not meaningful", err);
    ck_assert_msg(fabs(mean - exact) < 4 * err, "<E> = %g +- %g, exact %g", mean, err, exact);

    /* 5. its device code links for sm_90 with the core's and the installed
     * sampler's and observable's (the core's IR is this process's libmetro,
     * the build the prefix was installed from) */
    const char *const files[3][2] = {{dir, "trap/harmonic_trap.so"},
                                     {prefix, "lib/metro/plugins/metropolis.so"},
                                     {prefix, "lib/metro/plugins/energy.so"}};
    metro__ir irs[5] = {{"core", metro__core_ir, metro__core_ir_size, 0}};
    char *src = NULL;
    for (int i = 0; i < 3; ++i) {
        const metro__plugin *p;
        metro_error e = {0};
        fmt(sub, "%s/%s", files[i][0], files[i][1]);
        ck_assert_msg(metro__plugin_open(sub, &p, &e) == METRO_OK, "%s", e.msg);
        ck_assert_msg(p->d->device_ir_size > 0, "%s carries no device code", sub);
        irs[i + 1] = (metro__ir){p->d->name, p->d->device_ir, p->d->device_ir_size, 0};
        if (i == 0) src = lone_source(p->d); /* the trap alone: the generated sum is its functions */
    }
    irs[4] = lone_ir(src);
    void *cubin = NULL;
    size_t size = 0;
    metro_error e = {0};
    ck_assert_msg(metro__jit_link(irs, 5, "sm_90", &cubin, &size, &e) == METRO_OK, "%s", e.msg);
    free(src);
    ck_assert_uint_gt(size, 1000);
    ck_assert_int_eq(memcmp(cubin, "\177ELF", 4), 0);
    printf("linked metropolis x harmonic_trap (+ energy) for sm_90: %zu bytes\n", size);
    free(cubin);

    ck_assert_int_eq(sh("rm -rf %s", dir), 0);
    free(dir);
}
END_TEST

START_TEST(build_tree_sdk)
{
    char tmp[] = "/tmp/metro-template-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    char *dir = realpath(tmp, NULL);
    ck_assert_ptr_nonnull(dir);
    char how[PATH_LEN], sub[PATH_LEN];
    fmt(how, "-Dmetro_DIR=%s", METRO_TEST_BINARY_DIR);
    build_template(dir, how);
    check_metro_dir(dir, METRO_TEST_BINARY_DIR);
    fmt(sub, "%s/trap", dir);
    setenv("METRO_PLUGIN_PATH", sub, 1);
    char *o, *e;
    int rc = metro_test_cli("describe harmonic_trap", &o, &e);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    fmt(sub, "file: %s/trap/harmonic_trap.so\n", dir);
    ck_assert_msg(strstr(o, "potential harmonic_trap") && strstr(o, sub), "describe said:\n%s", o);
    free(o);
    free(e);

    /* composed with an in-tree term: the trap on "free", the chain term on
     * "m"; no term couples the two species, so the energies add */
    const double T = 0.8;
    fmt(sub, "%s/composed.ini", dir);
    FILE *f = fopen(sub, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[run]\nseed = 5\nsweeps = 100000\nequilibration = 2000\n\n"
               "[system]\nspecies = m, free\ncounts = 2, 3\nchains = 2\nchain_species = m\n\n"
               "[potential chain]\nplugin = lj_fene\nspecies = m\n\n"
               "[potential trap]\nplugin = harmonic_trap\nspecies = free\nk = 2.0\n\n"
               "[sampler]\nplugin = metropolis\ntemperature = %g\nstep = 0.5\n\n"
               "[observable energy]\nplugin = energy\nevery = 1\n", T);
    ck_assert_int_eq(fclose(f), 0);
    char cmd[PATH_LEN];
    fmt(cmd, "run %s/composed.ini --device cpu --output %s/composed --quiet", dir, dir);
    rc = metro_test_cli(cmd, &o, &e);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, e);
    free(o);
    free(e);
    fmt(sub, "%s/composed/energy_stats.csv", dir);
    metro_lj_fene_model m = metro_lj_fene_model_default();
    double mean = metro_test_csv(sub, 0, "E_mean"), err = metro_test_csv(sub, 0, "E_err");
    double exact = 1.5 * 3 * T + metro_lj_fene_dimer_energy(&m, T);
    printf("trap + lj_fene dimer (composed): <E> = %.4f +- %.4f, exact %.4f\n", mean, err, exact);
    ck_assert_msg(err > 0 && err < 0.05, "error bar %g not meaningful", err);
    ck_assert_msg(fabs(mean - exact) < 4 * err, "<E> = %g +- %g, exact %g", mean, err, exact);

    /* the composite's device code: generated, compiled, linked for sm_90 */
    const metro__plugin *trap = NULL, *lj = NULL, *smp = NULL;
    metro_error pe = {0};
    fmt(sub, "%s/trap/harmonic_trap.so", dir);
    ck_assert_msg(metro__plugin_open(sub, &trap, &pe) == METRO_OK, "%s", pe.msg);
    ck_assert_msg(metro__plugin_find("lj_fene", METRO_KIND_POTENTIAL, &lj, &pe) == METRO_OK, "%s", pe.msg);
    ck_assert_msg(metro__plugin_find("metropolis", METRO_KIND_SAMPLER, &smp, &pe) == METRO_OK, "%s", pe.msg);
    static int first = 0, length = 2;
    static const metro_topology dimer = {1, &first, &length, NULL};
    metro__compose_desc d = {.n = 2, .all = 3, .bond = 0, .topology = &dimer};
    d.name[0] = "lj_fene";
    d.mask[0] = 1;
    d.range[0] = 2.5 * pow(2.0, -1.0 / 6.0) * 0.7;
    d.name[1] = "harmonic_trap";
    d.mask[1] = 2;
    d.nopair[1] = 1;
    char *src = metro__compose_text(&d);
    metro__ir irs[5] = {{"core", metro__core_ir, metro__core_ir_size, 0}, lone_ir(src),
                        {"lj_fene", lj->d->device_ir, lj->d->device_ir_size, 0},
                        {"harmonic_trap", trap->d->device_ir, trap->d->device_ir_size, 0},
                        {"metropolis", smp->d->device_ir, smp->d->device_ir_size, 0}};
    void *cubin = NULL;
    size_t size = 0;
    ck_assert_msg(metro__jit_link(irs, 5, "sm_90", &cubin, &size, &pe) == METRO_OK, "%s", pe.msg);
    ck_assert_int_eq(memcmp(cubin, "\177ELF", 4), 0);
    printf("linked metropolis x (lj_fene + harmonic_trap) for sm_90: %zu bytes\n", size);
    free(cubin);
    free(src);
    ck_assert_int_eq(sh("rm -rf %s", dir), 0);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("template");
    TCase *tc = tcase_create("out_of_tree");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, installed_sdk);
    tcase_add_test(tc, build_tree_sdk);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
