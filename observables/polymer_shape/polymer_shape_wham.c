/* polymer_shape_wham.c — multiple-histogram reweighting; the equations are
 * in polymer_shape_wham.h. */
#include "polymer_shape_wham.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int metro__wham_init(metro__wham *w, int K, const double *beta, double e_min, double e_max, double width)
{
    memset(w, 0, sizeof *w);
    w->K = K;
    w->beta = beta;
    w->e0 = e_min;
    w->width = width > 0 ? width : 1.0;
    double nb = floor((e_max - e_min) / w->width) + 1.0;
    w->nbins = nb < 1 ? 1 : nb > 1e8 ? 100000000 : (int)nb;
    w->nk = calloc((size_t)K, sizeof *w->nk);
    w->ek = calloc((size_t)K, sizeof *w->ek);
    w->f = calloc((size_t)K, sizeof *w->f);
    w->bin = calloc((size_t)w->nbins, sizeof *w->bin);
    w->lng = calloc((size_t)w->nbins, sizeof *w->lng);
    if (!w->nk || !w->ek || !w->f || !w->bin || !w->lng) {
        metro__wham_free(w);
        return -1;
    }
    return 0;
}

void metro__wham_add(metro__wham *w, int k, double e, double a, double b)
{
    long i = (long)floor((e - w->e0) / w->width);
    if (i < 0) i = 0;
    if (i >= w->nbins) i = w->nbins - 1;
    metro__wham_bin *h = &w->bin[i];
    h->n += 1;
    h->e += e;
    h->e2 += e * e;
    h->a += a;
    h->a2 += a * a;
    h->ae += a * e;
    h->b += b;
    w->nk[k] += 1;
    w->ek[k] += e;
}

/* ln sum_i exp(x_i) of n values, without overflow.  Returns -inf for none. */
static double lse(const double *x, long n)
{
    double m = -INFINITY, s = 0;
    for (long i = 0; i < n; ++i)
        if (x[i] > m) m = x[i];
    if (m == -INFINITY) return m;
    for (long i = 0; i < n; ++i) s += exp(x[i] - m);
    return m + log(s);
}

/* Terms of a log-sum-exp below its largest by more than this are dropped:
 * exp(-50) = 2e-22 of the sum, far below its rounding. */
#define WHAM_CUT 50.0
/* Weights below this leave the Hessian (it only steers the steps; the
 * gradient, which fixes the solution, keeps every term above the cut). */
#define WHAM_HESS_CUT 1e-13

/* The solver's view of the histogram: the nb occupied bins (mean energy
 * eb, count h) and the m temperatures with samples (index act[j], with
 * ln N and beta), the first of them the reference whose f stays put. */
typedef struct wham_sys {
    long nb;
    int m;
    const double *eb, *h;
    const int *act;
    const double *lnn, *nn, *bet;
    double *x, *wt; /* scratch, m each */
    int *sig;       /* scratch, m */
} wham_sys;

/* The convex function whose minimum the WHAM equations are (Zhu & Hummer
 * 2012; the MBAR objective on histograms):
 *   A(f) = sum_b H_b ln sum_k N_k exp(f_k - beta_k E_b) - sum_k N_k f_k
 * at f (m values, of the active temperatures), with its gradient
 *   dA/df_k = sum_b H_b w_bk - N_k,  w_bk = N_k e^(f_k - beta_k E_b) / sum_l (...)
 * and, when hess is not NULL, its Hessian (m x m, row-major)
 *   sum_b H_b (delta_kl w_bk - w_bk w_bl).
 * Also returns in *scale the sum of the magnitudes of A's terms (for the
 * rounding of A). */
