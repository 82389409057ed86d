/*
 * sort.c — sort, argsort, median and quantile.
 *
 * sort is the SORT primitive, which only gives the int64 positions that sort each line (stable,
 * NaN the largest: last ascending, first descending, as torch.sort), and a gather of the values
 * at them, so the values' gradient is gather's: scattered back to where each value came from.
 * median and quantile are composites over a sort: picks of the sorted values by position, so
 * their gradients are gathers too, and the jit traces them (nothing is read back to the host
 * but a quantile tensor's values, which are checked to lie in [0, 1]).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_common.h"

/* The positions sorting x along dim (normalized); bool sorts as uint8 (false before true). */
static tide_tensor *sort_positions(const tide_tensor *x, int d, bool descending)
{
    tide_tensor *in = tide_cast(x, x->dtype == TIDE_BOOL ? TIDE_UINT8 : (tide_dtype)x->dtype);
    if (!in)
        return NULL;
    td_meta meta = {in->ndim, {0}, TIDE_INT64, in->device};
    memcpy(meta.shape, in->shape, sizeof(int64_t) * in->ndim);
    tide_attrs attrs = {.nints = 2, .ints = {d, descending}};
    tide_tensor *idx = td_dispatch(TIDE_OP_SORT, &meta, &in, 1, &attrs);
    tide_release(in);
    return idx;
}

/* dim normalized against x (a 0-dim x takes 0 and -1), or -1 with an error naming op. */
static int sort_dim(const char *op, const tide_tensor *x, int dim)
{
    if (td_check_tensor(op, "input", x) < 0)
        return -1;
    return nn_normalize_dim(op, dim, x->ndim);
}

static int sort_body(const tide_tensor *x, int dim, bool descending, tide_tensor **values,
                     tide_tensor **indices)
{
    int d = sort_dim("sort", x, dim);
    if (d < 0)
        return -1;
    tide_tensor *idx = sort_positions(x, d, descending);
    tide_tensor *val = idx && values ? tide_gather(x, d, idx) : NULL;
    if (!idx || (values && !val)) {
        tide_release(idx);
        return -1;
    }
    if (values)
        *values = val;
    if (indices)
        *indices = idx;
    else
        tide_release(idx);
    return 0;
}

int tide_sort(const tide_tensor *x, int dim, bool descending, bool stable, tide_tensor **values,
              tide_tensor **indices)
{
    (void)stable; /* the kernel is always stable, which satisfies either request */
    if (values)
        *values = NULL;
    if (indices)
        *indices = NULL;
    const char *previous = td_op_enter("sort");
    int rc = sort_body(x, dim, descending, values, indices);
    td_op_leave(previous);
    return rc;
}

tide_tensor *tide_argsort(const tide_tensor *x, int dim, bool descending, bool stable)
{
    tide_tensor *idx = NULL;
    (void)stable;
    const char *previous = td_op_enter("argsort");
    int d = sort_dim("argsort", x, dim);
    if (d >= 0)
        idx = sort_positions(x, d, descending);
    td_op_leave(previous);
    return idx;
}

/* ---- median: the lower median of each line, or the first NaN's (as torch.median) ---------- */

static int median_body(const tide_tensor *x, int dim, bool keepdim, tide_tensor **values,
                       tide_tensor **indices)
{
    const char *op = "median";
    char buf[160];
    if (td_check_tensor(op, "input", x) < 0)
        return -1;
    if (dim == TIDE_ALL_DIMS && tide_numel(x) == 0 &&
        tide_dtype_is_floating((tide_dtype)x->dtype)) { /* the median of nothing: NaN, as PyTorch */
        *values = td_full_on(x->device, op, 0, NULL, NAN, (tide_dtype)x->dtype);
        return *values ? 0 : -1;
    }
    nn_scope s = {0};
    const tide_tensor *in = x;
    int d = 0;
    if (dim != TIDE_ALL_DIMS && (d = nn_normalize_dim(op, dim, x->ndim)) < 0)
        return -1;
    bool squeeze = !keepdim || x->ndim == 0;
    if (dim == TIDE_ALL_DIMS || x->ndim == 0) { /* one line of every element, a 0-dim result */
        int64_t n = tide_numel(x);
        in = nn_keep(&s, tide_reshape(x, 1, &n));
        squeeze = true;
    }
    int64_t n = in ? in->shape[d] : 1;
    if (in && n == 0) {
        nn_finish(&s, op, NULL);
        return td_error("%s: input %s has no element along dim %d", op,
                        nn_describe(buf, sizeof buf, x), d);
    }
    /* sorted ascending, NaNs last in their order: the first NaN sits at n - (NaN count) */
    tide_tensor *pos = nn_keep(&s, in ? sort_positions(in, d, false) : NULL);
    tide_tensor *nan = nn_keep(&s, in ? tide_ne(in, in) : NULL);
    tide_tensor *nnan = nn_keep(&s, tide_sum(nan, &d, 1, true));
    tide_tensor *first_nan = nn_keep(&s, tide_sub(nn_keep(&s, tide_integer(n)), nnan));
    tide_tensor *lower = nn_keep(&s, tide_integer((n - 1) / 2));
    tide_tensor *has = nn_keep(&s, tide_gt(nnan, nn_keep(&s, tide_integer(0))));
    tide_tensor *rank = nn_keep(&s, tide_where(has, first_nan, lower));
    tide_tensor *at = nn_keep(&s, tide_gather(pos, d, rank));
    tide_tensor *val = nn_keep(&s, tide_gather(in, d, at));
    if (squeeze) {
        val = nn_keep(&s, tide_squeeze(val, d));
        at = nn_keep(&s, tide_squeeze(at, d));
    }
    tide_tensor *v = !s.failed ? tide_retain(val) : NULL;
    tide_tensor *i = nn_finish(&s, op, at);
    if (!i) {
        tide_release(v);
        return -1;
    }
    *values = v;
    if (indices)
        *indices = i;
    else
        tide_release(i);
    return 0;
}

