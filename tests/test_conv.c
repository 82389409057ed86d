/*
 * test_conv.c — conv2d, conv2d_grad_input, conv2d_grad_weight, max_pool2d (values and
 * indices), avg_pool2d, avg_pool2d_grad and adaptive_avg_pool2d against direct loops in double
 * precision: the seven-loop convolution and its adjoints, window loops for the pools. A grid of
 * stride/padding/dilation/groups (1x1, depthwise, asymmetric, a kernel as large as the padded
 * input, images big enough to be cut into tiles and small enough to be batched), batch 1 and
 * 3, float32 and float64, the shapes the CPU sums in registers, inputs in six layouts
 * (contiguous, channels-last, all dims reversed, sliced, every other channel, expanded batch),
 * empty tensors, NaN and -inf in max pooling, and one error test for every failure kind.
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

/* ---- layouts of a 4-D input ------------------------------------------------------------ */

enum { L_CONTIG, L_CHANNELS_LAST, L_REVERSED, L_SLICED, L_CHANNEL_STEP, L_EXPANDED, NL };
static const char *const LAYOUT_NAMES[NL] = {"contiguous", "channels-last", "reversed",
                                             "sliced",     "channel-step",  "expanded"};

/* Random values for a tensor of shape (in dtype dt's precision), fit for the layout. */
static double *gen4(const int64_t *shape, tide_dtype dt, int layout)
{
    int64_t n = ref_numel(4, shape);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ref_fill(v, n, dt, REF_GEN_GENERAL);
    if (layout == L_EXPANDED)
        ref_prepare(REF_EXPANDED, 4, shape, v);
    return v;
}

/* A [a, b, c, d] tensor holding the row-major values v, stored in the given layout. */
static tide_tensor *make4(const double *v, const int64_t *shape, tide_dtype dt, int layout)
{
    int64_t n = ref_numel(4, shape);
    if (layout == L_CHANNELS_LAST) {
        int64_t nhwc[4] = {shape[0], shape[2], shape[3], shape[1]};
        double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t c = 0; c < shape[1]; c++)
                for (int64_t h = 0; h < shape[2]; h++)
                    for (int64_t w = 0; w < shape[3]; w++)
                        p[((i * shape[2] + h) * shape[3] + w) * shape[1] + c] =
                            v[((i * shape[1] + c) * shape[2] + h) * shape[3] + w];
        tide_tensor *b = ref_from_doubles(p, 4, nhwc, dt);
        free(p);
        int perm[4] = {0, 3, 1, 2};
        tide_tensor *t = tide_permute(b, perm);
        tide_release(b);
        return t;
    }
    if (layout == L_CHANNEL_STEP) {
        int64_t big[4] = {shape[0], 2 * shape[1], shape[2], shape[3]};
        int64_t plane = shape[2] * shape[3], bn = ref_numel(4, big);
        double *p = malloc((size_t)(bn > 0 ? bn : 1) * sizeof *p);
        for (int64_t i = 0; i < bn; i++)
            p[i] = 77; /* must never be read */
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t c = 0; c < shape[1]; c++)
                memcpy(p + (i * big[1] + 2 * c + 1) * plane, v + (i * shape[1] + c) * plane,
                       (size_t)plane * sizeof *p);
        tide_tensor *b = ref_from_doubles(p, 4, big, dt);
        free(p);
        tide_tensor *t = tide_slice(b, 1, 1, big[1], 2);
        tide_release(b);
        return t;
    }
    int ref_layout = layout == L_REVERSED ? REF_TRANSPOSED
                     : layout == L_SLICED ? REF_SLICED
                     : layout == L_EXPANDED ? REF_EXPANDED
                                            : REF_CONTIG;
    return ref_make(v, 4, shape, dt, ref_layout);
}

/* Checks t's dtype, shape and values: |got - want| <= tol * scale (the sum of the absolute
 * terms, the error scale of a float sum) per element. */
