/* core/src/frames.c — trajectory files in two formats, written a frame at a
 * time and read back for initial configurations.
 *
 * GSD (written from the file-layer specification, version 2.0, and the
 * HOOMD schema 1.4).  Layout of a file metro writes:
 *
 *   header (256 bytes) | index block (capacity x 32 bytes, zeros where
 *   unused) | name list (a multiple of 64 bytes) | frame 0's data chunks |
 *   frame 1's ... [| a larger index block, when the first one filled up |
 *   more frames ...]
 *
 * A system with chains has its bonds (bonds/N, types, typeid, group) in
 * frame 0 only: the topology never changes during a run, and the schema
 * has a reader take frame 0's chunk where a later frame lacks it.  The
 * bond chunks' names are in the name list only then, so a file without
 * bonds is byte for byte what metro wrote before it wrote bonds.
 *
 * Readers find the frames through the index, which ends at the first entry
 * whose location is 0.  A frame is appended in an order that never shows a
 * reader half of it: its data chunks go at the end of the file and are
 * synced, then all its index entries are written with one pwrite (at most
 * 17 entries, 544 bytes) and synced.  A process killed at any moment
 * leaves either the frame's entries whole or none of them; the bytes of an
 * unindexed frame after the last entry are invisible and a resume cuts
 * them.  When the index is full, a block twice as large is written at the
 * end of the file and synced before the header is pointed at it (the
 * header is one 256-byte write at offset 0), so a kill then leaves the old,
 * still valid index in use.  Every size is a function of the frame count
 * alone, so a run stopped and resumed writes the same bytes as a straight
 * run.
 *
 * Extended XYZ: a frame is a count line, a comment line of key=value pairs
 * (Lattice, Origin, Properties, pbc, and metro's sweep, replica, slot,
 * temperature, cell_radius) and one line per particle:
 *     species x y z charge metro_species
 * species is a chemical symbol (ASE insists on one): the metro species
 * name where it is one, else a stand-in by the sign of the charge (Na, K,
 * ... for cations, Cl, Br, ... for anions, Ar, ... for neutral species, C
 * without species); metro_species carries the real name and is what metro
 * reads back.  A frame is one pwrite at the end of the file followed by a
 * sync.  Text cannot hide an incomplete write the way the GSD index does:
 * a process killed inside that write can leave a partial last frame.
 * metro resume cuts the file back to the last frame its checkpoint
 * counted, and metro's own reader ignores an incomplete last frame (it
 * says so); other readers may stop at it.
 */
#define _GNU_SOURCE
#include "frames.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tests only (tests/test_frames.c): end the process with _exit(3) at a
 * point inside an append, as a kill would there: 1 after a GSD frame's
 * data, before its index entries; 2 after a GSD index block moved, before
 * the header points at it; 3 halfway through an XYZ frame's write. */
int metro__frames_test_stop;

static int ferr(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ferr(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

metro__frame_format metro__frames_format_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return METRO__FRAMES_UNKNOWN;
    if (!strcasecmp(dot, ".gsd")) return METRO__FRAMES_GSD;
    if (!strcasecmp(dot, ".xyz") || !strcasecmp(dot, ".extxyz")) return METRO__FRAMES_XYZ;
    return METRO__FRAMES_UNKNOWN;
}

/* ---- whole reads and writes at an offset ---------------------------------- */

static int pwrite_all(int fd, const void *buf, size_t n, uint64_t at)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        p += w, n -= (size_t)w, at += (uint64_t)w;
    }
    return 0;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t at)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0; /* short file */
            return -1;
        }
        p += r, n -= (size_t)r, at += (uint64_t)r;
    }
    return 0;
}

static const char *why(void)
{
    return errno ? strerror(errno) : "the file ends early";
}

/* ---- GSD ---------------------------------------------------------------- */

