/* core/src/frames.c — trajectory files in two formats, written a frame at a
 * time; frames_read.c reads them back for initial configurations.
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
#include "frames_io.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
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

metro__frame_format metro__frames_format_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return METRO__FRAMES_UNKNOWN;
    if (!strcasecmp(dot, ".gsd")) return METRO__FRAMES_GSD;
    if (!strcasecmp(dot, ".xyz") || !strcasecmp(dot, ".extxyz")) return METRO__FRAMES_XYZ;
    return METRO__FRAMES_UNKNOWN;
}


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
