/*
 * onnx_ops_nn.c — ONNX's neural-network ops: MatMul, Gemm, BatchNormalization (inference),
 * InstanceNormalization, LayerNormalization, LRN, MeanVarianceNormalization, Dropout (inference),
 * PRelu, Upsample (nearest).
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

static int run_matmul(onnx_ctx *c) { return onnx_set(c, tide_matmul(c->in[0], c->in[1])); }

/* Gemm: alpha * A' B' + beta * C, A' and B' transposed when transA/transB (2-D). */
static int run_gemm(onnx_ctx *c)
{
    const onnx_node *n = c->node;
    double alpha = onnx_attr_float(n, "alpha", 1.0f), beta = onnx_attr_float(n, "beta", 1.0f);
    if (tide_ndim(c->in[0]) != 2 || tide_ndim(c->in[1]) != 2)
        return onnx_error(c, "A and B must be 2-D; they have %d and %d dims",
                          tide_ndim(c->in[0]), tide_ndim(c->in[1]));
    tide_tensor *a = onnx_attr_int(n, "transA", 0) ? tide_transpose(c->in[0], 0, 1)
                                                    : tide_retain(c->in[0]);
    tide_tensor *b = onnx_attr_int(n, "transB", 0) ? tide_transpose(c->in[1], 0, 1)
                                                    : tide_retain(c->in[1]);
    tide_tensor *ab = a && b ? tide_matmul(a, b) : NULL;
    tide_tensor *scaled = ab && alpha != 1.0 ? tide_mul_scalar(ab, alpha) : tide_retain(ab);
    tide_tensor *out = scaled;
    if (scaled && c->nin > 2 && c->in[2]) {
        tide_tensor *bias = beta != 1.0 ? tide_mul_scalar(c->in[2], beta) : tide_retain(c->in[2]);
        out = bias ? tide_add(scaled, bias) : NULL;
        tide_release(bias);
        tide_release(scaled);
    }
    tide_release(a);
    tide_release(b);
    tide_release(ab);
    return onnx_set(c, out);
}

static bool output_wanted(const onnx_node *n, int k) { return n->nout > k && n->out[k] >= 0; }

/* Inference only: opset 6 needs is_test = 1 and spatial = 1; 14+ training_mode = 0; the running
 * statistics outputs (training) are not produced. */
static int check_batch_norm(const onnx_node *n, char *why, size_t size)
{
    const char *bad = NULL;
    if (n->op->since < 7 && !onnx_attr_int(n, "is_test", 0))
        bad = "is_test = 0 (training) is not supported";
    else if (n->op->since < 7 && !onnx_attr_int(n, "spatial", 1))
        bad = "spatial = 0 is not supported";
    else if (onnx_attr_int(n, "training_mode", 0))
        bad = "training_mode = 1 is not supported";
    for (int k = 1; !bad && k < 5; k++)
        if (output_wanted(n, k))
            bad = "the statistics outputs (training) are not supported";
    if (bad)
        snprintf(why, size, "%s", bad);
    return bad != NULL;
}

static int run_batch_norm(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) < 2)
        return onnx_error(c, "X must have at least 2 dims; it has %d", tide_ndim(c->in[0]));
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    return onnx_set(c, tide_batch_norm(c->in[0], c->in[3], c->in[4], c->in[1], c->in[2], false,
                                       0.0, eps));
}

/* PRelu: max(x, 0) + slope * min(x, 0). Before opset 7 a 1-D slope of C values applies per
 * channel (dim 1), as PyTorch's exporter wrote it; from 7 it broadcasts as numpy. */
static int run_prelu(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *slope = tide_retain(c->in[1]);
    int nd = tide_ndim(x);
    if (c->m->opset < 7 && nd > 2 && tide_ndim(slope) == 1 &&
        tide_shape(slope)[0] == tide_shape(x)[1] && tide_shape(slope)[0] != 1) {
        int64_t shape[8] = {-1, 1, 1, 1, 1, 1, 1, 1};
        tide_tensor *r = tide_reshape(slope, nd - 1, shape);
        tide_release(slope);
        slope = r;
    }
    tide_tensor *pos = slope ? tide_relu(x) : NULL;
    tide_tensor *negpart = pos ? tide_sub(x, pos) : NULL; /* min(x, 0) */
    tide_tensor *scaled = negpart ? tide_mul(negpart, slope) : NULL;
    tide_tensor *out = scaled ? tide_add(pos, scaled) : NULL;
    tide_release(slope);
    tide_release(pos);
    tide_release(negpart);
    tide_release(scaled);
    return onnx_set(c, out);
}

static int run_instance_norm(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) < 3)
        return onnx_error(c, "input must have spatial dims after [N, C]; it has %d dims",
                          tide_ndim(c->in[0]));
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    return onnx_set(c, tide_instance_norm(c->in[0], c->in[1], c->in[2], eps));
}

