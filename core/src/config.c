/* core/src/config.c — the INI file (see config.h). */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- reading ------------------------------------------------------------ */

/* inih does the INI syntax; this file hands it the text one line at a time
 * through its stream API, which is where what inih cannot do is done:
 *  - line numbers: inih as Debian builds it passes none to the handler, but
 *    it calls the handler right after the line it reports is read, so the
 *    reader's count is that line's number;
 *  - long lines: inih copies each line into a buffer of `num` bytes (200 in
 *    Debian's build), too short for a list of temperatures.  A key line that
 *    does not fit reaches inih as "k=" with its key and value kept aside
 *    here (r->long_key, r->long_value) and swapped back in by the handler,
 *    both treated exactly as inih treats them (blanks trimmed, a `;` after a
 *    blank starts a comment).  Only METRO__CONFIG_MAX_LINE bounds a line;
 *  - section names: inih keeps at most 49 characters of one (two long
 *    [observable ...] names would merge).  The reader reads each header
 *    itself, with inih's rules, keeps the name (r->section) and hands inih
 *    "[s]"; the handler takes the section from the reader;
 *  - NUL bytes, which would end a C string early: the text comes with its
 *    size, and a NUL byte is an error naming its line.
 * Leading blanks are dropped before inih sees a line: an indented key is a
 * key (inih would take it for the continuation of the previous value, which
 * metro does not use). */
static char *norm_section(const char *s);
static void add_section(metro__config *c, const char *section, const char *where, int line);
static char *where_of(const char *file, int line, const char *assignment);

typedef struct reader {
    const char *p, *end;   /* the text not yet read */
    int line;
    metro__config *c;
    metro_error *err;
    int status;
    char *section;         /* the current section, normalised; NULL before the first */
    char *long_key;        /* this line's key and value when the line is too */
    char *long_value;      /* long for inih's buffer */
    int lost;              /* after a broken header: its keys belong to no
                              section, and are not blamed on the one before */
} reader;

/* A line inih would refuse, reported here at its line and in order (inih
 * gives only its first, after everything else), then handed to inih as a
 * blank line. */
static void syntax_error(reader *r, char *str, int num, const char *what)
{
    r->status = metro__fail(r->err, METRO_EUSAGE, "%s:%d: syntax error: %s (expected '[section]', 'key = value' or a ; "
                                                  "comment)",
                            r->c->path, r->line, what);
    snprintf(str, (size_t)num, "\n");
}

static int is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Where inih's key or value scan stops: at one of `stop` (NULL: none), or
 * at a ';' that follows a blank (an inline comment), or at the end. */
static const char *scan_to(const char *s, const char *e, const char *stop)
{
    int was_blank = 0;
    for (; s < e; ++s) {
        if (stop && strchr(stop, *s)) break;
        if (was_blank && *s == ';') break;
        was_blank = isspace((unsigned char)*s);
    }
    return s;
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = strndup(s, n);
    if (!d) abort(); /* the core's out-of-memory policy (util.h) */
    return d;
}

/* A "[section]" line: note it, and hand inih a header it can hold, or one
 * it refuses as it would have refused the original. */
static void read_header(reader *r, char *str, int num, const char *s, const char *e)
{
    const char *close = scan_to(s + 1, e, "]");
    if (close == e || *close != ']') {
        r->lost = 1;
        syntax_error(r, str, num, "a section header without its ']' (the keys below it are not read)");
        return;
    }
    char *name = xstrndup(s + 1, (size_t)(close - s - 1));
    free(r->section);
    r->section = norm_section(name);
    r->lost = 0;
    free(name);
    if (*r->section) {
        /* a section given twice would merge silently: one place a section */
        for (int i = 0; i < r->c->nsections; ++i)
            if (!strcmp(r->c->sections[i], r->section)) {
                r->status = metro__fail(r->err, METRO_EUSAGE, "%s:%d: [%s]: given twice (first at line %d): give "
                                                              "each section once",
                                        r->c->path, r->line, r->section, r->c->section_line[i]);
                break;
            }
        char *where = where_of(r->c->path, r->line, NULL);
        add_section(r->c, r->section, where, r->line);
        free(where);
    }
    snprintf(str, (size_t)num, "[s]\n");
}

