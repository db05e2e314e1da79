/* core/src/frames_read.c — a frame of a trajectory file read back, for a
 * run's initial configuration: GSD (the file layer's versions 1 and 2, the
 * HOOMD schema, as HOOMD-blue and gsd write them) and extended XYZ (ASE's
 * and metro's own).  Every value is checked as it is read: a damaged or
 * foreign file gives a message naming the file and the frame, line or
 * chunk, never a crash or a value no check would catch (NaN).  The
 * formats as metro writes them: frames.c.
 */
#define _GNU_SOURCE
#include "frames.h"
#include "frames_io.h"

#include <ctype.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ---- reading -------------------------------------------------------------- */

void metro__frame_in_free(metro__frame_in *f)
{
    free(f->xyz);
    free(f->type);
    free(f->charge);
    free(f->names);
    free(f->diameter);
    free(f->bond);
    memset(f, 0, sizeof *f);
}

/* s[0..len) fit for a message: a file may hold binary data or a terminal's
 * control codes, so any byte but printable ASCII shows as \xNN; cut with
 * "..." to fit out (n >= 4). */
static const char *shown(const char *s, size_t len, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)s[i];
        char one[8];
        int w = c >= 0x20 && c < 0x7f ? snprintf(one, sizeof one, "%c", c) : snprintf(one, sizeof one, "\\x%02x", c);
        if (k + (size_t)w + 4 > n) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        memcpy(out + k, one, (size_t)w);
        k += (size_t)w;
    }
    out[k] = 0;
    return out;
}

const char *metro__frames_shown(const char *s, char *out, size_t n)
{
    return shown(s, strlen(s), out, n);
}

/* 1 when s[0..len) has a byte no line of text holds (NUL, control codes
 * but tab and line ends). */
static int binary(const char *s, size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f) return 1;
    }
    return 0;
}

/* want (negative from the end) to a frame index, set in out with the
 * frame count, or -1 with a message. */
static long pick(const char *path, long want, long frames, metro__frame_in *out, char *err, size_t nerr)
{
    long f = want < 0 ? frames + want : want;
    if (frames == 0) return ferr(err, nerr, "%s: holds no complete frame", path), -1;
    if (f < 0 || f >= frames)
        return ferr(err, nerr, "%s: initial_frame %ld does not exist: the file holds %ld frames%s (allowed: 0 to %ld, or -1 to -%ld from the end)",
                    path, want, frames, out->partial_tail ? " and an incomplete one after them" : "", frames - 1, frames),
               -1;
    out->index = f;
    out->frames = frames;
    return f;
}

typedef struct gsd_reader {
    int fd;
    const char *path;
    uint64_t size;
    gsd_entry *idx;
    uint64_t nidx;
    char (*names)[64]; /* the name list: every name, as files from HOOMD may log many */
    int nnames;
} gsd_reader;

static int gsd_name_id(const gsd_reader *g, const char *name)
{
    for (int i = 0; i < g->nnames; ++i)
        if (!strcmp(g->names[i], name)) return i;
    return -1;
}

/* The entry of chunk name in frame f, else frame 0's (the schema's
 * defaults), else NULL. */
static const gsd_entry *gsd_find(const gsd_reader *g, uint64_t f, const char *name)
{
    int id = gsd_name_id(g, name);
    if (id < 0) return NULL;
    const gsd_entry *zero = NULL;
    for (uint64_t k = 0; k < g->nidx; ++k) {
        if (g->idx[k].id != id) continue;
        if (g->idx[k].frame == f) return &g->idx[k];
        if (g->idx[k].frame == 0) zero = &g->idx[k];
    }
    return zero;
}

/* Read a chunk's data (heap); checks that it lies inside the file. */
static void *gsd_data(const gsd_reader *g, const gsd_entry *e, long frame, char *err, size_t nerr)
{
    size_t ts = type_size(e->type);
    double bytes = (double)e->N * e->M * (double)ts;
    if (!ts || e->location <= 0 || bytes > 1e12 || (double)e->location + bytes > (double)g->size) {
        ferr(err, nerr, "%s: frame %ld: chunk %s is damaged (type %u, %llu x %u at %lld in a file of %llu bytes)", g->path,
             frame, g->names[e->id], e->type, (unsigned long long)e->N, e->M, (long long)e->location,
             (unsigned long long)g->size);
        return NULL;
    }
    void *p = malloc((size_t)bytes ? (size_t)bytes : 1);
    if (!p) {
        ferr(err, nerr, "%s: out of memory for chunk %s", g->path, g->names[e->id]);
        return NULL;
    }
    if (pread_all(g->fd, p, (size_t)bytes, (uint64_t)e->location)) {
        ferr(err, nerr, "%s: frame %ld: cannot read chunk %s: %s", g->path, frame, g->names[e->id], why());
        free(p);
        return NULL;
    }
    return p;
}

