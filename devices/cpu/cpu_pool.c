/*
 * cpu_pool.c — max and average pooling and the average-pool gradient on the CPU (NCHW, any
 * input strides). One task per (n, c) plane, split over the thread pool; every window is
 * clipped to the plane, so padding is never read: for max it acts as -inf, for average it
 * counts in the divisor only with count_include_pad. The dispatcher guarantees padding of at
 * most half the kernel and a non-empty plane, so every window holds at least one element.
 *
 * Max follows PyTorch exactly, indices included: a value replaces the best so far when it is
 * greater or NaN (so NaN propagates, and the last NaN of a window gives the index), ties keep
 * the first, and a window of -inf only reports its first element.
 */
#include <math.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"

/* The least number of window elements one thread is given. */
#define GRAIN 32768

typedef struct pool_ctx {
    tide_op op;
    int64_t C, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
    td_nchw in; /* x, or grad_out for the gradient */
    char *out;  /* contiguous */
    size_t in_es, out_es;
} pool_ctx;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The window of output (oh, ow) clipped to the plane ([hs, he) x [ws, we)), and the divisor
 * of an average over it. */
static int64_t window_of(const pool_ctx *c, int64_t oh, int64_t ow, int64_t *hs, int64_t *he,
                         int64_t *ws, int64_t *we)
{
    int64_t h0 = oh * c->sh - c->ph, w0 = ow * c->sw - c->pw;
    int64_t h1 = min64(h0 + c->kh, c->H + c->ph), w1 = min64(w0 + c->kw, c->W + c->pw);
    int64_t padded = (h1 - h0) * (w1 - w0);
    *hs = max64(h0, 0);
    *ws = max64(w0, 0);
    *he = min64(h1, c->H);
    *we = min64(w1, c->W);
    return c->count_include_pad ? padded : (*he - *hs) * (*we - *ws);
}

/* n outputs of a 2x2, stride-2 window over rows r0 and r1 (contiguous), by max2x2's rule below:
 * a > b ? a : b pairwise, NaN (the sum) when any element is NaN. A conv net's pools spend most
 * of their time here; float32 takes whole vectors in cpu_pool_isa.c, and the tail here. */
#define DEFINE_MAX2X2_ROW(T, SFX)                                                                  \
    static void max2x2_row_scalar_##SFX(const T *r0, const T *r1, T *out, int64_t n)               \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = r0[2 * i], b = r0[2 * i + 1], e = r1[2 * i], f = r1[2 * i + 1];                 \
            T m1 = a > b ? a : b, m2 = e > f ? e : f;                                              \
            T m = m2 > m1 ? m2 : m1;                                                               \
            out[i] = (isnan(a) | isnan(b) | isnan(e) | isnan(f)) ? a + b + e + f : m;              \
        }                                                                                          \
    }
DEFINE_MAX2X2_ROW(float, f32)
DEFINE_MAX2X2_ROW(double, f64)

/* Rows 0 .. nrows - 1 of 2x2 windows, the first n of each (input rows 2r and 2r + 1, s2 apart;
 * output rows ow apart): whole vector steps in cpu_pool_isa.c, one call for the plane, and the
 * rest of each row here. */
static void max2x2_rows_f32(const float *x, int64_t s2, float *out, int64_t ow, int64_t n,
                            int64_t nrows)
{
    static int64_t (*const rows[])(const float *, int64_t, float *, int64_t, int64_t, int64_t) = {
        td_max2x2_rows_f32_baseline, td_max2x2_rows_f32_avx2, td_max2x2_rows_f32_avx512};
    int64_t i = rows[td_cpu_isa()](x, s2, out, ow, n, nrows);
    for (int64_t r = 0; r < nrows && i < n; r++)
        max2x2_row_scalar_f32(x + 2 * r * s2 + 2 * i, x + (2 * r + 1) * s2 + 2 * i,
                              out + r * ow + i, n - i);
}

static void max2x2_rows_f64(const double *x, int64_t s2, double *out, int64_t ow, int64_t n,
                            int64_t nrows)
{
    for (int64_t r = 0; r < nrows; r++)
        max2x2_row_scalar_f64(x + 2 * r * s2, x + (2 * r + 1) * s2, out + r * ow, n);
}

