/*
 * profile_cost.c — what the profiler counts per primitive (docs/profile.md).
 *
 * Bytes moved: each operand read once and the result written once, at their element sizes; a
 * broadcast operand (stride 0) counts its distinct elements only. Caches are not modelled:
 * this is the least traffic the op needs, so GB/s against STREAM is a lower bound of the
 * bandwidth used.
 *
 * FLOPs (a multiply-add is 2):
 *   matmul, linear_half, qlinear  2·M·N·K, batches included (result [..., M, N], K = the first
 *                                 operand's last dim)
 *   conv2d                        2·N·Cout·Hout·Wout·(Cin/groups)·kh·kw; its two gradients the
 *                                 same count (each is one product of that size)
 *   sdpa                          2·Lq·Lk·(D + Dv) per batch and head (QKᵀ, then PV); softmax
 *                                 is not counted
 *   reductions, argmax/argmin, cumsum, pools, scatter_add
 *                                 one per element read
 *   elementwise (unary, binary, where), sdpa_grad
 *                                 one per result element
 *   the rest (casts, copies, fills, cat, pad, flip, gather, index_select, random, to, sort,
 *   topk, (de)quantize, views)    0: they move data
 */
#include "profile.h"

static int64_t numel_of(td_prof_shape s) { return td_numel(s.ndim, s.shape); }

static int64_t last_dim(td_prof_shape s) { return s.ndim ? s.shape[s.ndim - 1] : 1; }

/* Products: the count of the multiply-adds, times 2. */
static int64_t product_flops(int op, int64_t n, td_prof_shape out, const td_prof_shape *in)
{
    switch (op) {
    case TIDE_OP_MATMUL:
    case TIDE_OP_LINEAR_HALF:
    case TIDE_OP_QLINEAR:
        return 2 * n * last_dim(in[0]);
    case TIDE_OP_CONV2D: /* weight [Cout, Cin/groups, kh, kw] */
        return in[1].shape[0] ? 2 * n * (numel_of(in[1]) / in[1].shape[0]) : 0;
    case TIDE_OP_CONV2D_GRAD_INPUT: /* (grad_out [N, Cout, Ho, Wo], weight) */
        return in[1].shape[0] ? 2 * numel_of(in[0]) * (numel_of(in[1]) / in[1].shape[0]) : 0;
    case TIDE_OP_CONV2D_GRAD_WEIGHT: /* (x, grad_out), result the weight's shape */
        return out.shape[0] ? 2 * numel_of(in[1]) * (n / out.shape[0]) : 0;
    default: { /* SDPA: q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv] */
        int64_t d = last_dim(in[0]), lk = in[1].ndim >= 2 ? in[1].shape[in[1].ndim - 2] : 1;
        return d ? 2 * (numel_of(in[0]) / d) * lk * (d + last_dim(in[2])) : 0;
    }
    }
}

int64_t td_profile_flops(int op, td_prof_shape out, const td_prof_shape *in, int nin)
{
    int64_t n = numel_of(out);
    if (op == TIDE_OP_MATMUL || op == TIDE_OP_LINEAR_HALF || op == TIDE_OP_QLINEAR ||
        op == TIDE_OP_CONV2D || op == TIDE_OP_CONV2D_GRAD_INPUT ||
        op == TIDE_OP_CONV2D_GRAD_WEIGHT || (op == TIDE_OP_SDPA && nin >= 3))
        return nin >= 2 ? product_flops(op, n, out, in) : 0;
    if ((op >= TIDE_OP_FIRST_UNARY && op <= TIDE_OP_LAST_BINARY) || op == TIDE_OP_WHERE ||
        op == TIDE_OP_SDPA_GRAD)
        return n;
    switch (op) {
    case TIDE_OP_SUM: case TIDE_OP_PROD: case TIDE_OP_MAX: case TIDE_OP_MIN:
    case TIDE_OP_ARGMAX: case TIDE_OP_ARGMIN: case TIDE_OP_CUMSUM:
    case TIDE_OP_MAX_POOL2D: case TIDE_OP_MAX_POOL2D_INDICES: case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD:
        return nin >= 1 ? numel_of(in[0]) : n;
    case TIDE_OP_SCATTER_ADD: /* (x, index, src): one add per source element */
        return nin >= 3 ? numel_of(in[2]) : n;
    default:
        return 0;
    }
}

int64_t td_profile_bytes(const tide_tensor *t)
{
    if (!t)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] != 0)
            n *= t->shape[i];
    return n * (int64_t)td_dtype_sizes[t->dtype];
}

void td_profile_kernel_cost(int op, const tide_tensor *out, tide_tensor *const *in, int nin,
                            int64_t *bytes, int64_t *flops)
{
    td_prof_shape ins[8];
    int64_t b = td_profile_bytes(out);
    for (int k = 0; k < nin; k++) {
        b += td_profile_bytes(in[k]);
        if (k < 8)
            ins[k] = (td_prof_shape){in[k]->ndim, in[k]->shape};
    }
    *bytes = b;
    *flops = td_profile_flops(op, (td_prof_shape){out->ndim, out->shape}, ins, nin < 8 ? nin : 8);
}
