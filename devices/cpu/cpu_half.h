/*
 * cpu_half.h — contiguous conversions between float32 and the 16-bit floats (float16,
 * bfloat16), one table per vector tier (cpu_half_isa.c, compiled per tier as cpu_isa.h says).
 * Every table gives the bits core/half.h's scalar conversions give: round to nearest even,
 * overflow to infinity, NaN quiet with its sign and top payload bits (tests/test_half_cast.c).
 * The copy kernels (cpu_copy.c) and the jit's casts (cpu_jit_helpers.c) use the current table.
 */
#ifndef TIDE_CPU_HALF_H
#define TIDE_CPU_HALF_H

#include <stdint.h>

typedef struct td_half_kernels {
    void (*f16_to_f32)(int64_t n, float *dst, const uint16_t *src);
    void (*f32_to_f16)(int64_t n, uint16_t *dst, const float *src);
    void (*bf16_to_f32)(int64_t n, float *dst, const uint16_t *src);
    void (*f32_to_bf16)(int64_t n, uint16_t *dst, const float *src);
} td_half_kernels;

extern const td_half_kernels td_half_kernels_baseline;
extern const td_half_kernels td_half_kernels_avx2;
extern const td_half_kernels td_half_kernels_avx512;

/* The table of the tier this process runs (td_cpu_isa()). */
const td_half_kernels *td_half_kernels_current(void);

#endif
