/* test_frames — the core's trajectory formats (core/src/frames.c and frames_read.c) directly:
 *
 *   - round trip: frames written in GSD and extended XYZ read back exactly
 *     (positions, species names, charges, sweep), any frame by index,
 *     negative from the end; under another extension, by content;
 *   - a process killed inside an append (after a GSD frame's data but
 *     before its index; after the GSD index moved but before the header
 *     points at it; halfway through an XYZ frame) leaves the complete
 *     frames readable — by metro's reader and, where installed, by gsd's
 *     own — and cutting back to the last mark and appending again gives
 *     the file of an uninterrupted writer, byte for byte;
 *   - a system with chains writes its bonds (bonds/N, types, typeid,
 *     group) in frame 0 only, which every later frame inherits: metro's
 *     reader and gsd's own see them in every frame, and the kills and
 *     resumes above hold with them too;
 *   - damaged or foreign files are refused with a message, never a crash;
 *   - every real read is finite (a NaN passes the checks made with it
 *     later), positions within float's range, in both formats; an XYZ
 *     line may have any number of columns; a frame cut short, a
 *     directory, a pipe, a GSD file named .xyz (or text named .gsd) are
 *     refused saying so, and no message quotes a file's raw bytes;
 *   - a GSD file made by hand (gsd_file): a name list longer than 128
 *     names, chunks of no value or of the wrong shape, an index out of
 *     frame order, integers beyond what they are read into.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frames.h"
#include "testutil.h"

enum { N = 7 };

static metro_species table[2];
static metro_float4 pos[N];
static char dir[64];
/* the bonds frame_k's frames carry: chains 0-1-2 and 3-4 (5, 6 free) */
static const int topo_first[] = {0, 3}, topo_length[] = {3, 2};
static const unsigned char topo_next[N] = {1, 1, 0, 1, 0, 0, 0};
static const metro_topology topo = {2, topo_first, topo_length, topo_next};
static int with_bonds;

/* Frame k of a made-up trajectory: positions that differ per frame, two
 * species (or none), a cell of radius 20. */
static metro_frame frame_k(int k, int species)
{
    for (int i = 0; i < N; ++i)
        pos[i] = metro_f4(0.1f * i + 0.001f * k, -0.37f * i / 3.0f + k, 1.0f / (i + k + 1), species ? (float)(i % 2) : 0);
    snprintf(table[0].name, 16, "Na");
    table[0].charge = 1;
    table[0].diameter = 0.8; /* not a float: read back as written, not as 0.800000011920929 */
    snprintf(table[1].name, 16, "my anion");
    table[1].charge = -1;
    table[1].diameter = 4.2;
    metro_frame f = {.particles = N, .pos = pos, .species = species ? 2 : 0, .species_table = table, .cell_radius = species ? 20 : 0,
                     .sweep = 100 * (k + 1), .replica = 2, .slot = 1, .temperature = 0.5, .topology = with_bonds ? &topo : NULL};
    return f;
}

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/metro-frames-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) { /* best effort */ }
}

static void write_frames(const char *path, int from, int to, int species, metro_frame_mark *mark)
{
    char err[4096];
    for (int k = from; k < to; ++k) {
        metro_frame f = frame_k(k, species);
        ck_assert_msg(metro__frames_append(path, &f, mark, err, sizeof err) == 0, "%s", err);
    }
}