static double gsd_value(const void *p, unsigned type, size_t k)
{
    switch (type) {
    case T_UINT8: return ((const uint8_t *)p)[k];
    case T_UINT16: return ((const uint16_t *)p)[k];
    case T_UINT32: return ((const uint32_t *)p)[k];
    case T_UINT64: return (double)((const uint64_t *)p)[k];
    case T_INT8: return ((const int8_t *)p)[k];
    case T_INT16: return ((const int16_t *)p)[k];
    case T_INT32: return ((const int32_t *)p)[k];
    case T_INT64: return (double)((const int64_t *)p)[k];
    case T_FLOAT: return ((const float *)p)[k];
    default: return ((const double *)p)[k];
    }
}

/* The value of a chunk of one value (particles/N, bonds/N,
 * configuration/step); a chunk of none would be read past its end. */
static int gsd_scalar(const gsd_reader *g, const gsd_entry *e, long frame, double *v, char *err, size_t nerr)
{
    if (e->N < 1 || e->M < 1)
        return ferr(err, nerr, "%s: frame %ld: chunk %s holds no value (%llu x %u; allowed: one value)", g->path, frame,
                    g->names[e->id], (unsigned long long)e->N, e->M);
    void *p = gsd_data(g, e, frame, err, nerr);
    if (!p) return -1;
    *v = gsd_value(p, e->type, 0);
    free(p);
    return 0;
}

/* A per-particle chunk the frame has for its N particles: in the frame
 * itself it must be N values; frame 0's of another N is not this frame's
 * (the schema's default then, as gsd.hoomd reads it). */
static int gsd_per_particle(const gsd_entry *e, long frame, int N, uint32_t M)
{
    if (!e) return 0;
    if (e->frame != (uint64_t)frame && (e->N != (uint64_t)N || e->M != M)) return 0;
    return 1;
}

/* A float of the file as the decimal it was written from: the shortest
 * that rounds to it (0.8f, 0.800000011920929 as a double, is 0.8), so that
 * species taken from a GSD file are the ones declared when it was written,
 * and a run started from its own trajectory has its own diameters. */
static double float_as_written(float f)
{
    char buf[32];
    for (int digits = 1; digits <= 9; ++digits) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        const double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return f;
}

/* particles/charge or particles/diameter of the frame's N particles as
 * doubles, each finite (a NaN passes every comparison made with it
 * later); *out stays NULL where the frame has none. */
static int gsd_reals(const gsd_reader *g, const gsd_entry *e, long frame, int N, double **out, char *err, size_t nerr)
{
    if (!gsd_per_particle(e, frame, N, 1)) return 0;
    if (e->N != (uint64_t)N || e->M != 1)
        return ferr(err, nerr, "%s: frame %ld: %s is %llu x %u values, not one for each of the %d particles", g->path, frame,
                    g->names[e->id], (unsigned long long)e->N, e->M, N);
    void *p = gsd_data(g, e, frame, err, nerr);
    if (!p) return -1;
    double *v = malloc(sizeof(double) * (size_t)(N ? N : 1));
    if (!v) {
        free(p);
        return ferr(err, nerr, "%s: out of memory for %d particles", g->path, N);
    }
    float last = NAN;
    double last_d = NAN;
    for (int i = 0; i < N; ++i) {
        v[i] = gsd_value(p, e->type, (size_t)i);
        if (e->type == T_FLOAT && isfinite(v[i])) {
            /* one species' values repeat: one conversion each */
            const float f = ((const float *)p)[i];
            if (f != last) last = f, last_d = float_as_written(f);
            v[i] = last_d;
        }
        if (!isfinite(v[i])) {
            ferr(err, nerr, "%s: frame %ld: particle %d: %s is %g, not a finite number", g->path, frame, i, g->names[e->id],
                 v[i]);
            free(p);
            free(v);
            return -1;
        }
    }
    free(p);
    *out = v;
    return 0;
}

