/*
 * test_half.c — casts to and from float16 and bfloat16, against expected bits written by hand.
 *
 * Every table runs in four layouts, so whatever kernel a device picks is covered (the CPU's
 * scalar loops and its F16C/AVX2 ones, under each TIDE_CPU_ISA tier): one element alone, a
 * contiguous array of 4099 elements (the table repeated: vector bodies and a ragged tail), a
 * strided source (every other element of a buffer) and a strided destination (tide_copy_ into
 * every other element).
 *
 * Rules the tables follow (core/half.h): float32 -> 16 bits rounds to nearest, ties to even;
 * past the largest finite value is infinity; a NaN keeps its sign and the top bits of its
 * payload and becomes quiet. 16 bits -> float32 is exact, and a NaN comes back quiet.
 * Every other dtype converts through float32, as PyTorch does: c10::Half and c10::BFloat16 are
 * built from a float, so torch.tensor(x, dtype=torch.float64).half() rounds x to float32 first
 * and then to 16 bits (tests/test_half_files.c checks PyTorch's own results). Rounding twice
 * can differ from rounding once (1 + 2^-11 + 2^-40 is 0x3c01 rounded once, 0x3c00 through
 * float32); the tables pin the double-rounded answer so tide and PyTorch agree bit for bit.
 * Float to integer follows cpu_copy.c: truncation, out of range / NaN / inf give x86's
 * "integer indefinite" (INT32_MIN, INT64_MIN; uint8 takes the low byte of the int64).
 *
 * Exhaustive checks: every one of the 65536 bit patterns of each dtype widens to the exact
 * value and comes back unchanged through float32 (a signaling NaN comes back quiet); every
 * pair of neighbouring finite values has its midpoint rounded to the even one and the float32
 * values just below and above the midpoint rounded down and up.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"

#define TILE 4099 /* not a multiple of any vector width */

static size_t esize(tide_dtype dt) { return tide_dtype_size(dt); }

/* Compares n elements of got with want; reports the first few differences as hex. */
static int compare(const char *what, const char *layout, tide_dtype dt, const void *got,
                   const void *want, const void *src, tide_dtype from, int64_t n)
{
    size_t es = esize(dt), fs = esize(from);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) == 0)
            continue;
        if (bad++ < 4) {
            uint64_t g = 0, w = 0, s = 0;
            memcpy(&g, (const char *)got + i * es, es);
            memcpy(&w, (const char *)want + i * es, es);
            memcpy(&s, (const char *)src + i * fs, fs);
            fprintf(stderr, "%s (%s) [%lld]: from %llx got %llx want %llx\n", what, layout,
                    (long long)i, (unsigned long long)s, (unsigned long long)g,
                    (unsigned long long)w);
        }
    }
    CHECK(bad == 0, "%s, %s: %d of %lld elements wrong", what, layout, bad, (long long)n);
    return bad;
}

/* cast(from -> to) of n elements, contiguous and with a strided source. */
static void check_cast_arrays(const char *what, tide_dtype from, const void *src, tide_dtype to,
                              const void *want, int64_t n)
{
    size_t fs = esize(from), ts = esize(to);
    tide_tensor *x = tide_from_data(src, 1, &n, from);
    tide_tensor *y = x ? tide_cast(x, to) : NULL;
    CHECK(y != NULL, "%s: cast: %s", what, tide_last_error());
    if (y)
        compare(what, "contiguous", to, tide_data_ptr(y), want, src, from, n);
    tide_release(y);

    int64_t n2 = 2 * n;
    char *wide = calloc((size_t)n2, fs);
    for (int64_t i = 0; i < n; i++)
        memcpy(wide + 2 * i * fs, (const char *)src + i * fs, fs);
    tide_tensor *xw = tide_from_data(wide, 1, &n2, from);
    tide_tensor *xs = xw ? tide_slice(xw, 0, 0, n2, 2) : NULL;
    y = xs ? tide_cast(xs, to) : NULL;
    CHECK(y != NULL, "%s: strided cast: %s", what, tide_last_error());
    if (y)
        compare(what, "strided source", to, tide_data_ptr(y), want, src, from, n);
    tide_release(y);

    /* into every other element of a destination of dtype to */
    tide_tensor *d = tide_full(1, &n2, 0, to), *ds = d ? tide_slice(d, 0, 0, n2, 2) : NULL;
    CHECK(ds && x && tide_copy_(ds, x) == 0, "%s: strided copy_: %s", what, tide_last_error());
    char *got = malloc((size_t)n * ts);
    for (int64_t i = 0; d && i < n; i++)
        memcpy(got + i * ts, (const char *)tide_data_ptr(d) + 2 * i * ts, ts);
    if (d)
        compare(what, "strided destination", to, got, want, src, from, n);
    free(got);
    tide_release(ds);
    tide_release(d);
    tide_release(xs);
    tide_release(xw);
    tide_release(x);
    free(wide);
}

