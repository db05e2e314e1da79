/* core/src/loader.c — finding, opening and checking plugins (loader.h). */
#define _GNU_SOURCE
#include "loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "util.h"

#ifndef METRO_INSTALL_PLUGIN_DIR
#define METRO_INSTALL_PLUGIN_DIR "/usr/local/lib/metro/plugins"
#endif

static metro__plugin **registry; /* stable pointers, never freed */
static int nregistry;

const char *metro__kind_name(metro_kind k)
{
    switch (k) {
    case METRO_KIND_POTENTIAL: return "potential";
    case METRO_KIND_SAMPLER: return "sampler";
    case METRO_KIND_OBSERVABLE: return "observable";
    }
    return "unknown kind";
}

const char *const *metro__core_keys(metro_kind k)
{
    static const char *const potential[] = {"plugin", "species", NULL}, *const sampler[] = {"plugin", NULL},
                             *const observable[] = {"plugin", "every", NULL};
    return k == METRO_KIND_POTENTIAL ? potential : k == METRO_KIND_OBSERVABLE ? observable : sampler;
}

const char *const *metro__plugin_dirs(void)
{
    static char **dirs;
    if (dirs) return (const char *const *)dirs;
    int n = 0, cap = 8;
    dirs = metro__xcalloc((size_t)cap, sizeof *dirs);
    const char *env = getenv("METRO_PLUGIN_PATH");
    if (env && *env) {
        char *copy = metro__strdup(env), *save = NULL;
        for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
            if (n + 3 >= cap) dirs = metro__xrealloc(dirs, sizeof *dirs * (size_t)(cap *= 2));
            dirs[n++] = metro__strdup(t);
        }
        free(copy);
    }
    Dl_info info;
    if (dladdr((void *)metro__plugin_dirs, &info) && info.dli_fname) {
        char *lib = realpath(info.dli_fname, NULL);
        if (lib) {
            char *slash = strrchr(lib, '/');
            if (slash) *slash = 0;
            size_t l = strlen(lib) + 32;
            char *d = metro__xmalloc(l);
            snprintf(d, l, "%s/metro/plugins", lib);
            dirs[n++] = d;
            free(lib);
        }
    }
    if (!n || strcmp(dirs[n - 1], METRO_INSTALL_PLUGIN_DIR)) dirs[n++] = metro__strdup(METRO_INSTALL_PLUGIN_DIR);
    dirs[n] = NULL;
    return (const char *const *)dirs;
}

const char *const *metro__plugin_resumable(const metro_plugin *d)
{
    if (d->kind == METRO_KIND_SAMPLER) return ((const metro_sampler_api *)d->api)->resumable;
    if (d->kind == METRO_KIND_OBSERVABLE) return ((const metro_observable_api *)d->api)->resumable;
    return NULL;
}

int metro__plugin_resumable_has(const metro_plugin *d, const char *key)
{
    for (const char *const *r = metro__plugin_resumable(d); r && *r; ++r)
        if (!strcmp(*r, key)) return 1;
    return 0;
}

