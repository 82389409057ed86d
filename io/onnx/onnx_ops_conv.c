/*
 * onnx_ops_conv.c — ONNX's convolutions and pools: Conv, ConvTranspose, MaxPool, AveragePool,
 * GlobalAveragePool, GlobalMaxPool, over 1 to 3 spatial dims. ONNX pads may differ at the two
 * ends of a dim (and auto_pad computes them from the input): tide's kernels pad both ends
 * alike, so uneven pads are applied first with tide_pad (zeros for Conv, -inf for MaxPool).
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

enum { MAX_SP = 3 };

/* A node's spatial geometry, attributes resolved against one input's shape. */
typedef struct geom {
    int nd;
    int64_t in[MAX_SP];
    int kernel[MAX_SP], stride[MAX_SP], dil[MAX_SP];
    int64_t pb[MAX_SP], pe[MAX_SP]; /* pads at the begin and end of each dim */
} geom;

static int read_ints(const onnx_ctx *c, const char *name, int nd, int dflt, int *dst)
{
    int count = 0;
    const int64_t *v = onnx_attr_ints(c->node, name, &count);
    for (int i = 0; i < nd; i++)
        dst[i] = dflt;
    if (!v)
        return 0;
    if (count != nd)
        return onnx_error(c, "%s has %d values for %d spatial dims", name, count, nd);
    for (int i = 0; i < nd; i++) {
        if (v[i] < 1 || v[i] > INT32_MAX)
            return onnx_error(c, "%s[%d] = %lld must be positive", name, i, (long long)v[i]);
        dst[i] = (int)v[i];
    }
    return 0;
}

/* auto_pad: "NOTSET" 0, "VALID" 1, "SAME_UPPER" 2, "SAME_LOWER" 3, else -1. */
static int auto_pad_kind(const onnx_node *n)
{
    char buf[32];
    const char *s = onnx_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    static const char *const names[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i]) || (i == 0 && !*s))
            return i;
    return -1;
}

/* Fills g from x's shape and the attributes; kernel from kernel_shape, else from weight_k. */
static int geom_read(const onnx_ctx *c, const tide_tensor *x, const int *weight_k, geom *g)
{
    g->nd = tide_ndim(x) - 2;
    if (g->nd < 1 || g->nd > MAX_SP)
        return onnx_error(c, "input must have 1 to 3 spatial dims after [N, C]; it has %d dims",
                          tide_ndim(x));
    for (int i = 0; i < g->nd; i++)
        g->in[i] = tide_shape(x)[i + 2];
    int count = 0;
    if (onnx_attr_ints(c->node, "kernel_shape", &count) || !weight_k) {
        if (read_ints(c, "kernel_shape", g->nd, 0, g->kernel) < 0)
            return -1;
        if (!g->kernel[0])
            return onnx_error(c, "kernel_shape is required");
    } else {
        memcpy(g->kernel, weight_k, sizeof(int) * (size_t)g->nd);
    }
    if (read_ints(c, "strides", g->nd, 1, g->stride) < 0 ||
        read_ints(c, "dilations", g->nd, 1, g->dil) < 0)
        return -1;
    const int64_t *pads = onnx_attr_ints(c->node, "pads", &count);
    if (pads && count != 2 * g->nd)
        return onnx_error(c, "pads has %d values for %d spatial dims", count, g->nd);
    for (int i = 0; i < g->nd; i++) {
        g->pb[i] = pads ? pads[i] : 0;
        g->pe[i] = pads ? pads[i + g->nd] : 0;
        if (g->pb[i] < 0 || g->pe[i] < 0 || g->pb[i] > INT32_MAX || g->pe[i] > INT32_MAX)
            return onnx_error(c, "pads must be non-negative");
    }
    int kind = auto_pad_kind(c->node);
    for (int i = 0; kind >= 1 && i < g->nd; i++) {
        int64_t span = (int64_t)(g->kernel[i] - 1) * g->dil[i] + 1, total = 0;
        if (kind >= 2) {
            int64_t out = (g->in[i] + g->stride[i] - 1) / g->stride[i];
            total = (out - 1) * g->stride[i] + span - g->in[i];
            total = total < 0 ? 0 : total;
        }
        g->pb[i] = kind == 3 ? total - total / 2 : total / 2;
        g->pe[i] = total - g->pb[i];
    }
    return 0;
}