static void expect_frame(const char *path, long want, int k, int species)
{
    metro__frame_in in;
    char err[4096];
    ck_assert_msg(metro__frames_read(path, want, &in, err, sizeof err) == 0, "%s", err);
    metro_frame f = frame_k(k, species);
    ck_assert_int_eq(in.particles, N);
    ck_assert_int_eq(in.step, f.sweep);
    for (int i = 0; i < N; ++i) {
        ck_assert_msg(in.xyz[3 * i] == pos[i].x && in.xyz[3 * i + 1] == pos[i].y && in.xyz[3 * i + 2] == pos[i].z,
                      "%s frame %ld particle %d: (%.9g %.9g %.9g) read, (%.9g %.9g %.9g) written", path, want, i,
                      in.xyz[3 * i], in.xyz[3 * i + 1], in.xyz[3 * i + 2], pos[i].x, pos[i].y, pos[i].z);
        const char *name = species ? table[i % 2].name : "A";
        char want_name[64];
        snprintf(want_name, sizeof want_name, "%s", name);
        for (char *c = want_name; *c; ++c)
            if (*c == ' ') *c = '_'; /* XYZ columns hold no blanks */
        const char *got = in.names[in.type[i]];
        ck_assert_msg(!strcmp(got, name) || !strcmp(got, want_name), "particle %d is '%s', written '%s'", i, got, name);
        ck_assert_ptr_nonnull(in.charge);
        ck_assert(in.charge[i] == (species ? table[i % 2].charge : 0.0));
    }
    /* GSD: the bonds, written in frame 0, are every frame's */
    if (metro__frames_format_of(path) == METRO__FRAMES_GSD && with_bonds) {
        static const long long want_bonds[] = {0, 1, 1, 2, 3, 4};
        ck_assert_int_eq(in.bonds, 3);
        for (int k = 0; k < 6; ++k)
            ck_assert_msg(in.bond[k] == want_bonds[k], "%s frame %ld: bond value %d is %lld", path, want, k, in.bond[k]);
        if (species) {
            ck_assert_ptr_nonnull(in.diameter);
            for (int i = 0; i < N; ++i) ck_assert(in.diameter[i] == table[i % 2].diameter);
        }
    } else {
        ck_assert_int_eq(in.bonds, 0);
    }
    metro__frame_in_free(&in);
}

static void round_trip(const char *name, int species)
{
    char p[256];
    path_of(p, sizeof p, name);
    metro_frame_mark mark = {0};
    write_frames(p, 0, 5, species, &mark);
    ck_assert_int_eq(mark.frames, 5);
    expect_frame(p, -1, 4, species);
    expect_frame(p, 0, 0, species);
    expect_frame(p, 2, 2, species);
    expect_frame(p, -5, 0, species);
    metro__frame_in in;
    char err[4096];
    ck_assert_int_ne(metro__frames_read(p, 5, &in, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "holds 5 frames") && strstr(err, p), "%s", err);
    ck_assert_int_ne(metro__frames_read(p, -6, &in, err, sizeof err), 0);
}

START_TEST(round_trips)
{
    round_trip("a.gsd", 1);
    round_trip("b.gsd", 0);
    round_trip("c.xyz", 1);
    round_trip("d.extxyz", 0);
    /* another extension: the format by content */
    char cmd[512], p[256];
    snprintf(cmd, sizeof cmd, "cp %s/a.gsd %s/a.dat && cp %s/c.xyz %s/c.txt", dir, dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    path_of(p, sizeof p, "a.dat");
    expect_frame(p, -1, 4, 1);
    path_of(p, sizeof p, "c.txt");
    expect_frame(p, 1, 1, 1);
}
END_TEST

/* In a child: write `before` frames normally, then one more with the stop
 * point set (the child dies there).  Returns the mark after `before`. */
static metro_frame_mark killed_writer(const char *path, int before, int stop, int species)
{
    metro_frame_mark mark = {0};
    write_frames(path, 0, before, species, &mark);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        metro__frames_test_stop = stop;
        metro_frame_mark m = mark;
        char err[4096];
        metro_frame f = frame_k(before, species);
        metro__frames_append(path, &f, &m, err, sizeof err);
        _exit(0); /* not reached when the stop point was passed */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "the writer did not stop where told (status %d)", st);
    return mark;
}

static int have_gsd_python(void)
{
    return system("/usr/bin/python3 -c 'import gsd.hoomd' >/dev/null 2>&1") == 0;
}

/* gsd's own reader sees `frames` frames (skipped without python3-gsd),
 * and with_bonds the bonds in the last one. */
static void gsd_python_sees(const char *path, int frames)
{
    if (!have_gsd_python()) return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import gsd.hoomd,sys; t=gsd.hoomd.open('%s','rb'); f=t[%d]; "
             "b=f.bonds.group.tolist() if f.bonds.N else []; "
             "sys.exit(0 if len(t)==%d and f.particles.N==%d and b==%s else 1)\"",
             path, frames - 1, frames, N, with_bonds ? "[[0,1],[1,2],[3,4]]" : "[]");
    ck_assert_msg(system(cmd) == 0, "gsd does not read %d whole frames%s in %s", frames, with_bonds ? " with bonds" : "",
                  path);
}