static void check_sum(const char *desc, const tide_tensor *t, tide_dtype dt, const int64_t *shape,
                      const double *want, const double *scale, double tol)
{
    if (!t) {
        CHECK(t != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(t) == dt, "%s: dtype %s", desc, ref_dtype_name(tide_get_dtype(t)));
    bool shape_ok = ref_same_shape(t, 4, shape);
    CHECK(shape_ok, "%s: shape %s, want %s", desc, ref_tensor_shape_str(t),
          ref_shape_str(4, shape));
    if (!shape_ok)
        return;
    double *got = ref_read(t);
    int64_t n = ref_numel(4, shape), bad = -1;
    for (int64_t i = 0; got && i < n && bad < 0; i++)
        if (!(fabs(got[i] - want[i]) <= tol * scale[i] + 1e-300) &&
            !(isnan(want[i]) && isnan(got[i])))
            bad = i;
    CHECK(got && bad < 0, "%s: first mismatch at %s: got %.10g, want %.10g", desc,
          ref_index_str(4, shape, bad < 0 ? 0 : bad), got && bad >= 0 ? got[bad] : 0,
          bad >= 0 ? want[bad] : 0);
    free(got);
}

static double tol_of(tide_dtype dt) { return dt == TIDE_FLOAT32 ? 1e-5 : 1e-12; }

/* ---- convolution ------------------------------------------------------------------------ */

typedef struct conv_case {
    int64_t n, c, h, w, o, kh, kw;
    int stride[2], pad[2], dil[2], groups;
    bool big; /* a costly reference: fewer layouts */
} conv_case;

static const conv_case CONV_CASES[] = {
    /* 1x1, stride 1, no padding: planes read in place (>= 256 positions) or batched */
    {2, 3, 17, 17, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},
    {3, 4, 5, 5, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},
    {2, 4, 16, 18, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, false},
    /* 1x1 with stride 2 (a ResNet shortcut) */
    {2, 3, 9, 8, 4, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},
    /* 3x3 */
    {3, 4, 9, 11, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {1, 3, 7, 7, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false},
    {3, 2, 8, 9, 3, 3, 3, {3, 2}, {0, 2}, {1, 1}, 1, false},
    /* dilation */
    {2, 2, 11, 10, 3, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false},
    {1, 3, 12, 9, 2, 5, 5, {2, 1}, {2, 2}, {2, 1}, 1, false},
    /* asymmetric kernel, stride, padding and dilation */
    {3, 3, 7, 10, 4, 2, 3, {2, 1}, {1, 0}, {1, 2}, 1, false},
    /* groups, depthwise */
    {2, 4, 8, 7, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, false},
    {3, 6, 9, 9, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3, false},
    {2, 3, 10, 10, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3, false},
    /* a kernel exactly as large as the padded input: one output */
    {2, 2, 5, 4, 3, 7, 4, {1, 1}, {1, 0}, {1, 1}, 1, false},
    /* LeNet-like, batched into one block */
    {3, 6, 14, 14, 4, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1, false},
    /* many channels: K > 256, several images per block in float32, fewer in float64 */
    {3, 64, 10, 10, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    /* GEMMs big enough for BLAS's own threads: tiles, and a batch in one block */
    {2, 64, 24, 24, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {3, 64, 10, 10, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    /* large planes: tiles within an image (col2im across tile edges) */
    {2, 4, 90, 90, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {1, 8, 40, 45, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},
};
#define NCONV ((int)(sizeof CONV_CASES / sizeof CONV_CASES[0]))

/* Stride-1 convolutions with many channels per group and little padding, whose forward and
 * grad_input skip the columns when BLAS threads the GEMMs (on one thread, always): several
 * images per block, groups with dilation, a plane cut into bands (float64), a 1x3 kernel, no
 * padding at all. */
static const conv_case SHIFT_CASES[] = {
    {3, 32, 16, 16, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {2, 64, 30, 28, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, 2, false},
    {1, 32, 90, 90, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {2, 32, 12, 20, 5, 1, 3, {1, 1}, {0, 1}, {1, 1}, 1, false},
    {2, 32, 40, 40, 3, 2, 2, {1, 1}, {0, 0}, {1, 1}, 1, false},
};
#define NSHIFT ((int)(sizeof SHIFT_CASES / sizeof SHIFT_CASES[0]))

/* Float32 convolutions that the AVX2 and AVX-512 tiers sum in registers (cpu_conv_direct.c:
 * stride 1 along rows, rows that fill most of a vector, a small padded input): the conv net's
 * first layer, output channels that leave a partial block (13, 9), rows of 16, 24 and 26
 * columns (a partial last vector), a row stride of 2, groups with dilation and an asymmetric
 * kernel, and 8-column rows that only AVX2's 8-lane vectors take. Batches of 1 to 3: below
 * twice the threads, so the tiles of one image spread over the threads. */
static const conv_case DIRECT_CASES[] = {
    {1, 3, 32, 32, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {1, 5, 13, 16, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {3, 4, 10, 24, 6, 3, 3, {2, 1}, {1, 1}, {1, 1}, 1, false},
    {2, 6, 12, 32, 9, 3, 5, {1, 1}, {2, 1}, {1, 2}, 3, false},
    {1, 2, 40, 8, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, false},
    {2, 16, 18, 40, 20, 3, 3, {1, 1}, {0, 1}, {1, 1}, 1, false},
};
#define NDIRECT ((int)(sizeof DIRECT_CASES / sizeof DIRECT_CASES[0]))

/* Strides that divide the kernel, which the CPU computes as stride-1 convolutions over the
 * input's stride phases (cpu_conv_phase.c) for batches of at least two images per thread and
 * planes of at least 256 outputs: a 4x4 stride 2, a stride along one dim with groups, stride 3
 * with uneven padding, padding past the stride, and many channels (the phases take the shifted
 * GEMMs). Their gradients keep the strided paths. */
static const conv_case PHASE_CASES[] = {
    {4, 3, 32, 32, 5, 4, 4, {2, 2}, {1, 1}, {1, 1}, 1, false},
    {4, 4, 33, 20, 6, 4, 3, {2, 1}, {1, 1}, {1, 1}, 2, false},
    {4, 2, 50, 51, 3, 6, 6, {3, 3}, {2, 1}, {1, 1}, 1, false},
    {4, 3, 31, 33, 4, 4, 4, {2, 2}, {3, 2}, {1, 1}, 1, false},
    {4, 32, 34, 32, 8, 4, 4, {2, 2}, {1, 1}, {1, 1}, 1, true},
};
#define NPHASE ((int)(sizeof PHASE_CASES / sizeof PHASE_CASES[0]))

/* Float32 weight gradients that the AVX2 and AVX-512 tiers sum in registers without
 * columns (cpu_conv_wgrad.c: at least one image per thread, output channels filling at least
 * half of each vector): channels that leave a partial vector or a partial tile of vectors (20,
 * 40 in two groups, 72), sums K that are no multiple of the tile's rows (72, 18, 50), planes
 * longer than a chunk of positions, dilation with asymmetric padding, a 1-D row (conv1d), more
 * images than threads, and strides. */
static const conv_case WGRAD_CASES[] = {
    {4, 8, 10, 12, 20, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {5, 6, 9, 7, 40, 2, 3, {1, 1}, {0, 2}, {2, 1}, 2, false},
    {3, 10, 1, 30, 72, 1, 5, {1, 1}, {0, 2}, {1, 1}, 1, false},
    {6, 16, 12, 12, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {2, 24, 20, 20, 32, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, false},
    /* strides, read as stride phases: dividing the kernel, not dividing it, along one dim, a
     * stride of 3 with dilation 2, and a stride longer than the kernel (phases never read) */
    {4, 8, 16, 16, 24, 4, 4, {2, 2}, {1, 1}, {1, 1}, 1, false},
    {3, 6, 11, 13, 16, 3, 3, {2, 2}, {1, 0}, {1, 1}, 1, false},
    {2, 5, 9, 17, 20, 3, 5, {1, 2}, {1, 2}, {1, 1}, 1, false},
    {3, 4, 20, 19, 18, 3, 3, {3, 3}, {2, 1}, {2, 2}, 2, false},
    {2, 3, 12, 13, 16, 2, 2, {3, 4}, {0, 1}, {1, 1}, 1, false},
};
#define NWGRAD ((int)(sizeof WGRAD_CASES / sizeof WGRAD_CASES[0]))

static void conv_shapes(const conv_case *k, int64_t xs[4], int64_t ws[4], int64_t os[4])
{
    xs[0] = k->n, xs[1] = k->c, xs[2] = k->h, xs[3] = k->w;
    ws[0] = k->o, ws[1] = k->c / k->groups, ws[2] = k->kh, ws[3] = k->kw;
    os[0] = k->n, os[1] = k->o;
    os[2] = (k->h + 2 * k->pad[0] - k->dil[0] * (k->kh - 1) - 1) / k->stride[0] + 1;
    os[3] = (k->w + 2 * k->pad[1] - k->dil[1] * (k->kw - 1) - 1) / k->stride[1] + 1;
}

/* The convolution as its definition, and its two adjoints, each visiting every term
 * (n, o, oh, ow, c, i, j) once: terms with the input position outside the plane are skipped. */
enum { FORWARD, GRAD_INPUT, GRAD_WEIGHT };

static void ref_conv(int which, const conv_case *k, const double *x, const double *w,
                     const double *g, double *res, double *scale)
{
    int64_t xs[4], ws[4], os[4];
    conv_shapes(k, xs, ws, os);
    const int64_t *rs = which == FORWARD ? os : which == GRAD_INPUT ? xs : ws;
    int64_t nres = ref_numel(4, rs);
    for (int64_t i = 0; i < nres; i++)
        res[i] = scale[i] = 0;
    int64_t cg = ws[1], og = k->o / k->groups;
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t o = 0; o < k->o; o++)
            for (int64_t oh = 0; oh < os[2]; oh++)
                for (int64_t ow = 0; ow < os[3]; ow++)
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < k->kh; i++)
                            for (int64_t j = 0; j < k->kw; j++) {
                                int64_t ih = oh * k->stride[0] - k->pad[0] + i * k->dil[0];
                                int64_t iw = ow * k->stride[1] - k->pad[1] + j * k->dil[1];
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w)
                                    continue;
                                int64_t xc = (o / og) * cg + c;
                                int64_t xi = ((n * k->c + xc) * k->h + ih) * k->w + iw;
                                int64_t wi = ((o * cg + c) * k->kh + i) * k->kw + j;
                                int64_t oi = ((n * k->o + o) * os[2] + oh) * os[3] + ow;
                                double t;
                                int64_t r;
                                if (which == FORWARD) {
                                    t = x[xi] * w[wi];
                                    r = oi;
                                } else if (which == GRAD_INPUT) {
                                    t = g[oi] * w[wi];
                                    r = xi;
                                } else {
                                    t = g[oi] * x[xi];
                                    r = wi;
                                }
                                res[r] += t;
                                scale[r] += fabs(t);
                            }
}

static void describe_case(char *buf, size_t size, const char *op, const conv_case *k,
                          tide_dtype dt, int layout)
{
    snprintf(buf, size,
             "%s x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] stride (%d,%d) pad (%d,%d) "
             "dil (%d,%d) groups %d %s %s",
             op, (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w,
             (long long)k->o, (long long)(k->c / k->groups), (long long)k->kh, (long long)k->kw,
             k->stride[0], k->stride[1], k->pad[0], k->pad[1], k->dil[0], k->dil[1], k->groups,
             ref_dtype_name(dt), LAYOUT_NAMES[layout]);
}

static void test_conv_case(const conv_case *k, tide_dtype dt, int layout)
{
    int64_t xs[4], ws[4], os[4];
    conv_shapes(k, xs, ws, os);
    /* The second operand of each op takes another layout, so pairs of layouts meet too. */
    int other = (layout + 1) % NL;
    double *x = gen4(xs, dt, layout), *w = gen4(ws, dt, other), *g = gen4(os, dt, layout);
    double *gw = gen4(os, dt, other);
    int64_t nmax = ref_numel(4, xs);
    if (ref_numel(4, ws) > nmax)
        nmax = ref_numel(4, ws);
    if (ref_numel(4, os) > nmax)
        nmax = ref_numel(4, os);
    double *want = malloc((size_t)nmax * sizeof *want);
    double *scale = malloc((size_t)nmax * sizeof *scale);
    char desc[400];

    tide_tensor *tx = make4(x, xs, dt, layout), *tw = make4(w, ws, dt, other);
    tide_tensor *r = tide_conv2d(tx, tw, NULL, k->stride, k->pad, k->dil, k->groups);
    ref_conv(FORWARD, k, x, w, NULL, want, scale);
    describe_case(desc, sizeof desc, "conv2d", k, dt, layout);
    check_sum(desc, r, dt, os, want, scale, tol_of(dt));
    tide_release(r);
    tide_release(tw);

    /* grad_input: grad_out in this layout, the weight in the other */
    tide_tensor *tg = make4(g, os, dt, layout);
    tw = make4(w, ws, dt, other);
    int64_t hw[2] = {k->h, k->w};
    r = tide_conv2d_grad_input(tg, tw, hw, k->stride, k->pad, k->dil, k->groups);
    ref_conv(GRAD_INPUT, k, NULL, w, g, want, scale);
    describe_case(desc, sizeof desc, "conv2d_grad_input", k, dt, layout);
    check_sum(desc, r, dt, xs, want, scale, tol_of(dt));
    tide_release(r);
    tide_release(tg);
    tide_release(tw);

    /* grad_weight: x in this layout, grad_out in the other */
    tide_tensor *tgw = make4(gw, os, dt, other);
    int64_t khw[2] = {k->kh, k->kw};
    r = tide_conv2d_grad_weight(tx, tgw, khw, k->stride, k->pad, k->dil, k->groups);
    ref_conv(GRAD_WEIGHT, k, x, NULL, gw, want, scale);
    describe_case(desc, sizeof desc, "conv2d_grad_weight", k, dt, layout);
    check_sum(desc, r, dt, ws, want, scale, tol_of(dt));
    tide_release(r);
    tide_release(tgw);
    tide_release(tx);
    free(x), free(w), free(g), free(gw), free(want), free(scale);
}

/* Every case in every layout (the costly ones in two), then again on one thread, where every
 * GEMM runs on BLAS's threads one block after another instead of blocks spread over tide's. */
static void test_conv_grid(void)
{
    static const tide_dtype dts[2] = {TIDE_FLOAT32, TIDE_FLOAT64};
    for (int ci = 0; ci < NCONV; ci++)
        for (int d = 0; d < 2; d++)
            for (int layout = 0; layout < NL; layout++) {
                if (CONV_CASES[ci].big && layout != (ci + d) % NL && layout != L_CONTIG)
                    continue;
                ref_seed((uint64_t)(ci * 100 + d * 10 + layout));
                test_conv_case(&CONV_CASES[ci], dts[d], layout);
            }
    int threads = tide_get_num_threads();
    for (int pass = 0; pass < 2; pass++) {
        tide_set_num_threads(pass ? 1 : threads);
        for (int ci = 0; ci < NSHIFT; ci++)
            for (int d = 0; d < 2; d++) {
                ref_seed((uint64_t)(8000 + ci * 10 + d));
                test_conv_case(&SHIFT_CASES[ci], dts[d], d ? L_CONTIG : (ci + pass) % NL);
            }
    }
    for (int pass = 0; pass < 2; pass++) {
        tide_set_num_threads(pass ? 1 : 2); /* the phases need two images per thread */
        for (int ci = 0; ci < NPHASE; ci++)
            for (int d = 0; d < 2; d++) {
                ref_seed((uint64_t)(8500 + ci * 10 + d + pass * 100));
                test_conv_case(&PHASE_CASES[ci], dts[d], (ci + d + pass) % NL);
            }
    }
    for (int pass = 0; pass < 2; pass++) {
        tide_set_num_threads(pass ? 1 : threads);
        for (int ci = 0; ci < NDIRECT; ci++)
            for (int layout = 0; layout < NL; layout++) {
                ref_seed((uint64_t)(9000 + ci * 10 + layout + pass * 100));
                test_conv_case(&DIRECT_CASES[ci], TIDE_FLOAT32, layout);
            }
    }
    for (int pass = 0; pass < 2; pass++) {
        tide_set_num_threads(pass ? 1 : 2);
        for (int ci = 0; ci < NWGRAD; ci++)
            for (int layout = 0; layout < NL; layout++) {
                ref_seed((uint64_t)(9500 + ci * 10 + layout + pass * 100));
                test_conv_case(&WGRAD_CASES[ci], TIDE_FLOAT32, layout);
            }
    }
    tide_set_num_threads(1);
    for (int ci = 0; ci < NCONV; ci++) {
        if (CONV_CASES[ci].big)
            continue;
        ref_seed((uint64_t)(7000 + ci));
        test_conv_case(&CONV_CASES[ci], dts[ci % 2], (ci + 2) % NL);
    }
    tide_set_num_threads(threads);
}

/* conv2d with a bias: the convolution plus bias[o] everywhere in channel o. */
static void test_conv_bias(void)
{
    static const conv_case k = {2, 4, 6, 7, 6, 3, 3, {1, 2}, {1, 1}, {1, 1}, 2, false};
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = d ? TIDE_FLOAT64 : TIDE_FLOAT32;
        int64_t xs[4], ws[4], os[4];
        conv_shapes(&k, xs, ws, os);
        double *x = gen4(xs, dt, L_CONTIG), *w = gen4(ws, dt, L_CONTIG);
        double b[6];
        ref_fill(b, 6, dt, REF_GEN_GENERAL);
        int64_t no = ref_numel(4, os);
        double *want = malloc((size_t)no * sizeof *want);
        double *scale = malloc((size_t)no * sizeof *scale);
        ref_conv(FORWARD, &k, x, w, NULL, want, scale);
        for (int64_t i = 0; i < no; i++) {
            int64_t o = (i / (os[2] * os[3])) % os[1];
            want[i] += b[o];
            scale[i] += fabs(b[o]);
        }
        int64_t bs = 6;
        tide_tensor *tx = make4(x, xs, dt, L_CONTIG), *tw = make4(w, ws, dt, L_CONTIG);
        tide_tensor *tb = ref_make(b, 1, &bs, dt, REF_SLICED); /* a strided bias */
        tide_tensor *r = tide_conv2d(tx, tw, tb, k.stride, k.pad, k.dil, k.groups);
        check_sum(d ? "conv2d bias float64" : "conv2d bias float32", r, dt, os, want, scale,
                  tol_of(dt));
        tide_release(r), tide_release(tx), tide_release(tw), tide_release(tb);
        free(x), free(w), free(want), free(scale);
    }
}

/* NULL stride/padding/dilation arrays are PyTorch's defaults (1, 0, 1). */
static void test_conv_defaults(void)
{
    static const conv_case k = {2, 3, 6, 5, 2, 3, 2, {1, 1}, {0, 0}, {1, 1}, 1, false};
    int64_t xs[4], ws[4], os[4];
    conv_shapes(&k, xs, ws, os);
    double *x = gen4(xs, TIDE_FLOAT64, L_CONTIG), *w = gen4(ws, TIDE_FLOAT64, L_CONTIG);
    int64_t no = ref_numel(4, os);
    double *want = malloc((size_t)no * sizeof *want);
    double *scale = malloc((size_t)no * sizeof *scale);
    ref_conv(FORWARD, &k, x, w, NULL, want, scale);
    tide_tensor *tx = make4(x, xs, TIDE_FLOAT64, L_CONTIG);
    tide_tensor *tw = make4(w, ws, TIDE_FLOAT64, L_CONTIG);
    tide_tensor *r = tide_conv2d(tx, tw, NULL, NULL, NULL, NULL, 1);
    check_sum("conv2d default stride/padding/dilation", r, TIDE_FLOAT64, os, want, scale, 1e-12);
    tide_release(r), tide_release(tx), tide_release(tw);
    free(x), free(w), free(want), free(scale);
}

/* Empty batches, no input or output channels, and an all-padding input plane. */
static void test_conv_empty(void)
{
    int s1[2] = {1, 1}, p0[2] = {0, 0}, d1[2] = {1, 1};
    int64_t xs[4] = {0, 3, 5, 5}, ws[4] = {4, 3, 3, 3};
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *w = tide_ones(4, ws, TIDE_FLOAT32);
    tide_tensor *r = tide_conv2d(x, w, NULL, s1, p0, d1, 1);
    int64_t want0[4] = {0, 4, 3, 3};
    CHECK(ref_same_shape(r, 4, want0), "conv2d of an empty batch: shape %s",
          ref_tensor_shape_str(r));
    tide_release(r);
    /* grad_weight of an empty batch: zeros */
    tide_tensor *g = tide_zeros(4, want0, TIDE_FLOAT32);
    int64_t khw[2] = {3, 3};
    r = tide_conv2d_grad_weight(x, g, khw, s1, p0, d1, 1);
    double zeros[108] = {0}, ones[108];
    for (int i = 0; i < 108; i++)
        ones[i] = 1;
    ref_check_tensor("conv2d_grad_weight of an empty batch", r, TIDE_FLOAT32, 4, ws, zeros, 0);
    tide_release(r), tide_release(g), tide_release(x), tide_release(w);

    /* no input channels (two groups of zero): zeros */
    int64_t xc[4] = {2, 0, 5, 5}, wc[4] = {4, 0, 3, 3}, oc[4] = {2, 4, 3, 3};
    x = tide_zeros(4, xc, TIDE_FLOAT64);
    w = tide_zeros(4, wc, TIDE_FLOAT64);
    r = tide_conv2d(x, w, NULL, s1, p0, d1, 2);
    ref_check_tensor("conv2d with no input channels", r, TIDE_FLOAT64, 4, oc, zeros, 0);
    tide_release(r), tide_release(x), tide_release(w);

    /* no output channels: grad_input is zeros */
    int64_t go[4] = {2, 0, 3, 3}, wo[4] = {0, 2, 3, 3}, xo[4] = {2, 2, 5, 5};
    g = tide_zeros(4, go, TIDE_FLOAT32);
    w = tide_zeros(4, wo, TIDE_FLOAT32);
    int64_t hw[2] = {5, 5};
    r = tide_conv2d_grad_input(g, w, hw, s1, p0, d1, 1);
    ref_check_tensor("conv2d_grad_input with no output channels", r, TIDE_FLOAT32, 4, xo, zeros,
                     0);
    tide_release(r), tide_release(g), tide_release(w);

    /* an input plane of height 0: every output reads padding only, so out = bias */
    int64_t xh[4] = {1, 2, 0, 3}, wh[4] = {2, 2, 1, 1}, oh[4] = {1, 2, 2, 3}, bs = 2;
    int pad[2] = {1, 0};
    x = tide_zeros(4, xh, TIDE_FLOAT32);
    w = tide_ones(4, wh, TIDE_FLOAT32);
    tide_tensor *b = tide_ones(1, &bs, TIDE_FLOAT32);
    r = tide_conv2d(x, w, b, s1, pad, d1, 1);
    ref_check_tensor("conv2d over a plane of height 0 with padding", r, TIDE_FLOAT32, 4, oh,
                     ones, 0);
    tide_release(r), tide_release(x), tide_release(w), tide_release(b);
}

/* ---- pooling ----------------------------------------------------------------------------- */

typedef struct pool_case {
    int64_t n, c, h, w;
    int kernel[2], stride[2], pad[2];
} pool_case;

static const pool_case POOL_CASES[] = {
    {2, 3, 8, 8, {2, 2}, {2, 2}, {0, 0}},  {2, 3, 7, 9, {2, 2}, {2, 2}, {0, 0}},
    {3, 2, 9, 7, {3, 3}, {2, 2}, {1, 1}},  {1, 3, 7, 10, {3, 2}, {1, 2}, {1, 0}},
    {2, 2, 6, 5, {1, 1}, {1, 1}, {0, 0}},  {2, 2, 5, 6, {4, 3}, {1, 3}, {2, 1}},
    {1, 4, 11, 13, {5, 5}, {3, 2}, {2, 2}}, {2, 1, 3, 3, {3, 3}, {1, 1}, {1, 1}},
    {1, 2, 4, 4, {4, 4}, {4, 4}, {0, 0}},
    /* 2x2 stride 2 over rows long enough for 16-, 8- and 4-wide vector steps and a tail */
    {1, 2, 6, 58, {2, 2}, {2, 2}, {0, 0}}, {2, 3, 32, 32, {2, 2}, {2, 2}, {0, 0}},
};
#define NPOOL ((int)(sizeof POOL_CASES / sizeof POOL_CASES[0]))

enum { P_MAX, P_ARGMAX, P_AVG, P_AVG_EXCL };

static void pool_out_shape(const pool_case *k, int64_t os[4])
{
    os[0] = k->n, os[1] = k->c;
    os[2] = (k->h + 2 * k->pad[0] - k->kernel[0]) / k->stride[0] + 1;
    os[3] = (k->w + 2 * k->pad[1] - k->kernel[1]) / k->stride[1] + 1;
}

/* The pooled values of one kind over the windows, clipped to the plane; PyTorch's rule for max
 * (greater or NaN replaces). */
static void ref_pool(int kind, const pool_case *k, const double *x, double *res)
{
    int64_t os[4];
    pool_out_shape(k, os);
    for (int64_t p = 0; p < k->n * k->c; p++)
        for (int64_t oh = 0; oh < os[2]; oh++)
            for (int64_t ow = 0; ow < os[3]; ow++) {
                int64_t h0 = oh * k->stride[0] - k->pad[0], w0 = ow * k->stride[1] - k->pad[1];
                double best = -INFINITY, sum = 0;
                int64_t at = -1, count = 0;
                for (int64_t ih = h0; ih < h0 + k->kernel[0]; ih++)
                    for (int64_t iw = w0; iw < w0 + k->kernel[1]; iw++) {
                        if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w)
                            continue;
                        double v = x[(p * k->h + ih) * k->w + iw];
                        if (at < 0)
                            at = ih * k->w + iw;
                        if (v > best || isnan(v)) {
                            best = v;
                            at = ih * k->w + iw;
                        }
                        sum += v;
                        count++;
                    }
                double r = kind == P_MAX      ? best
                           : kind == P_ARGMAX ? (double)at
                           : kind == P_AVG    ? sum / (k->kernel[0] * k->kernel[1])
                                              : sum / (double)count;
                res[(p * os[2] + oh) * os[3] + ow] = r;
            }
}

/* The adjoint of the average: every window spreads its grad over its in-plane elements.
 * scale gets the sum of the absolute terms. */
static void ref_avg_grad(bool include_pad, const pool_case *k, const double *g, double *dx,
                         double *scale)
{
    int64_t os[4];
    pool_out_shape(k, os);
    for (int64_t i = 0; i < k->n * k->c * k->h * k->w; i++)
        dx[i] = scale[i] = 0;
    for (int64_t p = 0; p < k->n * k->c; p++)
        for (int64_t oh = 0; oh < os[2]; oh++)
            for (int64_t ow = 0; ow < os[3]; ow++) {
                int64_t h0 = oh * k->stride[0] - k->pad[0], w0 = ow * k->stride[1] - k->pad[1];
                int64_t count = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int64_t ih = h0; ih < h0 + k->kernel[0]; ih++)
                        for (int64_t iw = w0; iw < w0 + k->kernel[1]; iw++) {
                            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w)
                                continue;
                            if (pass == 0) {
                                count++;
                                continue;
                            }
                            double div = include_pad ? k->kernel[0] * k->kernel[1] : count;
                            double t = g[(p * os[2] + oh) * os[3] + ow] / div;
                            dx[(p * k->h + ih) * k->w + iw] += t;
                            scale[(p * k->h + ih) * k->w + iw] += fabs(t);
                        }
            }
}

static void test_pool_case(const pool_case *k, tide_dtype dt, int layout)
{
    int64_t xs[4] = {k->n, k->c, k->h, k->w}, os[4];
    pool_out_shape(k, os);
    double *x = gen4(xs, dt, layout), *g = gen4(os, dt, layout);
    int64_t nx = ref_numel(4, xs), no = ref_numel(4, os);
    /* A few ties: values on a coarse grid */
    for (int64_t i = 0; i < nx; i += 3)
        x[i] = ref_quantize(dt, 0.5 * (double)ref_randint(-4, 4));
    if (layout == L_EXPANDED)
        ref_prepare(REF_EXPANDED, 4, xs, x);
    double *want = malloc((size_t)(nx > no ? nx : no) * sizeof *want);
    double *scale = malloc((size_t)(nx > 0 ? nx : 1) * sizeof *scale);
    char desc[300];
    snprintf(desc, sizeof desc,
             "[%lld,%lld,%lld,%lld] kernel (%d,%d) stride (%d,%d) pad (%d,%d) %s %s",
             (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w, k->kernel[0],
             k->kernel[1], k->stride[0], k->stride[1], k->pad[0], k->pad[1], ref_dtype_name(dt),
             LAYOUT_NAMES[layout]);
    char d2[400];
    double rtol = dt == TIDE_FLOAT32 ? 2e-6 : 1e-14;

    tide_tensor *tx = make4(x, xs, dt, layout), *idx = NULL;
    tide_tensor *r = tide_max_pool2d(tx, k->kernel, k->stride, k->pad, &idx);
    ref_pool(P_MAX, k, x, want);
    snprintf(d2, sizeof d2, "max_pool2d %s", desc);
    ref_check_tensor(d2, r, dt, 4, os, want, 0);
    ref_pool(P_ARGMAX, k, x, want);
    snprintf(d2, sizeof d2, "max_pool2d indices %s", desc);
    ref_check_tensor(d2, idx, TIDE_INT64, 4, os, want, 0);
    tide_release(r), tide_release(idx);
    /* without indices (2x2 stride-2 windows of contiguous rows take a vectorized path) */
    r = tide_max_pool2d(tx, k->kernel, k->stride, k->pad, NULL);
    ref_pool(P_MAX, k, x, want);
    snprintf(d2, sizeof d2, "max_pool2d without indices %s", desc);
    ref_check_tensor(d2, r, dt, 4, os, want, 0);
    tide_release(r);

    for (int incl = 0; incl < 2; incl++) {
        r = tide_avg_pool2d(tx, k->kernel, k->stride, k->pad, incl);
        ref_pool(incl ? P_AVG : P_AVG_EXCL, k, x, want);
        snprintf(d2, sizeof d2, "avg_pool2d count_include_pad=%d %s", incl, desc);
        ref_check_tensor(d2, r, dt, 4, os, want, rtol);
        tide_release(r);

        tide_tensor *tg = make4(g, os, dt, layout);
        int64_t hw[2] = {k->h, k->w};
        r = tide_avg_pool2d_grad(tg, hw, k->kernel, k->stride, k->pad, incl);
        ref_avg_grad(incl, k, g, want, scale);
        snprintf(d2, sizeof d2, "avg_pool2d_grad count_include_pad=%d %s", incl, desc);
        check_sum(d2, r, dt, xs, want, scale, dt == TIDE_FLOAT32 ? 1e-6 : 1e-14);
        tide_release(r), tide_release(tg);
    }
    tide_release(tx);
    free(x), free(g), free(want), free(scale);
}

static void test_pool_grid(void)
{
    for (int ci = 0; ci < NPOOL; ci++)
        for (int d = 0; d < 2; d++)
            for (int layout = 0; layout < NL; layout++) {
                ref_seed((uint64_t)(1000 + ci * 100 + d * 10 + layout));
                test_pool_case(&POOL_CASES[ci], d ? TIDE_FLOAT64 : TIDE_FLOAT32, layout);
            }
}

/* NaN wins a max window (the last NaN gives the index); -inf everywhere gives the first
 * element; a NULL stride means the kernel size. */
/* 2x2 stride-2 rows of 29 outputs (vector steps of 16, 8 and 4, then one scalar) with NaN and
 * infinities in every step, each of the four window places: the window's NaN, else its max. */
static void test_max_pool_rows(void)
{
    enum { OW = 29, W = 2 * OW };
    double v[2 * W];
    for (int i = 0; i < 2 * W; i++)
        v[i] = (double)((i * 37) % 23) - 11.0;
    const int nan_at[] = {0, 3, W + 6, W + 7, 33, 40, W + 49, 56};
    for (size_t k = 0; k < sizeof nan_at / sizeof nan_at[0]; k++)
        v[nan_at[k]] = NAN;
    v[10] = INFINITY, v[W + 11] = -INFINITY, v[44] = -INFINITY;
    double want[OW];
    for (int o = 0; o < OW; o++) {
        double a = v[2 * o], b = v[2 * o + 1], e = v[W + 2 * o], f = v[W + 2 * o + 1];
        double m = fmax(fmax(a, b), fmax(e, f));
        want[o] = (isnan(a) || isnan(b) || isnan(e) || isnan(f)) ? NAN : m;
    }
    int64_t xs[4] = {1, 1, 2, W}, os[4] = {1, 1, 1, OW};
    int k[2] = {2, 2};
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = d ? TIDE_FLOAT64 : TIDE_FLOAT32;
        tide_tensor *x = ref_from_doubles(v, 4, xs, dt);
        tide_tensor *r = tide_max_pool2d(x, k, NULL, NULL, NULL);
        ref_check_tensor(d ? "max_pool2d 2x2 rows float64" : "max_pool2d 2x2 rows float32", r,
                         dt, 4, os, want, 0);
        tide_release(r), tide_release(x);
    }
}

static void test_max_pool_special(void)
{
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = d ? TIDE_FLOAT64 : TIDE_FLOAT32;
        /* one 4x4 plane, 2x2 windows */
        double v[16] = {1,         NAN,       2,         3,  /* */
                        NAN,       0,         -INFINITY, -INFINITY,
                        5,         6,         -INFINITY, -INFINITY,
                        7,         INFINITY,  -INFINITY, -INFINITY};
        int64_t xs[4] = {1, 1, 4, 4}, os[4] = {1, 1, 2, 2};
        tide_tensor *x = ref_from_doubles(v, 4, xs, dt), *idx = NULL;
        int k[2] = {2, 2};
        tide_tensor *r = tide_max_pool2d(x, k, NULL, NULL, &idx);
        double want_v[4] = {NAN, 3, INFINITY, -INFINITY}, want_i[4] = {4, 3, 13, 10};
        ref_check_tensor(d ? "max_pool2d NaN/inf float64" : "max_pool2d NaN/inf float32", r, dt,
                         4, os, want_v, 0);
        ref_check_tensor("max_pool2d NaN/inf indices", idx, TIDE_INT64, 4, os, want_i, 0);
        tide_release(r), tide_release(idx);
        /* without indices */
        r = tide_max_pool2d(x, k, NULL, NULL, NULL);
        ref_check_tensor("max_pool2d without indices", r, dt, 4, os, want_v, 0);
        tide_release(r), tide_release(x);
    }
}

static void test_pool_empty(void)
{
    int k[2] = {2, 2};
    int64_t xs[4] = {0, 3, 4, 4}, os[4] = {0, 3, 2, 2}, cs[4] = {2, 0, 4, 4}, co[4] = {2, 0, 2, 2};
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *idx = NULL;
    tide_tensor *r = tide_max_pool2d(x, k, NULL, NULL, &idx);
    CHECK(ref_same_shape(r, 4, os) && ref_same_shape(idx, 4, os),
          "max_pool2d of an empty batch: %s", ref_tensor_shape_str(r));
    tide_release(r), tide_release(idx), tide_release(x);
    x = tide_zeros(4, cs, TIDE_FLOAT64);
    r = tide_avg_pool2d(x, k, NULL, NULL, true);
    CHECK(ref_same_shape(r, 4, co), "avg_pool2d with no channels: %s", ref_tensor_shape_str(r));
    tide_release(r), tide_release(x);
    tide_tensor *g = tide_zeros(4, co, TIDE_FLOAT64);
    int64_t hw[2] = {4, 4};
    r = tide_avg_pool2d_grad(g, hw, k, NULL, NULL, false);
    CHECK(ref_same_shape(r, 4, cs), "avg_pool2d_grad with no channels: %s",
          ref_tensor_shape_str(r));
    tide_release(r), tide_release(g);
}

/* ---- adaptive average pooling ------------------------------------------------------------ */

/* PyTorch's bins [floor(i*H/oh), ceil((i+1)*H/oh)); scale gets the mean of |x| in the bin. */
static void ref_adaptive(const int64_t *xs, int64_t oh, int64_t ow, const double *x, double *res,
                         double *scale)
{
    int64_t H = xs[2], W = xs[3];
    for (int64_t p = 0; p < xs[0] * xs[1]; p++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t h0 = i * H / oh, h1 = ((i + 1) * H + oh - 1) / oh;
                int64_t w0 = j * W / ow, w1 = ((j + 1) * W + ow - 1) / ow;
                double sum = 0, abs_sum = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        sum += x[(p * H + ih) * W + iw];
                        abs_sum += fabs(x[(p * H + ih) * W + iw]);
                    }
                double count = (double)((h1 - h0) * (w1 - w0));
                res[(p * oh + i) * ow + j] = sum / count;
                scale[(p * oh + i) * ow + j] = abs_sum / count;
            }
}

static void test_adaptive(void)
{
    static const int64_t cases[][4] = {
        {5, 7, 1, 1}, {8, 6, 4, 3}, {8, 6, 8, 6}, {7, 5, 3, 2},
        {3, 4, 5, 7}, {9, 8, 3, 5}, {6, 6, 1, 4}, {1, 1, 2, 3},
    };
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++)
        for (int d = 0; d < 2; d++)
            for (int layout = 0; layout < NL; layout += 2) {
                tide_dtype dt = d ? TIDE_FLOAT64 : TIDE_FLOAT32;
                ref_seed((uint64_t)(5000 + ci * 10 + d * 7 + layout));
                int64_t xs[4] = {2, 3, cases[ci][0], cases[ci][1]};
                int64_t os[4] = {2, 3, cases[ci][2], cases[ci][3]};
                double *x = gen4(xs, dt, layout);
                double *want = malloc((size_t)ref_numel(4, os) * sizeof *want);
                double *scale = malloc((size_t)ref_numel(4, os) * sizeof *scale);
                ref_adaptive(xs, os[2], os[3], x, want, scale);
                tide_tensor *tx = make4(x, xs, dt, layout);
                tide_tensor *r = tide_adaptive_avg_pool2d(tx, os[2], os[3]);
                char desc[200];
                snprintf(desc, sizeof desc, "adaptive_avg_pool2d (%lld,%lld) -> (%lld,%lld) %s %s",
                         (long long)xs[2], (long long)xs[3], (long long)os[2], (long long)os[3],
                         ref_dtype_name(dt), LAYOUT_NAMES[layout]);
                check_sum(desc, r, dt, os, want, scale, dt == TIDE_FLOAT32 ? 1e-6 : 1e-14);
                tide_release(r), tide_release(tx);
                free(x), free(want), free(scale);
            }
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_conv_errors(void)
{
    int s1[2] = {1, 1}, p0[2] = {0, 0}, d1[2] = {1, 1};
    int64_t xs[4] = {2, 4, 6, 6}, ws[4] = {6, 2, 3, 3}, bs = 6;
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *w = tide_zeros(4, ws, TIDE_FLOAT32);
    tide_tensor *x64 = tide_zeros(4, xs, TIDE_FLOAT64), *xi = tide_zeros(4, xs, TIDE_INT32);
    tide_tensor *x3 = tide_zeros(3, xs + 1, TIDE_FLOAT32);
    tide_tensor *w3 = tide_zeros(3, ws + 1, TIDE_FLOAT32);
    tide_tensor *wi = tide_zeros(4, ws, TIDE_INT64), *b = tide_zeros(1, &bs, TIDE_FLOAT32);

    CHECK_ERROR(tide_conv2d(NULL, w, NULL, s1, p0, d1, 2), "conv2d", "input is NULL");
    CHECK_ERROR(tide_conv2d(x, NULL, NULL, s1, p0, d1, 2), "conv2d", "weight is NULL");
    CHECK_ERROR(tide_conv2d(x3, w, NULL, s1, p0, d1, 2), "conv2d", "4-D input", "[4, 6, 6]",
                "float32");
    CHECK_ERROR(tide_conv2d(x, w3, NULL, s1, p0, d1, 2), "conv2d", "4-D weight", "[2, 3, 3]");
    CHECK_ERROR(tide_conv2d(xi, w, NULL, s1, p0, d1, 2), "conv2d", "int32", "floating dtype");
    CHECK_ERROR(tide_conv2d(x, wi, NULL, s1, p0, d1, 2), "conv2d", "weight", "int64");
    CHECK_ERROR(tide_conv2d(x64, w, NULL, s1, p0, d1, 2), "conv2d", "same dtype", "float64",
                "float32");
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, d1, 0), "conv2d", "groups must be positive");
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, d1, -2), "conv2d", "groups must be positive");
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, d1, 3), "conv2d", "groups (3)",
                "input channels (4)", "[2, 4, 6, 6]");
    int64_t w5s[4] = {5, 2, 3, 3};
    tide_tensor *w5 = tide_zeros(4, w5s, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv2d(x, w5, NULL, s1, p0, d1, 2), "conv2d", "output channels (5)");
    tide_release(w5);
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, d1, 1), "conv2d", "channel mismatch",
                "[2, 4, 6, 6] float32", "[6, 2, 3, 3] float32");
    int s0[2] = {1, 0}, dm[2] = {0, 1}, pn[2] = {-1, 0};
    CHECK_ERROR(tide_conv2d(x, w, NULL, s0, p0, d1, 2), "conv2d", "stride must be positive",
                "(1, 0)");
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, dm, 2), "conv2d", "dilation must be positive");
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, pn, d1, 2), "conv2d", "padding must be non-negative",
                "(-1, 0)");
    int d4[2] = {3, 1};
    CHECK_ERROR(tide_conv2d(x, w, NULL, s1, p0, d4, 2), "conv2d", "larger than the input",
                "(3, 3)", "[2, 4, 6, 6] float32");
    int64_t wzs[4] = {6, 2, 0, 3};
    tide_tensor *wz = tide_zeros(4, wzs, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv2d(x, wz, NULL, s1, p0, d1, 2), "conv2d", "kernel size must be positive");
    tide_release(wz);
    int64_t b5 = 5, b2[2] = {1, 6};
    tide_tensor *bb = tide_zeros(1, &b5, TIDE_FLOAT32), *bm = tide_zeros(2, b2, TIDE_FLOAT32);
    tide_tensor *b64 = tide_zeros(1, &bs, TIDE_FLOAT64);
    CHECK_ERROR(tide_conv2d(x, w, bb, s1, p0, d1, 2), "conv2d", "bias [5] float32",
                "one value per output channel (6)");
    CHECK_ERROR(tide_conv2d(x, w, bm, s1, p0, d1, 2), "conv2d", "bias [1, 6]");
    CHECK_ERROR(tide_conv2d(x, w, b64, s1, p0, d1, 2), "conv2d", "bias", "same dtype");
    tide_release(bb), tide_release(bm), tide_release(b64);
    /* an output too large to allocate */
    int big[2] = {1 << 30, 1 << 30};
    CHECK_ERROR(tide_conv2d(x, w, b, s1, big, d1, 2), "conv2d");
    /* the CPU kernel: more than 2^31 - 1 rows per group (expanded, no memory behind them) */
    int64_t one[4] = {1, 1, 1, 1}, huge[4] = {1, (int64_t)1 << 31, 1, 1};
    tide_tensor *t1 = tide_zeros(4, one, TIDE_FLOAT32);
    tide_tensor *hx = tide_expand(t1, 4, huge), *hw = tide_expand(t1, 4, huge);
    CHECK_ERROR(tide_conv2d(hx, hw, NULL, s1, p0, d1, 1), "conv2d", "32-bit range");
    tide_release(hx), tide_release(hw), tide_release(t1);
    /* out of memory for a temporary (TIDE_MAX_MEMORY is set low in main) */
    int64_t many[4] = {2, (int64_t)1 << 29, 1, 1};
    t1 = tide_zeros(4, one, TIDE_FLOAT64);
    hx = tide_expand(t1, 4, (int64_t[4]){1, (int64_t)1 << 29, 1, 1});
    hw = tide_expand(t1, 4, many);
    CHECK_ERROR(tide_conv2d(hx, hw, NULL, s1, p0, d1, 1), "conv2d", "out of memory");
    tide_release(hx), tide_release(hw), tide_release(t1);
    /* ... and for the stride phases of a 2x2 stride-2 convolution (8 GiB of them) */
    int s2[2] = {2, 2};
    int64_t wide[4] = {1, (int64_t)1 << 28, 2, 2};
    t1 = tide_zeros(4, one, TIDE_FLOAT64);
    hx = tide_expand(t1, 4, wide);
    hw = tide_expand(t1, 4, wide);
    CHECK_ERROR(tide_conv2d(hx, hw, NULL, s2, p0, d1, 1), "conv2d", "out of memory");
    tide_release(hx), tide_release(hw), tide_release(t1);
    tide_release(x), tide_release(w), tide_release(x64), tide_release(xi), tide_release(x3);
    tide_release(w3), tide_release(wi), tide_release(b);
}

