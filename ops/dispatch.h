/*
 * dispatch.h — the one path every op takes (DESIGN.md "Data flow"). The public functions in
 * the files of ops/ validate their arguments and infer the result's shape and dtype; then they call
 * td_dispatch*, which either runs the device's kernel (eager) or hands the op to the tracer
 * (jit), and afterwards lets autograd record a backward node. Nothing else decides between
 * eager and traced.
 */
#ifndef TIDE_DISPATCH_H
#define TIDE_DISPATCH_H

#include "../core/tensor.h"

/* The result an op will produce, as inferred before it runs. */
typedef struct td_meta {
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    tide_dtype dtype;
    tide_device *device;
} td_meta;

/*
 * Hooks that the rooms built on ops/ install. Both are NULL until then.
 *  trace: while a thread traces (jit), every op goes here instead of to a kernel; it returns
 *    the tensor that stands for the op's result (new reference) or NULL with the error set.
 *    For views, meta is the view's shape and out_view carries its strides and offset; for
 *    in-place ops (COPY, FILL) dst is the destination.
 *  record: after an op ran (or was traced), autograd records a backward node when grad mode is
 *    on and an input requires grad. 0 or -1 with the error set. For in-place ops (COPY, FILL)
 *    it is called before the write, with out = dst, when dst or an input requires grad: it
 *    refuses the write (-1) when it would corrupt a graph. Installed by default in every
 *    thread (autograd/autograd.h).
 */
typedef struct td_hooks {
    tide_tensor *(*trace)(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                          tide_tensor *const *in, int nin, const tide_attrs *attrs,
                          const tide_tensor *out_view);
    void *trace_ctx;
    int (*record)(void *ctx, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                  const tide_attrs *attrs);
    void *record_ctx;
    /* jit: called (with trace_ctx) before a tensor's data is read back to the host while the
     * thread traces; the tracer runs the pending graph there (a graph break). 0 or -1. */
    int (*materialize)(void *ctx, const tide_tensor *t);
    /* the public op the thread is inside (td_op_enter), or NULL */
    const char *op_name;
} td_hooks;

/* The hooks of the calling thread (tracing and grad mode are per thread). */
td_hooks *td_thread_hooks(void);

/*
 * The public op a thread is inside, so the user sees the name of the op they called: sum drops
 * its reduced dims with a RESHAPE view, mean is sum / count, softmax is six primitives, zeros
 * is a FILL. While it is set, autograd names the backward nodes after it (grad_fn, backward's
 * errors) and an allocation failure names it. The outermost op wins (mean's inner sum stays
 * "mean"). td_op_enter returns what td_op_leave restores; name must be a string literal.
 * TD_IN_OP(name, call) returns call's result computed inside name.
 */
static inline const char *td_op_enter(const char *name)
{
    td_hooks *h = td_thread_hooks();
    const char *previous = h->op_name;
    if (!previous)
        h->op_name = name;
    return previous;
}
static inline void td_op_leave(const char *previous) { td_thread_hooks()->op_name = previous; }
#define TD_IN_OP(name, call)                                                                     \
    do {                                                                                         \
        const char *td_previous_op_ = td_op_enter(name);                                        \
        tide_tensor *td_result_ = (call);                                                        \
        td_op_leave(td_previous_op_);                                                            \
        return td_result_;                                                                       \
    } while (0)

/* An op that produces a fresh tensor described by meta. */
tide_tensor *td_dispatch(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                         const tide_attrs *attrs);
/* A view op: the result shares x's storage with the given layout. */
tide_tensor *td_dispatch_view(tide_op op, const tide_tensor *x, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset, const tide_attrs *attrs);
/* An in-place op (COPY, FILL) writing into dst. 0 or -1. */
int td_dispatch_inplace(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin,
                        const tide_attrs *attrs);

/* The autograd record step of td_dispatch alone, for an op whose result is a view of a work
 * tensor its backward reads (made with grad mode off and listed as one more input): attention
 * (ops/attention.c). Records nothing unless an input requires grad. 0 or -1. */
