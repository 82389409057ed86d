/*
 * elementwise.c — unary and binary elementwise ops, where and cast: argument checks, PyTorch
 * promotion and broadcasting, explicit casts of operands to the computation dtype (so kernels
 * and the jit only ever see one dtype per op), then the dispatcher.
 */
#include <stdio.h>

#include "dispatch.h"

/* The device the op runs on. Wrapped numbers and 0-dim tensors in host memory go with any
 * device (the device copies them over); other operands on two devices are an error naming both. */
static tide_device *device_of(const char *op, tide_tensor *const *ts, const char *const *names,
                              int n)
{
    int first = -1;
    for (int i = 0; i < n; i++) {
        if ((ts[i]->flags & TD_WRAPPED_NUMBER) ||
            (ts[i]->ndim == 0 && ts[i]->device->host_buffers))
            continue;
        if (first < 0) {
            first = i;
        } else if (ts[i]->device != ts[first]->device) {
            td_error("%s: the %s is on %s but the %s is on %s; move one with to()", op,
                     names[first], ts[first]->device->name, names[i], ts[i]->device->name);
            return NULL;
        }
    }
    if (first >= 0)
        return ts[first]->device;
    for (int i = 0; i < n; i++) /* all scalars: a 0-dim tensor's device, else the CPU */
        if (!(ts[i]->flags & TD_WRAPPED_NUMBER))
            return ts[i]->device;
    return ts[0]->device;
}

/* x converted to dtype (a new reference either way). */
static tide_tensor *as_dtype(const tide_tensor *x, tide_dtype dtype)
{
    return tide_cast(x, dtype);
}

static bool float_only(tide_op op)
{
    switch (op) {
    case TIDE_OP_EXP: case TIDE_OP_LOG: case TIDE_OP_SQRT: case TIDE_OP_RSQRT:
    case TIDE_OP_SIN: case TIDE_OP_COS: case TIDE_OP_TANH: case TIDE_OP_SIGMOID:
    case TIDE_OP_RECIPROCAL: case TIDE_OP_ERF: case TIDE_OP_LOG1P: case TIDE_OP_EXPM1:
    case TIDE_OP_LOG2: case TIDE_OP_TAN: case TIDE_OP_ASIN: case TIDE_OP_ACOS: case TIDE_OP_ATAN:
    case TIDE_OP_SINH: case TIDE_OP_COSH: case TIDE_OP_GELU:
        return true;
    default:
        return false;
    }
}

static tide_tensor *unary(tide_op op, const tide_tensor *x)
{
    const char *name = tide_op_name(op);
    if (td_check_tensor(name, "input", x) < 0)
        return NULL;
    tide_dtype dt = (tide_dtype)x->dtype;
    bool is_int = !tide_dtype_is_floating(dt);
    if (dt == TIDE_BOOL && (op == TIDE_OP_NEG || op == TIDE_OP_ABS || op == TIDE_OP_RELU)) {
        td_error("%s: not supported for bool tensors%s", name,
                 op == TIDE_OP_NEG ? "; use logical_not" : "");
        return NULL;
    }
    /* Rounding an integer changes nothing, and the sign of a bool is itself: a copy. */
    if (is_int && (op == TIDE_OP_FLOOR || op == TIDE_OP_CEIL || op == TIDE_OP_ROUND ||
                   op == TIDE_OP_TRUNC ||
                   (op == TIDE_OP_SIGN && dt == TIDE_BOOL)))
        return tide_clone(x);
    tide_tensor *arg = (tide_tensor *)x;
    if (is_int && float_only(op)) {
        dt = TIDE_FLOAT32; /* PyTorch: integer inputs of float functions give the default */
        arg = as_dtype(x, dt);
        if (!arg)
            return NULL;
    } else {
        tide_retain(arg);
    }
    td_meta meta = {x->ndim, {0}, op == TIDE_OP_LOGICAL_NOT ? TIDE_BOOL : dt, x->device};
    for (int i = 0; i < x->ndim; i++)
        meta.shape[i] = x->shape[i];
    tide_tensor *out = td_dispatch(op, &meta, &arg, 1, NULL);
    tide_release(arg);
    return out;
}

#define DEFINE_UNARY(id, name)                                                                     \
    tide_tensor *tide_##name(const tide_tensor *x) { return unary(TIDE_OP_##id, x); }
TIDE_UNARY_PLAIN_OPS(DEFINE_UNARY)
#undef DEFINE_UNARY

tide_tensor *td_gelu_exact(const tide_tensor *x) { return unary(TIDE_OP_GELU, x); }

static bool is_comparison(tide_op op)
{
    return op >= TIDE_OP_EQ && op <= TIDE_OP_LOGICAL_OR;
}

/* Broadcasts the n inputs' shapes into meta, or sets an error naming op and every shape. */
static int broadcast_all(const char *op, tide_tensor *const *ts, int n, td_meta *meta)
{
    meta->ndim = 0;
    for (int i = 0; i < n; i++) {
        int64_t shape[TIDE_MAX_DIMS];
        int nd;
        if (td_broadcast_shape(meta->ndim, meta->shape, ts[i]->ndim, ts[i]->shape, &nd, shape) <
            0) {
            char msg[400];
            int len = snprintf(msg, sizeof msg, "%s: shapes", op);
            for (int k = 0; k < n && len < (int)sizeof msg; k++) {
                char s[160];
                len += snprintf(msg + len, sizeof msg - (size_t)len, "%s %s",
                                k == 0 ? "" : (k == n - 1 ? " and" : ","),
                                td_shape_str(s, sizeof s, ts[k]->ndim, ts[k]->shape));
            }
            return td_error("%s cannot be broadcast together", msg);
        }
        meta->ndim = nd;
        for (int d = 0; d < nd; d++)
            meta->shape[d] = shape[d];
    }
    return 0;
}

