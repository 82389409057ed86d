/*
 * cpu_conv_shift.c — stride-1 convolutions as kh*kw GEMMs over shifted views of a padded copy
 * of the input, instead of one GEMM over an im2col matrix kh*kw times the input's size.
 *
 * Lay the padded input out in rows of width Wp = W + 2*pw and number the outputs
 * q = oh*Wp + ow: a "wide" output whose columns ow >= OW are thrown away. The input under
 * kernel tap (i, j) for output q is then at q + i*dh*Wp + j*dw, the same shift for every
 * output. So
 *     out_wide[Og, Q] = sum over taps (i, j) of  W_ij[Og, Cg] x xpad[Cg, Q + shift_ij],
 * kh*kw GEMMs with k = Cg that read the padded copy in place (its channel stride is their
 * leading dimension). The copy is about the input's size where im2col writes kh*kw times that,
 * and once Cg is a few dozen the GEMMs run about as fast as one with k = Cg*kh*kw. The wide
 * columns waste (Hp*Wp)/(OH*OW) - 1 of the work, so this path is taken only when the padding
 * is small next to the plane (td_conv_shift_fits).
 *
 * The input gradient is the same GEMMs transposed: W_ij^T x gout_wide added into the shifted
 * padded gradient, with zeros in gout_wide's thrown-away places so that they add nothing
 * (except that 0 * inf is NaN: an infinite weight next to such a place can turn an exact
 * +-inf into NaN). The weight gradient stays with columns: per tap its GEMM has an [Og, Cg]
 * result, too small for BLAS's threads.
 *
 * Several small images share a block, back to back (the rows between two images' outputs are
 * thrown away like the wide columns); a large image is cut into bands of output rows, each
 * with the kernel's reach of extra input rows. The moves run on the calling thread and the
 * GEMMs on BLAS's threads (cpu_conv.c).
 */
#include <string.h>

#include "cpu_conv.h"

/* Bytes of padded input and wide output per block: well inside L2 next to BLAS's packing. */
#define SHIFT_BYTES (2 << 20)
/* GEMMs with k = Cg below this lose more than im2col costs (measured, 56x56 3x3 to 64
 * channels: Cg = 16 forward 134 GFLOP/s shifted against 151 with columns; Cg = 32: 188 / 151). */
#define SHIFT_MIN_CHANNELS 32
/* The most wide-output work per real output (padding next to the plane) worth taking. */
#define SHIFT_MAX_WASTE 1.35

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct shift_plan {
    const td_conv_dims *d;
    int64_t Hp, Wp;
    int64_t halo;  /* dh*(kh-1): the extra input rows a band of output rows reads */
    int64_t imgs;  /* whole images per block, or 1 with bands */
    int64_t rows;  /* output rows per band (OH with whole images) */
    int64_t seg;   /* padded positions one image takes in a block: (rows + halo) * Wp */
    int64_t slack; /* dw*(kw-1): what the last wide column of a block reads past its rows */
    int64_t S;     /* the padded copy's channel stride: imgs*seg + slack */
} shift_plan;

/* A block: images n0 .. n0+B-1 whole (r0 = 0, R = OH), or output rows [r0, r0 + R) of image
 * n0 (B = 1); ncols wide outputs. */
typedef struct shift_block {
    int64_t n0, B, r0, R, ncols;
} shift_block;

static bool make_plan(const td_conv_dims *d, shift_plan *sp)
{
    const td_conv_geom *g = &d->g;
    sp->d = d;
    sp->Hp = g->H + 2 * g->ph;
    sp->Wp = g->W + 2 * g->pw;
    sp->halo = g->dh * (g->kh - 1);
    sp->slack = g->dw * (g->kw - 1);
    int64_t target = SHIFT_BYTES / ((d->Cg + d->Og) * (int64_t)d->es);
    int64_t per_image = sp->Hp * sp->Wp;
    if (per_image <= target) {
        sp->imgs = max64(1, min64(d->N, target / per_image));
        sp->rows = g->OH;
    } else {
        sp->imgs = 1;
        sp->rows = max64(1, min64(g->OH, target / sp->Wp - sp->halo));
    }
    sp->seg = (sp->rows + sp->halo) * sp->Wp;
    sp->S = sp->imgs * sp->seg + sp->slack;
    return sp->S <= INT32_MAX;
}

bool td_conv_shift_fits(const td_conv_dims *d)
{
    const td_conv_geom *g = &d->g;
    if (g->sh != 1 || g->sw != 1 || g->kh * g->kw == 1 || d->Cg < SHIFT_MIN_CHANNELS ||
        d->Og < 1 || g->L < 1)
        return false;
    double padded = (double)(g->H + 2 * g->ph) * (double)(g->W + 2 * g->pw);
    shift_plan sp;
    return padded <= SHIFT_MAX_WASTE * (double)g->L && make_plan(d, &sp);
}

