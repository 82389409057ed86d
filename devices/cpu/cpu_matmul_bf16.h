/* cpu_matmul_bf16.h — bfloat16 products on AMX tiles (cpu_matmul_bf16.c). */
#ifndef TIDE_CPU_MATMUL_BF16_H
#define TIDE_CPU_MATMUL_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* Whether bfloat16 products run on AMX tiles: the avx512 tier, AMX-TILE and AMX-BF16, and the
 * OS's permission for this process. Decided once. */
bool td_cpu_bf16_tiles(void);

/* C [m, n] (row-major bfloat16) = A [m, k] B [k, n], element strides (ars, acs) and (brs, bcs);
 * float32 sums rounded once. Spread over tide's threads. 0, or -1 with the error set. */
int td_cpu_bf16_product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                        int64_t acs, const uint16_t *b, int64_t brs, int64_t bcs, uint16_t *c);

#endif