static void killed_then_resumed(const char *name, int before, int stop, int species)
{
    char p[256], ref[256], err[4096];
    path_of(p, sizeof p, name);
    snprintf(ref, sizeof ref, "%s/ref-%s", dir, name);
    metro_frame_mark mark = killed_writer(p, before, stop, species);
    /* the complete frames read back; the killed one is not there */
    metro__frame_in in;
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s after a kill: %s", name, err);
    ck_assert_int_eq(in.frames, before);
    ck_assert_int_eq(in.partial_tail, stop == 3);
    metro__frame_in_free(&in);
    expect_frame(p, -1, before - 1, species);
    if (stop != 3) gsd_python_sees(p, before);
    /* a resumed writer cuts back to its mark and goes on */
    ck_assert_msg(metro__frames_truncate(p, &mark, err, sizeof err) == 0, "%s", err);
    write_frames(p, before, before + 3, species, &mark);
    metro_frame_mark m2 = {0};
    write_frames(ref, 0, before + 3, species, &m2);
    ck_assert_msg(metro_test_same_file(p, ref), "%s: killed and resumed differs from written straight", name);
    ck_assert(!memcmp(&mark, &m2, sizeof mark));
}

START_TEST(kills_leave_whole_frames)
{
    killed_then_resumed("k1.gsd", 3, 1, 1);
    /* 13 entries a frame with species: the first index (1024) holds 78
     * frames, so the 79th moves it */
    killed_then_resumed("k2.gsd", 78, 2, 1);
    killed_then_resumed("k3.xyz", 3, 3, 1);
}
END_TEST

START_TEST(bonds)
{
    with_bonds = 1;
    round_trip("bonds.gsd", 1);
    round_trip("bonds0.gsd", 0);
    char p[256];
    path_of(p, sizeof p, "bonds.gsd");
    gsd_python_sees(p, 5);
    /* frame 0 has 17 entries, the others 13: the 79th frame still moves
     * the index (17 + 77 x 13 = 1018 of 1024) */
    killed_then_resumed("kb1.gsd", 3, 1, 1);
    killed_then_resumed("kb2.gsd", 78, 2, 1);
    killed_then_resumed("kb3.gsd", 1, 1, 0);
    /* a file written without bonds has none, and the name list of
     * before: the same bytes as with a topology of no chains */
    with_bonds = 0;
    char q[256];
    metro_frame_mark m = {0};
    path_of(q, sizeof q, "none.gsd");
    write_frames(q, 0, 3, 1, &m);
    expect_frame(q, 1, 1, 1);
    gsd_python_sees(q, 3);
}
END_TEST

START_TEST(bad_files)
{
    char p[256], err[4096];
    metro__frame_in in;
    const struct {
        const char *name, *content, *want;
    } cases[] = {
        {"empty.gsd", "", "not a GSD file"},
        {"text.gsd", "hello, this is not GSD at all, not even close to 256 bytes", "not a GSD file"},
        {"count.xyz", "two\nx\n", "expected the particle count"},
        {"short.xyz", "3\nProperties=species:S:1:pos:R:3\nA 0 0 0\n", "holds no complete frame"},
        {"nan.xyz", "1\nProperties=species:S:1:pos:R:3\nA 0 nan 0\n", "not a finite number"},
        {"cols.xyz", "1\nProperties=species:S:1:pos:R:3:charge:R:1\nA 0 0 0\n", "columns"},
        {"nopos.xyz", "1\nProperties=species:S:1:velo:R:3\nA 0 0 0\n", "no pos:R:3"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        path_of(p, sizeof p, cases[k].name);
        FILE *f = fopen(p, "w");
        fputs(cases[k].content, f);
        fclose(f);
        ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) != 0, "%s was accepted", cases[k].name);
        ck_assert_msg(strstr(err, cases[k].want) && strstr(err, cases[k].name), "%s: '%s'", cases[k].name, err);
    }
    /* a GSD whose index points past its end */
    path_of(p, sizeof p, "cut.gsd");
    metro_frame_mark mark = {0};
    write_frames(p, 0, 2, 1, &mark);
    ck_assert_int_eq(truncate(p, 4000), 0);
    ck_assert(metro__frames_read(p, -1, &in, err, sizeof err) != 0);
    ck_assert_msg(strstr(err, "damaged") && strstr(err, "cut.gsd"), "%s", err);
    /* appending to a file that changed behind the writer's back */
    path_of(p, sizeof p, "moved.xyz");
    mark = (metro_frame_mark){0};
    write_frames(p, 0, 2, 1, &mark);
    FILE *f = fopen(p, "a");
    fputs("junk\n", f);
    fclose(f);
    metro_frame fr = frame_k(2, 1);
    ck_assert(metro__frames_append(p, &fr, &mark, err, sizeof err) != 0);
    ck_assert_msg(strstr(err, "changed by something else"), "%s", err);
    /* cutting back a file shorter than its mark */
    ck_assert_int_eq(truncate(p, 10), 0);
    ck_assert(metro__frames_truncate(p, &mark, err, sizeof err) != 0);
    ck_assert_msg(strstr(err, "shorter than"), "%s", err);
}
END_TEST