/* LayerNormalization over dims [axis, rank): Y = (X - Mean) * InvStdDev * Scale + B, with the
 * optional Mean and InvStdDev outputs (kept dims of size 1). The statistics are computed in
 * X's dtype (stash_type asks float32; for float32 inputs that is the same). */
static int run_layer_norm(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int axis, dims[8], nd = 0;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", -1), tide_ndim(x), &axis) < 0)
        return -1;
    for (int d = axis; d < tide_ndim(x); d++)
        dims[nd++] = d;
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    tide_tensor *mean = tide_mean(x, dims, nd, true);
    tide_tensor *centered = mean ? tide_sub(x, mean) : NULL;
    tide_tensor *sq = centered ? tide_mul(centered, centered) : NULL;
    tide_tensor *var = sq ? tide_mean(sq, dims, nd, true) : NULL;
    tide_tensor *var_eps = var ? tide_add_scalar(var, eps) : NULL;
    tide_tensor *inv = var_eps ? tide_rsqrt(var_eps) : NULL;
    tide_tensor *norm = inv ? tide_mul(centered, inv) : NULL;
    tide_tensor *scaled = norm ? tide_mul(norm, c->in[1]) : NULL;
    tide_tensor *y = scaled && c->nin > 2 && c->in[2] ? tide_add(scaled, c->in[2])
                                                      : tide_retain(scaled);
    tide_release(centered);
    tide_release(sq);
    tide_release(var);
    tide_release(var_eps);
    tide_release(norm);
    tide_release(scaled);
    if (y && c->nout > 1)
        c->out[1] = tide_retain(mean);
    if (y && c->nout > 2)
        c->out[2] = tide_retain(inv);
    tide_release(mean);
    tide_release(inv);
    return onnx_set(c, y);
}

/* LRN: x / (bias + alpha / size * (sum of x^2 over the channel window))^beta; the window is
 * [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped: summed as slices of a zero-padded x^2. */
static int run_lrn(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int64_t size = onnx_attr_int(c->node, "size", 0);
    if (size < 1 || size > 4096 || tide_ndim(x) < 3)
        return onnx_error(c, "size = %lld must be in [1, 4096] and X have at least 3 dims "
                          "(it has %d)", (long long)size, tide_ndim(x));
    double alpha = onnx_attr_float(c->node, "alpha", 1e-4f);
    double beta = onnx_attr_float(c->node, "beta", 0.75f);
    double bias = onnx_attr_float(c->node, "bias", 1.0f);
    int64_t pads[16] = {0}, channels = tide_shape(x)[1];
    int at = 2 * (tide_ndim(x) - 2);
    pads[at] = (size - 1) / 2;
    pads[at + 1] = size / 2;
    tide_tensor *sq = tide_mul(x, x);
    tide_tensor *padded = sq ? tide_pad(sq, pads, at + 2, 0.0) : NULL;
    tide_tensor *sum = padded ? tide_slice(padded, 1, 0, channels, 1) : NULL;
    for (int64_t k = 1; sum && k < size; k++) {
        tide_tensor *part = tide_slice(padded, 1, k, k + channels, 1);
        tide_tensor *next = part ? tide_add(sum, part) : NULL;
        tide_release(part);
        tide_release(sum);
        sum = next;
    }
    tide_tensor *scaled = sum ? tide_mul_scalar(sum, alpha / (double)size) : NULL;
    tide_tensor *base = scaled ? tide_add_scalar(scaled, bias) : NULL;
    tide_tensor *denom = base ? tide_pow_scalar(base, beta) : NULL;
    tide_tensor *y = denom ? tide_div(x, denom) : NULL;
    tide_release(sq);
    tide_release(padded);
    tide_release(sum);
    tide_release(scaled);
    tide_release(base);
    tide_release(denom);
    return onnx_set(c, y);
}

/* MeanVarianceNormalization: (X - mean) / (sqrt(mean(X^2) - mean^2) + 1e-9) over axes (default
 * [0, 2, 3]), as ONNX's reference computes it. */
static int run_mvn(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int count = 0, dims[8];
    const int64_t *axes = onnx_attr_ints(c->node, "axes", &count);
    static const int64_t dflt[] = {0, 2, 3};
    if (!axes) {
        axes = dflt;
        count = 3;
    }
    if (count > 8)
        return onnx_error(c, "axes has %d values; at most 8", count);
    for (int i = 0; i < count; i++)
        if (onnx_axis(c, axes[i], tide_ndim(x), &dims[i]) < 0)
            return -1;
    tide_tensor *mean = tide_mean(x, dims, count, true);
    tide_tensor *sq = mean ? tide_mul(x, x) : NULL;
    tide_tensor *sq_mean = sq ? tide_mean(sq, dims, count, true) : NULL;
    tide_tensor *mean_sq = sq_mean ? tide_mul(mean, mean) : NULL;
    tide_tensor *var = mean_sq ? tide_sub(sq_mean, mean_sq) : NULL;
    tide_tensor *std = var ? tide_sqrt(var) : NULL;
    tide_tensor *std_eps = std ? tide_add_scalar(std, 1e-9) : NULL;
    tide_tensor *centered = std_eps ? tide_sub(x, mean) : NULL;
    tide_tensor *y = centered ? tide_div(centered, std_eps) : NULL;
    tide_tensor *all[] = {mean, sq, sq_mean, mean_sq, var, std, std_eps, centered};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
    return onnx_set(c, y);
}

