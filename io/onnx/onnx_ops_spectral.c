/*
 * onnx_ops_spectral.c — ONNX's signal ops. DFT and STFT are matrix products: the cos/sin
 * matrices of the transform are built on the host in double and the signal, in float64, is
 * multiplied by them (tide_matmul), so the result carries no more rounding than the float32 it
 * is cast back to; O(n^2) per signal, meant for the short signals models carry, not as an FFT.
 * The Hann, Hamming and Blackman windows and MelWeightMatrix are computed on the host in
 * double. Listed in onnx_ops_index.c's table.
 */
#include <math.h>
#include <stdlib.h>

#include "onnx_ops_move.h"

/* The [n, k] cos and sin matrices of a length-n transform with k output bins. */
static int dft_matrices(const onnx_ctx *c, int64_t n, int64_t k, tide_tensor **cs,
                        tide_tensor **sn)
{
    double *m = td_malloc(sizeof *m * (size_t)(2 * n * k + 1));
    if (!m)
        return onnx_fail(c);
    for (int64_t j = 0; j < n; j++)
        for (int64_t f = 0; f < k; f++) {
            double t = 2 * M_PI * (double)((j * f) % n) / (double)n; /* exact phase mod 2 pi */
            m[j * k + f] = cos(t);
            m[n * k + j * k + f] = sin(t);
        }
    int64_t shape[2] = {n, k};
    *cs = tide_from_data_on(onnx_device_of(c), m, 2, shape, TIDE_FLOAT64);
    *sn = *cs ? tide_from_data_on(onnx_device_of(c), m + n * k, 2, shape, TIDE_FLOAT64) : NULL;
    free(m);
    return *sn ? 0 : onnx_fail(c);
}

/* re, im [..., n] (float64) to the transform's [..., k] parts: forward e^{-i}, inverse e^{+i}
 * divided by n. */
static int dft_last(const onnx_ctx *c, tide_tensor *re, tide_tensor *im, int64_t k, bool inverse,
                    tide_tensor **ore, tide_tensor **oim)
{
    int64_t n = tide_shape(re)[tide_ndim(re) - 1];
    tide_tensor *cs = NULL, *sn = NULL;
    if (dft_matrices(c, n, k, &cs, &sn) < 0)
        return -1;
    tide_tensor *rc = tide_matmul(re, cs), *rs = tide_matmul(re, sn);
    tide_tensor *ic = tide_matmul(im, cs), *is = tide_matmul(im, sn);
    tide_tensor *r = NULL, *i = NULL;
    if (rc && rs && ic && is) {
        r = inverse ? tide_sub(rc, is) : tide_add(rc, is);
        i = inverse ? tide_add(ic, rs) : tide_sub(ic, rs);
    }
    *ore = r && inverse ? tide_div_scalar(r, (double)n) : tide_retain(r);
    *oim = i && inverse ? tide_div_scalar(i, (double)n) : tide_retain(i);
    tide_tensor *tmp[] = {cs, sn, rc, rs, ic, is, r, i};
    onnx_release_all(tmp, 8);
    return *ore && *oim ? 0 : onnx_fail(c);
}

/* x [..., 1 or 2] as float64 real and imaginary parts (zeros for a real signal). */
static int split_complex(const onnx_ctx *c, const tide_tensor *x, tide_tensor **re,
                         tide_tensor **im)
{
    int last = tide_ndim(x) - 1;
    int64_t parts = tide_shape(x)[last];
    if (parts != 1 && parts != 2)
        return onnx_error(c, "the last dim has %lld entries; it must be 1 (real) or 2 (complex)",
                          (long long)parts);
    tide_tensor *d = tide_cast(x, TIDE_FLOAT64);
    *re = d ? tide_select(d, last, 0) : NULL;
    *im = !*re ? NULL
          : parts == 2 ? tide_select(d, last, 1)
                       : tide_zeros_on(tide_device_name(*re), tide_ndim(*re), tide_shape(*re),
                                       TIDE_FLOAT64);
    tide_release(d);
    return *im ? 0 : onnx_fail(c);
}

