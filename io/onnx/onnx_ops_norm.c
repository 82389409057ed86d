/*
 * onnx_ops_norm.c — ONNX's normalizations for inference: BatchNormalization (running
 * statistics; training_mode and is_test=0 are rejected), InstanceNormalization,
 * LayerNormalization (with its Mean and InvStdDev outputs), LRN, MeanVarianceNormalization.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_ops_move.h"

static bool is_float(const tide_tensor *t)
{
    tide_dtype d = tide_get_dtype(t);
    return d == TIDE_FLOAT32 || d == TIDE_FLOAT64 || d == TIDE_FLOAT16 || d == TIDE_BFLOAT16;
}

static bool wants_output(const onnx_node *n, int k)
{
    return n->p->n_output > (size_t)k && n->p->output[k][0];
}

/* Inference only: opset < 7 runs in training unless is_test; 14 on has training_mode; the extra
 * outputs (running and saved statistics) exist only in training. */
static int check_batch_norm(const onnx_node *n, char *why, size_t size)
{
    const char *what = NULL;
    if (onnx_attr_int(n, "training_mode", 0) != 0)
        what = "training_mode 1";
    else if (onnx_attr(n, "is_test") && onnx_attr_int(n, "is_test", 0) == 0)
        what = "is_test 0 (training)";
    else if (onnx_attr_int(n, "spatial", 1) != 1)
        what = "spatial 0 (per-activation statistics)";
    else if (wants_output(n, 1) || wants_output(n, 2) || wants_output(n, 3) || wants_output(n, 4))
        what = "the training outputs (running or saved mean and variance)";
    if (what)
        snprintf(why, size, "%s", what);
    return what != NULL;
}

static int run_batch_norm(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    if (tide_ndim(x) < 2)
        return onnx_error(c, "X has %d dims; at least 2 ([N, C, ...])", tide_ndim(x));
    for (int k = 1; k < 5; k++)
        if (tide_ndim(c->in[k]) != 1 || tide_shape(c->in[k])[0] != tide_shape(x)[1])
            return onnx_error(c, "input %d must be 1-D of the %lld channels", k,
                              (long long)tide_shape(x)[1]);
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    return onnx_set(c, tide_batch_norm(x, c->in[3], c->in[4], c->in[1], c->in[2], false, 0.0,
                                       eps));
}

static int run_instance_norm(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    if (tide_ndim(x) < 3)
        return onnx_error(c, "input has %d dims; at least 3 ([N, C, spatial...])", tide_ndim(x));
    for (int k = 1; k < 3; k++)
        if (tide_ndim(c->in[k]) != 1 || tide_shape(c->in[k])[0] != tide_shape(x)[1])
            return onnx_error(c, "input %d must be 1-D of the %lld channels", k,
                              (long long)tide_shape(x)[1]);
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    return onnx_set(c, tide_instance_norm(x, c->in[1], c->in[2], eps));
}

/* (x - mean) and 1 / sqrt(var + eps) over dims (kept), biased variance. */
static int standardize(const tide_tensor *x, const int *dims, int nd, double eps,
                       tide_tensor **mean, tide_tensor **diff, tide_tensor **inv)
{
    *mean = tide_mean(x, dims, nd, true);
    *diff = *mean ? tide_sub(x, *mean) : NULL;
    tide_tensor *sq = *diff ? tide_mul(*diff, *diff) : NULL;
    tide_tensor *var = sq ? tide_mean(sq, dims, nd, true) : NULL;
    tide_tensor *ve = var ? tide_add_scalar(var, eps) : NULL;
    tide_tensor *sd = ve ? tide_sqrt(ve) : NULL;
    *inv = sd ? tide_reciprocal(sd) : NULL;
    tide_tensor *tmp[] = {sq, var, ve, sd};
    onnx_release_all(tmp, 4);
    return *inv ? 0 : -1;
}

static int run_layer_norm(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), axis, dims[8];
    if (!is_float(x))
        return onnx_unsupported(c, "a %s input", tide_dtype_name(tide_get_dtype(x)));
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", -1), rank, &axis))
        return -1;
    for (int i = axis; i < rank; i++)
        dims[i - axis] = i;
    double eps = onnx_attr_float(c->node, "epsilon", 1e-5f);
    tide_dtype dt = tide_get_dtype(x);
    bool stash = onnx_attr_int(c->node, "stash_type", 1) == 1 && dt != TIDE_FLOAT64;
    tide_tensor *xs = stash ? tide_cast(x, TIDE_FLOAT32) : tide_retain((tide_tensor *)x);
    tide_tensor *mean = NULL, *diff = NULL, *inv = NULL;
    if (!xs || standardize(xs, dims, rank - axis, eps, &mean, &diff, &inv)) {
        tide_tensor *tmp[] = {xs, mean, diff, inv};
        onnx_release_all(tmp, 4);
        return onnx_fail(c);
    }
    tide_tensor *norm = tide_mul(diff, inv), *nd = norm ? tide_cast(norm, dt) : NULL;
    tide_tensor *scaled = nd ? tide_mul(nd, c->in[1]) : NULL;
    tide_tensor *y = scaled && c->nin > 2 && c->in[2] ? tide_add(scaled, c->in[2])
                                                      : tide_retain(scaled);
    tide_tensor *tmp[] = {xs, diff, norm, nd, scaled};
    onnx_release_all(tmp, 5);
    c->out[0] = y;
    if (c->nout > 1)
        c->out[1] = tide_retain(mean);
    if (c->nout > 2)
        c->out[2] = tide_retain(inv);
    tide_release(mean);
    tide_release(inv);
    return y ? 0 : onnx_fail(c);
}