static void test_conv_grad_errors(void)
{
    int s1[2] = {1, 1}, p0[2] = {0, 0}, d1[2] = {1, 1};
    int64_t gs[4] = {2, 6, 4, 4}, ws[4] = {6, 2, 3, 3}, xs[4] = {2, 4, 6, 6};
    int64_t hw[2] = {6, 6}, khw[2] = {3, 3};
    tide_tensor *g = tide_zeros(4, gs, TIDE_FLOAT32), *w = tide_zeros(4, ws, TIDE_FLOAT32);
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *g64 = tide_zeros(4, gs, TIDE_FLOAT64);
    tide_tensor *gi = tide_zeros(4, gs, TIDE_UINT8);

    /* grad_input */
    const char *op = "conv2d_grad_input";
    CHECK_ERROR(tide_conv2d_grad_input(NULL, w, hw, s1, p0, d1, 2), op, "grad_out is NULL");
    CHECK_ERROR(tide_conv2d_grad_input(g, NULL, hw, s1, p0, d1, 2), op, "weight is NULL");
    CHECK_ERROR(tide_conv2d_grad_input(g, w, NULL, s1, p0, d1, 2), op, "input_hw is NULL");
    int64_t neg[2] = {-1, 6};
    CHECK_ERROR(tide_conv2d_grad_input(g, w, neg, s1, p0, d1, 2), op, "non-negative");
    CHECK_ERROR(tide_conv2d_grad_input(gi, w, hw, s1, p0, d1, 2), op, "uint8");
    CHECK_ERROR(tide_conv2d_grad_input(g64, w, hw, s1, p0, d1, 2), op, "same dtype");
    CHECK_ERROR(tide_conv2d_grad_input(x, w, hw, s1, p0, d1, 2), op, "4 channels",
                "6 output channels");
    CHECK_ERROR(tide_conv2d_grad_input(g, w, hw, s1, p0, d1, 4), op, "groups (4)",
                "output channels (6)");
    CHECK_ERROR(tide_conv2d_grad_input(g, w, hw, s1, p0, d1, 0), op, "groups must be positive");
    int64_t hw7[2] = {7, 6}, hw1[2] = {1, 6};
    CHECK_ERROR(tide_conv2d_grad_input(g, w, hw7, s1, p0, d1, 2), op, "does not fit",
                "(7, 6)", "(5, 4)");
    CHECK_ERROR(tide_conv2d_grad_input(g, w, hw1, s1, p0, d1, 2), op, "larger than the input");
    int s0[2] = {0, 1};
    CHECK_ERROR(tide_conv2d_grad_input(g, w, hw, s0, p0, d1, 2), op, "stride must be positive");

    /* grad_weight */
    op = "conv2d_grad_weight";
    CHECK_ERROR(tide_conv2d_grad_weight(NULL, g, khw, s1, p0, d1, 2), op, "input is NULL");
    CHECK_ERROR(tide_conv2d_grad_weight(x, NULL, khw, s1, p0, d1, 2), op, "grad_out is NULL");
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, NULL, s1, p0, d1, 2), op, "kernel_hw is NULL");
    CHECK_ERROR(tide_conv2d_grad_weight(x, g64, khw, s1, p0, d1, 2), op, "same dtype");
    int64_t g3s[4] = {3, 6, 4, 4};
    tide_tensor *g3 = tide_zeros(4, g3s, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv2d_grad_weight(x, g3, khw, s1, p0, d1, 2), op, "batch sizes",
                "[2, 4, 6, 6]", "[3, 6, 4, 4]");
    tide_release(g3);
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, khw, s1, p0, d1, 3), op, "groups (3)");
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, khw, s1, p0, d1, -1), op, "groups must be positive");
    int64_t k0[2] = {0, 3}, k2[2] = {2, 3}, k9[2] = {9, 3};
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, k0, s1, p0, d1, 2), op,
                "kernel size must be positive");
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, k2, s1, p0, d1, 2), op, "does not fit", "(5, 4)");
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, k9, s1, p0, d1, 2), op, "larger than the input");
    int pn[2] = {0, -3};
    CHECK_ERROR(tide_conv2d_grad_weight(x, g, khw, s1, pn, d1, 2), op,
                "padding must be non-negative");
    tide_release(g), tide_release(w), tide_release(x), tide_release(g64), tide_release(gi);
}

