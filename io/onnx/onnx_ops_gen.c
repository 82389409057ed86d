/*
 * onnx_ops_gen.c — ONNX ops that make tensors from shapes and sizes: Range, ConstantOfShape,
 * EyeLike, Trilu, and Unique, whose result size depends on the values (worked out on the host;
 * the values themselves are picked on the device with tide_index_select). Listed in
 * onnx_ops_index.c's table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

int onnx_run_range(onnx_ctx *c)
{
    double start, limit, delta;
    if (onnx_input_scalar(c, 0, &start) < 0 || onnx_input_scalar(c, 1, &limit) < 0 ||
        onnx_input_scalar(c, 2, &delta) < 0)
        return -1;
    if (delta == 0)
        return onnx_error(c, "delta is 0");
    return onnx_set(c, tide_arange_on(onnx_device_of(c), start, limit, delta,
                                      tide_get_dtype(c->in[0])));
}

/* The `value` attribute of ConstantOfShape must be one element of a dtype tide has. */
int onnx_check_constant_of_shape(const onnx_node *n, char *why, size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    if (!a || !a->t || onnx_dtype(a->t->data_type) >= 0)
        return 0;
    snprintf(why, size, "ConstantOfShape value of type %s, which tide has no dtype for",
             onnx_dtype_name(a->t->data_type));
    return 1;
}

int onnx_run_constant_of_shape(onnx_ctx *c)
{
    int64_t shape[TIDE_MAX_DIMS];
    int n;
    if (onnx_input_ints(c, 0, shape, TIDE_MAX_DIMS, &n) < 0)
        return -1;
    const Onnx__AttributeProto *a = onnx_attr(c->node, "value");
    double value = 0;
    tide_dtype dtype = TIDE_FLOAT32;
    if (a && a->t) {
        td_io_ctx io = {"onnx_run", c->m->path};
        tide_tensor *v = onnx_tensor_from_proto(&io, a->t, c->m->dir, c->m->device);
        if (!v)
            return onnx_fail(c);
        dtype = tide_get_dtype(v);
        int rc = tide_numel(v) == 1 ? tide_item(v, &value) : -2;
        tide_release(v);
        if (rc == -2)
            return onnx_error(c, "value must have one element");
        if (rc < 0)
            return onnx_fail(c);
    }
    for (int d = 0; d < n; d++)
        if (shape[d] < 0)
            return onnx_error(c, "shape entry %d is %lld", d, (long long)shape[d]);
    return onnx_set(c, tide_full_on(onnx_device_of(c), n, shape, value, dtype));
}

int onnx_check_eye_like(const onnx_node *n, char *why, size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(n, "dtype");
    if (!a || onnx_dtype((int32_t)a->i) >= 0)
        return 0;
    snprintf(why, size, "EyeLike dtype %s, which tide has no dtype for",
             onnx_dtype_name((int32_t)a->i));
    return 1;
}

/* EyeLike: ones where column - row == k, in the input's shape (2-D). */
int onnx_run_eye_like(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) != 2)
        return onnx_error(c, "the input has %d dims; it must have 2", tide_ndim(c->in[0]));
    const Onnx__AttributeProto *a = onnx_attr(c->node, "dtype");
    tide_dtype dtype = a ? (tide_dtype)onnx_dtype((int32_t)a->i) : tide_get_dtype(c->in[0]);
    int64_t k = onnx_attr_int(c->node, "k", 0), rows = tide_shape(c->in[0])[0];
    int64_t cols = tide_shape(c->in[0])[1], rshape[2] = {rows, 1};
    const char *dev = onnx_device_of(c);
    tide_tensor *r = tide_arange_on(dev, 0, (double)rows, 1, TIDE_INT64);
    tide_tensor *rc = r ? tide_reshape(r, 2, rshape) : NULL;
    tide_tensor *col = rc ? tide_arange_on(dev, 0, (double)cols, 1, TIDE_INT64) : NULL;
    tide_tensor *diff = col ? tide_sub(col, rc) : NULL;
    tide_tensor *kk = diff ? onnx_int64_tensor(c, &k, 0, NULL) : NULL;
    tide_tensor *hit = kk ? tide_eq(diff, kk) : NULL;
    tide_tensor *out = hit ? tide_cast(hit, dtype) : NULL;
    tide_tensor *tmp[] = {r, rc, col, diff, kk, hit};
    onnx_release_all(tmp, 6);
    return onnx_set(c, out);
}

int onnx_run_trilu(onnx_ctx *c)
{
    int64_t k = 0;
    int n;
    if (c->nin > 1 && c->in[1] && onnx_input_ints(c, 1, &k, 1, &n) < 0)
        return -1;
    if (tide_ndim(c->in[0]) < 2)
        return onnx_error(c, "the input has %d dims; it needs at least 2", tide_ndim(c->in[0]));
    bool upper = onnx_attr_int(c->node, "upper", 1) != 0;
    return onnx_set(c, upper ? tide_triu(c->in[0], k) : tide_tril(c->in[0], k));
}

/* ---- Unique --------------------------------------------------------------------------------- */

/* The rows (slices along the axis) Unique compares, on the host as doubles. */
typedef struct unique_rows {
    const double *v;
    int64_t n, width;
} unique_rows;

static _Thread_local const unique_rows *sorting;

static int compare_rows(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    const double *ra = sorting->v + a * sorting->width, *rb = sorting->v + b * sorting->width;
    for (int64_t i = 0; i < sorting->width; i++)
        if (ra[i] != rb[i])
            return ra[i] < rb[i] ? -1 : 1;
    return a < b ? -1 : a > b; /* equal rows keep their order: the first occurrence leads */
}

