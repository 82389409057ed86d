/*
 * search.c — nonzero, unique, searchsorted, bincount and histc, composites of other ops.
 *
 * nonzero, unique and bincount have a size that depends on the data: each reads one count back
 * to the host (tide_item), then makes its result with ordinary ops at that size. Under
 * tide.jit that read is a graph break: the ops before it run, the count is exact, and tracing
 * goes on after it, so a jitted function never reuses a stale size. (Inside a graph capture,
 * tide_jit_begin, the read is an error, not a wrong answer.)
 * searchsorted compares every value with every boundary (O(values x boundaries) elements; the
 * inputs of searchsorted are usually small), NaN after every number as torch.searchsorted; histc
 * has a fixed size (bins) and reads nothing back.
 */
#include <math.h>
#include <string.h>

#include "nn_common.h"

/* The count of true elements of a bool tensor, read back. */
static int count_true(nn_scope *s, const tide_tensor *mask, int64_t *count)
{
    tide_tensor *n = nn_keep(s, mask ? tide_sum(mask, NULL, 0, false) : NULL);
    if (!n || tide_item_int64(n, count) < 0) {
        nn_check_status(s, -1);
        return -1;
    }
    return 0;
}

/* The flat positions (ascending, int64 [count]) of a 1-D bool mask's true elements: the
 * smallest count keys of where(mask, position, n). */
static tide_tensor *true_positions(nn_scope *s, const tide_tensor *mask, int64_t count)
{
    int64_t n = mask ? tide_numel(mask) : 0;
    tide_tensor *pos = nn_keep(s, tide_arange_on(mask ? tide_device_name(mask) : "cpu", 0,
                                                 (double)n, 1, TIDE_INT64));
    tide_tensor *keys = nn_keep(s, tide_where(mask, pos, nn_keep(s, tide_integer(n))));
    tide_tensor *vals = NULL;
    if (keys)
        nn_check_status(s, tide_topk(keys, count, 0, false, true, &vals, NULL));
    return nn_keep(s, vals);
}

