/*
 * onnx_ops_resize.c — ONNX's Resize (opset 11 on): nearest, linear and cubic, separable, so each
 * resized axis is one matrix product with an [in, out] weight matrix built on the host from the
 * reference's rule (the n source positions nearest the mapped coordinate, edge-clamped, their
 * weights zeroed and renormalized outside the input with exclude_outside).
 * Upsample (7-9) is Resize with asymmetric coordinates (nearest rounds down). GridSample (16 on,
 * 4-D) is tide_grid_sample.
 * Rejected: tf_crop_and_resize, antialias, axes, keep_aspect_ratio_policy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

typedef enum { COORD_HALF, COORD_PYTORCH_HALF, COORD_ALIGN, COORD_ASYM, COORD_TF_HALF_NN } coord;
typedef enum { NEAR_ROUND_FLOOR, NEAR_ROUND_CEIL, NEAR_FLOOR, NEAR_CEIL } nearest;

typedef struct resize_mode {
    int kind; /* 0 nearest, 1 linear, 2 cubic */
    coord coord;
    nearest nearest;
    double cubic_a;
    bool exclude_outside;
} resize_mode;

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static const char *const KINDS[] = {"nearest", "linear", "cubic"};
static const char *const COORDS[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn"};
static const char *const NEARESTS[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* Reads the modes; 1 with why when one is unsupported. */
static int read_mode(const onnx_node *n, resize_mode *m, char *why, size_t size)
{
    char b1[64], b2[64], b3[64];
    const char *k = onnx_attr_string(n, "mode", "nearest", b1, sizeof b1);
    const char *c = onnx_attr_string(n, "coordinate_transformation_mode", "half_pixel", b2,
                                     sizeof b2);
    const char *nm = onnx_attr_string(n, "nearest_mode", "round_prefer_floor", b3, sizeof b3);
    m->kind = pick(k, KINDS, 3);
    int ci = pick(c, COORDS, 5), ni = pick(nm, NEARESTS, 4);
    m->cubic_a = onnx_attr_float(n, "cubic_coeff_a", -0.75f);
    m->exclude_outside = onnx_attr_int(n, "exclude_outside", 0) != 0;
    const char *bad = m->kind < 0 ? k : ci < 0 ? c : ni < 0 ? nm : NULL;
    if (!bad && onnx_attr_int(n, "antialias", 0) != 0)
        bad = "antialias";
    if (!bad && onnx_attr(n, "axes"))
        bad = "axes";
    char b4[64];
    if (!bad && strcmp(onnx_attr_string(n, "keep_aspect_ratio_policy", "stretch", b4, sizeof b4),
                       "stretch"))
        bad = "keep_aspect_ratio_policy";
    if (bad) {
        snprintf(why, size, "mode or attribute '%s'", bad);
        return 1;
    }
    m->coord = (coord)ci;
    m->nearest = (nearest)ni;
    return 0;
}

static int check_resize(const onnx_node *n, char *why, size_t size)
{
    resize_mode m;
    return read_mode(n, &m, why, size);
}

/* Output coordinate x mapped into the input (scale = out / in, or the given scale; the output
 * length align_corners divides by is in * scale, not rounded, as the reference). */
static double source_coord(const resize_mode *m, double x, double scale, int64_t in, int64_t out)
{
    double len = (double)in * scale;
    switch (m->coord) {
    case COORD_HALF: return (x + 0.5) / scale - 0.5;
    case COORD_PYTORCH_HALF: return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case COORD_ALIGN: return len == 1.0 ? 0.0 : x * (double)(in - 1) / (len - 1);
    case COORD_ASYM: return x / scale;
    default: return (x + 0.5) / scale;
    }
}

/* The weights of the n neighbours for ratio r in (0, 1] (the left one at floor side). */
static int coeffs(const resize_mode *m, double r, double *w)
{
    if (m->kind == 1) {
        w[0] = 1 - r;
        w[1] = r;
        return 2;
    }
    if (m->kind == 0) {
        bool right = r == 1.0 ? true
                     : m->nearest == NEAR_ROUND_FLOOR ? r > 0.5
                     : m->nearest == NEAR_ROUND_CEIL  ? r >= 0.5
                                                      : m->nearest == NEAR_CEIL;
        w[0] = !right;
        w[1] = right;
        return 2;
    }
    double a = m->cubic_a, t;
    t = r + 1;
    w[0] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    t = 1 - r;
    w[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
    t = 2 - r;
    w[3] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 4;
}

/* Column o of the [in, out] matrix: the reference's neighbours of the source coordinate in the
 * edge-padded input (pad ceil(n/2)), clamped back into [0, in). */
static void weight_column(const resize_mode *m, double *mat, int64_t in, int64_t out, int64_t o,
                          double scale)
{
    double x = source_coord(m, (double)o, scale, in, out), w[4];
    double left = ceil(x) - 1, r = x - left;
    int n = coeffs(m, r, w), pad = (n + 1) / 2;
    int64_t limit = in + 2 * pad, start = (int64_t)left + pad - (n / 2 - 1);
    if (start > limit - n)
        start = limit - n;
    if (start < 0)
        start = 0;
    double sum = 0;
    for (int j = 0; j < n; j++) {
        int64_t idx = start + j - pad;
        if (m->exclude_outside && (idx < 0 || idx >= in))
            w[j] = 0;
        sum += w[j];
    }
    for (int j = 0; j < n; j++) {
        int64_t idx = start + j - pad;
        idx = idx < 0 ? 0 : idx >= in ? in - 1 : idx;
        mat[idx * out + o] += m->exclude_outside && sum != 0 ? w[j] / sum : w[j];
    }
}

/* x resized along axis to out by one matrix product. */
static tide_tensor *resize_axis(const onnx_ctx *c, const resize_mode *m, const tide_tensor *x,
                                int axis, int64_t out, double scale)
{
    int rank = tide_ndim(x);
    int64_t in = tide_shape(x)[axis], shape[2] = {in, out};
    double *mat = td_calloc((size_t)(in * out), sizeof *mat);
    if (!mat)
        return NULL;
    for (int64_t o = 0; o < out; o++)
        weight_column(m, mat, in, out, o, scale);
    tide_tensor *w64 = tide_from_data_on(onnx_device_of(c), mat, 2, shape, TIDE_FLOAT64);
    free(mat);
    tide_tensor *w = w64 ? tide_cast(w64, tide_get_dtype(x)) : NULL;
    tide_tensor *xt = w ? tide_transpose(x, axis, rank - 1) : NULL;
    tide_tensor *y = xt ? tide_matmul(xt, w) : NULL;
    tide_tensor *res = y ? tide_transpose(y, axis, rank - 1) : NULL;
    tide_tensor *tmp[] = {w64, w, xt, y};
    onnx_release_all(tmp, 4);
    return res;
}

/* Scales (input 2) or sizes (input 3) into out sizes and per-axis scales. */
static int read_targets(const onnx_ctx *c, int64_t *out, double *scale)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), count = 0;
    const tide_tensor *sc = c->nin > 2 ? c->in[2] : NULL;
    if (c->nin > 3 && c->in[3]) {
        if (onnx_input_ints(c, 3, out, 8, &count))
            return -1;
        if (count != rank)
            return onnx_error(c, "sizes has %d entries for %d dims", count, rank);
        for (int i = 0; i < rank; i++)
            scale[i] = (double)out[i] / (double)tide_shape(x)[i];
    } else if (sc && tide_numel(sc) == rank) {
        tide_tensor *d = tide_cast(sc, TIDE_FLOAT64);
        int rc = d ? tide_to_buffer(d, scale, (size_t)rank * sizeof *scale) : -1;
        tide_release(d);
        if (rc)
            return onnx_fail(c);
        for (int i = 0; i < rank; i++)
            out[i] = (int64_t)floor((double)tide_shape(x)[i] * scale[i]);
    } else {
        return onnx_error(c, "needs scales (one per dim) or sizes");
    }
    for (int i = 0; i < rank; i++)
        if (out[i] < 1 || out[i] > (1 << 24) || !(scale[i] > 0))
            return onnx_error(c, "output size %lld (scale %g) of dim %d is invalid",
                              (long long)out[i], scale[i], i);
    return 0;
}

static int resize_all(onnx_ctx *c, const resize_mode *m, const int64_t *out,
                      const double *scale);

static int run_resize(onnx_ctx *c)
{
    resize_mode m;
    char why[128];
    const tide_tensor *x = c->in[0];
    tide_dtype dt = tide_get_dtype(x);
    if (read_mode(c->node, &m, why, sizeof why))
        return onnx_unsupported(c, "%s", why);
    if (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT64)
        return onnx_unsupported(c, "a %s input (float32 and float64 only)", tide_dtype_name(dt));
    int64_t out[8];
    double scale[8];
    if (tide_ndim(x) < 1 || tide_ndim(x) > 8 || read_targets(c, out, scale))
        return tide_ndim(x) < 1 ? onnx_error(c, "X must have dims") : -1;
    return resize_all(c, &m, out, scale);
}

/* Upsample (7-9): asymmetric coordinates, nearest rounding down; scales an attribute before
 * opset 9, input 1 from 9. */
static int run_upsample(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), count = 0;
    char buf[32];
    const char *mode = onnx_attr_string(c->node, "mode", "nearest", buf, sizeof buf);
    resize_mode m = {.kind = !strcmp(mode, "linear") || !strcmp(mode, "bilinear"),
                     .coord = COORD_ASYM, .nearest = NEAR_FLOOR, .cubic_a = -0.75};
    tide_dtype dt = tide_get_dtype(x);
    if (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT64)
        return onnx_unsupported(c, "a %s input (float32 and float64 only)", tide_dtype_name(dt));
    double scale[8];
    int64_t out[8];
    if (rank < 1 || rank > 8)
        return onnx_error(c, "X has %d dims (1 to 8 supported)", rank);
    if (c->m->opset >= 9) {
        tide_tensor *d = c->nin > 1 && c->in[1] && tide_numel(c->in[1]) == rank
                             ? tide_cast(c->in[1], TIDE_FLOAT64) : NULL;
        int rc = d ? tide_to_buffer(d, scale, (size_t)rank * sizeof *scale) : -1;
        tide_release(d);
        if (rc)
            return onnx_error(c, "scales must hold one float per dim of X");
    } else {
        const float *f = onnx_attr_floats(c->node, "scales", &count);
        if (count != rank)
            return onnx_error(c, "scales has %d entries for %d dims", count, rank);
        for (int i = 0; i < rank; i++)
            scale[i] = f[i];
    }
    for (int i = 0; i < rank; i++) {
        out[i] = (int64_t)floor((double)tide_shape(x)[i] * scale[i]);
        if (out[i] < 1 || out[i] > (1 << 24) || !(scale[i] > 0))
            return onnx_error(c, "scale %g of dim %d is invalid", scale[i], i);
    }
    return resize_all(c, &m, out, scale);
}