/* Block b: whole images, or band b % bands of image b / bands. */
static int64_t block_count(const shift_plan *sp)
{
    const td_conv_dims *d = sp->d;
    if (sp->rows == d->g.OH)
        return (d->N + sp->imgs - 1) / sp->imgs;
    return d->N * ((d->g.OH + sp->rows - 1) / sp->rows);
}

static shift_block block_at(const shift_plan *sp, int64_t b)
{
    const td_conv_dims *d = sp->d;
    shift_block k;
    if (sp->rows == d->g.OH) {
        k.n0 = b * sp->imgs;
        k.B = min64(sp->imgs, d->N - k.n0);
        k.r0 = 0;
        k.R = d->g.OH;
    } else {
        int64_t bands = (d->g.OH + sp->rows - 1) / sp->rows;
        k.n0 = b / bands;
        k.B = 1;
        k.r0 = b % bands * sp->rows;
        k.R = min64(sp->rows, d->g.OH - k.r0);
    }
    k.ncols = (k.B - 1) * sp->seg + k.R * sp->Wp;
    return k;
}

/* The padded input rows of group g's channels for block k: xs[c][b*seg + r*Wp + w]. */
static void pack_input(const shift_plan *sp, const shift_block *k, const td_nchw *x, int64_t g,
                       char *xs)
{
    const td_conv_dims *d = sp->d;
    const td_conv_geom *gm = &d->g;
    size_t es = d->es;
    int64_t rin = k->R + sp->halo;
    for (int64_t c = 0; c < d->Cg; c++) {
        char *base = xs + (size_t)(c * sp->S) * es;
        for (int64_t b = 0; b < k->B; b++)
            for (int64_t r = 0; r < rin; r++) {
                char *dst = base + (size_t)(b * sp->seg + r * sp->Wp) * es;
                int64_t ih = k->r0 + r - gm->ph;
                if (ih < 0 || ih >= gm->H) {
                    memset(dst, 0, (size_t)sp->Wp * es);
                    continue;
                }
                int64_t e = (k->n0 + b) * x->s[0] + (g * d->Cg + c) * x->s[1] + ih * x->s[2];
                memset(dst, 0, (size_t)gm->pw * es);
                td_copy_strided(dst + (size_t)gm->pw * es, x->base + e * (int64_t)es, gm->W,
                                x->s[3], es);
                memset(dst + (size_t)(gm->pw + gm->W) * es, 0, (size_t)gm->pw * es);
            }
        /* read only by thrown-away columns, but read */
        memset(base + (size_t)((k->B - 1) * sp->seg + rin * sp->Wp) * es, 0,
               (size_t)sp->slack * es);
    }
}

/* grad_out of group g for block k as wide rows gw[o][q], zero in the thrown-away places. */
static void pack_gout(const shift_plan *sp, const shift_block *k, const td_nchw *gout, int64_t g,
                      char *gw)
{
    const td_conv_dims *d = sp->d;
    size_t es = d->es;
    int64_t OW = d->g.OW;
    memset(gw, 0, (size_t)(d->Og * k->ncols) * es);
    for (int64_t o = 0; o < d->Og; o++)
        for (int64_t b = 0; b < k->B; b++)
            for (int64_t r = 0; r < k->R; r++) {
                int64_t e = (k->n0 + b) * gout->s[0] + (g * d->Og + o) * gout->s[1] +
                            (k->r0 + r) * gout->s[2];
                td_copy_strided(gw + (size_t)(o * k->ncols + b * sp->seg + r * sp->Wp) * es,
                                gout->base + e * (int64_t)es, OW, gout->s[3], es);
            }
}

/* The wide output of group g for block k into out (contiguous NCHW), thrown-away columns
 * dropped. */
static void unpack_output(const shift_plan *sp, const shift_block *k, const char *ow, int64_t g,
                          char *out)
{
    const td_conv_dims *d = sp->d;
    size_t es = d->es;
    int64_t OH = d->g.OH, OW = d->g.OW;
    for (int64_t b = 0; b < k->B; b++)
        for (int64_t o = 0; o < d->Og; o++)
            for (int64_t r = 0; r < k->R; r++)
                memcpy(out + (size_t)((((k->n0 + b) * d->O + g * d->Og + o) * OH + k->r0 + r) *
                                      OW) * es,
                       ow + (size_t)(o * k->ncols + b * sp->seg + r * sp->Wp) * es,
                       (size_t)OW * es);
}

#define ADD_ROW(T)                                                                                 \
    do {                                                                                           \
        T *d_ = (T *)(void *)dst;                                                                  \
        const T *s_ = (const T *)(const void *)src;                                                \
        for (int64_t t = 0; t < n; t++)                                                            \
            d_[t] += s_[t];                                                                        \
    } while (0)

static void add_row(tide_dtype dt, char *dst, const char *src, int64_t n)
{
    if (dt == TIDE_FLOAT32)
        ADD_ROW(float);
    else
        ADD_ROW(double);
}

/* Adds the padded gradient of group g for block k into dx (contiguous), padding dropped; or,
 * with whole images in each block (each dx row written by one block), copies it. */
