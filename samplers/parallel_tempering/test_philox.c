/* test_philox — metro/philox.h: Philox4x32-10 against the Random123
 * known-answer vectors and against cuRAND's host generator (which runs
 * without a GPU), and the conversions to floats.
 *
 * cuRAND's host Philox4_32_10 generator with seed s gives, as word
 * 4 (65536 x + j) + c (j < 65536, c < 4), word c of
 * Philox4x32-10(counter (x, 0, j, 0), key (s mod 2^32, s / 2^32)): 65536
 * subsequences in counter word z, elements in x.  (Found by searching the
 * counters on this machine; the test pins it down for 2^20 words.)
 */
#include <curand.h>
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#include "metro/philox.h"

static void check_vector(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                         uint32_t o0, uint32_t o1, uint32_t o2, uint32_t o3)
{
    metro_philox_key_t k = {k0, k1};
    metro_philox4 o = metro_philox4x32_10(metro_philox4_make(c0, c1, c2, c3), k);
    ck_assert_msg(o.x == o0 && o.y == o1 && o.z == o2 && o.w == o3,
                  "philox(%08x %08x %08x %08x / %08x %08x) = %08x %08x %08x %08x, expected %08x %08x %08x %08x", c0,
                  c1, c2, c3, k0, k1, o.x, o.y, o.z, o.w, o0, o1, o2, o3);
}

/* Random123's kat_vectors for philox4x32 with 10 rounds. */
START_TEST(known_answers)
{
    check_vector(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    check_vector(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
                 0xa20bc7c6, 0x6d5451fd);
    check_vector(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
                 0x5001e420, 0x24126ea1);
}
END_TEST

START_TEST(same_as_curand_host_generator)
{
    const unsigned long long seeds[] = {0, 1, 0x123456789abcdefULL, 0xffffffffffffffffULL};
    const size_t n = 1u << 20;
    unsigned int *buf = malloc(n * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    for (int si = 0; si < 4; ++si) {
        curandGenerator_t g;
        ck_assert_int_eq(curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10), CURAND_STATUS_SUCCESS);
        ck_assert_int_eq(curandSetPseudoRandomGeneratorSeed(g, seeds[si]), CURAND_STATUS_SUCCESS);
        ck_assert_int_eq(curandGenerate(g, buf, n), CURAND_STATUS_SUCCESS);
        curandDestroyGenerator(g);
        metro_philox_key_t k = {(uint32_t)seeds[si], (uint32_t)(seeds[si] >> 32)};
        for (size_t b = 0; b < n / 4; ++b) {
            metro_philox4 o = metro_philox4x32_10(metro_philox4_make((uint32_t)(b >> 16), 0, (uint32_t)(b & 0xffff), 0), k);
            const unsigned int *w = buf + 4 * b;
            ck_assert_msg(o.x == w[0] && o.y == w[1] && o.z == w[2] && o.w == w[3],
                          "seed %llx, block %zu: %08x.. vs cuRAND %08x..", seeds[si], b, o.x, w[0]);
        }
    }
    free(buf);
}
END_TEST

START_TEST(uniform_conversion)
{
    /* the ends and the spacing of (0, 1] */
    ck_assert(metro_philox_uniform(0u) == 0x1p-24f);
    ck_assert(metro_philox_uniform(0xffu) == 0x1p-24f);
    ck_assert(metro_philox_uniform(0x100u) == 0x2p-24f);
    ck_assert(metro_philox_uniform(0xffffffffu) == 1.0f);
    /* exact: u * 2^24 is the integer (w >> 8) + 1 */
    for (uint32_t w = 0; w < 0xffffffffu - 9973u * 4099u; w += 9973u * 4099u) {
        float u = metro_philox_uniform(w);
        ck_assert(u > 0.0f && u <= 1.0f);
        ck_assert((double)u * 16777216.0 == (double)((w >> 8) + 1));
    }
    /* mean and variance of a stream of them */
    metro_philox_key_t k = metro_philox_key(42, 7);
    double s = 0, s2 = 0;
    const int n = 1 << 18;
    for (int i = 0; i < n / 4; ++i) {
        metro_philox4 o = metro_philox4x32_10(metro_philox4_make((uint32_t)i, 0, 0, 0), k);
        uint32_t w[4] = {o.x, o.y, o.z, o.w};
        for (int c = 0; c < 4; ++c) {
            double u = metro_philox_uniform(w[c]);
            s += u;
            s2 += u * u;
        }
    }
    double m = s / n, v = s2 / n - m * m;
    ck_assert_msg(fabs(m - 0.5) < 5 * sqrt(1.0 / 12 / n), "mean %g", m);
    ck_assert_msg(fabs(v - 1.0 / 12) < 0.002, "variance %g", v);
}
END_TEST

START_TEST(symmetric_conversion)
{
    /* w and its mirror ~w (top bits complemented) give opposite values */
    for (uint32_t w = 0; w < 0xffffffffu - 7919u * 5003u; w += 7919u * 5003u) {
        float a = metro_philox_symmetric(w), b = metro_philox_symmetric(~w);
        ck_assert_msg(a == -b, "sym(%08x) = %a, sym(~) = %a", w, a, b);
        ck_assert(a > -1.0f && a < 1.0f && a != 0.0f);
    }
    ck_assert(metro_philox_symmetric(0u) == -1.0f + 0x1p-24f);
    ck_assert(metro_philox_symmetric(0xffffffffu) == 1.0f - 0x1p-24f);
}
END_TEST

START_TEST(index_below)
{
    ck_assert_uint_eq(metro_philox_below(0, 55, 24), 0);
    ck_assert_uint_eq(metro_philox_below((1u << 24) - 1, 55, 24), 54);
    ck_assert_uint_eq(metro_philox_below(0xffffffffu, 7, 32), 6);
    /* every index is hit about equally often */
    int hits[13] = {0}, total = 0;
    for (uint32_t m = 0; m < (1u << 24); m += 97, ++total) hits[metro_philox_below(m, 13, 24)]++;
    for (int i = 0; i < 13; ++i)
        ck_assert_msg(fabs(hits[i] - total / 13.0) < 2.0, "index %d: %d of %d", i, hits[i], total);
}
END_TEST

START_TEST(keys_differ)
{
    metro_philox_key_t a = metro_philox_key(1, 0), b = metro_philox_key(2, 0), c = metro_philox_key(1, 1);
    ck_assert(a.x != b.x || a.y != b.y);
    ck_assert(a.x != c.x || a.y != c.y);
    metro_philox_key_t a2 = metro_philox_key(1, 0);
    ck_assert(a.x == a2.x && a.y == a2.y);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("philox");
    TCase *tc = tcase_create("philox");
    tcase_add_test(tc, known_answers);
    tcase_add_test(tc, same_as_curand_host_generator);
    tcase_add_test(tc, uniform_conversion);
    tcase_add_test(tc, symmetric_conversion);
    tcase_add_test(tc, index_below);
    tcase_add_test(tc, keys_differ);
    suite_add_tcase(s, tc);
    return metro_test_main(s);
}
