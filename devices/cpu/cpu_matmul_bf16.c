/*
 * cpu_matmul_bf16.c — bfloat16 products on Intel AMX tiles (TDPBF16PS), where the CPU has them
 * and the process runs the avx512 tier. Elsewhere the dispatcher widens a bfloat16 matmul to
 * float32 and OpenBLAS's sgemm (no sbgemm in Debian's 0.3.21).
 *
 * One product C [m, n] = A [m, k] B [k, n], any element strides, C row-major bfloat16:
 *   - A is packed into 16 x 32 tiles (16 rows, 32 k), B into 32 x 16 tiles in the pair-
 *     interleaved layout the instruction reads (a tile row holds k = 2p and 2p + 1 for 16
 *     columns); both zero-padded to whole tiles, both packed in parallel;
 *   - each task computes a 32 x 32 block of C in four float32 tiles (2 x 2: two A tiles and
 *     two B tiles feed four products per 32 k), then rounds it once to bfloat16 with the same
 *     conversion as tide_cast.
 * Every element of C is one task's sum over k in one order, so a row's bits depend neither on
 * the thread count nor on how a caller cuts the rows (the jit's plans equal eager). TDPBF16PS
 * products of two bfloat16 are exact in float32; it treats subnormal operands as zero and
 * flushes subnormal sums, as the instruction is defined.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

#endif /* HAVE_AMX_CODE */

bool td_cpu_bf16_tiles(void)
{
    static int usable = -1; /* benign race: every thread computes the same value */
    int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);
    if (u < 0) {
#ifdef HAVE_AMX_CODE
        u = td_cpu_isa() == TD_ISA_AVX512 && amx_usable();
#else
        u = 0;
#endif
        __atomic_store_n(&usable, u, __ATOMIC_RELAXED);
    }
    return u != 0;
}

/* ---- packing ---------------------------------------------------------------------------------- */

typedef struct bf16_job {
    int64_t m, n, k, nkb;     /* nkb: tiles of 32 along k */
    int64_t mblocks, nblocks; /* 32-row and 32-column blocks of C */
    const uint16_t *a, *b;
    int64_t ars, acs, brs, bcs;
    uint16_t *ap, *bp; /* packed: [16-row block][kb] tiles, [16-column block][kb] tiles */
    uint16_t *c;
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
                const uint16_t *src = j->a + row * j->ars + k0 * j->acs;
                if (j->acs == 1) {
                    if (len > 0)
                        memcpy(t + r * TILE_K, src, (size_t)len * 2);
                } else {
                    for (int64_t q = 0; q < len; q++)
                        t[r * TILE_K + q] = src[q * j->acs];
                }
                memset(t + r * TILE_K + len, 0, (size_t)(TILE_K - len) * 2);
            }
        }
}

/* B's 16-column blocks [begin, end): tile (block, kb) row p holds k = kb*32 + 2p and the next
 * for each of the 16 columns, interleaved (column c at 2c and 2c + 1). */
static void pack_b(void *ctx, int64_t begin, int64_t end)
{
    const bf16_job *j = ctx;
    for (int64_t blk = begin; blk < end; blk++)
        for (int64_t kb = 0; kb < j->nkb; kb++) {
            uint16_t *t = j->bp + (blk * j->nkb + kb) * TILE_ELEMS;
            for (int64_t p = 0; p < TILE_ROWS; p++)
                for (int64_t col = 0; col < 16; col++) {
                    int64_t nn = blk * 16 + col, k0 = kb * TILE_K + 2 * p;
                    const uint16_t *src = j->b + k0 * j->brs + nn * j->bcs;
                    bool in = nn < j->n;
                    t[p * 32 + 2 * col] = in && k0 < j->k ? src[0] : 0;
                    t[p * 32 + 2 * col + 1] = in && k0 + 1 < j->k ? src[j->brs] : 0;
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
    tiles_begin();
    for (int64_t t = begin; t < end; t++) {
        int64_t mb = t / j->nblocks, nb = t % j->nblocks;
        const uint16_t *a0 = j->ap + (2 * mb) * j->nkb * TILE_ELEMS;
        const uint16_t *b0 = j->bp + (2 * nb) * j->nkb * TILE_ELEMS;
        block_product(a0, a0 + j->nkb * TILE_ELEMS, b0, b0 + j->nkb * TILE_ELEMS, j->nkb, acc);
        int64_t r0 = mb * BLOCK, c0 = nb * BLOCK;
        int64_t rows = j->m - r0 < BLOCK ? j->m - r0 : BLOCK;
        int64_t cols = j->n - c0 < BLOCK ? j->n - c0 : BLOCK;
        for (int64_t r = 0; r < rows; r++)
            h->f32_to_bf16(cols, j->c + (r0 + r) * j->n + c0, acc + r * BLOCK);
    }
    tiles_end();
#else
    (void)ctx, (void)begin, (void)end;
#endif
}

int td_cpu_bf16_product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                        int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs, uint16_t *c)
{
    if (!td_cpu_bf16_tiles())
        return td_error("matmul: no bfloat16 tile kernel on this CPU (the dispatcher widens)");
    bf16_job j = {.m = m, .n = n, .k = k, .a = a, .b = b, .c = c,
                  .ars = ars, .acs = acs, .brs = brs, .bcs = bcs};
    j.nkb = (k + TILE_K - 1) / TILE_K;
    j.mblocks = (m + BLOCK - 1) / BLOCK;
    j.nblocks = (n + BLOCK - 1) / BLOCK;
    size_t abytes = (size_t)(j.mblocks * BLOCK * j.nkb * TILE_K) * 2;
    size_t bbytes = (size_t)(j.nblocks * BLOCK * j.nkb * TILE_K) * 2;
    j.ap = td_malloc(abytes);
    j.bp = td_malloc(bbytes);
    if (!j.ap || !j.bp) {
        free(j.ap);
        free(j.bp);
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY,
                             "matmul: out of memory packing a [%lld, %lld] x [%lld, %lld] "
                             "bfloat16 product",
                             (long long)m, (long long)k, (long long)k, (long long)n);
    }
    /* about 64K elements per packing task, 1M multiply-adds per product task */
    int64_t per_block = j.nkb * TILE_ELEMS;
    int64_t pack_grain = 65536 / per_block > 0 ? 65536 / per_block : 1;
    td_parallel_for(j.mblocks * 2, pack_grain, pack_a, &j);
    td_parallel_for(j.nblocks * 2, pack_grain, pack_b, &j);
    int64_t macs = BLOCK * BLOCK * j.nkb * TILE_K;
    int64_t grain = (1 << 20) / macs > 0 ? (1 << 20) / macs : 1;
    td_parallel_for(j.mblocks * j.nblocks, grain, compute_blocks, &j);
    free(j.ap);
    free(j.bp);
    return 0;
}