/* Dropout in inference: the identity; training_mode given as an input is rejected. */
static int check_dropout(const onnx_node *n, char *why, size_t size)
{
    bool training = n->p->n_input > 2 && n->p->input[2] && n->p->input[2][0];
    if (training || (n->op->since < 7 && !onnx_attr_int(n, "is_test", 0))) {
        snprintf(why, size, "training mode (random) is not supported");
        return 1;
    }
    return 0;
}

static int run_dropout(onnx_ctx *c)
{
    if (c->nout > 1 && c->node->out[1] >= 0) {
        const tide_tensor *x = c->in[0];
        tide_dtype dt = c->m->opset < 7 ? tide_get_dtype(x) : TIDE_BOOL;
        c->out[1] = tide_ones_on(tide_device_name(x), tide_ndim(x), tide_shape(x), dt);
        if (!c->out[1])
            return onnx_fail(c);
    }
    return onnx_set(c, tide_retain(c->in[0]));
}

/* Upsample (opsets 7-9): only mode nearest, which is src = floor(dst / scale), as tide's
 * NEAREST with the scales given; N and C must keep their size. */
static int check_upsample(const onnx_node *n, char *why, size_t size)
{
    char buf[32];
    if (strcmp(onnx_attr_string(n, "mode", "nearest", buf, sizeof buf), "nearest")) {
        snprintf(why, size, "mode '%s' is not supported (only nearest)", buf);
        return 1;
    }
    return 0;
}

static int run_upsample(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int count = 0, nd = tide_ndim(x);
    float sf[8];
    if (c->nin > 1) {
        tide_tensor *s = tide_cast(c->in[1], TIDE_FLOAT32);
        count = s ? (int)tide_numel(s) : -1;
        size_t bytes = sizeof(float) * (size_t)(count > 0 ? count : 0);
        if (!s || count > 8 || tide_to_buffer(s, sf, bytes))
            count = -1;
        tide_release(s);
    } else {
        const float *v = onnx_attr_floats(c->node, "scales", &count);
        for (int i = 0; v && i < count && i < 8; i++)
            sf[i] = v[i];
    }
    if (count != nd || nd < 3 || nd > 5 || sf[0] != 1.0f || sf[1] != 1.0f)
        return onnx_error(c, "scales must have one value per dim of X (3 to 5 dims, it has %d), "
                          "1 for N and C", nd);
    double scales[3];
    int64_t sizes[3];
    for (int i = 0; i < nd - 2; i++) {
        if (!(sf[i + 2] >= 1.0f) || sf[i + 2] > 1e6f)
            return onnx_error(c, "scales[%d] = %g must be in [1, 1e6]", i + 2, sf[i + 2]);
        sizes[i] = (int64_t)floor((double)tide_shape(x)[i + 2] * sf[i + 2]);
        scales[i] = sf[i + 2];
    }
    return onnx_set(c, tide_interpolate(x, nd - 2, sizes, scales, TIDE_INTERP_NEAREST, false));
}

const onnx_op onnx_ops_nn[] = {
    {"MatMul", 1, 0, 2, 2, NULL, run_matmul, false},
    {"Gemm", 1, 0, 2, 3, NULL, run_gemm, false}, /* before 7: `broadcast` changes nothing here */
    {"BatchNormalization", 1, 6, 5, 5, check_batch_norm, run_batch_norm, 0},
    {"BatchNormalization", 7, 0, 5, 5, check_batch_norm, run_batch_norm, 0},
    {"PRelu", 1, 0, 2, 2, NULL, run_prelu, 0},
    {"InstanceNormalization", 1, 0, 3, 3, NULL, run_instance_norm, 0},
    {"LayerNormalization", 17, 0, 2, 3, NULL, run_layer_norm, 0},
    {"Upsample", 7, 8, 1, 1, check_upsample, run_upsample, 0},
    {"Upsample", 9, 9, 2, 2, check_upsample, run_upsample, 0},
    {"LRN", 1, 0, 1, 1, NULL, run_lrn, 0},
    {"MeanVarianceNormalization", 1, 0, 1, 1, NULL, run_mvn, 0},
    {"Dropout", 1, 6, 1, 1, check_dropout, run_dropout, 0},
    {"Dropout", 7, 0, 1, 3, check_dropout, run_dropout, 0},
    {0},
};
