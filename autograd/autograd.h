/*
 * autograd.h — what autograd/ shares with the rest of the library and with its tests: the
 * dispatcher's record hook, the backward node, the formulas, and the gradcheck utility.
 */
#ifndef TIDE_AUTOGRAD_H
#define TIDE_AUTOGRAD_H

#include "../core/primitive.h"
#include "../core/tensor.h"

/* The dispatcher's record hook (td_hooks.record), installed by default in every thread: records
 * a backward node for an op whose input requires grad when grad mode is on; for in-place ops
 * (COPY, FILL, called before the write) it rewires or refuses them (README.md, "In-place"). */
int td_autograd_record(void *ctx, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                       const tide_attrs *attrs);

/* One input of a backward node: where its gradient goes, what was saved of it, and its shape. */
typedef struct ag_input {
    struct ag_node *node; /* the producer's node (a reference), or NULL */
    tide_tensor *leaf;    /* a leaf that requires grad (a reference), or NULL */
    tide_tensor *saved;   /* the input itself when the formula needs it, else NULL */
    uint32_t version;     /* the saved storage's version when saved */
    bool transposed;      /* its last two dims were a contiguous matrix's transpose */
    tide_device *device;  /* where it lived: TO sends its gradient back there */
    uint8_t dtype, ndim;
    int64_t shape[TIDE_MAX_DIMS];
} ag_input;

/* The backward node of one op application; a tensor's grad_fn. */
typedef struct ag_node {
    int refcount;
    tide_op op;
    const char *name; /* the public op it was recorded in (td_op_enter), else op's name */
    bool released; /* a backward without retain_graph freed the saved tensors */
    tide_attrs attrs;
    uint8_t out_dtype, out_ndim;
    int64_t out_shape[TIDE_MAX_DIMS];
    /* the engine's scratch during one backward */
    unsigned mark;
    int deps, pending;
    bool useful, feeds; /* autograd.grad: a wanted input is this node or below it / below it */
    bool grad_owned; /* grad is a tensor the engine made and nothing else holds (view_grad.c) */
    tide_tensor *grad;
    struct ag_pieces *pieces; /* slices' gradients not yet joined into grad (view_grad.c) */
    int nin;
    ag_input in[];
} ag_node;

static inline bool ag_input_needed(const ag_input *in) { return in->node || in->leaf; }

/* Which inputs the formula of op reads (bit i: input i) when the inputs in needed (same bits)
 * want gradients: mul's a is kept only when b needs a gradient, and so on. */
unsigned ag_saved_inputs(tide_op op, unsigned needed);
/* The last two dims of t are a contiguous matrix's transpose. */
bool ag_stored_transposed(const tide_tensor *t);
/* The gradients of node's inputs from g, the gradient of its output: gi[i] (a new reference)
 * for every needed input, NULL for the others. Written with public ops only, so a tracer sees
 * backward like any other code. 0 or -1 with the error set. */
int ag_backward_formula(const ag_node *n, tide_tensor *g, tide_tensor **gi);

/* view_grad.c: whether node n (a select or slice) adds its gradient g into its view of its
 * input's gradient rather than through the formula; ag_view_grad_add does it (0 or -1). */
bool ag_view_grad_takes(const ag_node *n, const tide_tensor *g, bool create_graph);
int ag_view_grad_add(ag_node *n, tide_tensor *g);
/* Slices' gradients kept as pieces (at most AG_PIECES per node) become p's gradient: joined
 * before p's gradient is read or added to (0 or -1), or dropped when the walk ends. */
#define AG_PIECES 8
typedef struct ag_pieces ag_pieces;
int ag_view_grad_join(ag_node *p);
void ag_view_grad_drop(ag_node *p);

/* deferred.c: a weight reached through several products x_t @ W^T gets its gradient as one
 * product at its last use. ag_defer_plan: NULL when no leaf qualifies. ag_defer_takes: whether
 * node n's gradient goes that way; ag_defer_push then sets gi[0] (x's gradient) and keeps
 * (g, x); ag_defer_skip counts a use that received no gradient. At a leaf's last use the joined
 * product goes to sink (consumed). 0 or -1. */
typedef struct ag_deferred ag_deferred;
typedef int (*ag_leaf_sink)(void *ctx, tide_tensor *leaf, tide_tensor *grad);
ag_deferred *ag_defer_plan(ag_node *const *nodes, int n);
bool ag_defer_takes(ag_deferred *d, const ag_node *n);
int ag_defer_push(ag_deferred *d, const ag_node *n, tide_tensor *g, tide_tensor **gi,
                  ag_leaf_sink sink, void *ctx);
int ag_defer_skip(ag_deferred *d, const ag_node *n, ag_leaf_sink sink, void *ctx);
void ag_defer_free(ag_deferred *d);

/*
 * gradcheck: compares the analytic gradient of f with central finite differences.
 * f maps the n inputs to a floating tensor of any shape; the check differentiates
 * L = sum(f(inputs) * W) with fixed pseudo-random weights W, so every output element counts.
 * Every input that requires grad is checked element by element: it must be a float64 CPU
 * tensor (any strides, but no expanded dims); the others are passed as they are. An element
 * passes when |analytic - numeric| <= atol + rtol * |numeric|. Inputs keep their values; their
 * grads are cleared before and left holding dL/dinput after. 0 when every element passes, else
 * -1 with an error naming the input, the element and both values (or f's own error).
 */
typedef tide_tensor *(*td_gradcheck_fn)(void *ctx, tide_tensor *const *inputs, int n);
int td_gradcheck(td_gradcheck_fn f, void *ctx, tide_tensor *const *inputs, int n, double eps,
                 double atol, double rtol);

/*
 * gradgradcheck: gradcheck of the gradient. The function checked maps (inputs..., v) to the
 * gradients of <f(inputs), v> with respect to the inputs that require grad, taken with
 * create_graph (tide_autograd_grad), flattened and concatenated; v is a float64 leaf of f's
 * output shape. So its analytic gradient is f's second derivative through the recorded
 * backward (and the gradient's dependence on v), its numeric one the finite differences of
 * f's first gradient. At most 15 inputs; otherwise the contract and result of td_gradcheck.
 */
int td_gradgradcheck(td_gradcheck_fn f, void *ctx, tide_tensor *const *inputs, int n, double eps,
                     double atol, double rtol);

#endif
