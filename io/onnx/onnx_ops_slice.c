/*
 * onnx_ops_slice.c — ONNX's Slice, Split and Pad, and the index helpers of onnx_ops_move.h.
 * Starts, ends, split sizes and pads are read on the host (attributes before opsets 10/13/11,
 * inputs after); the tensors move through tide_slice, tide_flip and tide_pad_mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

const char *onnx_device_of(const onnx_ctx *c)
{
    return c->m->device ? c->m->device : tide_get_default_device();
}

tide_tensor *onnx_int64_tensor(const onnx_ctx *c, const int64_t *v, int ndim,
                               const int64_t *shape)
{
    return tide_from_data_on(onnx_device_of(c), v, ndim, shape, TIDE_INT64);
}

tide_tensor *onnx_wrap_negative(const tide_tensor *idx, const tide_tensor *size)
{
    tide_tensor *wide = tide_cast(idx, TIDE_INT64);
    tide_tensor *zero = wide ? tide_zeros_on(tide_device_name(wide), 0, NULL, TIDE_INT64) : NULL;
    tide_tensor *neg = zero ? tide_lt(wide, zero) : NULL;
    tide_tensor *shifted = neg ? tide_add(wide, size) : NULL;
    tide_tensor *out = shifted ? tide_where(neg, shifted, wide) : NULL;
    tide_tensor *tmp[] = {wide, zero, neg, shifted};
    onnx_release_all(tmp, 4);
    return out;
}

tide_tensor *onnx_wrap_negative_by(const onnx_ctx *c, const tide_tensor *idx, int64_t size)
{
    tide_tensor *s = onnx_int64_tensor(c, &size, 0, NULL);
    tide_tensor *out = s ? onnx_wrap_negative(idx, s) : NULL;
    tide_release(s);
    return out;
}

int onnx_dim_axis(const onnx_ctx *c, int64_t axis, int rank, int *out)
{
    if (rank == 0)
        return onnx_error(c, "the input is 0-D: it has no axis %lld", (long long)axis);
    return onnx_axis(c, axis, rank, out);
}

int onnx_check_index(const onnx_ctx *c, int k)
{
    tide_dtype d = tide_get_dtype(c->in[k]);
    if (d != TIDE_INT32 && d != TIDE_INT64)
        return onnx_error(c, "input %d (indices) is %s; it must be int32 or int64", k,
                          tide_dtype_name(d));
    return 0;
}

void onnx_release_all(tide_tensor **ts, int n)
{
    for (int i = 0; i < n; i++)
        tide_release(ts[i]);
}

/* ---- Slice ---------------------------------------------------------------------------------- */

/* One int list of a Slice: the attribute before opset 10, input k after (absent: count 0). */
static int slice_list(onnx_ctx *c, const char *attr, int k, int64_t *dst, int *count)
{
    *count = 0;
    if (c->m->opset >= 10)
        return k < c->nin && c->in[k] ? onnx_input_ints(c, k, dst, TIDE_MAX_DIMS, count) : 0;
    int n;
    const int64_t *a = onnx_attr_ints(c->node, attr, &n);
    if (n > TIDE_MAX_DIMS)
        return onnx_error(c, "attribute %s has %d values; at most %d", attr, n, TIDE_MAX_DIMS);
    if (n) /* a is NULL when the attribute is absent: memcpy from NULL is undefined */
        memcpy(dst, a, sizeof *dst * (size_t)n);
    *count = n;
    return 0;
}

/* x[start:end:step] along d with ONNX's clamping; a negative step walks backwards. */
static tide_tensor *slice_axis(const tide_tensor *x, int d, int64_t start, int64_t end,
                               int64_t step)
{
    int64_t dim = tide_shape(x)[d];
    if (start < 0)
        start += dim;
    if (end < 0)
        end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        return tide_slice(x, d, start, end > start ? end : start, step);
    }
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    int64_t n = start > end ? 1 + (start - end - 1) / -step : 0; /* no overflow for any step */
    if (n == 0)
        return tide_slice(x, d, 0, 0, 1);
    tide_tensor *fwd = tide_slice(x, d, start + (n - 1) * step, start + 1, -step);
    tide_tensor *out = fwd ? tide_flip(fwd, &d, 1) : NULL;
    tide_release(fwd);
    return out;
}

