/* cpu_matmul_bf16.h — bfloat16 products on AMX tiles or AVX512_BF16 (cpu_matmul_bf16.c). */
#ifndef TIDE_CPU_MATMUL_BF16_H
#define TIDE_CPU_MATMUL_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* How this process multiplies bfloat16 matrices, decided once: AMX tiles (the avx512 tier,
 * AMX-TILE and AMX-BF16, and the OS's permission), else AVX512_BF16 dot products (the avx512
 * tier and AVX512_BF16, where they beat the widened path when measured once), else float32
 * between casts (the dispatcher widens). TIDE_CPU_BF16=dot, dot-forced (unmeasured) or off caps
 * it. */
typedef enum td_bf16_path { TD_BF16_WIDEN = 0, TD_BF16_DOT = 1, TD_BF16_TILES = 2 } td_bf16_path;
td_bf16_path td_cpu_bf16_path(void);
const char *td_cpu_bf16_path_name(td_bf16_path path);
/* Whether a bfloat16 product runs on one of the kernels below (not widened). */
static inline bool td_cpu_bf16_native(void) { return td_cpu_bf16_path() != TD_BF16_WIDEN; }

/* C [m, n] (row-major bfloat16) = A [m, k] B [k, n], element strides (ars, acs) and (brs, bcs);
 * float32 sums rounded once. Spread over tide's threads. 0, or -1 with the error set. */
int td_cpu_bf16_product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                        int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs, uint16_t *c);

#endif
