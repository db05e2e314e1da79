/* pc_accum.c — CPU pair histograms, blocks of measurements, estimates.
 * See pc_accum.h for the normalisation. */
#include "pc_accum.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- one configuration -------------------------------------------------- */

int metro_pc_select(const metro_float4 *pos, int n, const metro_pc_system *sys, int *central,
                    double *rec)
{
    const int S = sys->species;
    const double r_int = sys->r_int, dt = sys->r_cell / PC_NT, ds = r_int / PC_NS;
    double *cen = rec + METRO_PC_CEN(S, sys->bins), *prof = rec + METRO_PC_PROF(S, sys->bins);
    int nc = 0;
    for (int i = 0; i < n; i++) {
        const double x = pos[i].x, y = pos[i].y, z = pos[i].z, t = sqrt(x * x + y * y + z * z);
        const int b = pc_species(pos[i].w, S);
        int kt = (int)(t / dt);
        prof[(size_t)b * PC_NT + (kt < PC_NT ? kt : PC_NT - 1)] += 1.0;
        if (x * x + y * y + z * z < r_int * r_int) {
            central[nc++] = i;
            rec[METRO_PC_CENTRAL(S, b)] += 1.0;
            rec[METRO_PC_INTERIOR(S, b)] += 1.0;
            int ks = (int)(t / ds);
            cen[(size_t)b * PC_NS + (ks < PC_NS ? ks : PC_NS - 1)] += 1.0;
        }
    }
    return nc;
}

void metro_pc_histogram_cpu(const metro_float4 *pos, const int *central, const pc_launch *L,
                            double *hist, double *psi)
{
    const int S = L->species, bins = L->bins, n = L->n;
    const float rmax2 = L->rmax2, inv_dr = L->inv_dr;
    for (int c = 0; c < L->n_central; c++) {
        const int i = central[c];
        const metro_float4 p = pos[i];
        const int a = pc_species(p.w, S);
        double *h = hist + (size_t)a * S * bins;
        double acc = 0.0;
        /* Tiles of PC_TILE partners, as the kernel reads them. */
        for (int base = 0; base < n; base += PC_TILE) {
            const int end = base + PC_TILE < n ? base + PC_TILE : n;
            float s = 0.0f;
            for (int j = base; j < end; j++) {
                if (j == i) continue;
                const metro_float4 q = pos[j];
                const int b = pc_species(q.w, S);
                const float r2 = pc_dist2(p, q);
                const int k = pc_bin(r2, rmax2, inv_dr, bins);
                if (k >= 0) h[(size_t)b * bins + k] += 1.0;
                if (L->psi) s = PC_ADD(s, PC_MUL(L->z[b], pc_inv_r(r2)));
            }
            acc += (double)s;
        }
        if (L->psi) psi[a] += acc;
    }
}

/* Cells are at least r_max (widened by 1e-4, far more than the float
 * rounding of pc_dist2) wide, so a pair in cells that are not neighbours
 * has r^2 >= rmax2 as pc_dist2 computes it, and pc_bin would drop it; every
 * other pair goes through pc_dist2 and pc_bin with the same operands in the
 * same order as in metro_pc_histogram_cpu, so it lands in the same bin, and
 * the counts (whole numbers) are equal bit for bit whoever adds them, in
 * whatever order.  The grid holds at most about 2n cells (coarser when
 * r_max is small against the spread of the particles). */