/* A table of n (source, expected) pairs: each element alone, then the table repeated to TILE
 * elements in the array layouts. */
static void check_table(const char *what, tide_dtype from, const void *src, tide_dtype to,
                        const void *want, int n)
{
    size_t fs = esize(from), ts = esize(to);
    for (int i = 0; i < n; i++) {
        tide_tensor *x = tide_from_data((const char *)src + i * fs, 0, NULL, from);
        tide_tensor *y = x ? tide_cast(x, to) : NULL;
        CHECK(y != NULL, "%s: cast: %s", what, tide_last_error());
        if (y)
            compare(what, "one element", to, tide_data_ptr(y), (const char *)want + i * ts,
                    (const char *)src + i * fs, from, 1);
        tide_release(y);
        tide_release(x);
    }
    char *s = malloc(TILE * fs), *w = malloc(TILE * ts);
    for (int i = 0; i < TILE; i++) {
        memcpy(s + i * fs, (const char *)src + (i % n) * fs, fs);
        memcpy(w + i * ts, (const char *)want + (i % n) * ts, ts);
    }
    check_cast_arrays(what, from, s, to, w, TILE);
    free(s);
    free(w);
}

#define TABLE(what, from, FT, to, TT, ...)                                                         \
    do {                                                                                           \
        static const struct {                                                                      \
            FT src;                                                                                \
            TT want;                                                                               \
        } t_[] = {__VA_ARGS__};                                                                    \
        enum { n_ = (int)(sizeof t_ / sizeof t_[0]) };                                             \
        FT s_[n_];                                                                                 \
        TT w_[n_];                                                                                 \
        for (int i_ = 0; i_ < n_; i_++)                                                            \
            s_[i_] = t_[i_].src, w_[i_] = t_[i_].want;                                             \
        check_table(what, from, s_, to, w_, n_);                                                   \
    } while (0)

#define F32 TIDE_FLOAT32
#define F16 TIDE_FLOAT16
#define BF16 TIDE_BFLOAT16