int tide_median(const tide_tensor *x, int dim, bool keepdim, tide_tensor **values,
                tide_tensor **indices)
{
    *values = NULL;
    if (indices)
        *indices = NULL;
    const char *previous = td_op_enter("median");
    int rc = median_body(x, dim, keepdim, values, indices);
    td_op_leave(previous);
    return rc;
}

/* ---- quantile: positions q * (n - 1) in each sorted line, as torch.quantile --------------- */

static const char *const interpolations[] = {"linear", "lower", "higher", "nearest", "midpoint"};

/* q as a 1-D tensor of x's dtype and device with every value in [0, 1] (read back to be checked, as
 * PyTorch checks them), or NULL with the error set. */
static tide_tensor *quantile_q(nn_scope *s, const tide_tensor *x, const tide_tensor *q,
                               bool checked)
{
    char b1[160], b2[160];
    if (td_check_tensor("quantile", "q", q) < 0)
        return NULL;
    if (q->ndim > 1 || !tide_dtype_is_floating((tide_dtype)q->dtype)) {
        td_error("quantile: q %s must be a floating number or 1-D tensor (input %s)",
                 nn_describe(b1, sizeof b1, q), nn_describe(b2, sizeof b2, x));
        return NULL;
    }
    int64_t nq = tide_numel(q);
    tide_tensor *flat = nn_keep(s, tide_reshape(q, 1, &nq));
    tide_tensor *f64 = nn_keep(s, flat ? tide_cast(flat, TIDE_FLOAT64) : NULL);
    if (checked) /* a number the caller checked: no read back (no graph break under the jit) */
        return nn_keep(s, flat ? tide_cast(flat, (tide_dtype)x->dtype) : NULL);
    double *v = f64 ? td_malloc((size_t)(nq > 0 ? nq : 1) * sizeof *v) : NULL;
    int rc = v ? tide_to_buffer(f64, v, (size_t)nq * sizeof *v) : -1;
    for (int64_t k = 0; rc == 0 && k < nq; k++)
        if (!(v[k] >= 0 && v[k] <= 1))
            rc = td_error("quantile: q values must lie in [0, 1], got %g", v[k]);
    free(v);
    if (rc < 0) {
        nn_check_status(s, -1);
        return NULL;
    }
    tide_tensor *cast = nn_keep(s, flat ? tide_cast(flat, (tide_dtype)x->dtype) : NULL);
    return nn_keep(s, cast ? tide_to(cast, tide_device_name(x)) : NULL); /* a CPU q, x elsewhere */
}

/* The sorted values of the line at each rank ([B..., Q]), interpolated as mode says. */
static tide_tensor *quantile_pick(nn_scope *s, tide_tensor *sorted, tide_tensor *rank, int mode)
{
    int last = tide_ndim(sorted) - 1;
    tide_tensor *lo = nn_keep(s, mode == 3 ? tide_round(rank) : mode == 2 ? tide_ceil(rank)
                                                                           : tide_floor(rank));
    tide_tensor *ilo = nn_keep(s, lo ? tide_cast(lo, TIDE_INT64) : NULL);
    tide_tensor *vlo = nn_keep(s, tide_gather(sorted, last, ilo));
    if (mode != 0 && mode != 4) /* lower, higher, nearest: one sorted value */
        return vlo;
    tide_tensor *hi = nn_keep(s, tide_ceil(rank));
    tide_tensor *ihi = nn_keep(s, hi ? tide_cast(hi, TIDE_INT64) : NULL);
    tide_tensor *vhi = nn_keep(s, tide_gather(sorted, last, ihi));
    tide_tensor *w = nn_keep(s, mode == 4 ? tide_number(0.5) : tide_sub(rank, lo));
    tide_tensor *diff = nn_keep(s, tide_sub(vhi, vlo));
    return nn_keep(s, tide_add(vlo, nn_keep(s, tide_mul(w, diff))));
}

