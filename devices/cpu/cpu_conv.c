/*
 * cpu_conv.c — conv2d and its input and weight gradients on the CPU. Most convolutions are
 * GEMMs over column matrices (cpu_conv.h, cpu_im2col.c):
 *   forward      out_g[Og, P]  = W_g[Og, K] x col[K, P]
 *   grad input   col[K, P]     = W_g^T x gout_g[Og, P], then col2im adds col into dx
 *   grad weight  dW_g[Og, K]  += gout_g[Og, P] x col^T
 * for each group g and each block of P output positions, with K = C/groups * kH * kW. Large
 * stride-1 convolutions skip the columns in the forward and grad-input directions
 * (cpu_conv_shift.c); a forward whose stride divides its kernel becomes a stride-1 one over the
 * input's stride phases (cpu_conv_phase.c). On the AVX2/AVX-512 tiers, float32 forwards of the
 * direct tile's shapes sum in registers (cpu_conv_direct.c), and so do stride-1 input
 * gradients of a batch, as the forwards they are; most float32 weight gradients sum in
 * registers without columns (cpu_conv_wgrad.c).
 *
 * Blocks keep the temporaries bounded and in cache: a large image is cut into tiles, and small
 * images are batched whole into one block so that the GEMM still gets a useful width (the
 * forward result of such a block goes to a scratch matrix and is scattered to NCHW; the
 * gradient is gathered into one). A 1x1 convolution with stride 1 and no padding needs no
 * columns at all: each image's plane already is the matrix.
 *
 * Threads: OpenBLAS runs single-threaded and td_blas_sgemm splits a GEMM above
 * TD_BLAS_GEMM_SINGLE_THREAD_MNK multiply-adds over tide's threads (cpu_blas.c). When blocks can
 * be made small enough for single-threaded GEMMs, the blocks (im2col, GEMM, scatter) are spread
 * over tide's threads; otherwise blocks run one after another on the calling thread, the moves
 * serially and each GEMM split over the pool.
 */
#include <string.h>

#include "cpu_blas.h"
#include "cpu_conv.h"
#include "cpu_kernels.h"

/* Column bytes per block when BLAS threads the GEMMs: about an L2's worth with BLAS's packed
 * copy, and wide enough (>= MIN_COLS) for full-speed GEMMs. */
#define COL_BYTES (1 << 20)
#define MIN_COLS 256
/* Single-threaded GEMMs narrower than this are not worth spreading over threads. */
#define MIN_PAR_COLS 64
/* Images with fewer output positions than this go through the batched column path even when
 * they need no columns (1x1), since one GEMM per small image is slower than a copy. */
#define DIRECT_MIN_L 256
/* Partial weight gradients summed at the end when blocks run in parallel. */
#define MAX_PIECES 16
/* Column bytes per block for a weight gradient spread over the threads: a whole image up to
 * this, so each single-threaded GEMM sums over more positions. */
#define WEIGHT_COL_BYTES (4 << 20)