/* metro__frames_read(name, frame) in dir refuses, naming the file, with
 * each of want in the message, and no byte of it but printable ASCII. */
static void read_refused_at(const char *name, long frame, const char *const *want)
{
    char p[256], err[4096];
    metro__frame_in in;
    path_of(p, sizeof p, name);
    ck_assert_msg(metro__frames_read(p, frame, &in, err, sizeof err) != 0, "%s was accepted", name);
    ck_assert_msg(strstr(err, p), "%s: no file in '%s'", name, err);
    for (int k = 0; want[k]; ++k) ck_assert_msg(strstr(err, want[k]), "%s: '%s' not in '%s'", name, want[k], err);
    for (const char *c = err; *c; ++c)
        ck_assert_msg(*c >= 0x20 && *c < 0x7f, "%s: byte 0x%02x in the message '%s'", name, (unsigned char)*c, err);
}

static void read_refused(const char *name, const char *const *want)
{
    read_refused_at(name, -1, want);
}

static void put(const char *name, const char *content, size_t n)
{
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(content, 1, n, f), n);
    fclose(f);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define PUT(name, text) put(name, text, strlen(text))

START_TEST(xyz_values)
{
    char p[256], err[4096];
    metro__frame_in in;
    /* NaN and inf charges (strtod reads them) */
    PUT("q_nan.xyz", "2\nProperties=species:S:1:pos:R:3:charge:R:1\nA 0 0 0 1\nB 1 0 0 nan\n");
    read_refused("q_nan.xyz", W("q_nan.xyz:4: particle 1: charge 'nan' is not a finite number"));
    PUT("q_inf.xyz", "1\nProperties=species:S:1:pos:R:3:charge:R:1\nA 0 0 0 -inf\n");
    read_refused("q_inf.xyz", W("q_inf.xyz:3: particle 0: charge '-inf' is not a finite number"));
    /* finite as a double, not as the float a position is */
    PUT("big.xyz", "1\nProperties=species:S:1:pos:R:3\nA 0 1e300 0\n");
    read_refused("big.xyz", W("big.xyz:3: particle 0: coordinate '1e300' is not a finite number in single precision"));

    /* 75 columns: the ones metro reads found wherever they are */
    char *text = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&text, &n);
    fprintf(m, "2\nProperties=species:S:1:pos:R:3:junk:R:70:charge:R:1\n");
    for (int i = 0; i < 2; ++i) {
        fprintf(m, "%s %d 2 3", i ? "Cl" : "Na", i);
        for (int k = 0; k < 70; ++k) fprintf(m, " %d", k);
        fprintf(m, " %d\n", i ? -1 : 1);
    }
    fclose(m);
    put("wide.xyz", text, n);
    free(text);
    path_of(p, sizeof p, "wide.xyz");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.particles, 2);
    ck_assert(in.xyz[3] == 1 && in.xyz[4] == 2 && in.xyz[5] == 3);
    ck_assert(in.charge[0] == 1 && in.charge[1] == -1);
    ck_assert_str_eq(in.names[in.type[1]], "Cl");
    metro__frame_in_free(&in);

    /* a Properties spec longer than any fixed buffer, pos at its end */
    m = open_memstream(&text, &n);
    fprintf(m, "1\nProperties=species:S:1");
    for (int k = 0; k < 300; ++k) fprintf(m, ":column_%03d:R:1", k);
    fprintf(m, ":pos:R:3\nA");
    for (int k = 0; k < 300; ++k) fprintf(m, " 9");
    fprintf(m, " 4 5 6\n");
    fclose(m);
    put("long_spec.xyz", text, n);
    free(text);
    path_of(p, sizeof p, "long_spec.xyz");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert(in.xyz[0] == 4 && in.xyz[1] == 5 && in.xyz[2] == 6);
    metro__frame_in_free(&in);

    /* a plain XYZ comment is any text, the word Properties included */
    PUT("plain.xyz", "1\nProperties of a salt, from somewhere\nNa 1 2 3\n");
    path_of(p, sizeof p, "plain.xyz");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert(in.xyz[0] == 1 && in.xyz[2] == 3);
    metro__frame_in_free(&in);

    /* counts beyond an int (atoi's overflow), types no extended XYZ has */
    PUT("count_big.xyz", "1\nProperties=species:S:1:pos:R:3:junk:R:99999999999\nA 0 0 0\n");
    read_refused("count_big.xyz", W("count_big.xyz:2 (frame 0)", "junk: count '99999999999'", "allowed: 1 to 1000000"));
    PUT("type.xyz", "1\nProperties=species:S:1:pos:Q:3\nA 0 0 0\n");
    read_refused("type.xyz", W("column pos has type 'Q' (allowed: S, R, I, L)"));
    /* a sweep beyond long long is not recorded (atoll's overflow) */
    PUT("sweep.xyz", "1\nProperties=species:S:1:pos:R:3 sweep=99999999999999999999999\nA 0 0 0\n");
    path_of(p, sizeof p, "sweep.xyz");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.step, -1);
    metro__frame_in_free(&in);
}
END_TEST

