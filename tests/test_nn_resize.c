/*
 * test_nn_resize.c — group_norm, instance_norm, interpolate (nearest, linear in 1-3 dims, both
 * align_corners, size or scale), pad's reflect/replicate/circular modes and pixel_shuffle /
 * pixel_unshuffle (ops/nn_group_norm.c, nn_resize.c, nn_pad.c) against plain double loops written
 * from PyTorch's definitions, in float32 and float64; then the errors each reports.
 */
#include <math.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

static const tide_dtype FLOATS[2] = {TIDE_FLOAT32, TIDE_FLOAT64};

/* float32 keeps ~7 digits; a mean/variance over a few dozen values loses about one more. */
static double tol_of(tide_dtype dt) { return dt == TIDE_FLOAT32 ? 1e-5 : 1e-12; }

static void check(const char *desc, tide_tensor *t, tide_dtype dt, int ndim, const int64_t *shape,
                  const double *want)
{
    if (!t) {
        CHECK(t != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(t) == dt, "%s: dtype %s", desc, ref_dtype_name(tide_get_dtype(t)));
    bool shape_ok = ref_same_shape(t, ndim, shape);
    CHECK(shape_ok, "%s: shape %s, want %s", desc, ref_tensor_shape_str(t),
          ref_shape_str(ndim, shape));
    double *got = shape_ok ? ref_read(t) : NULL;
    if (got) {
        int64_t bad = ref_mismatch(got, want, ref_numel(ndim, shape), tol_of(dt), tol_of(dt));
        CHECK(bad < 0, "%s: first mismatch at %s: got %.12g, want %.12g", desc,
              ref_index_str(ndim, shape, bad), got[bad], want[bad]);
    }
    free(got);
    tide_release(t);
}

/* n random values rounded to dt, in [-2, 2]. */
static double *random_values(int64_t n, tide_dtype dt)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_quantize(dt, 4 * ref_uniform() - 2);
    return v;
}

/* ---- group_norm / instance_norm ----------------------------------------------------------- */

static void ref_group_norm(const double *x, double *y, int64_t n, int64_t c, int64_t sp,
                           int64_t groups, const double *w, const double *b, double eps)
{
    int64_t per = c / groups * sp;
    for (int64_t s = 0; s < n; s++)
        for (int64_t g = 0; g < groups; g++) {
            const double *row = x + (s * groups + g) * per;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < per; i++)
                mean += row[i] / (double)per;
            for (int64_t i = 0; i < per; i++)
                var += (row[i] - mean) * (row[i] - mean) / (double)per;
            for (int64_t i = 0; i < per; i++) {
                int64_t ch = g * (c / groups) + i / sp;
                double v = (row[i] - mean) / sqrt(var + eps);
                y[(s * groups + g) * per + i] = v * (w ? w[ch] : 1) + (b ? b[ch] : 0);
            }
        }
}

static void test_group_norm(void)
{
    const int64_t shape[4] = {2, 6, 3, 2}, cshape[1] = {6};
    int64_t numel = ref_numel(4, shape);
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = FLOATS[di];
        double *xv = random_values(numel, dt), *wv = random_values(6, dt), *bv = random_values(6, dt);
        double *want = malloc(sizeof(double) * (size_t)numel);
        tide_tensor *x = ref_from_doubles(xv, 4, shape, dt);
        tide_tensor *w = ref_from_doubles(wv, 1, cshape, dt), *b = ref_from_doubles(bv, 1, cshape, dt);
        static const int64_t groups[3] = {1, 3, 6};
        for (int gi = 0; gi < 3; gi++) {
            ref_group_norm(xv, want, 2, 6, 6, groups[gi], wv, bv, 1e-5);
            check("group_norm", tide_group_norm(x, groups[gi], w, b, 1e-5), dt, 4, shape, want);
        }
        ref_group_norm(xv, want, 2, 6, 6, 2, NULL, NULL, 0.1);
        check("group_norm without affine", tide_group_norm(x, 2, NULL, NULL, 0.1), dt, 4, shape, want);
        ref_group_norm(xv, want, 2, 6, 6, 6, wv, NULL, 1e-5);
        check("instance_norm", tide_instance_norm(x, w, NULL, 1e-5), dt, 4, shape, want);
        tide_release(x);
        tide_release(w);
        tide_release(b);
        free(xv);
        free(wv);
        free(bv);
        free(want);
    }
}

/* ---- interpolate --------------------------------------------------------------------------- */

/* Source coordinate of output o (PyTorch's area_pixel_compute_source_index). */
static double linear_source(int64_t o, int64_t in, int64_t out, double scale, bool align)
{
    if (align)
        return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
    double inv = scale > 0 ? 1 / scale : (double)in / (double)out;
    double s = ((double)o + 0.5) * inv - 0.5;
    return s < 0 ? 0 : s;
}