typedef struct conv_plan {
    td_conv_dims d;
    td_conv_geom g_out; /* 1x1 over grad_out: gathers it into [Og, P] */
    bool parallel;      /* blocks on tide's threads, single-threaded GEMMs */
    bool direct;        /* 1x1, stride 1, no padding: no columns */
    /* blocks: tiles of `tile` positions of one image, or `imgs` whole images */
    int64_t tile, imgs, max_p, tiles, img_blocks;
} conv_plan;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* x: the input's [N, C, H, W]; o: [O, OH, OW]; k: [kh, kw]; p: the attributes. */
static void plan_init(conv_plan *pl, const int64_t *x, const int64_t *o, const int64_t *k,
                      const int64_t *p, tide_dtype dt)
{
    memset(pl, 0, sizeof *pl);
    td_conv_dims *d = &pl->d;
    d->g = (td_conv_geom){.H = x[2], .W = x[3], .OH = o[1], .OW = o[2], .L = o[1] * o[2],
                          .kh = k[0], .kw = k[1], .sh = p[0], .sw = p[1], .ph = p[2],
                          .pw = p[3], .dh = p[4], .dw = p[5]};
    pl->g_out = (td_conv_geom){.H = o[1], .W = o[2], .OH = o[1], .OW = o[2], .L = o[1] * o[2],
                               .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
    d->N = x[0];
    d->C = x[1];
    d->O = o[0];
    d->groups = p[6];
    d->Cg = d->C / d->groups;
    d->Og = d->O / d->groups;
    d->K = d->Cg * k[0] * k[1];
    d->dt = dt;
    d->es = td_dtype_sizes[dt];
}

/* A 1x1 window with stride 1 and no padding over planes big enough to be GEMM operands. */
static bool pointwise(const conv_plan *pl)
{
    const td_conv_geom *g = &pl->d.g;
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
           g->L >= DIRECT_MIN_L;
}

/* Whether nrows planes (H x W) of v, from any channel, read as a [nrows, H*W] matrix with a
 * BLAS-sized leading dimension. */
static bool plane_matrix(const td_nchw *v, int64_t H, int64_t W, int64_t nrows)
{
    bool flat = (W == 1 || v->s[3] == 1) && (H == 1 || v->s[2] == W);
    return flat && (nrows == 1 || (v->s[1] >= H * W && v->s[1] <= INT32_MAX));
}

/* Chooses threads and cuts the positions into blocks. direct: one whole image per block. */
static void plan_blocks(conv_plan *pl, bool direct)
{
    const td_conv_dims *d = &pl->d;
    int64_t L = d->g.L;
    int64_t small = TD_BLAS_GEMM_SINGLE_THREAD_MNK / max64(1, d->Og * d->K);
    pl->direct = direct;
    pl->parallel = td_num_threads() > 1 && (direct ? small >= L : small >= MIN_PAR_COLS);
    int64_t target = pl->parallel ? small : max64(MIN_COLS, COL_BYTES / (d->K * (int64_t)d->es));
    if (direct || L >= target) {
        pl->tile = direct ? L : ceil_div(L, ceil_div(L, target));
        pl->imgs = 1;
        pl->max_p = pl->tile;
    } else {
        pl->tile = L;
        pl->imgs = max64(1, min64(d->N, target / L));
        pl->max_p = pl->imgs * L;
    }
    pl->tiles = ceil_div(L, pl->tile);
    pl->img_blocks = ceil_div(d->N, pl->imgs);
}

/* Block b (image block b / tiles, tile b % tiles): first image, first position in it, width. */
static void block_at(const conv_plan *pl, int64_t b, int64_t *n0, int64_t *l0, int64_t *P)
{
    int64_t L = pl->d.g.L;
    *n0 = b / pl->tiles * pl->imgs;
    *l0 = b % pl->tiles * pl->tile;
    *P = pl->imgs > 1 ? min64(pl->imgs, pl->d.N - *n0) * L : min64(pl->tile, L - *l0);
}

/* BLAS takes 32-bit sizes (the fallback loop of cpu_blas.c would take forever at these). */
static int check_blas_range(const char *op, const conv_plan *pl)
{
    const td_conv_dims *d = &pl->d;
    if (d->K > INT32_MAX || d->g.L > INT32_MAX || d->O > INT32_MAX || d->C > INT32_MAX ||
        pl->max_p > INT32_MAX)
        return td_error("cpu: %s: sizes beyond BLAS's 32-bit range (K %lld, positions per "
                        "image %lld, channels %lld -> %lld)",
                        op, (long long)d->K, (long long)d->g.L, (long long)d->C, (long long)d->O);
    return 0;
}

void td_conv_gemm(tide_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                  int64_t ldc)
{
    if (m == 0 || n == 0)
        return;
    size_t es = td_dtype_sizes[dt];
    if (k == 0) {
        if (beta == 0)
            for (int64_t i = 0; i < m; i++)
                memset((char *)c + (size_t)(i * ldc) * es, 0, (size_t)n * es);
        return;
    }
    if (dt == TIDE_FLOAT32)
        td_blas_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, (float)beta, c, ldc);
    else
        td_blas_dgemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

static int out_of_memory(const char *op)
{
    return td_error("cpu: %s: out of memory for its temporaries", op);
}

/* ---- temporaries ------------------------------------------------------------------------- */

/* Up to two blocks from the caching allocator. Workers cannot report errors (they are per
 * thread), so running out of memory is a flag the calling thread turns into an error. */
typedef struct scratch {
    void *ptr[2];
    size_t bytes[2];
    int n;
    bool failed;
} scratch;

static char *scratch_get(scratch *s, bool needed, int64_t elements, size_t es)
{
    if (!needed || s->failed)
        return NULL;
    size_t bytes = (size_t)max64(1, elements) * es;
    void *p = td_cache_alloc(bytes);
    if (!p) {
        s->failed = true;
        return NULL;
    }
    s->ptr[s->n] = p;
    s->bytes[s->n++] = bytes;
    return p;
}

static void scratch_free(scratch *s)
{
    for (int i = 0; i < s->n; i++)
        td_cache_free(s->ptr[i], s->bytes[i]);
    s->n = 0;
}

/* ---- the column path's shared parts -------------------------------------------------------- */

typedef struct conv_job {
    conv_plan pl;
    td_nchw x, gout, dx; /* the operands the op has */
    const char *w;       /* the weight as a row-major [O, K] matrix */
    char *out;
    bool gout_in_place;  /* grad_out's planes are usable as GEMM operands */
    char *partials;      /* grad_weight: one sum per piece, per group [K, Og] (dW^T) */
    int64_t npieces;
    int failed;          /* atomic */
} conv_job;

static void job_failed(conv_job *j) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); }

