/* core/src/jit.c — nvJitLink linking and the cubin cache (jit.h). */
#define _GNU_SOURCE
#include "jit.h"

#include <errno.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Link options: the architecture, LTO, and flush-to-zero (r² is never
 * denormal in metro's potentials, and ftz makes rsqrtf one MUFU op: DESIGN
 * fact 6).  Part of the cache key. */
static const char *const link_flags[] = {"-lto", "-O3", "-ftz=1"};
enum { NFLAGS = sizeof link_flags / sizeof *link_flags };

/* What the two common causes of a failed link mean for a plugin author:
 * a term function a potential does not define (its name is the plugin's,
 * then __), and device code of a newer architecture than the GPU's. */
static const char *link_hint(const char *log, int refused)
{
    const char *u = log ? strstr(log, "Unresolved extern function '") : NULL, *q = u ? strchr(u + 28, '\'') : NULL,
               *d = u ? strstr(u + 28, "__") : NULL;
    if (d && q && d < q)
        return "\n(a potential's device code lacks the function named NAME__FN: every potential defines the term "
               "functions metro/device.h lists, whichever a sampler calls; METRO_TERM_PAIR_DELTA_SUM_PLAIN writes "
               "the three pair_delta_* from pair_delta)";
    if (refused)
        return "\n(plugins carry LTO-IR for one virtual architecture, lto_XX (METRO_LTO_ARCH when they were built, "
               "90 by default), which links for sm_XX and newer GPUs only)";
    return "";
}

static int link_log(nvJitLinkHandle h, metro_error *err, const char *what, int refused)
{
    size_t n = 0;
    if (nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 1) {
        char *log = metro__xmalloc(n + 1);
        nvJitLinkGetErrorLog(h, log);
        log[n] = 0;
        while (n && (log[n - 1] == '\n' || !log[n - 1])) log[--n] = 0;
        metro__fail(err, METRO_ERUN, "nvJitLink %s:\n%s%s", what, log, link_hint(log, refused));
        free(log);
    } else {
        metro__fail(err, METRO_ERUN, "nvJitLink %s%s", what, link_hint(NULL, refused));
    }
    return METRO_ERUN;
}

/* CUDA source to LTO-IR for arch's virtual architecture (heap). */
static int compile_source(const metro__ir *ir, const char *arch, char **ltoir, size_t *n, metro_error *err)
{
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "-arch=compute_%s", arch + 3); /* sm_90 -> compute_90 */
    const char *opts[] = {opt_arch, "-dlto", "-rdc=true", "-std=c++17", "-ftz=true"};
    char *src = metro__xmalloc(ir->size + 1);
    memcpy(src, ir->data, ir->size);
    src[ir->size] = 0;
    nvrtcProgram p;
    nvrtcResult r = nvrtcCreateProgram(&p, src, "metro_composed.cu", 0, NULL, NULL);
    free(src);
    if (r != NVRTC_SUCCESS)
        return metro__fail(err, METRO_ERUN, "NVRTC cannot start for %s: %s", ir->name, nvrtcGetErrorString(r));
    r = nvrtcCompileProgram(p, (int)(sizeof opts / sizeof *opts), opts);
    if (r != NVRTC_SUCCESS) {
        size_t ln = 0;
        nvrtcGetProgramLogSize(p, &ln);
        char *log = metro__xmalloc(ln + 1);
        log[0] = 0;
        if (ln) nvrtcGetProgramLog(p, log);
        metro__fail(err, METRO_ERUN, "NVRTC could not compile %s for %s: %s\n%s", ir->name, arch,
                    nvrtcGetErrorString(r), log);
        free(log);
        nvrtcDestroyProgram(&p);
        return METRO_ERUN;
    }
    nvrtcGetLTOIRSize(p, n);
    *ltoir = metro__xmalloc(*n);
    nvrtcGetLTOIR(p, *ltoir);
    nvrtcDestroyProgram(&p);
    return METRO_OK;
}