/* x [planes, ih, iw] resized bilinearly (or nearest) to [planes, oh, ow]. */
static void ref_resize2d(const double *x, double *y, int64_t planes, int64_t ih, int64_t iw,
                         int64_t oh, int64_t ow, const double *scales, bool linear, bool align)
{
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                const double *pl = x + p * ih * iw;
                double *out = y + (p * oh + i) * ow + j;
                if (!linear) {
                    float si = scales ? (float)(1.0 / scales[0]) : (float)ih / (float)oh;
                    float sj = scales ? (float)(1.0 / scales[1]) : (float)iw / (float)ow;
                    int64_t a = (int64_t)floorf((float)i * si), c = (int64_t)floorf((float)j * sj);
                    *out = pl[(a < ih ? a : ih - 1) * iw + (c < iw ? c : iw - 1)];
                    continue;
                }
                double sy = linear_source(i, ih, oh, scales ? scales[0] : 0, align);
                double sx = linear_source(j, iw, ow, scales ? scales[1] : 0, align);
                int64_t y0 = (int64_t)sy, x0 = (int64_t)sx;
                int64_t y1 = y0 < ih - 1 ? y0 + 1 : y0, x1 = x0 < iw - 1 ? x0 + 1 : x0;
                double fy = sy - (double)y0, fx = sx - (double)x0;
                *out = (1 - fy) * ((1 - fx) * pl[y0 * iw + x0] + fx * pl[y0 * iw + x1]) +
                       fy * ((1 - fx) * pl[y1 * iw + x0] + fx * pl[y1 * iw + x1]);
            }
}

static void test_interpolate(void)
{
    const int64_t shape[4] = {2, 3, 4, 5};
    int64_t numel = ref_numel(4, shape);
    static const int64_t sizes[][2] = {{7, 3}, {4, 5}, {8, 10}, {1, 1}, {9, 2}};
    static const double scales[][2] = {{1.7, 1.7}, {2, 0.5}, {1.5, 1.25}};
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = FLOATS[di];
        double *xv = random_values(numel, dt);
        tide_tensor *x = ref_from_doubles(xv, 4, shape, dt);
        double *want = malloc(sizeof(double) * 6 * 9 * 10);
        for (int mode = 0; mode < 3; mode++) { /* nearest, linear, linear with align_corners */
            bool linear = mode > 0, align = mode == 2;
            tide_interp_mode m = linear ? TIDE_INTERP_LINEAR : TIDE_INTERP_NEAREST;
            for (int si = 0; si < 5; si++) {
                const int64_t *sz = sizes[si], oshape[4] = {2, 3, sz[0], sz[1]};
                ref_resize2d(xv, want, 6, 4, 5, sz[0], sz[1], NULL, linear, align);
                check("interpolate size", tide_interpolate(x, 2, sz, NULL, m, align), dt, 4,
                      oshape, want);
            }
            for (int si = 0; si < 3; si++) {
                const double *sc = scales[si];
                int64_t oh = (int64_t)floor(4 * sc[0]), ow = (int64_t)floor(5 * sc[1]);
                const int64_t oshape[4] = {2, 3, oh, ow};
                ref_resize2d(xv, want, 6, 4, 5, oh, ow, align ? NULL : sc, linear, align);
                check("interpolate scale", tide_interpolate(x, 2, NULL, sc, m, align), dt, 4,
                      oshape, want);
            }
        }
        /* 1-D linear is the 2-D rule on rows of height 1 */
        const int64_t shape1[3] = {6, 4, 5}, out1[3] = {6, 4, 8}, size1[1] = {8};
        tide_tensor *x1 = ref_from_doubles(xv, 3, shape1, dt);
        ref_resize2d(xv, want, 6, 4, 5, 4, 8, NULL, true, false);
        check("interpolate 1-D", tide_interpolate(x1, 1, size1, NULL, TIDE_INTERP_LINEAR, false),
              dt, 3, out1, want);
        tide_release(x1);
        /* nearest-exact samples pixel centres: 4 -> 6 takes 0, 1, 1, 2, 3, 3 (PyTorch's answer) */
        const double ramp[4] = {10, 11, 12, 13}, exact[6] = {10, 11, 11, 12, 13, 13};
        const int64_t rshape[3] = {1, 1, 4}, eshape[3] = {1, 1, 6}, esize[1] = {6};
        tide_tensor *r = ref_from_doubles(ramp, 3, rshape, dt);
        check("interpolate nearest-exact",
              tide_interpolate(r, 1, esize, NULL, TIDE_INTERP_NEAREST_EXACT, false), dt, 3, eshape,
              exact);
        tide_release(r);
        tide_release(x);
        free(xv);
        free(want);
    }
}

/* ---- pad modes and pixel shuffles ---------------------------------------------------------- */

static int64_t ref_source(int mode, int64_t i, int64_t n)
{
    if (mode == TIDE_PAD_REPLICATE)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    if (mode == TIDE_PAD_CIRCULAR)
        return i < 0 ? i + n : i >= n ? i - n : i;
    return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i; /* reflect about the edge elements */
}