/* x padded by (pb, pe) per spatial dim with value, and the pads left for the kernel (even
 * ones, passed through when allowed). */
static tide_tensor *pad_uneven(const tide_tensor *x, const geom *g, double value, bool keep_even,
                               int *sym)
{
    int64_t pads[2 * MAX_SP];
    bool even = keep_even;
    for (int i = 0; i < g->nd; i++)
        even = even && g->pb[i] == g->pe[i];
    for (int i = 0; i < g->nd; i++) {
        sym[i] = even ? (int)g->pb[i] : 0;
        pads[2 * (g->nd - 1 - i)] = even ? 0 : g->pb[i];
        pads[2 * (g->nd - 1 - i) + 1] = even ? 0 : g->pe[i];
    }
    return even ? tide_retain((tide_tensor *)x) : tide_pad(x, pads, 2 * g->nd, value);
}

static int check_auto_pad(const onnx_node *n, char *why, size_t size)
{
    if (auto_pad_kind(n) < 0) {
        snprintf(why, size, "this auto_pad value is not supported");
        return 1;
    }
    return 0;
}

/* Conv: x [N, C, sp...], W [M, C/group, k...], optional bias [M]. */
static int run_conv(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *w = c->in[1];
    if (tide_ndim(w) != tide_ndim(x))
        return onnx_error(c, "X has %d dims but W has %d", tide_ndim(x), tide_ndim(w));
    int wk[MAX_SP] = {0};
    for (int i = 0; i + 2 < tide_ndim(w) && i < MAX_SP; i++)
        wk[i] = (int)tide_shape(w)[i + 2];
    geom g;
    if (geom_read(c, x, wk, &g) < 0)
        return -1;
    for (int i = 0; i < g.nd; i++)
        if (g.kernel[i] != wk[i])
            return onnx_error(c, "kernel_shape[%d] = %d differs from W's %d", i, g.kernel[i],
                              wk[i]);
    int64_t group = onnx_attr_int(c->node, "group", 1);
    if (group < 1 || group > INT32_MAX)
        return onnx_error(c, "group = %lld must be positive", (long long)group);
    int sym[MAX_SP];
    tide_tensor *xp = pad_uneven(x, &g, 0.0, true, sym);
    tide_tensor *y = xp ? tide_conv_nd(g.nd, xp, w, c->nin > 2 ? c->in[2] : NULL, g.stride, sym,
                                       g.dil, (int)group)
                        : NULL;
    tide_release(xp);
    return onnx_set(c, y);
}

/* y (without bias) cut or zero-extended to [start, start + len) along spatial dim i. */
static tide_tensor *window(tide_tensor *y, int dim, int64_t start, int64_t len)
{
    int64_t have = tide_shape(y)[dim];
    tide_tensor *s = tide_slice(y, dim, start, start + len, 1);
    tide_release(y);
    if (!s || start + len <= have)
        return s;
    int64_t pads[16] = {0};
    pads[2 * (tide_ndim(s) - 1 - dim) + 1] = start + len - (have > start ? have : start);
    tide_tensor *p = tide_pad(s, pads, 2 * (tide_ndim(s) - dim), 0.0);
    tide_release(s);
    return p;
}

static tide_tensor *add_channel_bias(tide_tensor *y, const tide_tensor *bias)
{
    if (!y || !bias)
        return y;
    int64_t shape[5] = {-1, 1, 1, 1, 1};
    tide_tensor *b = tide_reshape(bias, tide_ndim(y) - 1, shape);
    tide_tensor *out = b ? tide_add(y, b) : NULL;
    tide_release(b);
    tide_release(y);
    return out;
}

