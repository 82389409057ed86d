/*
 * onnx_build.h — writing small ONNX models from C tests with protobuf-c's generated structs
 * (the same onnx.proto the importer reads): nodes, initializers, typed inputs and outputs with
 * free dims. Everything is allocated from one arena freed by ob_free.
 */
#ifndef TIDE_ONNX_BUILD_H
#define TIDE_ONNX_BUILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

typedef struct ob_model {
    void *ptrs[512];
    int nptrs;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto *nodes[32];
    Onnx__TensorProto *inits[16];
    Onnx__ValueInfoProto *inputs[8], *outputs[8];
} ob_model;

static inline void *ob_alloc(ob_model *b, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p || b->nptrs == 512) {
        fprintf(stderr, "onnx_build: out of memory\n");
        exit(2);
    }
    b->ptrs[b->nptrs++] = p;
    return p;
}

static inline void ob_init(ob_model *b, int opset)
{
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = "";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.n_opset_import = 1;
    b->model.opset_import = b->opsets;
    b->graph.name = "test";
    b->model.graph = &b->graph;
    b->graph.node = b->nodes;
    b->graph.initializer = b->inits;
    b->graph.input = b->inputs;
    b->graph.output = b->outputs;
}

/* A node op(inputs) -> outputs; names are "|"-separated ("x|W"), "" for none. */
static inline char **ob_names(ob_model *b, const char *list, size_t *n)
{
    char *copy = ob_alloc(b, strlen(list) + 1);
    strcpy(copy, list);
    char **v = ob_alloc(b, sizeof *v * 16);
    *n = 0;
    if (!*copy)
        return v;
    for (char *s = copy;; s++) {
        v[(*n)++] = s;
        s = strchr(s, '|');
        if (!s)
            break;
        *s = 0;
    }
    return v;
}

static inline Onnx__NodeProto *ob_node(ob_model *b, const char *op, const char *ins, const char *outs)
{
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)op;
    n->input = ob_names(b, ins, &n->n_input);
    n->output = ob_names(b, outs, &n->n_output);
    n->attribute = ob_alloc(b, sizeof *n->attribute * 8);
    b->nodes[b->graph.n_node++] = n;
    return n;
}

static inline void ob_attr_ints(ob_model *b, Onnx__NodeProto *n, const char *name, const int64_t *v,
                         size_t count)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->ints = ob_alloc(b, sizeof *a->ints * count);
    memcpy(a->ints, v, sizeof *v * count);
    a->n_ints = count;
    n->attribute[n->n_attribute++] = a;
}

static inline void ob_attr_int(ob_model *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    n->attribute[n->n_attribute++] = a;
}

static inline void ob_attr_string(ob_model *b, Onnx__NodeProto *n, const char *name,
                                  const char *v)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_s = 1;
    a->s.data = (uint8_t *)v;
    a->s.len = strlen(v);
    n->attribute[n->n_attribute++] = a;
}

/* An initializer (or the tensor of a value) of float32 or int64 values. */
static inline Onnx__TensorProto *ob_tensor(ob_model *b, const char *name, int dtype, int ndim,
                                    const int64_t *shape, const void *data)
{
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->dims = ob_alloc(b, sizeof *t->dims * (size_t)(ndim + 1));
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)(t->dims[d] = shape[d]);
    t->n_dims = (size_t)ndim;
    size_t bytes = n * (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : 4);
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = ob_alloc(b, bytes);
    memcpy(t->raw_data.data, data, bytes);
    return t;
}

static inline Onnx__TensorProto *ob_init_tensor(ob_model *b, const char *name, int dtype, int ndim,
                                         const int64_t *shape, const void *data)
{
    Onnx__TensorProto *t = ob_tensor(b, name, dtype, ndim, shape, data);
    b->inits[b->graph.n_initializer++] = t;
    return t;
}

/* A typed value: dims >= 0 are fixed, -1 free with the name in dim_names[d]. */
static inline Onnx__ValueInfoProto *ob_value(ob_model *b, const char *name, int dtype, int ndim,
                                      const int64_t *shape, const char *const *dim_names)
{
    Onnx__ValueInfoProto *v = ob_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = (char *)name;
    Onnx__TypeProto *tp = ob_alloc(b, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = dtype;
    Onnx__TensorShapeProto *sp = ob_alloc(b, sizeof *sp);
    onnx__tensor_shape_proto__init(sp);
    sp->dim = ob_alloc(b, sizeof *sp->dim * (size_t)(ndim + 1));
    for (int d = 0; d < ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ob_alloc(b, sizeof *dim);
        onnx__tensor_shape_proto__dimension__init(dim);
        if (shape[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = shape[d];
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = (char *)dim_names[d];
        }
        sp->dim[d] = dim;
    }
    sp->n_dim = (size_t)ndim;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

static inline void ob_input(ob_model *b, const char *name, int dtype, int ndim, const int64_t *shape,
                     const char *const *dim_names)
{
    b->inputs[b->graph.n_input++] = ob_value(b, name, dtype, ndim, shape, dim_names);
}

static inline void ob_output(ob_model *b, const char *name, int dtype, int ndim, const int64_t *shape,
                      const char *const *dim_names)
{
    b->outputs[b->graph.n_output++] = ob_value(b, name, dtype, ndim, shape, dim_names);
}

/* Writes the model to path; 0 or -1. */
static inline int ob_write(ob_model *b, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = malloc(n ? n : 1);
    FILE *f = fopen(path, "wb");
    int rc = buf && f && onnx__model_proto__pack(&b->model, buf) == n &&
                     fwrite(buf, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(buf);
    return rc;
}

static inline void ob_free(ob_model *b)
{
    for (int i = 0; i < b->nptrs; i++)
        free(b->ptrs[i]);
    b->nptrs = 0;
}

#endif
