/* tests/testutil.c — helpers shared by every Check suite (testutil.h). */
#define _GNU_SOURCE
#include "testutil.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int metro_test_have_gpu(void)
{
    /* In a child: a CUDA context must not exist when Check forks. */
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static char run_dir[4096];

const char *metro_test_run_dir(void)
{
    return run_dir;
}

void metro_test_refused(const char *ini_text, const char *path, const char *want)
{
    metro_options opt = {0};
    opt.config_text = ini_text;
    opt.config_path = path;
    opt.device = "cpu";
    opt.output = "";
    opt.quiet = 1;
    metro_sim *sim = NULL;
    metro_error err = {0};
    int rc = metro_sim_create(&opt, &sim, &err);
    if (rc == METRO_OK) metro_sim_destroy(sim);
    ck_assert_msg(rc != METRO_OK, "accepted: %s", ini_text);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message: %s\n(wanted %s)", err.msg, want);
}

metro_sim *metro_test_sim(const char *ini_text, const char *device, const char *const *sets,
                          int nsets)
{
    snprintf(run_dir, sizeof run_dir, "/tmp/metro-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(run_dir));
    metro_options opt = {0};
    opt.config_text = ini_text;
    opt.config_path = "<test>";
    opt.sets = sets;
    opt.nsets = nsets;
    opt.device = device;
    opt.output = run_dir;
    opt.quiet = 1;
    opt.overwrite = 1;
    metro_error err = {0};
    metro_sim *sim = NULL;
    int rc = metro_sim_create(&opt, &sim, &err);
    ck_assert_msg(rc == METRO_OK, "metro_sim_create failed (%d): %s", rc, err.msg);
    return sim;
}

int metro_test_same_file(const char *a, const char *b)
{
    size_t na, nb;
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        char ba[65536], bb[65536];
        na = fread(ba, 1, sizeof ba, fa);
        nb = fread(bb, 1, sizeof bb, fb);
        same = na == nb && !memcmp(ba, bb, na);
        if (na < sizeof ba) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

char *metro_test_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t got;
    while ((got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    b[n] = 0;
    return b;
}

int metro_test_cli(const char *args, char **out, char **err)
{
    char o[] = "/tmp/metro-cli-out-XXXXXX", e[] = "/tmp/metro-cli-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e);
    close(fo);
    close(fe);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/bin/metro %s >%s 2>%s </dev/null", METRO_TEST_BINARY_DIR, args, o, e);
    int status = system(cmd);
    if (out) *out = metro_test_slurp(o);
    if (err) *err = metro_test_slurp(e);
    unlink(o);
    unlink(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int metro_test_clif(char **err, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *e = NULL;
    int rc = metro_test_cli(args, NULL, &e);
    if (err) *err = e;
    else free(e);
    return rc;
}

void metro_test_write(const char *dir, const char *name, const char *fmt, ...)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s cannot be written", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

double metro_test_csv(const char *path, int row, const char *col)
{
    char *text = metro_test_slurp(path);
    if (!text) return NAN;
    double v = NAN;
    char *save = NULL;
    char *header = strtok_r(text, "\n", &save);
    int idx = -1, k = 0;
    for (char *c = header, *s2 = NULL, *tok = strtok_r(c, ",", &s2); tok; tok = strtok_r(NULL, ",", &s2), ++k)
        if (!strcmp(tok, col)) idx = k;
    for (int r = 0; idx >= 0; ++r) {
        char *line = strtok_r(NULL, "\n", &save);
        if (!line) break;
        if (r != row) continue;
        /* field by field: an empty one keeps its place */
        k = 0;
        for (char *f = line; f; ++k) {
            char *comma = strchr(f, ',');
            if (comma) *comma = '\0';
            if (k == idx) v = *f ? strtod(f, NULL) : NAN;
            f = comma ? comma + 1 : NULL;
        }
        break;
    }
    free(text);
    return v;
}

int metro_test_main(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

double metro_test_machine_gib(void)
{
    double limit = 0, kb;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lf", &kb) == 1 || sscanf(line, "SwapTotal: %lf", &kb) == 1) limit += kb / 1048576.0;
    fclose(f);
    return limit;
}