static tide_tensor *binary(tide_op op, const tide_tensor *a, const tide_tensor *b)
{
    const char *name = tide_op_name(op);
    if (td_check_tensor(name, "first input", a) < 0 ||
        td_check_tensor(name, "second input", b) < 0)
        return NULL;
    tide_tensor *in[2] = {(tide_tensor *)a, (tide_tensor *)b};
    tide_dtype ct = td_result_type(in, 2);
    if (ct == TIDE_BOOL && (op == TIDE_OP_SUB || op == TIDE_OP_POW || op == TIDE_OP_FMOD ||
                            op == TIDE_OP_FLOOR_DIVIDE || op == TIDE_OP_REMAINDER)) {
        td_error("%s: not supported for bool tensors%s", name,
                 op == TIDE_OP_SUB ? "; use logical_xor or logical_and with logical_not" : "");
        return NULL;
    }
    if ((op == TIDE_OP_DIV || op == TIDE_OP_ATAN2) && !tide_dtype_is_floating(ct))
        ct = TIDE_FLOAT32; /* true division; atan2 of integers is a float, as PyTorch */
    td_meta meta;
    if (broadcast_all(name, in, 2, &meta) < 0)
        return NULL;
    static const char *const names[] = {"first input", "second input"};
    meta.device = device_of(name, in, names, 2);
    if (!meta.device)
        return NULL;
    meta.dtype = is_comparison(op) ? TIDE_BOOL : ct;
    tide_tensor *args[2];
    for (int i = 0; i < 2; i++) {
        args[i] = in[i]->dtype == ct ? tide_retain(in[i]) : as_dtype(in[i], ct);
        if (!args[i]) {
            if (i)
                tide_release(args[0]);
            return NULL;
        }
    }
    tide_tensor *out = td_dispatch(op, &meta, args, 2, NULL);
    tide_release(args[0]);
    tide_release(args[1]);
    return out;
}

#define DEFINE_BINARY(id, name)                                                                    \
    tide_tensor *tide_##name(const tide_tensor *a, const tide_tensor *b)                          \
    {                                                                                              \
        return binary(TIDE_OP_##id, a, b);                                                         \
    }
TIDE_BINARY_OPS(DEFINE_BINARY)
#undef DEFINE_BINARY

static tide_tensor *binary_scalar(tide_op op, const tide_tensor *a, double b)
{
    if (td_check_tensor(tide_op_name(op), "first input", a) < 0)
        return NULL;
    tide_tensor *s = tide_number(b);
    if (!s)
        return NULL;
    tide_tensor *out = binary(op, a, s);
    tide_release(s);
    return out;
}

tide_tensor *tide_add_scalar(const tide_tensor *a, double b) { return binary_scalar(TIDE_OP_ADD, a, b); }
tide_tensor *tide_sub_scalar(const tide_tensor *a, double b) { return binary_scalar(TIDE_OP_SUB, a, b); }
tide_tensor *tide_mul_scalar(const tide_tensor *a, double b) { return binary_scalar(TIDE_OP_MUL, a, b); }
tide_tensor *tide_div_scalar(const tide_tensor *a, double b) { return binary_scalar(TIDE_OP_DIV, a, b); }
tide_tensor *tide_pow_scalar(const tide_tensor *a, double b) { return binary_scalar(TIDE_OP_POW, a, b); }

tide_tensor *tide_where(const tide_tensor *cond, const tide_tensor *a, const tide_tensor *b)
{
    if (td_check_tensor("where", "condition", cond) < 0 ||
        td_check_tensor("where", "first input", a) < 0 ||
        td_check_tensor("where", "second input", b) < 0)
        return NULL;
    tide_tensor *all[3] = {(tide_tensor *)cond, (tide_tensor *)a, (tide_tensor *)b};
    td_meta meta;
    if (broadcast_all("where", all, 3, &meta) < 0)
        return NULL;
    tide_dtype ct = td_result_type(all + 1, 2);
    meta.dtype = ct;
    static const char *const names[] = {"condition", "first input", "second input"};
    meta.device = device_of("where", all, names, 3);
    if (!meta.device)
        return NULL;
    tide_tensor *args[3] = {
        cond->dtype == TIDE_BOOL ? tide_retain(all[0]) : as_dtype(cond, TIDE_BOOL),
        a->dtype == ct ? tide_retain(all[1]) : as_dtype(a, ct),
        b->dtype == ct ? tide_retain(all[2]) : as_dtype(b, ct),
    };
    tide_tensor *out = NULL;
    if (args[0] && args[1] && args[2])
        out = td_dispatch(TIDE_OP_WHERE, &meta, args, 3, NULL);
    for (int i = 0; i < 3; i++)
        tide_release(args[i]);
    return out;
}

tide_tensor *tide_cast(const tide_tensor *x, tide_dtype dtype)
{
    if (td_check_tensor("cast", "input", x) < 0)
        return NULL;
    if (!td_dtype_valid(dtype)) {
        td_error("cast: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (x->dtype == dtype)
        return tide_retain((tide_tensor *)x);
    td_meta meta = {x->ndim, {0}, dtype, x->device};
    for (int i = 0; i < x->ndim; i++)
        meta.shape[i] = x->shape[i];
    tide_tensor *in = (tide_tensor *)x;
    return td_dispatch(TIDE_OP_CAST, &meta, &in, 1, NULL);
}
