/* dispatch.c — the dispatcher: eager kernel or tracer, then the autograd hook (dispatch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "profile.h"
#include "../autograd/autograd.h"
#include "../core/log.h"

/* Grad mode is on by default in every thread (autograd/ keeps the per-thread switch). */
static _Thread_local td_hooks thread_hooks = {.record = td_autograd_record};

td_hooks *td_thread_hooks(void) { return &thread_hooks; }

const char *tide_begin_op(const char *name) { return td_op_enter(name); }
void tide_end_op(const char *previous) { td_op_leave(previous); }

static int record_grad(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                       const tide_attrs *attrs)
{
    td_hooks *h = &thread_hooks;
    if (!h->record)
        return 0;
    for (int i = 0; i < nin; i++)
        if (in[i]->flags & TD_REQUIRES_GRAD)
            return h->record(h->record_ctx, op, out, in, nin, attrs);
    return 0;
}

/* The kernel of an eager op: its result allocated, then the device's run. */
static inline __attribute__((always_inline)) tide_tensor *
run_kernel(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin, const tide_attrs *attrs)
{
    const char *name = thread_hooks.op_name ? thread_hooks.op_name : tide_op_name(op);
    tide_tensor *out = td_tensor_new(name, meta->device, meta->ndim, meta->shape, meta->dtype);
    if (!out || td_numel(meta->ndim, meta->shape) == 0)
        return out;
    int rc = td_run_primitive(meta->device, op, out, in, nin, attrs);
    if (rc < 0) {
        tide_release(out);
        return NULL;
    }
    return out;
}

/* While profiling (ops/profile.h): the kernel timed, with its source line and cost. A device
 * that queues kernels (Vulkan) is waited for before and after, so the time is the kernel's. */
static __attribute__((noinline, cold)) tide_tensor *
run_eager_profiled(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                   const tide_attrs *attrs)
{
    int where = td_profile_where();
    double t0 = td_profile_kernel_start(meta->device);
    tide_tensor *out = run_kernel(op, meta, in, nin, attrs);
    if (out)
        td_profile_kernel_end(op, meta->device, where, out, in, nin, t0);
    return out;
}

/* Inlined into td_dispatch: every eager op takes this path (the call showed in callgrind's
 * count per op). Off, the profiler costs the one branch on its flag. */
static inline __attribute__((always_inline)) tide_tensor *
run_eager(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin, const tide_attrs *attrs)
{
    if (__builtin_expect(td_profiling(), 0))
        return run_eager_profiled(op, meta, in, nin, attrs);
    return run_kernel(op, meta, in, nin, attrs);
}

/* An in-place kernel (COPY, FILL) timed while profiling. */
static __attribute__((noinline, cold)) int
run_into_profiled(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin,
                  const tide_attrs *attrs)
{
    int where = td_profile_where();
    double t0 = td_profile_kernel_start(dst->device);
    if (td_run_primitive(dst->device, op, dst, in, nin, attrs) < 0)
        return -1;
    td_profile_kernel_end(op, dst->device, where, dst, in, nin, t0);
    return 0;
}

tide_tensor *td_run_eager(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                          const tide_attrs *attrs)
{
    return run_eager(op, meta, in, nin, attrs);
}

int td_run_eager_into(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin,
                      const tide_attrs *attrs)
{
    if (td_numel(dst->ndim, dst->shape) > 0 &&
        (__builtin_expect(td_profiling(), 0) ? run_into_profiled(op, dst, in, nin, attrs)
                                             : td_run_primitive(dst->device, op, dst, in,
                                                                nin, attrs)) < 0)
        return -1;
    /* Tensors autograd saved from this storage are now stale (it checks at backward). */
    if (dst->storage)
        __atomic_add_fetch(&dst->storage->version, 1, __ATOMIC_RELAXED);
    return 0;
}

int td_record_grad(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                   const tide_attrs *attrs)
{
    return record_grad(op, out, in, nin, attrs);
}

/* Whether the device runs op itself on these half-precision operands (device.h, takes_half):
 * the result and every operand of one 16-bit dtype, all on that device. */
static bool device_takes_half(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin)
{
    tide_device *dev = meta->device;
    if (!dev || !dev->takes_half || !td_dtype_is_half(meta->dtype))
        return false;
    for (int i = 0; i < nin; i++)
        if (in[i]->dtype != meta->dtype || in[i]->device != dev)
            return false;
    return dev->takes_half(dev, op, (int)meta->dtype);
}

