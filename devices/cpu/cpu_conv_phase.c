/*
 * cpu_conv_phase.c — strided convolutions whose kernel is a whole number of strides (4x4 with
 * stride 2: a DCGAN discriminator's layers, the input gradient of a decoder's conv_transpose2d)
 * as stride-1 convolutions over the stride phases of the input.
 *
 * With stride (sh, sw), tap (i, j) = (a*sh + p, b*sw + q) of output (oh, ow) reads padded input
 * row (oh + a)*sh + p, column (ow + b)*sw + q. Split the padded input into its S = sh*sw phases
 * and the weight likewise,
 *     xu[n, c*S + p*sw + q, r, s] = xpad[n, c, r*sh + p, s*sw + q]
 *     wu[o, c*S + p*sw + q, a, b] = w[o, c, a*sh + p, b*sw + q],
 * and the convolution is the stride-1 one of xu by wu, kernel (kh/sh, kw/sw), no padding: the
 * same products, summed in another order. One im2col pass writes xu (about the input's size);
 * the stride-1 convolution then takes conv2d's fast paths (shifted GEMMs, the direct tile, im2col
 * copying whole rows) where a strided im2col gathers kh*kw/S times the input element by
 * element. Groups keep their channels together (group g's channels c*S + phase stay in
 * [g*Cg*S, (g+1)*Cg*S)).
 *
 * Taken where it was measured faster (td_conv_phase_fits). The input gradient keeps the
 * strided path: through these phases (a stride-1 grad input, then each element back to its
 * place) it ran slower on conv_transpose2d's layer (bench_conv_family: 0.75 -> 0.59 of sgemm).
 * The float32 weight gradient reads the input as stride phases itself (cpu_conv_wgrad.c).
 */
#include <string.h>

#include "cpu_conv.h"
#include "cpu_kernels.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Measured (2 threads, AVX-512, DCGAN-like layers at batch 64, 4x4 stride 2): 3 -> 64 channels
 * of 64x64 3.0 -> 1.9 ms, 64 -> 128 of 32x32 21 -> 17 ms, conv_transpose2d's input gradient in
 * bench_conv_family 0.65 -> 0.74 of sgemm; slower where the phases' planes are small (128 -> 256
 * of 16x16: 18 -> 29 ms), for a single image (3 -> 64: 62 -> 78 us) and where the kernel is the
 * stride (2x2 stride 2 patches: nothing to gain from a copy). */
/* taps per phase, (kh/sh)*(kw/sw): a strided im2col copies x that many times */
#define PHASE_MIN_REUSE 4
#define PHASE_MIN_PLANE 256 /* output positions per image */

bool td_conv_phase_fits(const td_conv_dims *d)
{
    const td_conv_geom *g = &d->g;
    if ((g->sh == 1 && g->sw == 1) || g->dh != 1 || g->dw != 1 || g->kh % g->sh ||
        g->kw % g->sw || (d->dt != TIDE_FLOAT32 && d->dt != TIDE_FLOAT64))
        return false;
    return (g->kh / g->sh) * (g->kw / g->sw) >= PHASE_MIN_REUSE && g->L >= PHASE_MIN_PLANE &&
           d->N >= 2 * td_num_threads() && d->C > 0 && d->O > 0;
}

/* The phases are an im2col whose window is one stride: kernel (sh, sw) at stride (sh, sw) over
 * the padded input gives row c*S + p*sw + q, position (r, s) = xpad[c, r*sh + p, s*sw + q],
 * which is xu's channel c*S + p*sw + q, so td_im2col writes xu image by image. The weight's
 * phases are the same window over each output channel's [Cg, kh, kw], unpadded. */
typedef struct phase_plan {
    const td_conv_dims *d;
    int64_t S, ka, kb;
    td_conv_geom xwin, wwin; /* x -> xu (Hu x Wu planes: exactly what the outputs read), w -> wu */
} phase_plan;

static td_conv_geom stride_window(const td_conv_geom *g, int64_t H, int64_t W, int64_t OH,
                                  int64_t OW, int64_t ph, int64_t pw)
{
    return (td_conv_geom){.H = H, .W = W, .OH = OH, .OW = OW, .L = OH * OW, .kh = g->sh,
                          .kw = g->sw, .sh = g->sh, .sw = g->sw, .ph = ph, .pw = pw, .dh = 1,
                          .dw = 1};
}