/* A key line too long for inih: key and value aside, "k=" to inih. */
static void read_long(reader *r, char *str, int num, const char *s, const char *e)
{
    str[0] = '\n';
    str[1] = 0;
    if (*s == ';' || *s == '#') return; /* a long comment is just cut */
    if (e - s > METRO__CONFIG_MAX_LINE) {
        r->status = metro__fail(r->err, METRO_EUSAGE,
                                "%s:%d: line longer than %d characters (the most a line may hold)",
                                r->c->path, r->line, METRO__CONFIG_MAX_LINE);
        return;
    }
    const char *sep = scan_to(s, e, "=:");
    if (sep == e || *sep == ';') {
        /* no '=' before the end or a comment: inih's syntax error */
        syntax_error(r, str, num, "a line without '='");
        return;
    }
    const char *k = sep;
    while (k > s && isspace((unsigned char)k[-1])) --k;
    /* inih looks for the comment before it skips the blanks: in "k = ;x"
     * the ';' follows a blank and starts a comment, in "k =;x" it does not */
    const char *v = sep + 1, *ve = scan_to(v, e, NULL);
    while (v < ve && isspace((unsigned char)*v)) ++v;
    while (ve > v && isspace((unsigned char)ve[-1])) --ve;
    r->long_key = xstrndup(s, (size_t)(k - s));
    r->long_value = xstrndup(v, (size_t)(ve - v));
    snprintf(str, (size_t)num, "%s=\n", k > s ? "k" : "");
}

/* Whether [s, e) has its '=' (or ':') before the end or a comment, as
 * inih asks of a key line (the end itself is not read: it may be the
 * buffer's). */
static int is_assignment(const char *s, const char *e)
{
    const char *sep = scan_to(s, e, "=:");
    return sep < e && (*sep == '=' || *sep == ':');
}

static char *read_line(char *str, int num, void *stream)
{
    reader *r = stream;
    free(r->long_key);
    free(r->long_value);
    r->long_key = r->long_value = NULL;
    if (r->p >= r->end || num < 8) return NULL;
    const char *s = r->p, *nl = memchr(s, '\n', (size_t)(r->end - s));
    const char *e = nl ? nl : r->end;
    r->p = nl ? nl + 1 : r->end;
    r->line++;
    if (memchr(s, 0, (size_t)(e - s))) {
        /* binary data: what follows would only add noise */
        r->status = metro__fail(r->err, METRO_EUSAGE, "%s:%d: NUL byte (the file is not text)",
                                r->c->path, r->line);
        r->p = r->end;
        return NULL;
    }
    if (r->line == 1 && e - s >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* UTF-8 BOM */
    while (s < e && is_blank(*s)) ++s;
    if (s < e && *s == '[' && e - s <= METRO__CONFIG_MAX_LINE) {
        read_header(r, str, num, s, e);
    } else if (e - s + 2 > num) {
        read_long(r, str, num, s, e);
    } else if (s < e && *s != ';' && *s != '#' && !is_assignment(s, e)) {
        /* inih's syntax error: no '=' (or ':') before the end or a comment */
        char shown[48];
        snprintf(shown, sizeof shown, "'%.*s'%s", (int)(e - s > 40 ? 40 : e - s), s, e - s > 40 ? "..." : "");
        for (char *c = shown; *c; ++c)
            if (iscntrl((unsigned char)*c)) *c = '?';
        char what[96];
        snprintf(what, sizeof what, "%s has no '='", shown);
        syntax_error(r, str, num, what);
    } else {
        memcpy(str, s, (size_t)(e - s));
        str[e - s] = '\n';
        str[e - s + 1] = 0;
    }
    return str;
}

static char *norm_section(const char *s)
{
    /* "observable   energy" -> "observable energy" */
    char *d = metro__xmalloc(strlen(s) + 1), *o = d;
    int space = 0;
    for (; *s; ++s) {
        if (isspace((unsigned char)*s)) { space = 1; continue; }
        if (space && o != d) *o++ = ' ';
        space = 0;
        *o++ = *s;
    }
    *o = 0;
    return d;
}

/* "FILE:LINE", or for a --set (file "--set", line its index) the argument
 * itself: "--set #2 system.particles=abc". */
static char *where_of(const char *file, int line, const char *assignment)
{
    char *w = NULL;
    int n = assignment ? asprintf(&w, "--set #%d %s", line, assignment)
                       : asprintf(&w, "%s:%d", file, line);
    if (n < 0) abort(); /* out of memory: the core's policy (util.h) */
    /* a message is one line: a control character of a --set shows as '?' */
    for (char *s = w; *s; ++s)
        if (iscntrl((unsigned char)*s) && *s != '\t') *s = '?';
    return w;
}

/* where: as where_of(); line: in the file, 0 for a section that only a
 * --set makes. */
static void add_section(metro__config *c, const char *section, const char *where, int line)
{
    for (int i = 0; i < c->nsections; ++i)
        if (!strcmp(c->sections[i], section)) return;
    size_t n = (size_t)c->nsections + 1;
    c->sections = metro__xrealloc(c->sections, sizeof(char *) * n);
    c->section_line = metro__xrealloc(c->section_line, sizeof(int) * n);
    c->section_where = metro__xrealloc(c->section_where, sizeof(char *) * n);
    c->sections[c->nsections] = metro__strdup(section);
    c->section_line[c->nsections] = line;
    c->section_where[c->nsections++] = metro__strdup(where);
}

/* where: as where_of(), taken over by the entry. */
static int put(metro__config *c, const char *section, const char *key, const char *value,
               const char *file, int line, char *where, int replace, metro_error *err)
{
    metro__entry *old = metro__config_find(c, section, key);
    if (old && !replace) {
        int rc = metro__fail(err, METRO_EUSAGE, "%s: [%s] %s: given twice (first at line %d)",
                             where, section, key, old->line);
        free(where);
        return rc;
    }
    if (old) {
        free(old->value);
        free(old->where);
        old->value = metro__strdup(value);
        old->file = file;
        old->line = line;
        old->where = where;
        return METRO_OK;
    }
    if (c->n == c->cap) c->e = metro__xrealloc(c->e, sizeof *c->e * (size_t)(c->cap = c->cap ? 2 * c->cap : 32));
    add_section(c, section, where, replace ? 0 : line);
    metro__entry *e = &c->e[c->n++];
    e->section = metro__strdup(section);
    e->key = metro__strdup(key);
    e->value = metro__strdup(value);
    e->file = file;
    e->line = line;
    e->where = where;
    e->used = 0;
    return METRO_OK;
}

/* What other INI dialects read as a comment or as quoting would become
 * part of the value here, silently (`output = runs/a # mine` made a folder
 * of that name, `"a b"` one with the quotes): refused in the file, in a
 * --set and in a plugin's default alike. */
static int has_hash(const char *value)
{
    for (const char *v = value; *v; ++v)
        if (*v == '#' && v > value && (v[-1] == ' ' || v[-1] == '\t')) return 1;
    return 0;
}

static int is_quoted(const char *value)
{
    const size_t vl = strlen(value);
    return vl >= 2 && (value[0] == '"' || value[0] == '\'') && value[vl - 1] == value[0];
}

int metro__config_has_control(const char *s)
{
    for (; *s; ++s)
        if (iscntrl((unsigned char)*s) && *s != '\t') return 1;
    return 0;
}

const char *metro__config_value_problem(const char *value)
{
    const size_t vl = strlen(value);
    if (metro__config_has_control(value))
        return "a control character or line break (only text and tabs are allowed)";
    if (vl && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[vl - 1])))
        return "a blank at its start or end, which config.ini drops";
    if (*scan_to(value, value + vl, NULL))
        return "a ';' after a blank would start a comment in config.ini (a value cannot hold it)";
    if (has_hash(value))
        return "a '#' after a blank, which config.ini refuses (other INI dialects read a comment there)";
    if (is_quoted(value)) return "a value in quotes, which config.ini refuses (the quotes would be part of the value)";
    return NULL;
}