int td_record_grad(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                   const tide_attrs *attrs);

/* The eager path of td_dispatch alone: runs op on meta->device into a fresh tensor (TO: copied
 * between the devices), with no tracer and no autograd record (the jit's graph breaks and
 * constant folding). NULL or a new reference. */
tide_tensor *td_run_eager(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                          const tide_attrs *attrs);
/* The same for an in-place op into dst (its storage version advances). 0 or -1. */
int td_run_eager_into(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin,
                      const tide_attrs *attrs);
/* TO's body: src's elements into out (contiguous, on another device) through the two devices'
 * read/write, bouncing through host memory when neither is host memory (to_device.c). */
int td_copy_between_devices(tide_tensor *out, const tide_tensor *src);
/* The kernel of a collective (collective.c): the dispatcher runs it, no device does. */
int td_collective_run(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                      const tide_attrs *attrs);
/* Runs primitive op into out: on dev, or, for the ops no device runs (TO, the collectives),
 * by the dispatcher itself. The eager path and the jit's steps both come here. 0 or -1. */
static inline int td_run_primitive(tide_device *dev, tide_op op, tide_tensor *out,
                                   tide_tensor *const *in, int nin, const tide_attrs *attrs)
{
    if (__builtin_expect(op == TIDE_OP_TO || op >= TIDE_OP_ALL_REDUCE, 0)) {
        if (op == TIDE_OP_TO)
            return td_copy_between_devices(out, in[0]);
        if (tide_op_is_collective(op))
            return td_collective_run(op, out, in, nin, attrs);
    }
    return dev->run(dev, op, out, in, nin, attrs);
}
/* tide_to with the device itself: the TO primitive (a new reference to t when already there). */
tide_tensor *td_to_device(const tide_tensor *t, tide_device *dev);
/* The exact GELU primitive, x * Phi(x) (elementwise.c; tide_gelu in nn_activation.c). */
tide_tensor *td_gelu_exact(const tide_tensor *x);
/* A 1-D run of SDPA's or SDPA_GRAD's packed result (core/primitive.h) as [batch.., rows, width]
 * (ndim, shape): a reshape; with heads-last storage a reshape of [batch.. but the last, rows,
 * heads, width] then a transpose (attention.c). A new reference, or NULL. */
tide_tensor *td_sdpa_unpack(const tide_tensor *flat, int ndim, const int64_t *shape,
                            bool heads_last);

/* Creation (creation.c): the calling thread's default device (the CPU unless set); the device
 * named name for op (NULL: the default), or NULL with an error naming op and the device. */
tide_device *td_default_device(void);
tide_device *td_creation_device(const char *op, const char *name);
/* full and arange on a given device, for ops that make a tensor on their operand's device. */
tide_tensor *td_full_on(tide_device *dev, const char *op, int ndim, const int64_t *shape,
                        double value, tide_dtype dtype);
tide_tensor *td_arange_on(tide_device *dev, double start, double end, double step,
                          tide_dtype dtype);
tide_tensor *td_from_data_on(tide_device *dev, const void *data, int ndim, const int64_t *shape,
                             tide_dtype dtype);

/* Gives the tracer a chance to compute t before its data is read (see materialize). 0 or -1. */
int td_materialize(const tide_tensor *t);

/* The strides that show a tensor of layout (xnd, xshape, xstrides) in shape (ndim dims, equal
 * element count) without copying, as view and reshape make them; false when none exist (the
 * jit replays a captured reshape at new sizes with it). */
bool td_view_strides(int xnd, const int64_t *xshape, const int64_t *xstrides, int ndim,
                     const int64_t *shape, int64_t *strides);

/* Shared argument checks: each sets an error naming op and returns -1 on failure. */
int td_check_tensor(const char *op, const char *arg, const tide_tensor *t);
/* dims (ndims of them; NULL or 0 = all) normalized for x, sorted, without repeats: bit i of
 * the result is set when dim i is listed. -1 with an error naming op. */
int td_dims_mask(const char *op, const tide_tensor *x, const int *dims, int ndims);

#endif
