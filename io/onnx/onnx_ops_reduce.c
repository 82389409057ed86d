/*
 * onnx_ops_reduce.c — ONNX's reductions over axes: ReduceSum & co. (axes an attribute before
 * opset 13 for ReduceSum and 18 for the others, an optional input from then), ArgMax/ArgMin,
 * CumSum, TopK, the variadic Max/Min/Sum/Mean, Einsum and Det. Results keep the input's dtype
 * (tide's integer sums give int64: cast back).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

typedef tide_tensor *(*reduce_fn)(const tide_tensor *x, const int *dims, int ndims, bool keep);

/* The reductions ONNX has that tide composes from two or three ops. */
static tide_tensor *sum_then(const tide_tensor *x, const int *dims, int ndims, bool keep,
                             tide_tensor *(*after)(const tide_tensor *))
{
    tide_tensor *s = tide_sum(x, dims, ndims, keep);
    tide_tensor *out = s && after ? after(s) : tide_retain(s);
    tide_release(s);
    return out;
}

static tide_tensor *reduce_l1(const tide_tensor *x, const int *dims, int ndims, bool keep)
{
    tide_tensor *a = tide_abs(x), *out = a ? sum_then(a, dims, ndims, keep, NULL) : NULL;
    tide_release(a);
    return out;
}

static tide_tensor *reduce_sum_square(const tide_tensor *x, const int *dims, int ndims, bool keep)
{
    tide_tensor *sq = tide_mul(x, x), *out = sq ? sum_then(sq, dims, ndims, keep, NULL) : NULL;
    tide_release(sq);
    return out;
}

static tide_tensor *reduce_l2(const tide_tensor *x, const int *dims, int ndims, bool keep)
{
    tide_tensor *sq = tide_mul(x, x), *out = sq ? sum_then(sq, dims, ndims, keep, tide_sqrt) : NULL;
    tide_release(sq);
    return out;
}

static tide_tensor *reduce_log_sum(const tide_tensor *x, const int *dims, int ndims, bool keep)
{
    return sum_then(x, dims, ndims, keep, tide_log);
}

/* What a reduction over no elements gives (ONNX's identities, opset 18's *_empty_set tests). */
static double empty_value(reduce_fn fn)
{
    if (fn == tide_prod)
        return 1.0;
    if (fn == tide_amax || fn == tide_logsumexp || fn == reduce_log_sum)
        return -INFINITY;
    if (fn == tide_amin)
        return INFINITY;
    return 0.0; /* sum, L1, L2, sum of squares; mean is NaN (0/0) and rejected below */
}

/* The axes (input 1 when given, else the attribute) as unique dims; *n 0: none given. */
static int reduce_axes(onnx_ctx *c, int rank, int *dims, int *n)
{
    int64_t axes[TIDE_MAX_DIMS];
    int count = 0;
    if (c->nin > 1 && c->in[1]) {
        if (onnx_input_ints(c, 1, axes, TIDE_MAX_DIMS, &count) < 0)
            return -1;
    } else {
        const int64_t *a = onnx_attr_ints(c->node, "axes", &count);
        if (count > TIDE_MAX_DIMS)
            return onnx_error(c, "%d axes; at most %d", count, TIDE_MAX_DIMS);
        for (int i = 0; i < count; i++)
            axes[i] = a[i];
    }
    bool seen[TIDE_MAX_DIMS] = {false};
    for (int i = 0; i < count; i++) {
        if (onnx_axis(c, axes[i], rank, &dims[i]) < 0)
            return -1;
        if (seen[dims[i]])
            return onnx_error(c, "axis %d is listed twice", dims[i]);
        seen[dims[i]] = true;
    }
    *n = count;
    return 0;
}

/* The shape a reduction over dims (n 0: all) gives. */
static int reduced_shape(const tide_tensor *x, const int *dims, int n, bool keep, int64_t *shape)
{
    bool drop[TIDE_MAX_DIMS] = {false};
    int rank = tide_ndim(x), k = 0;
    for (int i = 0; i < n; i++)
        drop[dims[i]] = true;
    for (int d = 0; d < rank; d++)
        if (n == 0 || drop[d]) {
            if (keep)
                shape[k++] = 1;
        } else
            shape[k++] = tide_shape(x)[d];
    return k;
}