/* Whether op touches float16 or bfloat16 in a way no kernel does: every op but CAST, TO,
 * INDEX_SELECT and LINEAR_HALF (and the in-place COPY and FILL, which do not come here), and
 * except what the device takes as it is (the CPU's bfloat16 matmul), computes them in float32. INDEX_SELECT only moves elements (every device copies any element
 * size, or falls back to the CPU): widening would cast the whole source, e.g. a half
 * embedding table on every decoded token, for the same values. LINEAR_HALF widens its half
 * weight inside the product (linear_half.c). */
static inline bool needs_widening(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin)
{
    if (op == TIDE_OP_CAST || op == TIDE_OP_TO || op == TIDE_OP_LINEAR_HALF ||
        op == TIDE_OP_INDEX_SELECT)
        return false;
    bool half = td_dtype_is_half(meta->dtype);
    for (int i = 0; i < nin && !half; i++)
        half = td_dtype_is_half(in[i]->dtype);
    return half && !device_takes_half(op, meta, in, nin);
}

/* TIDE_LOG=blas: the path a product (matmul, convolution, attention) on half-precision operands
 * takes, once per op and 16-bit dtype (shapes and device are the first call's): the device's
 * own kernel (device.h, takes_half), or float32 between casts. */
static void log_half_product(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                             bool widened)
{
    if (!td_log_enabled("blas") || nin < 2 ||
        (op != TIDE_OP_MATMUL && op != TIDE_OP_CONV2D && op != TIDE_OP_CONV2D_GRAD_INPUT &&
         op != TIDE_OP_CONV2D_GRAD_WEIGHT && op != TIDE_OP_SDPA && op != TIDE_OP_SDPA_GRAD))
        return;
    static unsigned seen[TIDE_NUM_OPS]; /* bit per dtype */
    int half = td_dtype_is_half(in[0]->dtype) ? in[0]->dtype : in[1]->dtype;
    if (!td_dtype_is_half(half))
        half = meta->dtype;
    if (__atomic_fetch_or(&seen[op], 1u << half, __ATOMIC_RELAXED) & (1u << half))
        return;
    char a[96], b[96];
    td_shape_str(a, sizeof a, in[0]->ndim, in[0]->shape);
    td_shape_str(b, sizeof b, in[1]->ndim, in[1]->shape);
    const char *dev = in[0]->device->name, *op_name = tide_op_name(op);
    const char *da = tide_dtype_name((tide_dtype)in[0]->dtype);
    const char *db = tide_dtype_name((tide_dtype)in[1]->dtype);
    if (!widened) {
        td_log("blas", "%s %s x %s (%s, %s) on %s: the device's own %s kernel, float32 sums "
               "rounded once", op_name, a, b, da, db, dev, da);
        return;
    }
    bool cpu_mm = op == TIDE_OP_MATMUL && strcmp(dev, "cpu") == 0;
    td_log("blas", "%s %s x %s (%s, %s) on %s: operands cast to float32, the float32 %s%s, %s%s "
           "(no half-precision kernel%s)", op_name, a, b, da, db, dev, op_name,
           cpu_mm ? " (OpenBLAS sgemm)" : "",
           td_dtype_is_half(meta->dtype) ? "result cast to " : "result kept in ",
           tide_dtype_name((tide_dtype)meta->dtype),
           cpu_mm ? ": OpenBLAS has no sbgemm; bfloat16 kernels need AMX or AVX512_BF16 at the "
                    "avx512 tier"
                  : "");
}

/*
 * The op in float32 between casts: half-precision operands cast up, the op run in float32, the
 * result cast down once. Kernels therefore compute in float32 and round once on store, and the
 * three steps are ordinary dispatches, so autograd records them and the jit traces them (a fused
 * chain keeps eager's rounding after every op: jit/README.md).
 */
static tide_tensor *dispatch_widened(tide_op op, const td_meta *meta, tide_tensor *const *in,
                                     int nin, const tide_attrs *attrs)
{
    log_half_product(op, meta, in, nin, true);
    tide_tensor *local[8], **wide = nin <= 8 ? local : calloc((size_t)nin, sizeof *wide);
    if (!wide) {
        td_error_code(TIDE_ERR_OUT_OF_MEMORY, "%s: out of memory", tide_op_name(op));
        return NULL;
    }
    int ready = 0;
    for (; ready < nin; ready++) {
        wide[ready] = td_dtype_is_half(in[ready]->dtype) ? tide_cast(in[ready], TIDE_FLOAT32)
                                                          : tide_retain(in[ready]);
        if (!wide[ready])
            break;
    }
    tide_tensor *out = NULL;
    if (ready == nin) {
        td_meta wide_meta = *meta;
        if (td_dtype_is_half(meta->dtype))
            wide_meta.dtype = TIDE_FLOAT32;
        out = td_dispatch(op, &wide_meta, wide, nin, attrs);
        if (out && wide_meta.dtype != meta->dtype) {
            tide_tensor *narrow = tide_cast(out, meta->dtype);
            tide_release(out);
            out = narrow;
        }
    }
    for (int i = 0; i < ready; i++)
        tide_release(wide[i]);
    if (wide != local)
        free(wide);
    return out;
}

