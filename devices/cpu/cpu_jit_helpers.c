/*
 * cpu_jit_helpers.c — the helpers the CPU's generated group code (cpu_codegen.c) and its
 * interpreter call: gathers of strided operands, splats, prefetches, streaming stores, row
 * reductions and dtype conversions (cpu_jit.h declares them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu_half.h"
#include "cpu_jit.h"
#include "cpu_isa.h"
#include "cpu_reduce.h"

/* ---- helpers the generated code calls ------------------------------------------------------ */

void td_jit_gather(const jit_gather *d, void *dst, int64_t begin, int64_t n)
{
    if (n <= 0)
        return;
    int nd = d->ndim;
    int64_t idx[TIDE_MAX_DIMS];
    int64_t rem = begin, off = 0;
    for (int k = nd - 1; k >= 0; k--) {
        idx[k] = d->shape[k] ? rem % d->shape[k] : 0;
        rem = d->shape[k] ? rem / d->shape[k] : 0;
        off += idx[k] * d->strides[k];
    }
    char *out = dst;
    int es = d->es;
    int64_t inner = nd ? d->shape[nd - 1] : 1, is = nd ? d->strides[nd - 1] : 0;
    int64_t done = 0;
    while (done < n) {
        int64_t run = nd ? inner - idx[nd - 1] : 1;
        if (run > n - done)
            run = n - done;
        const char *src = d->base + off * es;
        if (is == 1) {
            memcpy(out + done * es, src, (size_t)(run * es));
        } else if (is == 0) { /* broadcast along the last dim: a conv's bias, a row's scale */
            td_jit_splat(es, out + done * es, src, run);
        } else if (es == 4) {
            for (int64_t j = 0; j < run; j++)
                memcpy(out + (done + j) * 4, src + j * is * 4, 4);
        } else {
            for (int64_t j = 0; j < run; j++)
                memcpy(out + (done + j) * es, src + j * is * es, (size_t)es);
        }
        done += run;
        if (!nd)
            break;
        /* advance the multi-index by run */
        idx[nd - 1] += run;
        off += run * is;
        for (int k = nd - 1; k > 0 && idx[k] >= d->shape[k]; k--) {
            off -= idx[k] * d->strides[k];
            idx[k] = 0;
            idx[k - 1]++;
            off += d->strides[k - 1];
        }
    }
}

/* Asks for the next tile of a direct operand (write: of a direct output) while this tile
 * computes: a tile's arithmetic leaves the memory bus idle and its first kernel would otherwise
 * wait for every line of it (perf showed the tanh chain's first and last kernels holding
 * almost half the time in loads and write misses). Reads go to L2 (prefetcht1), not L1:
 * softmax's fused rows ask for 16 KB at a time, and asked into L1 they held the kernels on the
 * line-fill buffers (4096² at AVX2: 10% slower). begin and n are in elements of es bytes;
 * nothing past total is touched. */
void td_jit_prefetch(const void *base, int64_t begin, int64_t n, int64_t total, int64_t es,
                     int write)
{
    if (begin >= total)
        return;
    if (n > total - begin)
        n = total - begin;
    uintptr_t p = (uintptr_t)base + (uintptr_t)(begin * es);
    uintptr_t end = p + (uintptr_t)(n * es);
    if (write)
        for (p &= ~(uintptr_t)63; p < end; p += 64)
            __builtin_prefetch((const void *)p, 1, 3);
    else
        for (p &= ~(uintptr_t)63; p < end; p += 64)
            __builtin_prefetch((const void *)p, 0, 2);
}

/* Copies a finished tile of a large output to memory with streaming (non-temporal) stores: a
 * plain store first reads every line it writes (the write-allocate), so an output that cannot
 * stay in cache anyway costs a third more traffic than it needs (the tanh chain ran at the
 * memory bus's speed counting that read). Each line goes out in as few stores as the CPU has
 * (one 64-byte store on AVX-512): the store buffer holds a tile's worth of 16-byte stores four
 * times over, and the tile loop stalled on it (the tanh chain ran 5% faster with whole-line
 * stores). The caller orders the stores with td_jit_stream_fence before anything else may
 * read them. */
#if defined(__SSE2__)
__attribute__((target("avx512f"))) static size_t stream_lines_avx512(char *d, const char *s,
                                                                      size_t n)
{
    size_t done = 0;
    for (; n - done >= 64; done += 64)
        _mm512_stream_ps((float *)(d + done), _mm512_loadu_ps((const float *)(s + done)));
    return done;
}

__attribute__((target("avx"))) static size_t stream_lines_avx(char *d, const char *s, size_t n)
{
    size_t done = 0;
    for (; n - done >= 64; done += 64) {
        _mm256_stream_ps((float *)(d + done), _mm256_loadu_ps((const float *)(s + done)));
        _mm256_stream_ps((float *)(d + done + 32), _mm256_loadu_ps((const float *)(s + done + 32)));
    }
    return done;
}

static size_t stream_lines_sse2(char *d, const char *s, size_t n)
{
    size_t done = 0;
    for (; n - done >= 64; done += 64)
        for (int k = 0; k < 4; k++)
            _mm_stream_si128((__m128i *)(d + done) + k,
                             _mm_loadu_si128((const __m128i *)(s + done) + k));
    return done;
}
#endif

void td_jit_stream(void *dst, const void *src, int64_t bytes)
{
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t n = (size_t)bytes, head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > n)
        head = n;
    memcpy(d, s, head); /* up to the first line boundary: streaming stores want whole lines */
    d += head, s += head, n -= head;
    td_isa_level isa = td_cpu_isa();
    size_t done = isa == TD_ISA_AVX512 ? stream_lines_avx512(d, s, n)
                  : isa == TD_ISA_AVX2 ? stream_lines_avx(d, s, n)
                                       : stream_lines_sse2(d, s, n);
    memcpy(d + done, s + done, n - done);
