/*
 * onnx_ops_quant.c — ONNX's linear quantization ops on uint8 (tide has no int8: models with
 * int8 tensors stay unsupported at load): QuantizeLinear, DequantizeLinear (per tensor and per
 * axis), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, and 2-D ConvInteger and
 * QLinearConv (tide_conv2d). Composed from tide ops in float32 as the ONNX reference computes
 * (round half to even, saturate to [0, 255]); the integer products and convolutions run in
 * float64, exact for any sum of uint8 difference products with fewer than 2^37 terms.
 */
#include <string.h>

#include "onnx_ops_move.h"

/* A scale or zero point for x of rank `rank`: a scalar or 1-element tensor as is, a 1-D one of
 * x's size along axis reshaped to broadcast there. NULL for a NULL t (a new reference). */
static tide_tensor *along_axis(const onnx_ctx *c, const tide_tensor *t, const tide_tensor *x,
                               int axis)
{
    if (!t || tide_numel(t) == 1 || tide_ndim(x) == 0)
        return t ? tide_retain((tide_tensor *)t) : NULL;
    if (tide_ndim(t) != 1 || tide_shape(t)[0] != tide_shape(x)[axis]) {
        onnx_error(c, "a scale or zero point of %d dims and %lld entries does not fit axis %d "
                      "of size %lld", tide_ndim(t), (long long)tide_numel(t), axis,
                   (long long)tide_shape(x)[axis]);
        return NULL;
    }
    int64_t shape[8];
    for (int k = 0; k < tide_ndim(x); k++)
        shape[k] = k == axis ? tide_shape(x)[axis] : 1;
    return tide_reshape(t, tide_ndim(x), shape);
}

/* round(v) + zp (zp may be NULL) saturated to [0, 255], as uint8. */
static tide_tensor *saturate_u8(const onnx_ctx *c, const tide_tensor *v, const tide_tensor *zp)
{
    tide_tensor *r = tide_round(v);
    tide_tensor *zf = zp ? tide_cast(zp, tide_get_dtype(v)) : NULL;
    tide_tensor *s = r && (zf || !zp) ? (zf ? tide_add(r, zf) : tide_retain(r)) : NULL;
    tide_tensor *lo = tide_zeros_on(onnx_device_of(c), 0, NULL, tide_get_dtype(v));
    tide_tensor *hi = tide_full_on(onnx_device_of(c), 0, NULL, 255, tide_get_dtype(v));
    tide_tensor *a = s && lo ? tide_clamp_min(s, lo) : NULL;
    tide_tensor *b = a && hi ? tide_clamp_max(a, hi) : NULL;
    tide_tensor *out = b ? tide_cast(b, TIDE_UINT8) : NULL;
    tide_tensor *tmp[] = {r, zf, s, lo, hi, a, b};
    onnx_release_all(tmp, 7);
    return out;
}

static int check_u8(const onnx_ctx *c, int k, const char *what)
{
    if (k < c->nin && c->in[k] && tide_get_dtype(c->in[k]) != TIDE_UINT8)
        return onnx_unsupported(c, "%s is %s; only uint8 is supported", what,
                                tide_dtype_name(tide_get_dtype(c->in[k])));
    return 0;
}

static int quant_axis(onnx_ctx *c, int *axis)
{
    *axis = 0;
    int rank = tide_ndim(c->in[0]);
    /* axis matters only for a per-axis scale (an out-of-range axis is then an error) */
    bool per_tensor = tide_numel(c->in[1]) == 1;
    return rank == 0 || per_tensor ? 0 : onnx_axis(c, onnx_attr_int(c->node, "axis", 1), rank, axis);
}

static int check_blocked(const onnx_node *n, char *why, size_t size)
{
    if (onnx_attr_int(n, "block_size", 0) != 0)
        return snprintf(why, size, "block_size (blocked quantization) is not supported"), 1;
    return 0;
}

static int run_quantize_linear(onnx_ctx *c)
{
    int axis;
    if (check_u8(c, 2, "y_zero_point") || quant_axis(c, &axis))
        return -1;
    if (!tide_dtype_is_floating(tide_get_dtype(c->in[0])))
        return onnx_error(c, "x is %s; it must be a floating type",
                          tide_dtype_name(tide_get_dtype(c->in[0])));
    tide_tensor *s = along_axis(c, c->in[1], c->in[0], axis);
    tide_tensor *zp = s ? along_axis(c, c->nin > 2 ? c->in[2] : NULL, c->in[0], axis) : NULL;
    tide_tensor *x = s ? tide_cast(c->in[0], tide_get_dtype(s)) : NULL;
    tide_tensor *v = x ? tide_div(x, s) : NULL;
    tide_tensor *out = v && (zp || c->nin <= 2 || !c->in[2]) ? saturate_u8(c, v, zp) : NULL;
    tide_tensor *tmp[] = {s, zp, x, v};
    onnx_release_all(tmp, 4);
    return out ? onnx_set(c, out) : onnx_fail(c);
}

