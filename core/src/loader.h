/* core/src/loader.h — finding, opening and checking plugins.
 *
 * Search order: each folder of $METRO_PLUGIN_PATH (colon-separated), then
 * <folder of libmetro>/metro/plugins (the build tree and an install alike),
 * then the configured install prefix.  A plugin NAME is the file NAME.so;
 * the first folder that has it wins.  Every plugin opened in a process is
 * kept in one registry: a second file claiming a name already loaded is
 * refused as a duplicate.
 */
#ifndef METRO__LOADER_H
#define METRO__LOADER_H

#include "metro/metro.h"

typedef struct metro__plugin {
    const metro_plugin *d;
    char *path;
    void *dl;
} metro__plugin;

/* Open the plugin file `path` and check it (entry symbol, ABI version,
 * kind, name == file stem, required fields and functions, duplicates).
 * METRO_OK and *out (owned by the registry), or METRO_EUSAGE with a message
 * naming the file. */
int metro__plugin_open(const char *path, const metro__plugin **out, metro_error *err);
/* The parameters a resume may change (.resumable, ABI 8; NULL when none),
 * and whether key is one of them. */
const char *const *metro__plugin_resumable(const metro_plugin *d);
int metro__plugin_resumable_has(const metro_plugin *d, const char *key);

/* Find plugin `name` of kind `kind` (0: any) along the search path. */
int metro__plugin_find(const char *name, metro_kind kind, const metro__plugin **out,
                       metro_error *err);

/* The search folders, NULL-terminated, owned by the loader. */
const char *const *metro__plugin_dirs(void);

/* Open every plugin found along the search path, in folder order, calling
 * fn for each (shadowed names and broken files are reported through err
 * and skipped).  Returns the number found. */
int metro__plugin_each(void (*fn)(const metro__plugin *p, void *user), void *user,
                       metro_error *err);

const char *metro__kind_name(metro_kind k);

/* The path of a file of p's name later in the search path, which p hides
 * (a user's plugin named like a bundled one), or NULL. */
const char *metro__plugin_shadows(const metro__plugin *p);

/* "no potential plugin 'x' found (did you mean 'y'?); available: ...;
 * searched: DIR DIR (no such folder) ...", after metro__plugin_each has
 * opened what there is. */
void metro__plugin_not_found(const char *name, metro_kind kind, char *buf, size_t n);

/* The keys the core reads in a plugin's section besides its parameters
 * (plugin; species for a potential term; every for an observable), which
 * no plugin may declare. */
const char *const *metro__core_keys(metro_kind k);

#endif