int metro__jit_link(const metro__ir *irs, int n, const char *arch, void **cubin, size_t *size,
                    metro_error *err)
{
    char archopt[64];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    /* METRO_JIT_VERBOSE=1 prints ptxas's report (registers, spills, stack
     * per kernel) of every link to stderr: the first thing to read when a
     * potential or a composite slows a sampler down.  It does not change
     * the cubin, so it is not part of the cache key (a cached link prints
     * nothing; METRO_CACHE_DIR=$(mktemp -d) forces one). */
    const char *opts[NFLAGS + 2];
    opts[0] = archopt;
    for (int i = 0; i < NFLAGS; ++i) opts[i + 1] = link_flags[i];
    const char *verbose = getenv("METRO_JIT_VERBOSE");
    const int nopts = NFLAGS + 1 + (verbose && *verbose && strcmp(verbose, "0"));
    opts[NFLAGS + 1] = "-verbose";
    nvJitLinkHandle h;
    nvJitLinkResult r = nvJitLinkCreate(&h, (unsigned)nopts, opts);
    if (r != NVJITLINK_SUCCESS)
        return metro__fail(err, METRO_ERUN, "nvJitLink cannot start for %s (error %d)", arch, (int)r);
    int rc = METRO_OK;
    for (int i = 0; i < n && !rc; ++i) {
        if (!irs[i].data || !irs[i].size) continue;
        char *lto = NULL;
        size_t nlto = 0;
        if (irs[i].source && (rc = compile_source(&irs[i], arch, &lto, &nlto, err))) break;
        nvJitLinkResult a = lto ? nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, lto, nlto, irs[i].name)
                                : nvJitLinkAddData(h, NVJITLINK_INPUT_FATBIN, irs[i].data, irs[i].size, irs[i].name);
        free(lto);
        if (a != NVJITLINK_SUCCESS) {
            char what[256];
            snprintf(what, sizeof what, "refused the device code of '%s'", irs[i].name);
            rc = link_log(h, err, what, 1);
        }
    }
    if (!rc && nvJitLinkComplete(h) != NVJITLINK_SUCCESS) {
        char what[512] = "could not link";
        for (int i = 0; i < n; ++i)
            if (irs[i].size) {
                size_t l = strlen(what);
                snprintf(what + l, sizeof what - l, " %s%s", i ? "+ " : "", irs[i].name);
            }
        size_t l = strlen(what);
        snprintf(what + l, sizeof what - l, " for %s", arch);
        rc = link_log(h, err, what, 0);
    }
    size_t nlog = 0;
    if (nopts > NFLAGS + 1 && nvJitLinkGetInfoLogSize(h, &nlog) == NVJITLINK_SUCCESS && nlog > 1) {
        char *log = metro__xmalloc(nlog + 1);
        nvJitLinkGetInfoLog(h, log);
        log[nlog] = 0;
        fprintf(stderr, "metro: nvJitLink for %s:\n%s", arch, log);
        free(log);
    }
    if (!rc) {
        if (nvJitLinkGetLinkedCubinSize(h, size) != NVJITLINK_SUCCESS) {
            rc = link_log(h, err, "gave no cubin", 0);
        } else {
            *cubin = metro__xmalloc(*size);
            nvJitLinkGetLinkedCubin(h, *cubin);
        }
    }
    nvJitLinkDestroy(&h);
    return rc;
}

const char *metro__jit_cache_dir(void)
{
    static char dir[4096];
    if (dir[0]) return dir;
    const char *env = getenv("METRO_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/metro", xdg);
    else snprintf(dir, sizeof dir, "%s/.cache/metro", home && *home ? home : "/tmp");
    return dir;
}

/* A cache file: this header, then the cubin. */
typedef struct cache_head {
    char magic[8];       /* "METROCB1" */
    uint64_t key;        /* hash of the inputs, again */
    uint64_t size;       /* cubin bytes */
    uint64_t check;      /* FNV-1a of the cubin */
} cache_head;

int metro__jit_cached(const metro__ir *irs, int n, const char *arch, void **cubin, size_t *size,
                      int *from_cache, metro_error *err)
{
    int major = 0, minor = 0;
    nvJitLinkVersion((unsigned *)&major, (unsigned *)&minor);
    uint64_t key = metro__fnv(METRO__FNV_INIT, arch, strlen(arch));
    key = metro__fnv(key, &major, sizeof major);
    key = metro__fnv(key, &minor, sizeof minor);
    nvrtcVersion(&major, &minor); /* generated sources are keyed by their text and the compiler */
    key = metro__fnv(key, &major, sizeof major);
    key = metro__fnv(key, &minor, sizeof minor);
    for (int i = 0; i < NFLAGS; ++i) key = metro__fnv(key, link_flags[i], strlen(link_flags[i]) + 1);
    for (int i = 0; i < n; ++i) {
        key = metro__fnv(key, &irs[i].size, sizeof irs[i].size);
        if (irs[i].size) key = metro__fnv(key, irs[i].data, irs[i].size);
    }
    const char *dir = metro__jit_cache_dir();
    char path[4200];
    snprintf(path, sizeof path, "%s/%016llx-%s.cubin", dir, (unsigned long long)key, arch);
    *from_cache = 0;

    size_t fsize;
    char *buf = metro__read_file(path, &fsize);
    if (buf) {
        cache_head h;
        int ok = fsize >= sizeof h;
        if (ok) {
            memcpy(&h, buf, sizeof h);
            ok = !memcmp(h.magic, "METROCB1", 8) && h.key == key && h.size == fsize - sizeof h &&
                 metro__fnv(METRO__FNV_INIT, buf + sizeof h, h.size) == h.check;
        }
        if (ok) {
            *size = h.size;
            *cubin = metro__xmalloc(h.size);
            memcpy(*cubin, buf + sizeof h, h.size);
            free(buf);
            *from_cache = 1;
            return METRO_OK;
        }
        free(buf);
        fprintf(stderr, "metro: warning: damaged cache entry %s: rebuilding it\n", path);
    }
    int rc = metro__jit_link(irs, n, arch, cubin, size, err);
    if (rc) return rc;
    /* Best effort: a cache that cannot be written only costs time.  Write
     * a temporary file and rename it, so readers never see half a file. */
    if (metro__mkdirs(dir) == 0) {
        char tmp[4300];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            cache_head h;
            memcpy(h.magic, "METROCB1", 8);
            h.key = key;
            h.size = *size;
            h.check = metro__fnv(METRO__FNV_INIT, *cubin, *size);
            int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(*cubin, 1, *size, f) == *size;
            ok &= fclose(f) == 0;
            if (ok) rename(tmp, path);
            else unlink(tmp);
        }
    }
    return METRO_OK;
}