/* float32 bits -> float16 bits. */
static void test_f32_to_f16(void)
{
    TABLE("float32 -> float16", F32, uint32_t, F16, uint16_t,
          {0x00000000, 0x0000}, {0x80000000, 0x8000},  /* +-0 */
          {0x33800000, 0x0001}, {0xb3800000, 0x8001},  /* 2^-24: the smallest subnormal */
          {0x33000000, 0x0000}, {0xb3000000, 0x8000},  /* 2^-25: a tie, to even 0 */
          {0x33000001, 0x0001},                        /* just above 2^-25 */
          {0x33c00000, 0x0002},                        /* 1.5 * 2^-24: tie 1|2, up to even */
          {0x34200000, 0x0002},                        /* 2.5 * 2^-24: tie 2|3, down to even */
          {0x387fc000, 0x03ff},                        /* 1023 * 2^-24: largest subnormal */
          {0x387fe000, 0x0400},                        /* 1023.5 * 2^-24: tie, to the normal */
          {0x38800000, 0x0400},                        /* 2^-14: the smallest normal */
          {0x477fe000, 0x7bff}, {0xc77fe000, 0xfbff},  /* 65504: the largest finite */
          {0x477fef00, 0x7bff},                        /* 65519 */
          {0x477fefff, 0x7bff},                        /* 65519.996: the last below 65520 */
          {0x477ff000, 0x7c00}, {0xc77ff000, 0xfc00},  /* 65520: a tie with 65536, to inf */
          {0x47800000, 0x7c00},                        /* 65536 */
          {0x7f7fffff, 0x7c00},                        /* float32's largest */
          {0x3f801000, 0x3c00},                        /* 1 + 2^-11: tie, down to even */
          {0xbf801000, 0xbc00},
          {0x3f803000, 0x3c02},                        /* 1 + 3 * 2^-11: tie, up to even */
          {0x3f801001, 0x3c01},                        /* just above the tie */
          {0x3f800fff, 0x3c00},                        /* just below it */
          {0x3eaaaaab, 0x3555},                        /* 1/3 */
          {0x00000001, 0x0000}, {0x80000001, 0x8000},  /* float32 subnormals */
          {0x7f800000, 0x7c00}, {0xff800000, 0xfc00},  /* +-inf */
          {0x7fc00000, 0x7e00}, {0xffc00000, 0xfe00},  /* quiet NaN */
          {0x7fc00001, 0x7e00},                        /* payload below float16's bits: lost */
          {0x7fd55555, 0x7eaa}, {0xffd55555, 0xfeaa},  /* payload's top 10 bits kept */
          {0x7fa00000, 0x7f00}, {0xffa00000, 0xff00},  /* signaling NaN: made quiet */
          {0x7f802000, 0x7e01}, {0xff802000, 0xfe01},  /* signaling, lowest float16 payload */
          {0x7f800001, 0x7e00});                       /* signaling, payload lost */
}

static void test_f32_to_bf16(void)
{
    TABLE("float32 -> bfloat16", F32, uint32_t, BF16, uint16_t,
          {0x00000000, 0x0000}, {0x80000000, 0x8000},  /* +-0 */
          {0x00010000, 0x0001}, {0x80010000, 0x8001},  /* 2^-133: the smallest subnormal */
          {0x00008000, 0x0000},                        /* a tie, to even 0 */
          {0x00018000, 0x0002},                        /* tie 1|2, up to even */
          {0x00028000, 0x0002},                        /* tie 2|3, down to even */
          {0x00008001, 0x0001},                        /* just above the tie */
          {0x007f0000, 0x007f},                        /* the largest subnormal */
          {0x007fffff, 0x0080},                        /* rounds up to the smallest normal */
          {0x00800000, 0x0080},                        /* 2^-126: the smallest normal */
          {0x7f7f0000, 0x7f7f}, {0xff7f0000, 0xff7f},  /* the largest finite */
          {0x7f7f7fff, 0x7f7f},                        /* just below the overflow tie */
          {0x7f7f8000, 0x7f80}, {0xff7f8000, 0xff80},  /* tie with 2^128, to inf */
          {0x7f7e8000, 0x7f7e},                        /* tie, down to even */
          {0x7f7fffff, 0x7f80},                        /* float32's largest: inf */
          {0x3f808000, 0x3f80},                        /* 1 + 2^-8: tie, down to even */
          {0x3f818000, 0x3f82},                        /* 1 + 3 * 2^-8: tie, up to even */
          {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},  /* either side of the tie */
          {0x477fe000, 0x4780},                        /* 65504 */
          {0x7f800000, 0x7f80}, {0xff800000, 0xff80},  /* +-inf */
          {0x7fc00000, 0x7fc0}, {0xffc00000, 0xffc0},  /* quiet NaN */
          {0x7fc00001, 0x7fc0},                        /* payload below bfloat16's bits: lost */
          {0x7fd55555, 0x7fd5},                        /* payload's top 7 bits kept */
          {0x7fa00000, 0x7fe0}, {0xff810000, 0xffc1},  /* signaling NaN: made quiet */
          {0x7f800001, 0x7fc0});                       /* signaling, payload lost */
}

