/* test_frames — the core's trajectory formats (core/src/frames.c) directly:
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
 *   - damaged or foreign files are refused with a message, never a crash.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    table[0].diameter = 3;
    snprintf(table[1].name, 16, "my anion");
    table[1].charge = -1;
    table[1].diameter = 4;
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
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