static int on_entry(void *user, const char *section, const char *name, const char *value)
{
    reader *r = user;
    (void)section; /* inih's copy may be cut short: the reader has it whole */
    if (r->long_key) name = r->long_key;
    if (r->long_value) value = r->long_value;
    const char *sec = r->section ? r->section : "";
    const int hash = has_hash(value), quoted = is_quoted(value);
    if (r->lost) {
        /* under a broken header: reported there */
    } else if (hash || quoted) {
        r->status = metro__fail(r->err, METRO_EUSAGE,
                                "%s:%d: [%s] %s: '%s' %s", r->c->path, r->line, sec, name, value,
                                hash ? "holds ' #', which starts no comment here (only a ';' after a blank does): write "
                                       "the comment with ';', or on a line of its own"
                                     : "is in quotes, which would be part of the value: write it without them");
    } else if (!*sec) {
        r->status = metro__fail(r->err, METRO_EUSAGE,
                                "%s:%d: %s: key outside any section (start with [run])",
                                r->c->path, r->line, name);
    } else if (put(r->c, sec, name, value, r->c->path, r->line, where_of(r->c->path, r->line, NULL), 0,
                   r->err)) {
        r->status = METRO_EUSAGE;
    }
    return 1; /* keep going: report every error */
}

int metro__config_parse_text(const char *path, const char *text, size_t size, metro__config **out,
                             metro_error *err)
{
    metro__config *c = metro__xcalloc(1, sizeof *c);
    c->path = metro__strdup(path);
    *out = c;
    reader r = {text, text + size, 0, c, err, METRO_OK, NULL, NULL, NULL, 0};
    int rc = ini_parse_stream(read_line, &r, on_entry, &r);
    free(r.section);
    free(r.long_key);
    free(r.long_value);
    if (rc > 0)
        return metro__fail(err, METRO_EUSAGE,
                           "%s:%d: syntax error (expected '[section]', 'key = value' or a ; comment)",
                           path, rc);
    if (rc < 0) return metro__fail(err, METRO_ERUN, "%s: cannot be parsed (out of memory)", path);
    return r.status;
}

