/*
 * onnx_ops_loss.c — ONNX's softmax family (Softmax, LogSoftmax, Hardmax) and the losses built on
 * it (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
 */
#include <string.h>

#include "onnx_internal.h"

typedef tide_tensor *(*along_fn)(const tide_tensor *x, int dim);

/* Hardmax along dim: 1 at the first largest element, 0 elsewhere (x's dtype). */
static tide_tensor *hardmax(const tide_tensor *x, int dim)
{
    if (tide_ndim(x) == 0) /* one element: the largest */
        return tide_ones_on(tide_device_name(x), 0, NULL, tide_get_dtype(x));
    tide_tensor *pos = tide_argmax(x, dim, false);
    tide_tensor *hot = pos ? tide_one_hot(pos, tide_shape(x)[dim]) : NULL;
    int last = tide_ndim(x) - 1;
    tide_tensor *moved = hot ? tide_movedim(hot, 1, &last, &dim) : NULL;
    tide_tensor *out = moved ? tide_cast(moved, tide_get_dtype(x)) : NULL;
    tide_release(pos);
    tide_release(hot);
    tide_release(moved);
    return out;
}

/* Opset 13 on: along the one axis (default -1). Before 13: x flattened at axis (default 1) into
 * [outer, inner], the op along inner, the result reshaped back. */
static int run_along(onnx_ctx *c, along_fn fn)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), axis;
    bool flatten = c->m->opset < 13;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", flatten ? 1 : -1), rank, &axis) < 0)
        return -1;
    if (!flatten)
        return onnx_set(c, fn(x, axis));
    int64_t flat[2] = {1, 1};
    for (int d = 0; d < rank; d++)
        flat[d < axis ? 0 : 1] *= tide_shape(x)[d];
    tide_tensor *x2 = tide_reshape(x, 2, flat);
    tide_tensor *y2 = x2 ? fn(x2, 1) : NULL;
    tide_tensor *out = y2 ? tide_reshape(y2, rank, tide_shape(x)) : NULL;
    tide_release(x2);
    tide_release(y2);
    return onnx_set(c, out);
}

static int run_softmax(onnx_ctx *c) { return run_along(c, tide_softmax); }
static int run_log_softmax(onnx_ctx *c) { return run_along(c, tide_log_softmax); }
static int run_hardmax(onnx_ctx *c) { return run_along(c, hardmax); }

/* reduction is none, sum or mean. */
static int check_loss(const onnx_node *n, char *why, size_t size)
{
    char buf[16];
    const char *r = onnx_attr_string(n, "reduction", "mean", buf, sizeof buf);
    if (strcmp(r, "none") && strcmp(r, "sum") && strcmp(r, "mean")) {
        snprintf(why, size, "reduction '%s' (none, sum or mean)", r);
        return 1;
    }
    return 0;
}

/* The per-element weight of each target: weight[target] (1 without weights), 0 where the
 * target is ignore_index. Ignored targets become 0 in *safe, so they index nothing out of range. */
static int target_weights(onnx_ctx *c, const tide_tensor *target, const tide_tensor *weight,
                          tide_dtype dt, tide_tensor **safe, tide_tensor **w)
{
    const Onnx__AttributeProto *ii = onnx_attr(c->node, "ignore_index");
    tide_tensor *t64 = tide_cast(target, TIDE_INT64), *ignored = NULL;
    if (t64 && ii && ii->has_i) {
        tide_tensor *value = tide_integer(ii->i);
        ignored = value ? tide_eq(t64, value) : NULL;
        *safe = ignored ? tide_masked_fill(t64, ignored, 0.0) : NULL;
        tide_release(value);
    } else
        *safe = tide_retain(t64);
    tide_tensor *per = NULL;
    if (*safe)
        per = weight ? tide_take(weight, *safe)
                     : tide_ones_on(tide_device_name(target), tide_ndim(target),
                                    tide_shape(target), dt);
    *w = per && ignored ? tide_masked_fill(per, ignored, 0.0) : tide_retain(per);
    tide_release(per);
    tide_release(ignored);
    tide_release(t64);
    return *w ? 0 : onnx_fail(c);
}