static int check_upsample(const onnx_node *n, char *why, size_t size)
{
    char buf[32];
    const char *mode = onnx_attr_string(n, "mode", "nearest", buf, sizeof buf);
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear")) {
        snprintf(why, size, "mode '%s'", mode);
        return 1;
    }
    return 0;
}

/* Every axis whose size or scale changes, resized in turn. */
static int resize_all(onnx_ctx *c, const resize_mode *m, const int64_t *out, const double *scale)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *y = tide_retain((tide_tensor *)x);
    for (int i = 0; y && i < tide_ndim(x); i++)
        if (out[i] != tide_shape(x)[i] || scale[i] != 1.0) {
            tide_tensor *next = resize_axis(c, m, y, i, out[i], scale[i]);
            tide_release(y);
            y = next;
        }
    return onnx_set(c, y);
}

/* ---- GridSample (16): tide_grid_sample on 4-D inputs --------------------------------------- */

/* mode's index in {bilinear, nearest, bicubic} (opset 20's names linear and cubic too), else -1. */
static int grid_mode(const char *mode)
{
    static const char *const names[] = {"bilinear", "nearest", "bicubic", "linear", "", "cubic"};
    for (int i = 0; i < 6; i++)
        if (names[i][0] && !strcmp(mode, names[i]))
            return i % 3;
    return -1;
}