int metro__config_parse(const char *path, const char *text, metro__config **out, metro_error *err)
{
    return metro__config_parse_text(path, text, strlen(text), out, err);
}

int metro__config_read(const char *path, metro__config **out, metro_error *err)
{
    size_t size = 0;
    *out = NULL;
    char *text = metro__read_file(path, &size);
    if (!text) {
        metro__config *c = metro__xcalloc(1, sizeof *c);
        c->path = metro__strdup(path);
        *out = c;
        return metro__fail(err, METRO_EUSAGE, "%s: cannot be read: %s", path, strerror(errno));
    }
    int rc = metro__config_parse_text(path, text, size, out, err);
    free(text);
    return rc;
}

/* The section and key the n bytes at a name, as a --set reads them: the
 * section before the last '.', its blanks as a header's (norm_section),
 * the key after it, trimmed.  Both NULL without a '.'; else to free. */
static void split_name(const char *a, size_t n, char **sec, char **key)
{
    const char *dot = NULL;
    for (const char *s = a; s < a + n; ++s)
        if (*s == '.') dot = s;
    *sec = *key = NULL;
    if (!dot) return;
    char *raw = strndup(a, (size_t)(dot - a));
    if (!raw) abort();
    *sec = norm_section(raw);
    free(raw);
    const char *k = dot + 1, *e = a + n;
    while (k < e && isspace((unsigned char)*k)) ++k;
    while (e > k && isspace((unsigned char)e[-1])) --e;
    *key = strndup(k, (size_t)(e - k));
    if (!*key) abort();
}

int metro__config_name(const char *a, size_t n, char *out, size_t n_out)
{
    char *sec, *key;
    split_name(a, n, &sec, &key);
    const int ok = sec && *sec && *key && (size_t)snprintf(out, n_out, "%s.%s", sec, key) < n_out;
    if (!ok && n_out) out[0] = 0;
    free(sec);
    free(key);
    return ok;
}

int metro__config_set(metro__config *c, const char *assignment, int index, const char *label, metro_error *err)
{
    char *where = label ? metro__strdup(label) : where_of("--set", index, assignment);
    const char *eq = strchr(assignment, '=');
    char *nsec = NULL, *k = NULL;
    if (eq) split_name(assignment, (size_t)(eq - assignment), &nsec, &k);
    const char *v = eq ? eq + 1 : "";
    while (isspace((unsigned char)*v)) ++v;
    char *val = strdup(v); /* trailing blanks go too: config.ini could not keep them */
    if (!val) abort();
    for (char *e = val + strlen(val); e > val && isspace((unsigned char)e[-1]);) *--e = 0;
    /* a control character would not survive the resolved config.ini (a
     * line break there starts a new line), so the run could not be redone */
    int ctrl = metro__config_has_control(assignment);
    int rc;
    /* what the resolved config.ini could not hold as given */
    int bad_section = nsec && (strpbrk(nsec, "[]") || *scan_to(nsec, nsec + strlen(nsec), NULL));
    const char *bad_value = metro__config_value_problem(val);
    /* config.ini must hold it on one line: "[section]", "key = value" */
    size_t longest = nsec && k ? strlen(nsec) + 2 : 0;
    if (k && strlen(k) + strlen(val) + 3 > longest) longest = strlen(k) + strlen(val) + 3;
    if (longest > METRO__CONFIG_MAX_LINE) {
        if (label)
            rc = metro__fail(err, METRO_EUSAGE, "%s: longer than a line of config.ini may be (%d characters)", label,
                             METRO__CONFIG_MAX_LINE);
        else
            rc = metro__fail(err, METRO_EUSAGE, "--set #%d %.40s...: longer than a line of config.ini may be (%d characters)",
                             index, assignment, METRO__CONFIG_MAX_LINE);
        free(where);
    } else if (!eq || !nsec || !*nsec || !*k) {
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: expected SECTION.KEY=VALUE (e.g. --set sampler.temperature=0.5)", where);
        free(where);
    } else if (ctrl) {
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: a control character or line break (only text and tabs are allowed)", where);
        free(where);
    } else if (bad_section) {
        rc = metro__fail(err, METRO_EUSAGE,
                         "%s: [%s]: a section name cannot hold '[', ']' or a ';' after a blank", where, nsec);
        free(where);
    } else if (bad_value) {
        rc = metro__fail(err, METRO_EUSAGE, "%s: [%s] %s: %s", where, nsec, k, bad_value);
        free(where);
    } else {
        rc = put(c, nsec, k, val, "--set", index, where, 1, err);
    }
    free(val);
    free(k);
    free(nsec);
    return rc;
}

