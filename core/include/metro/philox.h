/* metro/philox.h — Philox4x32-10 as METRO_HD functions: counter-based random
 * numbers that a kernel draws in-kernel with no buffer traffic and that the
 * CPU backend draws bit for bit alike.
 *
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11; Random123) maps a 128-bit
 * counter and a 64-bit key to 128 random bits with ten rounds of two 32x32
 * multiplies.  It is the generator cuRAND calls curand_Philox4x32_10 and
 * these functions give the same words as that one (tests check the
 * Random123 known-answer vectors and cuRAND's own implementation).
 *
 * How metro uses it: key = the run's seed mixed with a per-plugin constant
 * (metro_philox_key); counter = (what, sweep, replica, tag), one block of
 * four words per (replica, sweep, trial) or per exchange pair, so any
 * number of the run is computed from its coordinates alone, in any order,
 * on any backend.  Each plugin documents which word it uses for what.
 *
 * Conversions (exact in float, hence identical on host and device):
 *   metro_philox_uniform(w) = ((w >> 8) + 1) * 2^-24, in (0, 1]: the top 24
 *     bits, shifted by one so that 0 never occurs (log(u) is finite) and 1
 *     does; the 2^24 values are equally likely.
 *   metro_philox_symmetric(w) = (2 (w >> 8) - (2^24 - 1)) * 2^-24, in
 *     (-1, 1): odd multiples of 2^-24, a set symmetric about 0 so that a
 *     displacement and its reverse are equally likely (detailed balance).
 *   metro_philox_below(m, n) = (m * n) >> bits for an m of `bits` random
 *     bits: an index in [0, n), bias at most n / 2^bits.
 */
#ifndef METRO_PHILOX_H
#define METRO_PHILOX_H

#include <stdint.h>

#include "metro/hd.h"

#define METRO_PHILOX_M0 0xD2511F53u
#define METRO_PHILOX_M1 0xCD9E8D57u
#define METRO_PHILOX_W0 0x9E3779B9u
#define METRO_PHILOX_W1 0xBB67AE85u

/* Four 32-bit words (counter or output) and a two-word key; plain structs
 * so C and CUDA see the same layout. */
typedef struct metro_philox4 {
    uint32_t x, y, z, w;
} metro_philox4;

typedef struct metro_philox_key_t {
    uint32_t x, y;
} metro_philox_key_t;

METRO_HD metro_philox4 metro_philox4_make(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    metro_philox4 c;
    c.x = x; c.y = y; c.z = z; c.w = w;
    return c;
}

/* One round: two 32x32->64 multiplies, the halves crossed and keyed. */
METRO_HD metro_philox4 metro__philox_round(metro_philox4 c, metro_philox_key_t k)
{
    uint32_t hi0, lo0, hi1, lo1;
#ifdef __CUDA_ARCH__
    hi0 = __umulhi(METRO_PHILOX_M0, c.x);
    hi1 = __umulhi(METRO_PHILOX_M1, c.z);
    lo0 = METRO_PHILOX_M0 * c.x;
    lo1 = METRO_PHILOX_M1 * c.z;
#else
    uint64_t p0 = (uint64_t)METRO_PHILOX_M0 * c.x;
    uint64_t p1 = (uint64_t)METRO_PHILOX_M1 * c.z;
    hi0 = (uint32_t)(p0 >> 32); lo0 = (uint32_t)p0;
    hi1 = (uint32_t)(p1 >> 32); lo1 = (uint32_t)p1;
#endif
    return metro_philox4_make(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}

/* Philox4x32-10 of counter c under key k.  Returns the four output words. */
METRO_HD metro_philox4 metro_philox4x32_10(metro_philox4 c, metro_philox_key_t k)
{
    int r;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (r = 0; r < 10; r++) {
        if (r > 0) {
            k.x += METRO_PHILOX_W0;
            k.y += METRO_PHILOX_W1;
        }
        c = metro__philox_round(c, k);
    }
    return c;
}

/* SplitMix64 finaliser: a bijective mix so that nearby seeds and plugin
 * constants give unrelated keys.  Returns the mixed word. */
METRO_HD uint64_t metro_philox_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The key of a plugin's stream: the run's seed mixed with a constant the
 * plugin picks (so two plugins of one run draw unrelated numbers from the
 * same seed).  Returns the two key words. */
METRO_HD metro_philox_key_t metro_philox_key(uint64_t seed, uint32_t plugin_constant)
{
    uint64_t z = metro_philox_mix64(seed ^ ((uint64_t)plugin_constant << 32 | plugin_constant));
    metro_philox_key_t k;
    k.x = (uint32_t)z;
    k.y = (uint32_t)(z >> 32);
    return k;
}

/* Uniform float in (0, 1] from the top 24 bits of w (see the header
 * comment).  Returns a multiple of 2^-24 in [2^-24, 1]. */
METRO_HD float metro_philox_uniform(uint32_t w)
{
    return (float)((w >> 8) + 1u) * 5.9604644775390625e-8f; /* 2^-24 */
}

/* Symmetric float in (-1, 1) from the top 24 bits of w: an odd multiple of
 * 2^-24.  Returns a value whose distribution is symmetric about 0. */
METRO_HD float metro_philox_symmetric(uint32_t w)
{
    /* 2s is even and < 2^25 (exact in float); the difference is an odd
     * integer below 2^24 in magnitude (exact): no rounding anywhere. */
    return ((float)(2u * (w >> 8)) - 16777215.0f) * 5.9604644775390625e-8f;
}

/* An index in [0, n) from m, a number of `bits` random bits (bits <= 32).
 * Returns floor(m * n / 2^bits). */
METRO_HD uint32_t metro_philox_below(uint32_t m, uint32_t n, int bits)
{
    return (uint32_t)(((uint64_t)m * n) >> bits);
}

#endif
