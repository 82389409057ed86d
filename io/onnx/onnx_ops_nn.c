/*
 * onnx_ops_nn.c — ONNX's neural-network ops: MatMul, Gemm (C broadcast numpy-style, which also
 * covers the `broadcast` attribute before opset 7), PRelu, Dropout (inference: the identity and
 * an all-true mask).
 */
#include <stdio.h>

#include "onnx_ops_move.h"

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

/* PRelu: x where x >= 0, else slope * x. Before opset 7 a 1-D slope of C values is per channel
 * (dim 1); from 7 it broadcasts numpy-style. */
static int run_prelu(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *slope = c->in[1];
    tide_tensor *s = NULL;
    int rank = tide_ndim(x);
    if (c->m->opset < 7 && tide_ndim(slope) == 1 && rank > 2 &&
        tide_shape(slope)[0] == tide_shape(x)[1] && tide_shape(slope)[0] != 1) {
        int64_t shape[8];
        for (int i = 0; i < rank - 1; i++)
            shape[i] = i == 0 ? -1 : 1;
        s = tide_reshape(slope, rank - 1, shape);
    } else {
        s = tide_retain((tide_tensor *)slope);
    }
    tide_tensor *zero = s ? tide_zeros_on(tide_device_name(x), 0, NULL, tide_get_dtype(x)) : NULL;
    tide_tensor *neg = zero ? tide_lt(x, zero) : NULL;
    tide_tensor *scaled = neg ? tide_mul(x, s) : NULL;
    tide_tensor *y = scaled ? tide_where(neg, scaled, x) : NULL;
    tide_tensor *tmp[] = {s, zero, neg, scaled};
    onnx_release_all(tmp, 4);
    return onnx_set(c, y);
}

/* Inference only: is_test 0 before opset 7 and any training_mode input (12 on) are training. */
static int check_dropout(const onnx_node *n, char *why, size_t size)
{
    if (onnx_attr(n, "is_test") && onnx_attr_int(n, "is_test", 0) == 0) {
        snprintf(why, size, "is_test 0 (training)");
        return 1;
    }
    if (n->p->n_input > 2 && n->p->input[2][0]) {
        snprintf(why, size, "a training_mode input (training is random)");
        return 1;
    }
    return 0;
}

/* Y = X; the mask (bool from opset 10, X's dtype before) is all true. */
static int run_dropout(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    c->out[0] = tide_retain((tide_tensor *)x);
    if (c->nout > 1 && c->node->out[1] >= 0) {
        tide_dtype dt = c->m->opset >= 10 ? TIDE_BOOL : tide_get_dtype(x);
        c->out[1] = tide_ones_on(tide_device_name(x), tide_ndim(x), tide_shape(x), dt);
        if (!c->out[1])
            return onnx_fail(c);
    }
    return 0;
}

const onnx_op onnx_ops_nn[] = {
    {"MatMul", 1, 0, 2, 2, NULL, run_matmul, false},
    {"Gemm", 1, 0, 2, 3, NULL, run_gemm, false},
    {"PRelu", 6, 0, 2, 2, NULL, run_prelu, 0},
    {"Dropout", 6, 0, 1, 3, check_dropout, run_dropout, 0},
    {0},
};
