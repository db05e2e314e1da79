/* hier_chain_depth — how sequential is a batch's chain of decisions?
 * (issue 13, a design study; bench/NOTES.md, "How sequential a batch's
 * decisions are")
 *
 * The GPU sampler decides a batch's S trials one after another (hg_chain):
 * trial j's energy change depends on which of its earlier mates i < j were
 * accepted.  But each mate can only move trial j's change between two known
 * values (its term if accepted, A_ij, or if rejected, B_ij), so trial j's
 * change lies in [base_j + Σ min(A, B), base_j + Σ max(A, B)], and where the
 * threshold −ln u_j lies outside that range its decision is known without
 * the others'.  Deciding in rounds, each round using the decisions known
 * after the one before, is a parallel algorithm whose depth (the rounds until
 * every trial is known) is what a chain of S dependent steps could shrink to.
 *
 * This program runs the primitive-model 3:−1 electrolyte of configs/
 * electrolyte_3to1.ini at the paper's density (R = 3795 Å at 2^20 ions,
 * scaled as N^(1/3)), sequential updating, trial cube of side 2R/3, every
 * energy change summed exactly in double over all ions (O(N) a move, so the
 * chain itself is the reference), and for every batch of S consecutive
 * particles it counts:
 *   - the trials a first round leaves open (their range holds the threshold);
 *   - the rounds until every decision is known;
 * and checks that each decision the rounds make is the sequential chain's
 * (exit 1 if not).  The ranges need no rounding slack: both sums add one
 * term a mate in the same order, and rounded addition is monotone.
 *
 *   hier_chain_depth N cycles [S [batches [seed [file [start.xyz]]]]]
 * prints one table row a cycle; `batches` (default all, N / S) limits a
 * cycle to its first batches (the other ions stay put), for sizes whose
 * whole cycle of O(N) sums would take too long here.  With `file` (not
 * "-"), the last cycle's batches are written there for bench/hier_rounds.cu
 * (the rounds on the GPU): int32 "HCD1", S, batches; then a batch's
 * base[S], thr[S], A[S*S], B[S*S] (doubles, row j the mates i < j, zero
 * beyond) and the chain's decisions[S] (bytes).  With `start.xyz`, the ions
 * start from the first frame of metro's trajectory in extended XYZ (the
 * trajectory observable, format = xyz: species, x, y, z, charge per line,
 * cell_radius in the comment line) instead of a uniform placement: an
 * equilibrated state of the sampler itself, at sizes where this program's
 * own O(N) moves could not equilibrate one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "frames.h"

#define LB 7.117 /* Bjerrum length, Å */
#define D 7.5    /* diameter of both species, Å */

typedef struct {
    double x, y, z, q;
} ion;

/* βU between charges at a and b: λ_B qq'/r, +inf on contact */
static double pair(const ion *a, double bx, double by, double bz, double bq)
{
    const double dx = a->x - bx, dy = a->y - by, dz = a->z - bz, r2 = dx * dx + dy * dy + dz * dz;
    return r2 < D * D ? INFINITY : LB * a->q * bq / sqrt(r2);
}

/* Σ_k [U(n, x_k) − U(o, x_k)] over the ions k in [k0, k1) other than skip */
static double change(const ion *p, int k0, int k1, int skip, const ion *o, const ion *n)
{
    double s = 0.0;
    int hit = 0;
    for (int k = k0; k < k1; ++k) {
        if (k == skip) continue;
        const double dxn = n->x - p[k].x, dyn = n->y - p[k].y, dzn = n->z - p[k].z;
        const double dxo = o->x - p[k].x, dyo = o->y - p[k].y, dzo = o->z - p[k].z;
        const double rn = dxn * dxn + dyn * dyn + dzn * dzn, ro = dxo * dxo + dyo * dyo + dzo * dzo;
        hit |= rn < D * D;
        s += LB * o->q * p[k].q * (1.0 / sqrt(rn) - 1.0 / sqrt(ro));
    }
    return hit ? INFINITY : s;
}

static void place(ion *t, double rin, double q, unsigned long long *s)
{
    do {
        t->x = (2 * urand(s) - 1) * rin;
        t->y = (2 * urand(s) - 1) * rin;
        t->z = (2 * urand(s) - 1) * rin;
    } while (t->x * t->x + t->y * t->y + t->z * t->z > rin * rin);
    t->q = q;
}

/* The cell of coordinate v in [−rin, rin] on a grid of m cells of side h */
static int grid_cell(double v, double rin, double h, int m)
{
    const int c = (int)((v + rin) / h);
    return c < 0 ? 0 : c >= m ? m - 1 : c;
}