static phase_plan plan_of(const td_conv_dims *d)
{
    const td_conv_geom *g = &d->g;
    phase_plan pp = {d, g->sh * g->sw, g->kh / g->sh, g->kw / g->sw, {0}, {0}};
    pp.xwin = stride_window(g, g->H, g->W, g->OH + pp.ka - 1, g->OW + pp.kb - 1, g->ph, g->pw);
    pp.wwin = stride_window(g, g->kh, g->kw, pp.ka, pp.kb, 0, 0);
    return pp;
}

/* The stride-1 attributes: no padding, no dilation, the same groups. */
static void unit_attrs(const int64_t *p, int64_t *p1)
{
    int64_t u[7] = {1, 1, 0, 0, 1, 1, p[6]};
    memcpy(p1, u, sizeof u);
}

typedef struct phase_job {
    const phase_plan *pp;
    td_nchw x; /* the input */
    char *xu;  /* [N, C*S, Hu, Wu] contiguous */
} phase_job;

/* xu's planes of input channels [begin, end) of N*C (channel c of image n). */
static void gather_range(void *ctx, int64_t begin, int64_t end)
{
    const phase_job *j = ctx;
    const phase_plan *pp = j->pp;
    int64_t C = pp->d->C, L = pp->xwin.L;
    for (int64_t nc = begin; nc < end; nc++)
        td_im2col(&pp->xwin, &j->x, nc % C, 1, nc / C * L, L,
                  j->xu + (size_t)(nc * pp->S * L) * pp->d->es, pp->d->es);
}

/* wu [O, Cg*S, ka, kb] (contiguous) from w [O, Cg, kh, kw] (any strides). */
static void weight_phases(const phase_plan *pp, const tide_tensor *w, char *wu)
{
    td_nchw wn = td_nchw_of(w);
    int64_t L = pp->wwin.L, rows = pp->d->Cg * pp->S;
    for (int64_t o = 0; o < pp->d->O; o++)
        td_im2col(&pp->wwin, &wn, 0, pp->d->Cg, o * L, L, wu + (size_t)(o * rows * L) * pp->d->es,
                  pp->d->es);
}

/* Channels of N*C per parallel chunk: about 64 KiB of phases. */
static int64_t grain_of(const phase_plan *pp)
{
    return max64(1, (64 << 10) / max64(1, pp->S * pp->xwin.L * (int64_t)pp->d->es));
}

/* A contiguous [n0, n1, n2, n3] temporary on t's device, or NULL with the error set. */
static tide_tensor *temp4(const char *op, const tide_tensor *t, int64_t n0, int64_t n1,
                          int64_t n2, int64_t n3)
{
    int64_t shape[4] = {n0, n1, n2, n3};
    return td_tensor_new(op, t->device, 4, shape, (tide_dtype)t->dtype);
}

/* xu, x's phases, on x's device (NULL with the error set). */
static tide_tensor *phases_of(const phase_plan *pp, const tide_tensor *x)
{
    const td_conv_dims *d = pp->d;
    tide_tensor *xu = temp4("conv2d", x, d->N, d->C * pp->S, pp->xwin.OH, pp->xwin.OW);
    if (!xu)
        return NULL;
    phase_job j = {pp, td_nchw_of(x), td_tensor_data(xu)};
    td_parallel_for(d->N * d->C, grain_of(pp), gather_range, &j);
    return xu;
}

int td_conv_phase_forward(const td_conv_dims *d, tide_tensor *out, const tide_tensor *x,
                          const tide_tensor *w, const int64_t *p)
{
    phase_plan pp = plan_of(d);
    int64_t p1[7];
    unit_attrs(p, p1);
    tide_tensor *xu = phases_of(&pp, x);
    tide_tensor *wu = xu ? temp4("conv2d", w, d->O, d->Cg * pp.S, pp.ka, pp.kb) : NULL;
    int rc = -1;
    if (wu) {
        weight_phases(&pp, w, td_tensor_data(wu));
        rc = td_cpu_conv2d(out, xu, wu, p1);
    }
    tide_release(xu);
    tide_release(wu);
    return rc;
}