int onnx_run_slice(onnx_ctx *c)
{
    int64_t starts[TIDE_MAX_DIMS], ends[TIDE_MAX_DIMS], axes[TIDE_MAX_DIMS], steps[TIDE_MAX_DIMS];
    int ns, ne, na, nst, rank = tide_ndim(c->in[0]);
    if (slice_list(c, "starts", 1, starts, &ns) < 0 || slice_list(c, "ends", 2, ends, &ne) < 0 ||
        slice_list(c, "axes", 3, axes, &na) < 0 || slice_list(c, "steps", 4, steps, &nst) < 0)
        return -1;
    if (ns != ne || (na && na != ns) || (nst && nst != ns))
        return onnx_error(c, "starts, ends, axes and steps have %d, %d, %d and %d values", ns, ne,
                          na, nst);
    bool seen[TIDE_MAX_DIMS] = {false};
    tide_tensor *cur = tide_retain(c->in[0]);
    for (int i = 0; i < ns && cur; i++) {
        int d;
        int64_t step = nst ? steps[i] : 1;
        int bad = onnx_dim_axis(c, na ? axes[i] : i, rank, &d) < 0 ? -1
                  : seen[d] || step == 0 || step == INT64_MIN
                      ? onnx_error(c, "axis %d is repeated or its step (%lld) is out of range", d,
                                   (long long)step)
                      : 0;
        if (bad) {
            tide_release(cur);
            return -1;
        }
        seen[d] = true;
        tide_tensor *next = slice_axis(cur, d, starts[i], ends[i], step);
        tide_release(cur);
        cur = next;
    }
    return onnx_set(c, cur);
}

/* ---- Split ---------------------------------------------------------------------------------- */

/* The sizes of Split's outputs along a dim of size dim: given (an input at opset 1 and from
 * opset 13, the attribute otherwise), num_outputs (opset 18: ceil-sized chunks, the last
 * smaller), or equal parts. */
static int split_sizes(onnx_ctx *c, int64_t dim, int64_t *sizes, int nout)
{
    int n = 0;
    if ((c->m->opset >= 13 || c->m->opset == 1) && c->nin > 1 && c->in[1]) {
        if (onnx_input_ints(c, 1, sizes, nout, &n) < 0)
            return -1;
    } else if (c->m->opset < 13 && onnx_attr(c->node, "split")) {
        /* opsets 1-12 */
        const int64_t *a = onnx_attr_ints(c->node, "split", &n);
        if (n != nout)
            return onnx_error(c, "split has %d sizes for %d outputs", n, nout);
        memcpy(sizes, a, sizeof *sizes * (size_t)n);
    } else {
        int64_t chunk = dim / nout;
        if (c->m->opset >= 18 && onnx_attr(c->node, "num_outputs"))
            chunk = (dim + nout - 1) / nout;
        else if (dim % nout)
            return onnx_error(c, "a dim of %lld does not split into %d equal parts",
                              (long long)dim, nout);
        for (int k = 0; k < nout; k++) {
            int64_t left = dim - chunk * k;
            sizes[k] = left < chunk ? (left > 0 ? left : 0) : chunk;
        }
        n = nout;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0)
            return onnx_error(c, "split size %d is %lld", k, (long long)sizes[k]);
        total += sizes[k];
    }
    if (n != nout || total != dim)
        return onnx_error(c, "split sizes (%d of them) add up to %lld; the dim is %lld with %d "
                          "outputs", n, (long long)total, (long long)dim, nout);
    return 0;
}