/* Places again every ion that touches an ion of lower index; returns how
 * many moved (a counting sort into cells of side >= D, the 27 around) */
static int resolve_overlaps(ion *p, int n, double rin, unsigned long long *s)
{
    int m = (int)(2 * rin / D);
    if (m > 256) m = 256;
    if (m < 1) m = 1;
    const double h = 2 * rin / m;
    int *cnt = calloc((size_t)m * m * m + 1, sizeof *cnt), *idx = malloc((size_t)n * sizeof *idx);
    int *cell = malloc((size_t)n * sizeof *cell), *bad = calloc((size_t)n, sizeof *bad);
    if (!cnt || !idx || !cell || !bad) {
        fprintf(stderr, "hier_chain_depth: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; ++i) {
        cell[i] = (grid_cell(p[i].x, rin, h, m) * m + grid_cell(p[i].y, rin, h, m)) * m + grid_cell(p[i].z, rin, h, m);
        ++cnt[cell[i] + 1];
    }
    for (int c = 0; c < m * m * m; ++c) cnt[c + 1] += cnt[c];
    int *fill = malloc((size_t)m * m * m * sizeof *fill);
    memcpy(fill, cnt, (size_t)m * m * m * sizeof *fill);
    for (int i = 0; i < n; ++i) idx[fill[cell[i]]++] = i;
    int moved = 0;
    for (int i = 0; i < n; ++i) {
        const int cx = grid_cell(p[i].x, rin, h, m), cy = grid_cell(p[i].y, rin, h, m), cz = grid_cell(p[i].z, rin, h, m);
        for (int x = cx - 1; x <= cx + 1 && !bad[i]; ++x)
            for (int y = cy - 1; y <= cy + 1 && !bad[i]; ++y)
                for (int z = cz - 1; z <= cz + 1 && !bad[i]; ++z) {
                    if (x < 0 || y < 0 || z < 0 || x >= m || y >= m || z >= m) continue;
                    const int c = (x * m + y) * m + z;
                    for (int k = cnt[c]; k < cnt[c + 1]; ++k) {
                        const int o = idx[k];
                        if (o < i && isinf(pair(&p[i], p[o].x, p[o].y, p[o].z, 1.0))) {
                            bad[i] = 1;
                            break;
                        }
                    }
                }
    }
    for (int i = 0; i < n; ++i)
        if (bad[i]) {
            place(&p[i], rin, p[i].q, s);
            ++moved;
        }
    free(cnt);
    free(idx);
    free(cell);
    free(bad);
    free(fill);
    return moved;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The first frame of the trajectory at path (metro's extended XYZ, or GSD
 * with charges) into p, through the core's reader (count, finite values);
 * the cell radius from the XYZ comment line's cell_radius to *R.  Every ion
 * must lie in the ball of radius R − D/2: an error names the ion. */
static int load_frame(const char *path, ion *p, int n, double *R)
{
    metro__frame_in f;
    char err[4096];
    if (metro__frames_read(path, 0, &f, err, sizeof err)) {
        fprintf(stderr, "hier_chain_depth: %s\n", err);
        return -1;
    }
    int ok = 0;
    char line[4096] = "";
    const char *cr = NULL;
    FILE *in = fopen(path, "r");
    if (in && fgets(line, sizeof line, in) && fgets(line, sizeof line, in)) cr = strstr(line, "cell_radius=");
    if (in) fclose(in);
    if (f.particles != n || !f.charge) {
        fprintf(stderr, "hier_chain_depth: %s: %d ions%s, N is %d\n", path, f.particles, f.charge ? "" : " without charges",
                n);
    } else if (!cr || sscanf(cr + 12, "%lf", R) != 1 || !(*R > D)) {
        fprintf(stderr, "hier_chain_depth: %s:2: no cell_radius=R (R > %g Å) in the comment line\n", path, D);
    } else {
        const double rin = *R - D / 2, tol = 1e-6 * *R; /* the file's float places, printed to 9 digits */
        ok = 1;
        for (int i = 0; i < n && ok; ++i) {
            p[i] = (ion){f.xyz[3 * i], f.xyz[3 * i + 1], f.xyz[3 * i + 2], f.charge[i]};
            if (p[i].q == 0.0 || sqrt(p[i].x * p[i].x + p[i].y * p[i].y + p[i].z * p[i].z) > rin + tol) {
                fprintf(stderr, "hier_chain_depth: %s: ion %d is %s\n", path, i,
                        p[i].q == 0.0 ? "neutral" : "outside the ball of radius R - D/2");
                ok = 0;
            }
        }
    }
    metro__frame_in_free(&f);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hier_chain_depth N cycles [S [batches [seed [file|- [start.xyz]]]]]\n");
        return 2;
    }
    const int n = atoi(argv[1]), cycles = atoi(argv[2]), S = argc > 3 ? atoi(argv[3]) : 1024;
    int nb = argc > 4 ? atoi(argv[4]) : 0;
    unsigned long long seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
    if (n < 8 || n % 4 != 0 || cycles < 1 || S < 2 || S > n || n % S != 0 || nb < 0 || nb > n / S) {
        fprintf(stderr, "hier_chain_depth: N a multiple of 4 and of S, 2 <= S <= N, cycles >= 1, "
                        "0 <= batches <= N / S (0: all)\n");
        return 2;
    }
    if (nb == 0) nb = n / S;
    FILE *dump = NULL;
    if (argc > 6 && strcmp(argv[6], "-") != 0 && !(dump = fopen(argv[6], "wb"))) {
        perror(argv[6]);
        return 1;
    }
    if (dump) {
        const int head[3] = {0x31444348, S, nb};
        fwrite(head, sizeof head, 1, dump);
    }
    ion *p = malloc((size_t)n * sizeof *p);
    double R = 3795.0 * cbrt(n / 1048576.0);
    if (!p || (argc > 7 && load_frame(argv[7], p, n, &R) != 0)) {
        if (!p) fprintf(stderr, "hier_chain_depth: out of memory\n");
        return 1;
    }
    const double rin = R - D / 2, side = 2.0 * R / 3.0;
    ion *nw = malloc((size_t)S * sizeof *nw);
    double *base = malloc((size_t)S * sizeof *base), *thr = malloc((size_t)S * sizeof *thr);
    double *A = calloc((size_t)S * S, sizeof *A), *B = calloc((size_t)S * S, sizeof *B);
    signed char *truth = malloc((size_t)S), *known = malloc((size_t)S), *next = malloc((size_t)S);
    int *open1 = malloc((size_t)nb * sizeof *open1), *rounds = malloc((size_t)nb * sizeof *rounds);
    double *width = malloc((size_t)nb * S * sizeof *width); /* a cycle's trials */
    if (!nw || !base || !thr || !A || !B || !truth || !known || !next || !open1 || !rounds || !width) {
        fprintf(stderr, "hier_chain_depth: out of memory\n");
        return 1;
    }
    /* placement: uniform in the ball, a cation (+3) every fourth index (so
     * the system is neutral and a batch a mixture); overlaps found on a grid
     * of cells of side >= D and the later ion of each placed again */
    if (argc > 7) {
        const int touching = resolve_overlaps(p, n, rin, &seed);
        if (touching > 0) {
            fprintf(stderr, "hier_chain_depth: %s: %d ions touch an ion of lower index (diameter %g Å)\n", argv[7],
                    touching, D);
            return 1;
        }
    } else {
        for (int i = 0; i < n; ++i) place(&p[i], rin, i % 4 == 0 ? 3.0 : -1.0, &seed);
        while (resolve_overlaps(p, n, rin, &seed) > 0) {
        }
    }
    printf("N %d, S %d, %d batches a cycle, R %.1f Å, trial cube side %.1f Å, from %s (hier_chain_depth)\n", n, S, nb,
           R, side, argc > 7 ? argv[7] : "a uniform placement");
    printf("| cycle | accepted | range width Σ|A − B| over earlier mates, kT: median (90%%) | open after one round, "
           "a batch: mean (max) | rounds to decide a batch: median (max) |\n|---|---|---|---|---|\n");
    for (int c = 1; c <= cycles; ++c) {
        long acc = 0;
        int nw_count = 0;
        for (int b = 0; b < nb; ++b) {
            const int p0 = b * S;
            /* the trials and their thresholds, in the chain's order */
            for (int j = 0; j < S; ++j) {
                const ion *o = &p[p0 + j];
                nw[j] = (ion){o->x + (urand(&seed) - 0.5) * side, o->y + (urand(&seed) - 0.5) * side,
                              o->z + (urand(&seed) - 0.5) * side, o->q};
                thr[j] = -log(1.0 - urand(&seed)); /* u in (0, 1]: accepted iff ΔE < −ln u */
            }
            /* base_j: every ion but the earlier mates, at its place before
             * the batch (later mates have not moved yet when j decides) */
#pragma omp parallel for schedule(dynamic, 8)
            for (int j = 0; j < S; ++j) {
                const ion *o = &p[p0 + j], *t = &nw[j];
                if (t->x * t->x + t->y * t->y + t->z * t->z > rin * rin) {
                    base[j] = INFINITY; /* outside the wall */
                    continue;
                }
                const double a = change(p, 0, p0, -1, o, t), z = change(p, p0 + j + 1, n, -1, o, t);
                base[j] = a + z;
                for (int i = 0; i < j; ++i) {
                    /* mate i accepted (at nw[i]) or rejected (at p[p0 + i]) */
                    const double un = pair(t, nw[i].x, nw[i].y, nw[i].z, nw[i].q),
                                 uo = pair(o, nw[i].x, nw[i].y, nw[i].z, nw[i].q);
                    const double vn = pair(t, p[p0 + i].x, p[p0 + i].y, p[p0 + i].z, p[p0 + i].q),
                                 vo = pair(o, p[p0 + i].x, p[p0 + i].y, p[p0 + i].z, p[p0 + i].q);
                    B[(size_t)j * S + i] = vn - vo;
                    /* uo = +inf: mate i's trial touched o, where j still sat,
                     * so i was rejected and only B can count */
                    A[(size_t)j * S + i] = isinf(uo) ? B[(size_t)j * S + i] : un - uo;
                }
            }
            /* the sequential chain, the reference */
            for (int j = 0; j < S; ++j) {
                double e = base[j];
                for (int i = 0; i < j; ++i) e += truth[i] ? A[(size_t)j * S + i] : B[(size_t)j * S + i];
                truth[j] = e < thr[j];
                double w = 0.0;
                for (int i = 0; i < j; ++i) w += fabs(A[(size_t)j * S + i] - B[(size_t)j * S + i]);
                if (isfinite(base[j])) width[nw_count++] = w;
            }
            /* rounds: each decides from the decisions known after the one
             * before (−1 open) */
            memset(known, -1, (size_t)S);
            int r = 0, left = S;
            while (left > 0) {
                ++r;
                for (int j = 0; j < S; ++j) {
                    next[j] = known[j];
                    if (known[j] >= 0) continue;
                    double lo = base[j], hi = base[j];
                    for (int i = 0; i < j; ++i) {
                        const double a = A[(size_t)j * S + i], bb = B[(size_t)j * S + i];
                        if (known[i] >= 0) {
                            const double v = known[i] ? a : bb;
                            lo += v;
                            hi += v;
                        } else {
                            lo += fmin(a, bb);
                            hi += fmax(a, bb);
                        }
                    }
                    if (hi < thr[j]) next[j] = 1;
                    else if (!(lo < thr[j])) next[j] = 0;
                }
                int now = 0;
                for (int j = 0; j < S; ++j) {
                    if (next[j] >= 0 && known[j] < 0 && next[j] != truth[j]) {
                        fprintf(stderr, "hier_chain_depth: cycle %d batch %d trial %d: round %d decided %d, the chain %d\n",
                                c, b, j, r, next[j], truth[j]);
                        return 1;
                    }
                    known[j] = next[j];
                    now += known[j] < 0;
                }
                if (r == 1) open1[b] = now;
                if (now == left) {
                    fprintf(stderr, "hier_chain_depth: round %d decided nothing (trial 0 is always decided)\n", r);
                    return 1;
                }
                left = now;
            }
            rounds[b] = r;
            if (dump && c == cycles &&
                (fwrite(base, sizeof *base, (size_t)S, dump) != (size_t)S ||
                 fwrite(thr, sizeof *thr, (size_t)S, dump) != (size_t)S ||
                 fwrite(A, sizeof *A, (size_t)S * S, dump) != (size_t)S * S ||
                 fwrite(B, sizeof *B, (size_t)S * S, dump) != (size_t)S * S ||
                 fwrite(truth, 1, (size_t)S, dump) != (size_t)S)) {
                perror(argv[6]);
                return 1;
            }
            /* the batch's accepted moves */
            for (int j = 0; j < S; ++j)
                if (truth[j]) {
                    p[p0 + j] = nw[j];
                    ++acc;
                }
        }
        qsort(width, (size_t)nw_count, sizeof *width, cmp_double);
        double om = 0.0;
        int omax = 0;
        for (int b = 0; b < nb; ++b) {
            om += open1[b];
            if (open1[b] > omax) omax = open1[b];
        }
        qsort(rounds, (size_t)nb, sizeof *rounds, cmp_int);
        printf("| %d | %.4f | %.3g (%.3g) | %.1f (%d) | %d (%d) |\n", c, (double)acc / ((double)nb * S), width[nw_count / 2],
               width[nw_count * 9 / 10], om / nb, omax, rounds[nb / 2], rounds[nb - 1]);
        fflush(stdout);
    }
    if (dump && fclose(dump) != 0) {
        perror(argv[6]);
        return 1;
    }
    free(p);
    free(nw);
    free(base);
    free(thr);
    free(A);
    free(B);
    free(truth);
    free(known);
    free(next);
    free(open1);
    free(rounds);
    free(width);
    return 0;
}