/* Widening is exact; NaN comes back quiet with sign and payload. */
static void test_widen(void)
{
    TABLE("float16 -> float32", F16, uint16_t, F32, uint32_t,
          {0x0000, 0x00000000}, {0x8000, 0x80000000}, {0x0001, 0x33800000},
          {0x8001, 0xb3800000}, {0x03ff, 0x387fc000}, {0x0400, 0x38800000},
          {0x7bff, 0x477fe000}, {0xfbff, 0xc77fe000}, {0x3c00, 0x3f800000},
          {0x3555, 0x3eaaa000}, {0x7c00, 0x7f800000}, {0xfc00, 0xff800000},
          {0x7e00, 0x7fc00000}, {0x7eaa, 0x7fd54000}, {0x7c01, 0x7fc02000},
          {0xfd00, 0xffe00000}, {0x7fff, 0x7fffe000});
    TABLE("bfloat16 -> float32", BF16, uint16_t, F32, uint32_t,
          {0x0000, 0x00000000}, {0x8000, 0x80000000}, {0x0001, 0x00010000},
          {0x007f, 0x007f0000}, {0x0080, 0x00800000}, {0x7f7f, 0x7f7f0000},
          {0xff7f, 0xff7f0000}, {0x3f80, 0x3f800000}, {0x7f80, 0x7f800000},
          {0xff80, 0xff800000}, {0x7fc0, 0x7fc00000}, {0x7fc1, 0x7fc10000},
          {0x7f81, 0x7fc10000}, {0xff81, 0xffc10000}, {0x7fff, 0x7fff0000});
}

/* float16 <-> bfloat16 go through float32 (exact) and round once. */
static void test_half_to_half(void)
{
    TABLE("float16 -> bfloat16", F16, uint16_t, BF16, uint16_t,
          {0x0000, 0x0000}, {0x8000, 0x8000}, {0x0001, 0x3380}, {0x8001, 0xb380},
          {0x03ff, 0x3880},                   /* 1023 * 2^-24 rounds up */
          {0x3c00, 0x3f80}, {0x3c01, 0x3f80}, /* 1 + 2^-10: below half a bfloat16 step */
          {0x3c04, 0x3f80},                   /* 1 + 2^-8: tie, down to even */
          {0x3c0c, 0x3f82},                   /* 1 + 3 * 2^-8: tie, up to even */
          {0x7bff, 0x4780},                   /* 65504 -> 65536 */
          {0x7c00, 0x7f80}, {0xfc00, 0xff80},
          {0x7e00, 0x7fc0}, {0x7c01, 0x7fc0}, {0xfd00, 0xffe0}, {0x7fff, 0x7fff});
    TABLE("bfloat16 -> float16", BF16, uint16_t, F16, uint16_t,
          {0x0000, 0x0000}, {0x8000, 0x8000}, {0x3f80, 0x3c00}, {0x3f81, 0x3c08},
          {0x4780, 0x7c00},                   /* 65536: inf */
          {0x477f, 0x7bf8},                   /* 65280 */
          {0x3380, 0x0001},                   /* 2^-24 */
          {0x3300, 0x0000},                   /* 2^-25: tie, to 0 */
          {0x3340, 0x0001}, {0xb340, 0x8001}, /* 1.5 * 2^-25 */
          {0x7f7f, 0x7c00}, {0x0001, 0x0000}, {0x8001, 0x8000},
          {0x7f80, 0x7c00}, {0xff80, 0xfc00},
          {0x7fc1, 0x7e08}, {0xff81, 0xfe08}); /* NaN payload's top bits, quiet */
}

typedef struct half_to_int {
    uint16_t h;
    int32_t i32;
    int64_t i64;
    uint8_t u8, b;
} half_to_int;