START_TEST(xyz_frames_cut_short)
{
    /* a count line the file does not hold the lines of: why, and where */
    PUT("more.xyz", "3\nProperties=species:S:1:pos:R:3\nA 0 0 0\nA 1 0 0\n");
    read_refused("more.xyz", W("more.xyz:1: holds no complete frame", "the count line says 3 particles",
                               "the file ends after 2 particle lines, at line 4"));
    PUT("huge_count.xyz", "2000000000\nProperties=species:S:1:pos:R:3\nA 0 0 0\n");
    read_refused("huge_count.xyz", W("says 2000000000 particles", "ends after 1 particle line, at line 3"));
    PUT("count_only.xyz", "\n5\n");
    read_refused("count_only.xyz", W("count_only.xyz:2:", "says 5 particles", "ends right after it"));
    PUT("blank.xyz", "\n \n");
    read_refused("blank.xyz", W("holds no complete frame (only blank lines)"));
    PUT("empty.xyz", "");
    read_refused("empty.xyz", W("holds no complete frame (it is empty)"));
    /* lines after a frame's count: the count is named with the line */
    PUT("fewer.xyz", "1\n\nA 0 0 0\nA 1 0 0\n");
    read_refused("fewer.xyz", W("fewer.xyz:4: expected the particle count of frame 1 after the 1 particles of frame 0 "
                                "(count on line 1), found 'A 1 0 0'"));
    /* a last frame of metro's cut inside its last line has all its lines:
     * the missing newline gives it away, and the frame before it is the
     * last one (its last number cut short would otherwise be read as
     * another) */
    metro__frame_in in;
    char err[4096], p[256];
    PUT("cut_line.xyz", "1\npbc=\"F F F\" sweep=1\nA 0 0 0\n1\npbc=\"F F F\" sweep=2\nA 1 0 0.25");
    ck_assert_msg((path_of(p, sizeof p, "cut_line.xyz"), metro__frames_read(p, -1, &in, err, sizeof err)) == 0, "%s", err);
    ck_assert_int_eq(in.frames, 1);
    ck_assert_int_eq(in.partial_tail, 1);
    ck_assert(in.xyz[0] == 0.0);
    metro__frame_in_free(&in);
    read_refused_at("cut_line.xyz", 1, W("initial_frame 1 does not exist: the file holds 1 frames and an incomplete one "
                                         "after them"));
    /* a file made by hand without its final newline is read whole, one
     * frame or several (the rule is for files of metro's only) */
    PUT("one_no_newline.xyz", "1\n\nA 1 0 0.25");
    ck_assert_msg((path_of(p, sizeof p, "one_no_newline.xyz"), metro__frames_read(p, -1, &in, err, sizeof err)) == 0, "%s", err);
    ck_assert_int_eq(in.frames, 1);
    ck_assert_int_eq(in.partial_tail, 0);
    ck_assert(in.xyz[2] == 0.25f);
    metro__frame_in_free(&in);
    PUT("two_no_newline.xyz", "1\n\nA 0 0 0\n1\nmade by hand\nA 1 0 0.5");
    ck_assert_msg((path_of(p, sizeof p, "two_no_newline.xyz"), metro__frames_read(p, -1, &in, err, sizeof err)) == 0, "%s", err);
    ck_assert_int_eq(in.frames, 2);
    ck_assert_int_eq(in.partial_tail, 0);
    ck_assert(in.xyz[2] == 0.5f);
    metro__frame_in_free(&in);
}
END_TEST

