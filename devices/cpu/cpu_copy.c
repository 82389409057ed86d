/*
 * cpu_copy.c — every kernel that moves or converts elements without arithmetic: copy with
 * dtype conversion between any two layouts (behind cast, contiguous, copy_, cat, pad, flip),
 * fill, and iota (arange, linspace).
 */
#include <math.h>
#include <string.h>

#include "../../core/half.h"
#include "cpu_half.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_loop.h"

/* Below this many elements a kernel runs on the calling thread only. */
#define COPY_GRAIN 32768

/* Float to integer conversion is undefined behaviour in C when the value does not fit (NaN,
 * inf, out of range); x86 answers the "integer indefinite" value, and so do we, on purpose. */
static inline int32_t f_to_i32(double x)
{
    return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}
static inline int64_t f_to_i64(double x)
{
    return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}

/* Conversions of a decoded value v (a float for the 16-bit floats) to each destination. Casts
 * to float16 and bfloat16 go through float32, as PyTorch's do (core/half.h rounds). */
#define TO_F32(v) ((float)(v))
#define TO_F64(v) ((double)(v))
#define TO_BOOL(v) ((uint8_t)((v) != 0))
#define TO_F16(v) td_f32_to_f16((float)(v))
#define TO_BF16(v) td_f32_to_bf16((float)(v))
#define INT_TO_I32(v) ((int32_t)(v))
#define INT_TO_I64(v) ((int64_t)(v))
#define INT_TO_U8(v) ((uint8_t)(v))
#define FLT_TO_I32(v) f_to_i32((double)(v))
#define FLT_TO_I64(v) f_to_i64((double)(v))
#define FLT_TO_U8(v) ((uint8_t)f_to_i64((double)(v)))
#define AS_IS(v) (v)

typedef void (*conv_fn)(int64_t n, const char *src, int64_t ss, char *dst, int64_t ds);

#define DEFINE_CONV(name, ST, DT, DECODE, CONVERT)                                                 \
    static void name(int64_t n, const char *src, int64_t ss, char *dst, int64_t ds)                \
    {                                                                                              \
        if (ss == (int64_t)sizeof(ST) && ds == (int64_t)sizeof(DT)) {                              \
            const ST *restrict s = (const ST *)src;                                                \
            DT *restrict d = (DT *)dst;                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                d[i] = CONVERT(DECODE(s[i]));                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                ST v;                                                                              \
                memcpy(&v, src + i * ss, sizeof v);                                                \
                DT r = CONVERT(DECODE(v));                                                         \
                memcpy(dst + i * ds, &r, sizeof r);                                                \
            }                                                                                      \
        }                                                                                          \
    }

/* One row per source dtype, in tide_dtype order: float32 float64 int32 int64 uint8 bool float16
 * bfloat16. DECODE turns a stored element into the value converted. */