static double wham_eval(const wham_sys *s, const double *f, double *grad, double *hess, double *scale)
{
    const int m = s->m;
    double A = 0, mag = 0;
    for (int k = 0; k < m; ++k) grad[k] = 0;
    if (hess) memset(hess, 0, (size_t)m * m * sizeof *hess);
    for (long b = 0; b < s->nb; ++b) {
        double mx = -INFINITY;
        for (int k = 0; k < m; ++k) {
            double x = s->lnn[k] + f[k] - s->bet[k] * s->eb[b];
            s->x[k] = x;
            if (x > mx) mx = x;
        }
        double z = 0;
        for (int k = 0; k < m; ++k) {
            double d = s->x[k] - mx;
            double e = d > -WHAM_CUT ? exp(d) : 0.0;
            s->wt[k] = e;
            z += e;
        }
        double D = mx + log(z), hb = s->h[b];
        A += hb * D;
        mag += hb * fabs(D);
        int ns = 0;
        for (int k = 0; k < m; ++k) {
            if (s->wt[k] == 0) continue;
            double w = s->wt[k] / z;
            s->wt[k] = w;
            grad[k] += hb * w;
            if (w > WHAM_HESS_CUT) s->sig[ns++] = k;
        }
        if (hess)
            for (int i = 0; i < ns; ++i) {
                int k = s->sig[i];
                double hw = hb * s->wt[k];
                double *row = hess + (size_t)k * m;
                row[k] += hw;
                for (int j = 0; j < ns; ++j) row[s->sig[j]] -= hw * s->wt[s->sig[j]];
            }
    }
    for (int k = 0; k < m; ++k) {
        A -= s->nn[k] * f[k];
        mag += s->nn[k] * fabs(f[k]);
        grad[k] -= s->nn[k];
    }
    if (scale) *scale = mag;
    return A;
}

/* Solve the n x n system M x = r (M symmetric, row-major, destroyed) by
 * Cholesky, with lambda added to the diagonal.  Returns 0, or -1 when M +
 * lambda is not positive definite. */