/* Why a file is no GSD file, with a hint where its start looks like an
 * XYZ file's (a count line). */
static void not_gsd(const char *path, int fd, uint64_t size, char *err, size_t nerr)
{
    char head[64] = {0};
    size_t n = size < sizeof head - 1 ? (size_t)size : sizeof head - 1;
    if (size == 0) {
        ferr(err, nerr, "%s: not a GSD file (it is empty)", path);
        return;
    }
    int xyz = 0;
    if (pread_all(fd, head, n, 0) == 0) {
        const char *p = head;
        while (*p == ' ' || *p == '\t') ++p;
        const char *d = p;
        while (isdigit((unsigned char)*p)) ++p;
        while (*p == ' ' || *p == '\t' || *p == '\r') ++p;
        xyz = p > d && *p == '\n';
    }
    ferr(err, nerr, "%s: not a GSD file (no GSD header)%s", path,
         xyz ? "; it looks like an extended XYZ file (its first line is a particle count): name it .xyz or .extxyz" : "");
}

static int gsd_read(const char *path, long want, metro__frame_in *out, char *err, size_t nerr)
{
    gsd_reader g;
    memset(&g, 0, sizeof g);
    g.path = path;
    g.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g.fd < 0) return ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
    int rc = -1;
    void *pos = NULL, *tid = NULL, *types = NULL, *bg = NULL;
    char *nl = NULL;
    struct stat sb;
    gsd_header h;
    if (fstat(g.fd, &sb) != 0) {
        ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
        goto done;
    }
    g.size = (uint64_t)sb.st_size;
    if (g.size < sizeof h || pread_all(g.fd, &h, sizeof h, 0) || h.magic != GSD_MAGIC) {
        not_gsd(path, g.fd, g.size, err, nerr);
        goto done;
    }
    unsigned major = h.gsd_version >> 16;
    if (major != 1 && major != 2) {
        ferr(err, nerr, "%s: GSD file-layer version %u.%u is not supported (1.x and 2.x are)", path, major, h.gsd_version & 0xffff);
        goto done;
    }
    if (strncmp(h.schema, "hoomd", sizeof h.schema)) {
        char s[128];
        ferr(err, nerr, "%s: GSD schema '%s', not 'hoomd'", path,
             shown(h.schema, strnlen(h.schema, sizeof h.schema), s, sizeof s));
        goto done;
    }
    /* each bound against what is left of the file, so that no sum wraps */
    uint64_t ie = h.index_allocated_entries, ne = h.namelist_allocated_entries;
    if (ie > (1ull << 30) || ne > (1ull << 30) || h.index_location > g.size || ie * 32 > g.size - h.index_location ||
        h.namelist_location > g.size || ne * 64 > g.size - h.namelist_location) {
        ferr(err, nerr, "%s: damaged GSD file (its index or name list lies past its end)", path);
        goto done;
    }
    size_t nlb = (size_t)ne * 64;
    nl = calloc(1, nlb + 1);
    g.idx = malloc((size_t)ie * sizeof *g.idx + 1);
    if (!nl || !g.idx || pread_all(g.fd, nl, nlb, h.namelist_location) ||
        pread_all(g.fd, g.idx, (size_t)ie * sizeof *g.idx, h.index_location)) {
        ferr(err, nerr, "%s: cannot read its index: %s", path, why());
        goto done;
    }
    /* at most one name in 2 bytes (v2) or 64 (v1), and 65536: an entry's
     * id is 16 bits */
    g.names = calloc(nlb / 2 + 1 < 65536 ? nlb / 2 + 1 : 65536, sizeof *g.names);
    if (!g.names) {
        ferr(err, nerr, "%s: out of memory for its name list", path);
        goto done;
    }
    if (major == 1) {
        for (size_t k = 0; k < nlb / 64 && nl[k * 64] && g.nnames < 65536; ++k)
            snprintf(g.names[g.nnames++], 64, "%.63s", nl + k * 64);
    } else {
        for (size_t k = 0; k < nlb && nl[k] && g.nnames < 65536;) {
            snprintf(g.names[g.nnames++], 64, "%.63s", nl + k);
            k += strlen(nl + k) + 1;
        }
    }
    /* the specification keeps the index in frame order: the last entry
     * counts the frames */
    for (; g.nidx < ie && g.idx[g.nidx].location != 0; ++g.nidx)
        if ((g.nidx && g.idx[g.nidx].frame < g.idx[g.nidx - 1].frame) || g.idx[g.nidx].frame >= (1ull << 62)) {
            ferr(err, nerr, "%s: damaged GSD file (index entry %llu names frame %llu, after frame %llu)", path,
                 (unsigned long long)g.nidx, (unsigned long long)g.idx[g.nidx].frame,
                 (unsigned long long)(g.nidx ? g.idx[g.nidx - 1].frame : 0));
            goto done;
        }
    long frames = g.nidx ? (long)g.idx[g.nidx - 1].frame + 1 : 0;
    if (frames == 0) {
        ferr(err, nerr, "%s: holds no complete frame (its index lists none)", path);
        goto done;
    }
    long f = pick(path, want, frames, out, err, nerr);
    if (f < 0) {
        rc = METRO__FRAMES_NO_FRAME;
        goto done;
    }
    const gsd_entry *eN = gsd_find(&g, (uint64_t)f, "particles/N"), *ep = gsd_find(&g, (uint64_t)f, "particles/position");
    const gsd_entry *et = gsd_find(&g, (uint64_t)f, "particles/typeid"), *en = gsd_find(&g, (uint64_t)f, "particles/types");
    const gsd_entry *eq = gsd_find(&g, (uint64_t)f, "particles/charge"), *es = gsd_find(&g, (uint64_t)f, "configuration/step");
    const gsd_entry *ed = gsd_find(&g, (uint64_t)f, "particles/diameter"), *ebn = gsd_find(&g, (uint64_t)f, "bonds/N");
    const gsd_entry *ebg = gsd_find(&g, (uint64_t)f, "bonds/group");
    if (!eN) {
        ferr(err, nerr, "%s: frame %ld: no particles/N", path, f);
        goto done;
    }
    double n;
    if (gsd_scalar(&g, eN, f, &n, err, nerr)) goto done;
    if (!(n >= 0 && n < 2147483647.0) || n != floor(n)) {
        ferr(err, nerr, "%s: frame %ld: particles/N = %g (allowed: a whole number, 0 to 2147483646)", path, f, n);
        goto done;
    }
    int N = (int)n;
    out->particles = N;
    if (!ep || ep->N != (uint64_t)N || ep->M != 3 || (ep->type != T_FLOAT && ep->type != T_DOUBLE)) {
        ferr(err, nerr, "%s: frame %ld: particles/position is missing or not %d x 3 floats", path, f, N);
        goto done;
    }
    if (!(pos = gsd_data(&g, ep, f, err, nerr))) goto done;
    out->xyz = malloc(sizeof(float) * 3 * (size_t)(N ? N : 1));
    out->type = calloc((size_t)(N ? N : 1), sizeof(int));
    if (!out->xyz || !out->type) {
        ferr(err, nerr, "%s: out of memory for %d particles", path, N);
        goto done;
    }
    /* finite, and within float's range: a double beyond it has no float
     * (the conversion is undefined), and a NaN would pass the cell and
     * overlap checks */
    for (int i = 0; i < N; ++i)
        for (int k = 0; k < 3; ++k) {
            double x = gsd_value(pos, ep->type, 3 * (size_t)i + (size_t)k);
            if (!(fabs(x) <= FLT_MAX)) {
                ferr(err, nerr, "%s: frame %ld: particle %d: particles/position has %c = %g, not a finite number%s", path, f, i,
                     "xyz"[k], x, isfinite(x) ? " in single precision (|x| up to 3.4e+38)" : "");
                goto done;
            }
            out->xyz[3 * i + k] = (float)x;
        }
    /* types: rows of characters; the schema's default is one type "A" */
    if (en) {
        if (en->N < 1 || en->N > 65536 || en->M < 1 || (en->type != T_INT8 && en->type != T_UINT8)) {
            ferr(err, nerr, "%s: frame %ld: particles/types is type %u, %llu x %u (allowed: 1 to 65536 names, rows of int8 "
                            "characters)",
                 path, f, en->type, (unsigned long long)en->N, en->M);
            goto done;
        }
        if (!(types = gsd_data(&g, en, f, err, nerr))) goto done;
        out->ntypes = (int)en->N;
        out->explicit_types = 1;
        out->names = calloc(en->N, sizeof *out->names);
        if (!out->names) {
            ferr(err, nerr, "%s: out of memory for %llu type names", path, (unsigned long long)en->N);
            goto done;
        }
        for (uint64_t t = 0; t < en->N; ++t)
            snprintf(out->names[t], 64, "%.*s", (int)(en->M < 63 ? en->M : 63), (char *)types + t * en->M);
    } else {
        out->ntypes = 1;
        out->names = calloc(1, sizeof *out->names);
        if (!out->names) {
            ferr(err, nerr, "%s: out of memory", path);
            goto done;
        }
        snprintf(out->names[0], 64, "A");
    }
    if (gsd_per_particle(et, f, N, 1)) {
        if (et->N != (uint64_t)N || et->M != 1) {
            ferr(err, nerr, "%s: frame %ld: particles/typeid is not %d values", path, f, N);
            goto done;
        }
        if (!(tid = gsd_data(&g, et, f, err, nerr))) goto done;
        for (int i = 0; i < N; ++i) {
            double t = gsd_value(tid, et->type, (size_t)i);
            if (!(t >= 0 && t < out->ntypes) || t != floor(t)) {
                ferr(err, nerr, "%s: frame %ld: particle %d has typeid %g, but particles/types names %d types (allowed: 0 to %d)",
                     path, f, i, t, out->ntypes, out->ntypes - 1);
                goto done;
            }
            out->type[i] = (int)t;
        }
    }
    if (gsd_reals(&g, eq, f, N, &out->charge, err, nerr) || gsd_reals(&g, ed, f, N, &out->diameter, err, nerr)) goto done;
    /* bonds: bonds/N (schema default 0), then bonds/group of that many
     * pairs; whether they make chains metro can hold is initial.c's to
     * say */
    if (ebn) {
        double nb;
        if (gsd_scalar(&g, ebn, f, &nb, err, nerr)) goto done;
        if (!(nb >= 0 && nb < 2147483647.0) || nb != floor(nb)) {
            ferr(err, nerr, "%s: frame %ld: bonds/N = %g (allowed: a whole number, 0 to 2147483646)", path, f, nb);
            goto done;
        }
        out->bonds = (long)nb;
    }
    if (out->bonds > 0) {
        if (!ebg || ebg->N != (uint64_t)out->bonds || ebg->M != 2 || ebg->type == T_FLOAT || ebg->type == T_DOUBLE) {
            ferr(err, nerr, "%s: frame %ld: bonds/N = %ld, but bonds/group is missing or not %ld x 2 integers", path, f,
                 out->bonds, out->bonds);
            goto done;
        }
        if (!(bg = gsd_data(&g, ebg, f, err, nerr))) goto done;
        out->bond = malloc(sizeof(long long) * 2 * (size_t)out->bonds);
        if (!out->bond) {
            ferr(err, nerr, "%s: out of memory for %ld bonds", path, out->bonds);
            goto done;
        }
        for (size_t k = 0; k < 2 * (size_t)out->bonds; ++k) {
            double v = gsd_value(bg, ebg->type, k);
            /* a uint64 beyond long long has none (undefined conversion);
             * the range against the particles is initial.c's to say */
            if (!(fabs(v) <= 1e18)) {
                ferr(err, nerr, "%s: frame %ld: bond %zu joins particle %.0f, but the frame has %d particles", path, f, k / 2, v,
                     N);
                goto done;
            }
            out->bond[k] = (long long)v;
        }
    }
    out->step = -1;
    if (es) {
        double s;
        if (gsd_scalar(&g, es, f, &s, err, nerr)) goto done;
        if (s >= 0 && s <= 1e18) out->step = (long long)s; /* else: not a step a run can have recorded */
    }
    rc = 0;
