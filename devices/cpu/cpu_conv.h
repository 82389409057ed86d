/*
 * cpu_conv.h — what cpu_conv.c (the GEMM side of conv2d and its gradients) shares with
 * cpu_im2col.c (moving windows of an NCHW tensor to and from the columns a GEMM reads).
 *
 * Positions: the outputs of one convolution, flattened over (n, oh, ow) into [0, N*OH*OW); a
 * block of P consecutive positions starting at p0 may span images. A column matrix holds one
 * row per (channel, kernel row i, kernel column j) and one column per position of a block.
 */
#ifndef TIDE_CPU_CONV_H
#define TIDE_CPU_CONV_H

#include "../../core/tensor.h"

/* A 4-D strided host operand: the address of element [0, 0, 0, 0], strides in elements. */
typedef struct td_nchw {
    char *base;
    int64_t s[4];
} td_nchw;

/* One sliding window: planes of H x W read as OH x OW outputs (L = OH * OW per plane). */
typedef struct td_conv_geom {
    int64_t H, W, OH, OW, L;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} td_conv_geom;

td_nchw td_nchw_of(const tide_tensor *t);
/* n elements of es bytes, step elements apart in src, to consecutive dst (bits only). */
void td_copy_strided(char *dst, const char *src, int64_t n, int64_t step, size_t es);

/* One convolution's sizes: the window, the input's N and C, the output's O, groups, and per
 * group Cg = C/groups input channels, Og = O/groups output channels, K = Cg*kh*kw. */
typedef struct td_conv_dims {
    td_conv_geom g;
    int64_t N, C, O, groups, Cg, Og, K;
    tide_dtype dt;
    size_t es;
} td_conv_dims;

/* C = op(A) op(B) + beta C through td_blas_*gemm for dt; k = 0 leaves beta C. */
void td_conv_gemm(tide_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                  int64_t ldc);

/* ---- cpu_conv_shift.c: stride-1 convolutions without columns ---- */

enum { TD_CONV_FORWARD, TD_CONV_GRAD_INPUT };

/* Whether the shifted path suits a convolution whose GEMMs BLAS threads: stride 1, enough
 * channels per group for k = Cg GEMMs, and little padding next to the plane. */
bool td_conv_shift_fits(const td_conv_dims *d);
/* which: forward (x, w -> out) or grad input (gout, w -> out = dx); out is contiguous and the
 * operand the direction does not use may be NULL. 0, or -1 when out of memory (no error set:
 * the caller names the op). */
int td_conv_shift(int which, const td_conv_dims *d, char *out, const td_nchw *x,
                  const td_nchw *gout, const td_nchw *w);

/* ---- cpu_conv_phase.c: strided convolutions as stride-1 ones over the input's phases ---- */

/* Whether d's stride divides its kernel (dilation 1, float32 or float64) and the phases were
 * measured faster for its shape. */
bool td_conv_phase_fits(const td_conv_dims *d);
/* conv2d (p: its attributes) through the phases; out is contiguous. 0, or -1 with the error set. */
int td_conv_phase_forward(const td_conv_dims *d, tide_tensor *out, const tide_tensor *x,
                          const tide_tensor *w, const int64_t *p);

/* ---- cpu_conv_direct.c: float32 convolutions summed in registers, without BLAS ---- */

/* One image's group, as cpu_conv_direct_isa.c's tiles read it. */
typedef struct td_direct_conv {
    const float *x;            /* zero-padded input planes: channel c at x + c*plane, rows Wp */
    const float *w;            /* weights in blocks of MR output channels: w[(b*K + k)*MR + m]
                                * for o = w_first + b*MR + m, k = (c*kh + i)*kw + j; zeros
                                * past Og */
    int64_t w_first;           /* the output channel w's first block starts at (0, or a
                                * product's block of rows packed alone) */
    const float *bias;         /* Og values added to the sums, or NULL */
    float *out;                /* Og contiguous output planes of OH x OW */
    const int64_t *tap_offset; /* kh*kw: where tap (i, j) reads, i*dh*Wp + j*dw */
    int64_t plane, Wp, sh, Cg, Og, K, kh, kw, OH, OW;
    bool relu;      /* stores max(0, sum + bias), with relu's NaN and -0 */
    bool seg_major; /* tiles in order of columns first, then blocks of output channels */
} td_direct_conv;

/* Whether the direct path suits d on this CPU: float32, stride 1 along rows, an AVX2 or
 * AVX-512 tier, and shapes where it was measured faster than the GEMM paths. */
bool td_conv_direct_fits(const td_conv_dims *d);
/* out (contiguous NCHW) = conv(x, w) + bias (O values, or NULL), then relu's max(0, .) when
 * relu. 0, or -1 when out of memory (no error set: the caller names the op). */
int td_conv_direct(const td_conv_dims *d, char *out, const td_nchw *x, const td_nchw *w,
                   const float *bias, bool relu);

/* The tile's functions at this CPU's tier (cpu_conv_direct_isa.c), or NULL at the baseline
 * tier. Products use them too (cpu_matmul_direct.c). */
