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

long metro__wham_solve(metro__wham *w, double tol, long max_iter, int warm)
{
    const int K = w->K;
    /* the occupied bins: mean energy and ln H */
    long nb = 0;
    for (int b = 0; b < w->nbins; ++b) nb += w->bin[b].n > 0;
    double *eb = malloc((size_t)nb * sizeof *eb), *lnh = malloc((size_t)nb * sizeof *lnh);
    double *lng = malloc((size_t)nb * sizeof *lng);
    double *tk = malloc((size_t)K * sizeof *tk), *tb = malloc((size_t)nb * sizeof *tb);
    double *lnn = malloc((size_t)K * sizeof *lnn);
    if (!eb || !lnh || !lng || !tk || !tb || !lnn) {
        free(eb); free(lnh); free(lng); free(tk); free(tb); free(lnn);
        return -1;
    }
    long j = 0;
    for (int b = 0; b < w->nbins; ++b)
        if (w->bin[b].n > 0) {
            eb[j] = w->bin[b].e / w->bin[b].n;
            lnh[j] = log(w->bin[b].n);
            ++j;
        }
    for (int k = 0; k < K; ++k) lnn[k] = w->nk[k] > 0 ? log(w->nk[k]) : -INFINITY;
    if (!warm) {
        /* thermodynamic integration: d f / d beta = <E> */
        w->f[0] = 0;
        for (int k = 1; k < K; ++k) {
            double a = w->nk[k - 1] > 0 ? w->ek[k - 1] / w->nk[k - 1] : 0;
            double c = w->nk[k] > 0 ? w->ek[k] / w->nk[k] : a;
            w->f[k] = w->f[k - 1] + (w->beta[k] - w->beta[k - 1]) * 0.5 * (a + c);
        }
    }
    long it;
    int done = 0;
    for (it = 1; it <= max_iter && !done; ++it) {
        for (long b = 0; b < nb; ++b) {
            for (int k = 0; k < K; ++k) tk[k] = lnn[k] + w->f[k] - w->beta[k] * eb[b];
            lng[b] = lnh[b] - lse(tk, K);
        }
        double worst = 0, f0 = 0;
        for (int k = 0; k < K; ++k) {
            for (long b = 0; b < nb; ++b) tb[b] = lng[b] - w->beta[k] * eb[b];
            double fk = -lse(tb, nb);
            if (k == 0) f0 = fk;
            fk -= f0;
            double d = fabs(fk - w->f[k]);
            if (d > worst) worst = d;
            w->f[k] = fk;
        }
        done = worst < tol;
    }
    /* ln g per bin for the averages */
    j = 0;
    for (int b = 0; b < w->nbins; ++b) {
        if (w->bin[b].n > 0) {
            for (int k = 0; k < K; ++k) tk[k] = lnn[k] + w->f[k] - w->beta[k] * eb[j];
            w->lng[b] = lnh[j] - lse(tk, K);
            ++j;
        } else {
            w->lng[b] = -INFINITY;
        }
    }
    free(eb); free(lnh); free(lng); free(tk); free(tb); free(lnn);
    return done ? it - 1 : -1;
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
        /* weight of the bin over its count: microcanonical averages */
        double p = exp(w->lng[b] - beta * h->e / h->n - m) / h->n;
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