#define DEFINE_ROW(SN, ST, DECODE, I32, I64, U8)                                                   \
    DEFINE_CONV(conv_##SN##_f32, ST, float, DECODE, TO_F32)                                        \
    DEFINE_CONV(conv_##SN##_f64, ST, double, DECODE, TO_F64)                                       \
    DEFINE_CONV(conv_##SN##_i32, ST, int32_t, DECODE, I32)                                         \
    DEFINE_CONV(conv_##SN##_i64, ST, int64_t, DECODE, I64)                                         \
    DEFINE_CONV(conv_##SN##_u8, ST, uint8_t, DECODE, U8)                                           \
    DEFINE_CONV(conv_##SN##_b, ST, uint8_t, DECODE, TO_BOOL)                                       \
    DEFINE_CONV(conv_##SN##_f16, ST, uint16_t, DECODE, TO_F16)                                     \
    DEFINE_CONV(conv_##SN##_bf16, ST, uint16_t, DECODE, TO_BF16)

DEFINE_ROW(f32, float, AS_IS, FLT_TO_I32, FLT_TO_I64, FLT_TO_U8)
DEFINE_ROW(f64, double, AS_IS, FLT_TO_I32, FLT_TO_I64, FLT_TO_U8)
DEFINE_ROW(i32, int32_t, AS_IS, INT_TO_I32, INT_TO_I64, INT_TO_U8)
DEFINE_ROW(i64, int64_t, AS_IS, INT_TO_I32, INT_TO_I64, INT_TO_U8)
DEFINE_ROW(u8, uint8_t, AS_IS, INT_TO_I32, INT_TO_I64, INT_TO_U8)
DEFINE_ROW(b, uint8_t, AS_IS, INT_TO_I32, INT_TO_I64, INT_TO_U8)
DEFINE_ROW(f16, uint16_t, td_f16_to_f32, FLT_TO_I32, FLT_TO_I64, FLT_TO_U8)
DEFINE_ROW(bf16, uint16_t, td_bf16_to_f32, FLT_TO_I32, FLT_TO_I64, FLT_TO_U8)

#define ROW(SN)                                                                                    \
    {conv_##SN##_f32, conv_##SN##_f64, conv_##SN##_i32, conv_##SN##_i64,                          \
     conv_##SN##_u8,  conv_##SN##_b,   conv_##SN##_f16, conv_##SN##_bf16}
static const conv_fn conversions[TIDE_NUM_DTYPES][TIDE_NUM_DTYPES] = {
    ROW(f32), ROW(f64), ROW(i32), ROW(i64), ROW(u8), ROW(b), ROW(f16), ROW(bf16),
};

/* A copy between two 16-bit float tensors of one dtype moves the bits (a NaN stays signaling). */
DEFINE_CONV(copy_bits16, uint16_t, uint16_t, AS_IS, AS_IS)

const td_half_kernels *td_half_kernels_current(void)
{
    static const td_half_kernels *const tables[] = {&td_half_kernels_baseline,
                                                    &td_half_kernels_avx2, &td_half_kernels_avx512};
    return tables[td_cpu_isa()];
}

/* The conversions between float32 and a 16-bit float that have vector kernels (cpu_half.h). */
typedef enum half_conv { HALF_NONE, F16_TO_F32, F32_TO_F16, BF16_TO_F32, F32_TO_BF16 } half_conv;

static half_conv half_conv_of(tide_dtype src, tide_dtype dst)
{
    if (src == TIDE_FLOAT16 && dst == TIDE_FLOAT32)
        return F16_TO_F32;
    if (src == TIDE_FLOAT32 && dst == TIDE_FLOAT16)
        return F32_TO_F16;
    if (src == TIDE_BFLOAT16 && dst == TIDE_FLOAT32)
        return BF16_TO_F32;
    if (src == TIDE_FLOAT32 && dst == TIDE_BFLOAT16)
        return F32_TO_BF16;
    return HALF_NONE;
}

/* A contiguous run of conversion hc through the vector kernels of this process's tier. */
static void half_contiguous(half_conv hc, int64_t n, char *dst, const char *src)
{
    const td_half_kernels *k = td_half_kernels_current();
    switch (hc) {
    case F16_TO_F32: k->f16_to_f32(n, (float *)dst, (const uint16_t *)src); break;
    case F32_TO_F16: k->f32_to_f16(n, (uint16_t *)dst, (const float *)src); break;
    case BF16_TO_F32: k->bf16_to_f32(n, (float *)dst, (const uint16_t *)src); break;
    case F32_TO_BF16: k->f32_to_bf16(n, (uint16_t *)dst, (const float *)src); break;
    default: break;
    }
}

typedef struct copy_ctx {
    conv_fn convert;
    int64_t esize, src_esize;
    bool same;
    half_conv half;
} copy_ctx;

/* Operand 0 is the destination, operand 1 the source. */
static void copy_run(void *p, int64_t n, char **ptrs, const int64_t *st)
{
    copy_ctx *c = p;
    bool contiguous = st[0] == c->esize && st[1] == c->src_esize;
    if (c->same && contiguous)
        memcpy(ptrs[0], ptrs[1], (size_t)(n * c->esize));
    else if (c->half != HALF_NONE && contiguous)
        half_contiguous(c->half, n, ptrs[0], ptrs[1]);
    else
        c->convert(n, ptrs[1], st[1], ptrs[0], st[0]);
}

int td_cpu_copy(tide_tensor *dst, const tide_tensor *src)
{
    td_loop l = {.ndim = dst->ndim, .noperands = 2};
    memcpy(l.shape, dst->shape, sizeof(int64_t) * dst->ndim);
    td_loop_operand(&l, 0, dst);
    td_loop_operand(&l, 1, src);
    td_loop_collapse(&l);
    bool same = src->dtype == dst->dtype;
    copy_ctx c = {same && td_dtype_is_half(src->dtype) ? copy_bits16
                                                       : conversions[src->dtype][dst->dtype],
                  (int64_t)td_dtype_sizes[dst->dtype], (int64_t)td_dtype_sizes[src->dtype], same,
                  half_conv_of((tide_dtype)src->dtype, (tide_dtype)dst->dtype)};
    td_loop_run(&l, COPY_GRAIN, copy_run, &c);
    return 0;
}

/* ---- fill -------------------------------------------------------------------------------- */

typedef struct fill_ctx {
    char value[8];
    int64_t esize;
} fill_ctx;

static void fill_run(void *p, int64_t n, char **ptrs, const int64_t *st)
{
    fill_ctx *c = p;
    char *d = ptrs[0];
    if (c->esize == 1 && st[0] == 1) {
        memset(d, c->value[0], (size_t)n);
        return;
    }
#define FILL_AS(T)                                                                                 \
    do {                                                                                           \
        T v;                                                                                       \
        memcpy(&v, c->value, sizeof v);                                                            \
        if (st[0] == (int64_t)sizeof(T)) {                                                         \
            T *restrict out = (T *)d;                                                              \
            for (int64_t i = 0; i < n; i++)                                                        \
                out[i] = v;                                                                        \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                memcpy(d + i * st[0], &v, sizeof v);                                               \
        }                                                                                          \
    } while (0)
    switch (c->esize) {
    case 8: FILL_AS(int64_t); break;
    case 4: FILL_AS(int32_t); break;
    case 2: FILL_AS(uint16_t); break;
    default: FILL_AS(uint8_t); break;
    }
#undef FILL_AS
}

/* value converted to dtype exactly as a copy from float64 would. */
static void convert_scalar(double value, tide_dtype dtype, char out[8])
{
    conversions[TIDE_FLOAT64][dtype](1, (const char *)&value, 8, out, 8);
}

int td_cpu_fill(tide_tensor *dst, double value)
{
    td_loop l = {.ndim = dst->ndim, .noperands = 1};
    memcpy(l.shape, dst->shape, sizeof(int64_t) * dst->ndim);
    td_loop_operand(&l, 0, dst);
    td_loop_collapse(&l);
    fill_ctx c = {.esize = (int64_t)td_dtype_sizes[dst->dtype]};
    convert_scalar(value, (tide_dtype)dst->dtype, c.value);
    td_loop_run(&l, COPY_GRAIN, fill_run, &c);
    return 0;
}

/* ---- iota -------------------------------------------------------------------------------- */

int td_cpu_iota(tide_tensor *out, double start, double step, double end, bool symmetric)
{
    int64_t n = td_numel(out->ndim, out->shape);
    char *d = td_tensor_data(out);
    size_t es = td_dtype_sizes[out->dtype];
    conv_fn convert = conversions[TIDE_FLOAT64][out->dtype];
    double buf[256];
    for (int64_t i = 0; i < n; i += 256) {
        int64_t m = n - i < 256 ? n - i : 256;
        for (int64_t j = 0; j < m; j++) {
            int64_t k = i + j;
            buf[j] = symmetric && k >= n / 2 ? end - (double)(n - 1 - k) * step
                                             : start + (double)k * step;
        }
        convert(m, (const char *)buf, 8, d + (size_t)i * es, (int64_t)es);
    }
    return 0;
}

/* ---- cat, pad, flip: copies into or out of views ------------------------------------------ */

/* A view of t (same storage) with a new layout, on the stack: kernels only read its fields. */
static tide_tensor view_of(const tide_tensor *t, const int64_t *shape, const int64_t *strides,
                           int64_t offset)
{
    tide_tensor v = *t;
    memcpy(v.shape, shape, sizeof(int64_t) * t->ndim);
    memcpy(v.strides, strides, sizeof(int64_t) * t->ndim);
    v.offset = offset;
    return v;
}

int td_cpu_cat(tide_tensor *out, tide_tensor *const *xs, int n, int dim)
{
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const tide_tensor *x = xs[i];
        if (x->ndim != out->ndim) /* a 1-D empty tensor, skipped as in PyTorch */
            continue;
        int64_t shape[TIDE_MAX_DIMS];
        memcpy(shape, out->shape, sizeof shape);
        shape[dim] = x->shape[dim];
        tide_tensor part = view_of(out, shape, out->strides, out->offset + at * out->strides[dim]);
        if (td_cpu_copy(&part, x) < 0)
            return -1;
        at += x->shape[dim];
    }
    return 0;
}

int td_cpu_pad(tide_tensor *out, const tide_tensor *x, const int64_t *pads, double value)
{
    bool grows = false;
    int64_t shape[TIDE_MAX_DIMS], out_off = out->offset, x_off = x->offset;
    for (int d = 0; d < x->ndim; d++) {
        int64_t before = pads[2 * d], after = pads[2 * d + 1];
        grows |= before > 0 || after > 0;
        /* A negative pad crops: skip that many of x's elements instead. */
        int64_t skip_front = before < 0 ? -before : 0, skip_back = after < 0 ? -after : 0;
        shape[d] = x->shape[d] - skip_front - skip_back;
        if (shape[d] < 0)
            shape[d] = 0;
        x_off += skip_front * x->strides[d];
        out_off += (before > 0 ? before : 0) * out->strides[d];
    }
    if (grows && td_cpu_fill(out, value) < 0)
        return -1;
    tide_tensor dst = view_of(out, shape, out->strides, out_off);
    tide_tensor src = view_of(x, shape, x->strides, x_off);
    return td_numel(x->ndim, shape) ? td_cpu_copy(&dst, &src) : 0;
}

int td_cpu_flip(tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims)
{
    int64_t strides[TIDE_MAX_DIMS], offset = x->offset;
    memcpy(strides, x->strides, sizeof strides);
    for (int i = 0; i < ndims; i++) {
        int64_t d = dims[i];
        if (x->shape[d] > 0)
            offset += (x->shape[d] - 1) * x->strides[d];
        strides[d] = -x->strides[d];
    }
    tide_tensor src = view_of(x, x->shape, strides, offset);
    return td_cpu_copy(out, &src);
}
