/* fuzz_config — libFuzzer target for the config reader (config.c).
 *
 * An input is an INI file.  Its lines that start with "#@set " (comments to
 * the INI reader) are also --set arguments, in order, as if given on the
 * command line.  Each input goes the way `metro run` takes a config:
 *
 *   bytes -> metro__config_parse_text -> metro__config_set (each --set)
 *         -> metro__params_build of [run] and [system] (the core's
 *            declarations, mirrored below) and of every plugin section
 *            against the declarations of the real plugins of the build tree
 *
 * and every config that validates must also resolve to itself: its
 * resolved config.ini (written the way sim.c writes it) is read back and
 * must validate to the same values.  A crash, a sanitizer report, a leak or
 * a resolved config that reads back differently is a finding.
 *
 * Plugins are opened once, at start-up, from $METRO_PLUGIN_PATH or else
 * the build tree's lib/metro/plugins; an input never opens a file.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "loader.h"
#include "core_params.h"
#include "util.h"

static const char *const plugin_key[] = {"plugin", NULL};
static const char *const observable_keys[] = {"plugin", "every", NULL};

#define MAX_PLUGINS 64
static const metro__plugin *plugins[MAX_PLUGINS];
static int nplugins;

static void collect(const metro__plugin *p, void *user)
{
    (void)user;
    if (nplugins < MAX_PLUGINS) plugins[nplugins++] = p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (!getenv("METRO_PLUGIN_PATH")) setenv("METRO_PLUGIN_PATH", METRO_FUZZ_PLUGIN_DIR, 1);
    metro_error err = {0};
    metro__plugin_each(collect, NULL, &err);
    if (nplugins < 3) {
        fprintf(stderr, "fuzz_config: found %d plugins under %s (build them first)\n%s", nplugins,
                getenv("METRO_PLUGIN_PATH"), err.msg);
        exit(1);
    }
    return 0;
}

static const metro__plugin *find(const char *name, metro_kind kind)
{
    for (int i = 0; i < nplugins; ++i)
        if (plugins[i]->d->kind == kind && !strcmp(plugins[i]->d->name, name)) return plugins[i];
    return NULL;
}

/* One section's validated values, and what it was checked against. */
typedef struct section {
    char *name;
    const metro__plugin *plugin;  /* NULL for [run] and [system] */
    metro_params *params;
} section;

typedef struct resolved {
    section s[40];
    int n;
} resolved;

static void resolved_free(resolved *r)
{
    for (int i = 0; i < r->n; ++i) {
        free(r->s[i].name);
        metro__params_free(r->s[i].params);
    }
    r->n = 0;
}

/* sim.c's read_config, minus the run: validate every section. */
static int validate(metro__config *c, resolved *out, metro_error *err)
{
    int rc = 0;
    metro_params *p = NULL;
    rc |= metro__params_build(c, "run", metro__run_params, NULL, &p, err);
    out->s[out->n++] = (section){strdup("run"), NULL, p};
    p = NULL;
    rc |= metro__params_build(c, "system", metro__system_params, NULL, &p, err);
    out->s[out->n++] = (section){strdup("system"), NULL, p};
    for (int i = 0; i < c->nsections && out->n < 40; ++i) {
        const char *s = c->sections[i];
        metro_kind kind;
        if (!strcmp(s, "potential")) kind = METRO_KIND_POTENTIAL;
        else if (!strcmp(s, "sampler")) kind = METRO_KIND_SAMPLER;
        else if (!strncmp(s, "observable ", 11) && s[11]) kind = METRO_KIND_OBSERVABLE;
        else if (strcmp(s, "run") && strcmp(s, "system")) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [%s]: unknown section",
                             metro__config_section_where(c, s), s);
            continue;
        } else continue;
        metro__entry *e = metro__config_find(c, s, "plugin");
        const metro__plugin *pl = e ? find(e->value, kind) : NULL;
        if (!pl) {
            rc = metro__fail(err, METRO_EUSAGE, "%s: [%s] plugin: none such", e ? e->where : c->path, s);
            continue;
        }
        p = NULL;
        rc |= metro__params_build(c, s, pl->d->params, kind == METRO_KIND_OBSERVABLE ? observable_keys : plugin_key,
                                  &p, err);
        out->s[out->n++] = (section){strdup(s), pl, p};
    }
    /* what sim.c then asks of a section: where it is */
    for (int i = 0; i < c->nsections; ++i) {
        const char *w = metro__config_section_where(c, c->sections[i]);
        if (!w || !*w) abort();
        (void)metro__config_section_line(c, c->sections[i]);
    }
    return rc;
}