#define DEFINE_POOL_PLANES(T, SFX)                                                                 \
    /* A 2x2 window inside the plane (the common pool of conv nets) without the loops: NaN if    \
     * any element is one (a sum holding a NaN is NaN), else the max. */                         \
    static inline T max2x2_##SFX(const T *p, int64_t s2, int64_t s3)                               \
    {                                                                                              \
        T a = p[0], b = p[s3], e = p[s2], f = p[s2 + s3];                                          \
        T m = a > b ? a : b;                                                                       \
        m = e > m ? e : m;                                                                         \
        m = f > m ? f : m;                                                                         \
        return (isnan(a) | isnan(b) | isnan(e) | isnan(f)) ? a + b + e + f : m;                    \
    }                                                                                              \
                                                                                                   \
    static void max_plane_##SFX(const pool_ctx *c, const char *xp, char *op, bool indices)         \
    {                                                                                              \
        const T *x = (const T *)(const void *)xp;                                                  \
        int64_t s2 = c->in.s[2], s3 = c->in.s[3];                                                  \
        /* 2x2 windows with stride 2 inside the plane go through max2x2_rows. */               \
        bool rows2x2 = !indices && c->kh == 2 && c->kw == 2 && c->sh == 2 && c->sw == 2 &&         \
                       c->ph == 0 && c->pw == 0 && s3 == 1;                                        \
        int64_t full = rows2x2 ? min64(c->OW, c->W / 2) : 0;                                       \
        int64_t full_rows = rows2x2 ? min64(c->OH, c->H / 2) : 0; /* rows with both input rows */ \
        if (full && full_rows)                                                                     \
            max2x2_rows_##SFX(x, s2, (T *)(void *)op, c->OW, full, full_rows);                     \
        /* The clipped window inline (no divisor to count): this loop is most of a small conv \
         * net's pooling time, and a call to window_of per output cost as much as the max. */  \
        for (int64_t oh = 0; oh < c->OH; oh++) {                                                   \
            int64_t h0 = oh * c->sh - c->ph, hs = max64(h0, 0), he = min64(h0 + c->kh, c->H);      \
            int64_t first = oh < full_rows ? full : 0;                                             \
            for (int64_t ow = first; ow < c->OW; ow++) {                                           \
                int64_t w0 = ow * c->sw - c->pw, ws = max64(w0, 0);                                \
                int64_t we = min64(w0 + c->kw, c->W);                                              \
                if (!indices && c->kh == 2 && c->kw == 2 && hs == h0 && he == h0 + 2 &&            \
                    ws == w0 && we == w0 + 2) {                                                    \
                    const T *win = x + h0 * s2 + w0 * s3;                                          \
                    ((T *)(void *)op)[oh * c->OW + ow] = max2x2_##SFX(win, s2, s3);                \
                    continue;                                                                      \
                }                                                                                  \
                T best = -INFINITY;                                                                \
                int64_t at = hs * c->W + ws;                                                       \
                for (int64_t ih = hs; ih < he; ih++)                                               \
                    for (int64_t iw = ws; iw < we; iw++) {                                         \
                        T v = x[ih * s2 + iw * s3];                                                \
                        if (v > best || isnan(v)) {                                                \
                            best = v;                                                              \
                            at = ih * c->W + iw;                                                   \
                        }                                                                          \
                    }                                                                              \
                int64_t o = oh * c->OW + ow;                                                       \
                if (indices)                                                                       \
                    ((int64_t *)(void *)op)[o] = at;                                               \
                else                                                                               \
                    ((T *)(void *)op)[o] = best;                                                   \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void avg_plane_##SFX(const pool_ctx *c, const char *xp, char *op)                       \
    {                                                                                              \
        const T *x = (const T *)(const void *)xp;                                                  \
        T *out = (T *)(void *)op;                                                                  \
        int64_t s2 = c->in.s[2], s3 = c->in.s[3];                                                  \
        for (int64_t oh = 0; oh < c->OH; oh++)                                                     \
            for (int64_t ow = 0; ow < c->OW; ow++) {                                               \
                int64_t hs, he, ws, we;                                                            \
                int64_t div = window_of(c, oh, ow, &hs, &he, &ws, &we);                            \
                double sum = 0;                                                                    \
                for (int64_t ih = hs; ih < he; ih++)                                               \
                    for (int64_t iw = ws; iw < we; iw++)                                           \
                        sum += x[ih * s2 + iw * s3];                                               \
                out[oh * c->OW + ow] = (T)(sum / (double)div);                                     \
            }                                                                                      \
    }                                                                                              \
                                                                                                   \
    /* dx (a contiguous H x W plane) = the sum over windows of grad_out / divisor. */              \
    static void avg_grad_plane_##SFX(const pool_ctx *c, const char *gp, char *op)                  \
    {                                                                                              \
        const T *g = (const T *)(const void *)gp;                                                  \
        T *dx = (T *)(void *)op;                                                                   \
        int64_t s2 = c->in.s[2], s3 = c->in.s[3];                                                  \
        memset(dx, 0, (size_t)(c->H * c->W) * sizeof(T));                                          \
        for (int64_t oh = 0; oh < c->OH; oh++)                                                     \
            for (int64_t ow = 0; ow < c->OW; ow++) {                                               \
                int64_t hs, he, ws, we;                                                            \
                int64_t div = window_of(c, oh, ow, &hs, &he, &ws, &we);                            \
                T d = g[oh * s2 + ow * s3] / (T)div;                                               \
                for (int64_t ih = hs; ih < he; ih++)                                               \
                    for (int64_t iw = ws; iw < we; iw++)                                           \
                        dx[ih * c->W + iw] += d;                                                   \
            }                                                                                      \
    }

DEFINE_POOL_PLANES(float, f32)
DEFINE_POOL_PLANES(double, f64)

static void pool_planes(void *ctx, int64_t begin, int64_t end)
{
    const pool_ctx *c = ctx;
    bool f32 = c->in_es == 4;
    bool grad = c->op == TIDE_OP_AVG_POOL2D_GRAD;
    int64_t out_plane = grad ? c->H * c->W : c->OH * c->OW;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / c->C, ch = t % c->C;
        const char *ip = c->in.base + (n * c->in.s[0] + ch * c->in.s[1]) * (int64_t)c->in_es;
        char *op = c->out + (size_t)(t * out_plane) * c->out_es;
        switch (c->op) {
        case TIDE_OP_MAX_POOL2D:
        case TIDE_OP_MAX_POOL2D_INDICES:
            if (f32)
                max_plane_f32(c, ip, op, c->op == TIDE_OP_MAX_POOL2D_INDICES);
            else
                max_plane_f64(c, ip, op, c->op == TIDE_OP_MAX_POOL2D_INDICES);
            break;
        case TIDE_OP_AVG_POOL2D:
            if (f32)
                avg_plane_f32(c, ip, op);
            else
                avg_plane_f64(c, ip, op);
            break;
        default:
            if (f32)
                avg_grad_plane_f32(c, ip, op);
            else
                avg_grad_plane_f64(c, ip, op);
            break;
        }
    }
}

/* x: the input's [N, C, H, W] (for the gradient, out's); o: the pooled [OH, OW]. */
static void run_pool(tide_op op, const int64_t *x, const int64_t *o, const tide_tensor *in,
                     tide_tensor *out, const int64_t *p)
{
    pool_ctx c = {.op = op, .C = x[1], .H = x[2], .W = x[3], .OH = o[0], .OW = o[1],
                  .kh = p[0], .kw = p[1], .sh = p[2], .sw = p[3], .ph = p[4], .pw = p[5],
                  .count_include_pad = p[6] != 0, .in = td_nchw_of(in),
                  .out = td_tensor_data(out), .in_es = td_dtype_sizes[in->dtype],
                  .out_es = td_dtype_sizes[out->dtype]};
    int64_t work = max64(1, c.OH * c.OW * c.kh * c.kw);
    td_parallel_for(x[0] * x[1], max64(1, GRAIN / work), pool_planes, &c);
}

int td_cpu_pool2d(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p)
{
    run_pool(op, x->shape, out->shape + 2, x, out, p);
    return 0;
}

int td_cpu_avg_pool2d_grad(tide_tensor *out, const tide_tensor *grad_out, const int64_t *p)
{
    run_pool(TIDE_OP_AVG_POOL2D_GRAD, out->shape, grad_out->shape + 2, grad_out, out, p);
    return 0;
}