static void check_to_ints(const char *name, tide_dtype dt, const half_to_int *t, int n)
{
    uint16_t s[32];
    int32_t i32[32];
    int64_t i64[32];
    uint8_t u8[32], b[32];
    for (int i = 0; i < n; i++)
        s[i] = t[i].h, i32[i] = t[i].i32, i64[i] = t[i].i64, u8[i] = t[i].u8, b[i] = t[i].b;
    char what[64];
    snprintf(what, sizeof what, "%s -> int32", name);
    check_table(what, dt, s, TIDE_INT32, i32, n);
    snprintf(what, sizeof what, "%s -> int64", name);
    check_table(what, dt, s, TIDE_INT64, i64, n);
    snprintf(what, sizeof what, "%s -> uint8", name);
    check_table(what, dt, s, TIDE_UINT8, u8, n);
    snprintf(what, sizeof what, "%s -> bool", name);
    check_table(what, dt, s, TIDE_BOOL, b, n);
}

/* Truncation toward zero; NaN, inf and out of range give INT32_MIN / INT64_MIN (x86's answer,
 * cpu_copy.c); uint8 is the low byte of the int64; bool is "not zero" (NaN is true). */
static void test_half_to_int(void)
{
    static const half_to_int f16[] = {
        {0x0000, 0, 0, 0, 0}, {0x8000, 0, 0, 0, 0}, {0x0001, 0, 0, 0, 1},
        {0x3bff, 0, 0, 0, 1},                           /* 0.99951 */
        {0x3e00, 1, 1, 1, 1}, {0xbe00, -1, -1, 255, 1}, /* +-1.5 */
        {0x5bfc, 255, 255, 255, 1},                     /* 255.5 */
        {0x5c00, 256, 256, 0, 1},
        {0x7bff, 65504, 65504, 224, 1}, {0xfbff, -65504, -65504, 32, 1},
        {0x7c00, INT32_MIN, INT64_MIN, 0, 1}, {0xfc00, INT32_MIN, INT64_MIN, 0, 1},
        {0x7e00, INT32_MIN, INT64_MIN, 0, 1}, {0xfd00, INT32_MIN, INT64_MIN, 0, 1},
    };
    static const half_to_int bf16[] = {
        {0x0000, 0, 0, 0, 0}, {0x8000, 0, 0, 0, 0}, {0x0001, 0, 0, 0, 1},
        {0x3f7f, 0, 0, 0, 1}, {0x3fc0, 1, 1, 1, 1}, {0xbfc0, -1, -1, 255, 1},
        {0x437f, 255, 255, 255, 1}, {0x4380, 256, 256, 0, 1},
        {0x4b80, 16777216, 16777216, 0, 1},
        {0x4f00, INT32_MIN, 2147483648LL, 0, 1},        /* 2^31: past int32 */
        {0xcf00, INT32_MIN, -2147483648LL, 0, 1},       /* -2^31 fits */
        {0x5f00, INT32_MIN, INT64_MIN, 0, 1},           /* 2^63: past int64 */
        {0x7f80, INT32_MIN, INT64_MIN, 0, 1}, {0xff80, INT32_MIN, INT64_MIN, 0, 1},
        {0x7fc0, INT32_MIN, INT64_MIN, 0, 1},
    };
    check_to_ints("float16", F16, f16, (int)(sizeof f16 / sizeof f16[0]));
    check_to_ints("bfloat16", BF16, bf16, (int)(sizeof bf16 / sizeof bf16[0]));
}

