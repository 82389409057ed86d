/*
 * onnx_ops_quant.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_quant[] = {
    {0},
};
