/* tests/plugins/writer.c — an observable that writes one line to `file`
 * from create() or finish() (`open_in`), and `pad` more bytes, for
 * test_rundir: a plugin opening its output before the run directory exists
 * is refused; a `file` naming one of the core's files is refused before the
 * run starts; a write error the plugin ignores (`careless`: fclose's result
 * not checked) is still caught by the core when the results are committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metro/plugin.h"

typedef struct writer {
    const metro_host_api *host;
    metro_ctx *ctx;
    char file[200];
    long pad;
    int careless;
} writer;

static int w_create(const metro_host_api *h, metro_ctx *c, const metro_params *p, const metro_setup *s, void **self)
{
    (void)s;
    writer *w = calloc(1, sizeof *w);
    if (!w) return h->fail(c, "out of memory");
    w->host = h;
    w->ctx = c;
    snprintf(w->file, sizeof w->file, "%s", h->param_string(p, "file"));
    w->pad = h->param_int(p, "pad");
    w->careless = h->param_bool(p, "careless");
    if (!strcmp(h->param_string(p, "open_in"), "create")) {
        FILE *f = h->open_output(c, w->file);
        if (!f) {
            free(w);
            return -1; /* the core's reason stands */
        }
        fprintf(f, "written in create()\n");
        fclose(f);
    }
    *self = w;
    return 0;
}
static void w_destroy(void *self) { free(self); }
static int w_measure(void *self, const metro_state *st) { (void)self; (void)st; return 0; }
static int w_finish(void *self, const metro_state *st)
{
    (void)st;
    writer *w = self;
    FILE *f = w->host->open_output(w->ctx, w->file);
    if (!f) return -1;
    fprintf(f, "written in finish()\n");
    for (long k = 0; k < w->pad; ++k) fputc('.', f);
    const int bad = fclose(f) != 0;
    return bad && !w->careless ? -1 : 0;
}
static int w_save(void *self) { (void)self; return 0; }
static int w_restore(void *self, const void *d, size_t n) { (void)self; (void)d; (void)n; return 0; }

static const metro_observable_api api = {METRO_ABI_VERSION, w_create, w_destroy, w_measure, w_finish,
                                         w_save, w_restore, NULL, NULL, NULL};

static const metro_param_decl params[] = {
    {"file", METRO_PARAM_STRING, "writer.txt", 0, 0, NULL, "", "the file it writes"},
    {"open_in", METRO_PARAM_CHOICE, "finish", 0, 0, "create|finish", "", "where it opens the file"},
    {"pad", METRO_PARAM_INT, "0", 0, 100000000, NULL, "", "bytes written after the line"},
    {"careless", METRO_PARAM_BOOL, "false", 0, 0, NULL, "", "ignore the result of fclose, as a careless plugin does"},
    METRO_PARAM_END};

METRO_EXPORT const metro_plugin *metro_plugin_entry(void)
{
    static const metro_plugin d = {METRO_ABI_VERSION, METRO_KIND_OBSERVABLE, "writer", "0.0.1",
                                   "writes one line (tests)", params, &api, NULL, 0};
    return &d;
}