#else
    memcpy(dst, src, (size_t)bytes);
#endif
}

void td_jit_stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/* Plain -O2 does not vectorize these loops; they run once per tile. */
#if defined(__GNUC__) && !defined(__clang__)
#define TD_VECTORIZE __attribute__((optimize("O3")))
#else
#define TD_VECTORIZE
#endif

TD_VECTORIZE void td_jit_splat(int64_t es, void *dst, const void *src, int64_t n)
{
    char *o = dst;
    switch (es) {
    case 4: {
        uint32_t v;
        memcpy(&v, src, 4);
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)o)[i] = v;
        break;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, src, 8);
        for (int64_t i = 0; i < n; i++)
            ((uint64_t *)o)[i] = v;
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(o + i * es, src, (size_t)es);
    }
}

void td_jit_reduce(int op, int dtype, int odtype, void *out, const void *x, int64_t n)
{
    td_red_acc a = td_red_kernels_current()->run[op - TIDE_OP_SUM][dtype](x, n, 1);
    switch (odtype) { /* as cpu_reduce.c stores a wide result */
    case TIDE_FLOAT32: *(float *)out = (float)a.f; break;
    case TIDE_FLOAT64: *(double *)out = a.f; break;
    case TIDE_INT32: *(int32_t *)out = (int32_t)a.i; break;
    case TIDE_INT64: *(int64_t *)out = a.i; break;
    default: *(uint8_t *)out = (uint8_t)a.i; break;
    }
}

/* Conversions exactly as cpu_copy.c makes them. */
static inline int32_t f_to_i32(double x)
{
    return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}
static inline int64_t f_to_i64(double x)
{
    return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}

#define CAST_LOOP(ST, DT, CONV)                                                                    \
    for (int64_t i = 0; i < n; i++)                                                                \
        ((DT *)out)[i] = CONV(((const ST *)x)[i]);                                                 \
    return;

#define CAST_FROM(ST, FLT)                                                                         \
    switch (odtype) {                                                                              \
    case TIDE_FLOAT32: CAST_LOOP(ST, float, (float))                                               \
    case TIDE_FLOAT64: CAST_LOOP(ST, double, (double))                                             \
    case TIDE_INT32: if (FLT) { CAST_LOOP(ST, int32_t, f_to_i32) } else { CAST_LOOP(ST, int32_t, (int32_t)) } \
    case TIDE_INT64: if (FLT) { CAST_LOOP(ST, int64_t, f_to_i64) } else { CAST_LOOP(ST, int64_t, (int64_t)) } \
    case TIDE_UINT8: if (FLT) { CAST_LOOP(ST, uint8_t, (uint8_t)f_to_i64) } else { CAST_LOOP(ST, uint8_t, (uint8_t)) } \
    default: CAST_LOOP(ST, uint8_t, 0 != ) \
    }

static bool is_half(int dtype) { return dtype == TIDE_FLOAT16 || dtype == TIDE_BFLOAT16; }

/* float32 to or from a 16-bit float: the vector kernels eager's copies use (cpu_copy.c). */
static void cast_half_f32(int64_t n, void *out, int odtype, const void *x, int idtype)
{
    const td_half_kernels *k = td_half_kernels_current();
    if (idtype == TIDE_FLOAT16)
        k->f16_to_f32(n, out, x);
    else if (idtype == TIDE_BFLOAT16)
        k->bf16_to_f32(n, out, x);
    else if (odtype == TIDE_FLOAT16)
        k->f32_to_f16(n, out, x);
    else
        k->f32_to_bf16(n, out, x);
}

/* A cast from or to a 16-bit float: through float32 as cpu_copy.c's conversions go, a stack
 * buffer at a time when neither side is float32, so each value rounds exactly as eager's. */
static void cast_half(int64_t n, void *out, int odtype, const void *x, int idtype)
{
    if (idtype == TIDE_FLOAT32 || odtype == TIDE_FLOAT32) {
        cast_half_f32(n, out, odtype, x, idtype);
        return;
    }
    float buf[512];
    size_t ies = td_dtype_sizes[idtype], oes = td_dtype_sizes[odtype];
    for (int64_t i = 0; i < n; i += 512) {
        int64_t m = n - i < 512 ? n - i : 512;
        const char *xi = (const char *)x + (size_t)i * ies;
        char *oi = (char *)out + (size_t)i * oes;
        if (is_half(idtype))
            cast_half_f32(m, buf, TIDE_FLOAT32, xi, idtype);
        else
            td_jit_cast(m, buf, TIDE_FLOAT32, xi, idtype);
        if (is_half(odtype))
            cast_half_f32(m, oi, odtype, buf, TIDE_FLOAT32);
        else
            td_jit_cast(m, oi, odtype, buf, TIDE_FLOAT32);
    }
}

TD_VECTORIZE void td_jit_cast(int64_t n, void *out, int odtype, const void *x, int idtype)
{
    if (odtype == idtype) { /* clone and contiguous are casts to the same dtype */
        memcpy(out, x, (size_t)n * td_dtype_sizes[odtype]);
        return;
    }
    if (is_half(idtype) || is_half(odtype)) {
        cast_half(n, out, odtype, x, idtype);
        return;
    }
    switch (idtype) {
    case TIDE_FLOAT32: CAST_FROM(float, 1) break;
    case TIDE_FLOAT64: CAST_FROM(double, 1) break;
    case TIDE_INT32: CAST_FROM(int32_t, 0) break;
    case TIDE_INT64: CAST_FROM(int64_t, 0) break;
    default: CAST_FROM(uint8_t, 0) break;
    }
}