static bool rows_equal(const unique_rows *r, int64_t a, int64_t b)
{
    for (int64_t i = 0; i < r->width; i++)
        if (r->v[a * r->width + i] != r->v[b * r->width + i])
            return false;
    return true;
}

/* x with the axis first, as [n, width] float64 on the host. Integers past 2^53 would lose
 * precision as doubles: unsupported. */
static int read_rows(onnx_ctx *c, const tide_tensor *x, unique_rows *r, double **buf)
{
    r->n = tide_ndim(x) ? tide_shape(x)[0] : 1;
    r->width = r->n ? tide_numel(x) / r->n : 0;
    tide_tensor *d = tide_cast(x, TIDE_FLOAT64);
    *buf = td_malloc(sizeof **buf * (size_t)(tide_numel(x) + 1));
    int rc = d && *buf ? tide_to_buffer(d, *buf, sizeof **buf * (size_t)(tide_numel(x) + 1)) : -1;
    tide_release(d);
    if (rc < 0)
        return onnx_fail(c);
    for (int64_t i = 0; i < tide_numel(x); i++)
        if (fabs((*buf)[i]) > 9007199254740992.0 || isnan((*buf)[i]))
            return onnx_unsupported(c, "values past 2^53 or NaN");
    r->v = *buf;
    return 0;
}

/* Groups equal rows: first[u] (the first occurrence of unique u), inverse[i], counts[u], in
 * sorted order or in the order of first occurrence. The number of unique rows. */
static int64_t group_rows(const unique_rows *r, bool sorted, int64_t *order, int64_t *first,
                          int64_t *inverse, int64_t *counts)
{
    for (int64_t i = 0; i < r->n; i++)
        order[i] = i;
    sorting = r;
    qsort(order, (size_t)r->n, sizeof *order, compare_rows);
    int64_t u = 0;
    for (int64_t i = 0; i < r->n; i++) {
        if (i == 0 || !rows_equal(r, order[i], order[i - 1]))
            first[u] = order[i], counts[u++] = 0;
        inverse[order[i]] = u - 1;
        counts[u - 1]++;
    }
    if (sorted)
        return u;
    /* unsorted: renumber the groups by their first occurrence (order is free to reuse) */
    int64_t *rank = order;
    for (int64_t g = 0; g < u; g++)
        rank[g] = g;
    sorting = NULL;
    for (int64_t a = 1; a < u; a++) /* insertion sort of groups by first index */
        for (int64_t b = a; b > 0 && first[rank[b]] < first[rank[b - 1]]; b--) {
            int64_t t = rank[b];
            rank[b] = rank[b - 1];
            rank[b - 1] = t;
        }
    int64_t *tmp = order + u, *newpos = tmp + u;
    for (int64_t g = 0; g < u; g++)
        newpos[rank[g]] = g;
    for (int64_t g = 0; g < u; g++)
        tmp[g] = first[rank[g]];
    memcpy(first, tmp, sizeof *first * (size_t)u);
    for (int64_t g = 0; g < u; g++)
        tmp[g] = counts[rank[g]];
    memcpy(counts, tmp, sizeof *counts * (size_t)u);
    for (int64_t i = 0; i < r->n; i++)
        inverse[i] = newpos[inverse[i]];
    return u;
}

/* Outputs Y (the first occurrences picked from x along axis), indices, inverse, counts. */
static int unique_outputs(onnx_ctx *c, const tide_tensor *x, int axis, int64_t u,
                          const int64_t *first, const int64_t *inverse, const int64_t *counts,
                          int64_t n)
{
    tide_tensor *fi = onnx_int64_tensor(c, first, 1, &u);
    c->out[0] = fi ? tide_index_select(x, axis, fi) : NULL;
    if (c->nout > 1)
        c->out[1] = tide_retain(fi);
    if (c->nout > 2)
        c->out[2] = onnx_int64_tensor(c, inverse, 1, &n);
    if (c->nout > 3)
        c->out[3] = onnx_int64_tensor(c, counts, 1, &u);
    tide_release(fi);
    for (int k = 0; k < c->nout && k < 4; k++)
        if (!c->out[k])
            return onnx_fail(c);
    return 0;
}

int onnx_run_unique(onnx_ctx *c)
{
    const Onnx__AttributeProto *a = onnx_attr(c->node, "axis");
    bool sorted = onnx_attr_int(c->node, "sorted", 1) != 0;
    int axis = 0;
    if (a && onnx_dim_axis(c, a->i, tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    int64_t numel = tide_numel(c->in[0]);
    tide_tensor *x = a ? tide_retain(c->in[0]) : tide_reshape(c->in[0], 1, &numel);
    tide_tensor *moved = x ? tide_movedim(x, 1, &axis, (const int[]){0}) : NULL;
    unique_rows r;
    double *buf = NULL;
    int64_t n = moved && tide_ndim(moved) ? tide_shape(moved)[0] : 1;
    int64_t *work = td_malloc(sizeof *work * (size_t)(6 * n + 1));
    int rc = !moved || !work ? onnx_fail(c) : read_rows(c, moved, &r, &buf);
    if (rc == 0) {
        int64_t *first = work + 3 * n, *inverse = first + n, *counts = inverse + n;
        int64_t u = group_rows(&r, sorted, work, first, inverse, counts);
        rc = unique_outputs(c, x, axis, u, first, inverse, counts, n);
    }
    free(work);
    free(buf);
    tide_release(x);
    tide_release(moved);
    return rc;
}