START_TEST(not_xyz_not_gsd)
{
    char p[256];
    /* a directory */
    path_of(p, sizeof p, "dir.xyz");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    read_refused("dir.xyz", W("is a directory"));
    path_of(p, sizeof p, "dir.gsd");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    read_refused("dir.gsd", W("is a directory"));
    /* a GSD file named .xyz: said, its bytes not quoted */
    path_of(p, sizeof p, "g.gsd");
    metro_frame_mark mark = {0};
    write_frames(p, 0, 1, 1, &mark);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s/g.gsd %s/g.xyz", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    read_refused("g.xyz", W("is a GSD file", "name it .gsd"));
    /* binary bytes in a count line are shown escaped */
    put("bin.xyz", "7\x01\x1b[2J\xff\n", 9);
    read_refused("bin.xyz",
                 W("bin.xyz:1: expected the particle count of frame 0", "'7\\x01\\x1b[2J\\xff'", "not a line of text"));
    put("nul.xyz", "2\0003\n", 4);
    read_refused("nul.xyz", W("'2\\x003'"));
    PUT("bad_name.xyz", "1\nProperties=species:S:1:po\x07s:R:3\nA 0 0 0\n");
    read_refused("bad_name.xyz", W("Properties=species:S:1:po\\x07s:R:3 has no pos:R:3"));
    /* an XYZ file named .gsd: a hint */
    PUT("t.gsd", "1\nProperties=species:S:1:pos:R:3\nA 0 0 0\n");
    read_refused("t.gsd", W("not a GSD file", "looks like an extended XYZ file", "name it .xyz"));
    /* a pipe: no open (it would wait for a writer), no two passes */
    path_of(p, sizeof p, "pipe.xyz");
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    read_refused("pipe.xyz", W("is not a regular file but a pipe"));
}
END_TEST

/* ---- GSD files made by hand ------------------------------------------------ */

typedef struct raw_chunk {
    const char *name;
    uint8_t type; /* 1 uint8 ... 9 float, 10 double */
    uint64_t N;
    uint32_t M;
    const void *data;
    uint64_t frame;
} raw_chunk;

static size_t raw_size(uint8_t t)
{
    static const size_t s[] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return s[t];
}

/* A GSD 2.0 file of chunks c[0..nc) (entries in this order), its name list
 * `pad` made-up names and then the chunks' names. */