/* log_probs [N, C, d...], target [N, d...] and weight (may be NULL) [C]. */
static int check_shapes(onnx_ctx *c, const tide_tensor *log_probs, const tide_tensor *target,
                        const tide_tensor *weight)
{
    int rank = tide_ndim(log_probs);
    const int64_t *ls = tide_shape(log_probs), *ts = tide_shape(target);
    bool ok = rank >= 2 && tide_ndim(target) == rank - 1 && ts[0] == ls[0];
    for (int d = 2; ok && d < rank; d++)
        ok = ts[d - 1] == ls[d];
    if (!ok) {
        char a[160], b[160];
        return onnx_error(c, "input [N, C, d...] and target [N, d...] do not match: %s and %s",
                          td_shape_str(a, sizeof a, rank, ls),
                          td_shape_str(b, sizeof b, tide_ndim(target), ts));
    }
    if (weight && (tide_ndim(weight) != 1 || tide_shape(weight)[0] != ls[1])) {
        char a[160];
        return onnx_error(c, "the weight must be [C] = [%lld]; it is %s", (long long)ls[1],
                          td_shape_str(a, sizeof a, tide_ndim(weight), tide_shape(weight)));
    }
    tide_dtype td = tide_get_dtype(target);
    if (td != TIDE_INT64 && td != TIDE_INT32)
        return onnx_error(c, "the target is %s; it must be int32 or int64", tide_dtype_name(td));
    return 0;
}

/* -log_probs[n, target[n, d...], d...] * weight, reduced as the node's reduction says: mean
 * divides by the sum of the weights (the count of targets not ignored when unweighted). */
static tide_tensor *nll(onnx_ctx *c, const tide_tensor *log_probs, const tide_tensor *target,
                        const tide_tensor *weight)
{
    tide_tensor *safe = NULL, *w = NULL;
    if (check_shapes(c, log_probs, target, weight) < 0 ||
        target_weights(c, target, weight, tide_get_dtype(log_probs), &safe, &w) < 0) {
        tide_release(safe);
        return NULL;
    }
    char buf[16];
    const char *r = onnx_attr_string(c->node, "reduction", "mean", buf, sizeof buf);
    tide_tensor *index = tide_unsqueeze(safe, 1);
    tide_tensor *picked = index ? tide_gather(log_probs, 1, index) : NULL;
    tide_tensor *flat = picked ? tide_squeeze(picked, 1) : NULL;
    tide_tensor *weighted = flat ? tide_mul(flat, w) : NULL;
    tide_tensor *loss = weighted ? tide_neg(weighted) : NULL, *out = NULL;
    if (loss && !strcmp(r, "none"))
        out = tide_retain(loss);
    else if (loss) {
        tide_tensor *total = tide_sum(loss, NULL, 0, false);
        tide_tensor *wsum = total && !strcmp(r, "mean") ? tide_sum(w, NULL, 0, false) : NULL;
        out = wsum ? tide_div(total, wsum) : tide_retain(total);
        tide_release(total);
        tide_release(wsum);
    }
    tide_tensor *tmp[] = {safe, w, index, picked, flat, weighted, loss};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tide_release(tmp[i]);
    if (!out)
        onnx_fail(c);
    return out;
}

static const tide_tensor *optional_input(const onnx_ctx *c, int k)
{
    return k < c->nin ? c->in[k] : NULL;
}

static int run_nll_loss(onnx_ctx *c)
{
    tide_tensor *out = nll(c, c->in[0], c->in[1], optional_input(c, 2));
    if (!out)
        return -1;
    c->out[0] = out;
    return 0;
}

/* SoftmaxCrossEntropyLoss: NLL of log_softmax over the classes (dim 1); output 1, when asked
 * for, is that log_softmax. */
static int run_sce_loss(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) < 2)
        return onnx_error(c, "the scores have %d dims; they must be [N, C, d...]",
                          tide_ndim(c->in[0]));
    tide_tensor *log_probs = tide_log_softmax(c->in[0], 1);
    if (!log_probs)
        return onnx_fail(c);
    tide_tensor *out = nll(c, log_probs, c->in[1], optional_input(c, 2));
    if (!out) {
        tide_release(log_probs);
        return -1;
    }
    c->out[0] = out;
    if (c->nout > 1)
        c->out[1] = log_probs;
    else
        tide_release(log_probs);
    return 0;
}

const onnx_op onnx_ops_loss[] = {
    {"Softmax", 1, 0, 1, 1, NULL, run_softmax, 0}, /* flattens before 13 */
    {"LogSoftmax", 1, 0, 1, 1, NULL, run_log_softmax, 0}, /* flattens before 13 */
    {"Hardmax", 1, 0, 1, 1, NULL, run_hardmax, 0}, /* flattens before 13 */
    {"NegativeLogLikelihoodLoss", 12, 0, 2, 3, check_loss, run_nll_loss, 0},
    {"SoftmaxCrossEntropyLoss", 12, 0, 2, 3, check_loss, run_sce_loss, 0},
    {0},
};