/* Runs fn over tasks [0, n) on tide's threads or, when BLAS threads the GEMMs, here. */
static void run_tasks(conv_job *j, int64_t n, td_range_fn fn)
{
    if (j->pl.parallel)
        td_parallel_for(n, 1, fn, j);
    else
        fn(j, 0, n);
}

/* The weight as a row-major [O, K] matrix: its own memory when contiguous, else packed into
 * *packed (give it back with weight_free). NULL when out of memory. */
static const char *weight_matrix(const tide_tensor *w, const td_conv_dims *d, void **packed)
{
    *packed = NULL;
    if (td_is_contiguous(w))
        return td_tensor_data(w);
    char *m = td_cache_alloc((size_t)max64(1, d->O * d->K) * d->es);
    if (!m)
        return NULL;
    /* Output channel o's [Cg, kh, kw] block, read as a Cg-channel image through a 1x1 window,
     * comes out row-major: the packed rows of o. */
    td_conv_geom g = {.H = w->shape[2], .W = w->shape[3], .OH = w->shape[2],
                      .OW = w->shape[3], .L = w->shape[2] * w->shape[3], .kh = 1, .kw = 1,
                      .sh = 1, .sw = 1, .dh = 1, .dw = 1};
    td_nchw v = {td_tensor_data(w), {0, w->strides[1], w->strides[2], w->strides[3]}};
    for (int64_t o = 0; o < d->O; o++) {
        td_nchw vo = v;
        vo.base += o * w->strides[0] * (int64_t)d->es;
        td_im2col(&g, &vo, 0, d->Cg, 0, g.L, m + (size_t)(o * d->K) * d->es, d->es);
    }
    *packed = m;
    return m;
}

static void weight_free(const td_conv_dims *d, void *packed)
{
    if (packed)
        td_cache_free(packed, (size_t)max64(1, d->O * d->K) * d->es);
}

/* The input's columns for group g over a block: its planes in place for a direct plan, else
 * im2col into col. */
static const char *x_matrix(const conv_job *j, int64_t g, int64_t n0, int64_t p0, int64_t P,
                            char *col, int64_t *ld)
{
    const td_conv_dims *d = &j->pl.d;
    if (j->pl.direct) {
        *ld = d->Cg > 1 ? j->x.s[1] : P;
        return j->x.base + (n0 * j->x.s[0] + g * d->Cg * j->x.s[1]) * (int64_t)d->es;
    }
    td_im2col(&d->g, &j->x, g * d->Cg, d->Cg, p0, P, col, d->es);
    *ld = P;
    return col;
}

/* grad_out of group g over a block as a matrix: in place when its planes allow, else gathered
 * into buf. */
static const char *gout_matrix(const conv_job *j, int64_t g, int64_t n0, int64_t p0, int64_t P,
                               char *buf, int64_t *ld)
{
    const td_conv_dims *d = &j->pl.d;
    if (j->gout_in_place) {
        *ld = d->Og > 1 ? j->gout.s[1] : P;
        return j->gout.base +
               (n0 * j->gout.s[0] + g * d->Og * j->gout.s[1] + (p0 - n0 * d->g.L)) *
                   (int64_t)d->es;
    }
    td_im2col(&j->pl.g_out, &j->gout, g * d->Og, d->Og, p0, P, buf, d->es);
    *ld = P;
    return buf;
}