static void gsd_file(const char *name, const raw_chunk *c, int nc, int pad)
{
    char p[256];
    path_of(p, sizeof p, name);
    char *names = NULL;
    size_t nn = 0;
    FILE *nm = open_memstream(&names, &nn);
    int ids[64];
    const char *seen[64];
    int nseen = 0;
    for (int k = 0; k < pad; ++k) fprintf(nm, "log/quantity_%d%c", k, 0);
    for (int i = 0; i < nc; ++i) {
        int j = 0;
        while (j < nseen && strcmp(seen[j], c[i].name)) ++j;
        if (j == nseen) {
            seen[nseen++] = c[i].name;
            fprintf(nm, "%s%c", c[i].name, 0);
        }
        ids[i] = pad + j;
    }
    fclose(nm);
    size_t nlb = (nn + 1 + 63) / 64 * 64;
    uint64_t idx_at = 256, entries = (uint64_t)nc + 1, nl_at = idx_at + 32 * entries, data_at = nl_at + nlb;
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char h[256] = {0};
    uint64_t hv[5] = {0x65DF65DF65DF65DFull, idx_at, entries, nl_at, nlb / 64};
    memcpy(h, hv, sizeof hv);
    uint32_t ver[2] = {(1u << 16) | 4u, 2u << 16};
    memcpy(h + 40, ver, sizeof ver);
    memcpy(h + 48, "test", 4);
    memcpy(h + 112, "hoomd", 5);
    fwrite(h, 1, 256, f);
    uint64_t at = data_at;
    for (int i = 0; i < nc; ++i) {
        unsigned char e[32] = {0};
        int64_t loc = (int64_t)at;
        uint16_t id = (uint16_t)ids[i];
        memcpy(e, &c[i].frame, 8);
        memcpy(e + 8, &c[i].N, 8);
        memcpy(e + 16, &loc, 8);
        memcpy(e + 24, &c[i].M, 4);
        memcpy(e + 28, &id, 2);
        e[30] = c[i].type;
        fwrite(e, 1, 32, f);
        at += c[i].N * c[i].M * raw_size(c[i].type);
    }
    unsigned char zero[64] = {0};
    fwrite(zero, 1, 32, f);
    fwrite(names, 1, nn, f);
    fwrite(zero, 1, nlb - nn, f);
    for (int i = 0; i < nc; ++i) fwrite(c[i].data, raw_size(c[i].type), c[i].N * c[i].M, f);
    fclose(f);
    free(names);
}

enum { U8 = 1, U32 = 3, U64 = 4, I8 = 5, F32 = 9, F64 = 10 };

