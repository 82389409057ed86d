/*
 * onnx_ops_reduce.c — ONNX's reductions (ReduceSum & co., ArgMax/ArgMin) and the softmax family.
 */
#include "onnx_internal.h"

/* Softmax/LogSoftmax from opset 13: along one axis. (Before 13 they flatten at axis.) */
static int run_softmax(onnx_ctx *c)
{
    int axis;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", -1), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    return onnx_set(c, tide_softmax(c->in[0], axis));
}

static int run_log_softmax(onnx_ctx *c)
{
    int axis;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", -1), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    return onnx_set(c, tide_log_softmax(c->in[0], axis));
}

const onnx_op onnx_ops_reduce[] = {
    {"Softmax", 13, 0, 1, 1, NULL, run_softmax, false},
    {"LogSoftmax", 13, 0, 1, 1, NULL, run_log_softmax, false},
    {0},
};