int onnx_run_dft(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), axis;
    if (rank < 2 || onnx_dim_axis(c, onnx_attr_int(c->node, "axis", 1), rank - 1, &axis) < 0)
        return rank < 2 ? onnx_error(c, "the input needs at least 2 dims") : -1;
    bool inverse = onnx_attr_int(c->node, "inverse", 0) != 0;
    bool onesided = onnx_attr_int(c->node, "onesided", 0) != 0;
    int64_t len = tide_shape(x)[axis];
    int n;
    if (c->nin > 1 && c->in[1] && onnx_input_ints(c, 1, &len, 1, &n) < 0)
        return -1;
    if (len < 1 || (onesided && inverse))
        return onnx_error(c, "dft_length %lld, onesided %d with inverse %d", (long long)len,
                          onesided, inverse);
    tide_tensor *re = NULL, *im = NULL;
    if (split_complex(c, x, &re, &im) < 0)
        return -1;
    int last = rank - 2; /* of re and im */
    int64_t have = tide_shape(re)[axis], pads[2] = {0, len > have ? len - have : 0};
    tide_tensor *parts[2] = {re, im}, *moved[2] = {NULL, NULL}, *fit[2] = {NULL, NULL};
    for (int p = 0; p < 2; p++) {
        moved[p] = parts[p] ? tide_movedim(parts[p], 1, &axis, &last) : NULL;
        fit[p] = !moved[p] ? NULL : len > have ? tide_pad(moved[p], pads, 2, 0)
                                               : tide_slice(moved[p], last, 0, len, 1);
    }
    tide_tensor *ore = NULL, *oim = NULL, *back[2] = {NULL, NULL}, *st = NULL, *out = NULL;
    int rc = fit[0] && fit[1] ? dft_last(c, fit[0], fit[1], onesided ? len / 2 + 1 : len,
                                         inverse, &ore, &oim)
                              : onnx_fail(c);
    if (rc == 0) {
        back[0] = tide_movedim(ore, 1, &last, &axis);
        back[1] = back[0] ? tide_movedim(oim, 1, &last, &axis) : NULL;
        st = back[1] ? tide_stack(back, 2, rank - 1) : NULL;
        out = st ? tide_cast(st, tide_get_dtype(x)) : NULL;
        rc = onnx_set(c, out);
    }
    tide_tensor *tmp[] = {re, im, moved[0], moved[1], fit[0], fit[1], ore, oim, back[0],
                          back[1], st};
    onnx_release_all(tmp, 11);
    return rc;
}

/* The frame length and step of STFT and its window (float64, NULL when absent), checked. */
static int stft_frames(onnx_ctx *c, int64_t *length, int64_t *step, tide_tensor **window)
{
    int n;
    *window = NULL;
    if (onnx_input_ints(c, 1, step, 1, &n) < 0)
        return -1;
    bool has_window = c->nin > 2 && c->in[2], has_length = c->nin > 3 && c->in[3];
    if (has_length && onnx_input_ints(c, 3, length, 1, &n) < 0)
        return -1;
    if (has_window) {
        if (tide_ndim(c->in[2]) != 1 || (has_length && tide_numel(c->in[2]) != *length))
            return onnx_error(c, "the window must be 1-D of frame_length entries");
        *length = tide_numel(c->in[2]);
    } else if (!has_length)
        return onnx_error(c, "needs a window or a frame_length");
    int64_t signal = tide_shape(c->in[0])[1];
    if (*step < 1 || *length < 1 || *length > signal)
        return onnx_error(c, "frame_step %lld and frame_length %lld for a signal of %lld",
                          (long long)*step, (long long)*length, (long long)signal);
    *window = has_window ? tide_cast(c->in[2], TIDE_FLOAT64) : NULL;
    return has_window && !*window ? onnx_fail(c) : 0;
}

/* STFT: signal [batch, length, 1 or 2] cut into frames (times the window) and each one
 * transformed: [batch, frames, bins, 2], bins frame_length / 2 + 1 when onesided. */
int onnx_run_stft(onnx_ctx *c)
{
    if (tide_ndim(c->in[0]) != 3)
        return onnx_error(c, "the signal must be [batch, length, 1 or 2]");
    int64_t length = 0, step = 0;
    tide_tensor *window = NULL, *re = NULL, *im = NULL;
    if (stft_frames(c, &length, &step, &window) < 0 || split_complex(c, c->in[0], &re, &im) < 0) {
        tide_release(window);
        return -1;
    }
    bool onesided = onnx_attr_int(c->node, "onesided", 1) != 0;
    tide_tensor *fr[2] = {tide_unfold(re, 1, length, step), tide_unfold(im, 1, length, step)};
    tide_tensor *win[2] = {NULL, NULL}, *ore = NULL, *oim = NULL, *st = NULL;
    for (int p = 0; p < 2; p++)
        win[p] = !fr[p] ? NULL : window ? tide_mul(fr[p], window) : tide_retain(fr[p]);
    int rc = win[0] && win[1] ? dft_last(c, win[0], win[1], onesided ? length / 2 + 1 : length,
                                         false, &ore, &oim)
                              : onnx_fail(c);
    if (rc == 0) {
        tide_tensor *parts[2] = {ore, oim};
        st = tide_stack(parts, 2, 3);
        rc = onnx_set(c, st ? tide_cast(st, tide_get_dtype(c->in[0])) : NULL);
    }
    tide_tensor *tmp[] = {window, re, im, fr[0], fr[1], win[0], win[1], ore, oim, st};
    onnx_release_all(tmp, 10);
    return rc;
}

/* ---- windows ------------------------------------------------------------------------------ */

/* The cosine-sum windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size
 * (periodic) or size - 1 (symmetric), computed in double on the host, then cast to
 * output_datatype (float32 by default). */
