/*
 * quant.h — the block formats of quantized weights (llama.cpp's GGUF layouts, so GGUF files can
 * be read later), one block at a time in plain scalar C. The CPU and ref devices and the tests
 * all quantize and dequantize through these functions, so every device stores the same bytes;
 * only the dot products (devices/cpu/cpu_quant_isa.c) have per-tier code.
 *
 * A row of K values (K a multiple of 32) is K/32 blocks:
 *  q8_0, 34 bytes: float16 scale d (little-endian), then 32 int8 q; value = d * q.
 *      d = max|x| / 127, q = round(x / d) (roundf: ties away from zero; x * (1/d) as llama.cpp).
 *  q4_0, 18 bytes: float16 d, then 16 bytes; byte j holds element j in its low nibble and
 *      element j + 16 in its high nibble; value = d * (nibble - 8).
 *      m = the element of largest magnitude (signed, the first of equals), d = m / -8,
 *      nibble = min(15, (int)(x * (1/d) + 8.5)).
 * The scale is computed in float32 and stored rounded to float16; q is computed with the
 * float32 scale (llama.cpp's rule). A NaN element quantizes to 0 (q8_0) or 8 (q4_0); an
 * infinite one makes its block's scale infinite.
 *
 * Activations (qlinear): each block of 32 float32 values x becomes int8 q = rint(x * (1/d))
 * (ties to even) with a float32 scale d = max|x| / 127 kept unrounded; a block holding NaN has
 * d = NaN, an infinite element d = inf (then every q is 0), so the product is NaN there.
 */
#ifndef TIDE_QUANT_H
#define TIDE_QUANT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "half.h"

#define TD_QBLOCK 32 /* values per block */

/* Bytes per block of format fmt (a tide_qformat), 0 for an unknown one. */
static inline int td_qblock_bytes(int fmt)
{
    return fmt == 0 ? 34 : fmt == 1 ? 18 : 0;
}

static inline float td_qblock_scale(const uint8_t *block)
{
    return td_f16_to_f32((uint16_t)(block[0] | (block[1] << 8)));
}

static inline void td_qblock_set_scale(uint8_t *block, float d)
{
    uint16_t h = td_f32_to_f16(d);
    block[0] = (uint8_t)(h & 0xff);
    block[1] = (uint8_t)(h >> 8);
}

static inline void td_q8_0_quantize_block(const float *x, uint8_t *block)
{
    float amax = 0;
    for (int i = 0; i < TD_QBLOCK; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    td_qblock_set_scale(block, d);
    for (int i = 0; i < TD_QBLOCK; i++) {
        float v = roundf(x[i] * id);
        v = v == v ? (v > 127 ? 127 : v < -127 ? -127 : v) : 0; /* NaN -> 0 */
        block[2 + i] = (uint8_t)(int8_t)v;
    }
}

static inline void td_q4_0_quantize_block(const float *x, uint8_t *block)
{
    float amax = 0, m = 0;
    for (int i = 0; i < TD_QBLOCK; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            m = x[i];
        }
    float d = m / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    td_qblock_set_scale(block, d);
    for (int j = 0; j < TD_QBLOCK / 2; j++) {
        float a = x[j] * id + 8.5f, b = x[j + 16] * id + 8.5f;
        int qa = a == a ? (a >= 15 ? 15 : a < 0 ? 0 : (int)a) : 8; /* NaN -> 8, the zero */
        int qb = b == b ? (b >= 15 ? 15 : b < 0 ? 0 : (int)b) : 8;
        block[2 + j] = (uint8_t)(qa | (qb << 4));
    }
}

static inline void td_q8_0_dequantize_block(const uint8_t *block, float *out)
{
    float d = td_qblock_scale(block);
    for (int i = 0; i < TD_QBLOCK; i++)
        out[i] = d * (float)(int8_t)block[2 + i];
}

static inline void td_q4_0_dequantize_block(const uint8_t *block, float *out)
{
    float d = td_qblock_scale(block);
    for (int j = 0; j < TD_QBLOCK / 2; j++) {
        out[j] = d * (float)((block[2 + j] & 0x0f) - 8);
        out[j + 16] = d * (float)((block[2 + j] >> 4) - 8);
    }
}

static inline void td_quantize_block(int fmt, const float *x, uint8_t *block)
{
    if (fmt == 0)
        td_q8_0_quantize_block(x, block);
    else
        td_q4_0_quantize_block(x, block);
}

static inline void td_dequantize_block(int fmt, const uint8_t *block, float *out)
{
    if (fmt == 0)
        td_q8_0_dequantize_block(block, out);
    else
        td_q4_0_dequantize_block(block, out);
}

/* The activation scale of a block (see above): max|x| / 127, NaN when the block holds one. */
static inline float td_qact_scale(const float *x)
{
    float amax = 0;
    int nan = 0;
    for (int i = 0; i < TD_QBLOCK; i++) {
        nan |= x[i] != x[i];
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    return nan ? NAN : amax / 127.0f;
}

/* One activation block as int8 (rint: the current rounding mode, nearest even); returns d. */
static inline float td_qact_block(const float *x, int8_t *q)
{
    float d = td_qact_scale(x);
    if (!isfinite(d)) {
        memset(q, 0, TD_QBLOCK);
        return d;
    }
    float id = d != 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < TD_QBLOCK; i++)
        q[i] = (int8_t)nearbyintf(x[i] * id);
    return d;
}

/* The int8 weights of one block (q4_0: nibble - 8) into w[32]. */
static inline void td_qblock_ints(int fmt, const uint8_t *block, int8_t *w)
{
    if (fmt == 0) {
        memcpy(w, block + 2, TD_QBLOCK);
        return;
    }
    for (int j = 0; j < TD_QBLOCK / 2; j++) {
        w[j] = (int8_t)((block[2 + j] & 0x0f) - 8);
        w[j + 16] = (int8_t)((block[2 + j] >> 4) - 8);
    }
}

#endif /* TIDE_QUANT_H */