static void test_pool_errors(void)
{
    int64_t xs[4] = {2, 3, 6, 6};
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *xi = tide_zeros(4, xs, TIDE_INT64);
    tide_tensor *x3 = tide_zeros(3, xs + 1, TIDE_FLOAT32);
    int64_t es[4] = {2, 3, 0, 6};
    tide_tensor *xe = tide_zeros(4, es, TIDE_FLOAT32);
    int k2[2] = {2, 2}, k0[2] = {0, 2}, s0[2] = {2, 0}, pn[2] = {-1, 0}, p2[2] = {2, 0};
    int k7[2] = {7, 1}, p1[2] = {1, 1};
    for (int which = 0; which < 2; which++) {
        const char *op = which ? "avg_pool2d" : "max_pool2d";
#define POOL(xx, kk, ss, pp)                                                                       \
    (which ? tide_avg_pool2d(xx, kk, ss, pp, true) : tide_max_pool2d(xx, kk, ss, pp, NULL))
        CHECK_ERROR(POOL(NULL, k2, NULL, NULL), op, "input is NULL");
        CHECK_ERROR(POOL(x3, k2, NULL, NULL), op, "4-D input", "[3, 6, 6]");
        CHECK_ERROR(POOL(xi, k2, NULL, NULL), op, "int64", "floating dtype");
        CHECK_ERROR(POOL(x, NULL, NULL, NULL), op, "kernel is NULL");
        CHECK_ERROR(POOL(x, k0, NULL, NULL), op, "kernel size must be positive");
        CHECK_ERROR(POOL(x, k2, s0, NULL), op, "stride must be positive");
        CHECK_ERROR(POOL(x, k2, NULL, pn), op, "padding must be non-negative");
        CHECK_ERROR(POOL(x, k2, NULL, p2), op, "at most half the kernel", "(2, 0)");
        CHECK_ERROR(POOL(x, k7, NULL, NULL), op, "larger than the input", "[2, 3, 6, 6]");
        CHECK_ERROR(POOL(xe, k2, NULL, p1), op, "non-empty", "[2, 3, 0, 6]");
#undef POOL
    }
    /* max_pool2d clears *indices when it fails */
    tide_tensor *idx = x;
    CHECK_ERROR(tide_max_pool2d(x, k0, NULL, NULL, &idx), "max_pool2d", "kernel size");
    CHECK(idx == NULL, "max_pool2d left *indices set after an error");

    const char *op = "avg_pool2d_grad";
    int64_t gs[4] = {2, 3, 3, 3}, hw[2] = {6, 6}, hw8[2] = {8, 6};
    tide_tensor *g = tide_zeros(4, gs, TIDE_FLOAT64);
    CHECK_ERROR(tide_avg_pool2d_grad(NULL, hw, k2, NULL, NULL, true), op, "grad_out is NULL");
    CHECK_ERROR(tide_avg_pool2d_grad(g, NULL, k2, NULL, NULL, true), op, "input_hw is NULL");
    CHECK_ERROR(tide_avg_pool2d_grad(g, hw8, k2, NULL, NULL, true), op, "does not fit", "(8, 6)",
                "(4, 3)");
    CHECK_ERROR(tide_avg_pool2d_grad(g, hw, k2, NULL, p2, true), op, "at most half the kernel");
    CHECK_ERROR(tide_avg_pool2d_grad(xi, hw, k2, NULL, NULL, true), op, "int64");
    tide_release(g);

    op = "adaptive_avg_pool2d";
    CHECK_ERROR(tide_adaptive_avg_pool2d(NULL, 1, 1), op, "input is NULL");
    CHECK_ERROR(tide_adaptive_avg_pool2d(x3, 1, 1), op, "4-D input");
    CHECK_ERROR(tide_adaptive_avg_pool2d(xi, 1, 1), op, "int64");
    CHECK_ERROR(tide_adaptive_avg_pool2d(x, 0, 1), op, "must be positive", "(0, 1)");
    CHECK_ERROR(tide_adaptive_avg_pool2d(xe, 1, 1), op, "non-empty", "[2, 3, 0, 6]");
    CHECK_ERROR(tide_adaptive_avg_pool2d(x, 5000, 2), op, "not supported", "(5000, 2)",
                "[2, 3, 6, 6]");
    tide_release(x), tide_release(xi), tide_release(x3), tide_release(xe);
}

int main(void)
{
    /* Low enough that a multi-GiB temporary fails fast (test_conv_errors), far above the rest. */
    setenv("TIDE_MAX_MEMORY", "2048", 1);
    test_conv_grid();
    test_conv_bias();
    test_conv_defaults();
    test_conv_empty();
    test_pool_grid();
    test_max_pool_special();
    test_max_pool_rows();
    test_pool_empty();
    test_adaptive();
    test_conv_errors();
    test_conv_grad_errors();
    test_pool_errors();
    return test_summary("test_conv");
}