done:
    free(pos), free(tid), free(types), free(nl), free(g.idx), free(g.names), free(bg);
    close(g.fd);
    return rc;
}

/* ---- extended XYZ: reading ------------------------------------------------ */

/* The value of key=value in an extended-XYZ comment line (quotes removed),
 * on the heap, or NULL when absent (a bare word is no key: a plain XYZ
 * comment may be any text). */
static char *xyz_key(const char *line, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = line; *p;) {
        while (isspace((unsigned char)*p)) ++p;
        if (!*p) break; /* trailing blanks: nothing more (found by ASan) */
        const char *k = p;
        while (*p && *p != '=' && !isspace((unsigned char)*p)) ++p;
        size_t l = (size_t)(p - k);
        const char *v = p, *ve = p;
        int has = *p == '=';
        if (has) {
            ++p;
            if (*p == '"' || *p == '\'') {
                char qc = *p++;
                v = p;
                while (*p && *p != qc) ++p;
                ve = p;
                if (*p) ++p;
            } else {
                v = p;
                while (*p && !isspace((unsigned char)*p)) ++p;
                ve = p;
            }
        }
        if (has && l == kl && !strncasecmp(k, key, kl)) return strndup(v, (size_t)(ve - v));
        if (p == k) ++p;
    }
    return NULL;
}