#define GSD_MAGIC 0x65DF65DF65DF65DFull
#define GSD_VERSION ((2u << 16) | 0u)
#define GSD_HOOMD_SCHEMA ((1u << 16) | 4u)
#define GSD_FIRST_INDEX 1024u   /* entries of the first index block (32 KiB) */

enum { T_UINT8 = 1, T_UINT16, T_UINT32, T_UINT64, T_INT8, T_INT16, T_INT32, T_INT64, T_FLOAT, T_DOUBLE };

static size_t type_size(unsigned t)
{
    static const size_t s[] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return t >= 1 && t <= 10 ? s[t] : 0;
}

typedef struct gsd_header {
    uint64_t magic, index_location, index_allocated_entries, namelist_location, namelist_allocated_entries;
    uint32_t schema_version, gsd_version;
    char application[64], schema[64], reserved[80];
} gsd_header;

typedef struct gsd_entry {
    uint64_t frame, N;
    int64_t location;
    uint32_t M;
    uint16_t id;
    uint8_t type, flags;
} gsd_entry;

_Static_assert(sizeof(gsd_header) == 256, "GSD header must be 256 bytes");
_Static_assert(sizeof(gsd_entry) == 32, "GSD index entry must be 32 bytes");

/* The chunks metro writes, in name-id order: the index of a frame lists
 * them in this order (the specification keeps a frame's entries sorted by
 * id) and their data follows in the same order.  The C_COUNT first are in
 * every frame; the bond chunks after them only in frame 0 of a system with
 * chains (C_ALL with them). */
enum {
    C_STEP, C_DIM, C_BOX, C_N, C_TYPES, C_TYPEID, C_POS, C_CHARGE, C_DIAMETER,
    C_REPLICA, C_SLOT, C_TEMPERATURE, C_CELL, C_COUNT,
    C_BOND_N = C_COUNT, C_BOND_TYPES, C_BOND_TYPEID, C_BOND_GROUP, C_ALL
};
#define C_BONDS (C_ALL - C_COUNT)
static const char *const chunk_name[C_ALL] = {
    "configuration/step", "configuration/dimensions", "configuration/box", "particles/N",
    "particles/types", "particles/typeid", "particles/position", "particles/charge",
    "particles/diameter", "log/metro/replica", "log/metro/slot", "log/metro/temperature",
    "log/metro/cell_radius", "bonds/N", "bonds/types", "bonds/typeid", "bonds/group"};
/* metro has one kind of bond: the bond term's */
#define BOND_TYPE "backbone"

/* The name list of a file with (or without) the bond chunks. */
static size_t namelist_bytes(int bonds)
{
    size_t n = 1; /* the empty name that ends the list */
    for (int i = 0; i < (bonds ? C_ALL : C_COUNT); ++i) n += strlen(chunk_name[i]) + 1;
    return (n + 63) / 64 * 64;
}

/* Bonds of a frame's topology: each chain's length - 1. */
static uint64_t frame_bonds(const metro_frame *f)
{
    uint64_t b = 0;
    for (int c = 0; f->topology && c < f->topology->chains; ++c) b += (uint64_t)(f->topology->length[c] - 1);
    return b;
}

/* The species names a frame writes: the table's, or "A" for one kind. */
static const char *species_name(const metro_frame *f, int s)
{
    return f->species > 0 ? f->species_table[s].name : "A";
}

static int frame_check(const metro_frame *f, char *err, size_t nerr)
{
    if (f->particles < 0 || (f->particles > 0 && !f->pos)) return ferr(err, nerr, "a frame without positions");
    if (f->species < 0 || f->species > METRO_MAX_SPECIES || (f->species > 0 && !f->species_table))
        return ferr(err, nerr, "a frame with %d species", f->species);
    /* without species, w is the potential's own business and not read */
    for (int i = 0; i < f->particles && f->species > 0; ++i) {
        float w = f->pos[i].w;
        if (!(w >= 0 && w < (float)f->species) || w != floorf(w))
            return ferr(err, nerr, "particle %d has species index %g (allowed: 0 to %d)", i, (double)w, f->species - 1);
    }
    const metro_topology *t = f->topology;
    for (int c = 0; t && c < t->chains; ++c)
        if (!t->first || !t->length || t->length[c] < 2 || t->first[c] < 0 || t->first[c] > f->particles - t->length[c])
            return ferr(err, nerr, "chain %d does not lie within the frame's %d particles", c, f->particles);
    return 0;
}

