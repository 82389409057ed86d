/*
 * cpu_conv_direct.c — float32 convolutions summed in registers (direct convolution), without
 * BLAS: the path for batch-1 inference and small layers, where a GEMM's packing and the
 * output's rewrites cost about as much as the arithmetic.
 *
 * Per image and group: the input planes are copied once with their zero padding (plus a
 * vector of slack, cpu_conv_direct_isa.c), the weights once per call into blocks of MR output
 * channels, and then every (segment tile, output block) pair is one task of
 * cpu_conv_direct_isa.c's register tile, on tide's threads (a batch of at least twice the
 * threads is split by images before it gets here, cpu_conv.c). A bias and a ReLU that the jit
 * fused (cpu_jit_conv.c) ride on the tile's single store.
 *
 * Only the AVX2 and AVX-512 tiers take this path: at the baseline tier (SSE2, no FMA) OpenBLAS's
 * own kernels, which pick their ISA themselves, are faster. The shapes it takes are those
 * where it was measured faster than the GEMM paths (td_conv_direct_fits).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_conv.h"
#include "cpu_isa.h"

const td_direct_tile_fns *td_direct_tile(void)
{
    static const td_direct_tile_fns avx2 = {td_conv_direct_mr_avx2, td_conv_direct_pack_avx2,
                                            td_conv_direct_slack_avx2, td_conv_direct_tiles_avx2,
                                            td_conv_direct_run_avx2};
    static const td_direct_tile_fns avx512 = {
        td_conv_direct_mr_avx512, td_conv_direct_pack_avx512, td_conv_direct_slack_avx512,
        td_conv_direct_tiles_avx512, td_conv_direct_run_avx512};
    static const td_direct_tile_fns *const by_tier[] = {NULL, &avx2, &avx512}; /* td_isa_level */
    return by_tier[td_cpu_isa()];
}

/* Padded input of one image and group past which the GEMM paths win: the tiles then read it
 * from L2 or memory once per block of output channels. Measured on the AMX Xeon (2 MB of L2;
 * 1 thread, AVX-512): 256 channels at 16x16 padded (262 KB) direct 1.6 ms against 2.0; 16 at
 * 66x66 (279 KB) 0.12 against 0.26; 128 at 30x30 (460 KB) 1.61 against 1.41; 64 at 58x58
 * (861 KB) 1.63 against 1.43. On the Ice Lake Xeon (1.25 MB of L2; 1 and 2 threads, AVX2 and
 * AVX-512) direct won at every size up to 861 KB, by 20-40% at 96 channels of 30x30 (338 KB):
 * the limit sits between the sizes measured faster on both and the 460 KB measured slower. */
#define MAX_INPUT_BYTES (400 << 10)
/* Input channels up to which a large plane still goes direct (a tile's rows of every channel
 * stay in L1): 3 channels at 230x230 (635 KB), 7x7 to 64 channels, 4.8 ms against 7.1. */
#define FEW_CHANNELS 16
/* Sums per output past which the GEMM paths win: a tile's rows of every input channel no
 * longer stay in L1. Measured (1 thread, AVX2 tier against OpenBLAS's Haswell kernels): 512
 * channels at 7x7 (K = 4608) direct 3.3 ms against 2.65; 256 at 14x14 (K = 2304) 2.5 against
 * 2.9. */
#define MAX_K 2304

bool td_conv_direct_fits(const td_conv_dims *d)
{
    const td_direct_tile_fns *k = td_direct_tile();
    const td_conv_geom *g = &d->g;
    if (!k || d->dt != TIDE_FLOAT32 || g->sw != 1 || g->L < 1 || d->Cg < 1 || d->Og < 1 ||
        g->kh * g->kw == 1) /* 1x1: the GEMM reads the planes in place */
        return false;
    /* at least half the lanes of a row's vectors hold outputs: LeNet's 10 columns in 16 lanes
     * ran 3.7x the GEMM path (batch 64, 6 -> 16 channels, 5x5); 7 in 16 at half its speed */
    int64_t v = k->slack(), lanes = (g->OW + v - 1) / v * v;
    double padded = (double)(g->H + 2 * g->ph) * (double)(g->W + 2 * g->pw);
    return 2 * g->OW >= lanes && d->K <= MAX_K &&
           (d->Cg <= FEW_CHANNELS || padded * (double)d->Cg * 4.0 <= MAX_INPUT_BYTES);
}

