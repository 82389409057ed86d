/*
 * cpu_quant.h — the per-tier kernels of quantized products (cpu_quant_isa.c, compiled per tier
 * as cpu_isa.h says; cpu_quant.c drives them). Numerics (core/quant.h): activations become int8
 * blocks with float32 scales, bitwise the same on every tier; a block's product is an exact
 * integer sum times (weight scale * activation scale) rounded to float32; the blocks' terms
 * are added in float32, in an order that depends on the tier (baseline: one after another;
 * avx2: eight lanes per row, fused multiply-adds, summed at the end; avx512: sixteen lanes,
 * two blocks at a time, an odd last block through eight lanes).
 */
#ifndef TIDE_CPU_QUANT_H
#define TIDE_CPU_QUANT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct td_quant_kernels {
    /* nb blocks of 32 float32 x -> int8 q and scales d (core/quant.h's td_qact_block). */
    void (*quantize_act)(int64_t nb, const float *x, int8_t *q, float *d);
    /* The dot product of one weight row (nb blocks of format q8_0 / q4_0) with quantized
     * activations (q, d as quantize_act wrote them). */
    float (*dot[2])(int64_t nb, const uint8_t *w, const int8_t *q, const float *d);
    /* Four rows (row_bytes apart) at once into out[4]: each equal to dot's result bitwise. */
    void (*dot4[2])(int64_t nb, const uint8_t *w, int64_t row_bytes, const int8_t *q,
                    const float *d, float *out);
} td_quant_kernels;

extern const td_quant_kernels td_quant_kernels_baseline;
extern const td_quant_kernels td_quant_kernels_avx2;
extern const td_quant_kernels td_quant_kernels_avx512;
/* The avx512 tier's kernels with VNNI's dpbusd (the same bits; CMakeLists.txt compiles them). */
extern const td_quant_kernels td_quant_kernels_avx512_vnni;

/* The table of the tier this process runs (td_cpu_isa()): at the avx512 tier, VNNI's where
 * the CPU has it. */
const td_quant_kernels *td_quant_kernels_current(void);
/* Whether this CPU has AVX512_VNNI, and TIDE_CPU_VNNI is not 0 (read once). */
bool td_quant_vnni(void);

#endif