static int check_api(const metro_plugin *d, const char *path, metro_error *err)
{
    const char *missing = NULL;
#define NEED(f) if (!missing && !a->f) missing = #f
    switch (d->kind) {
    case METRO_KIND_POTENTIAL: {
        const metro_potential_api *a = d->api;
        NEED(create); NEED(destroy); NEED(device_params); NEED(initial); NEED(delta); NEED(total);
        break;
    }
    case METRO_KIND_SAMPLER: {
        const metro_sampler_api *a = d->api;
        NEED(create); NEED(destroy); NEED(start); NEED(advance); NEED(sync); NEED(finish);
        NEED(save); NEED(restore);
        /* version 3: join() and leave() come together */
        if (!missing && a->version >= 3 && !a->join != !a->leave) missing = a->join ? "leave" : "join";
        break;
    }
    case METRO_KIND_OBSERVABLE: {
        const metro_observable_api *a = d->api;
        NEED(create); NEED(destroy); NEED(measure); NEED(finish); NEED(save); NEED(restore);
        break;
    }
    }
#undef NEED
    if (missing)
        return metro__fail(err, METRO_EUSAGE, "%s: %s plugin '%s' lacks the required function %s()",
                           path, metro__kind_name(d->kind), d->name, missing);
    /* a resumable name that is no parameter would let nothing change, or
     * a misspelt one keep a key the author meant free fixed: either way
     * the author's mistake, named here and not at a user's resume */
    for (const char *const *r = metro__plugin_resumable(d); r && *r; ++r) {
        int declared = 0;
        for (int i = 0; d->params && d->params[i].name && !declared; ++i) declared = !strcmp(d->params[i].name, *r);
        if (!declared)
            return metro__fail(err, METRO_EUSAGE, "%s: %s plugin '%s' names '%s' in .resumable, but declares no "
                                                  "parameter of that name (a resume may change only declared ones)",
                               path, metro__kind_name(d->kind), d->name, *r);
    }
    /* plugin.h: bond is NULL unless flags has BONDS.  The flag makes the
     * term the owner of the system's bonds, whose energy it then never
     * gave: a lone term ran without it on the CPU, and its device code
     * failed to link on the GPU */
    if (d->kind == METRO_KIND_POTENTIAL) {
        const metro_potential_api *a = d->api;
        if ((a->flags & METRO_POTENTIAL_BONDS) && !a->bond)
            return metro__fail(err, METRO_EUSAGE, "%s: potential plugin '%s' has flags METRO_POTENTIAL_BONDS but no "
                                                  "bond() (the term that owns the bonds gives their energy: set .bond, "
                                                  "or leave the flag out)", path, d->name);
        /* and the other way round: without the flag no system asks its
         * bond(), so the author's bonds would silently count for nothing */
        if (!(a->flags & METRO_POTENTIAL_BONDS) && a->bond)
            return metro__fail(err, METRO_EUSAGE, "%s: potential plugin '%s' has bond() but not flags "
                                                  "METRO_POTENTIAL_BONDS, so its bonds would never count (set the "
                                                  "flag to own the [system] chains' bonds, or leave .bond out)",
                               path, d->name);
    }
    return METRO_OK;
}