typedef struct td_direct_tile_fns {
    int (*mr)(void);
    void (*pack)(const float *const *rows, int64_t n, int64_t K, float *dst);
    int64_t (*slack)(void);
    int64_t (*tiles)(const td_direct_conv *c);
    void (*run)(const td_direct_conv *c, int64_t t0, int64_t t1);
} td_direct_tile_fns;
const td_direct_tile_fns *td_direct_tile(void);
/* nrows rows of K weights (ldr apart) into the tile's blocks of MR rows at dst (zeros past the
 * last row); dst holds ceil(nrows / MR) * MR * K floats. */
void td_direct_pack_rows(const float *rows, int64_t ldr, int64_t nrows, int64_t K, float *dst);
/* Every tile of c over tide's threads, in chunks of at least grain tiles. */
void td_direct_run(const td_direct_conv *c, int64_t grain);

#define TD_DIRECT_DECLARE(isa)                                                                     \
    int td_conv_direct_mr_##isa(void);                                                             \
    void td_conv_direct_pack_##isa(const float *const *rows, int64_t n, int64_t K, float *dst);    \
    int64_t td_conv_direct_slack_##isa(void);                                                      \
    int64_t td_conv_direct_tiles_##isa(const td_direct_conv *c);                                   \
    void td_conv_direct_run_##isa(const td_direct_conv *c, int64_t t0, int64_t t1);
TD_DIRECT_DECLARE(baseline)
TD_DIRECT_DECLARE(avx2)
TD_DIRECT_DECLARE(avx512)
#undef TD_DIRECT_DECLARE

/* ---- cpu_conv_wgrad.c: stride-1 float32 weight gradients without columns ---- */

/* One image's group, as cpu_conv_wgrad_isa.c's tiles read it. */
typedef struct td_wgrad_tile {
    const float *x;          /* the zero-padded input's stride phases: channel c's phase
                              * (ri, rj) at x + (c*sh*sw + ri*sw + rj)*plane */
    const float *gt;         /* the output gradient transposed: gt[q*ldg + o] at position
                              * q = oh*Wp + ow, zero where ow >= OW or o >= Og */
    const int64_t *k_offset; /* Kp: where row k = (c*kh + i)*kw + j reads, c*plane + i*dh*Wp +
                              * j*dw (0 for the rows past K that pad the last tile) */
    float *dwt;              /* [Kp, ldg] sums, added to */
    int64_t ldg, Q, Kp;      /* ldg: Og rounded up to whole vectors; Q = (OH-1)*Wp + OW */
} td_wgrad_tile;

/* Whether the columnless weight gradient suits d on this CPU: float32, stride 1, an AVX2 or
 * AVX-512 tier, enough images for every thread, and shapes where it was measured faster. */
bool td_conv_wgrad_fits(const td_conv_dims *d);
/* dw (contiguous [O, Cg, kh, kw]) = the weight gradient of x and gout. 0, or -1 when out of
 * memory (no error set: the caller names the op). */
int td_conv_wgrad(const td_conv_dims *d, float *dw, const td_nchw *x, const td_nchw *gout);
/* The tile's functions at an AVX tier (cpu_conv_wgrad_isa.c). transpose: gt[(oh*Wp + ow)*ldg +
 * o] = g[o*so + oh*sh + ow] for o < Og, oh < OH, ow < OW (rows of g contiguous). */

#define TD_WGRAD_DECLARE(isa)                                                                      \
    int td_conv_wgrad_kr_##isa(void);                                                              \
    int td_conv_wgrad_lanes_##isa(void);                                                           \
    void td_conv_wgrad_run_##isa(const td_wgrad_tile *c);                                          \
    void td_conv_wgrad_transpose_##isa(const float *g, int64_t so, int64_t sh, int64_t Og,         \
                                       int64_t OH, int64_t OW, int64_t Wp, int64_t ldg, float *gt);
TD_WGRAD_DECLARE(baseline)
TD_WGRAD_DECLARE(avx2)
TD_WGRAD_DECLARE(avx512)
#undef TD_WGRAD_DECLARE

/* col[r][q] (row-major, P columns) = x[n, c0 + c, ih, iw] at position p0 + q for row
 * r = (c * kh + i) * kw + j, c < nc, where ih = oh*sh - ph + i*dh and iw = ow*sw - pw + j*dw;
 * 0 outside the plane. es is the element size (4 or 8): this is a copy of bits. */
void td_im2col(const td_conv_geom *g, const td_nchw *x, int64_t c0, int64_t nc, int64_t p0,
               int64_t P, void *col, size_t es);

/* The adjoint of td_im2col: dx[n, c0 + c, ih, iw] += col[r][q] for every in-plane entry. Writes
 * to channel c of image n come only from rows of c, so the work splits by (image, channel). */
void td_col2im(const td_conv_geom *g, const td_nchw *dx, tide_dtype dt, int64_t c0, int64_t nc,
               int64_t p0, int64_t P, const void *col);

/* out[n, c0 + r, l] = rows[r][q] for r < nr at position p0 + q = n*L + l; out is contiguous
 * NCHW with C channels and L elements per plane. */
void td_scatter_rows(char *out, int64_t C, int64_t L, int64_t c0, int64_t nr, int64_t p0,
                     int64_t P, const void *rows, size_t es);

#endif
