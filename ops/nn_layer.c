/*
 * nn_layer.c — linear (x @ weight^T + bias, any leading dims: matmul broadcasts them; a float32
 * input may meet a float16/bfloat16 weight, which matmul widens inside the product) and dropout
 * (a Bernoulli keep-mask scaled by 1/(1-p), so the expected value is unchanged, as PyTorch).
 */
#include <math.h>
#include <string.h>

#include "autocast.h"
#include "nn_common.h"

static tide_tensor *linear_body(const tide_tensor *x, const tide_tensor *weight,
                                const tide_tensor *bias)
{
    const char *op = "linear";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "weight", weight) < 0)
        return NULL;
    char dx[200], dw[200], db[200];
    if (tide_ndim(x) < 1 || tide_ndim(weight) != 2 ||
        tide_shape(weight)[1] != tide_shape(x)[tide_ndim(x) - 1]) {
        td_error("%s: the input %s and the weight %s do not fit: the weight must be [out, in] "
                 "with in the input's last dim",
                 op, nn_describe(dx, sizeof dx, x), nn_describe(dw, sizeof dw, weight));
        return NULL;
    }
    /* The one mixed pair: a float32 input with a float16/bfloat16 weight (and a bias of either
     * dtype) gives float32, the weight widened inside the product (linear_half.c). */
    bool half_weight = x->dtype == TIDE_FLOAT32 && td_dtype_is_half(weight->dtype);
    if (!half_weight && weight->dtype != x->dtype) {
        td_error("%s: the weight %s and the input %s must have the same dtype (or a float32 "
                 "input with a float16 or bfloat16 weight)",
                 op, nn_describe(dw, sizeof dw, weight), nn_describe(dx, sizeof dx, x));
        return NULL;
    }
    if (!(half_weight && bias && bias->dtype == weight->dtype) &&
        nn_check_same_dtype(op, "bias", bias, x) < 0)
        return NULL;
    if (bias && (tide_ndim(bias) != 1 || tide_shape(bias)[0] != tide_shape(weight)[0])) {
        td_error("%s: the bias %s must be [out] for the weight %s", op,
                 nn_describe(db, sizeof db, bias), nn_describe(dw, sizeof dw, weight));
        return NULL;
    }
    nn_scope s = {0};
    tide_tensor *wt = nn_keep(&s, tide_transpose(weight, 0, 1));
    tide_tensor *out = nn_keep(&s, tide_matmul(x, wt));
    if (bias)
        out = nn_keep(&s, tide_add(out, bias));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_linear(const tide_tensor *x, const tide_tensor *weight, const tide_tensor *bias)
{
    /* The bias is cast too, so the result stays in the autocast dtype (as PyTorch's linear). */
    TD_IN_AUTOCAST_OP("linear", TD_AUTOCAST_LOWER, linear_body(x, weight, bias), 3, &x, &weight, &bias);
}

static tide_tensor *dropout_body(const tide_tensor *x, double p, bool training)
{
    const char *op = "dropout";
    if (nn_check_floating(op, "input", x) < 0)
        return NULL;
    if (!(p >= 0 && p <= 1)) {
        td_error("%s: probability p must be in [0, 1], got %g", op, p);
        return NULL;
    }
    /* Nothing dropped: the input itself, as PyTorch returns it. */
    if (!training || p == 0 || tide_numel(x) == 0)
        return tide_retain((tide_tensor *)x);
    nn_scope s = {0};
    tide_tensor *out;
    if (p == 1) { /* everything dropped; a product, so the gradient is 0 rather than missing */
        out = nn_keep(&s, tide_mul_scalar(x, 0));
        return nn_finish(&s, op, out);
    }
    tide_tensor *keep_p = nn_keep(&s, td_full_on(x->device, op, x->ndim, x->shape, 1 - p,
                                                 (tide_dtype)x->dtype));
    tide_tensor *mask = nn_keep(&s, tide_bernoulli(keep_p));
    nn_drop(&s, keep_p);
    tide_tensor *scale = nn_keep(&s, tide_div_scalar(mask, 1 - p));
    nn_drop(&s, mask);
    out = nn_keep(&s, tide_mul(x, scale));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_dropout(const tide_tensor *x, double p, bool training)
{
    TD_IN_OP("dropout", dropout_body(x, p, training));
}
