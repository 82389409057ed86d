/*
 * linear_half.c — x @ w^T for float32 x and a float16/bfloat16 weight w [N, K], as the
 * LINEAR_HALF primitive. tide's matmul promotes mixed dtypes (float32 @ bfloat16 is float32), and
 * so did this product before: the weight cast to float32 (a float32 copy written and read
 * again on every call), then sgemm. LINEAR_HALF computes the same sums (every weight widened
 * exactly; only the order of the sum differs) while a device reads the weight in its own dtype:
 * for decoding (one row) the CPU reads half the bytes of float32. The dispatcher leaves the op's
 * half operand alone (dispatch.c, needs_widening); autograd differentiates it (formulas.c), the
 * jit treats it as an opaque op as it does matmul.
 */
#include "linear_half.h"
#include "../core/log.h"

bool td_is_half_weight_product(const tide_tensor *a, const tide_tensor *b)
{
    return a->dtype == TIDE_FLOAT32 && td_dtype_is_half(b->dtype) && a->ndim <= 2 &&
           b->ndim == 2;
}

/* TIDE_LOG=blas: this path, once per half dtype (the shapes are the first call's). */
static void log_path(const tide_tensor *a, const tide_tensor *b)
{
    static unsigned seen;
    if (!td_log_enabled("blas") ||
        (__atomic_fetch_or(&seen, 1u << b->dtype, __ATOMIC_RELAXED) & (1u << b->dtype)))
        return;
    char sa[96], sb[96];
    td_log("blas", "matmul %s x %s (float32, %s) on %s: linear_half, the weight read as %s and "
           "widened in registers (no float32 copy)",
           td_shape_str(sa, sizeof sa, a->ndim, a->shape),
           td_shape_str(sb, sizeof sb, b->ndim, b->shape), tide_dtype_name((tide_dtype)b->dtype),
           a->device->name, tide_dtype_name((tide_dtype)b->dtype));
}

tide_tensor *td_matmul_half_weight(const tide_tensor *a, const tide_tensor *b)
{
    log_path(a, b);
    tide_tensor *x = a->ndim == 1 ? tide_unsqueeze(a, 0) : tide_retain((tide_tensor *)a);
    tide_tensor *w = x ? tide_transpose(b, 0, 1) : NULL; /* [N, K]: a weight's own layout */
    tide_tensor *out = NULL;
    if (w) {
        td_meta meta = {2, {x->shape[0], w->shape[0]}, TIDE_FLOAT32, a->device};
        tide_tensor *in[2] = {x, w};
        out = td_dispatch(TIDE_OP_LINEAR_HALF, &meta, in, 2, NULL);
    }
    tide_release(x);
    tide_release(w);
    if (out && a->ndim == 1) {
        tide_tensor *row = tide_squeeze(out, 0);
        tide_release(out);
        out = row;
    }
    return out;
}