/* Whether w [O, Cg, kh, kw] is laid out as rows w[o*K + k], k = (c*kh + i)*kw + j. */
static bool weight_rows(const td_conv_dims *d, const td_nchw *w)
{
    const int64_t *s = w->s;
    return (d->g.kw == 1 || s[3] == 1) && (d->g.kh == 1 || s[2] == d->g.kw) &&
           (d->Cg == 1 || s[1] == d->g.kh * d->g.kw);
}

/* w's rows (weight_rows) for a weight with other strides: rows[o*K + k]. */
static void copy_weight_rows(const td_conv_dims *d, const td_nchw *w, float *rows)
{
    const float *base = (const float *)(const void *)w->base;
    const int64_t *s = w->s;
    for (int64_t o = 0; o < d->O; o++)
        for (int64_t c = 0; c < d->Cg; c++)
            for (int64_t i = 0; i < d->g.kh; i++)
                for (int64_t j = 0; j < d->g.kw; j++)
                    *rows++ = base[o * s[0] + c * s[1] + i * s[2] + j * s[3]];
}

void td_direct_pack_rows(const float *rows, int64_t ldr, int64_t nrows, int64_t K, float *dst)
{
    const td_direct_tile_fns *k = td_direct_tile();
    int64_t mr = k->mr();
    const float *r[16];
    for (int64_t o0 = 0; o0 < nrows; o0 += mr, dst += mr * K) {
        int64_t n = nrows - o0 < mr ? nrows - o0 : mr;
        for (int64_t m = 0; m < n; m++)
            r[m] = rows + (o0 + m) * ldr;
        k->pack(r, n, K, dst);
    }
}

/* Image n's channels of group g, zero-padded, to xp[c*plane + r*Wp + col]; slack zeros after. */
static void pack_input(const td_conv_dims *d, const td_nchw *x, int64_t n, int64_t g,
                       int64_t Wp, int64_t plane, int64_t slack, float *xp)
{
    const td_conv_geom *gm = &d->g;
    memset(xp, 0, (size_t)(d->Cg * plane + slack) * sizeof(float));
    for (int64_t c = 0; c < d->Cg; c++)
        for (int64_t h = 0; h < gm->H; h++) {
            int64_t e = n * x->s[0] + (g * d->Cg + c) * x->s[1] + h * x->s[2];
            td_copy_strided((char *)(xp + c * plane + (h + gm->ph) * Wp + gm->pw),
                            x->base + e * (int64_t)sizeof(float), gm->W, x->s[3], sizeof(float));
        }
}

typedef struct direct_job {
    const td_direct_tile_fns *k;
    const td_conv_dims *d;
    const td_nchw *x;
    td_direct_conv c;  /* all but x, w, bias and out, which are per image and group */
    const float *wp;   /* every group's weights, packed: group gr at gr * group_w */
    int64_t group_w;
    const float *bias; /* O values, or NULL */
    char *out;
    int64_t tile_grain;
    int failed;
} direct_job;

static void tile_range(void *ctx, int64_t begin, int64_t end)
{
    const td_direct_conv *c = ctx;
    td_direct_tile()->run(c, begin, end);
}

void td_direct_run(const td_direct_conv *c, int64_t grain)
{
    td_parallel_for(td_direct_tile()->tiles(c), grain, tile_range, (void *)c);
}

/* Images [n0, n1) with a padded copy of their own: a share of the batch on one thread, or the
 * whole batch with each image's tiles over the threads. */
