/*
 * onnx_internal.h — what the files of the ONNX importer share (io/onnx/README.md):
 *   onnx_model.c    parse a model (protobuf-c), name its values, check every node against the
 *                   op table, order the frees
 *   onnx_tensor.c   TensorProto <-> tide tensors, external data, tide_onnx_load_tensor
 *   onnx_run.c      the interpreter: nodes in order, constants folded eagerly
 *   onnx_attr.c     attribute and small-input readers for the op handlers
 *   onnx_compile.c  tide_onnx_load: a model captured into a tide_graph, re-planned per shape
 *   onnx_symbolic.c free dims captured once as a symbolic plan, where that is sound
 *   onnx_table.c    the one op table, gathered from the onnx_ops_*.c lists
 *   onnx_ops_*.c    the handlers, one file per family
 * Internal names start with onnx_.
 */
#ifndef TIDE_ONNX_INTERNAL_H
#define TIDE_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/tide_internal.h"
#include "../io_internal.h"
#include "onnx.pb-c.h"

typedef struct onnx_op onnx_op;

/* One node, its values resolved to ids (value names are unique in a graph). */
typedef struct onnx_node {
    const Onnx__NodeProto *p;
    const onnx_op *op;
    int *in, nin;       /* value ids; -1 for an absent optional input ("") */
    int *out, nout;     /* -1 for an output nobody asked for ("") */
    int *frees, nfrees; /* values whose last reader is this node (not graph outputs) */
} onnx_node;

struct tide_onnx_model {
    Onnx__ModelProto *proto;
    char *path;
    char *dir;          /* the model's folder: external data must lie inside it */
    char *device;       /* where initializers live, NULL for the default device */
    int opset;          /* the default domain's (ai.onnx) version */
    int nvalues;
    const char **names; /* value id -> name (into proto) */
    tide_tensor **init; /* value id -> an initializer (owned), else NULL */
    int nnodes;
    onnx_node *nodes;
    int ninputs, noutputs;
    int *in_value, *out_value;
    tide_graph_io *inputs, *outputs; /* declared names, dtypes, shapes */
};

/* The interpreter's view of one node while its handler runs. in[k] is NULL for an absent
 * optional input; the handler sets out[k] (a new reference) for each k < nout whose id is not -1
 * (it may set the others too: they are released). */
typedef struct onnx_ctx {
    const tide_onnx_model *m;
    const onnx_node *node;
    tide_tensor **in;
    int nin;
    tide_tensor **out;
    int nout;
    const bool *in_const; /* per input: a constant of the run (onnx_run.c), read freely */
} onnx_ctx;

/* One entry of the op table: the ONNX op `name` for models whose ai.onnx opset is in
 * [since, until] (until 0: every later one). Inputs in [min_in, max_in] (max_in -1: any number).
 * check, when set, looks at a node's attributes before anything runs: 0 when the handler
 * supports them, else 1 with why (an unsupported mode) or -1 with the error set (a malformed
 * attribute). flags: ONNX_RANDOM, results differ per run (never folded as constants);
 * ONNX_SHAPE_ONLY, it reads only its inputs' shapes (Shape, Size), so its result is a constant
 * even of traced inputs. */
enum { ONNX_RANDOM = 1, ONNX_SHAPE_ONLY = 2 };
struct onnx_op {
    const char *name;
    int since, until;
    int min_in, max_in;
    int (*check)(const onnx_node *n, char *why, size_t size);
    int (*run)(onnx_ctx *c);
    unsigned flags;
};

/* The lists of the op families (each ends with a zeroed entry), gathered by onnx_table.c. */
extern const onnx_op onnx_ops_elementwise[];
extern const onnx_op onnx_ops_shape[];
extern const onnx_op onnx_ops_reduce[];
extern const onnx_op onnx_ops_nn[];
extern const onnx_op onnx_ops_loss[];
extern const onnx_op onnx_ops_index[];
extern const onnx_op onnx_ops_conv[];
extern const onnx_op onnx_ops_pool[];
extern const onnx_op onnx_ops_norm[];
extern const onnx_op onnx_ops_resize[];
extern const onnx_op onnx_ops_activation[];
extern const onnx_op onnx_ops_rnn[];
extern const onnx_op onnx_ops_quant[];

