/*
 * philox.h — Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel Random Numbers: As Easy as
 * 1, 2, 3", SC11), the counter-based function behind every random number tide makes, and the
 * fixed rules that turn its words into values.
 *
 * It is a keyed bijection of a 128-bit counter: no state, so element p of a random tensor is a
 * pure function of (seed, p) and any thread, chunking or device computes the same value. Only
 * 32-bit integer multiplies, xors and adds are used, so a GLSL port (umulExtended for the
 * 32x32->64 product) reproduces it bit for bit. Header-only, plain C, no libc.
 *
 * The layout every device must follow (core/README.md, "Random numbers"):
 *  - key = (seed & 0xffffffff, seed >> 32);
 *  - element p (p = offset + i, a 64-bit count) reads word p % 4 of the block for counter
 *    (lo32(p / 4), hi32(p / 4), s, 0), where s = 0 is the main stream and s = 1 a second stream
 *    used where 32 bits are not enough (float64 values, randint ranges above 2^32);
 *  - a normal pairs elements 2k and 2k+1 of a block: both use words 2k and 2k+1 of the same
 *    blocks (Box-Muller gives a cosine and a sine from one pair of uniforms).
 * The conversions from words to values are the td_philox_* functions below.
 */
#ifndef TIDE_PHILOX_H
#define TIDE_PHILOX_H

#include <stdint.h>

#define TD_PHILOX_M0 0xD2511F53u
#define TD_PHILOX_M1 0xCD9E8D57u
#define TD_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define TD_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */
#define TD_PHILOX_ROUNDS 10

/* One Philox4x32 round on ctr with key (k0, k1). */
static inline void td_philox_round(uint32_t ctr[4], uint32_t k0, uint32_t k1)
{
    uint64_t p0 = (uint64_t)TD_PHILOX_M0 * ctr[0];
    uint64_t p1 = (uint64_t)TD_PHILOX_M1 * ctr[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t c1 = ctr[1], c3 = ctr[3];
    ctr[0] = hi1 ^ c1 ^ k0;
    ctr[1] = lo1;
    ctr[2] = hi0 ^ c3 ^ k1;
    ctr[3] = lo0;
}

/* Philox4x32-10 of ctr under key: the 4 output words replace ctr. Matches Random123's
 * known-answer vectors (tests/test_random.c checks three of them). */
static inline void td_philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < TD_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k0 += TD_PHILOX_W0;
            k1 += TD_PHILOX_W1;
        }
        td_philox_round(ctr, k0, k1);
    }
}

/* The 4 words of block `block` (= p / 4) of stream s for seed. */
static inline void td_philox_block(uint64_t seed, uint64_t block, uint32_t stream,
                                   uint32_t out[4])
{
    out[0] = (uint32_t)block;
    out[1] = (uint32_t)(block >> 32);
    out[2] = stream;
    out[3] = 0;
    td_philox4x32_10(out, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* ---- words to values (shared by every device) ---------------------------------------------- */

/* Uniform in [0, 1) with 24 bits: exact in float32. */
static inline float td_philox_u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }

/* Uniform in [0, 1) with 53 bits, from the main-stream word hi and the second-stream word lo:
 * the float32 value of the same element is this value rounded down to 24 bits. */
static inline double td_philox_u53(uint32_t hi, uint32_t lo)
{
    return (double)(((uint64_t)hi << 21) | (lo >> 11)) * 0x1p-53;
}

/* Uniform in (0, 1] (never 0, so its log is finite): 32 bits (float32) or 53 bits (float64). */
static inline double td_philox_open32(uint32_t w) { return ((double)w + 1.0) * 0x1p-32; }
static inline double td_philox_open53(uint32_t hi, uint32_t lo)
{
    return ((double)(((uint64_t)hi << 21) | (lo >> 11)) + 1.0) * 0x1p-53;
}

/* An integer in [0, range) for 0 < range <= 2^32 from one word: floor(w * range / 2^32)
 * (multiply-high, no rejection; bias below range / 2^32). */
static inline uint64_t td_philox_below32(uint32_t w, uint64_t range)
{
    return ((uint64_t)w * range) >> 32;
}

/* The same for 2^32 < range < 2^64 from 64 bits (hi: main stream, lo: second stream):
 * floor(x * range / 2^64) built from 32-bit products, as a GPU would (bias below
 * range / 2^64). */
static inline uint64_t td_philox_below64(uint32_t hi, uint32_t lo, uint64_t range)
{
    uint64_t rl = (uint32_t)range, rh = range >> 32;
    uint64_t ll = (uint64_t)lo * rl, lh = (uint64_t)lo * rh;
    uint64_t hl = (uint64_t)hi * rl, hh = (uint64_t)hi * rh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl; /* < 3 * 2^32: no overflow */
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

#endif /* TIDE_PHILOX_H */