int onnx_run_split(onnx_ctx *c)
{
    int axis, nout = c->nout;
    if (nout < 1)
        return onnx_error(c, "no outputs");
    if (onnx_dim_axis(c, onnx_attr_int(c->node, "axis", 0), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    int64_t *sizes = td_malloc(sizeof *sizes * (size_t)nout);
    if (!sizes)
        return onnx_fail(c);
    int rc = split_sizes(c, tide_shape(c->in[0])[axis], sizes, nout);
    int64_t start = 0;
    for (int k = 0; k < nout && rc == 0; start += sizes[k], k++)
        if (!(c->out[k] = tide_slice(c->in[0], axis, start, start + sizes[k], 1)))
            rc = onnx_fail(c);
    free(sizes);
    return rc;
}

/* ---- Pad ------------------------------------------------------------------------------------ */

static int pad_mode(const onnx_node *n, tide_padding_mode *mode)
{
    char buf[32];
    const char *m = onnx_attr_string(n, "mode", "constant", buf, sizeof buf);
    if (!strcmp(m, "constant"))
        *mode = TIDE_PAD_CONSTANT;
    else if (!strcmp(m, "reflect"))
        *mode = TIDE_PAD_REFLECT;
    else if (!strcmp(m, "edge"))
        *mode = TIDE_PAD_REPLICATE;
    else if (!strcmp(m, "wrap"))
        *mode = TIDE_PAD_CIRCULAR;
    else
        return -1;
    return 0;
}

int onnx_check_pad(const onnx_node *n, char *why, size_t size)
{
    tide_padding_mode mode;
    if (pad_mode(n, &mode) == 0)
        return 0;
    char buf[32];
    snprintf(why, size, "Pad mode '%s' is not supported (constant, reflect, edge, wrap are)",
             onnx_attr_string(n, "mode", "", buf, sizeof buf));
    return 1;
}

/* ONNX's pads ([begins..., ends...] over the axes) as a begin and an end per dim. */
static int read_pads(onnx_ctx *c, int rank, int64_t *begin, int64_t *end)
{
    int64_t pads[2 * TIDE_MAX_DIMS], axes[TIDE_MAX_DIMS];
    int np, na = rank;
    bool has_axes = c->m->opset >= 18 && c->nin > 3 && c->in[3];
    for (int i = 0; i < rank; i++)
        axes[i] = i;
    if (c->m->opset >= 11) {
        if (onnx_input_ints(c, 1, pads, 2 * TIDE_MAX_DIMS, &np) < 0)
            return -1;
        if (has_axes && onnx_input_ints(c, 3, axes, TIDE_MAX_DIMS, &na) < 0)
            return -1;
    } else {
        const char *name = c->m->opset < 2 ? "paddings" : "pads"; /* renamed at opset 2 */
        const int64_t *a = onnx_attr_ints(c->node, name, &np);
        if (np > 2 * TIDE_MAX_DIMS)
            return onnx_error(c, "pads has %d values", np);
        memcpy(pads, a, sizeof *pads * (size_t)np);
    }
    if (np != 2 * na)
        return onnx_error(c, "pads has %d values for %d axes", np, na);
    for (int d = 0; d < rank; d++)
        begin[d] = end[d] = 0;
    for (int i = 0; i < na; i++) {
        int d;
        if (onnx_dim_axis(c, axes[i], rank, &d) < 0)
            return -1;
        begin[d] = pads[i];
        end[d] = pads[na + i];
    }
    return 0;
}

int onnx_run_pad(onnx_ctx *c)
{
    int rank = tide_ndim(c->in[0]);
    int64_t begin[TIDE_MAX_DIMS], end[TIDE_MAX_DIMS], pairs[2 * TIDE_MAX_DIMS];
    double value = onnx_attr_float(c->node, "value", 0);
    tide_padding_mode mode = TIDE_PAD_CONSTANT;
    pad_mode(c->node, &mode);
    if (read_pads(c, rank, begin, end) < 0)
        return -1;
    if (c->m->opset >= 11 && c->nin > 2 && c->in[2] && onnx_input_scalar(c, 2, &value) < 0)
        return -1;
    /* negative pads crop first; tide_pad_mode then adds the positive ones */
    tide_tensor *cur = tide_retain(c->in[0]);
    for (int d = 0; d < rank && cur; d++) {
        if (begin[d] >= 0 && end[d] >= 0)
            continue;
        int64_t dim = tide_shape(cur)[d];
        int64_t lo = begin[d] < 0 ? -begin[d] : 0, hi = dim + (end[d] < 0 ? end[d] : 0);
        if (hi < lo) {
            tide_release(cur);
            return onnx_error(c, "pads %lld and %lld crop away more than dim %d's %lld elements",
                              (long long)begin[d], (long long)end[d], d, (long long)dim);
        }
        tide_tensor *next = tide_slice(cur, d, lo, hi, 1);
        tide_release(cur);
        cur = next;
    }
    if (!cur)
        return onnx_fail(c);
    for (int i = 0; i < rank; i++) {
        pairs[2 * i] = begin[rank - 1 - i] > 0 ? begin[rank - 1 - i] : 0;
        pairs[2 * i + 1] = end[rank - 1 - i] > 0 ? end[rank - 1 - i] : 0;
    }
    tide_tensor *out = tide_pad_mode(cur, pairs, 2 * rank, mode, value);
    tide_release(cur);
    return onnx_set(c, out);
}