/* Integers convert to float32 first (rounding above 2^24), then round to 16 bits. */
static void test_int_to_half(void)
{
    TABLE("int32 -> float16", TIDE_INT32, int32_t, F16, uint16_t,
          {0, 0x0000}, {1, 0x3c00}, {-1, 0xbc00}, {3, 0x4200},
          {2049, 0x6800}, {2051, 0x6802},        /* ties, to even */
          {65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00}, {-65520, 0xfc00},
          {INT32_MAX, 0x7c00}, {INT32_MIN, 0xfc00});
    TABLE("int32 -> bfloat16", TIDE_INT32, int32_t, BF16, uint16_t,
          {0, 0x0000}, {1, 0x3f80}, {-1, 0xbf80}, {255, 0x437f},
          {257, 0x4380}, {259, 0x4382},          /* ties, to even */
          {16842753, 0x4b80},                    /* 2^24 + 2^16 + 1: 0x4b81 rounded once */
          {16908289, 0x4b81},                    /* 2^24 + 2^17 + 1 */
          {INT32_MAX, 0x4f00}, {INT32_MIN, 0xcf00});
    TABLE("int64 -> float16", TIDE_INT64, int64_t, F16, uint16_t,
          {3, 0x4200}, {-65504, 0xfbff}, {1099511627777LL, 0x7c00}, {INT64_MIN, 0xfc00});
    TABLE("int64 -> bfloat16", TIDE_INT64, int64_t, BF16, uint16_t,
          {3, 0x4040}, {1099511627777LL, 0x5380},  /* 2^40 + 1 */
          {-4611686018427387904LL, 0xde80}, {INT64_MAX, 0x5f00});
    TABLE("uint8 -> float16", TIDE_UINT8, uint8_t, F16, uint16_t,
          {0, 0x0000}, {1, 0x3c00}, {128, 0x5800}, {255, 0x5bf8});
    TABLE("uint8 -> bfloat16", TIDE_UINT8, uint8_t, BF16, uint16_t,
          {0, 0x0000}, {1, 0x3f80}, {128, 0x4300}, {255, 0x437f});
    TABLE("bool -> float16", TIDE_BOOL, uint8_t, F16, uint16_t, {0, 0x0000}, {1, 0x3c00});
    TABLE("bool -> bfloat16", TIDE_BOOL, uint8_t, BF16, uint16_t, {0, 0x0000}, {1, 0x3f80});
}

/* float64 rounds to float32 first, then to 16 bits: PyTorch's double rounding (top comment). */
static void test_float64(void)
{
    TABLE("float64 -> float16", TIDE_FLOAT64, uint64_t, F16, uint16_t,
          {0x3ff0020000001000, 0x3c00}, /* 1 + 2^-11 + 2^-40: 0x3c01 rounded once */
          {0x3ff0100000001000, 0x3c04}, /* 1 + 2^-8 + 2^-40 */
          {0x40effdffffffff77, 0x7c00}, /* 65519.999999999 -> 65520f -> inf (once: 65504) */
          {0x3e60000000020000, 0x0000}, /* 2^-25 (1 + 2^-35): 0x0001 rounded once */
          {0x7e37e43c8800759c, 0x7c00}, {0xfe37e43c8800759c, 0xfc00}, /* +-1e300 */
          {0x01a56e1fc2f8f359, 0x0000}, {0x81a56e1fc2f8f359, 0x8000}, /* +-1e-300 */
          {0x7ff0000000000000, 0x7c00}, {0x7ff8000000000000, 0x7e00},
          {0xfff8000000000000, 0xfe00});
    TABLE("float64 -> bfloat16", TIDE_FLOAT64, uint64_t, BF16, uint16_t,
          {0x3ff0020000001000, 0x3f80},
          {0x3ff0100000001000, 0x3f80}, /* 1 + 2^-8 + 2^-40: 0x3f81 rounded once */
          {0x40effdffffffff77, 0x4780},
          {0x3e60000000020000, 0x3300},
          {0x7e37e43c8800759c, 0x7f80}, {0x01a56e1fc2f8f359, 0x0000},
          {0x7ff8000000000000, 0x7fc0}, {0xfff8000000000000, 0xffc0});
    TABLE("float16 -> float64", F16, uint16_t, TIDE_FLOAT64, uint64_t,
          {0x0001, 0x3e70000000000000}, {0x7bff, 0x40effc0000000000},
          {0x3555, 0x3fd5540000000000}, {0x8000, 0x8000000000000000},
          {0x7c00, 0x7ff0000000000000}, {0xfc00, 0xfff0000000000000},
          {0x7e00, 0x7ff8000000000000}, {0xfe01, 0xfff8040000000000});
    TABLE("bfloat16 -> float64", BF16, uint16_t, TIDE_FLOAT64, uint64_t,
          {0x7f7f, 0x47efe00000000000}, {0x0001, 0x37a0000000000000},
          {0x3f80, 0x3ff0000000000000}, {0xff81, 0xfff8200000000000});
}