/* ---- images over threads ------------------------------------------------------------------ */

/* A plan that is not `parallel` runs its moves (im2col, shifts, scatters) on the calling thread
 * and only its GEMMs on the pool. With a batch of at least two images per thread, the images are
 * spread over the threads instead, each share convolved whole on its thread: the moves run in
 * parallel too and each GEMM keeps its width. Measured (2 threads, 3x3, padding 1, 32 -> 64
 * channels of 28x28, batch 64): forward 110 -> 154 GFLOP/s, grad input 103 -> 158. The
 * weight gradient sums over images: it spreads pieces of images instead (partial sums added in
 * piece order, td_cpu_conv2d_grad_weight). */
typedef int (*conv_fn)(tide_tensor *out, const tide_tensor *in, const tide_tensor *w,
                       const int64_t *p);

typedef struct image_split {
    conv_fn fn;
    tide_tensor *out;
    const tide_tensor *in, *w;
    const int64_t *p;
    int failed; /* atomic */
} image_split;

/* Set while a thread convolves its share: that call must not split again. */
static _Thread_local bool in_image_share;

static void image_split_range(void *ctx, int64_t begin, int64_t end)
{
    image_split *s = ctx;
    tide_tensor *o = td_tensor_narrow0(s->out, begin, end);
    tide_tensor *i = td_tensor_narrow0(s->in, begin, end);
    in_image_share = true;
    if (!o || !i || s->fn(o, i, s->w, s->p) < 0)
        __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
    in_image_share = false;
    tide_release(o);
    tide_release(i);
}

/* Whether a plan's images go to the threads in shares (after the checks that can fail on the
 * shape, so that a share fails only for memory). */
static bool splits_images(const conv_plan *pl)
{
    return !pl->parallel && !in_image_share && td_num_threads() > 1 &&
           pl->d.N >= 2 * td_num_threads();
}

/* fn over shares of the images on the threads: in is x (forward) or grad_out (grad input). */
static int by_images(const char *op, conv_fn fn, tide_tensor *out, const tide_tensor *in,
                     const tide_tensor *w, const int64_t *p)
{
    image_split s = {fn, out, in, w, p, 0};
    td_parallel_for(out->shape[0], 2, image_split_range, &s);
    return s.failed ? out_of_memory(op) : 0;
}

/* ---- forward ----------------------------------------------------------------------------- */

/* Tasks are (block, group) pairs. */
static void forward_tasks(void *ctx, int64_t begin, int64_t end)
{
    conv_job *j = ctx;
    const conv_plan *pl = &j->pl;
    const td_conv_dims *d = &pl->d;
    size_t es = d->es;
    scratch s = {0};
    char *col = scratch_get(&s, !pl->direct, d->K * pl->max_p, es);
    char *tmp = scratch_get(&s, pl->imgs > 1, d->Og * pl->max_p, es);
    if (s.failed) {
        scratch_free(&s);
        job_failed(j);
        return;
    }
    int64_t L = d->g.L;
    for (int64_t t = begin; t < end; t++) {
        int64_t g = t % d->groups, n0, l0, P, ldb;
        block_at(pl, t / d->groups, &n0, &l0, &P);
        const char *b = x_matrix(j, g, n0, n0 * L + l0, P, col, &ldb);
        const char *a = j->w + (size_t)(g * d->Og * d->K) * es;
        if (pl->imgs == 1) {
            td_conv_gemm(d->dt, false, false, d->Og, P, d->K, a, d->K, b, ldb, 0,
                         j->out + (size_t)((n0 * d->O + g * d->Og) * L + l0) * es, L);
        } else {
            td_conv_gemm(d->dt, false, false, d->Og, P, d->K, a, d->K, b, ldb, 0, tmp, P);
            td_scatter_rows(j->out, d->O, L, g * d->Og, d->Og, n0 * L, P, tmp, es);
        }
    }
    scratch_free(&s);
}