/* Columns of interest in a Properties spec: first column of each. */
typedef struct xyz_cols {
    long species, pos, charge, metro_species, total;
} xyz_cols;

static int xyz_properties(const char *spec, xyz_cols *c, char *err, size_t nerr, const char *where)
{
    c->species = c->pos = c->charge = c->metro_species = -1;
    c->total = 0;
    char *buf = strdup(spec), *save = NULL, s[256], w[96], w2[96];
    if (!buf) return ferr(err, nerr, "%s: out of memory", where);
    shown(spec, strlen(spec), s, sizeof s);
    int rc = 0;
    for (char *name = strtok_r(buf, ":", &save); name && !rc; name = strtok_r(NULL, ":", &save)) {
        char *type = strtok_r(NULL, ":", &save), *count = strtok_r(NULL, ":", &save), *e = NULL;
        if (!type || !count) {
            rc = ferr(err, nerr, "%s: Properties=%s is not name:type:count triples (%s has no %s)", where, s,
                      shown(name, strlen(name), w, sizeof w), type ? "count" : "type");
            break;
        }
        long k = strtol(count, &e, 10);
        if (*e || k < 1 || k > 1000000) {
            rc = ferr(err, nerr, "%s: Properties=%s is not name:type:count triples (%s: count '%s'; allowed: 1 to 1000000)",
                      where, s, shown(name, strlen(name), w, sizeof w), shown(count, strlen(count), w2, sizeof w2));
            break;
        }
        if (strlen(type) != 1 || !strchr("SRILsril", type[0])) {
            rc = ferr(err, nerr, "%s: Properties=%s: column %s has type '%s' (allowed: S, R, I, L)", where, s,
                      shown(name, strlen(name), w, sizeof w), shown(type, strlen(type), w2, sizeof w2));
            break;
        }
        if (!strcasecmp(name, "species") || !strcasecmp(name, "symbols")) c->species = c->total;
        else if ((!strcasecmp(name, "pos") || !strcasecmp(name, "positions")) && k == 3) c->pos = c->total;
        else if ((!strcasecmp(name, "charge") || !strcasecmp(name, "charges") || !strcasecmp(name, "initial_charges")) && k == 1)
            c->charge = c->total;
        else if (!strcasecmp(name, "metro_species")) c->metro_species = c->total;
        c->total += k;
    }
    free(buf);
    if (!rc && c->pos < 0) rc = ferr(err, nerr, "%s: Properties=%s has no pos:R:3 column", where, s);
    return rc;
}

