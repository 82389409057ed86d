/*
 * nn_common.h — what the composite neural-network ops (ops/nn_*.c) share. They are written only
 * with the public ops of core/tide.h, so autograd and the jit see ordinary primitives; these
 * helpers keep their many intermediates and error paths short:
 *
 *  - an nn_scope holds every intermediate a composite makes and releases them all at the end;
 *    a step that fails gives NULL, the steps after it fail at once on their NULL input, and the
 *    scope remembers the first failure's message, which nn_finish reports prefixed with the
 *    composite's name ("cross_entropy: gather: ...");
 *  - argument checks whose messages name the op, the shapes and the dtypes;
 *  - a no-grad section, for work that must stay out of the autograd graph.
 */
#ifndef TIDE_NN_COMMON_H
#define TIDE_NN_COMMON_H

#include "dispatch.h"

#define NN_SCOPE_MAX 48

typedef struct nn_scope {
    tide_tensor *held[NN_SCOPE_MAX];
    int n;
    bool failed;
    char first_error[512];
} nn_scope;

/* Takes ownership of t (the result of a tide_* call) and returns it; records the error when t is
 * NULL. */
tide_tensor *nn_keep(nn_scope *s, tide_tensor *t);
/* Records a failed status (a tide_* call returning -1). */
void nn_check_status(nn_scope *s, int rc);
/* Releases t now (it must be held by s; NULL is ignored), to free memory in long chains. */
void nn_drop(nn_scope *s, tide_tensor *t);
/* Releases everything held. Returns out (a new reference) when nothing failed, else NULL with
 * the first error, prefixed by op unless it already starts with it. */
tide_tensor *nn_finish(nn_scope *s, const char *op, tide_tensor *out);

/* Sets the error: "op: msg" unless msg already starts with "op:". */
void nn_prefix_error(const char *op, const char *msg);

/* "[2, 3] float32" into buf. */
const char *nn_describe(char *buf, size_t size, const tide_tensor *t);

/* t is non-NULL and float32/float64; otherwise an error naming op and arg. 0 or -1. */
int nn_check_floating(const char *op, const char *arg, const tide_tensor *t);
/* t (if given) has exactly x's dtype, as PyTorch requires of weights and biases. 0 or -1. */
int nn_check_same_dtype(const char *op, const char *arg, const tide_tensor *t,
                        const tide_tensor *x);
/* t has the shape (ndim, shape). 0 or -1 with an error naming what was expected. */
int nn_check_shape(const char *op, const char *arg, const tide_tensor *t, int ndim,
                   const int64_t *shape);
int nn_check_reduction(const char *op, tide_reduction reduction);
/* eps >= 0 (and not NaN). */
int nn_check_eps(const char *op, double eps);
/* dim normalized for ndim (a 0-dim tensor accepts 0 and -1, as PyTorch), or -1. */
int nn_normalize_dim(const char *op, int dim, int ndim);

/* A section whose ops autograd does not record (running statistics, the max subtracted for
 * stability). The thread's error message is left as it was. */
bool nn_no_grad_begin(void);
void nn_no_grad_end(bool previous);

/* A composite activation on float16/bfloat16 computes in float32 and rounds once at the end, as
 * a kernel would (and PyTorch's do): nn_widen_half gives x as float32 when it is half (a cast
 * kept in s), else x; nn_round_to casts out back to dtype when it differs (kept in s). Without
 * them each of the composite's primitives would round to half: slower, and less accurate. */
const tide_tensor *nn_widen_half(nn_scope *s, const tide_tensor *x);
tide_tensor *nn_round_to(nn_scope *s, tide_tensor *out, tide_dtype dtype);

/* x reduced as reduction says: the tensor itself (a new reference), its sum, or its mean. */
tide_tensor *nn_reduce(nn_scope *s, tide_tensor *x, tide_reduction reduction);

#endif