int td_cpu_conv2d(tide_tensor *out, const tide_tensor *x, const tide_tensor *w, const int64_t *p)
{
    const char *op = "conv2d";
    conv_job j = {0};
    conv_plan *pl = &j.pl;
    const td_conv_dims *d = &pl->d;
    plan_init(pl, x->shape, out->shape + 1, w->shape + 2, p, (tide_dtype)x->dtype);
    j.out = td_tensor_data(out);
    if (d->K == 0) { /* no input channels: every sum is empty */
        memset(j.out, 0, (size_t)td_numel(4, out->shape) * d->es);
        return 0;
    }
    if (td_blas_ready(op) < 0)
        return -1;
    if (td_conv_phase_fits(d))
        return td_conv_phase_forward(d, out, x, w, p);
    j.x = td_nchw_of(x);
    plan_blocks(pl, pointwise(pl) && plane_matrix(&j.x, d->g.H, d->g.W, d->Cg));
    if (check_blas_range(op, pl) < 0)
        return -1;
    if (splits_images(pl))
        return by_images(op, td_cpu_conv2d, out, x, w, p);
    td_nchw wn = td_nchw_of(w);
    if (td_conv_direct_fits(d))
        return td_conv_direct(d, j.out, &j.x, &wn, NULL, false) < 0 ? out_of_memory(op) : 0;
    if (!pl->parallel && !pl->direct && td_conv_shift_fits(d))
        return td_conv_shift(TD_CONV_FORWARD, d, j.out, &j.x, NULL, &wn) < 0 ? out_of_memory(op)
                                                                           : 0;
    void *packed;
    j.w = weight_matrix(w, d, &packed);
    if (!j.w)
        return out_of_memory(op);
    run_tasks(&j, pl->img_blocks * pl->tiles * d->groups, forward_tasks);
    weight_free(d, packed);
    return j.failed ? out_of_memory(op) : 0;
}

int td_cpu_conv2d_fused(tide_tensor *out, const tide_tensor *x, const tide_tensor *w,
                        const int64_t *p, const float *bias, bool relu)
{
    conv_plan pl;
    plan_init(&pl, x->shape, out->shape + 1, w->shape + 2, p, (tide_dtype)x->dtype);
    /* td_cpu_conv2d takes the direct path for these shapes too, whole or in shares of images:
     * each output is the same sum either way, so the fused result has eager's bits */
    if (!td_conv_direct_fits(&pl.d))
        return 0;
    td_nchw xn = td_nchw_of(x), wn = td_nchw_of(w);
    return td_conv_direct(&pl.d, td_tensor_data(out), &xn, &wn, bias, relu) < 0
               ? out_of_memory("conv2d")
               : 1;
}

/* ---- gradient with respect to the input -------------------------------------------------- */

/* A stride-1 input gradient is a forward convolution: grad_out padded by dil*(k-1) - pad (when
 * that is not negative), convolved with the weight flipped in its taps and its two channel dims
 * swapped within each group. Whether it is; *fwd gets that forward's sizes. */
static bool forward_of_grad_input(const td_conv_dims *d, td_conv_dims *fwd)
{
    const td_conv_geom *g = &d->g;
    int64_t ph = g->dh * (g->kh - 1) - g->ph, pw = g->dw * (g->kw - 1) - g->pw;
    if (g->sh != 1 || g->sw != 1 || ph < 0 || pw < 0)
        return false;
    *fwd = *d;
    fwd->g = (td_conv_geom){.H = g->OH, .W = g->OW, .OH = g->H, .OW = g->W, .L = g->H * g->W,
                            .kh = g->kh, .kw = g->kw, .sh = 1, .sw = 1, .ph = ph, .pw = pw,
                            .dh = g->dh, .dw = g->dw};
    fwd->C = d->O, fwd->O = d->C, fwd->Cg = d->Og, fwd->Og = d->Cg;
    fwd->K = d->Og * g->kh * g->kw;
    return true;
}

/* That forward's weight, contiguous [C, O/groups, kh, kw]: wf[gr*Cg + c, o, i, j] =
 * w[gr*Og + o, c, kh-1-i, kw-1-j]. NULL when out of memory. */
static char *flipped_weight(const td_conv_dims *d, const tide_tensor *w, size_t *bytes)
{
    int64_t kh = d->g.kh, kw = d->g.kw;
    *bytes = (size_t)(d->O * d->K) * d->es;
    char *wf = td_cache_alloc(*bytes), *dst = wf;
    const char *base = td_tensor_data(w);
    const int64_t *s = w->strides;
    for (int64_t gr = 0; wf && gr < d->groups; gr++)
        for (int64_t c = 0; c < d->Cg; c++)
            for (int64_t o = 0; o < d->Og; o++)
                for (int64_t t = 0; t < kh * kw; t++, dst += d->es) {
                    int64_t e = (gr * d->Og + o) * s[0] + c * s[1] + (kh - 1 - t / kw) * s[2] +
                                (kw - 1 - t % kw) * s[3];
                    memcpy(dst, base + e * (int64_t)d->es, d->es);
                }
    return wf;
}