int metro__plugin_open(const char *path, const metro__plugin **out, metro_error *err)
{
    char *real = realpath(path, NULL);
    if (!real) return metro__fail(err, METRO_EUSAGE, "%s: no such plugin file", path);
    for (int i = 0; i < nregistry; ++i)
        if (!strcmp(registry[i]->path, real)) {
            free(real);
            *out = registry[i];
            return METRO_OK;
        }
    void *dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        metro__fail(err, METRO_EUSAGE, "%s: cannot be opened: %s", path, dlerror());
        free(real);
        return METRO_EUSAGE;
    }
    int rc = METRO_OK;
    metro_plugin_entry_fn entry = (metro_plugin_entry_fn)dlsym(dl, METRO_PLUGIN_ENTRY);
    const metro_plugin *d = entry ? entry() : NULL;
    /* the stem: "dir/lj_fene.so" -> "lj_fene" */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strlen(base);
    if (stem > 3 && !strcmp(base + stem - 3, ".so")) stem -= 3;

    if (!entry)
        rc = metro__fail(err, METRO_EUSAGE, "%s: not a metro plugin (no symbol %s: a plugin's .c file ends with "
                                            "METRO_PLUGIN(kind, \"name\", ...), plugin.h)", path, METRO_PLUGIN_ENTRY);
    else if (!d)
        rc = metro__fail(err, METRO_EUSAGE, "%s: %s() returned no descriptor", path,
                         METRO_PLUGIN_ENTRY);
    else if (d->abi_version != METRO_ABI_VERSION)
        /* version 3 changed metro_setup's layout and the device names of
         * potentials, version 4 metro_pd_sum's, versions 5, 6 and 8 the
         * sampler's table (8 the observable's too), so an older plugin
         * cannot run (plugin.h) */
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: built for plugin ABI version %u, this metro speaks version %u (%s)", path, d->abi_version,
                         METRO_ABI_VERSION,
                         d->abi_version > METRO_ABI_VERSION ? "the plugin is newer than this metro: update metro, or "
                                                              "build the plugin against this metro's headers"
                                                            : "rebuild the plugin against this metro's headers");
    else if (d->kind != METRO_KIND_POTENTIAL && d->kind != METRO_KIND_SAMPLER &&
             d->kind != METRO_KIND_OBSERVABLE)
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: unknown plugin kind %d (allowed: potential, sampler, observable)", path,
                         (int)d->kind);
    else if (!d->name || !d->version || !d->summary || !d->api)
        rc = metro__fail(err, METRO_EUSAGE, "%s: descriptor lacks %s", path,
                         !d->name ? "a name" : !d->version ? "a version" : !d->summary ? "a summary" : "its function table");
    else if (metro__config_has_control(d->version) || metro__config_has_control(d->summary))
        /* config.ini names each section's plugin on a comment line */
        rc = metro__fail(err, METRO_EUSAGE, "%s: its %s holds a control character or line break (it is written on one "
                                            "comment line of config.ini: only text and tabs are allowed)",
                         path, metro__config_has_control(d->version) ? "version" : "summary");
    else if (!metro__identifier(d->name))
        rc = metro__fail(err, METRO_EUSAGE, "%s: '%s' is not a plugin name: letters, digits and _, not starting with "
                                            "a digit (its device code's names are built from it)", path, d->name);
    else if (strlen(d->name) != stem || strncmp(d->name, base, stem))
        rc = metro__fail(err, METRO_EUSAGE, "%s: calls itself '%s'; a plugin's name must match its file (%.*s.so)",
                         path, d->name, (int)stem, base);
    else if (((const uint32_t *)d->api)[0] != METRO_ABI_VERSION)
        /* METRO_PLUGIN writes the descriptor's version; the table's first
         * member is the author's to write */
        rc = metro__fail(err, METRO_EUSAGE, "%s: its function table says .version = %u; write .version = "
                                            "METRO_ABI_VERSION (%u) in the table", path,
                         ((const uint32_t *)d->api)[0], METRO_ABI_VERSION);
    else
        rc = check_api(d, path, err);
    char why[512];
    if (!rc && metro__decls_check(d->params, metro__core_keys(d->kind), why, sizeof why))
        rc = metro__fail(err, METRO_EUSAGE, "%s: %s (a mistake in the plugin's declarations: rebuild it with them "
                                            "mended)", path, why);
    for (int i = 0; !rc && i < nregistry; ++i)
        if (!strcmp(registry[i]->d->name, d->name))
            rc = metro__fail(err, METRO_EUSAGE, "%s: duplicate plugin name '%s' (already loaded from %s)",
                             path, d->name, registry[i]->path);
    if (rc) {
        dlclose(dl);
        free(real);
        return rc;
    }
    metro__plugin *p = metro__xmalloc(sizeof *p);
    p->d = d;
    p->path = real;
    p->dl = dl;
    registry = metro__xrealloc(registry, sizeof *registry * (size_t)(nregistry + 1));
    registry[nregistry++] = p;
    *out = p;
    return METRO_OK;
}

int metro__plugin_find(const char *name, metro_kind kind, const metro__plugin **out,
                       metro_error *err)
{
    *out = NULL;
    /* a name is a file stem in the search folders: "../x" or "/x" would
     * dlopen (and run the constructors of) any library (found by the fuzzing
     * session's review) */
    if (!*name || strchr(name, '/') || name[0] == '.')
        return metro__fail(err, METRO_EUSAGE, "'%s' is not a plugin name (a file stem: no '/', not starting with '.')",
                           name);
    for (const char *const *d = metro__plugin_dirs(); *d; ++d) {
        size_t l = strlen(*d) + strlen(name) + 8;
        char *path = metro__xmalloc(l);
        snprintf(path, l, "%s/%s.so", *d, name);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            int rc = metro__plugin_open(path, out, err);
            free(path);
            if (rc) return rc;
            if (kind && (*out)->d->kind != kind) {
                rc = metro__fail(err, METRO_EUSAGE, "'%s' is a %s, not a %s", name,
                                 metro__kind_name((*out)->d->kind), metro__kind_name(kind));
                *out = NULL;
                return rc;
            }
            return METRO_OK;
        }
        free(path);
    }
    return METRO_EUSAGE; /* caller words the message: it knows the section */
}

