/*
 * vk_opcodes.h — numbers shared by the C side and the GLSL shaders (included by both, so only
 * #defines): the elementwise op codes and the dtype codes the shaders understand.
 */
#ifndef TIDE_VK_OPCODES_H
#define TIDE_VK_OPCODES_H

/* dtypes as stored: the shaders see every buffer as 32-bit words */
#define VK_DT_F32 0u
#define VK_DT_I32 1u
#define VK_DT_U8 2u
#define VK_DT_BOOL 3u
#define VK_DT_I64 4u /* two words, low first (eltwise64 only) */
#define VK_DT_F64 5u
#define VK_DT_F16 6u  /* 16-bit elements (eltwise16 only, through 16-bit storage buffers) */
#define VK_DT_BF16 7u

/* unary */
#define VK_OP_NEG 0u
#define VK_OP_ABS 1u
#define VK_OP_EXP 2u
#define VK_OP_LOG 3u
#define VK_OP_SQRT 4u
#define VK_OP_RSQRT 5u
#define VK_OP_SIN 6u
#define VK_OP_COS 7u
#define VK_OP_TANH 8u
#define VK_OP_SIGMOID 9u
#define VK_OP_RELU 10u
#define VK_OP_FLOOR 11u
#define VK_OP_CEIL 12u
#define VK_OP_ROUND 13u
#define VK_OP_SIGN 14u
#define VK_OP_RECIPROCAL 15u
#define VK_OP_NOT 16u
#define VK_OP_ERF 17u
#define VK_OP_LOG1P 18u
#define VK_OP_EXPM1 19u
#define VK_OP_LOG2 20u
#define VK_OP_TAN 21u
#define VK_OP_ASIN 22u
#define VK_OP_ACOS 23u
#define VK_OP_ATAN 24u
#define VK_OP_SINH 25u
#define VK_OP_COSH 26u
#define VK_OP_TRUNC 27u
#define VK_OP_GELU 28u
/* binary */
#define VK_OP_ADD 32u
#define VK_OP_SUB 33u
#define VK_OP_MUL 34u
#define VK_OP_DIV 35u
#define VK_OP_POW 36u
#define VK_OP_MAXIMUM 37u
#define VK_OP_MINIMUM 38u
#define VK_OP_EQ 39u
#define VK_OP_NE 40u
#define VK_OP_LT 41u
#define VK_OP_LE 42u
#define VK_OP_GT 43u
#define VK_OP_GE 44u
#define VK_OP_AND 45u
#define VK_OP_OR 46u
#define VK_OP_FLOORDIV 47u
#define VK_OP_REMAINDER 48u
#define VK_OP_ATAN2 49u
#define VK_OP_FMOD 50u
/* others */
#define VK_OP_WHERE 64u
#define VK_OP_CAST 65u /* also COPY: load, convert, store */
#define VK_OP_FILL 66u /* store the bit pattern in the parameters */

/* reductions */
#define VK_RED_SUM 0u
#define VK_RED_PROD 1u
#define VK_RED_MAX 2u
#define VK_RED_MIN 3u
#define VK_RED_ARGMAX 4u
#define VK_RED_ARGMIN 5u

#endif