/* The input gradient through the forward's direct path, when the forward of it takes that
 * path and the batch gives each thread whole images. Measured (2 threads, AVX-512, Ice Lake):
 * conv3d's layer (64 -> 96 channels of 28x28, 32 images) 0.64 of one raw sgemm through the
 * shifted input-gradient GEMMs against 0.82 direct; LeNet's second layer (batch 64) 0.55
 * against 0.84. (The forward's shifted GEMMs in place of the input gradient's were slower:
 * 30 GFLOP/s against 60 at batch 1, 64 -> 32 channels of 16x16.) 1 when done, 0 when the
 * direct path does not suit, -1 when out of memory. */
static int grad_input_as_forward(const conv_plan *pl, char *out, const td_nchw *gout,
                                 const tide_tensor *w)
{
    td_conv_dims fwd;
    if (!forward_of_grad_input(&pl->d, &fwd))
        return 0;
    /* direct only for whole images on each thread: one image's tiles split over the threads
     * lost to the GEMM paths (batch 1, 2 threads, 64 -> 32 channels of 16x16: 30 GFLOP/s
     * against 70; 128 -> 64 of 8x8: 14 against 64), batches won or tied (16 images of 16x16,
     * 64 -> 32: 128 against 71; 8 of 14x14, 128 -> 128: 83 against 88) */
    bool whole_images = in_image_share || pl->d.N >= 2 * td_num_threads();
    bool direct = whole_images && td_conv_direct_fits(&fwd);
    if (!direct)
        return 0;
    size_t bytes;
    char *wf = flipped_weight(&pl->d, w, &bytes);
    if (!wf)
        return -1;
    td_nchw wn = {wf, {fwd.K, fwd.g.kh * fwd.g.kw, fwd.g.kw, 1}};
    int rc = td_conv_direct(&fwd, out, gout, &wn, NULL, false);
    td_cache_free(wf, bytes);
    return rc < 0 ? -1 : 1;
}

/* Tasks are (image block, group) pairs: their writes to dx never overlap (those of two tiles
 * of one image do, through the kernel's reach). */
static void grad_input_tasks(void *ctx, int64_t begin, int64_t end)
{
    conv_job *j = ctx;
    const conv_plan *pl = &j->pl;
    const td_conv_dims *d = &pl->d;
    size_t es = d->es;
    scratch s = {0};
    char *col = scratch_get(&s, !pl->direct, d->K * pl->max_p, es);
    char *gbuf = scratch_get(&s, !j->gout_in_place, d->Og * pl->max_p, es);
    if (s.failed) {
        scratch_free(&s);
        job_failed(j);
        return;
    }
    int64_t L = d->g.L, plane = d->g.H * d->g.W;
    for (int64_t t = begin; t < end; t++) {
        int64_t g = t % d->groups, ib = t / d->groups;
        int64_t n_first = ib * pl->imgs, nb = min64(pl->imgs, d->N - n_first);
        if (!pl->direct) /* col2im adds into these channels */
            for (int64_t n = n_first; n < n_first + nb; n++)
                memset(j->out + (size_t)((n * d->C + g * d->Cg) * plane) * es, 0,
                       (size_t)(d->Cg * plane) * es);
        for (int64_t b = ib * pl->tiles; b < (ib + 1) * pl->tiles; b++) {
            int64_t n0, l0, P, ldg;
            block_at(pl, b, &n0, &l0, &P);
            const char *gm = gout_matrix(j, g, n0, n0 * L + l0, P, gbuf, &ldg);
            const char *a = j->w + (size_t)(g * d->Og * d->K) * es;
            if (pl->direct) { /* col2im is the identity: write dx */
                td_conv_gemm(d->dt, true, false, d->Cg, P, d->Og, a, d->K, gm, ldg, 0,
                             j->out + (size_t)((n0 * d->C + g * d->Cg) * L) * es, L);
            } else {
                td_conv_gemm(d->dt, true, false, d->K, P, d->Og, a, d->K, gm, ldg, 0, col, P);
                td_col2im(&d->g, &j->dx, d->dt, g * d->Cg, d->Cg, n0 * L + l0, P, col);
            }
        }
    }
    scratch_free(&s);
}

