/*
 * autocast.h — mixed precision as PyTorch's CPU autocast. The state is the calling thread's
 * (tide_set_autocast in core/tide.h). While it names a half dtype, an op that autocast covers
 * passes its tensor arguments through td_autocast_args first:
 *
 *  - TD_AUTOCAST_LOWER (matmul, linear, conv2d, scaled_dot_product_attention): float32 and the
 *    other half dtype become the autocast dtype, so the product runs and returns in it;
 *  - TD_AUTOCAST_FLOAT32 (softmax, log_softmax, logsumexp, layer_norm, batch_norm, the losses):
 *    float16 and bfloat16 become float32, so these numerically touchy ops never round to half.
 *
 * Without autocast, TD_AUTOCAST_FLOAT32 ops still compute half inputs in float32 and round the
 * result once to the inputs' dtype (narrow_to), as PyTorch's CPU kernels for them do: composed
 * of primitives, they would otherwise round to half after each one.
 *
 * float64 and non-floating tensors are left alone, as PyTorch does. The casts are ordinary
 * tide_cast calls: autograd records them (a parameter's gradient comes back through the cast as
 * float32) and the tracer sees them as nodes. Backward runs with autocast off (autograd/engine.c),
 * so gradients keep the dtypes the forward chose.
 */
#ifndef TIDE_OPS_AUTOCAST_H
#define TIDE_OPS_AUTOCAST_H

#include "dispatch.h"

typedef enum td_autocast_kind { TD_AUTOCAST_LOWER, TD_AUTOCAST_FLOAT32 } td_autocast_kind;

#define TD_AUTOCAST_MAX_ARGS 6

/* The casts an op made; td_autocast_release drops them after the op. */
typedef struct td_autocast_held {
    tide_tensor *t[TD_AUTOCAST_MAX_ARGS];
    int n;
    int narrow_to; /* the dtype the result is cast to after the op, or -1 */
} td_autocast_held;

/* For each of the n arguments (each a const tide_tensor **; a NULL tensor is skipped): when
 * autocast is on and kind casts the tensor's dtype, *arg becomes the cast, held in h. Without
 * autocast nothing happens. 0, or -1 when a cast failed (h still needs releasing). */
int td_autocast_args(td_autocast_held *h, td_autocast_kind kind, int n, ...);
void td_autocast_release(td_autocast_held *h);
/* result cast to dtype (result's reference is consumed; NULL with the error set on failure). */
tide_tensor *td_autocast_narrow(tide_tensor *result, int dtype);

/* TD_IN_OP (dispatch.h) for an op autocast covers: returns call's result computed inside name,
 * after the n arguments listed (addresses of the op's const tide_tensor * parameters, which call
 * then reads) went through td_autocast_args. */
#define TD_IN_AUTOCAST_OP(name, kind, call, n, ...)                                             \
    do {                                                                                         \
        const char *td_previous_op_ = td_op_enter(name);                                        \
        td_autocast_held td_held_ = {0};                                                         \
        tide_tensor *td_result_ = NULL;                                                          \
        if (td_autocast_args(&td_held_, kind, n, __VA_ARGS__) == 0)                              \
            td_result_ = (call);                                                                 \
        if (td_result_ && td_held_.narrow_to >= 0)                                               \
            td_result_ = td_autocast_narrow(td_result_, td_held_.narrow_to);                     \
        td_autocast_release(&td_held_);                                                          \
        td_op_leave(td_previous_op_);                                                            \
        return td_result_;                                                                       \
    } while (0)

#endif