int metro_pc_cells_build(const metro_float4 *pos, const int *central, const pc_launch *L, metro_pc_cells *cl)
{
    const int n = L->n;
    memset(cl, 0, sizeof *cl);
    if (n <= 0 || L->n_central <= 0) return 0;
    double lo[3] = {pos[0].x, pos[0].y, pos[0].z}, hi[3] = {pos[0].x, pos[0].y, pos[0].z};
    for (int i = 1; i < n; i++) {
        const double v[3] = {pos[i].x, pos[i].y, pos[i].z};
        for (int a = 0; a < 3; a++) {
            if (v[a] < lo[a]) lo[a] = v[a];
            if (v[a] > hi[a]) hi[a] = v[a];
        }
    }
    double h = sqrt((double)L->rmax2) * (1.0 + 1e-4) + 1e-30;
    double ext = 0.0;
    for (int a = 0; a < 3; a++) ext = fmax(ext, hi[a] - lo[a]);
    /* no more than about 2n cells */
    const double hmin = ext / cbrt(2.0 * (double)n + 1.0);
    if (h < hmin) h = hmin;
    size_t ncell = 1;
    for (int a = 0; a < 3; a++) {
        cl->m[a] = (int)floor((hi[a] - lo[a]) / h) + 1;
        ncell *= (size_t)cl->m[a];
    }
    if (ncell >= (size_t)INT_MAX) return -1;
    cl->ncell = (int)ncell;
    int *cell = malloc((size_t)n * sizeof *cell), *fill = malloc(ncell * sizeof *fill);
    unsigned char *isc = calloc((size_t)n, 1), *cq_is = calloc((size_t)n, 1);
    cl->start = calloc(ncell + 1, sizeof *cl->start);
    cl->sp = malloc((size_t)n * sizeof *cl->sp);
    cl->cq = malloc((size_t)L->n_central * sizeof *cl->cq);
    cl->ccell = malloc((size_t)L->n_central * sizeof *cl->ccell);
    if (!cell || !fill || !isc || !cq_is || !cl->start || !cl->sp || !cl->cq || !cl->ccell) {
        free(cell), free(fill), free(isc), free(cq_is);
        metro_pc_cells_free(cl);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        long c[3];
        const double v[3] = {pos[i].x, pos[i].y, pos[i].z};
        for (int a = 0; a < 3; a++) {
            c[a] = (long)floor((v[a] - lo[a]) / h);
            c[a] = c[a] < 0 ? 0 : c[a] >= cl->m[a] ? cl->m[a] - 1 : c[a];
        }
        cell[i] = (int)((c[0] * cl->m[1] + c[1]) * cl->m[2] + c[2]);
        cl->start[cell[i] + 1]++;
    }
    for (size_t k = 0; k < ncell; k++) cl->start[k + 1] += cl->start[k];
    memcpy(fill, cl->start, ncell * sizeof *fill);
    for (int c = 0; c < L->n_central; c++) isc[central[c]] = 1;
    /* positions in cell order: the partner loops read memory in sequence,
     * cell after cell */
    for (int i = 0; i < n; i++) {
        const int q = fill[cell[i]]++;
        cl->sp[q] = pos[i];
        cq_is[q] = isc[i];
    }
    /* the central ions in the same order, with their cells */
    for (int k = 0; k < cl->ncell; k++)
        for (int q = cl->start[k]; q < cl->start[k + 1]; q++)
            if (cq_is[q]) {
                cl->cq[cl->nc] = q;
                cl->ccell[cl->nc++] = k;
            }
    free(cell), free(fill), free(isc), free(cq_is);
    return 0;
}

void metro_pc_cells_free(metro_pc_cells *cl)
{
    free(cl->start), free(cl->sp), free(cl->cq), free(cl->ccell);
    memset(cl, 0, sizeof *cl);
}

int metro_pc_histogram_cells(const metro_float4 *pos, const int *central, const pc_launch *L, double *hist)
{
    const int S = L->species, bins = L->bins;
    const float rmax2 = L->rmax2, inv_dr = L->inv_dr;
    metro_pc_cells cl;
    if (metro_pc_cells_build(pos, central, L, &cl)) return -1;
    /* central ions in chunks on every core (OpenMP where built with it),
     * each thread into its own histogram, added at the end: whole numbers,
     * so the same counts whatever the threads */
    const size_t nh = (size_t)S * S * bins;
    int bad = 0;
#pragma omp parallel
    {
        double *own = calloc(nh, sizeof *own);
        if (!own) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(dynamic, 256)
        for (int c = 0; c < cl.nc; c++) {
            if (!own) continue;
            const int qi = cl.cq[c];
            const metro_float4 p = cl.sp[qi];
            double *hh = own + (size_t)pc_species(p.w, S) * S * bins;
            int q0[9], q1[9];
            const int cols = pc_columns(cl.ccell[c], cl.m[0], cl.m[1], cl.m[2], cl.start, q0, q1);
            for (int k = 0; k < cols; k++)
                for (int q = q0[k]; q < q1[k]; q++) {
                    if (q == qi) continue;
                    const int kb = pc_bin(pc_dist2(p, cl.sp[q]), rmax2, inv_dr, bins);
                    if (kb >= 0) hh[(size_t)pc_species(cl.sp[q].w, S) * bins + kb] += 1.0;
                }
        }
        /* after the loop's barrier every thread's allocation is known: a
         * failed one leaves hist untouched (the caller then counts all
         * pairs itself) */
        int failed;
#pragma omp atomic read
        failed = bad;
        if (own && !failed) {
#pragma omp critical
            for (size_t k = 0; k < nh; k++) hist[k] += own[k];
        }
        free(own);
    }
    metro_pc_cells_free(&cl);
    return bad ? -1 : 0;
}