int metro__config_resume_check(metro__config *c, metro_error *err)
{
    static const char *const fixed[] = {"systems", "scan", "output"};
    for (int k = 0; k < 3; ++k) {
        const metro__entry *e = metro__config_find(c, "run", fixed[k]);
        if (e && !strcmp(e->file, "--set"))
            return metro__fail(err, METRO_EUSAGE, "%s: [run] %s: a resume cannot change it (%s)", e->where, fixed[k],
                               k < 2 ? "the run directory's folders are its systems; start a new run for another layout"
                                     : "a resume continues in the run directory itself");
    }
    /* another plugin is another chain: said as such, not as the unknown
     * keys the old plugin's parameters become for the new one */
    for (int i = 0; i < c->n; ++i)
        if (!strcmp(c->e[i].key, "plugin") && !strcmp(c->e[i].file, "--set"))
            return metro__fail(err, METRO_EUSAGE, "%s: [%s] plugin: a resume cannot change it (another plugin makes "
                                                  "another chain; start a new run)",
                               c->e[i].where, c->e[i].section);
    return METRO_OK;
}

metro__entry *metro__config_find(metro__config *c, const char *section, const char *key)
{
    for (int i = 0; i < c->n; ++i)
        if (!strcmp(c->e[i].section, section) && !strcmp(c->e[i].key, key)) return &c->e[i];
    return NULL;
}

int metro__config_section_line(const metro__config *c, const char *section)
{
    for (int i = 0; i < c->nsections; ++i)
        if (!strcmp(c->sections[i], section)) return c->section_line[i];
    return 0;
}

const char *metro__config_section_where(const metro__config *c, const char *section)
{
    for (int i = 0; i < c->nsections; ++i)
        if (!strcmp(c->sections[i], section)) return c->section_where[i];
    return c->path;
}

void metro__config_free(metro__config *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; ++i) {
        free(c->e[i].section);
        free(c->e[i].key);
        free(c->e[i].value);
        free(c->e[i].where);
    }
    for (int i = 0; i < c->nsections; ++i) {
        free(c->sections[i]);
        free(c->section_where[i]);
    }
    free(c->sections);
    free(c->section_where);
    free(c->section_line);
    free(c->e);
    free(c->path);
    free(c);
}

/* ---- validation --------------------------------------------------------- */

static const char *type_name(metro_param_type t)
{
    switch (t) {
    case METRO_PARAM_INT: return "integer";
    case METRO_PARAM_REAL: return "real";
    case METRO_PARAM_BOOL: return "boolean";
    case METRO_PARAM_CHOICE: return "one of";
    case METRO_PARAM_STRING: return "text";
    case METRO_PARAM_REAL_LIST: return "list of reals";
    }
    return "?";
}

void metro__decl_allowed(const metro_param_decl *d, char *buf, size_t n)
{
    const char *unit = d->unit && *d->unit ? d->unit : NULL;
    snprintf(buf, n, "an unknown type %d", (int)d->type); /* the loader refuses it: never shown to a user */
    switch (d->type) {
    case METRO_PARAM_INT:
        snprintf(buf, n, "integer in [%.0f, %.0f]", d->min, d->max);
        break;
    case METRO_PARAM_REAL:
    case METRO_PARAM_REAL_LIST:
        snprintf(buf, n, "%s in [%g, %g]%s%s", type_name(d->type), d->min, d->max, unit ? " " : "",
                 unit ? unit : "");
        return;
    case METRO_PARAM_BOOL:
        snprintf(buf, n, "true or false");
        break;
    case METRO_PARAM_CHOICE:
        snprintf(buf, n, "one of %s", d->choices);
        break;
    case METRO_PARAM_STRING:
        snprintf(buf, n, "text");
        break;
    }
    if (unit) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, " %s", unit);
    }
}

/* 0, or why not: "is not a number", "is not a finite number" (nan, inf)
 * or "is beyond double precision" (1e-400, 1e400: a number, but not one
 * a double holds).  Decimal only: strtod also reads hexadecimal
 * (0x1p-3 = 0.125), which an integer key and a physicist's config never
 * mean, so "0x10" is no number here, as it is none to an integer key. */
static const char *parse_real(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end)) ++end;
    if (end == s || *end) return "is not a number";
    const char *d = s + strspn(s, " \t+-");
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) return "is not a decimal number";
    if (errno == ERANGE) return "is beyond double precision";
    if (!isfinite(v)) return "is not a finite number";
    *out = v;
    return 0;
}

