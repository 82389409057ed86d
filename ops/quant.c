/*
 * quant.c — quantized weights: quantize, dequantize and qlinear (the QUANTIZE, DEQUANTIZE and
 * QLINEAR primitives; block formats and numerics in core/quant.h, docs/quantization.md).
 *
 * A quantized weight is a uint8 tensor [rows, K/32 * block bytes]; the format is an argument,
 * not a dtype. The public functions check shapes, dtypes and formats, make operands contiguous
 * float32 (a half weight or activation is cast up first) and dispatch one primitive. qlinear
 * runs on [M, K] (leading dims merged) and restores them after; its gradient in x is
 * g @ dequantize(q) (autograd/formulas.c), none in q. Library ops: the jit keeps them opaque.
 */
#include <string.h>

#include "../core/quant.h"
#include "nn_common.h"

const char *tide_qformat_name(tide_qformat fmt)
{
    return fmt == TIDE_Q8_0 ? "q8_0" : fmt == TIDE_Q4_0 ? "q4_0" : NULL;
}

int tide_qformat_from_name(const char *name)
{
    if (name && strcmp(name, "q8_0") == 0)
        return TIDE_Q8_0;
    if (name && strcmp(name, "q4_0") == 0)
        return TIDE_Q4_0;
    return -1;
}

int tide_qformat_block_bytes(tide_qformat fmt) { return td_qblock_bytes((int)fmt); }

static int check_format(const char *op, tide_qformat fmt)
{
    if (!tide_qformat_name(fmt))
        return td_error("%s: unknown quantization format %d (expected TIDE_Q8_0 or TIDE_Q4_0)",
                        op, (int)fmt);
    return 0;
}

/* q must be a uint8 [rows, K/32 * block bytes] for a K that is a positive multiple of 32. */
static int check_quantized(const char *op, const tide_tensor *q, tide_qformat fmt, int64_t k)
{
    char b[160];
    if (td_check_tensor(op, "weight", q) < 0 || check_format(op, fmt) < 0)
        return -1;
    if (q->dtype != TIDE_UINT8 || q->ndim != 2)
        return td_error("%s: the quantized weight must be uint8 [rows, K/32 * %d] (%s), got %s",
                        op, td_qblock_bytes((int)fmt), tide_qformat_name(fmt),
                        nn_describe(b, sizeof b, q));
    if (k <= 0 || k % TD_QBLOCK != 0)
        return td_error("%s: K = %lld must be a positive multiple of 32 (%s blocks), weight %s",
                        op, (long long)k, tide_qformat_name(fmt), nn_describe(b, sizeof b, q));
    int64_t want = k / TD_QBLOCK * td_qblock_bytes((int)fmt);
    if (q->shape[1] != want)
        return td_error("%s: a %s row of K = %lld values is %lld bytes, but the weight %s has "
                        "rows of %lld", op, tide_qformat_name(fmt), (long long)k,
                        (long long)want, nn_describe(b, sizeof b, q), (long long)q->shape[1]);
    return 0;
}

/* x cast to contiguous float32 (new reference), or NULL with the error named after op. */
static tide_tensor *float32_contiguous(const char *op, const char *what, const tide_tensor *x)
{
    char b[160];
    if (!tide_dtype_is_floating((tide_dtype)x->dtype) || x->dtype == TIDE_FLOAT64) {
        td_error("%s: the %s must be float32, float16 or bfloat16, got %s", op, what,
                 nn_describe(b, sizeof b, x));
        return NULL;
    }
    tide_tensor *f = x->dtype == TIDE_FLOAT32 ? tide_retain((tide_tensor *)x)
                                              : tide_cast(x, TIDE_FLOAT32);
    tide_tensor *c = f ? tide_contiguous(f) : NULL;
    tide_release(f);
    return c;
}

