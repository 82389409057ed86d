/*
 * half.h — conversions between float32 and the two 16-bit floating dtypes, one element at a
 * time. Every device and the file readers use these, so a value converts the same everywhere;
 * the CPU's vector kernels (devices/cpu/cpu_half.h) give the same bits (tests/test_half_cast.c).
 *
 * float16 (IEEE binary16): 1 sign, 5 exponent, 10 fraction bits; largest finite 65504,
 * subnormals down to 2^-24. bfloat16: the top 16 bits of a float32 (8 exponent bits, 7 fraction).
 * float32 -> 16 bits rounds to nearest, ties to even; values beyond the largest finite become
 * infinities; NaN stays NaN with its sign and the top bits of its payload, made quiet (as the
 * x86 conversion instructions do). 16 bits -> float32 is exact; a NaN comes back quiet.
 */
#ifndef TIDE_HALF_H
#define TIDE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t td_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float td_bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds the integer q + rem / 2^shift to nearest, ties to even (shift in 1..31). */
static inline uint32_t td_round_shifted(uint32_t full, int shift)
{
    uint32_t q = full >> shift, rem = full & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    return q + (rem > halfway || (rem == halfway && (q & 1)));
}

static inline uint16_t td_f32_to_f16(float f)
{
    uint32_t x = td_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) /* NaN: quiet, the payload's top 9 bits kept */
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000) /* 65520 and above (and infinity) round to infinity */
        return (uint16_t)(sign | 0x7c00);
    uint32_t exponent = ax >> 23;
    if (exponent >= 113) /* a normal float16: rebias the exponent, round off 13 fraction bits */
        return (uint16_t)(sign | td_round_shifted(ax - (112u << 23), 13));
    if (exponent < 102) /* below 2^-25: rounds to zero (2^-25 itself is a tie, to even 0) */
        return sign;
    /* subnormal: the value in units of 2^-24; a carry into 1024 is the smallest normal */
    uint32_t full = (ax & 0x7fffff) | 0x800000;
    return (uint16_t)(sign | td_round_shifted(full, (int)(126 - exponent)));
}

static inline float td_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
    if (exponent == 0) { /* zero or subnormal: fraction * 2^-24, exact in float32 */
        float v = (float)fraction * 0x1p-24f;
        return td_bits_f32(td_f32_bits(v) | sign);
    }
    if (exponent == 31) /* infinity, or NaN made quiet */
        return td_bits_f32(sign | 0x7f800000 | (fraction << 13) | (fraction ? 0x400000u : 0));
    return td_bits_f32(sign | ((exponent + 112) << 23) | (fraction << 13));
}

static inline uint16_t td_f32_to_bf16(float f)
{
    uint32_t x = td_f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) /* NaN: quiet, sign and top payload bits kept */
        return (uint16_t)((x >> 16) | 0x0040);
    /* round to nearest even on the low 16 bits; a carry past the largest finite is infinity */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline float td_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    if ((x & 0x7fffffff) > 0x7f800000)
        x |= 0x400000; /* NaN comes back quiet, as float16's does */
    return td_bits_f32(x);
}

#endif /* TIDE_HALF_H */