/* ConvTranspose: computed unpadded, then the output window ONNX's pads (or output_shape) pick. */
static int run_conv_transpose(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *w = c->in[1];
    if (tide_ndim(w) != tide_ndim(x))
        return onnx_error(c, "X has %d dims but W has %d", tide_ndim(x), tide_ndim(w));
    int wk[MAX_SP] = {0}, op[MAX_SP], zero[MAX_SP] = {0};
    for (int i = 0; i + 2 < tide_ndim(w) && i < MAX_SP; i++)
        wk[i] = (int)tide_shape(w)[i + 2];
    geom g;
    if (geom_read(c, x, wk, &g) < 0)
        return -1;
    int64_t group = onnx_attr_int(c->node, "group", 1);
    if (group < 1 || group > INT32_MAX)
        return onnx_error(c, "group = %lld must be positive", (long long)group);
    int count = 0, kind = auto_pad_kind(c->node);
    const int64_t *opad = onnx_attr_ints(c->node, "output_padding", &count);
    if (opad && count != g.nd)
        return onnx_error(c, "output_padding has %d values for %d spatial dims", count, g.nd);
    const int64_t *oshape = onnx_attr_ints(c->node, "output_shape", &count);
    if (oshape && count != g.nd && count != g.nd + 2)
        return onnx_error(c, "output_shape has %d values for %d spatial dims", count, g.nd);
    int64_t start[MAX_SP], len[MAX_SP];
    for (int i = 0; i < g.nd; i++) {
        op[i] = opad ? (int)opad[i] : 0;
        int64_t full = g.stride[i] * (g.in[i] - 1) + op[i] + (int64_t)(wk[i] - 1) * g.dil[i] + 1;
        if (oshape || kind >= 2) {
            len[i] = oshape ? oshape[i + count - g.nd] : g.in[i] * g.stride[i];
            int64_t total = full - len[i];
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor, as ONNX's */
            start[i] = kind == 2 ? half : total - half;
        } else {
            start[i] = kind == 1 ? 0 : g.pb[i];
            len[i] = full - (kind == 1 ? 0 : g.pb[i] + g.pe[i]);
        }
        if (len[i] < 1 || start[i] < 0)
            return onnx_error(c, "the output's spatial dim %d would have %lld elements", i,
                              (long long)len[i]);
    }
    tide_tensor *y = tide_conv_transpose_nd(g.nd, x, w, NULL, g.stride, zero, zero, (int)group,
                                            g.dil);
    for (int i = 0; y && i < g.nd; i++)
        y = window(y, i + 2, start[i], len[i]);
    return onnx_set(c, add_channel_bias(y, c->nin > 2 ? c->in[2] : NULL));
}

/* Checks run before outputs get ids: a named output is a wanted one. */
static bool output_wanted(const onnx_node *n, int k)
{
    return n->p->n_output > (size_t)k && n->p->output[k] && n->p->output[k][0];
}

static int check_max_pool(const onnx_node *n, char *why, size_t size)
{
    int count = 0;
    const int64_t *d = onnx_attr_ints(n, "dilations", &count);
    for (int i = 0; d && i < count; i++)
        if (d[i] != 1) {
            snprintf(why, size, "dilations other than 1 are not supported");
            return 1;
        }
    if (output_wanted(n, 1)) {
        snprintf(why, size, "the Indices output is not supported");
        return 1;
    }
    return check_auto_pad(n, why, size);
}

static int run_max_pool(onnx_ctx *c)
{
    geom g;
    if (geom_read(c, c->in[0], NULL, &g) < 0)
        return -1;
    bool fits = true; /* tide pads evenly up to half the kernel */
    for (int i = 0; i < g.nd; i++)
        fits = fits && 2 * g.pb[i] <= g.kernel[i];
    /* tide pools floating dtypes; 8- to 32-bit integers are exact in float64 */
    tide_dtype dt = tide_get_dtype(c->in[0]);
    bool integer = !tide_dtype_is_floating(dt);
    tide_tensor *x = integer ? tide_cast(c->in[0], TIDE_FLOAT64) : tide_retain(c->in[0]);
    int sym[MAX_SP];
    tide_tensor *xp = x ? pad_uneven(x, &g, -INFINITY, fits, sym) : NULL;
    tide_tensor *y = xp ? tide_max_pool_nd(g.nd, xp, g.kernel, g.stride, sym,
                                           onnx_attr_int(c->node, "ceil_mode", 0) != 0, NULL)
                        : NULL;
    tide_release(x);
    tide_release(xp);
    tide_tensor *out = y && integer ? tide_cast(y, dt) : tide_retain(y);
    tide_release(y);
    return onnx_set(c, out);
}