static void image_range(void *ctx, int64_t n0, int64_t n1)
{
    direct_job *j = ctx;
    const td_conv_dims *d = j->d;
    size_t x_bytes = (size_t)(d->Cg * j->c.plane + j->k->slack()) * sizeof(float);
    float *xp = td_cache_alloc(x_bytes);
    if (!xp) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    td_direct_conv c = j->c;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t gr = 0; gr < d->groups; gr++) {
            pack_input(d, j->x, n, gr, c.Wp, c.plane, j->k->slack(), xp);
            c.x = xp;
            c.w = j->wp + gr * j->group_w;
            c.bias = j->bias ? j->bias + gr * d->Og : NULL;
            c.out = (float *)(void *)j->out + (n * d->O + gr * d->Og) * d->g.L;
            td_direct_run(&c, j->tile_grain);
        }
    td_cache_free(xp, x_bytes);
}

/* Every group's weights packed (wp, group_w floats a group), from the tensor's rows or a copy. */
static float *pack_weights(const td_conv_dims *d, const td_nchw *w, int64_t group_w,
                           size_t *bytes)
{
    bool in_place = weight_rows(d, w);
    size_t r_bytes = in_place ? 0 : (size_t)(d->O * d->K) * sizeof(float);
    *bytes = (size_t)(d->groups * group_w) * sizeof(float);
    float *wp = td_cache_alloc(*bytes), *wr = in_place ? NULL : td_cache_alloc(r_bytes);
    if (wp && (in_place || wr)) {
        if (!in_place)
            copy_weight_rows(d, w, wr);
        const float *rows = in_place ? (const float *)(const void *)w->base : wr;
        int64_t ldr = in_place ? w->s[0] : d->K;
        for (int64_t gr = 0; gr < d->groups; gr++)
            td_direct_pack_rows(rows + gr * d->Og * ldr, ldr, d->Og, d->K, wp + gr * group_w);
    } else {
        td_cache_free(wp, *bytes);
        wp = NULL;
    }
    td_cache_free(wr, r_bytes);
    return wp;
}

int td_conv_direct(const td_conv_dims *d, char *out, const td_nchw *x, const td_nchw *w,
                   const float *bias, bool relu)
{
    const td_direct_tile_fns *k = td_direct_tile();
    const td_conv_geom *g = &d->g;
    int64_t kk = g->kh * g->kw, mr = k->mr(), group_w = (d->Og + mr - 1) / mr * mr * d->K;
    int64_t Wp = g->W + 2 * g->pw;
    size_t w_bytes;
    float *wp = pack_weights(d, w, group_w, &w_bytes);
    int64_t *tap_offset = td_malloc((size_t)kk * sizeof(int64_t));
    if (!wp || !tap_offset) {
        td_cache_free(wp, w_bytes);
        free(tap_offset);
        return -1;
    }
    for (int64_t t = 0; t < kk; t++)
        tap_offset[t] = t / g->kw * g->dh * Wp + t % g->kw * g->dw;
    /* Chunks of at least ~4M multiply-adds per thread (a tile is about K * 8 * 48): measured in
     * a compiled conv net at batch 1 on 2 threads, with 1M its 32 -> 64 channel 16x16 layer
     * (4.7M) split in two and the net ran 81 us against 76 on one thread. A batch goes to the
     * threads by images when it has that much work for each. */
    int64_t per_image = d->groups * d->Og * g->L * d->K;
    direct_job j = {.k = k, .d = d, .x = x, .wp = wp, .group_w = group_w, .bias = bias,
                    .out = out, .tile_grain = 1 + (1 << 22) / (d->K * 8 * 48)};
    j.c = (td_direct_conv){.tap_offset = tap_offset, .plane = (g->H + 2 * g->ph) * Wp, .Wp = Wp,
                           .sh = g->sh, .Cg = d->Cg, .Og = d->Og, .K = d->K, .kh = g->kh,
                           .kw = g->kw, .OH = g->OH, .OW = g->OW, .relu = relu};
    td_parallel_for(d->N, 1 + (1 << 22) / (per_image > 0 ? per_image : 1), image_range, &j);
    td_cache_free(wp, w_bytes);
    free(tap_offset);
    return j.failed ? -1 : 0;
}
