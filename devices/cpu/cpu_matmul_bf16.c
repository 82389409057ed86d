/*
 * cpu_matmul_bf16.c — bfloat16 products on Intel AMX tiles (TDPBF16PS) where the CPU has them,
 * else with AVX512_BF16's VDPBF16PS, at the avx512 tier (td_cpu_bf16_path). Elsewhere the
 * dispatcher widens a bfloat16 matmul to float32 and OpenBLAS's sgemm (no sbgemm in Debian's
 * 0.3.21).
 *
 * One product C [m, n] = A [m, k] B [k, n], any element strides, C row-major bfloat16:
 *   - A is packed into 16 x 32 tiles (16 rows, 32 k), B into 32 x 16 tiles in the pair-
 *     interleaved layout the instruction reads (a tile row holds k = 2p and 2p + 1 for 16
 *     columns); both zero-padded to whole tiles, both packed in parallel;
 *   - each task computes a 32 x 32 block of C in four float32 tiles (2 x 2: two A tiles and
 *     two B tiles feed four products per 32 k), or in vector registers from the same packed
 *     tiles, then rounds it once to bfloat16 with the same conversion as tide_cast.
 * Every element of C is one task's sum over k in one order, so a row's bits depend neither on
 * the thread count nor on how a caller cuts the rows (the jit's plans equal eager); the two
 * kernels sum in different orders, so their bits differ (a process uses one). Products of two
 * bfloat16 are exact in float32; both instructions treat subnormal operands as zero and flush
 * subnormal sums, as they are defined.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/log.h"
#include "cpu_blas.h"
#include "cpu_half.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_matmul_bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_AMX_CODE 1
#endif

#define TILE_ROWS 16
#define TILE_K 32 /* bfloat16 per tile row: 64 bytes */
#define TILE_ELEMS (TILE_ROWS * TILE_K)
#define BLOCK 32 /* C rows and columns per task: 2 x 2 tiles */

#ifdef HAVE_AMX_CODE

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* AMX-TILE and AMX-BF16 in cpuid, the tile state enabled by the OS in XCR0, and Linux's
 * permission for this process to use tile data (granted once, for every thread). */
static bool amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE: xgetbv works */
        return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17))
        return false;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* The tile configuration: palette 1, eight 16 x 64-byte tiles. A static object, loaded by an
 * asm statement that names all 64 bytes (gcc 12's _tile_loadconfig names 8, so the compiler
 * dropped the stores to the rest and ldtilecfg faulted on garbage). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static const tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target("amx-tile"))) static void tiles_begin(void)
{
    __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

__attribute__((target("amx-tile"))) static void tiles_end(void) { _tile_release(); }

/* C block (32 x 32 float32, row stride 32) = two A tile rows x two B tile columns over nkb
 * steps of 32 k. a0/a1: the two A row blocks' tiles (nkb each, consecutive), b0/b1 the B's. */
__attribute__((target("amx-tile,amx-bf16"))) static void block_product(const uint16_t *a0,
                                                                       const uint16_t *a1,
                                                                       const uint16_t *b0,
                                                                       const uint16_t *b1,
                                                                       int64_t nkb, float *c)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t kb = 0; kb < nkb; kb++) {
        _tile_loadd(4, a0 + kb * TILE_ELEMS, 64);
        _tile_loadd(5, a1 + kb * TILE_ELEMS, 64);
        _tile_loadd(6, b0 + kb * TILE_ELEMS, 64);
        _tile_loadd(7, b1 + kb * TILE_ELEMS, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, BLOCK * 4);
    _tile_stored(1, c + 16, BLOCK * 4);
    _tile_stored(2, c + 16 * BLOCK, BLOCK * 4);
    _tile_stored(3, c + 16 * BLOCK + 16, BLOCK * 4);
}

/* The same block with AVX512_BF16's VDPBF16PS (CPUs without AMX): eight rows of C at a time
 * in 16 accumulators (two vectors of 16 columns each); per pair of k, a row's two A values go
 * out as one 32-bit broadcast against a packed B tile row. Tiles as block_product's. */
