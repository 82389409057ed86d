/*
 * onnx_ops_conv.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_conv[] = {
    {0},
};
