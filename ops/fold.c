/*
 * fold.c — F.unfold (im2col) and F.fold (col2im) on [N, C, H, W] / [N, C*kh*kw, L], as
 * composites: unfold stacks the kh*kw kernel taps, each a strided slice of the padded input
 * (a copy of bits, so infinities and NaNs stay where they are); fold is its adjoint, each tap
 * placed back at its positions (td_window_place) and summed, which is also unfold's gradient.
 */
#include <stdlib.h>

#include "conv_nd.h"

typedef struct fold_geom {
    int64_t k[2], d[2], p[2], s[2], out[2];
} fold_geom;

static int read_geom(const char *op, const int kernel[2], const int dilation[2],
                     const int padding[2], const int stride[2], fold_geom *g)
{
    if (!kernel)
        return td_error("%s: kernel_size is NULL", op);
    if (td_read_ints(op, "kernel_size", kernel, 2, 1, 1, g->k) < 0 ||
        td_read_ints(op, "dilation", dilation, 2, 1, 1, g->d) < 0 ||
        td_read_ints(op, "padding", padding, 2, 0, 0, g->p) < 0 ||
        td_read_ints(op, "stride", stride, 2, 1, 1, g->s) < 0)
        return -1;
    return 0;
}

/* The number of windows along each dim for a plane of size hw, or an error naming op. */
static int windows(const char *op, const int64_t hw[2], fold_geom *g, const tide_tensor *t)
{
    for (int i = 0; i < 2; i++) {
        g->out[i] = td_window_out_len(hw[i], g->k[i], g->s[i], g->p[i], g->d[i]);
        if (hw[i] < 1 || g->out[i] < 1) {
            char s[200];
            return td_error("%s: kernel (%lld, %lld) with dilation (%lld, %lld) does not fit a "
                            "(%lld, %lld) plane padded by (%lld, %lld) (operand %s)",
                            op, (long long)g->k[0], (long long)g->k[1], (long long)g->d[0],
                            (long long)g->d[1], (long long)hw[0], (long long)hw[1],
                            (long long)g->p[0], (long long)g->p[1], td_describe(s, sizeof s, t));
        }
    }
    return 0;
}

static int check_float(const char *op, const tide_tensor *t, int ndim, const char *layout)
{
    if (td_check_tensor(op, "input", t) < 0)
        return -1;
    char s[200];
    if (t->ndim != ndim || !tide_dtype_is_floating((tide_dtype)t->dtype))
        return td_error("%s: expects a floating %d-D input %s, got %s", op, ndim, layout,
                        td_describe(s, sizeof s, t));
    return 0;
}

static tide_tensor *unfold_body(const tide_tensor *x, const fold_geom *g)
{
    int64_t kk = g->k[0] * g->k[1];
    tide_tensor **taps = td_calloc((size_t)kk, sizeof *taps);
    tide_tensor *xh = td_pad_dim(x, 2, g->p[0], g->p[0], 0);
    tide_tensor *xp = xh ? td_pad_dim(xh, 3, g->p[1], g->p[1], 0) : NULL;
    tide_tensor *out = NULL;
    int64_t t = 0;
    if (!taps)
        td_error("unfold: out of memory for %lld kernel taps", (long long)kk);
    for (; taps && xp && t < kk; t++) {
        int64_t i = t / g->k[1], j = t % g->k[1];
        tide_tensor *rows = td_window_slice(xp, 2, i, g->d[0], g->s[0], g->out[0]);
        taps[t] = rows ? td_window_slice(rows, 3, j, g->d[1], g->s[1], g->out[1]) : NULL;
        tide_release(rows);
        if (!taps[t])
            break;
    }
    if (taps && t == kk) { /* [N, C, kh*kw, OH, OW] -> [N, C*kh*kw, OH*OW] */
        tide_tensor *st = tide_stack(taps, (int)kk, 2);
        int64_t shape[3] = {x->shape[0], x->shape[1] * kk, g->out[0] * g->out[1]};
        out = st ? tide_reshape(st, 3, shape) : NULL;
        tide_release(st);
    }
    for (int64_t u = 0; taps && u < t; u++)
        tide_release(taps[u]);
    free(taps);
    tide_release(xh);
    tide_release(xp);
    return out;
}

tide_tensor *tide_unfold_patches(const tide_tensor *x, const int kernel[2], const int dilation[2],
                                 const int padding[2], const int stride[2])
{
    fold_geom g;
    if (check_float("unfold", x, 4, "[N, C, H, W]") < 0 ||
        read_geom("unfold", kernel, dilation, padding, stride, &g) < 0 ||
        windows("unfold", x->shape + 2, &g, x) < 0)
        return NULL;
    TD_IN_OP("unfold", unfold_body(x, &g));
}

static tide_tensor *fold_body(const tide_tensor *cols, const int64_t hw[2], const fold_geom *g)
{
    int64_t kk = g->k[0] * g->k[1], n = cols->shape[0], c = cols->shape[1] / kk;
    int64_t shape[5] = {n, c, kk, g->out[0], g->out[1]};
    tide_tensor *c5 = tide_reshape(cols, 5, shape);
    tide_tensor *sum = NULL;
    for (int64_t t = 0; c5 && t < kk; t++) {
        int64_t i = t / g->k[1], j = t % g->k[1];
        tide_tensor *tap = tide_select(c5, 2, t); /* [N, C, OH, OW] */
        tide_tensor *rows =
            tap ? td_window_place(tap, 2, i * g->d[0] - g->p[0], g->s[0], hw[0]) : NULL;
        tide_tensor *placed =
            rows ? td_window_place(rows, 3, j * g->d[1] - g->p[1], g->s[1], hw[1]) : NULL;
        tide_tensor *next = placed ? (sum ? tide_add(sum, placed) : tide_retain(placed)) : NULL;
        tide_release(tap);
        tide_release(rows);
        tide_release(placed);
        tide_release(sum);
        sum = next;
        if (!sum)
            break;
    }
    tide_release(c5);
    return sum;
}

tide_tensor *tide_fold_patches(const tide_tensor *cols, const int64_t output_size[2],
                               const int kernel[2], const int dilation[2], const int padding[2],
                               const int stride[2])
{
    fold_geom g;
    if (check_float("fold", cols, 3, "[N, C*kh*kw, L]") < 0 ||
        read_geom("fold", kernel, dilation, padding, stride, &g) < 0)
        return NULL;
    if (!output_size) {
        td_error("fold: output_size is NULL");
        return NULL;
    }
    if (windows("fold", output_size, &g, cols) < 0)
        return NULL;
    int64_t kk = g.k[0] * g.k[1];
    char s[200];
    if (cols->shape[1] % kk || cols->shape[2] != g.out[0] * g.out[1]) {
        td_error("fold: input %s must be [N, C*%lld, %lld] for kernel (%lld, %lld) and "
                 "output_size (%lld, %lld)",
                 td_describe(s, sizeof s, cols), (long long)kk,
                 (long long)(g.out[0] * g.out[1]), (long long)g.k[0], (long long)g.k[1],
                 (long long)output_size[0], (long long)output_size[1]);
        return NULL;
    }
    TD_IN_OP("fold", fold_body(cols, output_size, &g));
}
