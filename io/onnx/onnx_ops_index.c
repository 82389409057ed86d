/*
 * onnx_ops_index.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_index[] = {
    {0},
};