static int run_reduce(onnx_ctx *c, reduce_fn fn, bool floating_only)
{
    const tide_tensor *x = c->in[0];
    int dims[TIDE_MAX_DIMS], n = 0, rank = tide_ndim(x);
    bool keep = onnx_attr_int(c->node, "keepdims", 1) != 0;
    tide_dtype dt = tide_get_dtype(x);
    if (reduce_axes(c, rank, dims, &n) < 0)
        return -1;
    if (n == 0 && onnx_attr_int(c->node, "noop_with_empty_axes", 0)) {
        c->out[0] = tide_retain(c->in[0]);
        return 0;
    }
    if (floating_only && !tide_dtype_is_floating(dt))
        return onnx_unsupported(c, "a %s input (floating point only)", tide_dtype_name(dt));
    if (tide_numel(x) == 0) {
        int64_t shape[TIDE_MAX_DIMS];
        int k = reduced_shape(x, dims, n, keep, shape);
        int64_t count = 1;
        for (int d = 0; d < k; d++)
            count *= shape[d];
        bool no_identity = fn == tide_mean || (!tide_dtype_is_floating(dt) &&
                                               isinf(empty_value(fn)));
        if (count > 0 && no_identity)
            return onnx_unsupported(c, "this reduction of an empty %s tensor",
                                    tide_dtype_name(dt));
        return onnx_set(c, tide_full_on(tide_device_name(x), k, shape, empty_value(fn), dt));
    }
    tide_tensor *r = fn(x, dims, n, keep);
    if (!r || tide_get_dtype(r) == dt)
        return onnx_set(c, r);
    tide_tensor *out = tide_cast(r, dt);
    tide_release(r);
    return onnx_set(c, out);
}

#define REDUCE(name, fn, floating_only)                                                          \
    static int run_##name(onnx_ctx *c) { return run_reduce(c, fn, floating_only); }
REDUCE(reduce_sum, tide_sum, false)
REDUCE(reduce_mean, tide_mean, true)
REDUCE(reduce_max, tide_amax, false)
REDUCE(reduce_min, tide_amin, false)
REDUCE(reduce_prod, tide_prod, false)
REDUCE(reduce_l1, reduce_l1, false)
REDUCE(reduce_l2, reduce_l2, true)
REDUCE(reduce_log_sum, reduce_log_sum, true)
REDUCE(reduce_log_sum_exp, tide_logsumexp, true)
REDUCE(reduce_sum_square, reduce_sum_square, false)

