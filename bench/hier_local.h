/* hier_local.h — what bench/hier_local's two files share: the particles
 * bucketed by leaf, a level's cells, a cell's interaction list, and the
 * local expansions in fixed point (hier_local_fixed.c). */
#ifndef HIER_LOCAL_H
#define HIER_LOCAL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"
#include "hier_math.h"
#include "hier_tree.h"

#define HL_PM HIER_MAX_DEG /* the degrees kept: the tree's for orders 8 and 12 (12 + HIER_EXTRA) */
#define HL_W (HL_PM + 1)
#define HL_LMAX 16         /* levels */
#define HL_AROUND 1000     /* (2 (2b + 1))^3 at b = 2 */

/* A trial in the sampler's default cube of side `side` about o, kept inside
 * the ball of radius rin */
static inline metro_float4 trial_move(unsigned long long *s, metro_float4 o, double side, double rin)
{
    metro_float4 t;
    do {
        t = metro_f4((float)(o.x + (urand(s) - 0.5) * side), (float)(o.y + (urand(s) - 0.5) * side),
                     (float)(o.z + (urand(s) - 0.5) * side), o.w);
    } while ((double)t.x * t.x + (double)t.y * t.y + (double)t.z * t.z > rin * rin);
    return t;
}

/* The leaves' particles, bucketed (counting sort) */
typedef struct {
    int L, m;         /* leaf level, leaves a side */
    double Rt, h;     /* cube half side, leaf side */
    int *start, *idx; /* leaf c's particles: idx[start[c] .. start[c + 1]) */
    int *buf;         /* a cell's particles (cell_particles), n places */
    int *leaf, *fill; /* scratch of bucket: n and m^3 */
} grid;

static inline int cell_of(const grid *g, int l, double v)
{
    const int ml = 1 << l;
    int c = (int)floor((v + g->Rt) / (2.0 * g->Rt / ml));
    return c < 0 ? 0 : c >= ml ? ml - 1 : c;
}

/* The centre of level-l cell c */
static inline void cell_centre(const grid *g, int l, const int c[3], double cc[3])
{
    const double hl = 2.0 * g->Rt / (1 << l);
    for (int a = 0; a < 3; ++a) cc[a] = -g->Rt + (c[a] + 0.5) * hl;
}

/* Level l's cell of x (c) and its centre (cc) */
static inline void cell_at_level(const grid *g, int l, const double x[3], int c[3], double cc[3])
{
    for (int a = 0; a < 3; ++a) c[a] = cell_of(g, l, x[a]);
    cell_centre(g, l, c, cc);
}

/* The n particles into their leaves (g's arrays allocated for n) */
static inline void bucket(grid *g, const metro_float4 *pos, int n)
{
    const size_t nl = (size_t)g->m * g->m * g->m;
    for (size_t c = 0; c <= nl; ++c) g->start[c] = 0;
    for (int i = 0; i < n; ++i) {
        g->leaf[i] = (cell_of(g, g->L, pos[i].x) * g->m + cell_of(g, g->L, pos[i].y)) * g->m + cell_of(g, g->L, pos[i].z);
        g->start[g->leaf[i] + 1]++;
    }
    for (size_t c = 0; c < nl; ++c) {
        g->start[c + 1] += g->start[c];
        g->fill[c] = 0;
    }
    for (int i = 0; i < n; ++i) g->idx[g->start[g->leaf[i]] + g->fill[g->leaf[i]]++] = i;
}

/* The particles of level-l cell (cx, cy, cz) but skip, leaf by leaf, into
 * g->buf; returns how many */
static inline int cell_particles(const grid *g, int l, int cx, int cy, int cz, int skip)
{
    const int span = 1 << (g->L - l);
    int cnt = 0;
    for (int u = cx * span; u < (cx + 1) * span; ++u)
        for (int v = cy * span; v < (cy + 1) * span; ++v)
            for (int w = cz * span; w < (cz + 1) * span; ++w) {
                const int leaf = (u * g->m + v) * g->m + w;
                for (int k = g->start[leaf]; k < g->start[leaf + 1]; ++k)
                    if (g->idx[k] != skip) g->buf[cnt++] = g->idx[k];
            }
    return cnt;
}

static inline int chebyshev(const int a[3], const int b[3])
{
    int d = 0;
    for (int k = 0; k < 3; ++k) {
        const int e = abs(a[k] - b[k]);
        if (e > d) d = e;
    }
    return d;
}

/* Level l's cells around cell c for buffer b <= 2: the children of the
 * cells within b of c's parent (Chebyshev), each with [3] = whether it is
 * within b of c itself (a finer level's, or at the leaves summed directly);
 * the others are c's interaction list.  Returns how many */
static inline int around(int l, const int c[3], int b, int (*cells)[4])
{
    const int ml = 1 << l;
    int lo[3], hi[3], k = 0;
    for (int a = 0; a < 3; ++a) {
        lo[a] = 2 * ((c[a] >> 1) - b);
        hi[a] = 2 * ((c[a] >> 1) + b) + 1;
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] > ml - 1) hi[a] = ml - 1;
    }
    for (int dx = lo[0]; dx <= hi[0]; ++dx)
        for (int dy = lo[1]; dy <= hi[1]; ++dy)
            for (int dz = lo[2]; dz <= hi[2]; ++dz) {
                const int e[3] = {dx, dy, dz};
                cells[k][0] = dx;
                cells[k][1] = dy;
                cells[k][2] = dz;
                cells[k][3] = chebyshev(e, c) <= b;
                ++k;
            }
    return k;
}

/* ---- hier_local_fixed.c ---------------------------------------------- */

/* The fixed-point layout and the rounding factors, per level l and (n, m) */
typedef struct hl_fixed hl_fixed;
hl_fixed *hl_fixed_new(const grid *g, int b, double zsum);

/* One place x's far field from the local expansions of buffer b (its
 * ancestors' cells, levels 2 ... L, each fed by its interaction list, the
 * moving particle `skip` left out), at orders 8 and 12 */
typedef struct {
    double est[2];   /* the estimate in double from the fixed-point coefficients */
    double trunc[2]; /* the truncation bound: degrees above the order by the stored norms, the sources' tail */
    double round[2]; /* the rounding bound of est: accumulation, conversion, evaluation */
    double err[2];   /* |exact - est|, the exact sum over the same sources in long double */
    double rerr[2];  /* |est - the same degrees in long double| */
    double crude;    /* the per-cell source term of the rounding bound over the per-source one (order 12) */
    double phi;      /* Σ |z| / distance over the same sources */
} hl_far;
void hl_far_field(const hl_fixed *f, const grid *g, const metro_float4 *pos, const coulomb_hs_params *prm,
                  const double x[3], int skip, hl_far *out);

/* `moves` random moves applied by removing and adding each moved
 * particle's terms to a tracked set of cells (cells per level at every
 * level), against those cells rebuilt from the new positions; returns the
 * cells that differ in any bit (pos and g are moved and rebucketed), the
 * removes and adds applied (updates) and the tracked cells they reached
 * (updated) */
int hl_history(const hl_fixed *f, grid *g, metro_float4 *pos, int n, const coulomb_hs_params *prm, int moves,
               int cells, double side, double rin, unsigned long long *seed, long *updates, int *updated);

#endif
