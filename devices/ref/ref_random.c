/*
 * ref_random.c — the RANDOM primitive, one element at a time: element i is a function of
 * (seed, offset + i) alone through core/philox.h's block layout and word-to-value rules, so it
 * equals every other device's element bit for bit (the normal distribution up to libm's
 * log/sin/cos, which the CPU calls too).
 */
#include <math.h>

#include "../../core/philox.h"
#include "ref_internal.h"

enum { DIST_UNIFORM = 0, DIST_NORMAL = 1, DIST_INTEGER = 2 };

/* Word q (0..3) of element p's block in stream s: element p reads word p % 4 of block p / 4. */
static uint32_t word(uint64_t seed, uint64_t p, uint32_t q, uint32_t stream)
{
    uint32_t w[4];
    td_philox_block(seed, (p >> 2) & ((UINT64_C(1) << 62) - 1), stream, w);
    return w[q];
}

/* The largest value of t's float dtype below b: uniform values that rounding lifts to b or
 * above become it, so results stay in [a, b). */
static double top_below(int dtype, double b)
{
    if (dtype == TIDE_FLOAT64)
        return nextafter(b, -INFINITY);
    float t = (float)b;
    return (double)t >= b ? nextafterf(t, -INFINITY) : t;
}

static double uniform_at(const tide_tensor *out, uint64_t seed, uint64_t p, double a, double b)
{
    uint32_t q = (uint32_t)(p & 3), hi = word(seed, p, q, 0);
    bool f32 = out->dtype == TIDE_FLOAT32;
    if (a == 0 && b == 1) /* exact: no arithmetic on the unit value */
        return f32 ? td_philox_u24(hi) : td_philox_u53(hi, word(seed, p, q, 1));
    double u = f32 ? (double)td_philox_u24(hi) : td_philox_u53(hi, word(seed, p, q, 1));
    double v = f32 ? (double)(float)(a + (b - a) * u) : a + (b - a) * u;
    double top = top_below(out->dtype, b);
    return a < b && v > top ? top : v;
}

/* Box-Muller on the pair of words (2k, 2k+1) of p's block: even elements take r cos(theta),
 * odd ones r sin(theta). */
static double normal_at(const tide_tensor *out, uint64_t seed, uint64_t p, double mean, double std)
{
    uint32_t q = (uint32_t)(p & 3), w = q & ~1u;
    double u1, u2;
    if (out->dtype == TIDE_FLOAT32) {
        u1 = td_philox_open32(word(seed, p, w, 0));
        u2 = (double)word(seed, p, w + 1, 0) * 0x1p-32;
    } else {
        u1 = td_philox_open53(word(seed, p, w, 0), word(seed, p, w, 1));
        u2 = td_philox_u53(word(seed, p, w + 1, 0), word(seed, p, w + 1, 1));
    }
    double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586 * u2;
    return mean + std * ((q & 1) ? r * sin(theta) : r * cos(theta));
}

/* low + an integer in [0, range): one word, or two (the second stream) past 2^32. */
static int64_t integer_at(uint64_t seed, uint64_t p, int64_t low, uint64_t range)
{
    uint32_t q = (uint32_t)(p & 3), hi = word(seed, p, q, 0);
    uint64_t r = range > 0x100000000ull ? td_philox_below64(hi, word(seed, p, q, 1), range)
                                        : td_philox_below32(hi, range);
    return (int64_t)((uint64_t)low + r);
}

int ref_random(tide_tensor *out, int distribution, uint64_t seed, uint64_t offset, double a,
               double b)
{
    bool fl = ref_is_float(out->dtype);
    if (distribution < DIST_UNIFORM || distribution > DIST_INTEGER)
        return td_error("random: unknown distribution %d", distribution);
    if (distribution != DIST_INTEGER && !fl)
        return td_error("random: %s numbers need a floating dtype, got %s",
                        distribution == DIST_UNIFORM ? "uniform" : "normal",
                        tide_dtype_name((tide_dtype)out->dtype));
    if (distribution == DIST_INTEGER &&
        (!(a >= -0x1p53 && b <= 0x1p53 && a < b) || a != floor(a) || b != floor(b)))
        return td_error("random: integer range [%g, %g) is empty or not exact", a, b);
    int64_t n = ref_numel(out); /* out is contiguous */
    for (int64_t i = 0; i < n; i++) {
        uint64_t p = offset + (uint64_t)i;
        int64_t o = out->offset + i;
        if (distribution == DIST_UNIFORM) {
            ref_set_f(out, o, uniform_at(out, seed, p, a, b));
        } else if (distribution == DIST_NORMAL) {
            ref_set_f(out, o, normal_at(out, seed, p, a, b));
        } else {
            int64_t v = integer_at(seed, p, (int64_t)a, (uint64_t)((int64_t)b - (int64_t)a));
            if (out->dtype == TIDE_FLOAT32)
                *(float *)ref_at(out, o) = (float)v;
            else if (out->dtype == TIDE_FLOAT64)
                *(double *)ref_at(out, o) = (double)v;
            else
                ref_set_i(out, o, v);
        }
    }
    return 0;
}