static int run_dequantize_linear(onnx_ctx *c)
{
    int axis;
    tide_dtype xd = tide_get_dtype(c->in[0]);
    if ((xd != TIDE_UINT8 && xd != TIDE_INT32) || check_u8(c, 2, "x_zero_point") ||
        quant_axis(c, &axis))
        return xd != TIDE_UINT8 && xd != TIDE_INT32
                   ? onnx_unsupported(c, "x is %s; only uint8 and int32 are supported",
                                      tide_dtype_name(xd))
                   : -1;
    tide_tensor *s = along_axis(c, c->in[1], c->in[0], axis);
    tide_tensor *zp = s ? along_axis(c, c->nin > 2 ? c->in[2] : NULL, c->in[0], axis) : NULL;
    tide_tensor *x = s ? tide_cast(c->in[0], tide_get_dtype(s)) : NULL;
    tide_tensor *zf = zp ? tide_cast(zp, tide_get_dtype(s)) : NULL;
    tide_tensor *d = x && zf ? tide_sub(x, zf) : x ? tide_retain(x) : NULL;
    tide_tensor *out = d ? tide_mul(d, s) : NULL;
    tide_tensor *tmp[] = {s, zp, x, zf, d};
    onnx_release_all(tmp, 5);
    return out ? onnx_set(c, out) : onnx_fail(c);
}

/* y = saturate(round(x / scale) + zp) with scale = (max(0, max x) - min(0, min x)) / 255 and
 * zp = saturate(round(-min / scale)). */
static int run_dynamic_quantize_linear(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    if (tide_get_dtype(x) != TIDE_FLOAT32)
        return onnx_unsupported(c, "x is %s; only float32 is supported",
                                tide_dtype_name(tide_get_dtype(x)));
    int64_t n = tide_numel(x);
    tide_tensor *flat = tide_reshape(x, 1, &n);
    int dim = 0;
    tide_tensor *lo = flat ? tide_amin(flat, &dim, 1, false) : NULL;
    tide_tensor *hi = flat ? tide_amax(flat, &dim, 1, false) : NULL;
    tide_tensor *zero = tide_zeros_on(onnx_device_of(c), 0, NULL, TIDE_FLOAT32);
    tide_tensor *mn = lo && zero ? tide_minimum(lo, zero) : NULL;
    tide_tensor *mx = hi && zero ? tide_maximum(hi, zero) : NULL;
    tide_tensor *range = mn && mx ? tide_sub(mx, mn) : NULL;
    tide_tensor *scale = range ? tide_div_scalar(range, 255.0) : NULL;
    tide_tensor *neg = mn ? tide_sub(zero, mn) : NULL;
    tide_tensor *zv = neg && scale ? tide_div(neg, scale) : NULL;
    tide_tensor *zp = zv ? saturate_u8(c, zv, NULL) : NULL;
    tide_tensor *v = scale ? tide_div(x, scale) : NULL;
    tide_tensor *y = v && zp ? saturate_u8(c, v, zp) : NULL;
    int rc = y ? 0 : onnx_fail(c);
    if (!rc) {
        c->out[0] = y;
        c->out[1] = tide_retain(scale);
        c->out[2] = tide_retain(zp);
    }
    tide_tensor *tmp[] = {flat, lo, hi, zero, mn, mx, range, scale, neg, zv, zp, v};
    onnx_release_all(tmp, 12);
    return rc;
}

/* x - zp in float64 (zp may be NULL); a 1-D a_zero_point is per row of a: shaped [M, 1]. */
static tide_tensor *centered(const tide_tensor *x, const tide_tensor *zp, bool per_row)
{
    tide_tensor *xf = tide_cast(x, TIDE_FLOAT64);
    if (!xf || !zp)
        return xf;
    int64_t shape[2] = {tide_numel(zp), 1};
    tide_tensor *zr = per_row && tide_ndim(zp) == 1 && tide_numel(zp) > 1
                          ? tide_reshape(zp, 2, shape) : tide_retain((tide_tensor *)zp);
    tide_tensor *zf = zr ? tide_cast(zr, TIDE_FLOAT64) : NULL;
    tide_tensor *d = zf ? tide_sub(xf, zf) : NULL;
    tide_tensor *tmp[] = {xf, zr, zf};
    onnx_release_all(tmp, 3);
    return d;
}

