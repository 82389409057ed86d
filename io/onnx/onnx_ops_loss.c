/*
 * onnx_ops_loss.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_loss[] = {
    {0},
};