/* Read every value back through the host API's getters, as plugins do. */
static void read_back(const metro_params *p)
{
    for (int j = 0; j < p->n; ++j) {
        const metro_param_decl *d = &p->decls[j];
        int n = 0;
        switch (d->type) {
        case METRO_PARAM_INT: (void)metro__param_int(p, d->name); break;
        case METRO_PARAM_REAL: (void)metro__param_real(p, d->name); break;
        case METRO_PARAM_BOOL: (void)metro__param_bool(p, d->name); break;
        case METRO_PARAM_CHOICE:
        case METRO_PARAM_STRING: (void)strlen(metro__param_string(p, d->name)); break;
        case METRO_PARAM_REAL_LIST: {
            const double *l = metro__param_list(p, d->name, &n);
            double sum = 0;
            for (int k = 0; k < n; ++k) sum += l[k];   /* every element readable */
            if (sum != sum) abort();                    /* parse_real refuses NaN */
            break;
        }
        }
    }
}

/* The resolved config.ini, as sim.c's write_resolved() writes it. */
static char *write_resolved(const resolved *r, size_t *size)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, size);
    if (!f) abort();
    fprintf(f, "; resolved\n");
    for (int i = 0; i < r->n; ++i) {
        if (!r->s[i].params) continue;
        fprintf(f, "\n[%s]\n", r->s[i].name);
        if (r->s[i].plugin) fprintf(f, "plugin = %s\n", r->s[i].plugin->d->name);
        if (r->s[i].plugin && r->s[i].plugin->d->kind == METRO_KIND_OBSERVABLE)
            fprintf(f, "every = 1\n");
        metro__params_write(f, r->s[i].params);
    }
    fclose(f);
    return buf;
}

/* Every section that validated, written out and read back, validates to
 * the same values (sections that did not validate are left out). */
static void check_fixed_point(const resolved *r)
{
    size_t size = 0;
    char *text = write_resolved(r, &size);
    metro__config *c = NULL;
    metro_error err = {0};
    resolved again = {0};
    if (metro__config_parse_text("config.ini", text, size, &c, &err)) {
        fprintf(stderr, "fuzz_config: the resolved config does not parse:\n%s\n--- config.ini:\n%s\n", err.msg, text);
        abort();
    }
    validate(c, &again, &err);
    for (int i = 0; i < r->n; ++i) {
        if (!r->s[i].params) continue;
        const section *a = NULL;
        for (int k = 0; k < again.n && !a; ++k)
            if (!strcmp(again.s[k].name, r->s[i].name)) a = &again.s[k];
        if (!a || !a->params || a->plugin != r->s[i].plugin) {
            fprintf(stderr, "fuzz_config: [%s] does not read back:\n%s\n--- config.ini:\n%s\n", r->s[i].name,
                    err.msg, text);
            abort();
        }
        for (int j = 0; j < r->s[i].params->n; ++j)
            if (strcmp(r->s[i].params->v[j].text, a->params->v[j].text)) {
                fprintf(stderr, "fuzz_config: [%s] %s = '%s' reads back as '%s'\n", r->s[i].name,
                        r->s[i].params->decls[j].name, r->s[i].params->v[j].text, a->params->v[j].text);
                abort();
            }
    }
    resolved_free(&again);
    metro__config_free(c);
    free(text);
}

/* A refusal says why, and every line of it says where: the file and a
 * line, the file alone (a section that is missing), or the --set. */
static void check_messages(int rc, const char *msg)
{
    if (rc && !*msg) {
        fprintf(stderr, "fuzz_config: refused without a message\n");
        abort();
    }
    /* metro__fail() (util.c) drops whole the messages that no longer fit in
     * its 8 KiB buffer and ends it with "(more errors)", the one line that
     * says no place, and only as the last line */
    for (const char *l = msg; *l;) {
        const char *nl = strchr(l, '\n');
        if (!strcmp(l, "(more errors)\n")) break;
        if (strncmp(l, "fuzz.ini:", 9) && strncmp(l, "fuzz.ini: ", 10) && strncmp(l, "--set #", 7)) {
            fprintf(stderr, "fuzz_config: a message that does not say where:\n%s\n", l);
            abort();
        }
        if (!nl) break;
        l = nl + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    metro__config *c = NULL;
    metro_error err = {0};
    int rc = metro__config_parse_text("fuzz.ini", (const char *)data, size, &c, &err);
    if (!c) abort();
    /* --set arguments: "#@set " lines; an argv string ends at a NUL byte */
    int nsets = 0;
    for (size_t i = 0; i < size && nsets < 8; ++i) {
        if ((i && data[i - 1] != '\n') || size - i < 6 || memcmp(data + i, "#@set ", 6)) continue;
        const uint8_t *a = data + i + 6, *nl = memchr(a, '\n', size - i - 6);
        size_t n = nl ? (size_t)(nl - a) : size - i - 6;
        char *arg = strndup((const char *)a, n);
        rc |= metro__config_set(c, arg, ++nsets, NULL, &err);
        free(arg);
    }
    /* validated even after errors, as far as it goes: sim.c gives up
     * after parsing, but params_build must cope with whatever parsing left */
    resolved r = {0};
    if (validate(c, &r, &err)) rc = 1;
    for (int i = 0; i < r.n; ++i)
        if (r.s[i].params) read_back(r.s[i].params);
    check_fixed_point(&r);
    resolved_free(&r);
    check_messages(rc, err.msg);
    metro__config_free(c);
    return 0;
}