static int species_of(const metro_frame *f, int i)
{
    return f->species > 0 ? (int)f->pos[i].w : 0;
}

/* Edge of the cubic box written with a frame: the cell's diameter, or in
 * open space a box that holds every particle (with a margin). */
static double box_edge(const metro_frame *f)
{
    if (f->cell_radius > 0) return 2 * f->cell_radius;
    double m = 0;
    for (int i = 0; i < f->particles; ++i)
        m = fmax(m, fmax(fabs((double)f->pos[i].x), fmax(fabs((double)f->pos[i].y), fabs((double)f->pos[i].z))));
    return fmax(2.1 * m, 1.0);
}

typedef struct chunk {
    const void *data;
    void *owned;
    uint64_t N;
    uint32_t M;
    uint8_t type;
} chunk;

static int gsd_fresh(int fd, metro_frame_mark *mark, char *err, size_t nerr, const char *path, int bonds)
{
    gsd_header h;
    memset(&h, 0, sizeof h);
    h.magic = GSD_MAGIC;
    h.gsd_version = GSD_VERSION;
    h.schema_version = GSD_HOOMD_SCHEMA;
    snprintf(h.application, sizeof h.application, "metro");
    snprintf(h.schema, sizeof h.schema, "hoomd");
    h.index_location = sizeof h;
    h.index_allocated_entries = GSD_FIRST_INDEX;
    size_t nl = namelist_bytes(bonds);
    h.namelist_location = sizeof h + GSD_FIRST_INDEX * sizeof(gsd_entry);
    h.namelist_allocated_entries = nl / 64;
    size_t total = (size_t)h.namelist_location + nl;
    char *buf = calloc(1, total);
    if (!buf) return ferr(err, nerr, "%s: out of memory", path);
    memcpy(buf, &h, sizeof h);
    char *p = buf + h.namelist_location;
    for (int i = 0; i < (bonds ? C_ALL : C_COUNT); ++i) {
        size_t l = strlen(chunk_name[i]) + 1;
        memcpy(p, chunk_name[i], l);
        p += l;
    }
    /* the header last: a file cut short while it is made has none, and
     * reads as no GSD file rather than a damaged one */
    int rc = pwrite_all(fd, buf + sizeof h, total - sizeof h, sizeof h) || fdatasync(fd) ||
             pwrite_all(fd, buf, sizeof h, 0) || fdatasync(fd);
    free(buf);
    if (rc) return ferr(err, nerr, "%s: cannot be written: %s", path, why());
    memset(mark, 0, sizeof *mark);
    mark->bytes = total;
    mark->index_at = h.index_location;
    mark->index_entries = h.index_allocated_entries;
    return 0;
}

/* Entries every frame of f writes (the diameter only where species have
 * one); frame 0 of a file with bonds has C_BONDS more. */
static int frame_entries(const metro_frame *f)
{
    return f->species > 0 ? C_COUNT : C_COUNT - 1;
}