static int check_avg_pool(const onnx_node *n, char *why, size_t size)
{
    int count = 0;
    const int64_t *d = onnx_attr_ints(n, "dilations", &count);
    for (int i = 0; d && i < count; i++)
        if (d[i] != 1) {
            snprintf(why, size, "dilations other than 1 are not supported");
            return 1;
        }
    return check_auto_pad(n, why, size);
}

static int run_avg_pool(onnx_ctx *c)
{
    geom g;
    if (geom_read(c, c->in[0], NULL, &g) < 0)
        return -1;
    bool include = onnx_attr_int(c->node, "count_include_pad", 0) != 0, fits = true;
    for (int i = 0; i < g.nd; i++)
        fits = fits && g.pb[i] == g.pe[i] && 2 * g.pb[i] <= g.kernel[i];
    bool ceil = onnx_attr_int(c->node, "ceil_mode", 0) != 0;
    int sym[MAX_SP];
    tide_tensor *xp = pad_uneven(c->in[0], &g, 0.0, fits, sym);
    bool counted = include || !fits; /* pre-padded: the share is divided out below */
    tide_tensor *y = xp ? tide_avg_pool_nd(g.nd, xp, g.kernel, g.stride, sym, ceil, counted)
                        : NULL;
    tide_release(xp);
    if (y && !fits && !include) {
        /* padding excluded: divide by the share of each window that is input */
        tide_tensor *ones = tide_ones_on(tide_device_name(c->in[0]), tide_ndim(c->in[0]),
                                         tide_shape(c->in[0]), tide_get_dtype(c->in[0]));
        tide_tensor *op = ones ? pad_uneven(ones, &g, 0.0, false, sym) : NULL;
        tide_tensor *share = op ? tide_avg_pool_nd(g.nd, op, g.kernel, g.stride, sym, ceil, true)
                                : NULL;
        tide_tensor *r = share ? tide_div(y, share) : NULL;
        tide_release(ones);
        tide_release(op);
        tide_release(share);
        tide_release(y);
        y = r;
    }
    return onnx_set(c, y);
}

/* Global pools: the reduction over every spatial dim, kept as size 1. */
static int run_global_pool(onnx_ctx *c, bool max)
{
    int nd = tide_ndim(c->in[0]) - 2, dims[8];
    if (nd < 1)
        return onnx_error(c, "input must have spatial dims after [N, C]; it has %d dims", nd + 2);
    for (int i = 0; i < nd; i++)
        dims[i] = i + 2;
    return onnx_set(c, max ? tide_amax(c->in[0], dims, nd, true)
                           : tide_mean(c->in[0], dims, nd, true));
}
static int run_global_avg(onnx_ctx *c) { return run_global_pool(c, false); }
static int run_global_max(onnx_ctx *c) { return run_global_pool(c, true); }

const onnx_op onnx_ops_conv[] = {
    {"Conv", 1, 0, 2, 3, check_auto_pad, run_conv, 0},
    {"ConvTranspose", 1, 0, 2, 3, check_auto_pad, run_conv_transpose, 0},
    {"MaxPool", 1, 0, 1, 1, check_max_pool, run_max_pool, 0},
    {"AveragePool", 1, 0, 1, 1, check_avg_pool, run_avg_pool, 0},
    {"GlobalAveragePool", 1, 0, 1, 1, NULL, run_global_avg, 0},
    {"GlobalMaxPool", 1, 0, 1, 1, NULL, run_global_max, 0},
    {0},
};
