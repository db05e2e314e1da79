/* test_pc_cells — metro_pc_histogram_cells (the cell list) against
 * metro_pc_histogram_cpu (every pair): the same pair counts bit for bit,
 * on uniform and clustered configurations of several species, for r_max
 * from a fraction of a bin to more than the whole system; and the cell list
 * is fast (a million particles in seconds). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pc_accum.h"

static double urand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1p-53;
}

/* n points in a ball of radius R, species w = i % S; clustered: half of
 * them packed into a small ball (many pairs per cell, and pairs right at
 * bin edges from a lattice-like spacing). */
static void config(metro_float4 *pos, int n, double R, int S, int clustered, unsigned long long *seed)
{
    for (int i = 0; i < n; i++) {
        double r = clustered && i % 2 ? 0.1 * R : R, x, y, z;
        do {
            x = (2 * urand(seed) - 1) * r, y = (2 * urand(seed) - 1) * r, z = (2 * urand(seed) - 1) * r;
        } while (x * x + y * y + z * z > r * r);
        if (clustered && i % 7 == 0) x = floor(x), y = floor(y), z = floor(z); /* exact distances 1, 2, ... */
        pos[i] = (metro_float4){(float)x, (float)y, (float)z, (float)(i % S)};
    }
}

static void compare(int n, double R, int S, int clustered, double rmax, int bins, unsigned long long seed)
{
    metro_float4 *pos = malloc((size_t)n * sizeof *pos);
    int *central = malloc((size_t)n * sizeof *central);
    config(pos, n, R, S, clustered, &seed);
    int nc = 0;
    for (int i = 0; i < n; i++)
        if (i % 3 != 1) central[nc++] = i; /* central ions: a subset, in index order */
    pc_launch L;
    memset(&L, 0, sizeof L);
    L.n = n;
    L.n_central = nc;
    L.species = S;
    L.bins = bins;
    L.rmax2 = (float)(rmax * rmax);
    L.inv_dr = (float)(bins / rmax);
    const size_t nh = (size_t)S * S * bins;
    double *a = calloc(nh, sizeof *a), *b = calloc(nh, sizeof *b);
    metro_pc_histogram_cpu(pos, central, &L, a, NULL);
    ck_assert_int_eq(metro_pc_histogram_cells(pos, central, &L, b), 0);
    double total = 0;
    for (size_t k = 0; k < nh; k++) total += a[k];
    ck_assert_msg(memcmp(a, b, nh * sizeof *a) == 0, "n %d R %g rmax %g: histograms differ", n, R, rmax);
    ck_assert_msg(total > 0 || rmax < 7, "no pairs binned (n %d, rmax %g)", n, rmax);
    free(pos), free(central), free(a), free(b);
}

START_TEST(same_counts)
{
    const double rmax[] = {0.3, 2.0, 7.5, 30.0, 150.0, 1000.0};
    for (size_t k = 0; k < sizeof rmax / sizeof rmax[0]; k++) {
        compare(3000, 100.0, 2, 0, rmax[k], 50, 11 + k);
        compare(3000, 100.0, 3, 1, rmax[k], 37, 21 + k);
        compare(17, 5.0, 2, 0, rmax[k], 10, 31 + k);
    }
    compare(1, 5.0, 1, 0, 3.0, 10, 41);
}
END_TEST

START_TEST(fast)
{
    /* a million particles at the paper's density (about 4.6e-6 per Å^3),
     * g(r) to 150 Å: seconds, where every pair would be 5e11 distances */
    const int n = 1000000;
    const double R = cbrt(3.0 * n / (4.0 * M_PI * 4.58e-6));
    metro_float4 *pos = malloc((size_t)n * sizeof *pos);
    int *central = malloc((size_t)n * sizeof *central);
    unsigned long long seed = 5;
    config(pos, n, R, 2, 0, &seed);
    for (int i = 0; i < n; i++) central[i] = i;
    pc_launch L;
    memset(&L, 0, sizeof L);
    L.n = n;
    L.n_central = n;
    L.species = 2;
    L.bins = 75;
    L.rmax2 = 150.0f * 150.0f;
    L.inv_dr = 75.0f / 150.0f;
    double *h = calloc((size_t)4 * 75, sizeof *h);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(metro_pc_histogram_cells(pos, central, &L, h), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), pairs = 0;
    for (int k = 0; k < 4 * 75; k++) pairs += h[k];
    /* about n (4/3 π r_max^3 density) pairs, less near the wall */
    const double want = n * 4.0 / 3.0 * M_PI * 150.0 * 150.0 * 150.0 * 4.58e-6;
    printf("cell list: 1e6 particles, r_max 150 Å: %.3g pairs binned in %.2f s (uniform estimate %.3g)\n", pairs, s,
           want);
    ck_assert(pairs > 0.7 * want && pairs < want);
    ck_assert_msg(s < 60.0, "%.1f s", s);
    free(pos), free(central), free(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pc_cells");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, same_counts);
    tcase_add_test(tc, fast);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