static int gsd_append(int fd, const char *path, const metro_frame *f, metro_frame_mark *mark, char *err, size_t nerr)
{
    gsd_header h;
    if (pread_all(fd, &h, sizeof h, 0)) return ferr(err, nerr, "%s: cannot read its header: %s", path, why());
    if (h.magic != GSD_MAGIC || h.index_location != mark->index_at || h.index_allocated_entries != mark->index_entries)
        return ferr(err, nerr, "%s: its header is not the one this run wrote (changed by something else?)", path);
    /* the name list says whether frame 0 has bonds: gsd_fresh made it for
     * the run's topology (a file begun before metro wrote bonds has none,
     * and a resumed run goes on without them) */
    const uint64_t nb = frame_bonds(f);
    const int file_bonds = h.namelist_allocated_entries * 64 == namelist_bytes(1);
    if (file_bonds && mark->frames == 0 && nb == 0)
        return ferr(err, nerr, "%s: begun for a system with bonds, but its first frame has none", path);
    const int E = frame_entries(f), B = file_bonds ? C_BONDS : 0;
    const int E_here = E + (mark->frames == 0 ? B : 0);
    const uint64_t used = mark->frames * (uint64_t)E + (mark->frames ? (uint64_t)B : 0);
    uint64_t end = mark->bytes;
    int rc = 0;

    /* a full index moves to a block twice as large at the end */
    if (used + (uint64_t)E_here > mark->index_entries) {
        uint64_t cap = mark->index_entries;
        while (used + (uint64_t)E_here > cap) cap *= 2;
        uint64_t at = (end + 31) / 32 * 32; /* entries never straddle a disk sector */
        size_t n = (size_t)cap * sizeof(gsd_entry);
        char *blk = calloc(1, n);
        if (!blk) return ferr(err, nerr, "%s: out of memory for an index of %llu entries", path, (unsigned long long)cap);
        if (used && pread_all(fd, blk, (size_t)used * sizeof(gsd_entry), mark->index_at)) {
            free(blk);
            return ferr(err, nerr, "%s: cannot read its index: %s", path, why());
        }
        if (at > end) {
            static const char zeros[32];
            rc = pwrite_all(fd, zeros, (size_t)(at - end), end);
        }
        rc = rc || pwrite_all(fd, blk, n, at) || fdatasync(fd);
        free(blk);
        if (metro__frames_test_stop == 2) _exit(3);
        h.index_location = at;
        h.index_allocated_entries = cap;
        rc = rc || pwrite_all(fd, &h, sizeof h, 0) || fdatasync(fd);
        if (rc) return ferr(err, nerr, "%s: cannot be written: %s", path, why());
        mark->index_at = at;
        mark->index_entries = cap;
        end = at + n;
    }

    /* the data of every chunk, in id order */
    const int N = f->particles, ns = f->species > 0 ? f->species : 1;
    uint64_t step = f->sweep > 0 ? (uint64_t)f->sweep : 0;
    uint8_t dim = 3;
    float box[6] = {0};
    box[0] = box[1] = box[2] = (float)box_edge(f);
    uint32_t nn = (uint32_t)N;
    int32_t replica = f->replica, slot = f->slot;
    double temperature = f->temperature, cell = f->cell_radius;
    size_t tl = 2;
    for (int s = 0; s < ns; ++s) tl = strlen(species_name(f, s)) + 1 > tl ? strlen(species_name(f, s)) + 1 : tl;
    uint32_t nbonds = (uint32_t)nb;
    chunk c[C_ALL];
    memset(c, 0, sizeof c);
    c[C_STEP] = (chunk){&step, NULL, 1, 1, T_UINT64};
    c[C_DIM] = (chunk){&dim, NULL, 1, 1, T_UINT8};
    c[C_BOX] = (chunk){box, NULL, 6, 1, T_FLOAT};
    c[C_N] = (chunk){&nn, NULL, 1, 1, T_UINT32};
    c[C_TYPES] = (chunk){NULL, calloc((size_t)ns, tl), (uint64_t)ns, (uint32_t)tl, T_INT8};
    c[C_TYPEID] = (chunk){NULL, malloc(sizeof(uint32_t) * (size_t)(N ? N : 1)), (uint64_t)N, 1, T_UINT32};
    c[C_POS] = (chunk){NULL, malloc(sizeof(float) * 3 * (size_t)(N ? N : 1)), (uint64_t)N, 3, T_FLOAT};
    c[C_CHARGE] = (chunk){NULL, malloc(sizeof(float) * (size_t)(N ? N : 1)), (uint64_t)N, 1, T_FLOAT};
    c[C_DIAMETER] = (chunk){NULL, malloc(sizeof(float) * (size_t)(N ? N : 1)), (uint64_t)N, 1, T_FLOAT};
    c[C_REPLICA] = (chunk){&replica, NULL, 1, 1, T_INT32};
    c[C_SLOT] = (chunk){&slot, NULL, 1, 1, T_INT32};
    c[C_TEMPERATURE] = (chunk){&temperature, NULL, 1, 1, T_DOUBLE};
    c[C_CELL] = (chunk){&cell, NULL, 1, 1, T_DOUBLE};
    if (E_here > E) {
        c[C_BOND_N] = (chunk){&nbonds, NULL, 1, 1, T_UINT32};
        c[C_BOND_TYPES] = (chunk){BOND_TYPE, NULL, 1, (uint32_t)sizeof BOND_TYPE, T_INT8};
        c[C_BOND_TYPEID] = (chunk){NULL, calloc((size_t)nb, sizeof(uint32_t)), nb, 1, T_UINT32};
        c[C_BOND_GROUP] = (chunk){NULL, malloc(2 * sizeof(uint32_t) * (size_t)nb), nb, 2, T_UINT32};
        if (!c[C_BOND_TYPEID].owned || !c[C_BOND_GROUP].owned) {
            rc = ferr(err, nerr, "%s: out of memory for %llu bonds", path, (unsigned long long)nb);
            goto done;
        }
        uint32_t *g = c[C_BOND_GROUP].owned;
        const metro_topology *t = f->topology;
        for (int ch = 0; ch < t->chains; ++ch)
            for (int k = 0; k + 1 < t->length[ch]; ++k) {
                *g++ = (uint32_t)(t->first[ch] + k);
                *g++ = (uint32_t)(t->first[ch] + k + 1);
            }
    }
    for (int k = C_TYPES; k <= C_DIAMETER; ++k)
        if (!c[k].owned) {
            rc = ferr(err, nerr, "%s: out of memory for a frame of %d particles", path, N);
            goto done;
        }
    for (int s = 0; s < ns; ++s) memcpy((char *)c[C_TYPES].owned + (size_t)s * tl, species_name(f, s), strlen(species_name(f, s)));
    {
        uint32_t *tid = c[C_TYPEID].owned;
        float *pos = c[C_POS].owned, *q = c[C_CHARGE].owned, *d = c[C_DIAMETER].owned;
        for (int i = 0; i < N; ++i) {
            int s = species_of(f, i);
            tid[i] = (uint32_t)s;
            pos[3 * i] = f->pos[i].x, pos[3 * i + 1] = f->pos[i].y, pos[3 * i + 2] = f->pos[i].z;
            q[i] = f->species > 0 ? (float)f->species_table[s].charge : 0.0f;
            d[i] = f->species > 0 ? (float)f->species_table[s].diameter : 1.0f;
        }
    }
    gsd_entry e[C_ALL];
    int ne = 0;
    for (int k = 0; k < (E_here > E ? C_ALL : C_COUNT); ++k) {
        if (k == C_DIAMETER && f->species == 0) continue;
        size_t n = (size_t)c[k].N * c[k].M * type_size(c[k].type);
        /* a chunk of no particles still needs a location: readers take 0
         * for the end of the index */
        memset(&e[ne], 0, sizeof e[ne]);
        e[ne].frame = mark->frames;
        e[ne].N = c[k].N;
        e[ne].M = c[k].M;
        e[ne].location = (int64_t)end;
        e[ne].id = (uint16_t)k;
        e[ne].type = c[k].type;
        ++ne;
        if (n && pwrite_all(fd, c[k].data ? c[k].data : c[k].owned, n, end)) {
            rc = ferr(err, nerr, "%s: cannot be written: %s", path, why());
            goto done;
        }
        end += n;
    }
    if (metro__frames_test_stop == 1) _exit(3);
    /* the data is on disk before the entries that point at it */
    if (fdatasync(fd) || pwrite_all(fd, e, sizeof e[0] * (size_t)ne, mark->index_at + used * sizeof(gsd_entry)) ||
        fdatasync(fd)) {
        rc = ferr(err, nerr, "%s: cannot be written: %s", path, why());
        goto done;
    }
    mark->frames++;
    mark->bytes = end;
done:
    for (int k = 0; k < C_ALL; ++k) free(c[k].owned);
    return rc;
}

