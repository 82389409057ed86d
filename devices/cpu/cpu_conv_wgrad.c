/*
 * cpu_conv_wgrad.c — float32 weight gradients summed in registers, without im2col columns and
 * without BLAS (the tile: cpu_conv_wgrad_isa.c). A strided convolution is read as stride-1
 * sums over its input's stride phases (wgrad_plan).
 *
 * The column path writes each image's [K, L] columns, and BLAS then packs them again before its
 * kernel reads them: for conv3d's layer (96 channels after the depth im2col, 3x3, 28x28) those
 * two passes cost about as much as a third of the arithmetic. Here each image's input is copied
 * once with its zero padding and its output gradient once, transposed to [position, channel];
 * the tile reads the rows of the would-be columns straight from the padded planes.
 *
 * The batch is cut into at most MAX_PIECES fixed pieces of whole images, each summed into its
 * own partial on one thread and the partials added in piece order, so the result does not
 * depend on how many threads ran the pieces.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_isa.h"

#define MAX_PIECES 16
/* The pieces' partial sums together stay below this; fewer pieces otherwise. */
#define PARTIAL_BYTES (32 << 20)
/* One image's input phases and transposed gradient past which the column path takes it: the
 * tiles read them from L2. The largest measured, ResNet's 64 channels of 56x56 (1.7 MB), ran
 * 1.6x the column path on the Ice Lake Xeon (1.25 MB of L2 a core); larger were not tried. */
#define MAX_IMAGE_BYTES (2 << 20)

typedef struct wgrad_fns {
    int (*kr)(void);
    int (*lanes)(void);
    void (*run)(const td_wgrad_tile *c);
    void (*transpose)(const float *g, int64_t so, int64_t sh, int64_t Og, int64_t OH, int64_t OW,
                      int64_t Wp, int64_t ldg, float *gt);
} wgrad_fns;

static const wgrad_fns *wgrad_tile(void)
{
    static const wgrad_fns avx2 = {td_conv_wgrad_kr_avx2, td_conv_wgrad_lanes_avx2,
                                   td_conv_wgrad_run_avx2, td_conv_wgrad_transpose_avx2};
    static const wgrad_fns avx512 = {td_conv_wgrad_kr_avx512, td_conv_wgrad_lanes_avx512,
                                     td_conv_wgrad_run_avx512, td_conv_wgrad_transpose_avx512};
    static const wgrad_fns *const by_tier[] = {NULL, &avx2, &avx512}; /* td_isa_level */
    return by_tier[td_cpu_isa()];
}

/* The sizes one call works with. The input is read as stride phases: phase (ri, rj) holds the
 * padded input's rows ri, ri + sh, ... and columns rj, rj + sw, ..., so that tap (i, j) of
 * output (oh, ow) is phase ((i*dh) % sh, (j*dw) % sw) at (oh + i*dh / sh, ow + j*dw / sw): a
 * stride-1 sum over each phase. With stride 1 the one phase is the padded input. The phases
 * are an im2col whose window is one stride (as cpu_conv_phase.c's): channel c's phase (ri, rj)
 * is plane c*phases + ri*sw + rj. */
typedef struct wgrad_plan {
    int64_t Hp, Wp, plane, phases, Q, Kp, ldg, pieces; /* Hp x Wp: one phase's plane */
    td_conv_geom window; /* the input -> its phases, Hp x Wp outputs a plane */
} wgrad_plan;

static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

static wgrad_plan plan_of(const td_conv_dims *d, const wgrad_fns *k)
{
    const td_conv_geom *g = &d->g;
    wgrad_plan p;
    p.Hp = g->OH + (g->kh - 1) * g->dh / g->sh;
    p.Wp = g->OW + (g->kw - 1) * g->dw / g->sw;
    p.plane = p.Hp * p.Wp;
    p.phases = g->sh * g->sw;
    p.window = (td_conv_geom){.H = g->H, .W = g->W, .OH = p.Hp, .OW = p.Wp, .L = p.plane,
                              .kh = g->sh, .kw = g->sw, .sh = g->sh, .sw = g->sw, .ph = g->ph,
                              .pw = g->pw, .dh = 1, .dw = 1};
    p.Q = (g->OH - 1) * p.Wp + g->OW;
    p.Kp = round_up(d->K, k->kr());
    p.ldg = round_up(d->Og, k->lanes());
    int64_t partial = d->groups * p.Kp * p.ldg * (int64_t)sizeof(float);
    p.pieces = d->N < MAX_PIECES ? d->N : MAX_PIECES;
    if (p.pieces * partial > PARTIAL_BYTES)
        p.pieces = PARTIAL_BYTES / partial > 1 ? PARTIAL_BYTES / partial : 1;
    return p;
}

bool td_conv_wgrad_fits(const td_conv_dims *d)
{
    const wgrad_fns *k = wgrad_tile();
    const td_conv_geom *g = &d->g;
    if (!k || d->dt != TIDE_FLOAT32 || g->L < 1 || d->Cg < 1 ||
        d->Og < 1 || g->kh * g->kw == 1) /* 1x1: the GEMM reads the planes in place */
        return false;
    wgrad_plan p = plan_of(d, k);
    double image =
        ((double)(p.phases * d->Cg) * (double)p.plane + (double)p.Q * (double)p.ldg) * 4.0;
    /* every thread gets a piece; at least half of each vector's lanes are channels */
    return p.pieces >= td_num_threads() && 2 * d->Og >= p.ldg && image <= MAX_IMAGE_BYTES;
}

