/*
 * ref_conv.c — 2-D convolution (NCHW, weights [O, C/groups, kH, kW]) and its two gradients,
 * each output element summed from its definition in double and rounded once:
 *   conv:   y[n,o,oh,ow] = sum over c, kh, kw of x[n, g*Cg + c, ih, iw] * w[o, c, kh, kw],
 *           ih = oh*sh - ph + kh*dh, iw = ow*sw - pw + kw*dw (terms outside x are 0),
 *           g = o / (O/groups), Cg = C/groups;
 *   grad_input:  dx[n, ci, ih, iw] = the sum of g_out[n,o,oh,ow] * w[o, ci - g*Cg, kh, kw] over
 *           the (o, kh, kw) of ci's group with an (oh, ow) whose window puts (kh, kw) on (ih, iw);
 *   grad_weight: dw[o,c,kh,kw] = the sum over n, oh, ow of g_out[n,o,oh,ow] * x[n, g*Cg+c, ih, iw].
 */
#include "ref_internal.h"

typedef struct conv_geom {
    int64_t N, C, H, W, O, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups;
} conv_geom;

/* x: the input's [N,C,H,W]; w: the weight's shape; y: the output's [N,O,OH,OW]. */
static conv_geom geom(const int64_t *x, const int64_t *w, const int64_t *y, const int64_t *p)
{
    return (conv_geom){x[0], x[1], x[2], x[3], w[0], y[2], y[3], w[2], w[3],
                       p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
}

static double at4(const tide_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return ref_get_f(t, ref_offset(t, (int64_t[4]){i0, i1, i2, i3}));
}

static bool inside(int64_t i, int64_t n) { return i >= 0 && i < n; }

/* y[n, o, oh, ow]: pos = (n, o, oh, ow). */
static double conv_at(const conv_geom *c, const tide_tensor *x, const tide_tensor *w,
                      const int64_t *pos)
{
    int64_t Cg = c->C / c->groups, first_c = pos[1] / (c->O / c->groups) * Cg;
    double s = 0;
    for (int64_t ci = 0; ci < Cg; ci++)
        for (int64_t kh = 0; kh < c->KH; kh++)
            for (int64_t kw = 0; kw < c->KW; kw++) {
                int64_t ih = pos[2] * c->sh - c->ph + kh * c->dh;
                int64_t iw = pos[3] * c->sw - c->pw + kw * c->dw;
                if (inside(ih, c->H) && inside(iw, c->W))
                    s += at4(x, pos[0], first_c + ci, ih, iw) * at4(w, pos[1], ci, kh, kw);
            }
    return s;
}

/* The output position along one axis whose window puts tap k on input position i: i = o*s - p
 * + k*d; -1 when there is none. */
static int64_t source_pos(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t d, int64_t n_out)
{
    int64_t t = i + pad - k * d;
    if (t < 0 || t % s != 0 || t / s >= n_out)
        return -1;
    return t / s;
}

/* dx[n, ci, ih, iw]: pos = (n, ci, ih, iw). */
static double grad_input_at(const conv_geom *c, const tide_tensor *g, const tide_tensor *w,
                            const int64_t *pos)
{
    int64_t Cg = c->C / c->groups, Og = c->O / c->groups, grp = pos[1] / Cg;
    double s = 0;
    for (int64_t o = grp * Og; o < (grp + 1) * Og; o++)
        for (int64_t kh = 0; kh < c->KH; kh++)
            for (int64_t kw = 0; kw < c->KW; kw++) {
                int64_t oh = source_pos(pos[2], kh, c->sh, c->ph, c->dh, c->OH);
                int64_t ow = source_pos(pos[3], kw, c->sw, c->pw, c->dw, c->OW);
                if (oh >= 0 && ow >= 0)
                    s += at4(g, pos[0], o, oh, ow) * at4(w, o, pos[1] % Cg, kh, kw);
            }
    return s;
}

/* dw[o, ci, kh, kw]: pos = (o, ci, kh, kw). */
static double grad_weight_at(const conv_geom *c, const tide_tensor *x, const tide_tensor *g,
                             const int64_t *pos)
{
    int64_t Cg = c->C / c->groups, in_c = pos[0] / (c->O / c->groups) * Cg + pos[1];
    double s = 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oh = 0; oh < c->OH; oh++)
            for (int64_t ow = 0; ow < c->OW; ow++) {
                int64_t ih = oh * c->sh - c->ph + pos[2] * c->dh;
                int64_t iw = ow * c->sw - c->pw + pos[3] * c->dw;
                if (inside(ih, c->H) && inside(iw, c->W))
                    s += at4(g, n, pos[0], oh, ow) * at4(x, n, in_c, ih, iw);
            }
    return s;
}

/* Every element of out (4-D) from its definition, rounded once. */
static int conv_run(tide_op op, tide_tensor *out, const tide_tensor *a, const tide_tensor *b,
                    const int64_t *p)
{
    if (!ref_is_float(a->dtype))
        return ref_no_kernel(op, a->dtype);
    conv_geom c = op == TIDE_OP_CONV2D ? geom(a->shape, b->shape, out->shape, p)
                  : op == TIDE_OP_CONV2D_GRAD_INPUT ? geom(out->shape, b->shape, a->shape, p)
                                                    : geom(a->shape, out->shape, b->shape, p);
    int64_t pos[4], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(4, out->shape, i, pos);
        double v = op == TIDE_OP_CONV2D ? conv_at(&c, a, b, pos)
                   : op == TIDE_OP_CONV2D_GRAD_INPUT ? grad_input_at(&c, a, b, pos)
                                                     : grad_weight_at(&c, a, b, pos);
        ref_set_f(out, ref_offset(out, pos), v);
    }
    return 0;
}

int ref_conv2d(tide_tensor *out, const tide_tensor *x, const tide_tensor *w, const int64_t *p)
{
    return conv_run(TIDE_OP_CONV2D, out, x, w, p);
}

int ref_conv2d_grad_input(tide_tensor *out, const tide_tensor *g, const tide_tensor *w,
                          const int64_t *p)
{
    return conv_run(TIDE_OP_CONV2D_GRAD_INPUT, out, g, w, p);
}

int ref_conv2d_grad_weight(tide_tensor *out, const tide_tensor *x, const tide_tensor *g,
                           const int64_t *p)
{
    return conv_run(TIDE_OP_CONV2D_GRAD_WEIGHT, out, x, g, p);
}