static void test_pad_modes(void)
{
    const int64_t shape[3] = {2, 3, 4}, pads[4] = {2, 3, 1, 2}, oshape[3] = {2, 6, 9};
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = FLOATS[di];
        double *xv = random_values(24, dt), want[2 * 6 * 9];
        tide_tensor *x = ref_from_doubles(xv, 3, shape, dt);
        for (int mode = TIDE_PAD_REFLECT; mode <= TIDE_PAD_CIRCULAR; mode++) {
            for (int64_t b = 0; b < 2; b++)
                for (int64_t i = 0; i < 6; i++)
                    for (int64_t j = 0; j < 9; j++)
                        want[(b * 6 + i) * 9 + j] =
                            xv[(b * 3 + ref_source(mode, i - 1, 3)) * 4 + ref_source(mode, j - 2, 4)];
            check("pad mode", tide_pad_mode(x, pads, 4, (tide_padding_mode)mode, 0), dt, 3, oshape,
                  want);
        }
        const int64_t cshape[3] = {2, 3, 9}, cpads[2] = {2, 3};
        for (int64_t k = 0; k < 2 * 3 * 9; k++)
            want[k] = k % 9 < 2 || k % 9 >= 6 ? 7.5 : xv[k / 9 * 4 + k % 9 - 2];
        check("pad constant", tide_pad_mode(x, cpads, 2, TIDE_PAD_CONSTANT, 7.5), dt, 3, cshape, want);
        tide_release(x);
        free(xv);
    }
}

static void test_pixel_shuffle(void)
{
    const int64_t shape[4] = {2, 8, 2, 3}, oshape[4] = {2, 2, 4, 6};
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = FLOATS[di];
        double *xv = random_values(96, dt), want[96];
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < 2; c++)
                for (int64_t h = 0; h < 4; h++)
                    for (int64_t w = 0; w < 6; w++) {
                        int64_t ic = c * 4 + (h % 2) * 2 + w % 2;
                        want[((n * 2 + c) * 4 + h) * 6 + w] = xv[((n * 8 + ic) * 2 + h / 2) * 3 + w / 2];
                    }
        tide_tensor *x = ref_from_doubles(xv, 4, shape, dt);
        tide_tensor *up = tide_pixel_shuffle(x, 2);
        tide_tensor *down = tide_pixel_unshuffle(up, 2);
        check("pixel_unshuffle(pixel_shuffle)", down, dt, 4, shape, xv);
        check("pixel_shuffle", up, dt, 4, oshape, want);
        tide_release(x);
        free(xv);
    }
}

static void test_errors(void)
{
    const int64_t shape[4] = {2, 4, 3, 3}, c3[1] = {3}, size[2] = {2, 2}, bad_pads[2] = {3, 0};
    tide_tensor *x = tide_zeros(4, shape, TIDE_FLOAT32);
    tide_tensor *xi = tide_zeros(4, shape, TIDE_INT64);
    tide_tensor *w3 = tide_ones(1, c3, TIDE_FLOAT32);
    CHECK_ERROR(tide_group_norm(x, 3, NULL, NULL, 1e-5), "group_norm", "4 channels", "3 groups",
                "[2, 4, 3, 3] float32");
    CHECK_ERROR(tide_group_norm(xi, 2, NULL, NULL, 1e-5), "group_norm", "int64");
    CHECK_ERROR(tide_group_norm(x, 2, w3, NULL, 1e-5), "group_norm", "weight", "[3]");
    CHECK_ERROR(tide_group_norm(x, 2, NULL, NULL, -1), "group_norm", "eps");
    CHECK_ERROR(tide_instance_norm(w3, NULL, NULL, 1e-5), "instance_norm", "[3] float32");
    CHECK_ERROR(tide_interpolate(x, 1, size, NULL, TIDE_INTERP_LINEAR, false), "interpolate",
                "[2, 4, 3, 3] float32");
    CHECK_ERROR(tide_interpolate(xi, 2, size, NULL, TIDE_INTERP_NEAREST, false), "interpolate",
                "int64");
    CHECK_ERROR(tide_interpolate(x, 2, NULL, NULL, TIDE_INTERP_NEAREST, false), "interpolate",
                "size or the scale");
    CHECK_ERROR(tide_pad_mode(x, bad_pads, 2, TIDE_PAD_REFLECT, 0), "pad", "reflect", "(3, 0)",
                "dim -1 of size 3", "[2, 4, 3, 3] float32");
    CHECK_ERROR(tide_pad_mode(x, bad_pads, 1, TIDE_PAD_REPLICATE, 0), "pad", "1 pad values");
    CHECK_ERROR(tide_pixel_shuffle(x, 3), "pixel_shuffle", "divisible", "[2, 4, 3, 3] float32");
    CHECK_ERROR(tide_pixel_unshuffle(x, 2), "pixel_unshuffle", "divisible");
    CHECK_ERROR(tide_pixel_shuffle(w3, 2), "pixel_shuffle", "at least 3 dims");
    tide_release(x);
    tide_release(xi);
    tide_release(w3);
}

int main(void)
{
    ref_seed(24);
    test_group_norm();
    test_interpolate();
    test_pad_modes();
    test_pixel_shuffle();
    test_errors();
    return test_summary("test_nn_resize");
}
