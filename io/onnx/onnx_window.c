/*
 * onnx_window.c — the window geometry of Conv, ConvTranspose and the pools (onnx_window.h).
 */
#include <stdio.h>
#include <string.h>

#include "onnx_window.h"

int onnx_check_auto_pad(const onnx_node *n, char *why, size_t size)
{
    char buf[32];
    const char *ap = onnx_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (strcmp(ap, "NOTSET") && strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER") &&
        strcmp(ap, "VALID")) {
        snprintf(why, size, "auto_pad '%s'", ap);
        return 1;
    }
    return 0;
}

/* Reads an ints attribute of nd entries into dst (dflt when absent). */
static int read_ints(const onnx_ctx *c, const char *name, int nd, int dflt, int *dst)
{
    int count;
    const int64_t *v = onnx_attr_ints(c->node, name, &count);
    for (int i = 0; i < nd; i++) {
        if (v && count != nd)
            return onnx_error(c, "%s has %d entries for %d spatial dims", name, count, nd);
        int64_t x = v ? v[i] : dflt;
        if (x < 1 || x > (1 << 20))
            return onnx_error(c, "%s[%d] = %lld must be in [1, 2^20]", name, i, (long long)x);
        dst[i] = (int)x;
    }
    return 0;
}

/* Explicit pads: begin in pads[0..nd), end in pads[nd..2nd). */
static int read_pads(const onnx_ctx *c, onnx_window *w)
{
    int count, nd = w->nd;
    const int64_t *p = onnx_attr_ints(c->node, "pads", &count);
    if (p && count != 2 * nd)
        return onnx_error(c, "pads has %d entries for %d spatial dims", count, nd);
    for (int i = 0; i < nd; i++) {
        w->begin[i] = p ? p[i] : 0;
        w->end[i] = p ? p[nd + i] : 0;
        if (w->begin[i] < 0 || w->end[i] < 0 || w->begin[i] > (1 << 20) || w->end[i] > (1 << 20))
            return onnx_error(c, "pads must be in [0, 2^20]");
    }
    return 0;
}

/* The output size of dim i from its pads. */
static int64_t out_size(const onnx_window *w, int i, bool ceil_mode)
{
    int64_t span = (int64_t)(w->kernel[i] - 1) * w->dilation[i] + 1;
    int64_t room = w->in[i] + w->begin[i] + w->end[i] - span;
    if (room < 0)
        return 0;
    int64_t s = w->stride[i], out = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (out - 1) * s >= w->in[i] + w->begin[i])
        out--;
    return out;
}

/* auto_pad SAME_*: out = ceil(in / stride), the total pad split (the odd one after for UPPER). */
static void same_pads(onnx_window *w, bool upper)
{
    for (int i = 0; i < w->nd; i++) {
        int64_t out = (w->in[i] + w->stride[i] - 1) / w->stride[i];
        int64_t span = (int64_t)(w->kernel[i] - 1) * w->dilation[i] + 1;
        int64_t total = (out - 1) * w->stride[i] + span - w->in[i];
        total = total < 0 ? 0 : total;
        w->begin[i] = upper ? total / 2 : total - total / 2;
        w->end[i] = total - w->begin[i];
    }
}

int onnx_window_read(const onnx_ctx *c, const tide_tensor *x, const int64_t *kernel,
                     bool ceil_mode, onnx_window *w)
{
    int rank = tide_ndim(x);
    if (rank < 3 || rank > 2 + ONNX_MAX_SPATIAL)
        return onnx_error(c, "input has %d dims; 3 to %d supported ([N, C, spatial...])", rank,
                          2 + ONNX_MAX_SPATIAL);
    memset(w, 0, sizeof *w);
    w->nd = rank - 2;
    for (int i = 0; i < w->nd; i++)
        w->in[i] = tide_shape(x)[i + 2];
    int count;
    const int64_t *ks = onnx_attr_ints(c->node, "kernel_shape", &count);
    if (!ks && !kernel)
        return onnx_error(c, "kernel_shape is missing");
    if (ks && count != w->nd)
        return onnx_error(c, "kernel_shape has %d entries for %d spatial dims", count, w->nd);
    for (int i = 0; i < w->nd; i++) {
        int64_t k = ks ? ks[i] : kernel[i];
        if (k < 1 || k > (1 << 20) || (kernel && k != kernel[i]))
            return onnx_error(c, "kernel size %lld in dim %d is invalid (weight has %lld)",
                              (long long)k, i, kernel ? (long long)kernel[i] : -1LL);
        w->kernel[i] = (int)k;
    }
    if (read_ints(c, "strides", w->nd, 1, w->stride) || read_ints(c, "dilations", w->nd, 1,
                                                                   w->dilation))
        return -1;
    char buf[32];
    const char *ap = onnx_attr_string(c->node, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"))
        same_pads(w, !strcmp(ap, "SAME_UPPER"));
    else if (strcmp(ap, "VALID") && read_pads(c, w))
        return -1;
    for (int i = 0; i < w->nd; i++)
        w->out[i] = out_size(w, i, ceil_mode);
    return 0;
}

bool onnx_window_symmetric(const onnx_window *w)
{
    for (int i = 0; i < w->nd; i++)
        if (w->begin[i] != w->end[i])
            return false;
    return true;
}

void onnx_window_pads(const onnx_window *w, int *pads)
{
    for (int i = 0; i < w->nd; i++)
        pads[i] = (int)w->begin[i];
}

tide_tensor *onnx_window_pad(const onnx_window *w, const tide_tensor *x, double value)
{
    int64_t pads[2 * ONNX_MAX_SPATIAL] = {0}, cut[ONNX_MAX_SPATIAL] = {0};
    bool any_cut = false;
    for (int i = 0; i < w->nd; i++) { /* tide_pad's first pair is the last dim */
        int64_t span = (int64_t)(w->kernel[i] - 1) * w->dilation[i] + 1;
        int64_t need = w->out[i] > 0 ? (w->out[i] - 1) * w->stride[i] + span : 0;
        int64_t after = need - w->in[i] - w->begin[i];
        int j = w->nd - 1 - i;
        pads[2 * j] = w->begin[i];
        pads[2 * j + 1] = after > 0 ? after : 0;
        cut[i] = after < 0 ? need : -1;
        any_cut |= after < 0;
    }
    tide_tensor *p = tide_pad(x, pads, 2 * w->nd, value);
    for (int i = 0; p && any_cut && i < w->nd; i++)
        if (cut[i] >= 0) {
            tide_tensor *s = tide_slice(p, i + 2, 0, cut[i], 1);
            tide_release(p);
            p = s;
        }
    return p;
}