/* The sum of x^2 over the `size` channels around each one (channel dim 1). */
static tide_tensor *channel_window_sum(const tide_tensor *x, int64_t size)
{
    int rank = tide_ndim(x);
    int64_t pads[16] = {0}, c = tide_shape(x)[1];
    pads[2 * (rank - 2)] = (size - 1) / 2; /* tide_pad's last pair is dim 1 */
    pads[2 * (rank - 2) + 1] = size - 1 - (size - 1) / 2;
    tide_tensor *sq = tide_mul(x, x), *p = sq ? tide_pad(sq, pads, 2 * (rank - 1), 0.0) : NULL;
    tide_tensor *acc = NULL;
    for (int64_t k = 0; p && k < size; k++) {
        tide_tensor *s = tide_slice(p, 1, k, k + c, 1);
        tide_tensor *next = !s ? NULL : acc ? tide_add(acc, s) : tide_contiguous(s);
        tide_release(s);
        tide_release(acc);
        if (!(acc = next))
            break;
    }
    tide_release(sq);
    tide_release(p);
    return acc;
}

static int run_lrn(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int64_t size = onnx_attr_int(c->node, "size", 0);
    if (tide_ndim(x) < 3 || tide_ndim(x) > 8 || size < 1 || size > 4096)
        return onnx_error(c, "needs X of 3 to 8 dims and size in [1, 4096] (X has %d dims, "
                          "size %lld)", tide_ndim(x), (long long)size);
    if (!is_float(x))
        return onnx_unsupported(c, "a %s input", tide_dtype_name(tide_get_dtype(x)));
    double alpha = onnx_attr_float(c->node, "alpha", 1e-4f);
    double beta = onnx_attr_float(c->node, "beta", 0.75f), bias = onnx_attr_float(c->node, "bias", 1.0f);
    tide_tensor *sum = channel_window_sum(x, size);
    tide_tensor *sc = sum ? tide_mul_scalar(sum, alpha / (double)size) : NULL;
    tide_tensor *b = sc ? tide_add_scalar(sc, bias) : NULL;
    tide_tensor *d = b ? tide_pow_scalar(b, beta) : NULL;
    tide_tensor *y = d ? tide_div(x, d) : NULL;
    tide_tensor *tmp[] = {sum, sc, b, d};
    onnx_release_all(tmp, 4);
    return onnx_set(c, y);
}

/* (x - mean) / (std + 1e-9) over axes (default N and the spatial dims of NCHW). */
static int run_mvn(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int count, dims[8], rank = tide_ndim(x);
    const int64_t *axes = onnx_attr_ints(c->node, "axes", &count);
    static const int64_t dflt[] = {0, 2, 3};
    if (!axes) {
        axes = dflt;
        count = 3;
    }
    if (count > 8)
        return onnx_error(c, "axes has %d entries (at most 8)", count);
    for (int i = 0; i < count; i++)
        if (onnx_axis(c, axes[i], rank, &dims[i]))
            return -1;
    tide_tensor *m = tide_mean(x, dims, count, true), *df = m ? tide_sub(x, m) : NULL;
    tide_tensor *sq = df ? tide_mul(df, df) : NULL, *var = sq ? tide_mean(sq, dims, count, true) : NULL;
    tide_tensor *sd = var ? tide_sqrt(var) : NULL, *se = sd ? tide_add_scalar(sd, 1e-9) : NULL;
    tide_tensor *y = se ? tide_div(df, se) : NULL;
    tide_tensor *tmp[] = {m, df, sq, var, sd, se};
    onnx_release_all(tmp, 6);
    return onnx_set(c, y);
}

const onnx_op onnx_ops_norm[] = {
    {"BatchNormalization", 6, 0, 5, 5, check_batch_norm, run_batch_norm, 0},
    {"InstanceNormalization", 6, 0, 3, 3, NULL, run_instance_norm, 0},
    {"LayerNormalization", 17, 0, 2, 3, NULL, run_layer_norm, 0},
    {"LRN", 1, 0, 1, 1, NULL, run_lrn, 0},
    {"MeanVarianceNormalization", 9, 0, 1, 1, NULL, run_mvn, 0},
    {0},
};
