/*
 * nn_loss.c — cross_entropy, nll_loss, mse_loss and binary_cross_entropy_with_logits.
 *
 * Class-index losses take logits or log-probabilities [N, C], [N, C, d1, ...] or [C], with int64
 * (or int32) targets [N], [N, d1, ...] or []. A target equal to ignore_index contributes 0 and is
 * left out of the mean's denominator (all ignored: 0/0 = NaN, as PyTorch). Ignored positions
 * gather class 0 and are then masked with where, not multiplied, so a -inf log-probability there
 * cannot turn into NaN. Any other index outside [0, C) is reported by gather's bounds check.
 */
#include <math.h>
#include <stdio.h>

#include "autocast.h"
#include "nn_common.h"

/* The checks both class-index losses share; the class dim, or -1. */
static int check_class_target(const char *op, const char *input_name, const tide_tensor *input,
                              const tide_tensor *target)
{
    if (nn_check_floating(op, input_name, input) < 0 || td_check_tensor(op, "target", target) < 0)
        return -1;
    char di[200], dt[200];
    tide_dtype tdt = tide_get_dtype(target);
    if (tdt != TIDE_INT64 && tdt != TIDE_INT32)
        return td_error("%s: the target must hold class indices as int64, got %s%s", op,
                        nn_describe(dt, sizeof dt, target),
                        tide_dtype_is_floating(tdt) ? " (class-probability targets are not "
                                                      "supported)"
                                                    : "");
    int nd = tide_ndim(input);
    const int64_t *is = tide_shape(input), *ts = tide_shape(target);
    if (nd == 0)
        return td_error("%s: %s must be [C], [N, C] or [N, C, d...], got %s", op, input_name,
                        nn_describe(di, sizeof di, input));
    bool fits = tide_ndim(target) == (nd == 1 ? 0 : nd - 1);
    for (int d = 0; fits && nd > 1 && d < nd - 1; d++)
        fits = ts[d] == is[d == 0 ? 0 : d + 1];
    if (!fits) {
        int64_t want[TIDE_MAX_DIMS];
        for (int d = 0; nd > 1 && d < nd - 1; d++)
            want[d] = is[d == 0 ? 0 : d + 1];
        char s1[160], s2[160];
        return td_error("%s: target shape %s does not match %s %s (expected target shape %s)", op,
                        td_shape_str(s1, sizeof s1, tide_ndim(target), ts), input_name,
                        td_shape_str(s2, sizeof s2, nd, is),
                        td_shape_str(di, sizeof di, nd == 1 ? 0 : nd - 1, want));
    }
    return nd == 1 ? 0 : 1;
}

/* The per-position negative log-likelihood -input[target] (0 where ignored) and the mask of
 * positions that count; both target-shaped and held by s. */
static tide_tensor *picked_nll(nn_scope *s, const tide_tensor *log_probs, const tide_tensor *target,
                               int class_dim, int64_t ignore_index, tide_tensor **valid_out)
{
    tide_tensor *t64 = nn_keep(s, tide_cast(target, TIDE_INT64));
    tide_tensor *ign = nn_keep(s, tide_integer(ignore_index));
    tide_tensor *valid = nn_keep(s, tide_ne(t64, ign));
    tide_tensor *zero_i = nn_keep(s, tide_integer(0));
    tide_tensor *safe = nn_keep(s, tide_where(valid, t64, zero_i));
    tide_tensor *index = nn_keep(s, tide_unsqueeze(safe, class_dim));
    tide_tensor *picked = nn_keep(s, tide_gather(log_probs, class_dim, index));
    tide_tensor *squeezed = nn_keep(s, tide_squeeze(picked, class_dim));
    tide_tensor *neg = nn_keep(s, tide_neg(squeezed));
    tide_tensor *zero = nn_keep(s, tide_number(0));
    *valid_out = valid;
    return nn_keep(s, tide_where(valid, neg, zero));
}