static tide_tensor *quantize_body(const tide_tensor *w, tide_qformat fmt)
{
    const char *op = "quantize";
    char b[160];
    if (td_check_tensor(op, "weight", w) < 0 || check_format(op, fmt) < 0)
        return NULL;
    if (w->ndim != 2 || w->shape[1] <= 0 || w->shape[1] % TD_QBLOCK != 0) {
        td_error("%s: the weight must be 2-D [rows, K] with K a positive multiple of 32 (%s "
                 "blocks), got %s", op, tide_qformat_name(fmt), nn_describe(b, sizeof b, w));
        return NULL;
    }
    tide_tensor *in = float32_contiguous(op, "weight", w);
    if (!in)
        return NULL;
    td_meta meta = {2, {w->shape[0], w->shape[1] / TD_QBLOCK * td_qblock_bytes((int)fmt)},
                    TIDE_UINT8, w->device};
    tide_attrs attrs = {.nints = 1, .ints = {fmt}};
    tide_tensor *out = td_dispatch(TIDE_OP_QUANTIZE, &meta, &in, 1, &attrs);
    tide_release(in);
    return out;
}

tide_tensor *tide_quantize(const tide_tensor *w, tide_qformat fmt)
{
    TD_IN_OP("quantize", quantize_body(w, fmt));
}

static tide_tensor *dequantize_body(const tide_tensor *q, tide_qformat fmt, int64_t k)
{
    if (check_quantized("dequantize", q, fmt, k) < 0)
        return NULL;
    tide_tensor *in = tide_contiguous(q);
    if (!in)
        return NULL;
    td_meta meta = {2, {q->shape[0], k}, TIDE_FLOAT32, q->device};
    tide_attrs attrs = {.nints = 2, .ints = {fmt, k}};
    tide_tensor *out = td_dispatch(TIDE_OP_DEQUANTIZE, &meta, &in, 1, &attrs);
    tide_release(in);
    return out;
}

tide_tensor *tide_dequantize(const tide_tensor *q, tide_qformat fmt, int64_t k)
{
    TD_IN_OP("dequantize", dequantize_body(q, fmt, k));
}

/* x [..., K] as contiguous float32 [M, K] (new reference). */
static tide_tensor *rows_of(const char *op, const tide_tensor *x, int64_t k)
{
    tide_tensor *f = float32_contiguous(op, "input", x);
    if (!f)
        return NULL;
    int64_t shape[2] = {k ? tide_numel(x) / k : 0, k};
    tide_tensor *r = tide_reshape(f, 2, shape);
    tide_release(f);
    return r;
}

static tide_tensor *qlinear_body(const tide_tensor *x, const tide_tensor *q, tide_qformat fmt)
{
    const char *op = "qlinear";
    char bx[160], bq[160];
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "weight", q) < 0)
        return NULL;
    int64_t k = x->ndim >= 1 ? x->shape[x->ndim - 1] : 0;
    if (x->ndim < 1) {
        td_error("%s: the input %s must have a last dim K", op, nn_describe(bx, sizeof bx, x));
        return NULL;
    }
    if (check_quantized(op, q, fmt, k) < 0)
        return NULL;
    if (x->device != q->device) {
        td_error("%s: the input %s is on %s but the weight %s on %s", op,
                 nn_describe(bx, sizeof bx, x), x->device->name, nn_describe(bq, sizeof bq, q),
                 q->device->name);
        return NULL;
    }
    nn_scope s = {0};
    tide_tensor *in[2] = {nn_keep(&s, rows_of(op, x, k)), nn_keep(&s, tide_contiguous(q))};
    if (!in[0] || !in[1])
        return nn_finish(&s, op, NULL);
    td_meta meta = {2, {in[0]->shape[0], q->shape[0]}, TIDE_FLOAT32, x->device};
    tide_attrs attrs = {.nints = 1, .ints = {fmt}};
    tide_tensor *out = nn_keep(&s, td_dispatch(TIDE_OP_QLINEAR, &meta, in, 2, &attrs));
    if (out) {
        int64_t shape[TIDE_MAX_DIMS];
        memcpy(shape, x->shape, sizeof(int64_t) * x->ndim);
        shape[x->ndim - 1] = q->shape[0];
        out = nn_keep(&s, tide_reshape(out, x->ndim, shape));
    }
    return nn_finish(&s, op, out);
}

tide_tensor *tide_qlinear(const tide_tensor *x, const tide_tensor *q, tide_qformat fmt)
{
    TD_IN_OP("qlinear", qlinear_body(x, q, fmt));
}