static int grid_padding(const char *pad)
{
    static const char *const names[] = {"zeros", "border", "reflection"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(pad, names[i]))
            return i;
    return -1;
}

static int check_grid_sample(const onnx_node *n, char *why, size_t size)
{
    char mbuf[32], pbuf[32];
    const char *mode = onnx_attr_string(n, "mode", "bilinear", mbuf, sizeof mbuf);
    const char *pad = onnx_attr_string(n, "padding_mode", "zeros", pbuf, sizeof pbuf);
    if (grid_mode(mode) < 0)
        snprintf(why, size, "mode '%s'", mode);
    else if (grid_padding(pad) < 0)
        snprintf(why, size, "padding_mode '%s'", pad);
    else
        return 0;
    return 1;
}

static int run_grid_sample(onnx_ctx *c)
{
    char mbuf[32], pbuf[32];
    const char *mode = onnx_attr_string(c->node, "mode", "bilinear", mbuf, sizeof mbuf);
    const char *pad = onnx_attr_string(c->node, "padding_mode", "zeros", pbuf, sizeof pbuf);
    if (tide_ndim(c->in[0]) != 4)
        return onnx_unsupported(c, "a %d-D input (only 4-D [N, C, H, W] is)", tide_ndim(c->in[0]));
    bool align = onnx_attr_int(c->node, "align_corners", 0) != 0;
    return onnx_set(c, tide_grid_sample(c->in[0], c->in[1], (tide_grid_mode)grid_mode(mode),
                                        (tide_grid_padding)grid_padding(pad), align));
}

const onnx_op onnx_ops_resize[] = {
    {"GridSample", 16, 0, 2, 2, check_grid_sample, run_grid_sample, 0},
    {"Resize", 11, 0, 1, 4, check_resize, run_resize, 0},
    {"Upsample", 7, 9, 1, 2, check_upsample, run_upsample, 0},
    {0},
};