/* ---- extended XYZ: writing ------------------------------------------------ */

static const char *const ELEMENTS =
    " H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr"
    " Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb"
    " Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf"
    " Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og ";

static int is_element(const char *s)
{
    char key[8];
    size_t l = strlen(s);
    if (l < 1 || l > 2) return 0;
    snprintf(key, sizeof key, " %s ", s);
    return strstr(ELEMENTS, key) != NULL;
}

/* The chemical symbols of a frame's species: the name where it is one,
 * else a stand-in by the sign of the charge, each used once. */
static void element_symbols(const metro_frame *f, char sym[][4])
{
    static const char *const pos[] = {"Na", "K", "Rb", "Cs", "Li", "Ca", "Mg", "Sr"};
    static const char *const neg[] = {"Cl", "Br", "I", "F", "S", "Se", "Te", "At"};
    static const char *const neu[] = {"Ar", "Ne", "Kr", "Xe", "He", "Rn", "Og", "Ts"};
    int ns = f->species > 0 ? f->species : 1;
    if (f->species == 0) {
        snprintf(sym[0], 4, "C");
        return;
    }
    for (int s = 0; s < ns; ++s) {
        sym[s][0] = 0;
        const char *name = f->species_table[s].name;
        int taken = 0;
        for (int t = 0; t < s; ++t) taken |= !strcmp(sym[t], name);
        if (is_element(name) && !taken) {
            snprintf(sym[s], 4, "%s", name);
            continue;
        }
        double q = f->species_table[s].charge;
        const char *const *cand = q > 0 ? pos : q < 0 ? neg : neu;
        for (int k = 0; k < 8 && !sym[s][0]; ++k) {
            int used = 0;
            for (int t = 0; t < ns; ++t) used |= t != s && !strcmp(f->species_table[t].name, cand[k]);
            for (int t = 0; t < s; ++t) used |= !strcmp(sym[t], cand[k]);
            if (!used) snprintf(sym[s], 4, "%s", cand[k]);
        }
        if (!sym[s][0]) snprintf(sym[s], 4, "X");
    }
}

