/*
 * test_grid_sample.c — tide_grid_sample (ops/nn_grid_sample.c) against a plain double loop
 * written from PyTorch's CPU kernel (grid_sampler_2d: unnormalize, compute_coordinates with
 * clip and reflect_coordinates, nearbyint, the bilinear corners, the bicubic taps each padded on
 * its own): every mode x padding x align_corners, float32 and float64, grid points beyond the
 * edges so every padding rule is reached, a one-pixel-wide image; then the errors.
 *
 * Tolerances: float64 1e-12. float32 computes the coordinates in float32 (relative error
 * ~6e-8, so ~5e-7 pixel on these sizes); an output is a sum of up to 4 (bilinear) or 16
 * (bicubic) terms |weight * value| <= 2 whose weights move by at most ~3x the coordinate error:
 * 1e-5 for nearest and bilinear, 1e-4 for bicubic. Nearest could round differently only at a
 * coordinate within ~5e-7 of a half pixel, which the seeded points do not come near.
 */
#include <math.h>
#include <stdlib.h>

#include "tide.h"
#include "test_ref.h"
#include "test_util.h"

static double reflect(double in, double twice_low, double twice_high)
{
    if (twice_low == twice_high)
        return 0;
    double min = twice_low / 2, span = (twice_high - twice_low) / 2;
    in = fabs(in - min);
    double extra = fmod(in, span);
    int flips = (int)floor(in / span);
    return flips % 2 == 0 ? extra + min : span - extra + min;
}

static double clip(double x, int64_t size) { return fmin(fmax(x, 0), (double)(size - 1)); }

static double pad_coord(double x, int64_t size, tide_grid_padding pad, bool ac)
{
    if (pad == TIDE_GRID_BORDER)
        return clip(x, size);
    if (pad == TIDE_GRID_REFLECTION)
        return clip(ac ? reflect(x, 0, 2.0 * (double)(size - 1)) : reflect(x, -1, 2.0 * (double)size - 1),
                    size);
    return x;
}

static double unnormalize(double g, int64_t size, bool ac)
{
    return ac ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
}

/* plane[iy * w + ix], 0 outside the image. */
static double at(const double *plane, int64_t h, int64_t w, int64_t ix, int64_t iy)
{
    return ix >= 0 && ix < w && iy >= 0 && iy < h ? plane[iy * w + ix] : 0;
}

static double cubic(double d, bool near)
{
    const double A = -0.75;
    return near ? ((A + 2) * d - (A + 3)) * d * d + 1 : ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
}

static double ref_point(const double *plane, int64_t h, int64_t w, double gx, double gy,
                        tide_grid_mode mode, tide_grid_padding pad, bool ac)
{
    double x = unnormalize(gx, w, ac), y = unnormalize(gy, h, ac);
    if (mode == TIDE_GRID_BICUBIC) {
        double x0 = floor(x), y0 = floor(y), tx = x - x0, ty = y - y0, sum = 0;
        double wx[4] = {cubic(tx + 1, false), cubic(tx, true), cubic(1 - tx, true), cubic(2 - tx, false)};
        double wy[4] = {cubic(ty + 1, false), cubic(ty, true), cubic(1 - ty, true), cubic(2 - ty, false)};
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) {
                int64_t ix = (int64_t)pad_coord(x0 - 1 + i, w, pad, ac);
                int64_t iy = (int64_t)pad_coord(y0 - 1 + j, h, pad, ac);
                sum += wx[i] * wy[j] * at(plane, h, w, ix, iy);
            }
        return sum;
    }
    x = pad_coord(x, w, pad, ac);
    y = pad_coord(y, h, pad, ac);
    if (mode == TIDE_GRID_NEAREST)
        return at(plane, h, w, (int64_t)nearbyint(x), (int64_t)nearbyint(y));
    double x0 = floor(x), y0 = floor(y), fx = x - x0, fy = y - y0;
    int64_t ix = (int64_t)x0, iy = (int64_t)y0;
    return (1 - fx) * (1 - fy) * at(plane, h, w, ix, iy) + fx * (1 - fy) * at(plane, h, w, ix + 1, iy) +
           (1 - fx) * fy * at(plane, h, w, ix, iy + 1) + fx * fy * at(plane, h, w, ix + 1, iy + 1);
}

static const char *const MODES[] = {"bilinear", "nearest", "bicubic"};
static const char *const PADS[] = {"zeros", "border", "reflection"};

