/*
 * cpu_random.c — the RANDOM primitive on the CPU: element i of out is computed from Philox
 * blocks of counter (offset + i) / 4 alone (core/philox.h gives the layout and the word-to-value
 * rules), so splitting the output over any number of threads gives the same tensor.
 *
 * Work goes in tiles of blocks: the Philox words of a tile are computed first (a loop without
 * branches), then turned into values by a loop specialized per distribution and dtype.
 */
#include <math.h>

#include "../../core/philox.h"
#include "cpu_kernels.h"

enum { DIST_UNIFORM = 0, DIST_NORMAL = 1, DIST_INTEGER = 2 };

/* Blocks per tile: 4 KiB of words per stream, on the stack. */
#define TILE_BLOCKS 256
/* Elements per thread at least: a block of 4 costs ~8 ns, a normal pair ~35. */
#define GRAIN 16384
/* Blocks are counted modulo 2^62, as p / 4 is for a 64-bit p. */
#define BLOCK_MASK ((UINT64_C(1) << 62) - 1)

typedef struct random_job {
    void *out;
    tide_dtype dtype;
    int dist;
    uint64_t seed, offset;
    double a, b;
    /* uniform: values above top (the largest value of the dtype below b) are rounding's doing
     * and become top, so that results stay in [a, b); unit: a = 0, b = 1, nothing to do. */
    bool clamp, unit;
    float top_f;
    double top_d;
    int64_t low; /* integers: low and high - low */
    uint64_t range;
    bool two_streams; /* float64 values and integer ranges above 2^32 need the second stream */
} random_job;

/* Values for n consecutive elements, the first at word q0 of the tile (m: main-stream words,
 * s: second-stream words, 4 per block) and at out index i0. Positions are counted inside the
 * tile, so an offset near 2^64 wraps like the counter does. */
static void convert_uniform(const random_job *j, const uint32_t *m, const uint32_t *s,
                            uint64_t q0, uint64_t n, int64_t i0)
{
    const double a = j->a, w = j->b - j->a;
    m += q0;
    s += q0;
    if (j->dtype == TIDE_FLOAT32) {
        float *o = (float *)j->out + i0, top = j->top_f;
        if (j->unit) {
            for (uint64_t k = 0; k < n; k++)
                o[k] = td_philox_u24(m[k]);
        } else {
            for (uint64_t k = 0; k < n; k++) {
                float v = (float)(a + w * (double)td_philox_u24(m[k]));
                o[k] = j->clamp && v > top ? top : v;
            }
        }
    } else {
        double *o = (double *)j->out + i0, top = j->top_d;
        if (j->unit) {
            for (uint64_t k = 0; k < n; k++)
                o[k] = td_philox_u53(m[k], s[k]);
        } else {
            for (uint64_t k = 0; k < n; k++) {
                double v = a + w * td_philox_u53(m[k], s[k]);
                o[k] = j->clamp && v > top ? top : v;
            }
        }
    }
}

/* Box-Muller on the pair (2k, 2k+1) of a block: the even element takes r cos(theta), the odd
 * one r sin(theta). A pair cut by the range's edge computes only its half. */
static void convert_normal(const random_job *j, const uint32_t *m, const uint32_t *s,
                           uint64_t q0, uint64_t n, int64_t i0)
{
    const double mean = j->a, std = j->b;
    const uint64_t q_end = q0 + n;
    for (uint64_t q = q0; q < q_end;) {
        uint64_t w = q & ~(uint64_t)1; /* the word of the pair's radius; w + 1: its angle */
        double u1, u2;
        if (j->dtype == TIDE_FLOAT32) {
            u1 = td_philox_open32(m[w]);
            u2 = (double)m[w + 1] * 0x1p-32;
        } else {
            u1 = td_philox_open53(m[w], s[w]);
            u2 = td_philox_u53(m[w + 1], s[w + 1]);
        }
        double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586 * u2;
        for (; q < w + 2 && q < q_end; q++) {
            double z = mean + std * ((q & 1) ? r * sin(theta) : r * cos(theta));
            int64_t i = i0 + (int64_t)(q - q0);
            if (j->dtype == TIDE_FLOAT32)
                ((float *)j->out)[i] = (float)z;
            else
                ((double *)j->out)[i] = z;
        }
    }
}

