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
 * same products, summed in another order. One pass writes xu (about the input's size); the
 * stride-1 convolution then takes conv2d's fast paths (shifted GEMMs, the direct tile, im2col
 * copying whole rows) where a strided im2col gathers kh*kw/S times the input element by
 * element. Groups keep their channels together (group g's channels c*S + phase stay in
 * [g*Cg*S, (g+1)*Cg*S)).
 *
 * Taken where it was measured faster (td_conv_phase_fits). The gradients keep the strided
 * paths: through the phases the input gradient (a stride-1 grad input, then each element back to
 * its place) and the weight gradient both ran slower on conv_transpose2d's layer (bench_conv_family:
 * 0.75 -> 0.59 and 0.66 -> 0.60 of sgemm).
 */
#include <string.h>

#include "cpu_conv.h"
#include "cpu_kernels.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Measured (2 threads, AVX-512, DCGAN-like layers at batch 64, 4x4 stride 2): 3 -> 64 channels
 * of 64x64 3.0 -> 1.9 ms, 64 -> 128 of 32x32 21 -> 17 ms, conv_transpose2d's input gradient in
 * bench_conv_family 0.65 -> 0.74 of sgemm; slower where the phases' planes are small (128 -> 256
 * of 16x16: 18 -> 29 ms), for a single image (3 -> 64: 62 -> 78 us) and where the kernel is the
 * stride (2x2 stride 2 patches: nothing to gain from a copy). */
#define PHASE_MIN_REUSE 4  /* taps per phase, (kh/sh)*(kw/sw): a strided im2col copies x that often */
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

/* The phases' planes: Hu x Wu, exactly the rows and columns the outputs read. */
typedef struct phase_plan {
    const td_conv_dims *d;
    int64_t S, ka, kb, Hu, Wu;
} phase_plan;

static phase_plan plan_of(const td_conv_dims *d)
{
    const td_conv_geom *g = &d->g;
    phase_plan pp = {d, g->sh * g->sw, g->kh / g->sh, g->kw / g->sw, 0, 0};
    pp.Hu = g->OH + pp.ka - 1;
    pp.Wu = g->OW + pp.kb - 1;
    return pp;
}

/* The stride-1 attributes: no padding, no dilation, the same groups. */
static void unit_attrs(const int64_t *p, int64_t *p1)
{
    int64_t u[7] = {1, 1, 0, 0, 1, 1, p[6]};
    memcpy(p1, u, sizeof u);
}

/* First and past-last s of [0, Wu) whose input column s*sw + q - pw lies in [0, W). */
static void column_range(const td_conv_geom *g, int64_t Wu, int64_t q, int64_t *lo, int64_t *hi)
{
    int64_t first = g->pw - q, last = g->W - 1 + g->pw - q; /* bounds on s*sw */
    *lo = first <= 0 ? 0 : (first + g->sw - 1) / g->sw;
    *hi = last < 0 ? 0 : min64(Wu, last / g->sw + 1);
    *lo = min64(*lo, *hi);
}

typedef struct phase_job {
    const phase_plan *pp;
    td_nchw x; /* the input */
    char *xu;  /* [N, C*S, Hu, Wu] contiguous */
} phase_job;

/* xu's planes of channels [begin, end) of N*C (input channel c of image n). */
static void gather_range(void *ctx, int64_t begin, int64_t end)
{
    const phase_job *j = ctx;
    const phase_plan *pp = j->pp;
    const td_conv_geom *g = &pp->d->g;
    size_t es = pp->d->es;
    int64_t plane = pp->Hu * pp->Wu;
    for (int64_t nc = begin; nc < end; nc++) {
        int64_t n = nc / pp->d->C, c = nc % pp->d->C;
        const char *src = j->x.base + (n * j->x.s[0] + c * j->x.s[1]) * (int64_t)es;
        for (int64_t ph = 0; ph < pp->S; ph++) {
            int64_t p = ph / g->sw, q = ph % g->sw, lo, hi;
            column_range(g, pp->Wu, q, &lo, &hi);
            char *dst = j->xu + (size_t)((nc * pp->S + ph) * plane) * es;
            for (int64_t r = 0; r < pp->Hu; r++, dst += pp->Wu * (int64_t)es) {
                int64_t ih = r * g->sh + p - g->ph;
                if (ih < 0 || ih >= g->H || lo == hi) {
                    memset(dst, 0, (size_t)pp->Wu * es);
                    continue;
                }
                memset(dst, 0, (size_t)lo * es);
                td_copy_strided(dst + lo * (int64_t)es,
                                src + (ih * j->x.s[2] + (lo * g->sw + q - g->pw) * j->x.s[3]) *
                                          (int64_t)es,
                                hi - lo, g->sw * j->x.s[3], es);
                memset(dst + hi * (int64_t)es, 0, (size_t)(pp->Wu - hi) * es);
            }
        }
    }
}

/* wu [O, Cg*S, ka, kb] (contiguous) from w [O, Cg, kh, kw] (any strides). */
static void weight_phases(const phase_plan *pp, const tide_tensor *w, char *wu)
{
    const td_conv_dims *d = pp->d;
    const td_conv_geom *g = &d->g;
    size_t es = d->es;
    const char *wb = td_tensor_data(w);
    for (int64_t o = 0; o < d->O; o++)
        for (int64_t c = 0; c < d->Cg; c++)
            for (int64_t i = 0; i < g->kh; i++)
                for (int64_t k = 0; k < g->kw; k++) {
                    int64_t ph = (i % g->sh) * g->sw + k % g->sw;
                    int64_t u = (((o * d->Cg + c) * pp->S + ph) * pp->ka + i / g->sh) * pp->kb +
                                k / g->sw;
                    int64_t at = o * w->strides[0] + c * w->strides[1] + i * w->strides[2] +
                                 k * w->strides[3];
                    memcpy(wu + u * (int64_t)es, wb + at * (int64_t)es, es);
                }
}

/* Channels of N*C per parallel chunk: about 64 KiB of phases. */
static int64_t grain_of(const phase_plan *pp)
{
    return max64(1, (64 << 10) / max64(1, pp->S * pp->Hu * pp->Wu * (int64_t)pp->d->es));
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
    tide_tensor *xu = temp4("conv2d", x, d->N, d->C * pp->S, pp->Hu, pp->Wu);
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