__attribute__((target("avx512f,avx512bf16"))) static void block_dot(const uint16_t *a0,
                                                                  const uint16_t *a1,
                                                                  const uint16_t *b0,
                                                                  const uint16_t *b1,
                                                                  int64_t nkb, float *c)
{
    /* the 16 accumulators are named, not an array: gcc kept an array in memory */
#define DOT_ROW(r)                                                                                 \
    {                                                                                              \
        int32_t pair;                                                                              \
        memcpy(&pair, ak + (r) * TILE_K + 2 * p, sizeof pair);                                     \
        __m512bh av = (__m512bh)_mm512_set1_epi32(pair);                                           \
        s##r##0 = _mm512_dpbf16_ps(s##r##0, av, v0);                                               \
        s##r##1 = _mm512_dpbf16_ps(s##r##1, av, v1);                                               \
    }
#define DOT_STORE(r)                                                                               \
    _mm512_storeu_ps(c + (r0 + (r)) * BLOCK, s##r##0);                                             \
    _mm512_storeu_ps(c + (r0 + (r)) * BLOCK + 16, s##r##1);
    for (int r0 = 0; r0 < BLOCK; r0 += 8) {
        const uint16_t *a = (r0 < TILE_ROWS ? a0 : a1) + (r0 % TILE_ROWS) * TILE_K;
        __m512 s00 = _mm512_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00,
               s30 = s00, s31 = s00, s40 = s00, s41 = s00, s50 = s00, s51 = s00, s60 = s00,
               s61 = s00, s70 = s00, s71 = s00;
        for (int64_t kb = 0; kb < nkb; kb++) {
            const uint16_t *ak = a + kb * TILE_ELEMS;
            const uint16_t *bk0 = b0 + kb * TILE_ELEMS, *bk1 = b1 + kb * TILE_ELEMS;
            for (int p = 0; p < TILE_ROWS; p++) {
                __m512bh v0 = (__m512bh)_mm512_loadu_si512(bk0 + p * 32);
                __m512bh v1 = (__m512bh)_mm512_loadu_si512(bk1 + p * 32);
                DOT_ROW(0) DOT_ROW(1) DOT_ROW(2) DOT_ROW(3)
                DOT_ROW(4) DOT_ROW(5) DOT_ROW(6) DOT_ROW(7)
            }
        }
        DOT_STORE(0) DOT_STORE(1) DOT_STORE(2) DOT_STORE(3)
        DOT_STORE(4) DOT_STORE(5) DOT_STORE(6) DOT_STORE(7)
    }
#undef DOT_ROW
#undef DOT_STORE
}

/* AVX512_BF16 in cpuid (leaf 7, subleaf 1) beside the avx512 tier's AVX-512. */
static bool avx512_bf16(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

#endif /* HAVE_AMX_CODE */

/* The best path this CPU has at the avx512 tier, capped by TIDE_CPU_BF16=amx|dot|dot-forced|off
 * (asks for less, to compare, never for more; "dot" is measured as on a CPU without AMX,
 * "dot-forced" is not: the tests run that kernel). */
static td_bf16_path detect_path(void)
{
    td_bf16_path best = TD_BF16_WIDEN;
#ifdef HAVE_AMX_CODE
    if (td_cpu_isa() == TD_ISA_AVX512 && avx512_bf16())
        best = TD_BF16_DOT;
    if (td_cpu_isa() == TD_ISA_AVX512 && amx_usable())
        best = TD_BF16_TILES;
#endif
    const char *want = getenv("TIDE_CPU_BF16");
    td_bf16_path cap = !want                                                           ? best
                       : strcmp(want, "dot") == 0 || strcmp(want, "dot-forced") == 0 ? TD_BF16_DOT
                       : strcmp(want, "off") == 0                                     ? TD_BF16_WIDEN
                                                                                      : best;
    return cap < best ? cap : best;
}

static td_bf16_path chosen_path;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;
static bool dot_beats_widening(void);

static void choose_path(void)
{
    td_bf16_path p = detect_path();
    const char *want = getenv("TIDE_CPU_BF16");
    bool forced = want && strcmp(want, "dot-forced") == 0;
    if (p == TD_BF16_DOT && !forced && !dot_beats_widening())
        p = TD_BF16_WIDEN;
    chosen_path = p;
    td_log("blas", "bfloat16 products: %s", td_cpu_bf16_path_name(p));
}

td_bf16_path td_cpu_bf16_path(void)
{
    pthread_once(&chosen_once, choose_path);
    return chosen_path;
}

const char *td_cpu_bf16_path_name(td_bf16_path path)
{
    switch (path) {
    case TD_BF16_TILES: return "AMX tiles";
    case TD_BF16_DOT: return "AVX512_BF16 dot products";
    default: return "float32 between casts";
    }
}

/* ---- packing ---------------------------------------------------------------------------------- */

typedef struct bf16_job {
    int64_t m, n, k, nkb;     /* nkb: tiles of 32 along k */
    int64_t mblocks, nblocks; /* 32-row and 32-column blocks of C */
    const uint16_t *a, *b;
    int64_t ars, acs, brs, bcs;
    uint16_t *ap, *bp; /* packed: [16-row block][kb] tiles, [16-column block][kb] tiles */
    uint16_t *c;
    bool tiles; /* AMX tiles, else AVX512_BF16 dot products */
} bf16_job;

/* A's 16-row blocks [begin, end): tile (block, kb) holds rows block*16.. and k kb*32.. */
static void pack_a(void *ctx, int64_t begin, int64_t end)
{
    const bf16_job *j = ctx;
    for (int64_t blk = begin; blk < end; blk++)
        for (int64_t kb = 0; kb < j->nkb; kb++) {
            uint16_t *t = j->ap + (blk * j->nkb + kb) * TILE_ELEMS;
            for (int64_t r = 0; r < TILE_ROWS; r++) {
                int64_t row = blk * TILE_ROWS + r, k0 = kb * TILE_K;
                int64_t len = row >= j->m ? 0 : j->k - k0 < TILE_K ? j->k - k0 : TILE_K;
                if (len > 0 && j->acs == 1)
                    memcpy(t + r * TILE_K, j->a + row * j->ars + k0, (size_t)len * 2);
                for (int64_t q = 0; j->acs != 1 && q < len; q++)
                    t[r * TILE_K + q] = j->a[row * j->ars + (k0 + q) * j->acs];
                memset(t + r * TILE_K + len, 0, (size_t)(TILE_K - len) * 2);
            }
        }
}

/* A whole B tile from row-major B (bcs 1): two rows of 16 interleaved per tile row. */
static void pack_b_rows(const bf16_job *j, uint16_t *t, int64_t k0, int64_t n0)
{
    for (int64_t p = 0; p < TILE_ROWS; p++) {
        const uint16_t *r0 = j->b + (k0 + 2 * p) * j->brs + n0, *r1 = r0 + j->brs;
        for (int col = 0; col < 16; col++) {
            t[p * 32 + 2 * col] = r0[col];
            t[p * 32 + 2 * col + 1] = r1[col];
        }
    }
}

/* A whole B tile from column-major B (brs 1, a transposed [n, k] matrix): each column's two
 * k are adjacent, one 32-bit move. */
static void pack_b_cols(const bf16_job *j, uint16_t *t, int64_t k0, int64_t n0)
{
    for (int col = 0; col < 16; col++) {
        const uint16_t *c = j->b + (n0 + col) * j->bcs + k0;
        for (int64_t p = 0; p < TILE_ROWS; p++)
            memcpy(t + p * 32 + 2 * col, c + 2 * p, 4);
    }
}

/* B's 16-column blocks [begin, end): tile (block, kb) row p holds k = kb*32 + 2p and the next
 * for each of the 16 columns, interleaved (column c at 2c and 2c + 1). Whole tiles of the two
 * usual layouts take the fast paths above (element by element, packing was a third of a
 * 1024² product). */
static void pack_b(void *ctx, int64_t begin, int64_t end)
{
    const bf16_job *j = ctx;
    for (int64_t blk = begin; blk < end; blk++)
        for (int64_t kb = 0; kb < j->nkb; kb++) {
            uint16_t *t = j->bp + (blk * j->nkb + kb) * TILE_ELEMS;
            bool whole = (blk + 1) * 16 <= j->n && (kb + 1) * TILE_K <= j->k;
            if (whole && j->bcs == 1) {
                pack_b_rows(j, t, kb * TILE_K, blk * 16);
                continue;
            }
            if (whole && j->brs == 1) {
                pack_b_cols(j, t, kb * TILE_K, blk * 16);
                continue;
            }
            for (int64_t p = 0; p < TILE_ROWS; p++)
                for (int64_t col = 0; col < 16; col++) {
                    int64_t nn = blk * 16 + col, k0 = kb * TILE_K + 2 * p;
                    bool in = nn < j->n;
                    t[p * 32 + 2 * col] = in && k0 < j->k ? j->b[k0 * j->brs + nn * j->bcs] : 0;
                    t[p * 32 + 2 * col + 1] =
                        in && k0 + 1 < j->k ? j->b[(k0 + 1) * j->brs + nn * j->bcs] : 0;
                }
        }
}

/* ---- the product ------------------------------------------------------------------------------ */

/* C blocks [begin, end), numbered row block by row block (consecutive tasks share A's). */
static void compute_blocks(void *ctx, int64_t begin, int64_t end)
{
#ifdef HAVE_AMX_CODE
    const bf16_job *j = ctx;
    const td_half_kernels *h = td_half_kernels_current();
    float acc[BLOCK * BLOCK] __attribute__((aligned(64)));
    bool tiles = j->tiles;
    if (tiles)
        tiles_begin();
    for (int64_t t = begin; t < end; t++) {
        int64_t mb = t / j->nblocks, nb = t % j->nblocks;
        const uint16_t *a0 = j->ap + (2 * mb) * j->nkb * TILE_ELEMS;
        const uint16_t *b0 = j->bp + (2 * nb) * j->nkb * TILE_ELEMS;
        (tiles ? block_product : block_dot)(a0, a0 + j->nkb * TILE_ELEMS, b0,
                                            b0 + j->nkb * TILE_ELEMS, j->nkb, acc);
        int64_t r0 = mb * BLOCK, c0 = nb * BLOCK;
        int64_t rows = j->m - r0 < BLOCK ? j->m - r0 : BLOCK;
        int64_t cols = j->n - c0 < BLOCK ? j->n - c0 : BLOCK;
        for (int64_t r = 0; r < rows; r++)
            h->f32_to_bf16(cols, j->c + (r0 + r) * j->n + c0, acc + r * BLOCK);
    }
    if (tiles)
        tiles_end();
#else
    (void)ctx, (void)begin, (void)end;
#endif
}

/* Packs and multiplies: over tide's threads, or on this one (the calibration below). */
static int run_product(bf16_job *j, bool threads)
{
    j->nkb = (j->k + TILE_K - 1) / TILE_K;
    j->mblocks = (j->m + BLOCK - 1) / BLOCK;
    j->nblocks = (j->n + BLOCK - 1) / BLOCK;
    size_t abytes = (size_t)(j->mblocks * BLOCK * j->nkb * TILE_K) * 2;
    size_t bbytes = (size_t)(j->nblocks * BLOCK * j->nkb * TILE_K) * 2;
    j->ap = td_malloc(abytes);
    j->bp = td_malloc(bbytes);
    if (!j->ap || !j->bp) {
        free(j->ap);
        free(j->bp);
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY,
                             "matmul: out of memory packing a [%lld, %lld] x [%lld, %lld] "
                             "bfloat16 product",
                             (long long)j->m, (long long)j->k, (long long)j->k, (long long)j->n);
    }
    /* about 64K elements per packing task, 1M multiply-adds per product task */
    int64_t per_block = j->nkb * TILE_ELEMS;
    int64_t pack_grain = 65536 / per_block > 0 ? 65536 / per_block : 1;
    int64_t macs = BLOCK * BLOCK * j->nkb * TILE_K;
    int64_t grain = (1 << 20) / macs > 0 ? (1 << 20) / macs : 1;
    if (threads) {
        td_parallel_for(j->mblocks * 2, pack_grain, pack_a, j);
        td_parallel_for(j->nblocks * 2, pack_grain, pack_b, j);
        td_parallel_for(j->mblocks * j->nblocks, grain, compute_blocks, j);
    } else {
        pack_a(j, 0, j->mblocks * 2);
        pack_b(j, 0, j->nblocks * 2);
        compute_blocks(j, 0, j->mblocks * j->nblocks);
    }
    free(j->ap);
    free(j->bp);
    return 0;
}

int td_cpu_bf16_product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                        int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs, uint16_t *c)
{
    td_bf16_path path = td_cpu_bf16_path();
    if (path == TD_BF16_WIDEN)
        return td_error("matmul: no bfloat16 product kernel on this CPU (the dispatcher widens)");
    bf16_job j = {.m = m, .n = n, .k = k, .a = a, .b = b, .c = c,
                  .ars = ars, .acs = acs, .brs = brs, .bcs = bcs, .tiles = path == TD_BF16_TILES};
    return run_product(&j, true);
}

/* ---- which path: features, then a measurement ------------------------------------------------ */

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Where the best kernel the CPU has is the dot products (AVX512_BF16 without AMX): whether they
 * beat float32 between casts here, timed on this thread, best of three, on a [96, 384] x
 * [384, 192] product each way (conversions and sgemm as the dispatcher's widened path runs
 * them). They must win by 10%, so a near tie keeps the widened path and a CPU makes the same
 * choice run after run. On an AMX machine asked for the dot products they ran 0.6x the
 * widened path (bench_half), so the choice cannot rest on the features alone. */
static bool dot_beats_widening(void)
{
    enum { M = 96, K = 384, N = 192 };
    uint16_t *a = td_malloc(sizeof *a * M * K), *b = td_malloc(sizeof *b * K * N);
    uint16_t *c = td_malloc(sizeof *c * M * N);
    float *fa = td_malloc(sizeof *fa * M * K), *fb = td_malloc(sizeof *fb * K * N);
    float *fc = td_malloc(sizeof *fc * M * N);
    bool dot = true; /* without memory or BLAS to compare, the kernel that needs neither */
    if (a && b && c && fa && fb && fc && td_blas_ready("matmul") == 0) {
        const td_half_kernels *h = td_half_kernels_current();
        for (int i = 0; i < M * K; i++)
            a[i] = (uint16_t)(0x3f80 + i % 61);
        for (int i = 0; i < K * N; i++)
            b[i] = (uint16_t)(0xbf80 + i % 53);
        double t_dot = 1e30, t_wide = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = seconds();
            bf16_job j = {.m = M, .n = N, .k = K, .a = a, .b = b, .c = c,
                          .ars = K, .acs = 1, .brs = N, .bcs = 1};
            if (run_product(&j, false) < 0)
                break;
            double t1 = seconds();
            h->bf16_to_f32(M * K, fa, a);
            h->bf16_to_f32(K * N, fb, b);
            td_blas_sgemm(false, false, M, N, K, 1.0f, fa, K, fb, N, 0.0f, fc, N);
            h->f32_to_bf16(M * N, c, fc);
            double t2 = seconds();
            t_dot = t1 - t0 < t_dot ? t1 - t0 : t_dot;
            t_wide = t2 - t1 < t_wide ? t2 - t1 : t_wide;
        }
        dot = t_dot < 0.9 * t_wide;
        td_log("blas", "bfloat16 products: AVX512_BF16 dot products %.1f us, float32 between "
               "casts %.1f us on a [%d, %d] x [%d, %d] product: %s", t_dot * 1e6, t_wide * 1e6,
               M, K, K, N, dot ? "dot products" : "float32 between casts");
    }
    free(a), free(b), free(c), free(fa), free(fb), free(fc);
    return dot;
}
