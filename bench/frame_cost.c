/* frame_cost — what writing a trajectory frame costs: one frame of the
 * 1,048,576-ion electrolyte (3:-1, positions in a cell of radius 3795 Å)
 * appended to a GSD and to an extended XYZ file with the core's writer
 * (the code behind host->frame_append: data, sync, then the index that
 * makes the frame visible).
 *
 *   frame_cost [--particles N] [--frames K] [--dir DIR]
 *
 * Prints, per format, the median time of one append over K frames after
 * one warm-up frame, the bytes per frame and the rate, and the share of a
 * brush cycle that one frame every 10 cycles would cost if it were written
 * on the sampler's own thread (0.95 s per cycle at 2^20 on an H100,
 * bench/NOTES.md; the trajectory observable writes on a thread of its own,
 * so this is the upper bound of the slowdown).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frames.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = 1 << 20, k = 5;
    const char *dir = "/tmp";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--particles") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc) k = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "usage: frame_cost [--particles N] [--frames K] [--dir DIR]\n");
            return 2;
        }
    }
    const double R = 3795.0;
    metro_float4 *pos = malloc((size_t)n * sizeof *pos);
    srand(7);
    for (int i = 0; i < n; ++i) {
        double x, y, z;
        do {
            x = 2.0 * rand() / RAND_MAX - 1, y = 2.0 * rand() / RAND_MAX - 1, z = 2.0 * rand() / RAND_MAX - 1;
        } while (x * x + y * y + z * z > 1);
        pos[i] = (metro_float4){(float)(R * x), (float)(R * y), (float)(R * z), (float)(i % 4 == 0 ? 0 : 1)};
    }
    metro_species sp[2] = {{"cation", 3, 7.5, n / 4}, {"anion", -1, 7.5, n - n / 4}};
    metro_frame f = {.particles = n, .pos = pos, .species = 2, .species_table = sp, .cell_radius = R, .slot = -1};
    printf("frame_cost: %d particles, %d frames per format after one warm-up, files in %s\n\n", n, k, dir);
    printf("%-6s %14s %14s %12s %24s\n", "format", "s per frame", "MB per frame", "MB/s", "1 frame / 10 cycles");
    const char *ext[] = {"gsd", "xyz"};
    for (int e = 0; e < 2; ++e) {
        char path[1024], err[1024];
        snprintf(path, sizeof path, "%s/frame_cost_%d.%s", dir, (int)getpid(), ext[e]);
        unlink(path);
        metro_frame_mark mark = {0};
        double *t = calloc((size_t)k, sizeof *t);
        uint64_t frame_bytes = 0;
        int bad = metro__frames_append(path, &f, &mark, err, sizeof err);
        for (int i = 0; i < k && !bad; ++i) {
            f.sweep = 10 * (i + 1);
            double t0 = now();
            uint64_t before = mark.bytes;
            bad = metro__frames_append(path, &f, &mark, err, sizeof err);
            t[i] = now() - t0;
            if (i == 0) frame_bytes = mark.bytes - before;
        }
        if (bad) {
            fprintf(stderr, "frame_cost: %s\n", err);
            return 1;
        }
        double mb = (double)frame_bytes / 1e6;
        qsort(t, (size_t)k, sizeof *t, cmp_double);
        double med = t[k / 2];
        printf("%-6s %14.4g %14.4g %12.4g %23.2f%%\n", ext[e], med, mb, mb / med, 100 * med / (10 * 0.95));
        free(t);
        unlink(path);
    }
    free(pos);
    return 0;
}
