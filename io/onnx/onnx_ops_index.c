/*
 * onnx_ops_index.c — ONNX's indexing ops: Where, GatherElements, GatherND, ScatterElements,
 * Scatter, ScatterND, OneHot, Compress, NonZero, ReverseSequence, and the table entries of
 * onnx_ops_gen.c (Range, ConstantOfShape, EyeLike, Trilu, Unique), onnx_ops_select.c
 * (NonMaxSuppression) and onnx_ops_spectral.c (DFT, STFT, the Hann, Hamming and Blackman
 * windows, MelWeightMatrix) and onnx_ops_text.c (TfIdfVectorizer).
 * Index tensors stay on the device: ONNX's negative indices are wrapped with tide ops and the
 * N-D forms flatten their leading dims into one linear index (tide_index_select, tide_scatter).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

static int run_where(onnx_ctx *c)
{
    return onnx_set(c, tide_where(c->in[0], c->in[1], c->in[2]));
}

static int run_gather_elements(onnx_ctx *c)
{
    int axis;
    if (onnx_check_index(c, 1) < 0 ||
        onnx_dim_axis(c, onnx_attr_int(c->node, "axis", 0), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    tide_tensor *idx = onnx_wrap_negative_by(c, c->in[1], tide_shape(c->in[0])[axis]);
    tide_tensor *out = idx ? tide_gather(c->in[0], axis, idx) : NULL;
    tide_release(idx);
    return onnx_set(c, out);
}

/* ---- scatter -------------------------------------------------------------------------------- */

/* The reduce argument of tide_scatter for the `reduction` attribute ("" when absent). */
static int reduction_of(const onnx_node *n, const char **reduce)
{
    char buf[16];
    const char *r = onnx_attr_string(n, "reduction", "none", buf, sizeof buf);
    *reduce = !strcmp(r, "none") ? NULL : !strcmp(r, "add") ? "add" : !strcmp(r, "mul") ?
              "multiply" : "?";
    return strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul") ? -1 : 0;
}

static int check_reduction(const onnx_node *n, char *why, size_t size)
{
    const char *reduce;
    if (reduction_of(n, &reduce) == 0)
        return 0;
    char buf[16];
    snprintf(why, size, "reduction '%s' is not supported (none, add, mul are)",
             onnx_attr_string(n, "reduction", "", buf, sizeof buf));
    return 1;
}

static bool same_shape(const tide_tensor *a, const tide_tensor *b)
{
    return tide_ndim(a) == tide_ndim(b) &&
           !memcmp(tide_shape(a), tide_shape(b), sizeof(int64_t) * (size_t)tide_ndim(a));
}