static tide_tensor *nonzero_body(const tide_tensor *x)
{
    if (td_check_tensor("nonzero", "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    int64_t n = tide_numel(x), count = 0;
    tide_tensor *flat = nn_keep(&s, tide_reshape(x, 1, &n));
    tide_tensor *mask = nn_keep(&s, tide_ne(flat, nn_keep(&s, tide_integer(0))));
    if (count_true(&s, mask, &count) < 0)
        return nn_finish(&s, "nonzero", NULL);
    tide_tensor *pos = true_positions(&s, mask, count);
    tide_tensor *cols[TIDE_MAX_DIMS];
    int64_t stride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) { /* coordinate d = (pos / stride) % size */
        tide_tensor *q = nn_keep(&s, tide_floor_divide(pos, nn_keep(&s, tide_integer(stride))));
        cols[d] = nn_keep(&s, tide_remainder(q, nn_keep(&s, tide_integer(x->shape[d]))));
        stride *= x->shape[d];
    }
    tide_tensor *out;
    if (x->ndim == 0)
        out = nn_keep(&s, tide_zeros_on(tide_device_name(x), 2, (int64_t[]){count, 0}, TIDE_INT64));
    else
        out = nn_keep(&s, s.failed ? NULL : tide_stack(cols, x->ndim, 1));
    return nn_finish(&s, "nonzero", out);
}

tide_tensor *tide_nonzero(const tide_tensor *x)
{
    TD_IN_OP("nonzero", nonzero_body(x));
}

/* ---- unique (flattened, sorted) ------------------------------------------------------------ */

static int unique_body(const tide_tensor *x, tide_tensor **values, tide_tensor **inverse,
                       tide_tensor **counts)
{
    if (td_check_tensor("unique", "input", x) < 0)
        return -1;
    nn_scope s = {0};
    int64_t n = tide_numel(x), count = 0;
    tide_tensor *flat = nn_keep(&s, tide_reshape(x, 1, &n));
    tide_tensor *sorted = NULL, *perm = NULL;
    if (flat)
        nn_check_status(&s, tide_sort(flat, 0, false, true, &sorted, &perm));
    nn_keep(&s, sorted);
    nn_keep(&s, perm);
    /* a new value starts where it differs from the one before (each NaN its own, NaN != NaN) */
    tide_tensor *head = nn_keep(&s, tide_full_on(tide_device_name(x), 1, (int64_t[]){n > 0},
                                                 1, TIDE_BOOL));
    tide_tensor *diff = nn_keep(&s, n > 1 ? tide_ne(nn_keep(&s, tide_slice(sorted, 0, 1, n, 1)),
                                                    nn_keep(&s, tide_slice(sorted, 0, 0, n - 1, 1)))
                                          : tide_zeros_on(tide_device_name(x), 1,
                                                          (int64_t[]){0}, TIDE_BOOL));
    tide_tensor *parts[2] = {head, diff};
    tide_tensor *starts = nn_keep(&s, s.failed ? NULL : tide_cat(parts, 2, 0));
    if (count_true(&s, starts, &count) < 0)
        return nn_check_status(&s, -1), nn_finish(&s, "unique", NULL), -1;
    tide_tensor *at = true_positions(&s, starts, count);
    tide_tensor *vals = nn_keep(&s, tide_gather(sorted, 0, at));
    tide_tensor *group = NULL, *inv = NULL, *cnt = NULL;
    if (inverse || counts) /* each sorted element's value number: starts so far, less one */
        group = nn_keep(&s, tide_sub(nn_keep(&s, tide_cumsum(starts, 0)),
                                     nn_keep(&s, tide_integer(1))));
    if (inverse) { /* element perm[i] of x has value number group[i] */
        tide_tensor *z = nn_keep(&s, tide_zeros_on(tide_device_name(x), 1, &n, TIDE_INT64));
        tide_tensor *flat_inv = nn_keep(&s, tide_scatter_add(z, 0, perm, group));
        inv = nn_keep(&s, flat_inv ? tide_reshape(flat_inv, x->ndim, x->shape) : NULL);
    }
    if (counts) {
        tide_tensor *z = nn_keep(&s, tide_zeros_on(tide_device_name(x), 1, &count, TIDE_INT64));
        tide_tensor *ones = nn_keep(&s, tide_full_on(tide_device_name(x), 1, &n, 1, TIDE_INT64));
        cnt = nn_keep(&s, tide_scatter_add(z, 0, group, ones));
    }
    tide_tensor *i = inverse && !s.failed ? tide_retain(inv) : NULL;
    tide_tensor *c = counts && !s.failed ? tide_retain(cnt) : NULL;
    *values = nn_finish(&s, "unique", vals);
    if (!*values) {
        tide_release(i);
        tide_release(c);
        return -1;
    }
    if (inverse)
        *inverse = i;
    if (counts)
        *counts = c;
    return 0;
}

int tide_unique(const tide_tensor *x, bool sorted, tide_tensor **values, tide_tensor **inverse,
                tide_tensor **counts)
{
    (void)sorted; /* always sorted, which PyTorch's CPU unique also does either way */
    *values = NULL;
    if (inverse)
        *inverse = NULL;
    if (counts)
        *counts = NULL;
    const char *previous = td_op_enter("unique");
    int rc = unique_body(x, values, inverse, counts);
    td_op_leave(previous);
    return rc;
}

/* ---- searchsorted -------------------------------------------------------------------------- */

/* x's NaNs (bool), false everywhere for integers. */
static tide_tensor *is_nan(nn_scope *s, const tide_tensor *x) { return nn_keep(s, tide_ne(x, x)); }

static tide_tensor *searchsorted_body(const tide_tensor *seq, const tide_tensor *values,
                                      bool out_int32, bool right, const tide_tensor *sorter)
{
    const char *op = "searchsorted";
    char b1[160], b2[160];
    if (td_check_tensor(op, "sorted_sequence", seq) < 0 || td_check_tensor(op, "values", values) < 0)
        return NULL;
    bool leading_match = seq->ndim >= 1 && (seq->ndim == 1 || (values->ndim == seq->ndim &&
        memcmp(seq->shape, values->shape, sizeof(int64_t) * (seq->ndim - 1)) == 0));
    if (!leading_match)
        return td_error("%s: sorted_sequence %s must be 1-D or share all but its last dim with "
                        "values %s", op, nn_describe(b1, sizeof b1, seq),
                        nn_describe(b2, sizeof b2, values)), NULL;
    if (seq->dtype == TIDE_BOOL || values->dtype == TIDE_BOOL)
        return td_error("%s: bool has no order (sorted_sequence %s, values %s)", op,
                        nn_describe(b1, sizeof b1, seq), nn_describe(b2, sizeof b2, values)), NULL;
    nn_scope s = {0};
    const tide_tensor *b = seq;
    if (sorter) {
        if (sorter->ndim != seq->ndim || memcmp(sorter->shape, seq->shape,
                                                sizeof(int64_t) * seq->ndim) != 0) {
            td_error("%s: sorter %s must have sorted_sequence's shape %s", op,
                     nn_describe(b1, sizeof b1, sorter), nn_describe(b2, sizeof b2, seq));
            return NULL;
        }
        b = nn_keep(&s, tide_gather(seq, seq->ndim - 1, sorter));
    }
    /* boundaries [.., 1, M] (or [M]) against values [.., N, 1]: count those before each value */
    tide_tensor *bb = nn_keep(&s, seq->ndim == 1 ? tide_retain((tide_tensor *)b)
                                                 : tide_unsqueeze(b, -2));
    tide_tensor *vv = nn_keep(&s, tide_unsqueeze(values, -1));
    /* boundary < value (<= right), NaN the largest boundary; a NaN value goes after every
     * boundary (PyTorch's binary search: no comparison with NaN holds) */
    tide_tensor *cmp = nn_keep(&s, right ? tide_le(bb, vv) : tide_lt(bb, vv));
    tide_tensor *before = nn_keep(&s, tide_logical_or(cmp, is_nan(&s, vv)));
    tide_tensor *out = nn_keep(&s, tide_sum(before, (const int[]){-1}, 1, false));
    if (out_int32)
        out = nn_keep(&s, tide_cast(out, TIDE_INT32));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_searchsorted(const tide_tensor *sorted_sequence, const tide_tensor *values,
                               bool out_int32, bool right, const tide_tensor *sorter)
{
    TD_IN_OP("searchsorted", searchsorted_body(sorted_sequence, values, out_int32, right, sorter));
}

/* ---- bincount ------------------------------------------------------------------------------ */

static tide_tensor *bincount_body(const tide_tensor *x, const tide_tensor *weights,
                                  int64_t minlength)
{
    const char *op = "bincount";
    char b1[160], b2[160];
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (x->ndim != 1 || tide_dtype_is_floating((tide_dtype)x->dtype) || x->dtype == TIDE_BOOL)
        return td_error("%s: input %s must be a 1-D integer tensor", op,
                        nn_describe(b1, sizeof b1, x)), NULL;
    if (weights && (weights->ndim != 1 || weights->shape[0] != x->shape[0]))
        return td_error("%s: weights %s must be 1-D with input's length (input %s)", op,
                        nn_describe(b1, sizeof b1, weights), nn_describe(b2, sizeof b2, x)), NULL;
    if (minlength < 0)
        return td_error("%s: minlength must be >= 0, got %lld", op, (long long)minlength), NULL;
    nn_scope s = {0};
    int64_t size = minlength, lo = 0, hi = -1;
    if (x->shape[0] > 0) { /* the result's size is the data's: read back (a graph break) */
        tide_tensor *mn = nn_keep(&s, tide_min(x, NULL, 0, false));
        tide_tensor *mx = nn_keep(&s, tide_max(x, NULL, 0, false));
        if (!mn || !mx || tide_item_int64(mn, &lo) < 0 || tide_item_int64(mx, &hi) < 0)
            return nn_check_status(&s, -1), nn_finish(&s, op, NULL);
        if (lo < 0) {
            nn_finish(&s, op, NULL);
            return td_error("%s: input %s holds a negative value (%lld)", op,
                            nn_describe(b1, sizeof b1, x), (long long)lo), NULL;
        }
        size = hi + 1 > minlength ? hi + 1 : minlength;
    }
    tide_dtype dt = !weights ? TIDE_INT64
                    : weights->dtype == TIDE_FLOAT32 ? TIDE_FLOAT32 : TIDE_FLOAT64;
    const char *dev = tide_device_name(x);
    tide_tensor *z = nn_keep(&s, tide_zeros_on(dev, 1, &size, dt));
    tide_tensor *w = nn_keep(&s, weights ? tide_cast(weights, dt)
                                         : tide_full_on(dev, 1, x->shape, 1, TIDE_INT64));
    tide_tensor *out = nn_keep(&s, tide_scatter_add(z, 0, x, w));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_bincount(const tide_tensor *x, const tide_tensor *weights, int64_t minlength)
{
    TD_IN_OP("bincount", bincount_body(x, weights, minlength));
}

/* ---- histc --------------------------------------------------------------------------------- */

/* The range's ends as 0-dim tensors of x's dtype: (min, max), or x's own min and max when they
 * are equal, widened by 1 each way when those are equal too (as torch.histc). */
static int histc_range(nn_scope *s, const tide_tensor *x, double min, double max,
                       tide_tensor **lo, tide_tensor **hi)
{
    tide_dtype dt = (tide_dtype)x->dtype;
    if (min != max || tide_numel(x) == 0) {
        *lo = nn_keep(s, tide_scalar(min == max ? min - 1 : min, dt));
        *hi = nn_keep(s, tide_scalar(min == max ? max + 1 : max, dt));
        return 0;
    }
    tide_tensor *a = nn_keep(s, tide_min(x, NULL, 0, false));
    tide_tensor *b = nn_keep(s, tide_max(x, NULL, 0, false));
    tide_tensor *same = nn_keep(s, tide_eq(a, b));
    *lo = nn_keep(s, tide_where(same, nn_keep(s, tide_sub_scalar(a, 1)), a));
    *hi = nn_keep(s, tide_where(same, nn_keep(s, tide_add_scalar(b, 1)), b));
    return 0;
}

static tide_tensor *histc_body(const tide_tensor *x, int64_t bins, double min, double max)
{
    const char *op = "histc";
    if (nn_check_floating(op, "input", x) < 0)
        return NULL;
    if (bins <= 0)
        return td_error("%s: bins must be > 0, got %lld", op, (long long)bins), NULL;
    if (!(min <= max) || isinf(min) || isinf(max))
        return td_error("%s: min %g must be finite and not above max %g", op, min, max), NULL;
    nn_scope s = {0};
    int64_t n = tide_numel(x);
    tide_tensor *flat = nn_keep(&s, tide_reshape(x, 1, &n));
    tide_tensor *lo = NULL, *hi = NULL;
    if (flat)
        histc_range(&s, flat, min, max, &lo, &hi);
    tide_tensor *in = nn_keep(&s, tide_logical_and(nn_keep(&s, tide_ge(flat, lo)),
                                                   nn_keep(&s, tide_le(flat, hi))));
    /* the bin: floor((x - lo) / (hi - lo) * bins), x == hi in the last one */
    tide_tensor *t = nn_keep(&s, tide_div(nn_keep(&s, tide_sub(flat, lo)), nn_keep(&s, tide_sub(hi, lo))));
    tide_tensor *pos = nn_keep(&s, tide_mul_scalar(t, (double)bins));
    tide_tensor *zero = nn_keep(&s, tide_scalar(0, (tide_dtype)x->dtype));
    pos = nn_keep(&s, tide_where(in, pos, zero)); /* NaN and out-of-range: bin 0, weight 0 */
    tide_tensor *bin = nn_keep(&s, pos ? tide_cast(pos, TIDE_INT64) : NULL);
    bin = nn_keep(&s, tide_minimum(bin, nn_keep(&s, tide_integer(bins - 1))));
    tide_tensor *w = nn_keep(&s, in ? tide_cast(in, (tide_dtype)x->dtype) : NULL);
    tide_tensor *z = nn_keep(&s, tide_zeros_on(tide_device_name(x), 1, &bins, (tide_dtype)x->dtype));
    tide_tensor *out = nn_keep(&s, tide_scatter_add(z, 0, bin, w));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_histc(const tide_tensor *x, int64_t bins, double min, double max)
{
    TD_IN_OP("histc", histc_body(x, bins, min, max));
}