/* (a - a_zp) @ (b - b_zp) in float64 (exact: see the top), from inputs ka, kazp, kb, kbzp. */
static tide_tensor *integer_matmul(onnx_ctx *c, int ka, int kazp, int kb, int kbzp)
{
    if (check_u8(c, ka, "A") || check_u8(c, kb, "B") || check_u8(c, kazp, "a_zero_point") ||
        check_u8(c, kbzp, "b_zero_point"))
        return NULL;
    tide_tensor *a = centered(c->in[ka], kazp < c->nin ? c->in[kazp] : NULL, true);
    tide_tensor *b = a ? centered(c->in[kb], kbzp < c->nin ? c->in[kbzp] : NULL, false) : NULL;
    tide_tensor *p = b ? tide_matmul(a, b) : NULL;
    if (!p)
        onnx_fail(c);
    tide_release(a);
    tide_release(b);
    return p;
}

static int run_matmul_integer(onnx_ctx *c)
{
    tide_tensor *p = integer_matmul(c, 0, 2, 1, 3);
    if (!p)
        return -1;
    tide_tensor *out = tide_cast(p, TIDE_INT32);
    tide_release(p);
    return onnx_set(c, out);
}

/* saturate(round(P * (a_scale * b_scale / y_scale)) + y_zp), the factor in float32. */
static int run_qlinear_matmul(onnx_ctx *c)
{
    if (check_u8(c, 7, "y_zero_point"))
        return -1;
    tide_tensor *p = integer_matmul(c, 0, 2, 3, 5);
    if (!p)
        return -1;
    tide_tensor *ab = tide_mul(c->in[1], c->in[4]);
    tide_tensor *f32 = ab ? tide_div(ab, c->in[6]) : NULL;
    tide_tensor *f = f32 ? tide_cast(f32, TIDE_FLOAT64) : NULL;
    tide_tensor *v = f ? tide_mul(p, f) : NULL;
    tide_tensor *out = v ? saturate_u8(c, v, c->in[7]) : NULL;
    tide_tensor *tmp[] = {p, ab, f32, f, v};
    onnx_release_all(tmp, 5);
    return onnx_set(c, out);
}

/* ConvInteger/QLinearConv attributes tide_conv2d can take: 2-D, NOTSET auto_pad, symmetric
 * pads. */
static int check_qconv(const onnx_node *n, char *why, size_t size)
{
    char buf[16];
    const char *ap = onnx_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    int np = 0, ns = 0, nd = 0, nk = 0;
    const int64_t *p = onnx_attr_ints(n, "pads", &np);
    onnx_attr_ints(n, "strides", &ns);
    onnx_attr_ints(n, "dilations", &nd);
    onnx_attr_ints(n, "kernel_shape", &nk);
    if (strcmp(ap, "NOTSET"))
        return snprintf(why, size, "auto_pad %s is not supported", ap), 1;
    if ((np && np != 4) || (ns && ns != 2) || (nd && nd != 2) || (nk && nk != 2))
        return snprintf(why, size, "only 2-D convolutions are supported"), 1;
    if (np && (p[0] != p[2] || p[1] != p[3] || p[0] < 0 || p[1] < 0 || p[0] > 1 << 20 ||
               p[1] > 1 << 20))
        return snprintf(why, size, "only symmetric non-negative pads are supported"), 1;
    return 0;
}

/* conv2d of (x - x_zp) and (w - w_zp) in float64 (exact as integer_matmul), from inputs kx,
 * kxzp, kw, kwzp; w_zp per output channel is shaped [O, 1, 1, 1]. */