static int run_scatter_elements(onnx_ctx *c)
{
    int axis;
    const char *reduce;
    reduction_of(c->node, &reduce);
    if (onnx_check_index(c, 1) < 0 ||
        onnx_dim_axis(c, onnx_attr_int(c->node, "axis", 0), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    if (!same_shape(c->in[1], c->in[2]))
        return onnx_error(c, "indices and updates differ in shape (%d and %d dims, %lld and "
                          "%lld elements)", tide_ndim(c->in[1]), tide_ndim(c->in[2]),
                          (long long)tide_numel(c->in[1]), (long long)tide_numel(c->in[2]));
    tide_tensor *idx = onnx_wrap_negative_by(c, c->in[1], tide_shape(c->in[0])[axis]);
    tide_tensor *out = idx ? tide_scatter(c->in[0], axis, idx, c->in[2], reduce) : NULL;
    tide_release(idx);
    return onnx_set(c, out);
}

/* ---- the N-D forms -------------------------------------------------------------------------- */

/* Whether each index row of wrapped ([..., m]) has an entry outside [0, size): bool [...]. */
static tide_tensor *rows_out_of_range(const onnx_ctx *c, const tide_tensor *wrapped,
                                      const tide_tensor *size)
{
    int dim = tide_ndim(wrapped) - 1;
    int64_t zero = 0;
    tide_tensor *z = onnx_int64_tensor(c, &zero, 0, NULL);
    tide_tensor *lo = z ? tide_lt(wrapped, z) : NULL;
    tide_tensor *hi = lo ? tide_ge(wrapped, size) : NULL;
    tide_tensor *bad = hi ? tide_logical_or(lo, hi) : NULL;
    tide_tensor *count = bad ? tide_cast(bad, TIDE_INT64) : NULL;
    tide_tensor *per_row = count ? tide_sum(count, &dim, 1, false) : NULL;
    tide_tensor *out = per_row ? tide_gt(per_row, z) : NULL;
    tide_tensor *tmp[] = {z, lo, hi, bad, count, per_row};
    onnx_release_all(tmp, 6);
    return out;
}

/* indices [..., m] into dims [first, first + m) of data: the linear index of each row over those
 * dims (negative entries wrapped), shape indices[:-1]. A row with an entry out of range gets
 * `beyond`, which the caller's bounds check then rejects (never a wrong row). */
static tide_tensor *linear_index(const onnx_ctx *c, const tide_tensor *indices, int first,
                                 int64_t beyond)
{
    int ir = tide_ndim(indices);
    int64_t m = tide_shape(indices)[ir - 1], sizes[TIDE_MAX_DIMS], strides[TIDE_MAX_DIMS];
    int64_t stride = 1;
    for (int64_t k = m - 1; k >= 0; k--) {
        sizes[k] = tide_shape(c->in[0])[first + k];
        strides[k] = stride;
        stride *= sizes[k];
    }
    int dim = ir - 1;
    tide_tensor *size = onnx_int64_tensor(c, sizes, 1, &m);
    tide_tensor *step = onnx_int64_tensor(c, strides, 1, &m);
    tide_tensor *wrapped = size && step ? onnx_wrap_negative(indices, size) : NULL;
    tide_tensor *scaled = wrapped ? tide_mul(wrapped, step) : NULL;
    tide_tensor *lin = scaled ? tide_sum(scaled, &dim, 1, false) : NULL;
    tide_tensor *bad = lin ? rows_out_of_range(c, wrapped, size) : NULL;
    tide_tensor *far = bad ? onnx_int64_tensor(c, &beyond, 0, NULL) : NULL;
    tide_tensor *out = far ? tide_where(bad, far, lin) : NULL;
    tide_tensor *tmp[] = {size, step, wrapped, scaled, lin, bad, far};
    onnx_release_all(tmp, 7);
    return out;
}

/* The shape checks GatherND and ScatterND share: m index entries after b batch dims. */
static int check_nd(onnx_ctx *c, int b)
{
    const tide_tensor *data = c->in[0], *indices = c->in[1];
    int dr = tide_ndim(data), ir = tide_ndim(indices);
    if (onnx_check_index(c, 1) < 0)
        return -1;
    if (ir < 1 || b < 0 || b >= ir || b > dr)
        return onnx_error(c, "data has %d dims, indices %d, batch_dims is %d", dr, ir, b);
    int64_t m = tide_shape(indices)[ir - 1];
    if (m < 1 || b + m > dr)
        return onnx_error(c, "indices rows of %lld entries do not fit data of %d dims after "
                          "%d batch dims", (long long)m, dr, b);
    for (int d = 0; d < b; d++)
        if (tide_shape(data)[d] != tide_shape(indices)[d])
            return onnx_error(c, "batch dim %d: data has %lld, indices %lld", d,
                              (long long)tide_shape(data)[d], (long long)tide_shape(indices)[d]);
    return 0;
}

/* data viewed as [rows, rest...] where rows covers its first `lead` dims. */
static tide_tensor *rows_view(const tide_tensor *data, int lead)
{
    int64_t shape[TIDE_MAX_DIMS];
    int dr = tide_ndim(data), k = 1;
    shape[0] = 1;
    for (int d = 0; d < lead; d++)
        shape[0] *= tide_shape(data)[d];
    for (int d = lead; d < dr; d++)
        shape[k++] = tide_shape(data)[d];
    return tide_reshape(data, k, shape);
}

/* The row of each index in rows_view(data, b + m): batch offset plus the linear index. */
static tide_tensor *nd_rows(const onnx_ctx *c, int b)
{
    const tide_tensor *indices = c->in[1];
    int ir = tide_ndim(indices);
    int64_t m = tide_shape(indices)[ir - 1], per_batch = 1, nbatch = 1;
    for (int d = b; d < b + m; d++)
        per_batch *= tide_shape(c->in[0])[d];
    int64_t bshape[TIDE_MAX_DIMS];
    for (int d = 0; d < ir - 1; d++) {
        bshape[d] = d < b ? tide_shape(indices)[d] : 1;
        nbatch *= bshape[d];
    }
    tide_tensor *lin = linear_index(c, indices, b, nbatch * per_batch);
    tide_tensor *base = lin ? tide_arange_on(onnx_device_of(c), 0, (double)nbatch * per_batch,
                                             (double)per_batch, TIDE_INT64) : NULL;
    tide_tensor *shaped = base ? tide_reshape(base, ir - 1, bshape) : NULL;
    tide_tensor *rows = shaped ? tide_add(lin, shaped) : NULL;
    int64_t n = rows ? tide_numel(rows) : 0;
    tide_tensor *flat = rows ? tide_reshape(rows, 1, &n) : NULL;
    tide_tensor *tmp[] = {lin, base, shaped, rows};
    onnx_release_all(tmp, 4);
    return flat;
}

static int run_gather_nd(onnx_ctx *c)
{
    int b = (int)onnx_attr_int(c->node, "batch_dims", 0);
    if (check_nd(c, b) < 0)
        return -1;
    const tide_tensor *data = c->in[0], *indices = c->in[1];
    int dr = tide_ndim(data), ir = tide_ndim(indices);
    int m = (int)tide_shape(indices)[ir - 1];
    int64_t shape[2 * TIDE_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < ir - 1; d++)
        shape[k++] = tide_shape(indices)[d];
    for (int d = b + m; d < dr; d++)
        shape[k++] = tide_shape(data)[d];
    if (k > TIDE_MAX_DIMS)
        return onnx_unsupported(c, "the result would have %d dims; tide holds at most %d", k,
                                TIDE_MAX_DIMS);
    tide_tensor *rows = nd_rows(c, b);
    tide_tensor *view = rows ? rows_view(data, b + m) : NULL;
    tide_tensor *sel = view ? tide_index_select(view, 0, rows) : NULL;
    tide_tensor *out = sel ? tide_reshape(sel, k, shape) : NULL;
    tide_tensor *tmp[] = {rows, view, sel};
    onnx_release_all(tmp, 3);
    return onnx_set(c, out);
}

/* ScatterND: updates [indices[:-1]..., data[m:]...] written (or reduced) at the rows the
 * index rows name, as a tide_scatter along dim 0 of data viewed as [rows, rest]. */
static int run_scatter_nd(onnx_ctx *c)
{
    const char *reduce;
    reduction_of(c->node, &reduce);
    if (check_nd(c, 0) < 0)
        return -1;
    const tide_tensor *data = c->in[0], *indices = c->in[1];
    int ir = tide_ndim(indices), m = (int)tide_shape(indices)[ir - 1], k = 0;
    int64_t want[2 * TIDE_MAX_DIMS];
    for (int d = 0; d < ir - 1; d++)
        want[k++] = tide_shape(indices)[d];
    for (int d = m; d < tide_ndim(data); d++)
        want[k++] = tide_shape(data)[d];
    if (tide_ndim(c->in[2]) != k ||
        memcmp(tide_shape(c->in[2]), want, sizeof *want * (size_t)k))
        return onnx_error(c, "updates must have indices.shape[:-1] + data.shape[%d:] (%d dims); "
                          "it has %d dims", m, k, tide_ndim(c->in[2]));
    tide_tensor *rows = nd_rows(c, 0);
    tide_tensor *view = rows ? rows_view(data, m) : NULL;
    int vr = view ? tide_ndim(view) : 0;
    int64_t ushape[TIDE_MAX_DIMS], ishape[TIDE_MAX_DIMS];
    for (int d = 0; d < vr; d++) {
        ushape[d] = d == 0 ? tide_numel(rows) : tide_shape(view)[d];
        ishape[d] = d == 0 ? ushape[0] : 1;
    }
    tide_tensor *upd = view ? tide_reshape(c->in[2], vr, ushape) : NULL;
    tide_tensor *col = upd ? tide_reshape(rows, vr, ishape) : NULL;
    tide_tensor *idx = col ? tide_expand(col, vr, ushape) : NULL;
    tide_tensor *sc = idx ? tide_scatter(view, 0, idx, upd, reduce) : NULL;
    tide_tensor *out = sc ? tide_reshape(sc, tide_ndim(data), tide_shape(data)) : NULL;
    tide_tensor *tmp[] = {rows, view, upd, col, idx, sc};
    onnx_release_all(tmp, 6);
    return onnx_set(c, out);
}

/* ---- OneHot, Compress, NonZero, ReverseSequence -------------------------------------------- */

/* OneHot: values[1] where an index (negative ones wrapped by depth) equals the position along
 * the new axis, values[0] elsewhere; indices out of range give a row of values[0]. */
static int run_one_hot(onnx_ctx *c)
{
    double depth_d;
    int rank = tide_ndim(c->in[0]), axis;
    if (onnx_input_scalar(c, 1, &depth_d) < 0 ||
        onnx_axis(c, onnx_attr_int(c->node, "axis", -1), rank + 1, &axis) < 0)
        return -1;
    int64_t depth = (int64_t)depth_d, n = 2, shape[TIDE_MAX_DIMS];
    if (depth < 1 || tide_numel(c->in[2]) != 2 || rank + 1 > TIDE_MAX_DIMS)
        return onnx_error(c, "depth %lld, %lld values and %d index dims (depth >= 1, 2 values)",
                          (long long)depth, (long long)tide_numel(c->in[2]), rank);
    for (int d = 0; d <= rank; d++)
        shape[d] = d == axis ? depth : 1;
    tide_tensor *ints = tide_get_dtype(c->in[0]) == TIDE_INT64 || tide_get_dtype(c->in[0]) ==
                        TIDE_INT32 ? tide_retain(c->in[0]) : tide_trunc(c->in[0]);
    tide_tensor *idx = ints ? onnx_wrap_negative_by(c, ints, depth) : NULL;
    tide_tensor *col = idx ? tide_unsqueeze(idx, axis) : NULL;
    tide_tensor *pos = col ? tide_arange_on(onnx_device_of(c), 0, (double)depth, 1, TIDE_INT64)
                           : NULL;
    tide_tensor *along = pos ? tide_reshape(pos, rank + 1, shape) : NULL;
    tide_tensor *hit = along ? tide_eq(col, along) : NULL;
    tide_tensor *vals = hit ? tide_reshape(c->in[2], 1, &n) : NULL;
    tide_tensor *off = vals ? tide_select(vals, 0, 0) : NULL;
    tide_tensor *on = off ? tide_select(vals, 0, 1) : NULL;
    tide_tensor *out = on ? tide_where(hit, on, off) : NULL;
    tide_tensor *tmp[] = {ints, idx, col, pos, along, hit, vals, off, on};
    onnx_release_all(tmp, 9);
    return onnx_set(c, out);
}

/* Compress: the slices along axis (or elements of the flattened input) whose condition is true;
 * a condition shorter than the dim leaves the rest out. */
static int run_compress(onnx_ctx *c)
{
    const Onnx__AttributeProto *a = onnx_attr(c->node, "axis");
    int axis = 0;
    int64_t n = tide_numel(c->in[0]);
    tide_tensor *x = a ? tide_retain(c->in[0]) : tide_reshape(c->in[0], 1, &n);
    if (!x)
        return onnx_fail(c);
    if (a && onnx_dim_axis(c, a->i, tide_ndim(x), &axis) < 0) {
        tide_release(x);
        return -1;
    }
    if (tide_ndim(c->in[1]) != 1 || tide_numel(c->in[1]) > tide_shape(x)[axis]) {
        tide_release(x);
        return onnx_error(c, "condition must be 1-D and no longer than the dim (%lld); it has "
                          "%lld elements", (long long)tide_shape(x)[axis],
                          (long long)tide_numel(c->in[1]));
    }
    int64_t cnt = -1;
    tide_tensor *nz = tide_nonzero(c->in[1]);
    tide_tensor *pos = nz ? tide_reshape(nz, 1, &cnt) : NULL;
    tide_tensor *out = pos ? tide_index_select(x, axis, pos) : NULL;
    tide_tensor *tmp[] = {x, nz, pos};
    onnx_release_all(tmp, 3);
    return onnx_set(c, out);
}

/* NonZero: [rank, count] coordinates (tide_nonzero gives them as rows). */
static int run_non_zero(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) == 0)
        return onnx_unsupported(c, "a 0-D input");
    tide_tensor *nz = tide_nonzero(c->in[0]);
    tide_tensor *t = nz ? tide_transpose(nz, 0, 1) : NULL;
    tide_tensor *out = t ? tide_contiguous(t) : NULL;
    tide_release(nz);
    tide_release(t);
    return onnx_set(c, out);
}