typedef struct wgrad_job {
    const td_conv_dims *d;
    const td_nchw *x, *gout;
    const wgrad_fns *k;
    wgrad_plan p;
    const int64_t *k_offset;
    float *partials; /* piece p, group gr: [Kp, ldg] at (p * groups + gr) * Kp * ldg */
    int failed;      /* atomic */
} wgrad_job;

/* gt[(oh*Wp + ow)*ldg + o] = gout[n, gr*Og + o, oh, ow]; the other entries are left as they
 * are (zero). Rows along ow go through the tier's block transposes. */
static void transpose_gout(const wgrad_job *j, int64_t n, int64_t gr, float *gt)
{
    const td_conv_dims *d = j->d;
    const int64_t *s = j->gout->s;
    const float *base = (const float *)(const void *)j->gout->base + n * s[0] + gr * d->Og * s[1];
    if (s[3] == 1 || d->g.OW == 1) {
        j->k->transpose(base, s[1], s[2], d->Og, d->g.OH, d->g.OW, j->p.Wp, j->p.ldg, gt);
        return;
    }
    for (int64_t oh = 0; oh < d->g.OH; oh++)
        for (int64_t ow = 0; ow < d->g.OW; ow++) {
            const float *src = base + oh * s[2] + ow * s[3];
            float *dst = gt + (oh * j->p.Wp + ow) * j->p.ldg;
            for (int64_t o = 0; o < d->Og; o++)
                dst[o] = src[o * s[1]];
        }
}

static void piece_range(void *ctx, int64_t begin, int64_t end)
{
    wgrad_job *j = ctx;
    const td_conv_dims *d = j->d;
    const wgrad_plan *p = &j->p;
    size_t x_bytes = (size_t)(p->phases * d->Cg * p->plane) * sizeof(float);
    size_t g_bytes = (size_t)(p->Q * p->ldg) * sizeof(float);
    float *xp = td_cache_alloc(x_bytes), *gt = td_cache_alloc(g_bytes);
    if (!xp || !gt) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        td_cache_free(xp, x_bytes);
        td_cache_free(gt, g_bytes);
        return;
    }
    memset(gt, 0, g_bytes);
    td_wgrad_tile c = {.x = xp, .gt = gt, .k_offset = j->k_offset, .ldg = p->ldg, .Q = p->Q,
                       .Kp = p->Kp};
    for (int64_t piece = begin; piece < end; piece++)
        for (int64_t n = d->N * piece / p->pieces; n < d->N * (piece + 1) / p->pieces; n++)
            for (int64_t gr = 0; gr < d->groups; gr++) {
                td_im2col(&p->window, j->x, gr * d->Cg, d->Cg, n * p->plane, p->plane, xp,
                          sizeof(float));
                transpose_gout(j, n, gr, gt);
                c.dwt = j->partials + (piece * d->groups + gr) * p->Kp * p->ldg;
                j->k->run(&c);
            }
    td_cache_free(xp, x_bytes);
    td_cache_free(gt, g_bytes);
}

/* dw[(gr*Og + o)*K + k] = the sum over pieces, in piece order, of their [Kp, ldg][k][o]. */
static void sum_pieces(const wgrad_job *j, float *dw)
{
    const td_conv_dims *d = j->d;
    const wgrad_plan *p = &j->p;
    int64_t per_piece = d->groups * p->Kp * p->ldg;
    for (int64_t gr = 0; gr < d->groups; gr++)
        for (int64_t k = 0; k < d->K; k++)
            for (int64_t o = 0; o < d->Og; o++) {
                const float *at = j->partials + (gr * p->Kp + k) * p->ldg + o;
                float acc = at[0];
                for (int64_t q = 1; q < p->pieces; q++)
                    acc += at[q * per_piece];
                dw[(gr * d->Og + o) * d->K + k] = acc;
            }
}

int td_conv_wgrad(const td_conv_dims *d, float *dw, const td_nchw *x, const td_nchw *gout)
{
    const td_conv_geom *g = &d->g;
    wgrad_job j = {.d = d, .x = x, .gout = gout, .k = wgrad_tile()};
    j.p = plan_of(d, j.k);
    size_t partial_bytes = (size_t)(j.p.pieces * d->groups * j.p.Kp * j.p.ldg) * sizeof(float);
    int64_t *k_offset = td_malloc((size_t)j.p.Kp * sizeof(int64_t));
    j.partials = td_cache_alloc(partial_bytes);
    if (!k_offset || !j.partials) {
        free(k_offset);
        td_cache_free(j.partials, partial_bytes);
        return -1;
    }
    for (int64_t k = 0; k < j.p.Kp; k++) {
        int64_t c = k / (g->kh * g->kw), i = k / g->kw % g->kh * g->dh, jj = k % g->kw * g->dw;
        int64_t phase = i % g->sh * g->sw + jj % g->sw;
        k_offset[k] = k < d->K ? (c * j.p.phases + phase) * j.p.plane + i / g->sh * j.p.Wp +
                                     jj / g->sw
                               : 0;
    }
    j.k_offset = k_offset;
    memset(j.partials, 0, partial_bytes);
    td_parallel_for(j.p.pieces, 1, piece_range, &j);
    if (!j.failed)
        sum_pieces(&j, dw);
    free(k_offset);
    td_cache_free(j.partials, partial_bytes);
    return j.failed ? -1 : 0;
}
