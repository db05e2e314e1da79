/* test_rng_gpu — the device generator gives the host generator's numbers,
 * bit for bit, including continuation from an offset (docs/DESIGN.md fact 5). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "testutil.h"

enum { N = 1 << 20 };

static void host_draw(uint64_t seed, unsigned long long off, float *out, size_t n)
{
    metro__rng r = {0};
    r.seed = seed;
    r.offset = off;
    ck_assert_int_eq(metro__rng_uniform(&r, out, n), 0);
    metro__rng_free(&r);
}

static void device_draw(uint64_t seed, unsigned long long off, float *out, size_t n, int split)
{
    float *d;
    ck_assert_int_eq(cudaMalloc((void **)&d, n * sizeof *d), cudaSuccess);
    metro__rng r = {0};
    r.seed = seed;
    r.offset = off;
    r.device = 1;
    if (split) {
        ck_assert_int_eq(metro__rng_uniform(&r, d, n / 2), 0);
        ck_assert_int_eq(metro__rng_uniform(&r, d + n / 2, n - n / 2), 0);
    } else {
        ck_assert_int_eq(metro__rng_uniform(&r, d, n), 0);
    }
    ck_assert_int_eq(cudaMemcpy(out, d, n * sizeof *d, cudaMemcpyDeviceToHost), cudaSuccess);
    metro__rng_free(&r);
    cudaFree(d);
}

START_TEST(device_equals_host)
{
    float *h = malloc(N * sizeof *h), *g = malloc(N * sizeof *g);
    host_draw(2024, 0, h, N);
    device_draw(2024, 0, g, N, 0);
    ck_assert_int_eq(memcmp(h, g, N * sizeof *h), 0);
    device_draw(2024, 0, g, N, 1);
    ck_assert_int_eq(memcmp(h, g, N * sizeof *h), 0);
    host_draw(2024, 12345, h, N / 4);
    device_draw(2024, 12345, g, N / 4, 0);
    ck_assert_int_eq(memcmp(h, g, N / 4 * sizeof *h), 0);
    free(h);
    free(g);
}
END_TEST

int main(void)
{
    METRO_TEST_REQUIRE_GPU();
    Suite *s = suite_create("rng_gpu");
    TCase *tc = tcase_create("device");
    tcase_add_test(tc, device_equals_host);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