/* ReverseSequence: for batch entry b the first lens[b] steps along time_axis reversed, the rest
 * kept; a gather along time_axis with positions worked out on the host. */
static int run_reverse_sequence(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), ta, ba, n;
    if (onnx_dim_axis(c, onnx_attr_int(c->node, "time_axis", 0), rank, &ta) < 0 ||
        onnx_dim_axis(c, onnx_attr_int(c->node, "batch_axis", 1), rank, &ba) < 0)
        return -1;
    int64_t T = tide_shape(x)[ta], B = tide_shape(x)[ba];
    if (ta == ba || tide_numel(c->in[1]) != B)
        return onnx_error(c, "time_axis %d, batch_axis %d and %lld sequence lengths for %lld "
                          "batch entries", ta, ba, (long long)tide_numel(c->in[1]), (long long)B);
    int64_t *lens = td_malloc(sizeof *lens * (size_t)(B + T * B + 1)), *pos = lens + B;
    if (!lens)
        return onnx_fail(c);
    int rc = onnx_input_ints(c, 1, lens, (int)B, &n);
    for (int64_t b = 0; b < B && rc == 0; b++) {
        if (lens[b] < 0 || lens[b] > T)
            rc = onnx_error(c, "sequence length %lld is outside [0, %lld]", (long long)lens[b],
                            (long long)T);
        for (int64_t t = 0; t < T; t++) /* laid out in the order of the two axes in x */
            pos[ta < ba ? t * B + b : b * T + t] = t < lens[b] ? lens[b] - 1 - t : t;
    }
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0; d < rank; d++)
        shape[d] = d == ta ? T : d == ba ? B : 1;
    tide_tensor *p = rc == 0 ? onnx_int64_tensor(c, pos, rank, shape) : NULL;
    tide_tensor *idx = p ? tide_expand(p, rank, tide_shape(x)) : NULL;
    tide_tensor *out = idx ? tide_gather(x, ta, idx) : NULL;
    free(lens);
    tide_release(p);
    tide_release(idx);
    return rc < 0 ? rc : onnx_set(c, out);
}