/* A name as one XYZ column: blanks and quotes become '_'. */
static void column_name(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (; in[k] && k + 1 < n; ++k) out[k] = isspace((unsigned char)in[k]) || in[k] == '"' || in[k] == '\'' ? '_' : in[k];
    out[k] = 0;
    if (!k) snprintf(out, n, "_");
}

static int xyz_append(int fd, const char *path, const metro_frame *f, metro_frame_mark *mark, char *err, size_t nerr)
{
    char *text = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&text, &n);
    if (!m) return ferr(err, nerr, "%s: out of memory", path);
    double L = box_edge(f);
    char sym[METRO_MAX_SPECIES][4], names[METRO_MAX_SPECIES][64];
    element_symbols(f, sym);
    int ns = f->species > 0 ? f->species : 1;
    for (int s = 0; s < ns; ++s) column_name(species_name(f, s), names[s], sizeof names[s]);
    fprintf(m, "%d\n", f->particles);
    fprintf(m,
            "Lattice=\"%.9g 0 0 0 %.9g 0 0 0 %.9g\" Origin=\"%.9g %.9g %.9g\" "
            "Properties=species:S:1:pos:R:3:charge:R:1:metro_species:S:1 pbc=\"F F F\" sweep=%lld replica=%d",
            L, L, L, -L / 2, -L / 2, -L / 2, f->sweep, f->replica);
    if (f->slot >= 0) fprintf(m, " slot=%d", f->slot);
    if (f->temperature > 0) fprintf(m, " temperature=%.10g", f->temperature);
    fprintf(m, " cell_radius=%.10g\n", f->cell_radius);
    for (int i = 0; i < f->particles; ++i) {
        int s = species_of(f, i);
        fprintf(m, "%s %.9g %.9g %.9g %.9g %s\n", sym[s], (double)f->pos[i].x, (double)f->pos[i].y, (double)f->pos[i].z,
                f->species > 0 ? f->species_table[s].charge : 0.0, names[s]);
    }
    if (fclose(m)) {
        free(text);
        return ferr(err, nerr, "%s: out of memory for a frame of %d particles", path, f->particles);
    }
    if (metro__frames_test_stop == 3) {
        if (pwrite_all(fd, text, n / 2, mark->bytes) == 0) _exit(3);
    }
    int rc = pwrite_all(fd, text, n, mark->bytes) || fdatasync(fd);
    free(text);
    if (rc) return ferr(err, nerr, "%s: cannot be written: %s", path, why());
    mark->frames++;
    mark->bytes += n;
    return 0;
}

