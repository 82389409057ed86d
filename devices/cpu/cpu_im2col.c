/*
 * cpu_im2col.c — moving the windows of a strided NCHW tensor into column matrices and back
 * (cpu_conv.h). A block's positions are walked as runs that share an image and an output row:
 * along such a run the input column advances by the stride, so each run is a zero head, a
 * copy (a memcpy when stride and layout allow) and a zero tail. Everything here runs on the
 * calling thread: cpu_conv.c decides what runs in parallel.
 */
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu_conv.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

td_nchw td_nchw_of(const tide_tensor *t)
{
    td_nchw v = {td_tensor_data(t), {t->strides[0], t->strides[1], t->strides[2], t->strides[3]}};
    return v;
}

void td_copy_strided(char *dst, const char *src, int64_t n, int64_t step, size_t es)
{
    if (step == 1) {
        memcpy(dst, src, (size_t)n * es);
    } else if (es == 4 && step == 2) { /* downsampling layers */
        int64_t t = 0;
#if defined(__SSE2__)
        /* two vectors in, their even lanes out (shuffles keep the bits); the last vector read
         * ends at an element the run still takes, never past the run */
        for (; t + 5 <= n; t += 4) {
            __m128 lo = _mm_loadu_ps((const float *)(const void *)(src + 8 * t));
            __m128 hi = _mm_loadu_ps((const float *)(const void *)(src + 8 * t + 16));
            _mm_storeu_ps((float *)(void *)(dst + 4 * t),
                          _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
        }
#endif
        for (; t < n; t++)
            memcpy(dst + 4 * t, src + 8 * t, 4);
    } else if (es == 4) {
        for (int64_t t = 0; t < n; t++)
            memcpy(dst + 4 * t, src + 4 * t * step, 4);
    } else {
        for (int64_t t = 0; t < n; t++)
            memcpy(dst + 8 * t, src + 8 * t * step, 8);
    }
}

/* The run [lo, hi) of t in [0, len) whose input column iw0 + t*sw lies in [0, W). */
static void valid_run(const td_conv_geom *g, int64_t iw0, int64_t len, int64_t *lo, int64_t *hi)
{
    int64_t a = iw0 >= 0 ? 0 : (-iw0 + g->sw - 1) / g->sw;
    int64_t b = iw0 >= g->W ? 0 : (g->W - 1 - iw0) / g->sw + 1;
    a = min64(a, len);
    *lo = a;
    *hi = max64(a, min64(b, len));
}

/* One row (channel c of x, kernel offset i, j) of the column matrix, P positions from p0. */
static void im2col_row(const td_conv_geom *g, const td_nchw *x, int64_t c, int64_t i, int64_t j,
                       int64_t p0, int64_t P, char *dst, size_t es)
{
    int64_t n = p0 / g->L, l = p0 % g->L, oh = l / g->OW, ow = l % g->OW;
    const int64_t *s = x->s;
    /* a whole output row's run is the same for every row: found once (runs are short, two
     * divisions a run showed in profiles of strided layers) */
    int64_t row_iw0 = -g->pw + j * g->dw, row_lo, row_hi;
    valid_run(g, row_iw0, g->OW, &row_lo, &row_hi);
    for (int64_t q = 0; q < P;) {
        int64_t len = min64(g->OW - ow, P - q);
        char *d = dst + (size_t)q * es;
        int64_t ih = oh * g->sh - g->ph + i * g->dh;
        if (ih < 0 || ih >= g->H) {
            memset(d, 0, (size_t)len * es);
        } else {
            int64_t iw0 = ow * g->sw - g->pw + j * g->dw, lo = row_lo, hi = row_hi;
            if (ow != 0 || len != g->OW)
                valid_run(g, iw0, len, &lo, &hi);
            if (lo > 0)
                memset(d, 0, (size_t)lo * es);
            if (hi > lo) {
                int64_t e = n * s[0] + c * s[1] + ih * s[2] + (iw0 + lo * g->sw) * s[3];
                td_copy_strided(d + (size_t)lo * es, x->base + e * (int64_t)es, hi - lo,
                             g->sw * s[3], es);
            }
            if (len > hi)
                memset(d + (size_t)hi * es, 0, (size_t)(len - hi) * es);
        }
        q += len;
        ow = 0;
        if (++oh == g->OH) {
            oh = 0;
            n++;
        }
    }
}

void td_im2col(const td_conv_geom *g, const td_nchw *x, int64_t c0, int64_t nc, int64_t p0,
               int64_t P, void *col, size_t es)
{
    int64_t kk = g->kh * g->kw;
    for (int64_t r = 0; r < nc * kk; r++) {
        int64_t ch = r / kk, ij = r % kk;
        im2col_row(g, x, c0 + ch, ij / g->kw, ij % g->kw, p0, P,
                   (char *)col + (size_t)(r * P) * es, es);
    }
}

/* ---- col2im ------------------------------------------------------------------------------ */

#define ACCUMULATE(T)                                                                              \
    do {                                                                                           \
        T *d_ = (T *)(void *)dst;                                                                  \
        const T *s_ = (const T *)(const void *)src;                                                \
        for (int64_t t = 0; t < cnt; t++)                                                          \
            d_[t * step] += s_[t];                                                                 \
    } while (0)

/* dst[t*step] += src[t] for t < cnt. */
static void accumulate(tide_dtype dt, char *dst, const char *src, int64_t cnt, int64_t step)
{
    if (dt == TIDE_FLOAT32)
        ACCUMULATE(float);
    else
        ACCUMULATE(double);
}

/* d[2t] += a[t] and d[2t + 1] += b[t] for t < n: two taps of a stride-2 window one column
 * apart fill alternate columns of the same dx row, so their rows are added interleaved, in
 * vectors, where one tap at a time adds element by element with a step of 2. Each element still
 * gets its one addition from the pair, so the sums are the same bits. */
static void accumulate_pair(float *d, const float *a, const float *b, int64_t n)
{
    int64_t t = 0;
#if defined(__SSE2__)
    for (; t + 4 <= n; t += 4) {
        __m128 va = _mm_loadu_ps(a + t), vb = _mm_loadu_ps(b + t);
        _mm_storeu_ps(d + 2 * t, _mm_add_ps(_mm_loadu_ps(d + 2 * t), _mm_unpacklo_ps(va, vb)));
        _mm_storeu_ps(d + 2 * t + 4,
                      _mm_add_ps(_mm_loadu_ps(d + 2 * t + 4), _mm_unpackhi_ps(va, vb)));
    }
#endif
    for (; t < n; t++) {
        d[2 * t] += a[t];
        d[2 * t + 1] += b[t];
    }
}

/* row[iw0 + 2t] += src[t] for t in [lo_t, hi_t) outside [lo, hi): one tap's ends of a paired run. */
static void add_ends(float *row, int64_t iw0, const float *src, int64_t lo_t, int64_t hi_t,
                     int64_t lo, int64_t hi)
{
    for (int64_t t = lo_t; t < min64(hi_t, lo); t++)
        row[iw0 + 2 * t] += src[t];
    for (int64_t t = max64(lo_t, hi); t < hi_t; t++)
        row[iw0 + 2 * t] += src[t];
}

/* One run of len positions of taps j (a) and j + 1 (b) of a column-stride-2, dilation-1 window
 * into a contiguous dx row: the part both taps reach in one accumulate_pair, the ends alone. */
static void add_pair_run(const td_conv_geom *g, float *row, int64_t iw0, int64_t len,
                         const float *a, const float *b)
{
    int64_t lo_a, hi_a, lo_b, hi_b;
    valid_run(g, iw0, len, &lo_a, &hi_a);
    valid_run(g, iw0 + 1, len, &lo_b, &hi_b);
    int64_t lo = max64(lo_a, lo_b), hi = max64(lo, min64(hi_a, hi_b));
    if (hi > lo)
        accumulate_pair(row + iw0 + 2 * lo, a + lo, b + lo, hi - lo);
    add_ends(row, iw0, a, lo_a, hi_a, lo, hi);
    add_ends(row, iw0 + 1, b, lo_b, hi_b, lo, hi);
}

/* Adds the columns of positions [pa, pb) (one image, n) of row (c, i, j) into dx; row holds
 * the block's columns from p0. row_b, when not NULL, is tap (i, j + 1)'s row of a float32
 * window with column stride 2 and dilation 1 over rows of dx that are contiguous: both are
 * added, interleaved (add_pair_run). */
static void col2im_row(const td_conv_geom *g, const td_nchw *dx, tide_dtype dt, int64_t n,
                       int64_t ch, int64_t i, int64_t j, int64_t p0, int64_t pa, int64_t pb,
                       const char *row, const char *row_b)
{
    const int64_t *s = dx->s;
    size_t es = td_dtype_sizes[dt];
    int64_t l = pa - n * g->L, oh = l / g->OW, ow = l % g->OW;
    for (int64_t q = pa - p0; q < pb - p0;) {
        int64_t len = min64(g->OW - ow, pb - p0 - q);
        int64_t ih = oh * g->sh - g->ph + i * g->dh;
        if (ih >= 0 && ih < g->H) {
            int64_t iw0 = ow * g->sw - g->pw + j * g->dw, lo, hi;
            char *dxrow = dx->base + (n * s[0] + ch * s[1] + ih * s[2]) * (int64_t)es;
            if (row_b) {
                add_pair_run(g, (float *)(void *)dxrow, iw0, len,
                             (const float *)(const void *)row + q,
                             (const float *)(const void *)row_b + q);
            } else {
                valid_run(g, iw0, len, &lo, &hi);
                if (hi > lo)
                    accumulate(dt, dxrow + (iw0 + lo * g->sw) * s[3] * (int64_t)es,
                               row + (size_t)(q + lo) * es, hi - lo, g->sw * s[3]);
            }
        }
        q += len;
        ow = 0;
        oh++;
    }
}

void td_col2im(const td_conv_geom *g, const td_nchw *dx, tide_dtype dt, int64_t c0, int64_t nc,
               int64_t p0, int64_t P, const void *col)
{
    size_t es = td_dtype_sizes[dt];
    int64_t kk = g->kh * g->kw;
    bool pairs = dt == TIDE_FLOAT32 && g->sw == 2 && g->dw == 1 && dx->s[3] == 1;
    for (int64_t n = p0 / g->L; n * g->L < p0 + P; n++) {
        int64_t pa = max64(p0, n * g->L), pb = min64(p0 + P, (n + 1) * g->L);
        for (int64_t r = 0; r < nc * kk; r++) {
            int64_t ch = r / kk, ij = r % kk;
            const char *row = (const char *)col + (size_t)(r * P) * es;
            const char *row_b = pairs && ij % g->kw + 1 < g->kw ? row + (size_t)P * es : NULL;
            col2im_row(g, dx, dt, n, c0 + ch, ij / g->kw, ij % g->kw, p0, pa, pb, row, row_b);
            r += row_b != NULL;
        }
    }
}

/* ---- scatter ----------------------------------------------------------------------------- */

void td_scatter_rows(char *out, int64_t C, int64_t L, int64_t c0, int64_t nr, int64_t p0,
                     int64_t P, const void *rows, size_t es)
{
    for (int64_t n = p0 / L; n * L < p0 + P; n++) {
        int64_t pa = max64(p0, n * L), pb = min64(p0 + P, (n + 1) * L);
        for (int64_t r = 0; r < nr; r++)
            memcpy(out + (size_t)((n * C + c0 + r) * L + pa - n * L) * es,
                   (const char *)rows + (size_t)(r * P + pa - p0) * es, (size_t)(pb - pa) * es);
    }
}