static tide_tensor *integer_conv(onnx_ctx *c, int kx, int kxzp, int kw, int kwzp)
{
    if (check_u8(c, kx, "x") || check_u8(c, kw, "w") || check_u8(c, kxzp, "x_zero_point") ||
        check_u8(c, kwzp, "w_zero_point"))
        return NULL;
    if (tide_ndim(c->in[kx]) != 4 || tide_ndim(c->in[kw]) != 4) {
        onnx_unsupported(c, "only 2-D convolutions (4-D x and w) are supported");
        return NULL;
    }
    const onnx_node *n = c->node;
    int np = 0, ns = 0, nd = 0;
    const int64_t *p = onnx_attr_ints(n, "pads", &np), *s = onnx_attr_ints(n, "strides", &ns);
    const int64_t *d = onnx_attr_ints(n, "dilations", &nd);
    int pad[2] = {np ? (int)p[0] : 0, np ? (int)p[1] : 0};
    int stride[2] = {ns ? (int)s[0] : 1, ns ? (int)s[1] : 1};
    int dil[2] = {nd ? (int)d[0] : 1, nd ? (int)d[1] : 1};
    int groups = (int)onnx_attr_int(n, "group", 1);
    const tide_tensor *wzp = kwzp < c->nin ? c->in[kwzp] : NULL;
    tide_tensor *wz = NULL;
    if (wzp && tide_numel(wzp) > 1) {
        int64_t shape[4] = {tide_numel(wzp), 1, 1, 1};
        wz = tide_reshape(wzp, 4, shape);
    } else if (wzp)
        wz = tide_retain((tide_tensor *)wzp);
    tide_tensor *x = centered(c->in[kx], kxzp < c->nin ? c->in[kxzp] : NULL, false);
    tide_tensor *w = x && (wz || !wzp) ? centered(c->in[kw], wz, false) : NULL;
    tide_tensor *y = w ? tide_conv2d(x, w, NULL, stride, pad, dil, groups) : NULL;
    if (!y)
        onnx_fail(c);
    tide_tensor *tmp[] = {wz, x, w};
    onnx_release_all(tmp, 3);
    return y;
}

static int run_conv_integer(onnx_ctx *c)
{
    tide_tensor *y = integer_conv(c, 0, 2, 1, 3);
    if (!y)
        return -1;
    tide_tensor *out = tide_cast(y, TIDE_INT32);
    tide_release(y);
    return onnx_set(c, out);
}

/* saturate(round((conv + bias) * (x_scale * w_scale / y_scale)) + y_zp); w_scale may be per
 * output channel. */
static int run_qlinear_conv(onnx_ctx *c)
{
    if (check_u8(c, 7, "y_zero_point"))
        return -1;
    tide_tensor *y = integer_conv(c, 0, 2, 3, 5);
    if (!y)
        return -1;
    int64_t cshape[3] = {tide_numel(c->in[4]), 1, 1};
    tide_tensor *ws = tide_numel(c->in[4]) > 1 ? tide_reshape(c->in[4], 3, cshape)
                                               : tide_retain(c->in[4]);
    tide_tensor *xw = ws ? tide_mul(c->in[1], ws) : NULL;
    tide_tensor *f32 = xw ? tide_div(xw, c->in[6]) : NULL;
    tide_tensor *f = f32 ? tide_cast(f32, TIDE_FLOAT64) : NULL;
    tide_tensor *b = NULL, *yb = NULL;
    if (c->nin > 8 && c->in[8]) {
        int64_t bshape[3] = {tide_numel(c->in[8]), 1, 1};
        tide_tensor *br = tide_reshape(c->in[8], 3, bshape);
        b = br ? tide_cast(br, TIDE_FLOAT64) : NULL;
        tide_release(br);
        yb = b ? tide_add(y, b) : NULL;
    } else
        yb = tide_retain(y);
    tide_tensor *v = f && yb ? tide_mul(yb, f) : NULL;
    tide_tensor *out = v ? saturate_u8(c, v, c->in[7]) : NULL;
    tide_tensor *tmp[] = {y, ws, xw, f32, f, b, yb, v};
    onnx_release_all(tmp, 8);
    return onnx_set(c, out);
}

const onnx_op onnx_ops_quant[] = {
    {"QuantizeLinear", 10, 0, 2, 3, check_blocked, run_quantize_linear, 0},
    {"DequantizeLinear", 10, 0, 2, 3, check_blocked, run_dequantize_linear, 0},
    {"DynamicQuantizeLinear", 11, 0, 1, 1, NULL, run_dynamic_quantize_linear, 0},
    {"MatMulInteger", 10, 0, 2, 4, NULL, run_matmul_integer, 0},
    {"QLinearMatMul", 10, 0, 8, 8, NULL, run_qlinear_matmul, 0},
    {"ConvInteger", 10, 0, 2, 4, check_qconv, run_conv_integer, 0},
    {"QLinearConv", 10, 0, 8, 9, check_qconv, run_qlinear_conv, 0},
    {0},
};