static void check_case(tide_dtype dt, int64_t h, int64_t w, tide_grid_mode mode,
                       tide_grid_padding pad, bool ac)
{
    enum { N = 2, C = 3, HO = 3, WO = 4 };
    int64_t xs[4] = {N, C, h, w}, gs[4] = {N, HO, WO, 2}, os[4] = {N, C, HO, WO};
    double *xv = malloc(sizeof(double) * (size_t)(N * C * h * w)), gv[N * HO * WO * 2];
    double want[N * C * HO * WO];
    for (int64_t i = 0; i < N * C * h * w; i++)
        xv[i] = ref_quantize(dt, 4 * ref_uniform() - 2);
    for (int i = 0; i < N * HO * WO * 2; i++)
        gv[i] = ref_quantize(dt, 2.6 * ref_uniform() - 1.3); /* beyond [-1, 1]: the padding */
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HO * WO; p++)
                want[(n * C + c) * HO * WO + p] =
                    ref_point(xv + (n * C + c) * h * w, h, w, gv[(n * HO * WO + p) * 2],
                              gv[(n * HO * WO + p) * 2 + 1], mode, pad, ac);
    tide_tensor *x = ref_from_doubles(xv, 4, xs, dt), *g = ref_from_doubles(gv, 4, gs, dt);
    tide_tensor *y = tide_grid_sample(x, g, mode, pad, ac);
    char desc[160];
    snprintf(desc, sizeof desc, "%s %s align_corners=%d %s [%lld, %lld]", MODES[mode], PADS[pad],
             ac, ref_dtype_name(dt), (long long)h, (long long)w);
    double tol = dt == TIDE_FLOAT64 ? 1e-12 : mode == TIDE_GRID_BICUBIC ? 1e-4 : 1e-5;
    CHECK(y && ref_same_shape(y, 4, os), "%s: %s", desc, y ? ref_tensor_shape_str(y) : tide_last_error());
    if (y && ref_same_shape(y, 4, os)) {
        double *got = ref_read(y);
        int64_t bad = ref_mismatch(got, want, N * C * HO * WO, tol, tol);
        CHECK(bad < 0, "%s: element %lld is %.9g, expected %.9g", desc, (long long)bad,
              bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
        free(got);
    }
    tide_release(y);
    tide_release(g);
    tide_release(x);
    free(xv);
}

static void test_errors(void)
{
    int64_t xs[4] = {2, 3, 4, 5}, bad_grid[4] = {2, 3, 4, 3}, other_n[4] = {1, 3, 4, 2};
    int64_t gs[4] = {2, 3, 4, 2}, empty[4] = {2, 3, 0, 5};
    tide_tensor *x = tide_zeros(4, xs, TIDE_FLOAT32), *g = tide_zeros(4, gs, TIDE_FLOAT32);
    tide_tensor *g3 = tide_zeros(4, bad_grid, TIDE_FLOAT32), *g1 = tide_zeros(4, other_n, TIDE_FLOAT32);
    tide_tensor *gd = tide_zeros(4, gs, TIDE_FLOAT64), *xi = tide_zeros(4, xs, TIDE_INT64);
    tide_tensor *xe = tide_zeros(4, empty, TIDE_FLOAT32);
    CHECK_ERROR(tide_grid_sample(x, g3, TIDE_GRID_BILINEAR, TIDE_GRID_ZEROS, false), "grid_sample",
                "[2, 3, 4, 5] float32", "[2, 3, 4, 3] float32");
    CHECK_ERROR(tide_grid_sample(x, g1, TIDE_GRID_BILINEAR, TIDE_GRID_ZEROS, false), "grid_sample",
                "[1, 3, 4, 2]");
    CHECK_ERROR(tide_grid_sample(x, gd, TIDE_GRID_BILINEAR, TIDE_GRID_ZEROS, false), "grid_sample",
                "float32", "float64");
    CHECK_ERROR(tide_grid_sample(xi, g, TIDE_GRID_BILINEAR, TIDE_GRID_ZEROS, false), "grid_sample",
                "int64");
    CHECK_ERROR(tide_grid_sample(x, g, (tide_grid_mode)7, TIDE_GRID_ZEROS, false), "grid_sample",
                "mode 7");
    CHECK_ERROR(tide_grid_sample(x, g, TIDE_GRID_NEAREST, (tide_grid_padding)9, false),
                "grid_sample", "padding mode 9");
    CHECK_ERROR(tide_grid_sample(xe, g, TIDE_GRID_NEAREST, TIDE_GRID_ZEROS, false), "grid_sample",
                "no pixels");
    CHECK_ERROR(tide_grid_sample(NULL, g, TIDE_GRID_NEAREST, TIDE_GRID_ZEROS, false), "grid_sample");
    tide_tensor *all[] = {x, g, g3, g1, gd, xi, xe};
    for (int i = 0; i < 7; i++)
        tide_release(all[i]);
}

int main(void)
{
    ref_seed(11);
    const tide_dtype dts[2] = {TIDE_FLOAT32, TIDE_FLOAT64};
    for (int d = 0; d < 2; d++)
        for (int m = 0; m < 3; m++)
            for (int p = 0; p < 3; p++)
                for (int ac = 0; ac < 2; ac++) {
                    check_case(dts[d], 4, 5, (tide_grid_mode)m, (tide_grid_padding)p, ac);
                    check_case(dts[d], 3, 1, (tide_grid_mode)m, (tide_grid_padding)p, ac);
                }
    test_errors();
    return test_summary("test_grid_sample");
}
