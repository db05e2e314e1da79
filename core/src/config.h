/* core/src/config.h — the INI file: reading (inih), overrides, validation
 * against declared parameters, and writing the resolved config.
 *
 * Every error is one line `FILE:LINE: [section] key: what is wrong (what is
 * allowed)`, or for a value given on the command line
 * `--set #N SECTION.KEY=VALUE: [section] key: ...`; all errors of a file are
 * collected before giving up.
 *
 * A line may hold up to METRO__CONFIG_MAX_LINE characters (inih's own
 * buffer is far shorter; config.c works around it); a NUL byte is an error.
 */
#ifndef METRO__CONFIG_H
#define METRO__CONFIG_H

#include <stdio.h>

#include "metro/metro.h"

/* The longest line accepted (1 MiB): far beyond any list a run needs, short
 * enough that a file that is not a config is refused at once. */
#define METRO__CONFIG_MAX_LINE (1 << 20)

typedef struct metro__entry {
    char *section, *key, *value;
    const char *file;   /* the config path, or "--set" */
    int line;           /* line in file, or index of the --set */
    char *where;        /* for messages: "FILE:LINE" or "--set #N SECTION.KEY=VALUE" */
    int used;           /* matched a declared parameter */
} metro__entry;

typedef struct metro__config {
    char *path;               /* as given, for messages */
    metro__entry *e;
    int n, cap;
    char **sections;          /* in order of first appearance */
    int *section_line;        /* its header's line; 0: made by a --set only */
    char **section_where;     /* "FILE:LINE" of the header, or the --set that made it */
    int nsections;
} metro__config;

/* Parse `size` bytes of INI text (path names it in messages).  METRO_OK, or
 * METRO_EUSAGE with every syntax error, duplicate key, NUL byte and
 * overlong line appended to err (METRO_ERUN: out of memory in inih); *out is
 * set either way (free with metro__config_free). */
int metro__config_parse_text(const char *path, const char *text, size_t size,
                             metro__config **out, metro_error *err);

/* The same for a NUL-terminated text (which therefore holds no NUL byte). */
int metro__config_parse(const char *path, const char *text, metro__config **out,
                        metro_error *err);

/* Read the file `path` and parse it as above; a file that cannot be read is
 * METRO_EUSAGE "PATH: cannot be read: why".  *out is set either way. */
int metro__config_read(const char *path, metro__config **out, metro_error *err);

/* Apply "section.key=value" (the key is after the last '.' before '='),
 * replacing a value of the file.  index is its 1-based position among the
 * --set arguments: messages name it as "--set #index ASSIGNMENT".  METRO_OK,
 * or METRO_EUSAGE (no SECTION.KEY=VALUE shape, a control character other
 * than a tab, or a value config.ini could not hold:
 * metro__config_value_problem) with the message appended to err. */
/* label: where the assignment came from, for messages (NULL: the --set
 * itself, "--set #index TEXT") */
int metro__config_set(metro__config *c, const char *assignment, int index, const char *label, metro_error *err);

/* 1 when s holds what one line of config.ini cannot keep: a control
 * character other than a tab (a line break starts another line). */
int metro__config_has_control(const char *s);

/* Why the resolved config.ini could not hold `value` as a key's value and
 * read it back the same, or NULL when it can: a control character other
 * than a tab, a blank at either end, a ';' or '#' after a blank, quotes
 * around it.  The one rule for a --set's value and a plugin's default. */
const char *metro__config_value_problem(const char *value);

/* "SECTION.KEY" as metro__config_set reads the n bytes at a ("run .
 * sweeps" is run.sweeps), into out (size n_out): 1, or 0 and "" where
 * they name no section and key (or out is too short). */
int metro__config_name(const char *a, size_t n, char *out, size_t n_out);

/* The entry for section/key, or NULL. */
metro__entry *metro__config_find(metro__config *c, const char *section, const char *key);
/* A resume's --set may not touch [run] systems, scan or output: an
 * ensemble's layout is its folders', a resume continues where it is, and
 * config.ini would record what never applied.  METRO_EUSAGE naming the
 * --set, else METRO_OK. */
int metro__config_resume_check(metro__config *c, metro_error *err);

/* Line of the section header (first key) in the file; 0 if the file has no
 * such section (absent, or made by a --set only). */
int metro__config_section_line(const metro__config *c, const char *section);

/* Where a message about the section as a whole should point: "FILE:LINE"
 * of its header, "--set #N ASSIGNMENT" if only a --set made it, or the
 * file's path if it is absent.  Owned by c. */
const char *metro__config_section_where(const metro__config *c, const char *section);

void metro__config_free(metro__config *c);

/* Validated values of one section. */
struct metro_params {
    char *section;
    const metro_param_decl *decls;
    int n;
    struct metro__value {
        char *text;          /* given or default */
        int given;
        long i;
        double r;
        int b;
        double *list;
        int nlist;
    } *v;
};

/* Validate section against decls (and the core's extra keys `extra`, which
 * are accepted without being part of the params): unknown keys, types,
 * ranges, choices, required parameters.  On success *out holds every value,
 * defaults filled in.  Errors are appended to err; returns METRO_OK or
 * METRO_EUSAGE. */
int metro__params_build(metro__config *c, const char *section, const metro_param_decl *decls,
                        const char *const *extra, metro_params **out, metro_error *err);
void metro__params_free(metro_params *p);

/* Write "key = value" lines of p, each preceded by its doc as a comment. */
void metro__params_write(FILE *f, const metro_params *p);

/* Describe the allowed values of a declaration ("real in [0, 1], K"). */
void metro__decl_allowed(const metro_param_decl *d, char *buf, size_t n);

/* A plugin's declarations, checked once when it is loaded, so that its
 * mistakes are never blamed on a user's config: each name a key a config
 * can hold ([A-Za-z_][A-Za-z0-9_]*), given once, not one of the core's
 * keys `reserved`; a known type; a finite range with min <= max; choices
 * "a|b" without an empty one; a default that its own rule accepts and
 * config.ini can hold (metro__config_value_problem); a doc and a unit
 * without a control character (config.ini's comment line).  0, or -1 with
 * what is wrong (naming the parameter) in why. */
int metro__decls_check(const metro_param_decl *decls, const char *const *reserved, char *why, size_t n);

/* The host-API getters (an undeclared name or the wrong type is a plugin
 * bug: the process exits 1 naming it). */
long metro__param_int(const metro_params *p, const char *name);
double metro__param_real(const metro_params *p, const char *name);
int metro__param_bool(const metro_params *p, const char *name);
const char *metro__param_string(const metro_params *p, const char *name);
const double *metro__param_list(const metro_params *p, const char *name, int *n);

#endif
