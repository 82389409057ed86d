/*
 * onnx_ops_rnn.c — (being written)
 */
#include "onnx_internal.h"

const onnx_op onnx_ops_rnn[] = {
    {0},
};