/* ---- append, truncate ----------------------------------------------------- */

int metro__frames_append(const char *path, const metro_frame *f, metro_frame_mark *mark, char *err, size_t nerr)
{
    metro__frame_format fmt = metro__frames_format_of(path);
    if (fmt == METRO__FRAMES_UNKNOWN)
        return ferr(err, nerr, "%s: unknown trajectory format (allowed extensions: .gsd, .xyz, .extxyz)", path);
    char why_frame[1024];
    if (frame_check(f, why_frame, sizeof why_frame)) return ferr(err, nerr, "%s: %s", path, why_frame);
    int fresh = mark->frames == 0 && mark->bytes == 0;
    int fd = open(path, O_RDWR | O_CLOEXEC | (fresh ? O_CREAT | O_TRUNC : 0), 0644);
    if (fd < 0) return ferr(err, nerr, "%s: cannot be %s: %s", path, fresh ? "created" : "opened", strerror(errno));
    int rc = 0;
    struct stat sb;
    if (fresh) {
        if (fmt == METRO__FRAMES_GSD) rc = gsd_fresh(fd, mark, err, nerr, path, frame_bonds(f) > 0);
    } else if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != mark->bytes) {
        rc = ferr(err, nerr, "%s: is %lld bytes, but its last frame (%llu) ended at %llu: changed by something else than this run",
                  path, (long long)sb.st_size, (unsigned long long)mark->frames, (unsigned long long)mark->bytes);
    }
    if (!rc) rc = fmt == METRO__FRAMES_GSD ? gsd_append(fd, path, f, mark, err, nerr) : xyz_append(fd, path, f, mark, err, nerr);
    if (close(fd) != 0 && !rc) rc = ferr(err, nerr, "%s: cannot be written: %s", path, strerror(errno));
    return rc;
}

