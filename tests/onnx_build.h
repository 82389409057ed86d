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
#include "tide.h"

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

static inline void ob_attr_float(ob_model *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = v;
    n->attribute[n->n_attribute++] = a;
}

/* The ONNX element type of a tide dtype (the ones the tests build inputs of). */
static inline int ob_onnx_type(tide_dtype d)
{
    switch (d) {
    case TIDE_FLOAT64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case TIDE_INT32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case TIDE_INT64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case TIDE_UINT8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case TIDE_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    }
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

/* A model whose Reshape target is computed from its input's shape, written to path (0 or -1):
 * x [batch, 6] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [2, 3])) [batch, 2, 3].
 * A capture folds the target to constants (test_onnx.c, test_onnx_symbolic.c). */
static inline int ob_write_batch_reshape(const char *path)
{
    enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };
    static const char *const dims[] = {"batch", NULL, NULL};
    ob_model b;
    ob_init(&b, 13);
    int64_t xs[2] = {-1, 6}, ys[3] = {-1, 2, 3}, one[1] = {1}, two[1] = {2}, zero = 0;
    int64_t tail[2] = {2, 3};
    ob_input(&b, "x", F32, 2, xs, dims);
    ob_init_tensor(&b, "zero", I64, 0, NULL, &zero);
    ob_init_tensor(&b, "axes", I64, 1, one, &zero);
    ob_init_tensor(&b, "tail", I64, 1, two, tail);
    ob_node(&b, "Shape", "x", "s");
    ob_node(&b, "Gather", "s|zero", "n");
    ob_node(&b, "Unsqueeze", "n|axes", "n1");
    ob_attr_int(&b, ob_node(&b, "Concat", "n1|tail", "shape"), "axis", 0);
    ob_node(&b, "Reshape", "x|shape", "y");
    ob_output(&b, "y", F32, 3, ys, dims);
    int rc = ob_write(&b, path);
    ob_free(&b);
    return rc;
}

/* Completes b with graph inputs named by `ins` ("|"-separated, in xs' dtypes and shapes) and
 * outputs named by `outs` (declared float of unknown shape: a run does not check them), writes
 * it as dir/m.onnx (freeing b) and runs it on xs. 0, -1 with tide's error, or -2 when the
 * file cannot be written. */
static inline int ob_run(ob_model *b, const char *dir, const char *ins, tide_tensor *const *xs,
                         int nx, const char *outs, tide_tensor **ys)
{
    size_t n;
    char **in = ob_names(b, ins, &n), **out = ob_names(b, outs, &n);
    for (int i = 0; i < nx; i++)
        ob_input(b, in[i], ob_onnx_type(tide_get_dtype(xs[i])), tide_ndim(xs[i]),
                 tide_shape(xs[i]), NULL);
    for (size_t k = 0; k < n; k++)
        ob_output(b, out[k], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    int rc = ob_write(b, path);
    ob_free(b);
    if (rc < 0) {
        fprintf(stderr, "onnx_build: cannot write %s\n", path);
        return -2;
    }
    tide_onnx_model *m = tide_onnx_open(path, NULL);
    rc = m ? tide_onnx_run(m, xs, nx, ys) : -1;
    tide_onnx_close(m);
    return rc;
}

/* Makes a temporary folder in dir (e.g. "/tmp/tide_onnx_XXXXXX", a buffer of its own) and runs
 * body once with the CPU as the default device, then on Vulkan where there is one (inputs and
 * the models' constants are made there), then removes the folder. 0, or 1 when the folder
 * cannot be made. */
static inline int ob_each_device(const char *name, char *dir, void (*body)(void))
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int pass = 0; pass < 2; pass++) {
        char why[256];
        if (pass == 1 && !tide_vulkan_available(why, sizeof why)) {
            printf("%s: Vulkan skipped: %s\n", name, why);
            break;
        }
        tide_set_default_device(pass ? "vulkan" : "cpu");
        body();
    }
    tide_set_default_device("cpu");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", name, dir);
    return 0;
}

#endif