const char *metro__plugin_shadows(const metro__plugin *p)
{
    static __thread char other[4200];
    const char *base = strrchr(p->path, '/');
    base = base ? base + 1 : p->path;
    int after = 0;
    for (const char *const *d = metro__plugin_dirs(); *d; ++d) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", *d, base);
        char *real = realpath(path, NULL);
        if (!real) continue;
        const int same = !strcmp(real, p->path);
        free(real);
        if (same) { after = 1; continue; }
        if (after) {
            snprintf(other, sizeof other, "%s", path);
            return other;
        }
    }
    return NULL;
}

void metro__plugin_not_found(const char *name, metro_kind kind, char *buf, size_t n)
{
    /* the nearest name of that kind, and where the loader looked */
    char names[1024] = "";
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; i < nregistry; ++i) {
        const metro_plugin *d = registry[i]->d;
        if (kind && d->kind != kind) continue;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", d->name);
        const int dd = metro__edit_distance(name, d->name);
        if (dd < bd) bd = dd, best = d->name;
    }
    size_t l = (size_t)snprintf(buf, n, "no %s%splugin '%s' found", kind ? metro__kind_name(kind) : "",
                                kind ? " " : "", name);
    if (best && l < n) l += (size_t)snprintf(buf + l, n - l, " (did you mean '%s'?)", best);
    if (l < n) l += (size_t)snprintf(buf + l, n - l, "; available: %s; searched:", names[0] ? names : "none");
    for (const char *const *d = metro__plugin_dirs(); *d && l < n; ++d) {
        struct stat sb;
        const int there = stat(*d, &sb) == 0 && S_ISDIR(sb.st_mode);
        l += (size_t)snprintf(buf + l, n - l, " %s%s", *d, there ? "" : " (no such folder)");
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int metro__plugin_each(void (*fn)(const metro__plugin *p, void *user), void *user,
                       metro_error *err)
{
    int found = 0;
    char **seen = NULL;
    int nseen = 0;
    for (const char *const *d = metro__plugin_dirs(); *d; ++d) {
        DIR *dir = opendir(*d);
        if (!dir) continue;
        char **names = NULL;
        int nn = 0;
        for (struct dirent *e; (e = readdir(dir));) {
            size_t l = strlen(e->d_name);
            if (l < 4 || strcmp(e->d_name + l - 3, ".so")) continue;
            names = metro__xrealloc(names, sizeof *names * (size_t)(nn + 1));
            names[nn++] = metro__strdup(e->d_name);
        }
        closedir(dir);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int i = 0; i < nn; ++i) {
            int dup = 0;
            for (int j = 0; j < nseen; ++j) dup |= !strcmp(seen[j], names[i]);
            size_t l = strlen(*d) + strlen(names[i]) + 2;
            char *path = metro__xmalloc(l);
            snprintf(path, l, "%s/%s", *d, names[i]);
            if (dup) {
                metro__fail(err, 0, "%s: shadowed by a plugin of the same name earlier in the search path",
                            path);
            } else {
                const metro__plugin *p;
                if (metro__plugin_open(path, &p, err) == METRO_OK) {
                    fn(p, user);
                    ++found;
                }
                seen = metro__xrealloc(seen, sizeof *seen * (size_t)(nseen + 1));
                seen[nseen++] = metro__strdup(names[i]);
            }
            free(path);
            free(names[i]);
        }
        free(names);
    }
    for (int j = 0; j < nseen; ++j) free(seen[j]);
    free(seen);
    return found;
}