tide_tensor *td_dispatch(tide_op op, const td_meta *meta, tide_tensor *const *in, int nin,
                         const tide_attrs *attrs)
{
    td_hooks *h = &thread_hooks;
    if (__builtin_expect(needs_widening(op, meta, in, nin), 0))
        return dispatch_widened(op, meta, in, nin, attrs);
    if (__builtin_expect(td_dtype_is_half(meta->dtype), 0))
        log_half_product(op, meta, in, nin, false);
    tide_tensor *out = h->trace ? h->trace(h->trace_ctx, op, meta, NULL, in, nin, attrs, NULL)
                                : run_eager(op, meta, in, nin, attrs);
    if (!out)
        return NULL;
    if (record_grad(op, out, in, nin, attrs) < 0) {
        tide_release(out);
        return NULL;
    }
    return out;
}

tide_tensor *td_dispatch_view(tide_op op, const tide_tensor *x, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset, const tide_attrs *attrs)
{
    td_hooks *h = &thread_hooks;
    tide_tensor *in[1] = {(tide_tensor *)x};
    tide_tensor *out = td_tensor_view(x, ndim, shape, strides, offset);
    if (!out)
        return NULL;
    if (h->trace) {
        td_meta meta = {ndim, {0}, (tide_dtype)x->dtype, x->device};
        for (int i = 0; i < ndim; i++)
            meta.shape[i] = shape[i];
        tide_tensor *traced = h->trace(h->trace_ctx, op, &meta, NULL, in, 1, attrs, out);
        tide_release(out);
        if (!traced)
            return NULL;
        out = traced;
    }
    if (record_grad(op, out, in, 1, attrs) < 0) {
        tide_release(out);
        return NULL;
    }
    return out;
}

int td_dispatch_inplace(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin,
                        const tide_attrs *attrs)
{
    td_hooks *h = &thread_hooks;
    /* autograd sees an in-place op before it writes, so it can refuse one that would corrupt a
     * graph (a leaf that requires grad, a tensor inside a graph) while the data is intact. */
    if (h->record) {
        bool needs = dst->flags & TD_REQUIRES_GRAD;
        for (int i = 0; i < nin && !needs; i++)
            needs = in[i]->flags & TD_REQUIRES_GRAD;
        if (needs && h->record(h->record_ctx, op, dst, in, nin, attrs) < 0)
            return -1;
    }
    if (h->trace) {
        td_meta meta = {dst->ndim, {0}, (tide_dtype)dst->dtype, dst->device};
        for (int i = 0; i < dst->ndim; i++)
            meta.shape[i] = dst->shape[i];
        tide_tensor *r = h->trace(h->trace_ctx, op, &meta, dst, in, nin, attrs, NULL);
        if (!r)
            return -1;
        tide_release(r);
        /* Tensors autograd saved from this storage are now stale (it checks at backward). */
        if (dst->storage)
            __atomic_add_fetch(&dst->storage->version, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return td_run_eager_into(op, dst, in, nin, attrs);
}

int td_materialize(const tide_tensor *t)
{
    td_hooks *h = &thread_hooks;
    if (h->trace && h->materialize)
        return h->materialize(h->trace_ctx, t);
    if (t && t->trace_node && !t->storage)
        return td_error("a tensor computed while tracing was read after its trace ended "
                        "without being computed");
    return 0;
}

int td_check_tensor(const char *op, const char *arg, const tide_tensor *t)
{
    if (!t)
        return td_error("%s: %s is NULL", op, arg);
    return 0;
}

int td_dims_mask(const char *op, const tide_tensor *x, const int *dims, int ndims)
{
    if (!dims || ndims == 0)
        return x->ndim ? (1 << x->ndim) - 1 : 0;
    if (ndims < 0 || ndims > TIDE_MAX_DIMS)
        return td_error("%s: %d dims listed; at most %d", op, ndims, TIDE_MAX_DIMS);
    int mask = 0;
    for (int i = 0; i < ndims; i++) {
        int d = td_normalize_dim(op, dims[i], x->ndim);
        if (d < 0)
            return -1;
        if (x->ndim == 0)
            continue; /* dim 0 or -1 of a 0-dim tensor names the tensor itself */
        if (mask & (1 << d))
            return td_error("%s: dim %d appears more than once in the dims list", op, d);
        mask |= 1 << d;
    }
    return mask;
}