int td_cpu_conv2d_grad_input(tide_tensor *out, const tide_tensor *grad_out, const tide_tensor *w,
                             const int64_t *p)
{
    const char *op = "conv2d_grad_input";
    conv_job j = {0};
    conv_plan *pl = &j.pl;
    const td_conv_dims *d = &pl->d;
    int64_t o_shape[3] = {grad_out->shape[1], grad_out->shape[2], grad_out->shape[3]};
    plan_init(pl, out->shape, o_shape, w->shape + 2, p, (tide_dtype)out->dtype);
    j.out = td_tensor_data(out);
    if (d->Og == 0) { /* no output channels: nothing flows back */
        memset(j.out, 0, (size_t)td_numel(4, out->shape) * d->es);
        return 0;
    }
    if (td_blas_ready(op) < 0)
        return -1;
    j.gout = td_nchw_of(grad_out);
    j.dx = td_nchw_of(out);
    plan_blocks(pl, pointwise(pl)); /* dx is contiguous */
    if (check_blas_range(op, pl) < 0)
        return -1;
    if (splits_images(pl))
        return by_images(op, td_cpu_conv2d_grad_input, out, grad_out, w, p);
    int done = grad_input_as_forward(pl, j.out, &j.gout, w);
    if (done != 0)
        return done < 0 ? out_of_memory(op) : 0;
    td_nchw wn = td_nchw_of(w);
    if (!pl->parallel && !pl->direct && td_conv_shift_fits(d))
        return td_conv_shift(TD_CONV_GRAD_INPUT, d, j.out, NULL, &j.gout, &wn) < 0
                   ? out_of_memory(op)
                   : 0;
    j.gout_in_place = pl->imgs == 1 && plane_matrix(&j.gout, d->g.OH, d->g.OW, d->Og);
    void *packed;
    j.w = weight_matrix(w, d, &packed);
    if (!j.w)
        return out_of_memory(op);
    run_tasks(&j, pl->img_blocks * d->groups, grad_input_tasks);
    weight_free(d, packed);
    return j.failed ? out_of_memory(op) : 0;
}

/* ---- gradient with respect to the weight ------------------------------------------------- */

/* Tasks are pieces: fixed runs of blocks, each summed into its own [O, K] partial (dw itself
 * when there is one piece), so the result does not depend on the number of threads. */
static void grad_weight_tasks(void *ctx, int64_t begin, int64_t end)
{
    conv_job *j = ctx;
    const conv_plan *pl = &j->pl;
    const td_conv_dims *d = &pl->d;
    size_t es = d->es;
    scratch s = {0};
    char *col = scratch_get(&s, !pl->direct, d->K * pl->max_p, es);
    char *gbuf = scratch_get(&s, !j->gout_in_place, d->Og * pl->max_p, es);
    if (s.failed) {
        scratch_free(&s);
        job_failed(j);
        return;
    }
    int64_t L = d->g.L, nblocks = pl->img_blocks * pl->tiles;
    for (int64_t piece = begin; piece < end; piece++) {
        char *dwt = j->partials + (size_t)(piece * d->O * d->K) * es;
        for (int64_t b = nblocks * piece / j->npieces; b < nblocks * (piece + 1) / j->npieces;
             b++) {
            int64_t n0, l0, P;
            block_at(pl, b, &n0, &l0, &P);
            for (int64_t g = 0; g < d->groups; g++) {
                int64_t ldg, ldb;
                const char *gm = gout_matrix(j, g, n0, n0 * L + l0, P, gbuf, &ldg);
                const char *xm = x_matrix(j, g, n0, n0 * L + l0, P, col, &ldb);
                /* dW^T = col x gout^T: OpenBLAS runs this shape 3-9% faster than
                 * gout x col^T (a [K, Og] result, K the long side; measured on the conv
                 * family's layers, Cooperlake and Haswell kernels) */
                td_conv_gemm(d->dt, false, true, d->K, d->Og, P, xm, ldb, gm, ldg, 1,
                             dwt + (size_t)(g * d->K * d->Og) * es, d->Og);
            }
        }
    }
    scratch_free(&s);
}