static int choice_ok(const char *choices, const char *v)
{
    size_t lv = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == lv && !strncmp(p, v, l)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* Parse text into v per d; on error write "what is wrong" into why. */
static int parse_value(const metro_param_decl *d, const char *text, struct metro__value *v,
                       char *why, size_t n)
{
    switch (d->type) {
    case METRO_PARAM_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(text, &end, 10);
        while (isspace((unsigned char)*end)) ++end;
        if (end == text || *end) {
            snprintf(why, n, "'%s' is not an integer", text);
            return -1;
        }
        if (errno == ERANGE) {
            snprintf(why, n, "'%s' is out of range", text);
            return -1;
        }
        if ((double)x < d->min || (double)x > d->max) {
            snprintf(why, n, "%lld is out of range", x);
            return -1;
        }
        v->i = (long)x;
        v->r = (double)x;
        return 0;
    }
    case METRO_PARAM_REAL: {
        const char *bad = parse_real(text, &v->r);
        if (bad) {
            snprintf(why, n, "'%s' %s", text, bad);
            return -1;
        }
        if (v->r < d->min || v->r > d->max) {
            snprintf(why, n, "%g is out of range", v->r);
            return -1;
        }
        return 0;
    }
    case METRO_PARAM_BOOL: {
        static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
        for (int i = 0; i < 4; ++i) {
            if (!strcasecmp(text, yes[i])) { v->b = 1; return 0; }
            if (!strcasecmp(text, no[i])) { v->b = 0; return 0; }
        }
        snprintf(why, n, "'%s' is not a boolean", text);
        return -1;
    }
    case METRO_PARAM_CHOICE:
        if (!choice_ok(d->choices, text)) {
            snprintf(why, n, "'%s' is not allowed", text);
            return -1;
        }
        return 0;
    case METRO_PARAM_STRING:
        return 0;
    case METRO_PARAM_REAL_LIST: {
        char *copy = metro__strdup(text);
        v->nlist = 0;
        v->list = NULL;
        /* items separated by commas or blanks; an empty item between two
         * commas (or before or after one) is a typo, not a skip: "1,,-1"
         * must not quietly become two species */
        int item = 0;
        for (char *c = copy;; ++item) {
            char *comma = strchr(c, ',');
            if (comma) *comma = '\0';
            if (!c[strspn(c, " \t")] && (comma || item > 0)) {
                snprintf(why, n, "item %d of the list is empty (items are separated by one comma or by blanks)",
                         item + 1);
                free(copy);
                free(v->list);
                v->list = NULL;
                v->nlist = 0;
                return -1;
            }
            if (!comma) break;
            c = comma + 1;
        }
        /* the commas are now '\0': restore them as blanks for the scan */
        for (size_t k = 0, l = strlen(text); k < l; ++k)
            if (!copy[k]) copy[k] = ' ';
        char *save = NULL;
        for (char *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
            double x;
            const char *bad = parse_real(tok, &x);
            if (bad) {
                snprintf(why, n, "'%s' in the list %s", tok, bad);
                free(copy);
                return -1;
            }
            if (x < d->min || x > d->max) {
                snprintf(why, n, "%g in the list is out of range", x);
                free(copy);
                return -1;
            }
            v->list = metro__xrealloc(v->list, sizeof(double) * (v->nlist + 1));
            v->list[v->nlist++] = x;
        }
        free(copy);
        /* an empty default means "not given" (an optional list) */
        if (!v->nlist && (*text || d->default_value == NULL)) {
            snprintf(why, n, "the list is empty");
            return -1;
        }
        return 0;
    }
    }
    snprintf(why, n, "bad declaration");
    return -1;
}