static int cosine_window(onnx_ctx *c, double a0, double a1, double a2)
{
    int64_t size;
    int n;
    if (onnx_input_ints(c, 0, &size, 1, &n) < 0)
        return -1;
    if (size < 0)
        return onnx_error(c, "size is %lld", (long long)size);
    int dt = onnx_dtype((int32_t)onnx_attr_int(c->node, "output_datatype", 1));
    if (dt < 0)
        return onnx_unsupported(c, "output_datatype %lld",
                                (long long)onnx_attr_int(c->node, "output_datatype", 1));
    bool periodic = onnx_attr_int(c->node, "periodic", 1) != 0;
    double *w = td_malloc(sizeof *w * (size_t)(size + 1));
    if (!w)
        return onnx_fail(c);
    double den = periodic ? (double)size : (double)(size - 1);
    for (int64_t i = 0; i < size; i++) {
        double t = den > 0 ? 2 * M_PI * (double)i / den : 0;
        w[i] = a0 - a1 * cos(t) + a2 * cos(2 * t);
    }
    tide_tensor *d = tide_from_data_on(onnx_device_of(c), w, 1, &size, TIDE_FLOAT64);
    free(w);
    tide_tensor *out = d ? tide_cast(d, (tide_dtype)dt) : NULL;
    tide_release(d);
    return onnx_set(c, out);
}

int onnx_run_hann_window(onnx_ctx *c)
{
    return cosine_window(c, 0.5, 0.5, 0);
}

int onnx_run_hamming_window(onnx_ctx *c)
{
    return cosine_window(c, 25.0 / 46, 21.0 / 46, 0);
}

int onnx_run_blackman_window(onnx_ctx *c)
{
    return cosine_window(c, 0.42, 0.5, 0.08);
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------ */

/* The band edges of MelWeightMatrix: num_mel_bins + 2 points evenly spaced in mel between the
 * edges (the step divides by the point count, as ONNX's reference does), as DFT bin numbers. */
static int mel_edges(onnx_ctx *c, int64_t bins, int64_t dft_length, double rate, int64_t *edge)
{
    double lo, hi;
    if (onnx_input_scalar(c, 3, &lo) < 0 || onnx_input_scalar(c, 4, &hi) < 0)
        return -1;
    double mel_lo = 2595 * log10(1 + lo / 700), mel_hi = 2595 * log10(1 + hi / 700);
    double step = (mel_hi - mel_lo) / (double)(bins + 2);
    int64_t spectrum = dft_length / 2 + 1;
    for (int64_t i = 0; i < bins + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + mel_lo) / 2595) - 1);
        double bin = floor((double)(dft_length + 1) * hz / rate);
        if (!(bin >= 0 && bin < (double)spectrum))
            return onnx_error(c, "mel band edge %lld falls on DFT bin %g, outside [0, %lld)",
                              (long long)i, bin, (long long)spectrum);
        edge[i] = (int64_t)bin;
    }
    return 0;
}

/* MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles rising from each band's left
 * edge to its center and falling to its right edge. */
int onnx_run_mel_weight_matrix(onnx_ctx *c)
{
    int64_t bins, dft_length;
    double rate;
    int n;
    if (onnx_input_ints(c, 0, &bins, 1, &n) < 0 || onnx_input_ints(c, 1, &dft_length, 1, &n) < 0 ||
        onnx_input_scalar(c, 2, &rate) < 0)
        return -1;
    if (bins < 1 || bins > (1 << 20) || dft_length < 1 || dft_length > (1 << 24) || !(rate > 0))
        return onnx_error(c, "num_mel_bins %lld, dft_length %lld, sample_rate %g",
                          (long long)bins, (long long)dft_length, rate);
    int dt = onnx_dtype((int32_t)onnx_attr_int(c->node, "output_datatype", 1));
    if (dt < 0)
        return onnx_unsupported(c, "output_datatype %lld",
                                (long long)onnx_attr_int(c->node, "output_datatype", 1));
    int64_t spectrum = dft_length / 2 + 1, shape[2] = {spectrum, bins};
    int64_t *edge = td_malloc(sizeof *edge * (size_t)(bins + 2));
    double *w = edge ? td_calloc((size_t)(spectrum * bins), sizeof *w) : NULL;
    int rc = !w ? onnx_fail(c) : mel_edges(c, bins, dft_length, rate, edge);
    for (int64_t i = 0; i < bins && rc == 0; i++) {
        int64_t l = edge[i], m = edge[i + 1], r = edge[i + 2];
        if (m == l)
            w[m * bins + i] = 1;
        for (int64_t j = l; j <= m && m > l; j++)
            w[j * bins + i] = (double)(j - l) / (double)(m - l);
        for (int64_t j = m; j < r; j++)
            w[j * bins + i] = (double)(r - j) / (double)(r - m);
    }
    tide_tensor *d = rc == 0 ? tide_from_data_on(onnx_device_of(c), w, 2, shape, TIDE_FLOAT64)
                             : NULL;
    free(edge);
    free(w);
    if (rc < 0)
        return rc;
    tide_tensor *out = d ? tide_cast(d, (tide_dtype)dt) : NULL;
    tide_release(d);
    return onnx_set(c, out);
}
