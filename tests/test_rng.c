/* test_rng — the random streams on the host: reproducible, continuable
 * from (seed, offset), independent between seeds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "testutil.h"

enum { N = 1 << 16 };

static void draw(uint64_t seed, unsigned long long offset, float *out, size_t n)
{
    metro__rng r = {0};
    r.seed = seed;
    r.offset = offset;
    ck_assert_int_eq(metro__rng_uniform(&r, out, n), 0);
    ck_assert_uint_eq(r.offset, offset + n);
    metro__rng_free(&r);
}

START_TEST(same_seed_same_numbers)
{
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    draw(42, 0, a, N);
    draw(42, 0, b, N);
    ck_assert_int_eq(memcmp(a, b, N * sizeof *a), 0);
    draw(43, 0, b, N);
    int same = 0;
    for (int i = 0; i < N; ++i) same += a[i] == b[i];
    ck_assert_int_lt(same, 16);
    free(a);
    free(b);
}
END_TEST

START_TEST(offset_continues_the_stream)
{
    /* (seed, offset) is the whole state: a checkpoint needs nothing else */
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    draw(7, 0, a, N);
    draw(7, 1000, b, N - 1000);
    ck_assert_int_eq(memcmp(a + 1000, b, (N - 1000) * sizeof *a), 0);
    /* two calls of n/2 are one call of n */
    metro__rng r = {0};
    r.seed = 7;
    ck_assert_int_eq(metro__rng_uniform(&r, b, N / 2), 0);
    ck_assert_int_eq(metro__rng_uniform(&r, b + N / 2, N / 2), 0);
    metro__rng_free(&r);
    ck_assert_int_eq(memcmp(a, b, N * sizeof *a), 0);
    free(a);
    free(b);
}
END_TEST

START_TEST(small_draws_are_one_stream)
{
    /* host draws are buffered: many odd-sized draws are still one stream,
     * and the offset they leave resumes it exactly (checkpoints) */
    const size_t n = 3 * 65536 + 1000;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    draw(99, 0, a, n);
    metro__rng r = {0};
    r.seed = 99;
    size_t done = 0;
    for (size_t k = 1; done + k <= n / 2; k = k * 3 % 1001 + 1) {
        ck_assert_int_eq(metro__rng_uniform(&r, b + done, k), 0);
        done += k;
    }
    ck_assert_uint_eq(r.offset, done);
    metro__rng_free(&r);
    draw(99, done, b + done, n - done);
    ck_assert_int_eq(memcmp(a, b, n * sizeof *a), 0);
    free(a);
    free(b);
}
END_TEST

START_TEST(uniform_in_unit_interval)
{
    float *a = malloc(N * sizeof *a);
    draw(1, 0, a, N);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < N; ++i) {
        ck_assert(a[i] > 0.0f && a[i] <= 1.0f);
        sum += a[i];
        sum2 += a[i] * a[i];
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    ck_assert_double_eq_tol(mean, 0.5, 5 * sqrt(1.0 / 12 / N));
    ck_assert_double_eq_tol(var, 1.0 / 12, 0.002);
    free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, same_seed_same_numbers);
    tcase_add_test(tc, offset_continues_the_stream);
    tcase_add_test(tc, small_draws_are_one_stream);
    tcase_add_test(tc, uniform_in_unit_interval);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