static tide_tensor *quantile_body(const tide_tensor *x, const tide_tensor *q, bool checked,
                                  int dim, bool keepdim, const char *interpolation)
{
    const char *op = "quantile";
    char buf[160];
    int mode = 0;
    while (mode < 5 && strcmp(interpolation ? interpolation : "linear", interpolations[mode]))
        mode++;
    if (mode == 5)
        return td_error("%s: interpolation must be linear, lower, higher, nearest or midpoint, "
                        "got '%s'", op, interpolation), NULL;
    if (nn_check_floating(op, "input", x) < 0)
        return NULL;
    int d = 0;
    if (dim != TIDE_ALL_DIMS && (d = nn_normalize_dim(op, dim, x->ndim)) < 0)
        return NULL;
    if (tide_numel(x) == 0)
        return td_error("%s: input %s must be non-empty", op, nn_describe(buf, sizeof buf, x)),
               NULL;
    nn_scope s = {0};
    tide_tensor *qf = quantile_q(&s, x, q, checked);
    if (!qf)
        return nn_finish(&s, op, NULL);
    /* the reduced dim last: [B..., n] with B the other dims in order */
    tide_tensor *in;
    if (dim == TIDE_ALL_DIMS || x->ndim == 0) {
        int64_t n = tide_numel(x);
        in = nn_keep(&s, tide_reshape(x, 1, &n));
    } else {
        int perm[TIDE_MAX_DIMS], k = 0;
        for (int i = 0; i < x->ndim; i++)
            if (i != d)
                perm[k++] = i;
        perm[k] = d;
        in = nn_keep(&s, tide_permute(x, perm));
    }
    int last = in ? tide_ndim(in) - 1 : 0;
    int64_t n = in ? tide_shape(in)[last] : 1;
    tide_tensor *sorted = NULL;
    if (in)
        nn_check_status(&s, tide_sort(in, last, false, true, &sorted, NULL));
    nn_keep(&s, sorted);
    /* a line with a NaN gives NaN: its rank moves to the last place, where NaN sorts */
    tide_tensor *nan = nn_keep(&s, tide_ne(in, in));
    tide_tensor *has = nn_keep(&s, tide_gt(nn_keep(&s, tide_sum(nan, &last, 1, true)),
                                           nn_keep(&s, tide_integer(0))));
    tide_tensor *rank = nn_keep(&s, tide_mul_scalar(qf, (double)(n - 1)));
    rank = nn_keep(&s, tide_where(has, nn_keep(&s, tide_scalar((double)(n - 1), (tide_dtype)x->dtype)), rank));
    tide_tensor *out = quantile_pick(&s, sorted, rank, mode); /* [B..., Q] */
    if (out && dim != TIDE_ALL_DIMS && x->ndim > 0 && keepdim)
        out = nn_keep(&s, tide_unsqueeze(out, d));
    if (out && dim == TIDE_ALL_DIMS && keepdim) { /* every dim kept as 1 */
        int64_t shape[TIDE_MAX_DIMS + 1];
        for (int i = 0; i < x->ndim; i++)
            shape[i] = 1;
        shape[x->ndim] = tide_numel(qf);
        out = nn_keep(&s, tide_reshape(out, x->ndim + 1, shape));
    }
    if (out) { /* Q first, as PyTorch; a 0-dim q has none */
        int nd = tide_ndim(out), perm[TIDE_MAX_DIMS + 1];
        perm[0] = nd - 1;
        for (int i = 1; i < nd; i++)
            perm[i] = i - 1;
        out = nn_keep(&s, q->ndim == 0 ? tide_select(out, nd - 1, 0) : tide_permute(out, perm));
        out = nn_keep(&s, tide_contiguous(out));
    }
    return nn_finish(&s, op, out);
}

tide_tensor *tide_quantile(const tide_tensor *x, const tide_tensor *q, int dim, bool keepdim,
                           const char *interpolation)
{
    TD_IN_OP("quantile", quantile_body(x, q, false, dim, keepdim, interpolation));
}

static tide_tensor *quantile_scalar_body(const tide_tensor *x, double q, int dim, bool keepdim,
                                         const char *interpolation)
{
    if (!(q >= 0 && q <= 1))
        return td_error("quantile: q values must lie in [0, 1], got %g", q), NULL;
    if (td_check_tensor("quantile", "input", x) < 0)
        return NULL;
    tide_dtype dt = tide_dtype_is_floating((tide_dtype)x->dtype) ? (tide_dtype)x->dtype
                                                                 : TIDE_FLOAT32;
    tide_tensor *qt = td_full_on(x->device, "quantile", 0, NULL, q, dt);
    tide_tensor *out = qt ? quantile_body(x, qt, true, dim, keepdim, interpolation) : NULL;
    tide_release(qt);
    return out;
}

tide_tensor *tide_quantile_scalar(const tide_tensor *x, double q, int dim, bool keepdim,
                                  const char *interpolation)
{
    TD_IN_OP("quantile", quantile_scalar_body(x, q, dim, keepdim, interpolation));
}