/* The table's entry for op_type at opset, or NULL. */
const onnx_op *onnx_find_op(const char *op_type, int opset);
/* Calls fn for every entry (docs/onnx.md and the runner's op list). */
void onnx_each_op(void (*fn)(const onnx_op *op, void *ctx), void *ctx);

/* ---- errors: every message names the node, its op and the model's opset ------------------ */
int onnx_error(const onnx_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int onnx_unsupported(const onnx_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A tide op called by a handler failed: its error, prefixed with the node (code kept). -1. */
int onnx_fail(const onnx_ctx *c);
/* c->out[0] = t: 0, or onnx_fail when t is NULL. */
int onnx_set(onnx_ctx *c, tide_tensor *t);
/* "node 'name' (Op)" into buf, for messages made before a ctx exists. */
const char *onnx_node_label(const onnx_node *n, char *buf, size_t size);

/* ---- attributes (onnx_attr.c); a missing one gives the default ---------------------------- */
const Onnx__AttributeProto *onnx_attr(const onnx_node *n, const char *name);
int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t dflt);
float onnx_attr_float(const onnx_node *n, const char *name, float dflt);
/* The list (NULL and *count 0 when absent). */
const int64_t *onnx_attr_ints(const onnx_node *n, const char *name, int *count);
const float *onnx_attr_floats(const onnx_node *n, const char *name, int *count);
/* A string attribute as a NUL-terminated copy in buf (dflt when absent). */
const char *onnx_attr_string(const onnx_node *n, const char *name, const char *dflt, char *buf,
                             size_t size);

/* ---- inputs read on the host (shapes, axes, pads: small int tensors) ---------------------- */
/* Input k's elements as int64 (int32/int64 tensors; at most max). -1 with the error set (the
 * op named), e.g. when it is not an integer tensor. A read of a traced value is a graph break. */
int onnx_input_ints(const onnx_ctx *c, int k, int64_t *dst, int max, int *count);
/* A one-element input as a double. */
int onnx_input_scalar(const onnx_ctx *c, int k, double *value);
/* Whether input k is a one-element constant (an initializer, a Constant, folded arithmetic)
 * and its value: read with the trace paused, so reading it is never a graph break. */
bool onnx_const_scalar(const onnx_ctx *c, int k, double *value);
/* Normalizes ONNX's axis (negative counts from the end) against rank: -1 with an error naming
 * the op when it is out of range. */
int onnx_axis(const onnx_ctx *c, int64_t axis, int rank, int *out);

/* ---- tensors (onnx_tensor.c) --------------------------------------------------------------- */
/* The tide dtype of an ONNX TensorProto.DataType, or -1 when tide has none. */
int onnx_dtype(int32_t onnx_type);
const char *onnx_dtype_name(int32_t onnx_type);
/* A TensorProto as a tensor on device (NULL: the default device); dir (may be NULL) is where
 * external data may be read from. io names the function and the file for errors. */
tide_tensor *onnx_tensor_from_proto(const td_io_ctx *io, const Onnx__TensorProto *t,
                                    const char *dir, const char *device);

/* A whole file in memory (for the protobuf parser). NULL with the error set. */
void *onnx_read_file(const td_io_ctx *io, size_t *len);

/* ---- models (onnx_model.c, onnx_run.c, onnx_symbolic.c) ------------------------------------ */
/* m captured as one symbolic plan over its inputs' free dims, checked against the interpreter
 * at two other sizes; NULL (no error set) when m has no free dims or the plan is not sound. */
tide_graph *onnx_capture_symbolic(tide_onnx_model *m, const tide_onnx_options *o);
/* The protobuf-c allocator of io/ (td_malloc, so allocation faults are tested). */
extern ProtobufCAllocator onnx_allocator;

#endif /* TIDE_ONNX_INTERNAL_H */