#define INTEGER_LOOP(type, conv)                                                                   \
    do {                                                                                           \
        type *o = (type *)j->out + i0;                                                             \
        for (uint64_t k = 0; k < n; k++) {                                                         \
            uint64_t r = two ? td_philox_below64(m[k], s[k], range)                                \
                             : td_philox_below32(m[k], range);                                     \
            int64_t v = (int64_t)(low + r);                                                        \
            o[k] = conv;                                                                           \
        }                                                                                          \
    } while (0)

static void convert_integer(const random_job *j, const uint32_t *m, const uint32_t *s,
                            uint64_t q0, uint64_t n, int64_t i0)
{
    const uint64_t low = (uint64_t)j->low, range = j->range;
    const bool two = j->two_streams;
    m += q0;
    s += q0;
    switch (j->dtype) {
    case TIDE_INT64: INTEGER_LOOP(int64_t, v); break;
    case TIDE_INT32: INTEGER_LOOP(int32_t, (int32_t)v); break;
    case TIDE_UINT8: INTEGER_LOOP(uint8_t, (uint8_t)v); break;
    case TIDE_BOOL: INTEGER_LOOP(bool, v != 0); break;
    case TIDE_FLOAT32: INTEGER_LOOP(float, (float)v); break;
    default: INTEGER_LOOP(double, (double)v); break;
    }
}

static void random_range(void *ctx, int64_t begin, int64_t end)
{
    const random_job *j = ctx;
    uint32_t m[TILE_BLOCKS * 4], s[TILE_BLOCKS * 4];
    for (int64_t i = begin; i < end;) {
        uint64_t p = j->offset + (uint64_t)i, q0 = p & 3;
        uint64_t n = (uint64_t)(end - i);
        if (n > TILE_BLOCKS * 4 - q0)
            n = TILE_BLOCKS * 4 - q0;
        uint64_t first = p >> 2, nblocks = (q0 + n + 3) >> 2;
        for (uint64_t t = 0; t < nblocks; t++)
            td_philox_block(j->seed, (first + t) & BLOCK_MASK, 0, &m[4 * t]);
        if (j->two_streams)
            for (uint64_t t = 0; t < nblocks; t++)
                td_philox_block(j->seed, (first + t) & BLOCK_MASK, 1, &s[4 * t]);
        if (j->dist == DIST_UNIFORM)
            convert_uniform(j, m, s, q0, n, i);
        else if (j->dist == DIST_NORMAL)
            convert_normal(j, m, s, q0, n, i);
        else
            convert_integer(j, m, s, q0, n, i);
        i += (int64_t)n;
    }
}

int td_cpu_random(tide_tensor *out, int distribution, uint64_t seed, uint64_t offset, double a,
                  double b)
{
    tide_dtype dt = (tide_dtype)out->dtype;
    bool is_float = dt == TIDE_FLOAT32 || dt == TIDE_FLOAT64;
    random_job j = {.out = td_tensor_data(out),
                    .dtype = dt,
                    .dist = distribution,
                    .seed = seed,
                    .offset = offset,
                    .a = a,
                    .b = b};
    switch (distribution) {
    case DIST_UNIFORM:
    case DIST_NORMAL:
        if (!is_float)
            return td_error("random: %s numbers need a floating dtype, got %s",
                            distribution == DIST_UNIFORM ? "uniform" : "normal",
                            tide_dtype_name(dt));
        j.two_streams = dt == TIDE_FLOAT64;
        j.unit = a == 0 && b == 1;
        j.clamp = a < b;
        j.top_d = nextafter(b, -INFINITY);
        j.top_f = (float)b; /* rounded to nearest: one step down is below b if it is not */
        if ((double)j.top_f >= b)
            j.top_f = nextafterf(j.top_f, -INFINITY);
        break;
    case DIST_INTEGER:
        /* The op layer sends integers exact in a double; anything else is a caller's bug. */
        if (!(a >= -0x1p53 && b <= 0x1p53 && a < b) || a != floor(a) || b != floor(b))
            return td_error("random: integer range [%g, %g) is empty or not exact", a, b);
        j.low = (int64_t)a;
        j.range = (uint64_t)((int64_t)b - j.low);
        j.two_streams = j.range > 0x100000000ull;
        break;
    default:
        return td_error("random: unknown distribution %d", distribution);
    }
    td_parallel_for(td_numel(out->ndim, out->shape), GRAIN, random_range, &j);
    return 0;
}
