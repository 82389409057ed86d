/*
 * cpu_matmul_direct.c — float32 C = A B with B row-major (each row of B contiguous), summed in
 * registers by the direct convolution's tile (cpu_conv_direct_isa.c), without BLAS.
 *
 * A product is a 1x1 convolution of one row of positions: B's rows are the input channels
 * (k of them, ldb apart), its columns the positions, A's rows the output channels. A tile is
 * MR rows of C by 3 vectors of its columns, summed over all of k and stored once; A's rows are
 * transposed into MR-blocks per thread as the tiles reach them. Each output's sum runs over k
 * in order, whatever the cut into blocks of rows: the jit's epilogue blocks and eager's whole
 * call give the same bits, so long as both take this path: the choice (td_matmul_direct_fits)
 * depends on the whole product's rows, never on a block's.
 *
 * Where it pays: the products of a transformer layer at batch 1 (m = 64 tokens, k and n a few
 * hundred to a thousand), where OpenBLAS 0.3.21 runs at ~110 GFLOP/s on one AVX-512 core and
 * the tile at ~190. Only the AVX2 and AVX-512 tiers, and n a whole number of vectors (the tile
 * loads whole vectors, and B has no slack past its rows).
 */
#include <stdlib.h>

#include "cpu_conv.h"
#include "cpu_isa.h"
#include "cpu_matmul_direct.h"

/* The range measured faster than OpenBLAS with B cold in cache, as a layer's weights are
 * when a model runs (bench/bench_small_gemm.c, 1 thread; OpenBLAS packs B for every call, and
 * that pass is most of what the direct tile saves). AVX-512: m = 64, n 768 / k 256 1.39x,
 * n 256 / k 1024 1.28x; m = 16 and 8, n = k = 512: 2.3x and 3.0x. Past 64 rows, or a packed A
 * past 256 KB, the tile's passes over A lose (m = 128, n = k = 1024: 0.48x; m = 256, k = 256:
 * 0.88x). The AVX2 tile (4 x 3 vectors of 8) against OpenBLAS's Haswell kernels wins only up
 * to 16 rows (m = 8: 1.24x, m = 16: 1.00x, m = 64: 0.69-0.79x). */
#define MIN_M 4
#define MAX_A_ELEMS (64 << 10)
#define MIN_N 64
#define MAX_N 4096
#define MIN_K 32

/* The most rows this tier's tiles take. */
static int64_t max_rows(void) { return td_cpu_isa() == TD_ISA_AVX512 ? 64 : 16; }

bool td_matmul_direct_fits(int64_t plan_m, int64_t n, int64_t k, bool b_trans)
{
    const td_direct_tile_fns *g = td_direct_tile();
    return g && !b_trans && n % g->slack() == 0 && plan_m >= MIN_M && plan_m <= max_rows() &&
           plan_m * k <= MAX_A_ELEMS && n >= MIN_N && n <= MAX_N && k >= MIN_K;
}

int td_matmul_direct(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c)
{
    const td_direct_tile_fns *g = td_direct_tile();
    static const int64_t tap0[1] = {0};
    int64_t mr = g->mr();
    size_t bytes = (size_t)((m + mr - 1) / mr * mr * k) * sizeof(float);
    float *wp = td_cache_alloc(bytes);
    if (!wp)
        return -1;
    td_direct_pack_rows(a, lda, m, k, wp);
    td_direct_conv dc = {.x = b, .w = wp, .out = c, .tap_offset = tap0, .plane = ldb, .Wp = n,
                         .sh = 1, .Cg = k, .Og = m, .K = k, .kh = 1, .kw = 1, .OH = 1, .OW = n,
                         .seg_major = true};
    /* chunks of at least ~4M multiply-adds per thread, as the direct convolution (a tile is
     * mr rows by 3 vectors of columns) */
    td_direct_run(&dc, 1 + (1 << 22) / (k * mr * 3 * g->slack()));
    td_cache_free(wp, bytes);
    return 0;
}

/* ---- B stored transposed: dot products along k (cpu_matmul_dot_isa.c) ------------------- */

typedef struct dot_isa {
    int64_t (*tiles)(const td_dot_product *p);
    int64_t (*tile_outputs)(void);
    void (*run)(const td_dot_product *p, int64_t t0, int64_t t1);
} dot_isa;

static const dot_isa *dot_tile_isa(void)
{
    static const dot_isa avx2 = {td_dot_tiles_avx2, td_dot_tile_outputs_avx2, td_dot_run_avx2};
    static const dot_isa avx512 = {td_dot_tiles_avx512, td_dot_tile_outputs_avx512,
                                   td_dot_run_avx512};
    static const dot_isa *const by_tier[] = {NULL, &avx2, &avx512}; /* td_isa_level */
    return by_tier[td_cpu_isa()];
}

/* The same rows as above, and k long enough that the lanes' reduction at the end of each tile
 * is a small part of it. Measured with B cold (bench_small_gemm, 1 thread, against OpenBLAS's
 * NT product): AVX-512 m 64, k 784: 1.18x; m 16: 1.74x; m 8, k 512: 1.80x; m 64, n 256, k 1024:
 * 1.30x; but k 256: 0.87x (n 768) and 0.99x (n 256). AVX2: m 8: 1.21x, m 16: 1.07x, m 64:
 * 0.75-0.78x. */
#define MIN_DOT_K 384

bool td_matmul_dot_fits(int64_t plan_m, int64_t n, int64_t k)
{
    return dot_tile_isa() && plan_m >= MIN_M && plan_m <= max_rows() &&
           plan_m * k <= MAX_A_ELEMS && n >= MIN_N && n <= MAX_N && k >= MIN_DOT_K;
}

typedef struct dot_job {
    const dot_isa *g;
    const td_dot_product *p;
} dot_job;

static void dot_range(void *ctx, int64_t t0, int64_t t1)
{
    const dot_job *j = ctx;
    j->g->run(j->p, t0, t1);
}

int td_matmul_dot(const td_dot_product *p)
{
    const dot_isa *g = dot_tile_isa();
    dot_job j = {g, p};
    /* chunks of at least ~4M multiply-adds per thread, as above */
    int64_t grain = 1 + (1 << 22) / (p->k * g->tile_outputs());
    td_parallel_for(g->tiles(p), grain, dot_range, &j);
    return 0;
}
