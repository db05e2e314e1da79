/* core/src/config.h — the INI file: reading (inih), overrides, validation
 * against declared parameters, and writing the resolved config.
 *
 * Every error is one line `FILE:LINE: [section] key: what is wrong (what is
 * allowed)`; all errors of a file are collected before giving up.
 */
#ifndef METRO__CONFIG_H
#define METRO__CONFIG_H

#include <stdio.h>

#include "metro/metro.h"

typedef struct metro__entry {
    char *section, *key, *value;
    const char *file;   /* the config path, or "--set" */
    int line;           /* line in file, or index of the --set */
    int used;           /* matched a declared parameter */
} metro__entry;

typedef struct metro__config {
    char *path;               /* as given, for messages */
    metro__entry *e;
    int n, cap;
    char **sections;          /* in order of first appearance */
    int *section_line;
    int nsections;
} metro__config;

/* Parse INI text (path names it in messages).  METRO_OK, or METRO_EUSAGE
 * with every syntax error and duplicate key appended to err; *out is set
 * either way (free with metro__config_free). */
int metro__config_parse(const char *path, const char *text, metro__config **out,
                        metro_error *err);

/* Apply "section.key=value" (the key is after the last '.' before '=').
 * index is its 1-based position on the command line, for messages. */
int metro__config_set(metro__config *c, const char *assignment, int index, metro_error *err);

/* The entry for section/key, or NULL. */
metro__entry *metro__config_find(metro__config *c, const char *section, const char *key);

/* Line of the section header (first key), 0 if the section is absent. */
int metro__config_section_line(const metro__config *c, const char *section);

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

/* The host-API getters (abort on an undeclared name: a plugin bug). */
long metro__param_int(const metro_params *p, const char *name);
double metro__param_real(const metro_params *p, const char *name);
int metro__param_bool(const metro_params *p, const char *name);
const char *metro__param_string(const metro_params *p, const char *name);
const double *metro__param_list(const metro_params *p, const char *name, int *n);

#endif
