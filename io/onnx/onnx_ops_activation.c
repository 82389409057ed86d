/*
 * onnx_ops_activation.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_activation[] = {
    {0},
};