START_TEST(gsd_values)
{
    char p[256], err[4096];
    metro__frame_in in;
    static const uint32_t two = 2, zero = 0;
    static const float pos2[6] = {0, 0, 0, 1, 2, 3};
    static const char types[2][2] = {"A", "B"};
    static const uint32_t tid[2] = {0, 1};
    /* the frame as gsd.hoomd writes it, after 200 logged names: read */
    raw_chunk c[] = {{"particles/N", U32, 1, 1, &two, 0},   {"particles/types", I8, 2, 2, types, 0},
                     {"particles/typeid", U32, 2, 1, tid, 0}, {"particles/position", F32, 2, 3, pos2, 0},
                     {"particles/charge", F32, 2, 1, (float[]){1, -1}, 0}, {"particles/diameter", F32, 2, 1, (float[]){1, 2}, 0}};
    gsd_file("ok.gsd", c, 6, 200);
    path_of(p, sizeof p, "ok.gsd");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.particles, 2);
    ck_assert(in.xyz[5] == 3 && in.charge[1] == -1 && in.diameter[1] == 2);
    ck_assert_str_eq(in.names[in.type[1]], "B");
    metro__frame_in_free(&in);

    /* NaN and inf: positions, charges, diameters */
    const float qnan = NAN, inf = INFINITY;
    raw_chunk b[6];
    memcpy(b, c, sizeof b);
    b[3].data = (float[]){0, 0, 0, 1, qnan, 3};
    gsd_file("pos_nan.gsd", b, 6, 0);
    read_refused("pos_nan.gsd", W("frame 0: particle 1: particles/position has y = nan, not a finite number"));
    b[3].data = (float[]){0, 0, -inf, 1, 2, 3};
    gsd_file("pos_inf.gsd", b, 6, 0);
    read_refused("pos_inf.gsd", W("frame 0: particle 0: particles/position has z = -inf, not a finite number"));
    b[3] = (raw_chunk){"particles/position", F64, 2, 3, (double[]){0, 0, 0, 1e300, 2, 3}, 0};
    gsd_file("pos_big.gsd", b, 6, 0);
    read_refused("pos_big.gsd", W("particle 1: particles/position has x = 1e+300, not a finite number in single precision"));
    memcpy(b, c, sizeof b);
    b[4].data = (float[]){qnan, -1};
    gsd_file("q_nan.gsd", b, 6, 0);
    read_refused("q_nan.gsd", W("frame 0: particle 0: particles/charge is nan, not a finite number"));
    memcpy(b, c, sizeof b);
    b[5].data = (float[]){1, inf};
    gsd_file("d_inf.gsd", b, 6, 0);
    read_refused("d_inf.gsd", W("frame 0: particle 1: particles/diameter is inf, not a finite number"));

    /* shapes: a particles/N of no value (read past its end before), of
     * no whole number; a charge of the wrong length in the frame itself
     * (ignored before); a typeid of no whole number; types not text */
    memcpy(b, c, sizeof b);
    b[0] = (raw_chunk){"particles/N", U32, 0, 1, &zero, 0};
    gsd_file("n_none.gsd", b, 6, 0);
    read_refused("n_none.gsd", W("frame 0: chunk particles/N holds no value (0 x 1; allowed: one value)"));
    b[0] = (raw_chunk){"particles/N", F32, 1, 1, (float[]){2.5f}, 0};
    gsd_file("n_half.gsd", b, 6, 0);
    read_refused("n_half.gsd", W("frame 0: particles/N = 2.5 (allowed: a whole number"));
    memcpy(b, c, sizeof b);
    b[4] = (raw_chunk){"particles/charge", F32, 3, 1, (float[]){1, -1, 0}, 0};
    gsd_file("q_long.gsd", b, 6, 0);
    read_refused("q_long.gsd", W("frame 0: particles/charge is 3 x 1 values, not one for each of the 2 particles"));
    memcpy(b, c, sizeof b);
    b[2] = (raw_chunk){"particles/typeid", F32, 2, 1, (float[]){0, 0.5f}, 0};
    gsd_file("tid_half.gsd", b, 6, 0);
    read_refused("tid_half.gsd", W("frame 0: particle 1 has typeid 0.5"));
    memcpy(b, c, sizeof b);
    b[1] = (raw_chunk){"particles/types", F32, 2, 1, (float[]){0, 1}, 0};
    gsd_file("types_float.gsd", b, 6, 0);
    read_refused("types_float.gsd", W("frame 0: particles/types is type 9, 2 x 1 (allowed: 1 to 65536 names"));

    /* an index out of frame order: the last entry does not count the
     * frames */
    raw_chunk o[] = {{"particles/N", U32, 1, 1, &two, 0}, {"particles/position", F32, 2, 3, pos2, 0},
                     {"particles/N", U32, 1, 1, &two, 5}, {"particles/position", F32, 2, 3, pos2, 1}};
    gsd_file("order.gsd", o, 4, 0);
    read_refused("order.gsd", W("damaged GSD file (index entry 3 names frame 1, after frame 5)"));

    /* integers beyond what they are read into: a bond's particle (UB as a
     * long long before), a step (not recorded) */
    static const uint64_t big_group[2] = {0, UINT64_MAX};
    static const uint64_t big_step = UINT64_MAX;
    raw_chunk g[] = {{"configuration/step", U64, 1, 1, &big_step, 0}, {"particles/N", U32, 1, 1, &two, 0},
                     {"particles/position", F32, 2, 3, pos2, 0},        {"bonds/N", U32, 1, 1, (uint32_t[]){1}, 0},
                     {"bonds/group", U64, 1, 2, big_group, 0}};
    gsd_file("bond_big.gsd", g, 5, 0);
    read_refused("bond_big.gsd", W("frame 0: bond 0 joins particle 18446744073709551616, but the frame has 2 particles"));
    gsd_file("step_big.gsd", g, 3, 0);
    path_of(p, sizeof p, "step_big.gsd");
    ck_assert_msg(metro__frames_read(p, -1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.step, -1);
    metro__frame_in_free(&in);

    /* a frame whose N differs from frame 0's takes the schema's defaults
     * for what only frame 0 has, as gsd.hoomd reads it */
    raw_chunk d[] = {{"particles/N", U32, 1, 1, &two, 0}, {"particles/position", F32, 2, 3, pos2, 0},
                     {"particles/charge", F32, 2, 1, (float[]){1, -1}, 0}, {"particles/N", U32, 1, 1, (uint32_t[]){1}, 1},
                     {"particles/position", F32, 1, 3, pos2, 1}};
    gsd_file("n_changes.gsd", d, 5, 0);
    path_of(p, sizeof p, "n_changes.gsd");
    ck_assert_msg(metro__frames_read(p, 1, &in, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.particles, 1);
    ck_assert_ptr_null(in.charge);
    metro__frame_in_free(&in);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("frames");
    TCase *tc = tcase_create("formats");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, kills_leave_whole_frames);
    tcase_add_test(tc, bonds);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, xyz_values);
    tcase_add_test(tc, xyz_frames_cut_short);
    tcase_add_test(tc, not_xyz_not_gsd);
    tcase_add_test(tc, gsd_values);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