/* A real of an XYZ column: all of the token, finite; 0 or -1. */
static int xyz_real(const char *tok, double *v)
{
    char *e;
    *v = strtod(tok, &e);
    return *e || !isfinite(*v) ? -1 : 0;
}

static int xyz_read(const char *path, long want, metro__frame_in *out, char *err, size_t nerr)
{
    FILE *f = fopen(path, "r");
    if (!f) return ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
    char *line = NULL, *spec = NULL, *sweep = NULL;
    size_t cap = 0;
    long *start = NULL, *startline = NULL, nfr = 0, capfr = 0, lineno = 0, lastn = 0;
    int rc = -1;
    /* a binary file under an XYZ name: say what it is rather than quote
     * its bytes */
    uint64_t magic = 0;
    if (fread(&magic, 1, sizeof magic, f) == sizeof magic && magic == GSD_MAGIC) {
        ferr(err, nerr, "%s: is a GSD file (it starts with GSD's magic number), not extended XYZ: name it .gsd", path);
        goto done;
    }
    rewind(f);
    /* pass 1: where each complete frame starts */
    for (;;) {
        long at = ftell(f);
        ssize_t l = getline(&line, &cap, f);
        if (l < 0) break;
        ++lineno;
        char *end;
        while (l > 0 && isspace((unsigned char)line[l - 1])) line[--l] = 0;
        if (l == 0) continue; /* blank lines between frames */
        long n = strtol(line, &end, 10);
        while (isspace((unsigned char)*end)) ++end;
        if (end != line + l || n < 0 || n > 2147483647L) {
            char s[128], after[160] = "";
            if (nfr)
                snprintf(after, sizeof after, " after the %ld particles of frame %ld (count on line %ld)", lastn, nfr - 1,
                         startline[nfr - 1]);
            ferr(err, nerr, "%s:%ld: expected the particle count of frame %ld%s, found '%s'%s (allowed: a whole number, 0 to "
                            "2147483647)",
                 path, lineno, nfr, after, shown(line, (size_t)l, s, 44), binary(line, (size_t)l) ? ", not a line of text" : "");
            goto done;
        }
        long first = lineno, got = 0;
        ssize_t last = 0;
        int metros = 0; /* the comment line metro writes (its sweep= key) */
        while (got < n + 1 && (last = getline(&line, &cap, f)) >= 0) {
            if (!got) metros = strstr(line, " sweep=") != NULL || !strncmp(line, "sweep=", 6);
            ++got, ++lineno;
        }
        /* every line metro writes ends in a newline: in a file of metro's,
         * a last line without one after complete frames is a frame cut
         * inside that line (its last number perhaps cut short), not a
         * frame.  A file made by hand often lacks its final newline. */
        int cut_line = metros && got == n + 1 && last > 0 && line[last - 1] != '\n' && nfr > 0;
        if (got < n + 1 || cut_line) {
            /* a frame cut short after complete ones: a run killed while
             * writing it (the caller says so); alone, a wrong count */
            if (nfr == 0 && !ferror(f)) {
                char rest[128];
                if (got == 0) snprintf(rest, sizeof rest, "ends right after it");
                else
                    snprintf(rest, sizeof rest, "ends after %ld particle line%s, at line %ld", got - 1, got == 2 ? "" : "s",
                             lineno);
                ferr(err, nerr,
                     "%s:%ld: holds no complete frame: the count line says %ld particles, but the file %s (a frame is "
                     "the count line, a comment line and one line per particle)",
                     path, first, n, rest);
                goto done;
            }
            out->partial_tail = 1;
            break;
        }
        if (nfr == capfr) {
            capfr = capfr ? 2 * capfr : 64;
            long *s2 = realloc(start, sizeof *start * (size_t)capfr);
            if (s2) start = s2;
            long *l2 = s2 ? realloc(startline, sizeof *startline * (size_t)capfr) : NULL;
            if (l2) startline = l2;
            if (!s2 || !l2) {
                ferr(err, nerr, "%s: out of memory", path);
                goto done;
            }
        }
        start[nfr] = at;
        startline[nfr++] = first;
        lastn = n;
    }
    if (ferror(f)) {
        ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
        goto done;
    }
    if (nfr == 0) {
        ferr(err, nerr, "%s: holds no complete frame (%s)", path, lineno ? "only blank lines" : "it is empty");
        goto done;
    }
    long fi = pick(path, want, nfr, out, err, nerr);
    if (fi < 0) {
        rc = METRO__FRAMES_NO_FRAME;
        goto done;
    }
    out->step = -1;
    /* pass 2: that frame */
    fseek(f, start[fi], SEEK_SET);
    lineno = startline[fi] - 1;
    ssize_t l;
    do {
        l = getline(&line, &cap, f);
        ++lineno;
    } while (l >= 0 && strspn(line, " \t\r\n") == (size_t)l);
    int N = (int)strtol(line, NULL, 10);
    out->particles = N;
    if (getline(&line, &cap, f) < 0) goto done;
    ++lineno;
    char where[4200], v[64];
    snprintf(where, sizeof where, "%s:%ld (frame %ld)", path, lineno, fi);
    xyz_cols c;
    spec = xyz_key(line, "Properties");
    if (xyz_properties(spec ? spec : "species:S:1:pos:R:3", &c, err, nerr, where)) goto done;
    if ((sweep = xyz_key(line, "sweep"))) {
        char *e;
        long long s = strtoll(sweep, &e, 10);
        if (!*e && *sweep && s >= 0 && s < LLONG_MAX) out->step = s; /* else not a sweep a run recorded */
    }
    out->xyz = malloc(sizeof(float) * 3 * (size_t)(N ? N : 1));
    out->type = calloc((size_t)(N ? N : 1), sizeof(int));
    out->names = calloc(METRO_MAX_SPECIES * 8, sizeof *out->names);
    if (c.charge >= 0) out->charge = malloc(sizeof(double) * (size_t)(N ? N : 1));
    if (!out->xyz || !out->type || !out->names || (c.charge >= 0 && !out->charge)) {
        ferr(err, nerr, "%s: out of memory for %d particles", path, N);
        goto done;
    }
    long namecol = c.metro_species >= 0 ? c.metro_species : c.species;
    for (int i = 0; i < N; ++i) {
        if (getline(&line, &cap, f) < 0) goto done;
        ++lineno;
        /* any number of columns: only those metro reads are kept */
        const char *xyz[3] = {NULL, NULL, NULL}, *q = NULL, *name = "A";
        long nt = 0;
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save), ++nt) {
            if (nt >= c.pos && nt < c.pos + 3) xyz[nt - c.pos] = t;
            if (nt == c.charge) q = t;
            if (nt == namecol) name = t;
        }
        if (nt < c.total) {
            char s[256];
            ferr(err, nerr, "%s:%ld: particle %d: %ld columns, Properties=%s asks %ld", path, lineno, i, nt,
                 shown(spec ? spec : "species:S:1:pos:R:3", strlen(spec ? spec : "species:S:1:pos:R:3"), s, sizeof s), c.total);
            goto done;
        }
        for (int k = 0; k < 3; ++k) {
            double x;
            /* a double beyond float's range has no float (undefined) */
            if (xyz_real(xyz[k], &x) || !(fabs(x) <= FLT_MAX)) {
                ferr(err, nerr, "%s:%ld: particle %d: coordinate '%s' is not a finite number%s", path, lineno, i,
                     shown(xyz[k], strlen(xyz[k]), v, sizeof v),
                     xyz_real(xyz[k], &x) ? "" : " in single precision (|x| up to 3.4e+38)");
                goto done;
            }
            out->xyz[3 * i + k] = (float)x;
        }
        /* a NaN charge would pass every later comparison */
        if (q && xyz_real(q, &out->charge[i])) {
            ferr(err, nerr, "%s:%ld: particle %d: charge '%s' is not a finite number", path, lineno, i,
                 shown(q, strlen(q), v, sizeof v));
            goto done;
        }
        int t = 0;
        while (t < out->ntypes && strcmp(out->names[t], name)) ++t;
        if (t == out->ntypes) {
            if (t == METRO_MAX_SPECIES * 8) {
                ferr(err, nerr, "%s:%ld: particle %d: more than %d different species names", path, lineno, i, t);
                goto done;
            }
            snprintf(out->names[out->ntypes++], 64, "%s", name);
        }
        out->type[i] = t;
    }
    rc = 0;