const onnx_op onnx_ops_index[] = {
    {"Where", 9, 0, 3, 3, NULL, run_where, 0},
    {"GatherElements", 11, 0, 2, 2, NULL, run_gather_elements, 0},
    {"GatherND", 11, 0, 2, 2, NULL, run_gather_nd, 0},
    {"Scatter", 9, 10, 3, 3, NULL, run_scatter_elements, 0},
    {"ScatterElements", 11, 0, 3, 3, check_reduction, run_scatter_elements, 0},
    {"ScatterND", 11, 0, 3, 3, check_reduction, run_scatter_nd, 0},
    {"OneHot", 9, 0, 3, 3, NULL, run_one_hot, 0},
    {"Compress", 9, 0, 2, 2, NULL, run_compress, 0},
    {"NonZero", 9, 0, 1, 1, NULL, run_non_zero, 0},
    {"ReverseSequence", 10, 0, 2, 2, NULL, run_reverse_sequence, 0},
    {"Range", 11, 0, 3, 3, NULL, onnx_run_range, 0},
    {"ConstantOfShape", 9, 0, 1, 1, onnx_check_constant_of_shape, onnx_run_constant_of_shape,
     0},
    {"EyeLike", 9, 0, 1, 1, onnx_check_eye_like, onnx_run_eye_like, 0},
    {"Trilu", 14, 0, 1, 2, NULL, onnx_run_trilu, 0},
    {"Unique", 11, 0, 1, 1, NULL, onnx_run_unique, 0},
    {"HannWindow", 17, 0, 1, 1, NULL, onnx_run_hann_window, 0},
    {"HammingWindow", 17, 0, 1, 1, NULL, onnx_run_hamming_window, 0},
    {"BlackmanWindow", 17, 0, 1, 1, NULL, onnx_run_blackman_window, 0},
    {"TfIdfVectorizer", 9, 0, 1, 1, onnx_check_tfidf, onnx_run_tfidf, 0},
    {"MelWeightMatrix", 17, 0, 5, 5, NULL, onnx_run_mel_weight_matrix, 0},
    {"DFT", 17, 19, 1, 2, NULL, onnx_run_dft, 0},
    {"STFT", 17, 0, 2, 4, NULL, onnx_run_stft, 0},
    {"NonMaxSuppression", 10, 0, 2, 5, NULL, onnx_run_non_max_suppression, 0},
    {0},
};