static int cholesky_solve(double *M, int n, double lambda, const double *r, double *x)
{
    for (int i = 0; i < n; ++i) M[(size_t)i * n + i] += lambda;
    for (int j = 0; j < n; ++j) {
        double d = M[(size_t)j * n + j];
        for (int k = 0; k < j; ++k) d -= M[(size_t)j * n + k] * M[(size_t)j * n + k];
        if (!(d > 0)) return -1;
        d = sqrt(d);
        M[(size_t)j * n + j] = d;
        for (int i = j + 1; i < n; ++i) {
            double v = M[(size_t)i * n + j];
            for (int k = 0; k < j; ++k) v -= M[(size_t)i * n + k] * M[(size_t)j * n + k];
            M[(size_t)i * n + j] = v / d;
        }
    }
    for (int i = 0; i < n; ++i) {
        double v = r[i];
        for (int k = 0; k < i; ++k) v -= M[(size_t)i * n + k] * x[k];
        x[i] = v / M[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {
        double v = x[i];
        for (int k = i + 1; k < n; ++k) v -= M[(size_t)k * n + i] * x[k];
        x[i] = v / M[(size_t)i * n + i];
    }
    return 0;
}

/* Newton's method with a backtracking line search on the convex A(f) of
 * wham_eval, f[0] (the reference) held fixed.  Each iteration costs one
 * pass over the bins (about m exponentials per bin, most of them cut) and
 * a Cholesky of (m-1)^2; from the thermodynamic-integration guess it takes
 * of the order of ten, where the plain self-consistent iteration needs
 * thousands when neighbouring histograms overlap poorly (a freezing
 * transition).  Returns the iterations, or -1 when max |step| < tol was not
 * reached within max_iter (f then holds the best point found). */
static long wham_newton(const wham_sys *s, double *f, double tol, long max_iter)
{
    const int m = s->m, n = m - 1;
    if (n < 1) return 1;
    double *g = malloc((size_t)m * sizeof *g), *H = malloc((size_t)m * m * sizeof *H);
    double *gt = malloc((size_t)m * sizeof *gt), *Ht = malloc((size_t)m * m * sizeof *Ht);
    double *M = malloc((size_t)n * n * sizeof *M), *dx = malloc((size_t)n * sizeof *dx);
    double *ft = malloc((size_t)m * sizeof *ft), *r = malloc((size_t)n * sizeof *r);
    long result = -1;
    if (!g || !H || !gt || !Ht || !M || !dx || !ft || !r) goto out;
    double scale, A = wham_eval(s, f, g, H, &scale);
    for (long it = 1; it <= max_iter; ++it) {
        /* converged when one self-consistent iteration would move no f_k by
         * tol: ln(1 + g_k / N_k) is that move */
        double res = 0;
        for (int k = 0; k < m; ++k) res = fmax(res, fabs(g[k]) / s->nn[k]);
        if (res < tol) {
            result = it;
            goto out;
        }
        /* the Newton step on f[1..m-1] */
        for (int i = 0; i < n; ++i) r[i] = -g[i + 1];
        double lambda = 0;
        for (;;) {
            for (int i = 0; i < n; ++i)
                memcpy(M + (size_t)i * n, H + (size_t)(i + 1) * m + 1, (size_t)n * sizeof *M);
            if (!cholesky_solve(M, n, lambda, r, dx)) break;
            /* not positive definite (rounding, or temperatures without
             * overlap): Levenberg's shift towards gradient descent */
            double dmax = 0;
            for (int i = 0; i < n; ++i) dmax = fmax(dmax, H[(size_t)(i + 1) * m + i + 1]);
            lambda = lambda > 0 ? lambda * 10 : fmax(dmax, 1.0) * 1e-10;
            if (lambda > 1e30) goto out;
        }
        double step = 0, slope = 0;
        for (int i = 0; i < n; ++i) {
            step = fmax(step, fabs(dx[i]));
            slope += g[i + 1] * dx[i];
        }
        /* backtracking: A must fall (Armijo), up to its rounding */
        double t = 1, At = A, tscale = scale;
        int ok = 0;
        for (int ls = 0; ls < 60; ++ls, t *= 0.5) {
            ft[0] = f[0];
            for (int i = 0; i < n; ++i) ft[i + 1] = f[i + 1] + t * dx[i];
            At = wham_eval(s, ft, gt, Ht, &tscale);
            if (At <= A + 1e-4 * t * slope + 1e-13 * (scale > tscale ? scale : tscale)) {
                ok = 1;
                break;
            }
        }
        if (!ok) goto out; /* no descent left, yet not converged */
        memcpy(f, ft, (size_t)m * sizeof *f);
        A = At;
        scale = tscale;
        double *p = g; g = gt; gt = p;
        p = H; H = Ht; Ht = p;
        if (t == 1 && step < tol) { /* Newton's last step bounds the error */
            result = it;
            goto out;
        }
    }
out:
    free(g); free(H); free(gt); free(Ht); free(M); free(dx); free(ft); free(r);
    return result;
}

long metro__wham_solve(metro__wham *w, double tol, long max_iter, int warm)
{
    const int K = w->K;
    /* the occupied bins: mean energy, count and ln H */
    long nb = 0;
    for (int b = 0; b < w->nbins; ++b) nb += w->bin[b].n > 0;
    double *eb = malloc((size_t)(nb ? nb : 1) * sizeof *eb), *hb = malloc((size_t)(nb ? nb : 1) * sizeof *hb);
    double *lng = malloc((size_t)(nb ? nb : 1) * sizeof *lng), *tb = malloc((size_t)(nb ? nb : 1) * sizeof *tb);
    double *tk = malloc((size_t)K * sizeof *tk), *lnn = malloc((size_t)K * sizeof *lnn);
    double *nn = malloc((size_t)K * sizeof *nn), *bet = malloc((size_t)K * sizeof *bet);
    double *fa = malloc((size_t)K * sizeof *fa), *x = malloc((size_t)K * sizeof *x), *wt = malloc((size_t)K * sizeof *wt);
    int *act = malloc((size_t)K * sizeof *act), *sig = malloc((size_t)K * sizeof *sig);
    long ret = -1;
    if (!eb || !hb || !lng || !tb || !tk || !lnn || !nn || !bet || !fa || !x || !wt || !act || !sig) goto out;
    long j = 0;
    for (int b = 0; b < w->nbins; ++b)
        if (w->bin[b].n > 0) {
            eb[j] = w->bin[b].e / w->bin[b].n;
            hb[j] = w->bin[b].n;
            ++j;
        }
    if (!warm) {
        /* thermodynamic integration: d f / d beta = <E> */
        w->f[0] = 0;
        for (int k = 1; k < K; ++k) {
            double a = w->nk[k - 1] > 0 ? w->ek[k - 1] / w->nk[k - 1] : 0;
            double c = w->nk[k] > 0 ? w->ek[k] / w->nk[k] : a;
            w->f[k] = w->f[k - 1] + (w->beta[k] - w->beta[k - 1]) * 0.5 * (a + c);
        }
    }
    /* the temperatures with samples carry the likelihood */
    int m = 0;
    for (int k = 0; k < K; ++k)
        if (w->nk[k] > 0) {
            act[m] = k;
            nn[m] = w->nk[k];
            lnn[m] = log(w->nk[k]);
            bet[m] = w->beta[k];
            fa[m] = w->f[k];
            ++m;
        }
    wham_sys s = {nb, m, eb, hb, act, lnn, nn, bet, x, wt, sig};
    long it = m > 0 && nb > 0 ? wham_newton(&s, fa, tol, max_iter) : 1;
    /* ln g of the occupied bins, then every f_k from it (f_0 = 0), then
     * ln g again from those (a shift of all f shifts ln g alone) */
    for (int pass = 0; pass < 2; ++pass) {
        for (long b = 0; b < nb; ++b) {
            for (int k = 0; k < m; ++k) tk[k] = lnn[k] + fa[k] - bet[k] * eb[b];
            lng[b] = log(hb[b]) - lse(tk, m);
        }
        if (pass) break;
        double f0 = 0;
        for (int k = 0; k < K; ++k) {
            for (long b = 0; b < nb; ++b) tb[b] = lng[b] - w->beta[k] * eb[b];
            double fk = -lse(tb, nb);
            if (k == 0) f0 = fk;
            w->f[k] = fk - f0;
        }
        for (int k = 0; k < m; ++k) fa[k] = w->f[act[k]];
    }
    j = 0;
    for (int b = 0; b < w->nbins; ++b) w->lng[b] = w->bin[b].n > 0 ? lng[j++] : -INFINITY;
    ret = it;
out:
    free(eb); free(hb); free(lng); free(tb); free(tk); free(lnn); free(nn); free(bet); free(fa); free(x); free(wt);
    free(act); free(sig);
    return ret;
}

void metro__wham_average(const metro__wham *w, double beta, metro__wham_avg *out)
{
    double m = -INFINITY;
    for (int b = 0; b < w->nbins; ++b)
        if (w->bin[b].n > 0) {
            double x = w->lng[b] - beta * w->bin[b].e / w->bin[b].n;
            if (x > m) m = x;
        }
    double z = 0;
    metro__wham_avg s = {0, 0, 0, 0, 0, 0};
    for (int b = 0; b < w->nbins; ++b) {
        const metro__wham_bin *h = &w->bin[b];
        if (!(h->n > 0)) continue;
        /* weight of the bin over its count: microcanonical averages (bins
         * below exp(-WHAM_CUT) of the largest add nothing) */
        double x = w->lng[b] - beta * h->e / h->n - m;
        if (x < -WHAM_CUT) continue;
        double p = exp(x) / h->n;
        z += p * h->n;
        s.e += p * h->e;
        s.e2 += p * h->e2;
        s.a += p * h->a;
        s.a2 += p * h->a2;
        s.ae += p * h->ae;
        s.b += p * h->b;
    }
    out->e = s.e / z;
    out->e2 = s.e2 / z;
    out->a = s.a / z;
    out->a2 = s.a2 / z;
    out->ae = s.ae / z;
    out->b = s.b / z;
}

void metro__wham_free(metro__wham *w)
{
    free(w->nk);
    free(w->ek);
    free(w->f);
    free(w->bin);
    free(w->lng);
    memset(w, 0, sizeof *w);
}
