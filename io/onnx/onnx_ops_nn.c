/*
 * onnx_ops_nn.c — ONNX's neural-network ops: MatMul, Gemm.
 */
#include "onnx_internal.h"

static int run_matmul(onnx_ctx *c) { return onnx_set(c, tide_matmul(c->in[0], c->in[1])); }

/* Gemm: alpha * A' B' + beta * C, A' and B' transposed when transA/transB (2-D). */
static int run_gemm(onnx_ctx *c)
{
    const onnx_node *n = c->node;
    double alpha = onnx_attr_float(n, "alpha", 1.0f), beta = onnx_attr_float(n, "beta", 1.0f);
    if (tide_ndim(c->in[0]) != 2 || tide_ndim(c->in[1]) != 2)
        return onnx_error(c, "A and B must be 2-D; they have %d and %d dims",
                          tide_ndim(c->in[0]), tide_ndim(c->in[1]));
    tide_tensor *a = onnx_attr_int(n, "transA", 0) ? tide_transpose(c->in[0], 0, 1)
                                                    : tide_retain(c->in[0]);
    tide_tensor *b = onnx_attr_int(n, "transB", 0) ? tide_transpose(c->in[1], 0, 1)
                                                    : tide_retain(c->in[1]);
    tide_tensor *ab = a && b ? tide_matmul(a, b) : NULL;
    tide_tensor *scaled = ab && alpha != 1.0 ? tide_mul_scalar(ab, alpha) : tide_retain(ab);
    tide_tensor *out = scaled;
    if (scaled && c->nin > 2 && c->in[2]) {
        tide_tensor *bias = beta != 1.0 ? tide_mul_scalar(c->in[2], beta) : tide_retain(c->in[2]);
        out = bias ? tide_add(scaled, bias) : NULL;
        tide_release(bias);
        tide_release(scaled);
    }
    tide_release(a);
    tide_release(b);
    tide_release(ab);
    return onnx_set(c, out);
}

const onnx_op onnx_ops_nn[] = {
    {"MatMul", 1, 0, 2, 2, NULL, run_matmul, false},
    {"Gemm", 7, 0, 2, 3, NULL, run_gemm, false},
    {0},
};