int metro__frames_truncate(const char *path, const metro_frame_mark *mark, char *err, size_t nerr)
{
    metro__frame_format fmt = metro__frames_format_of(path);
    if (fmt == METRO__FRAMES_UNKNOWN)
        return ferr(err, nerr, "%s: unknown trajectory format (allowed extensions: .gsd, .xyz, .extxyz)", path);
    if (mark->frames == 0 && mark->bytes == 0) {
        if (unlink(path) != 0 && errno != ENOENT) return ferr(err, nerr, "%s: cannot be removed: %s", path, strerror(errno));
        return 0;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return ferr(err, nerr, "%s: cannot be opened to continue it: %s (the checkpoint counts %llu frames in it)", path,
                    strerror(errno), (unsigned long long)mark->frames);
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size < mark->bytes) {
        rc = ferr(err, nerr, "%s: is %lld bytes, shorter than the %llu bytes of the %llu frames the checkpoint counts", path,
                  (long long)sb.st_size, (unsigned long long)mark->bytes, (unsigned long long)mark->frames);
        goto done;
    }
    if (fmt == METRO__FRAMES_GSD) {
        gsd_header h;
        gsd_entry first[C_ALL];
        if (pread_all(fd, &h, sizeof h, 0) || h.magic != GSD_MAGIC || mark->index_at + mark->index_entries * 32 > mark->bytes) {
            rc = ferr(err, nerr, "%s: not the GSD file this run wrote", path);
            goto done;
        }
        /* entries per frame: those of frame 0 in the marked index, but
         * for its bonds, which only frame 0 has */
        uint64_t E0 = 0, E = 0;
        if (pread_all(fd, first, sizeof first, mark->index_at)) {
            rc = ferr(err, nerr, "%s: cannot read its index: %s", path, why());
            goto done;
        }
        for (; E0 < C_ALL && first[E0].location != 0 && first[E0].frame == 0; ++E0) E += first[E0].id < C_COUNT;
        uint64_t used = mark->frames ? E0 + (mark->frames - 1) * E : 0;
        if (used > mark->index_entries) {
            rc = ferr(err, nerr, "%s: its index does not hold the %llu frames the checkpoint counts", path,
                      (unsigned long long)mark->frames);
            goto done;
        }
        /* first hide the later frames in the marked index, then point the
         * header at it, then cut: a kill between the steps leaves a valid
         * file, and the next resume does the same again */
        size_t nz = (size_t)(mark->index_entries - used) * sizeof(gsd_entry);
        char *zeros = calloc(1, nz ? nz : 1);
        if (!zeros) {
            rc = ferr(err, nerr, "%s: out of memory", path);
            goto done;
        }
        rc = pwrite_all(fd, zeros, nz, mark->index_at + used * sizeof(gsd_entry)) || fdatasync(fd);
        free(zeros);
        h.index_location = mark->index_at;
        h.index_allocated_entries = mark->index_entries;
        rc = rc || pwrite_all(fd, &h, sizeof h, 0) || fdatasync(fd);
        if (rc) {
            rc = ferr(err, nerr, "%s: cannot be written: %s", path, why());
            goto done;
        }
    }
    if (ftruncate(fd, (off_t)mark->bytes) != 0 || fdatasync(fd) != 0)
        rc = ferr(err, nerr, "%s: cannot be cut back to %llu frames: %s", path, (unsigned long long)mark->frames, strerror(errno));
done:
    close(fd);
    return rc;
}

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

/* want (negative from the end) to a frame index, or -1 with a message. */
static long pick(const char *path, long want, long frames, char *err, size_t nerr)
{
    long f = want < 0 ? frames + want : want;
    if (frames == 0) return ferr(err, nerr, "%s: holds no complete frame", path), -1;
    if (f < 0 || f >= frames)
        return ferr(err, nerr, "%s: initial_frame %ld does not exist: the file holds %ld frames (allowed: 0 to %ld, or -1 to -%ld from the end)",
                    path, want, frames, frames - 1, frames),
               -1;
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
    for (int i = 0; i < N; ++i) {
        v[i] = gsd_value(p, e->type, (size_t)i);
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
    long f = pick(path, want, frames, err, nerr);
    if (f < 0) {
        rc = METRO__FRAMES_NO_FRAME;
        goto done;
    }
    out->index = f;
    out->frames = frames;
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
        while (got < n + 1 && getline(&line, &cap, f) >= 0) ++got, ++lineno;
        if (got < n + 1) {
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
    long fi = pick(path, want, nfr, err, nerr);
    if (fi < 0) {
        rc = METRO__FRAMES_NO_FRAME;
        goto done;
    }
    out->index = fi;
    out->frames = nfr;
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