/* dw[g*Og + o, k] = the sum over pieces, in piece order, of their dW^T[g][k][o]. */
#define SUM_PARTIALS(T)                                                                            \
    do {                                                                                           \
        T *d_ = (T *)(void *)j->out;                                                               \
        const T *p_ = (const T *)(const void *)j->partials;                                        \
        for (int64_t g = 0; g < d->groups; g++)                                                    \
            for (int64_t k = 0; k < d->K; k++)                                                     \
                for (int64_t o = 0; o < d->Og; o++) {                                              \
                    int64_t at = (g * d->K + k) * d->Og + o;                                       \
                    T acc = p_[at];                                                                \
                    for (int64_t q = 1; q < j->npieces; q++)                                       \
                        acc += p_[q * n + at];                                                     \
                    d_[(g * d->Og + o) * d->K + k] = acc;                                          \
                }                                                                                  \
    } while (0)

static void sum_partials(conv_job *j, int64_t n)
{
    const td_conv_dims *d = &j->pl.d;
    if (d->dt == TIDE_FLOAT32)
        SUM_PARTIALS(float);
    else
        SUM_PARTIALS(double);
}

int td_cpu_conv2d_grad_weight(tide_tensor *out, const tide_tensor *x, const tide_tensor *grad_out,
                              const int64_t *p)
{
    const char *op = "conv2d_grad_weight";
    conv_job j = {0};
    conv_plan *pl = &j.pl;
    const td_conv_dims *d = &pl->d;
    int64_t o_shape[3] = {grad_out->shape[1], grad_out->shape[2], grad_out->shape[3]};
    plan_init(pl, x->shape, o_shape, out->shape + 2, p, (tide_dtype)out->dtype);
    j.out = td_tensor_data(out);
    int64_t n = td_numel(4, out->shape);
    if (d->N == 0) { /* a sum over no images; otherwise sum_partials writes every entry */
        memset(j.out, 0, (size_t)n * d->es);
        return 0;
    }
    if (td_blas_ready(op) < 0)
        return -1;
    j.x = td_nchw_of(x);
    j.gout = td_nchw_of(grad_out);
    if (td_conv_wgrad_fits(d))
        return td_conv_wgrad(d, (float *)(void *)j.out, &j.x, &j.gout) < 0 ? out_of_memory(op)
                                                                            : 0;
    plan_blocks(pl, pointwise(pl) && plane_matrix(&j.x, d->g.H, d->g.W, d->Cg));
    if (check_blas_range(op, pl) < 0)
        return -1;
    /* No shifted path here: its per-tap GEMMs have a [Og, Cg] result, too small for BLAS's
     * threads (measured on the ResNet layer: 100 GFLOP/s against 140 through columns). */
    j.gout_in_place = pl->imgs == 1 && plane_matrix(&j.gout, d->g.OH, d->g.OW, d->Og);
    /* Pieces go to the threads when the GEMMs are single-threaded anyway, and also when there
     * are at least two images per thread: then each thread's im2col runs beside the others (as
     * the forward's image split) instead of on the calling thread between threaded GEMMs.
     * Measured (2 threads, conv1d 128 -> 128 channels, k 3, length 1024, batch 8): 0.41 ->
     * 0.74; the ResNet layer of bench_conv 0.65 -> 0.80 of one raw sgemm of the same M, N, K. */
    bool spread = pl->parallel || (td_num_threads() > 1 && d->N >= 2 * td_num_threads());
    if (spread && !pl->parallel && !pl->direct && pl->imgs == 1 &&
        d->K * d->g.L * (int64_t)d->es <= WEIGHT_COL_BYTES) { /* whole images: longer sums */
        pl->tile = pl->max_p = d->g.L;
        pl->tiles = 1;
    }
    j.npieces = spread ? min64(MAX_PIECES, pl->img_blocks * pl->tiles) : 1;
    size_t partial_bytes = (size_t)(j.npieces * n) * d->es;
    j.partials = td_cache_alloc(partial_bytes);
    if (!j.partials)
        return out_of_memory(op);
    memset(j.partials, 0, partial_bytes);
    if (j.npieces > 1)
        td_parallel_for(j.npieces, 1, grad_weight_tasks, &j);
    else
        grad_weight_tasks(&j, 0, 1);
    if (!j.failed)
        sum_partials(&j, n);
    td_cache_free(j.partials, partial_bytes);
    return j.failed ? out_of_memory(op) : 0;
}