/* ---- blocks ------------------------------------------------------------- */

size_t metro_pc_record_size(int species, int bins)
{
    return METRO_PC_PROF(species, bins) + (size_t)species * PC_NT;
}

int metro_pc_accum_init(metro_pc_accum *acc, int species, int bins, int blocks)
{
    memset(acc, 0, sizeof *acc);
    acc->species = species;
    acc->bins = bins;
    acc->blocks = blocks;
    acc->per = 1;
    acc->rec = metro_pc_record_size(species, bins);
    acc->data = calloc((size_t)2 * blocks * acc->rec, sizeof(double));
    return acc->data ? 0 : -1;
}

void metro_pc_accum_free(metro_pc_accum *acc)
{
    free(acc->data);
    acc->data = NULL;
}

static void add_rec(double *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void metro_pc_accum_add(metro_pc_accum *acc, const double *m)
{
    const size_t R = acc->rec;
    if (acc->used == 0 || acc->fill == acc->per) {
        if (acc->used == 2 * acc->blocks) {
            /* All full: merge neighbours, so every block doubles in length. */
            for (int i = 0; i < acc->blocks; i++) {
                double *dst = acc->data + (size_t)i * R;
                if (i > 0) memcpy(dst, acc->data + (size_t)(2 * i) * R, R * sizeof(double));
                add_rec(dst, acc->data + (size_t)(2 * i + 1) * R, R);
            }
            memset(acc->data + (size_t)acc->blocks * R, 0,
                   (size_t)acc->blocks * R * sizeof(double));
            acc->used = acc->blocks;
            acc->per *= 2;
        }
        acc->used++;
        acc->fill = 0;
    }
    add_rec(acc->data + (size_t)(acc->used - 1) * R, m, R);
    acc->fill++;
}

long metro_pc_accum_count(const metro_pc_accum *acc)
{
    return acc->used == 0 ? 0 : (long)(acc->used - 1) * acc->per + acc->fill;
}

int metro_pc_accum_blocks(const metro_pc_accum *acc, double *out)
{
    const size_t R = acc->rec;
    int B = acc->used;
    if (B == 0) return 0;
    memcpy(out, acc->data, (size_t)B * R * sizeof(double));
    /* A short last block would weigh as much as a full one in the
     * jackknife: fold it into its neighbour. */
    if (B >= 2 && 2 * acc->fill < acc->per) {
        add_rec(out + (size_t)(B - 2) * R, out + (size_t)(B - 1) * R, R);
        B--;
    }
    return B;
}

/* ---- estimates ---------------------------------------------------------- */

double metro_pc_shell(double dr, int k)
{
    double a = k * dr, b = (k + 1) * dr;
    return 4.0 / 3.0 * M_PI * (b * b * b - a * a * a);
}

int metro_pc_profile_alloc(metro_pc_profile *p, int species, int bins)
{
    memset(p, 0, sizeof *p);
    p->species = species;
    p->bins = bins;
    p->g = malloc((size_t)species * species * bins * sizeof(double));
    p->rho = malloc((size_t)species * bins * sizeof(double));
    if (!p->g || !p->rho) {
        metro_pc_profile_free(p);
        return -1;
    }
    for (size_t i = 0; i < (size_t)species * species * bins; i++) p->g[i] = NAN;
    for (size_t i = 0; i < (size_t)species * bins; i++) p->rho[i] = NAN;
    return 0;
}

void metro_pc_profile_free(metro_pc_profile *p)
{
    free(p->g);
    free(p->rho);
    p->g = p->rho = NULL;
}

/* ∫_0^x n(t) t dt for a piecewise-constant n over bins of width dt, from
 * the cumulative values F at the bin edges. */
static double cumulative(const double *n, const double *F, double dt, double x)
{
    if (x <= 0) return 0.0;
    int i = (int)(x / dt);
    if (i >= PC_NT) return F[PC_NT];
    double t0 = i * dt;
    return F[i] + n[i] * 0.5 * (x * x - t0 * t0);
}

double *metro_pc_weights(const metro_pc_system *sys, const double *rec)
{
    const int S = sys->species, bins = sys->bins;
    const double conf = rec[METRO_PC_CONF];
    if (!(conf > 0)) return NULL;
    double *W = malloc((size_t)S * bins * PC_NS * sizeof(double));
    double *n = malloc((size_t)(2 * PC_NT + 1) * sizeof(double));
    if (!W || !n) {
        free(W);
        free(n);
        return NULL;
    }
    double *F = n + PC_NT;
    const double dt = sys->r_cell / PC_NT, ds = sys->r_int / PC_NS;
    const double *prof = rec + METRO_PC_PROF(S, bins);
    for (int b = 0; b < S; b++) {
        /* the density profile of b and its cumulative ∫ n t dt */
        F[0] = 0.0;
        for (int i = 0; i < PC_NT; i++) {
            double t0 = i * dt, t1 = (i + 1) * dt;
            n[i] = prof[(size_t)b * PC_NT + i] / (conf * 4.0 / 3.0 * M_PI * (t1 * t1 * t1 - t0 * t0 * t0));
            F[i + 1] = F[i] + n[i] * 0.5 * (t1 * t1 - t0 * t0);
        }
        for (int k = 0; k < bins; k++) {
            const double r = metro_pc_r(sys->dr, k), V = metro_pc_shell(sys->dr, k);
            for (int js = 0; js < PC_NS; js++) {
                const double s = (js + 0.5) * ds;
                /* the sphere of radius r about a point at distance s */
                double avg = (cumulative(n, F, dt, s + r) - cumulative(n, F, dt, fabs(s - r))) /
                             (2.0 * s * r);
                W[((size_t)b * bins + k) * PC_NS + js] = V * avg;
            }
        }
    }
    free(n);
    return W;
}

int metro_pc_profile_from(metro_pc_profile *p, const metro_pc_system *sys, const double *rec,
                          const double *W)
{
    const int S = sys->species, bins = sys->bins;
    const double conf = rec[METRO_PC_CONF];
    if (!(conf > 0)) return -1;
    const double v_int = 4.0 / 3.0 * M_PI * sys->r_int * sys->r_int * sys->r_int;
    p->dr = sys->dr;
    for (int a = 0; a < S; a++) {
        p->z[a] = sys->z[a];
        p->d[a] = sys->d[a];
        p->n[a] = rec[METRO_PC_INTERIOR(S, a)] / (conf * v_int);
    }
    const double *H = rec + METRO_PC_HIST(S), *cen = rec + METRO_PC_CEN(S, bins);
    for (int a = 0; a < S; a++) {
        const double Ca = rec[METRO_PC_CENTRAL(S, a)];
        p->u[a] = (sys->psi && Ca > 0) ? 0.5 * sys->z[a] * sys->bjerrum * rec[METRO_PC_PSI(S, a)] / Ca : NAN;
        for (int k = 0; k < bins; k++) {
            const double V = metro_pc_shell(sys->dr, k);
            double q = 0.0;
            for (int b = 0; b < S; b++) {
                const size_t o = ((size_t)a * S + b) * bins + k;
                double E = 0.0; /* the uncorrelated count */
                if (W) {
                    const double *w = W + ((size_t)b * bins + k) * PC_NS, *c = cen + (size_t)a * PC_NS;
                    for (int js = 0; js < PC_NS; js++) E += c[js] * w[js];
                }
                else
                    E = Ca * p->n[b] * V;
                const double Nb = (double)sys->count[b];
                const double f = (Nb - (a == b)) / Nb;
                p->g[o] = (Ca > 0 && E * f > 0) ? H[o] / (E * f) : NAN;
                q += sys->z[b] * (H[o] - E);
            }
            p->rho[(size_t)a * bins + k] = Ca > 0 ? q / (Ca * V) : NAN;
        }
    }
    return 0;
}

double metro_pc_jackknife(const double *loo, int B, size_t stride)
{
    if (B < 2) return NAN;
    double m = 0.0;
    for (int i = 0; i < B; i++) m += loo[(size_t)i * stride];
    m /= B;
    double v = 0.0;
    for (int i = 0; i < B; i++) {
        const double d = loo[(size_t)i * stride] - m;
        v += d * d;
    }
    return sqrt((B - 1.0) / B * v); /* NAN propagates */
}