int metro__decls_check(const metro_param_decl *decls, const char *const *reserved, char *why, size_t n)
{
    for (int i = 0; decls && decls[i].name; ++i) {
        const metro_param_decl *d = &decls[i];
        if (!metro__identifier(d->name)) {
            snprintf(why, n, "parameter '%.64s': not a key a config can hold (letters, digits and _, not starting "
                             "with a digit)", d->name);
            return -1;
        }
        for (int j = 0; j < i; ++j)
            if (!strcmp(decls[j].name, d->name)) {
                snprintf(why, n, "parameter '%s' is declared twice", d->name);
                return -1;
            }
        for (int j = 0; reserved && reserved[j]; ++j)
            if (!strcmp(reserved[j], d->name)) {
                snprintf(why, n, "parameter '%s' is one of the core's own keys of the section", d->name);
                return -1;
            }
        if (d->type < METRO_PARAM_INT || d->type > METRO_PARAM_REAL_LIST) {
            snprintf(why, n, "parameter '%s' has the unknown type %d (allowed: METRO_PARAM_INT ... "
                             "METRO_PARAM_REAL_LIST)", d->name, (int)d->type);
            return -1;
        }
        if (!d->doc) {
            snprintf(why, n, "parameter '%s' is declared without a doc line", d->name);
            return -1;
        }
        /* the doc and the unit are one comment line of the resolved
         * config.ini: a line break there writes lines of their own */
        if (metro__config_has_control(d->doc) || (d->unit && metro__config_has_control(d->unit))) {
            snprintf(why, n, "parameter '%s': its %s holds a control character or line break (it is written on one "
                             "comment line of config.ini: only text and tabs are allowed)",
                     d->name, metro__config_has_control(d->doc) ? "doc" : "unit");
            return -1;
        }
        const int ranged = d->type == METRO_PARAM_INT || d->type == METRO_PARAM_REAL || d->type == METRO_PARAM_REAL_LIST;
        if (ranged && !(isfinite(d->min) && isfinite(d->max) && d->min <= d->max)) {
            snprintf(why, n, "parameter '%s' has the range [%g, %g] (it needs finite ends, min <= max)", d->name,
                     d->min, d->max);
            return -1;
        }
        if (d->type == METRO_PARAM_CHOICE) {
            const char *c = d->choices;
            int empty = !c || !*c;
            for (const char *p = c; !empty && p && *p; ++p) empty |= *p == '|' && (p == c || p[1] == '|' || !p[1]);
            if (empty) {
                snprintf(why, n, "parameter '%s' is a choice without its choices, or with an empty one ('%s')",
                         d->name, c ? c : "");
                return -1;
            }
            /* a value is read trimmed, so "soft | hard" was a choice no
             * config could give (its default alone was refused) */
            for (const char *p = c;;) {
                const char *bar = strchr(p, '|');
                char *one = xstrndup(p, bar ? (size_t)(bar - p) : strlen(p));
                const char *bad = metro__config_value_problem(one);
                if (bad) {
                    char shown[72];
                    snprintf(shown, sizeof shown, "%.64s", c);
                    for (char *q = shown; *q; ++q)
                        if (iscntrl((unsigned char)*q)) *q = '?';
                    snprintf(why, n, "parameter '%s': its choices '%s' hold one no config can give: %s (choices are "
                                     "separated by '|' without blanks: \"a|b|c\")", d->name, shown, bad);
                    free(one);
                    return -1;
                }
                free(one);
                if (!bar) break;
                p = bar + 1;
            }
        }
        /* a default is written to the resolved config.ini as its value,
         * from which a re-run reads it back */
        const char *unwritable = d->default_value ? metro__config_value_problem(d->default_value) : NULL;
        if (unwritable) {
            char shown[72];
            snprintf(shown, sizeof shown, "%.64s", d->default_value);
            for (char *c = shown; *c; ++c)
                if (iscntrl((unsigned char)*c)) *c = '?';
            snprintf(why, n, "parameter '%s': its default '%s' would not read back from config.ini: %s", d->name, shown,
                     unwritable);
            return -1;
        }
        if (d->default_value) {
            struct metro__value v = {0};
            char bad[200];
            const int rc = parse_value(d, d->default_value, &v, bad, sizeof bad);
            free(v.list);
            if (rc) {
                char allowed[512];
                metro__decl_allowed(d, allowed, sizeof allowed);
                snprintf(why, n, "parameter '%s': its default '%.64s' is invalid: %s (%s)", d->name, d->default_value,
                         bad, allowed);
                return -1;
            }
        }
    }
    return 0;
}

static int count_decls(const metro_param_decl *d)
{
    int n = 0;
    while (d && d[n].name) ++n;
    return n;
}

static void suggest(const metro_param_decl *decls, const char *const *extra, const char *key,
                    char *buf, size_t n)
{
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; decls && decls[i].name; ++i) {
        int dd = metro__edit_distance(key, decls[i].name);
        if (dd < bd) { bd = dd; best = decls[i].name; }
    }
    for (int i = 0; extra && extra[i]; ++i) {
        int dd = metro__edit_distance(key, extra[i]);
        if (dd < bd) { bd = dd; best = extra[i]; }
    }
    size_t l = 0;
    buf[0] = 0;
    if (best) l += (size_t)snprintf(buf, n, "did you mean '%s'? ", best);
    l += (size_t)snprintf(buf + l, n - l, "allowed: ");
    int first = 1;
    for (int i = 0; extra && extra[i] && l < n; ++i, first = 0)
        l += (size_t)snprintf(buf + l, n - l, "%s%s", first ? "" : ", ", extra[i]);
    for (int i = 0; decls && decls[i].name && l < n; ++i, first = 0)
        l += (size_t)snprintf(buf + l, n - l, "%s%s", first ? "" : ", ", decls[i].name);
}