/* Reduces a per-position loss; the mean divides by the number of positions not ignored. */
static tide_tensor *reduce_class_loss(nn_scope *s, tide_tensor *loss, tide_tensor *valid,
                                      tide_reduction reduction)
{
    if (reduction == TIDE_REDUCTION_NONE)
        return loss;
    tide_tensor *sum = nn_keep(s, tide_sum(loss, NULL, 0, false));
    if (reduction == TIDE_REDUCTION_SUM)
        return sum;
    tide_tensor *count = nn_keep(s, tide_sum(valid, NULL, 0, false));
    return nn_keep(s, tide_div(sum, count));
}

static tide_tensor *nll_loss_body(const tide_tensor *log_probs, const tide_tensor *target,
                                  tide_reduction reduction, int64_t ignore_index)
{
    const char *op = "nll_loss";
    int cdim = check_class_target(op, "log_probs", log_probs, target);
    if (cdim < 0 || nn_check_reduction(op, reduction) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *valid = NULL;
    tide_tensor *loss = picked_nll(&s, log_probs, target, cdim, ignore_index, &valid);
    tide_tensor *out = reduce_class_loss(&s, loss, valid, reduction);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_nll_loss(const tide_tensor *log_probs, const tide_tensor *target,
                           tide_reduction reduction, int64_t ignore_index)
{
    TD_IN_AUTOCAST_OP("nll_loss", TD_AUTOCAST_FLOAT32,
                      nll_loss_body(log_probs, target, reduction, ignore_index), 1, &log_probs);
}

/*
 * With label smoothing ls the target distribution is (1 - ls) one-hot + ls/C uniform, so the
 * per-position loss is (1 - ls) * nll + (ls / C) * (-sum_c log_softmax_c), both 0 where ignored:
 * PyTorch's formula, whose mean also divides by the positions not ignored.
 */
static tide_tensor *cross_entropy_body(const tide_tensor *logits, const tide_tensor *target,
                                       tide_reduction reduction, double label_smoothing,
                                       int64_t ignore_index)
{
    const char *op = "cross_entropy";
    int cdim = check_class_target(op, "logits", logits, target);
    if (cdim < 0 || nn_check_reduction(op, reduction) < 0)
        return NULL;
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        td_error("%s: label_smoothing must be in [0, 1], got %g", op, label_smoothing);
        return NULL;
    }
    int64_t classes = tide_shape(logits)[cdim];
    if (classes == 0) {
        char d[200];
        td_error("%s: the logits %s have no classes (dim %d is empty)", op,
                 nn_describe(d, sizeof d, logits), cdim);
        return NULL;
    }
    nn_scope s = {0};
    tide_tensor *lsm = nn_keep(&s, tide_log_softmax(logits, cdim));
    tide_tensor *valid = NULL;
    tide_tensor *loss = picked_nll(&s, lsm, target, cdim, ignore_index, &valid);
    if (label_smoothing > 0) {
        tide_tensor *total = nn_keep(&s, tide_sum(lsm, &cdim, 1, false));
        tide_tensor *zero = nn_keep(&s, tide_number(0));
        tide_tensor *smooth = nn_keep(&s, tide_where(valid, total, zero));
        tide_tensor *a = nn_keep(&s, tide_mul_scalar(loss, 1 - label_smoothing));
        tide_tensor *b = nn_keep(&s, tide_mul_scalar(smooth, -label_smoothing / (double)classes));
        loss = nn_keep(&s, tide_add(a, b));
    }
    tide_tensor *out = reduce_class_loss(&s, loss, valid, reduction);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_cross_entropy(const tide_tensor *logits, const tide_tensor *target,
                                tide_reduction reduction, double label_smoothing,
                                int64_t ignore_index)
{
    /* target is class indices (integers, left alone) or probabilities (cast like logits). */
    TD_IN_AUTOCAST_OP("cross_entropy", TD_AUTOCAST_FLOAT32,
                      cross_entropy_body(logits, target, reduction, label_smoothing, ignore_index),
                      2, &logits, &target);
}

/* The checks of the elementwise losses: both floating, the same shape. */
static int check_pair(const char *op, const char *input_name, const tide_tensor *input,
                      const tide_tensor *target, tide_reduction reduction)
{
    if (nn_check_floating(op, input_name, input) < 0 ||
        nn_check_floating(op, "target", target) < 0 || nn_check_reduction(op, reduction) < 0)
        return -1;
    return nn_check_shape(op, "target", target, tide_ndim(input), tide_shape(input));
}

static tide_tensor *mse_loss_body(const tide_tensor *input, const tide_tensor *target,
                                  tide_reduction reduction)
{
    if (check_pair("mse_loss", "input", input, target, reduction) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *diff = nn_keep(&s, tide_sub(input, target));
    tide_tensor *sq = nn_keep(&s, tide_mul(diff, diff));
    tide_tensor *out = nn_reduce(&s, sq, reduction);
    return nn_finish(&s, "mse_loss", out);
}

tide_tensor *tide_mse_loss(const tide_tensor *input, const tide_tensor *target,
                           tide_reduction reduction)
{
    TD_IN_AUTOCAST_OP("mse_loss", TD_AUTOCAST_FLOAT32, mse_loss_body(input, target, reduction), 2, &input,
                      &target);
}

/* log(1 + u) for u >= 0, accurate when u is tiny (Kahan's trick: log(w) * u / (w - 1) with
 * w = 1 + u rounded corrects for the rounding of w). The w == 1 branch divides by 1 instead of
 * 0, so neither branch of the where is ever NaN and the gradient stays clean. */
static tide_tensor *log1p_nonneg(nn_scope *s, tide_tensor *u)
{
    tide_tensor *w = nn_keep(s, tide_add_scalar(u, 1));
    tide_tensor *one = nn_keep(s, tide_number(1));
    tide_tensor *exact = nn_keep(s, tide_eq(w, one));
    tide_tensor *wm1 = nn_keep(s, tide_sub_scalar(w, 1));
    tide_tensor *den = nn_keep(s, tide_where(exact, one, wm1));
    tide_tensor *ratio = nn_keep(s, tide_div(u, den));
    tide_tensor *lw = nn_keep(s, tide_log(w));
    tide_tensor *corrected = nn_keep(s, tide_mul(lw, ratio));
    return nn_keep(s, tide_where(exact, u, corrected));
}

/* max(x, 0) - x*y + log(1 + exp(-|x|)): exp never overflows, whatever the logits. */
static tide_tensor *binary_cross_entropy_with_logits_body(const tide_tensor *logits,
                                                          const tide_tensor *target,
                                                          tide_reduction reduction)
{
    const char *op = "binary_cross_entropy_with_logits";
    if (check_pair(op, "logits", logits, target, reduction) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *pos = nn_keep(&s, tide_relu(logits));
    tide_tensor *xy = nn_keep(&s, tide_mul(logits, target));
    tide_tensor *lin = nn_keep(&s, tide_sub(pos, xy));
    nn_drop(&s, pos);
    nn_drop(&s, xy);
    tide_tensor *ax = nn_keep(&s, tide_abs(logits));
    tide_tensor *nax = nn_keep(&s, tide_neg(ax));
    tide_tensor *e = nn_keep(&s, tide_exp(nax));
    tide_tensor *softplus = log1p_nonneg(&s, e);
    tide_tensor *loss = nn_keep(&s, tide_add(lin, softplus));
    tide_tensor *out = nn_reduce(&s, loss, reduction);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_binary_cross_entropy_with_logits(const tide_tensor *logits,
                                                   const tide_tensor *target,
                                                   tide_reduction reduction)
{
    TD_IN_AUTOCAST_OP("binary_cross_entropy_with_logits", TD_AUTOCAST_FLOAT32,
                      binary_cross_entropy_with_logits_body(logits, target, reduction), 2,
                      &logits, &target);
}