done:
    if (rc && !err[0]) ferr(err, nerr, "%s: ends inside frame %ld", path, out->index);
    free(line);
    free(spec);
    free(sweep);
    free(start);
    free(startline);
    fclose(f);
    return rc;
}

int metro__frames_read(const char *path, long want, metro__frame_in *out, char *err, size_t nerr)
{
    memset(out, 0, sizeof *out);
    err[0] = 0;
    /* before any open: opening a FIFO waits for a writer; the XYZ reader
     * seeks (two passes), which only a regular file can do */
    struct stat sb;
    if (stat(path, &sb) != 0) return ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return ferr(err, nerr, "%s: is a directory (allowed: a .gsd, .xyz or .extxyz file)", path);
    if (!S_ISREG(sb.st_mode))
        return ferr(err, nerr, "%s: is not a regular file but a %s (allowed: a .gsd, .xyz or .extxyz file)", path,
                    S_ISFIFO(sb.st_mode) ? "pipe" : S_ISSOCK(sb.st_mode) ? "socket" : "device");
    metro__frame_format fmt = metro__frames_format_of(path);
    if (fmt == METRO__FRAMES_UNKNOWN) {
        /* by content: GSD files start with the magic number */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return ferr(err, nerr, "%s: cannot be read: %s", path, strerror(errno));
        uint64_t magic = 0;
        fmt = pread_all(fd, &magic, 8, 0) == 0 && magic == GSD_MAGIC ? METRO__FRAMES_GSD : METRO__FRAMES_XYZ;
        close(fd);
    }
    int rc = fmt == METRO__FRAMES_GSD ? gsd_read(path, want, out, err, nerr) : xyz_read(path, want, out, err, nerr);
    if (rc) metro__frame_in_free(out);
    else out->format = fmt;
    return rc;
}