static void unpack_grad_input(const shift_plan *sp, const shift_block *k, const char *dxs,
                              int64_t g, char *dx)
{
    bool copy = sp->rows == sp->d->g.OH;
    const td_conv_dims *d = sp->d;
    const td_conv_geom *gm = &d->g;
    size_t es = d->es;
    for (int64_t c = 0; c < d->Cg; c++)
        for (int64_t b = 0; b < k->B; b++)
            for (int64_t r = 0; r < k->R + sp->halo; r++) {
                int64_t ih = k->r0 + r - gm->ph;
                if (ih < 0 || ih >= gm->H)
                    continue;
                char *dst = dx + (size_t)((((k->n0 + b) * d->C + g * d->Cg + c) * gm->H + ih) *
                                          gm->W) * es;
                const char *src = dxs + (size_t)(c * sp->S + b * sp->seg + r * sp->Wp + gm->pw) * es;
                if (copy)
                    memcpy(dst, src, (size_t)gm->W * es);
                else
                    add_row(d->dt, dst, src, gm->W);
            }
}

/* The weight as taps: wt[(i*kw + j)*O + o][c] = w[o, c, i, j]. */
static void pack_weight(const td_conv_dims *d, const td_nchw *w, char *wt)
{
    const char *base = w->base;
    const int64_t *s = w->s;
    size_t es = d->es;
    int64_t kk = d->g.kh * d->g.kw;
    for (int64_t t = 0; t < kk; t++)
        for (int64_t o = 0; o < d->O; o++)
            td_copy_strided(wt + (size_t)((t * d->O + o) * d->Cg) * es,
                            base + (o * s[0] + t / d->g.kw * s[2] + t % d->g.kw * s[3]) *
                                       (int64_t)es,
                            d->Cg, s[1], es);
}

int td_conv_shift(int which, const td_conv_dims *d, char *out, const td_nchw *x,
                  const td_nchw *gout, const td_nchw *w)
{
    shift_plan sp;
    make_plan(d, &sp);
    const td_conv_geom *g = &d->g;
    size_t es = d->es;
    int64_t kk = g->kh * g->kw, wide_max = (sp.imgs - 1) * sp.seg + sp.rows * sp.Wp;
    size_t wt_bytes = (size_t)(kk * d->O * d->Cg) * es;
    size_t pad_bytes = (size_t)(d->Cg * sp.S) * es; /* xs, or dxs for grad_input */
    size_t wide_bytes = (size_t)(d->Og * wide_max) * es;
    char *wt = td_cache_alloc(wt_bytes), *pad = td_cache_alloc(pad_bytes);
    char *wide = td_cache_alloc(wide_bytes);
    if (!wt || !pad || !wide) {
        td_cache_free(wt, wt_bytes);
        td_cache_free(pad, pad_bytes);
        td_cache_free(wide, wide_bytes);
        return -1;
    }
    pack_weight(d, w, wt);
    if (which == TD_CONV_GRAD_INPUT && sp.rows != g->OH) /* bands overlap: their rows add up */
        memset(out, 0, (size_t)(d->N * d->C * g->H * g->W) * es);
    int64_t nblocks = block_count(&sp);
    for (int64_t b = 0; b < nblocks; b++) {
        shift_block k = block_at(&sp, b);
        for (int64_t gr = 0; gr < d->groups; gr++) {
            if (which == TD_CONV_GRAD_INPUT) {
                pack_gout(&sp, &k, gout, gr, wide);
                /* the first tap (no shift) writes [0, ncols) of each row, the others add */
                for (int64_t c = 0; c < d->Cg; c++)
                    memset(pad + (size_t)(c * sp.S + k.ncols) * es, 0,
                           (size_t)(sp.S - k.ncols) * es);
            } else {
                pack_input(&sp, &k, x, gr, pad);
            }
            for (int64_t t = 0; t < kk; t++) {
                int64_t shift = t / g->kw * g->dh * sp.Wp + t % g->kw * g->dw;
                char *wt_t = wt + (size_t)((t * d->O + gr * d->Og) * d->Cg) * es;
                char *pad_t = pad + (size_t)shift * es;
                if (which == TD_CONV_FORWARD)
                    td_conv_gemm(d->dt, false, false, d->Og, k.ncols, d->Cg, wt_t, d->Cg, pad_t,
                                 sp.S, t > 0, wide, k.ncols);
                else
                    td_conv_gemm(d->dt, true, false, d->Cg, k.ncols, d->Og, wt_t, d->Cg, wide,
                                 k.ncols, t > 0, pad_t, sp.S);
            }
            if (which == TD_CONV_FORWARD)
                unpack_output(&sp, &k, wide, gr, out);
            else
                unpack_grad_input(&sp, &k, pad, gr, out);
        }
    }
    td_cache_free(wt, wt_bytes);
    td_cache_free(pad, pad_bytes);
    td_cache_free(wide, wide_bytes);
    return 0;
}
