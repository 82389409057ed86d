/*
 * linear_half.h — float32 activations times a float16/bfloat16 weight without a float32 copy of
 * the weight: the LINEAR_HALF primitive (linear_half.c). matmul routes its 2-D products with a
 * float32 left operand and a half right operand here (linear reaches it through matmul).
 */
#ifndef TIDE_OPS_LINEAR_HALF_H
#define TIDE_OPS_LINEAR_HALF_H

#include "dispatch.h"

/* Whether a @ b is a product LINEAR_HALF computes: a float32 [M, K] or [K], b float16 or
 * bfloat16 [K, N] (a linear's weight^T, or any [K, N] layout). */
bool td_is_half_weight_product(const tide_tensor *a, const tide_tensor *b);

/* a @ b for such operands (checked by matmul), float32 [M, N] or [N]. */
tide_tensor *td_matmul_half_weight(const tide_tensor *a, const tide_tensor *b);

#endif
