/*
 * onnx_table.c — the importer's one op table: the families' lists (onnx_ops_*.c) searched in
 * order. An op appears once per range of opsets whose semantics its handler implements; a model
 * whose ops are all here (at its opset, with attributes the entry's check accepts) is supported.
 */
#include <string.h>

#include "onnx_internal.h"

static const onnx_op *const families[] = {
    onnx_ops_elementwise, onnx_ops_activation, onnx_ops_shape, onnx_ops_index, onnx_ops_reduce,
    onnx_ops_loss,        onnx_ops_nn,         onnx_ops_conv,  onnx_ops_rnn,   onnx_ops_quant, onnx_ops_pool, onnx_ops_norm, onnx_ops_resize,
};

const onnx_op *onnx_find_op(const char *op_type, int opset)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const onnx_op *op = families[f]; op->name; op++)
            if (!strcmp(op->name, op_type) && opset >= op->since &&
                (op->until == 0 || opset <= op->until))
                return op;
    return NULL;
}

void onnx_each_op(void (*fn)(const onnx_op *op, void *ctx), void *ctx)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const onnx_op *op = families[f]; op->name; op++)
            fn(op, ctx);
}

int td_onnx_op_entry(int i, const char **name, int *since, int *until)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const onnx_op *op = families[f]; op->name; op++)
            if (i-- == 0) {
                *name = op->name;
                *since = op->since;
                *until = op->until;
                return 0;
            }
    return -1;
}