/* ArgMax/ArgMin: select_last_index flips the axis, so the first of the flipped is the last. */
static int run_arg(onnx_ctx *c, tide_tensor *(*fn)(const tide_tensor *, int, bool))
{
    const onnx_node *n = c->node;
    int axis;
    if (onnx_axis(c, onnx_attr_int(n, "axis", 0), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    bool keep = onnx_attr_int(n, "keepdims", 1) != 0;
    if (!onnx_attr_int(n, "select_last_index", 0) || tide_ndim(c->in[0]) == 0)
        return onnx_set(c, fn(c->in[0], axis, keep));
    int64_t last = tide_shape(c->in[0])[axis] - 1;
    tide_tensor *flipped = tide_flip(c->in[0], &axis, 1);
    tide_tensor *pos = flipped ? fn(flipped, axis, keep) : NULL;
    tide_tensor *end = pos ? tide_integer(last) : NULL; /* int64: the positions stay int64 */
    tide_tensor *out = end ? tide_sub(end, pos) : NULL;
    tide_release(flipped);
    tide_release(pos);
    tide_release(end);
    return onnx_set(c, out);
}

static int run_argmax(onnx_ctx *c) { return run_arg(c, tide_argmax); }
static int run_argmin(onnx_ctx *c) { return run_arg(c, tide_argmin); }

/* x shifted one place along dim (a zero enters, the last leaves): exclusive sums from inclusive
 * ones without subtracting (exact). */
static tide_tensor *shift_in_zero(const tide_tensor *x, int dim)
{
    int64_t shape[TIDE_MAX_DIMS];
    int rank = tide_ndim(x);
    memcpy(shape, tide_shape(x), sizeof(int64_t) * (size_t)rank);
    int64_t len = shape[dim];
    shape[dim] = 1;
    tide_tensor *zero = tide_zeros_on(tide_device_name(x), rank, shape, tide_get_dtype(x));
    tide_tensor *head = zero ? tide_slice(x, dim, 0, len - 1, 1) : NULL;
    tide_tensor *parts[2] = {zero, head};
    tide_tensor *out = head ? tide_cat(parts, 2, dim) : NULL;
    tide_release(zero);
    tide_release(head);
    return out;
}

/* CumSum: the axis is input 1 (a scalar); exclusive starts at 0, reverse sums from the end. */
static int run_cumsum(onnx_ctx *c)
{
    int64_t axis_value;
    int count, axis;
    if (onnx_input_ints(c, 1, &axis_value, 1, &count) < 0)
        return -1;
    if (count != 1)
        return onnx_error(c, "the axis input has %d values; it must have one", count);
    if (tide_ndim(c->in[0]) == 0)
        return onnx_error(c, "the input is 0-dim; CumSum needs at least one dim");
    if (onnx_axis(c, axis_value, tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    bool exclusive = onnx_attr_int(c->node, "exclusive", 0) != 0;
    bool reverse = onnx_attr_int(c->node, "reverse", 0) != 0;
    if (tide_numel(c->in[0]) == 0) {
        c->out[0] = tide_retain(c->in[0]);
        return 0;
    }
    tide_tensor *x = reverse ? tide_flip(c->in[0], &axis, 1) : tide_retain(c->in[0]);
    tide_tensor *shifted = x && exclusive ? shift_in_zero(x, axis) : tide_retain(x);
    tide_tensor *sums = shifted ? tide_cumsum(shifted, axis) : NULL;
    tide_tensor *back = sums && reverse ? tide_flip(sums, &axis, 1) : tide_retain(sums);
    tide_dtype dt = tide_get_dtype(c->in[0]);
    tide_tensor *out = back && tide_get_dtype(back) != dt ? tide_cast(back, dt) : tide_retain(back);
    tide_release(x);
    tide_release(shifted);
    tide_release(sums);
    tide_release(back);
    return onnx_set(c, out);
}

/* TopK: k is an attribute at opset 1, input 1 from 10; largest and sorted from 11 (tide always
 * gives the best first, which is one of the orders sorted=0 allows). */
static int run_topk(onnx_ctx *c)
{
    const onnx_node *n = c->node;
    int64_t k = onnx_attr_int(n, "k", -1);
    int count, axis;
    if (c->m->opset >= 10) {
        if (onnx_input_ints(c, 1, &k, 1, &count) < 0)
            return -1;
        if (count != 1)
            return onnx_error(c, "the k input has %d values; it must have one", count);
    }
    if (onnx_axis(c, onnx_attr_int(n, "axis", -1), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    if (tide_ndim(c->in[0]) == 0)
        return onnx_error(c, "the input is 0-dim; TopK needs at least one dim");
    if (k < 0 || k > tide_shape(c->in[0])[axis])
        return onnx_error(c, "k %lld is out of range for axis %d of size %lld", (long long)k,
                          axis, (long long)tide_shape(c->in[0])[axis]);
    bool largest = onnx_attr_int(n, "largest", 1) != 0;
    tide_tensor **indices = c->nout > 1 ? &c->out[1] : NULL;
    if (tide_topk(c->in[0], k, axis, largest, true, &c->out[0], indices) < 0)
        return onnx_fail(c);
    return 0;
}

/* Max/Min/Sum/Mean over any count of inputs, broadcast together (numpy rules). */
static int run_variadic(onnx_ctx *c, tide_tensor *(*combine)(const tide_tensor *,
                                                             const tide_tensor *))
{
    for (int i = 0; i < c->nin; i++)
        if (!c->in[i])
            return onnx_error(c, "input %d is missing", i);
    tide_tensor *acc = tide_retain(c->in[0]);
    for (int i = 1; i < c->nin && acc; i++) {
        tide_tensor *next = combine(acc, c->in[i]);
        tide_release(acc);
        acc = next;
    }
    return onnx_set(c, acc);
}

static int run_max(onnx_ctx *c) { return run_variadic(c, tide_maximum); }
static int run_min(onnx_ctx *c) { return run_variadic(c, tide_minimum); }
static int run_sum(onnx_ctx *c) { return run_variadic(c, tide_add); }

static int run_mean(onnx_ctx *c)
{
    if (!tide_dtype_is_floating(tide_get_dtype(c->in[0])))
        return onnx_unsupported(c, "a %s input (floating point only)",
                                tide_dtype_name(tide_get_dtype(c->in[0])));
    if (run_sum(c) < 0) /* every input present: nin counts them */
        return -1;
    tide_tensor *sum = c->out[0];
    c->out[0] = NULL;
    tide_tensor *mean = tide_div_scalar(sum, (double)c->nin);
    tide_release(sum);
    return onnx_set(c, mean);
}

/* Einsum: tide's einsum reads the same language; ONNX allows spaces, which it does not. */
#define EINSUM_MAX 256

static int check_einsum(const onnx_node *n, char *why, size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(n, "equation");
    if (!a || a->s.len == 0 || a->s.len >= EINSUM_MAX) {
        snprintf(why, size, "an equation that is missing or of %d or more characters",
                 EINSUM_MAX);
        return 1;
    }
    return 0;
}

static int run_einsum(onnx_ctx *c)
{
    char buf[EINSUM_MAX], eq[EINSUM_MAX];
    const char *text = onnx_attr_string(c->node, "equation", "", buf, sizeof buf);
    size_t k = 0;
    for (const char *p = text; *p; p++)
        if (*p != ' ')
            eq[k++] = *p;
    eq[k] = 0;
    for (int i = 0; i < c->nin; i++)
        if (!c->in[i])
            return onnx_error(c, "input %d is missing", i);
    return onnx_set(c, tide_einsum(eq, c->in, c->nin));
}

/* The determinant of one n x n matrix (row-major, overwritten): LU with partial pivoting. */
static double det_lu(double *a, int64_t n)
{
    double det = 1.0;
    for (int64_t col = 0; col < n; col++) {
        int64_t pivot = col;
        for (int64_t r = col + 1; r < n; r++)
            if (fabs(a[r * n + col]) > fabs(a[pivot * n + col]))
                pivot = r;
        if (a[pivot * n + col] == 0.0)
            return 0.0;
        if (pivot != col) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[col * n + j];
                a[col * n + j] = a[pivot * n + j];
                a[pivot * n + j] = t;
            }
            det = -det;
        }
        det *= a[col * n + col];
        for (int64_t r = col + 1; r < n; r++) {
            double f = a[r * n + col] / a[col * n + col];
            for (int64_t j = col; j < n; j++)
                a[r * n + j] -= f * a[col * n + j];
        }
    }
    return det;
}

/* Det of [..., M, M] floats: small matrices, computed on the host in float64. */
static int run_det(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x);
    tide_dtype dt = tide_get_dtype(x);
    if (!tide_dtype_is_floating(dt))
        return onnx_unsupported(c, "a %s input (floating point only)", tide_dtype_name(dt));
    if (rank < 2 || tide_shape(x)[rank - 1] != tide_shape(x)[rank - 2]) {
        char shape[160];
        return onnx_error(c, "the input must be [..., M, M]; it is %s",
                          td_shape_str(shape, sizeof shape, rank, tide_shape(x)));
    }
    int64_t m = tide_shape(x)[rank - 1], count = m ? tide_numel(x) / (m * m) : 0;
    tide_tensor *wide = tide_cast(x, TIDE_FLOAT64);
    double *a = td_malloc(sizeof(double) * (size_t)(tide_numel(x) + count + 1));
    int rc = wide && a ? tide_to_buffer(wide, a, sizeof(double) * (size_t)tide_numel(x)) : -1;
    tide_release(wide);
    if (rc < 0) {
        free(a);
        return a ? onnx_fail(c) : onnx_error(c, "out of memory");
    }
    double *dets = a + tide_numel(x);
    for (int64_t i = 0; i < count; i++)
        dets[i] = det_lu(a + i * m * m, m);
    tide_tensor *d = tide_from_data_on(tide_device_name(x), dets, rank - 2, tide_shape(x),
                                       TIDE_FLOAT64);
    free(a);
    tide_tensor *out = d ? tide_cast(d, dt) : NULL;
    tide_release(d);
    return onnx_set(c, out);
}

const onnx_op onnx_ops_reduce[] = {
    {"ReduceSum", 1, 12, 1, 1, NULL, run_reduce_sum, 0},
    {"ReduceSum", 13, 0, 1, 2, NULL, run_reduce_sum, 0},
    {"ReduceMean", 1, 17, 1, 1, NULL, run_reduce_mean, 0},
    {"ReduceMean", 18, 0, 1, 2, NULL, run_reduce_mean, 0},
    {"ReduceMax", 1, 17, 1, 1, NULL, run_reduce_max, 0},
    {"ReduceMax", 18, 0, 1, 2, NULL, run_reduce_max, 0},
    {"ReduceMin", 1, 17, 1, 1, NULL, run_reduce_min, 0},
    {"ReduceMin", 18, 0, 1, 2, NULL, run_reduce_min, 0},
    {"ReduceProd", 1, 17, 1, 1, NULL, run_reduce_prod, 0},
    {"ReduceProd", 18, 0, 1, 2, NULL, run_reduce_prod, 0},
    {"ReduceL1", 1, 17, 1, 1, NULL, run_reduce_l1, 0},
    {"ReduceL1", 18, 0, 1, 2, NULL, run_reduce_l1, 0},
    {"ReduceL2", 1, 17, 1, 1, NULL, run_reduce_l2, 0},
    {"ReduceL2", 18, 0, 1, 2, NULL, run_reduce_l2, 0},
    {"ReduceLogSum", 1, 17, 1, 1, NULL, run_reduce_log_sum, 0},
    {"ReduceLogSum", 18, 0, 1, 2, NULL, run_reduce_log_sum, 0},
    {"ReduceLogSumExp", 1, 17, 1, 1, NULL, run_reduce_log_sum_exp, 0},
    {"ReduceLogSumExp", 18, 0, 1, 2, NULL, run_reduce_log_sum_exp, 0},
    {"ReduceSumSquare", 1, 17, 1, 1, NULL, run_reduce_sum_square, 0},
    {"ReduceSumSquare", 18, 0, 1, 2, NULL, run_reduce_sum_square, 0},
    {"ArgMax", 1, 0, 1, 1, NULL, run_argmax, 0},
    {"ArgMin", 1, 0, 1, 1, NULL, run_argmin, 0},
    {"CumSum", 11, 0, 2, 2, NULL, run_cumsum, 0},
    {"TopK", 1, 9, 1, 1, NULL, run_topk, 0},
    {"TopK", 10, 0, 2, 2, NULL, run_topk, 0},
    {"Max", 6, 0, 1, -1, NULL, run_max, 0},
    {"Min", 6, 0, 1, -1, NULL, run_min, 0},
    {"Sum", 6, 0, 1, -1, NULL, run_sum, 0},
    {"Mean", 6, 0, 1, -1, NULL, run_mean, 0},
    {"Einsum", 12, 0, 1, -1, check_einsum, run_einsum, 0},
    {"Det", 11, 0, 1, 1, NULL, run_det, 0},
    {0},
};