int metro__params_build(metro__config *c, const char *section, const metro_param_decl *decls,
                        const char *const *extra, metro_params **out, metro_error *err)
{
    int status = METRO_OK;
    metro_params *p = metro__xcalloc(1, sizeof *p);
    p->section = metro__strdup(section);
    p->decls = decls;
    p->n = count_decls(decls);
    p->v = metro__xcalloc((size_t)p->n + 1, sizeof *p->v);
    char why[256], allowed[1024];

    /* unknown keys */
    for (int i = 0; i < c->n; ++i) {
        metro__entry *e = &c->e[i];
        if (strcmp(e->section, section)) continue;
        int known = 0;
        for (int j = 0; extra && extra[j]; ++j) known |= !strcmp(extra[j], e->key);
        for (int j = 0; j < p->n; ++j) known |= !strcmp(decls[j].name, e->key);
        if (!known) {
            suggest(decls, extra, e->key, allowed, sizeof allowed);
            status = metro__fail(err, METRO_EUSAGE, "%s: [%s] %s: unknown key (%s)", e->where,
                                 section, e->key, allowed);
        }
        e->used = 1;
    }
    /* declared parameters: given or default */
    for (int j = 0; j < p->n; ++j) {
        const metro_param_decl *d = &decls[j];
        metro__entry *e = metro__config_find(c, section, d->name);
        metro__decl_allowed(d, allowed, sizeof allowed);
        const char *text = e ? e->value : d->default_value;
        if (!text) {
            /* at the section's header (or the --set that made it) */
            status = metro__fail(err, METRO_EUSAGE, "%s: [%s] %s: required but not given (%s: %s)",
                                 metro__config_section_where(c, section), section, d->name, allowed,
                                 d->doc ? d->doc : "");
            continue;
        }
        p->v[j].text = metro__strdup(text);
        p->v[j].given = e != NULL;
        if (parse_value(d, text, &p->v[j], why, sizeof why)) {
            if (e)
                status = metro__fail(err, METRO_EUSAGE, "%s: [%s] %s: %s (%s)", e->where, section,
                                     d->name, why, allowed);
            else
                status = metro__fail(err, METRO_EUSAGE,
                                     "%s: [%s] %s: default '%s' is invalid: %s (plugin bug)",
                                     c->path, section, d->name, text, why);
        }
    }
    if (status) {
        metro__params_free(p);
        p = NULL;
    }
    *out = p;
    return status;
}

void metro__params_free(metro_params *p)
{
    if (!p) return;
    for (int j = 0; j < p->n; ++j) {
        free(p->v[j].text);
        free(p->v[j].list);
    }
    free(p->v);
    free(p->section);
    free(p);
}

void metro__params_write(FILE *f, const metro_params *p)
{
    char allowed[1024];
    for (int j = 0; j < p->n; ++j) {
        const metro_param_decl *d = &p->decls[j];
        metro__decl_allowed(d, allowed, sizeof allowed);
        fprintf(f, "; %s (%s)\n", d->doc ? d->doc : "", allowed);
        /* "k = ;x" would read back as a comment; "k =;x" reads back ";x" */
        fprintf(f, "%s =%s%s\n", d->name, p->v[j].text[0] == ';' ? "" : " ", p->v[j].text);
    }
}

/* ---- getters ------------------------------------------------------------ */

static const struct metro__value *get(const metro_params *p, const char *name,
                                      metro_param_type type)
{
    for (int j = 0; j < p->n; ++j)
        if (!strcmp(p->decls[j].name, name)) {
            if (p->decls[j].type != type &&
                !(type == METRO_PARAM_STRING && p->decls[j].type == METRO_PARAM_CHOICE)) {
                /* a plugin's own mistake, which no config can cause or mend: the
                 * process ends as a failed allocation does (exit 1), with the
                 * message, never abort() */
                fprintf(stderr, "metro: [%s] %s: the section's plugin reads it as another type than it declares "
                                "(a plugin bug)\n", p->section, name);
                exit(METRO_ERUN);
            }
            return &p->v[j];
        }
    fprintf(stderr, "metro: [%s] %s: the section's plugin reads a parameter it does not declare (a plugin bug)\n",
            p->section, name);
    exit(METRO_ERUN);
}

long metro__param_int(const metro_params *p, const char *name)
{
    return get(p, name, METRO_PARAM_INT)->i;
}
double metro__param_real(const metro_params *p, const char *name)
{
    return get(p, name, METRO_PARAM_REAL)->r;
}
int metro__param_bool(const metro_params *p, const char *name)
{
    return get(p, name, METRO_PARAM_BOOL)->b;
}
const char *metro__param_string(const metro_params *p, const char *name)
{
    return get(p, name, METRO_PARAM_STRING)->text;
}
const double *metro__param_list(const metro_params *p, const char *name, int *n)
{
    const struct metro__value *v = get(p, name, METRO_PARAM_REAL_LIST);
    if (n) *n = v->nlist;
    return v->list;
}