/* ---- exhaustive ---------------------------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* The float32 bits of a float16, from its definition (not from core/half.h's shifts). */
static uint32_t f16_value_bits(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    if (e == 31)
        return sign | 0x7f800000 | (uint32_t)m << 13 | (m ? 0x400000u : 0);
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), e - 25);
    return sign | f32_bits(v);
}

static uint32_t bf16_value_bits(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    return (x & 0x7fffffff) > 0x7f800000 ? x | 0x400000 : x;
}

/* Every bit pattern: widened exactly, and back to itself (a signaling NaN comes back quiet). */
static void test_all_patterns(tide_dtype dt)
{
    const char *name = tide_dtype_name(dt);
    uint16_t *h = malloc(65536 * 2), *back = malloc(65536 * 2);
    uint32_t *w = malloc(65536 * 4);
    uint16_t quiet = dt == F16 ? 0x0200 : 0x0040, inf = dt == F16 ? 0x7c00 : 0x7f80;
    for (int i = 0; i < 65536; i++) {
        h[i] = (uint16_t)i;
        w[i] = dt == F16 ? f16_value_bits(h[i]) : bf16_value_bits(h[i]);
        back[i] = (h[i] & 0x7fff) > inf ? (uint16_t)(h[i] | quiet) : h[i];
    }
    char what[64];
    snprintf(what, sizeof what, "every %s -> float32", name);
    check_cast_arrays(what, dt, h, F32, w, 65536);
    snprintf(what, sizeof what, "every %s -> float32 -> %s", name, name);
    check_cast_arrays(what, F32, w, dt, back, 65536);
    free(h);
    free(back);
    free(w);
}

/* Between each pair of neighbouring finite values lo < hi (either sign): lo itself, the float32
 * just below the midpoint, the midpoint (a tie, to the even one), the float32 just above. The
 * midpoint of two 16-bit values is exact in float32. */
static void test_midpoints(tide_dtype dt)
{
    uint16_t top = dt == F16 ? 0x7bff : 0x7f7f; /* the largest finite */
    int64_t n = 2 * 4 * (int64_t)top;
    float *src = malloc((size_t)n * 4);
    uint16_t *want = malloc((size_t)n * 2);
    int64_t k = 0;
    for (int neg = 0; neg < 2; neg++)
        for (uint16_t h = 0, sign = neg ? 0x8000 : 0; h < top; h++) {
            uint16_t a = (uint16_t)(sign | h), b = (uint16_t)(sign | (h + 1));
            float lo = bits_f32(dt == F16 ? f16_value_bits(a) : bf16_value_bits(a));
            float hi = bits_f32(dt == F16 ? f16_value_bits(b) : bf16_value_bits(b));
            float mid = lo + (hi - lo) / 2; /* (lo + hi) / 2 would overflow near the top */
            float toward_lo = nextafterf(mid, lo), toward_hi = nextafterf(mid, hi);
            float v[4] = {lo, toward_lo, mid, toward_hi};
            uint16_t r[4] = {a, a, (h & 1) ? b : a, b};
            for (int j = 0; j < 4; j++, k++)
                src[k] = v[j], want[k] = r[j];
        }
    char what[64];
    snprintf(what, sizeof what, "float32 midpoints -> %s", tide_dtype_name(dt));
    check_cast_arrays(what, F32, src, dt, want, n);
    free(src);
    free(want);
}

int main(void)
{
    test_f32_to_f16();
    test_f32_to_bf16();
    test_widen();
    test_half_to_half();
    test_half_to_int();
    test_int_to_half();
    test_float64();
    test_all_patterns(F16);
    test_all_patterns(BF16);
    test_midpoints(F16);
    test_midpoints(BF16);
    return test_summary("test_half");
}
