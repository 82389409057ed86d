/*
 * ref_matmul.c — matmul as its definition: out[b..., i, j] = sum over k of a[b..., i, k] *
 * b[b..., k, j], batch dims broadcast (a size-1 batch dim of an operand repeats). Float
 * products and sums in double, rounded once; integers wrap in 64 bits and are truncated to the
 * dtype (the same bits as wrapping in the dtype's width). LINEAR_HALF likewise, from the
 * exactly widened half weight.
 */
#include "ref_internal.h"

int ref_matmul(tide_tensor *out, const tide_tensor *a, const tide_tensor *b)
{
    int nd = out->ndim;
    int64_t K = a->shape[nd - 1], n = ref_numel(out);
    int64_t idx[TIDE_MAX_DIMS], ia[TIDE_MAX_DIMS], ib[TIDE_MAX_DIMS];
    bool fl = ref_is_float(out->dtype);
    if (!fl && (out->dtype == TIDE_BOOL))
        return ref_no_kernel(TIDE_OP_MATMUL, out->dtype);
    for (int64_t o = 0; o < n; o++) {
        ref_unflatten(nd, out->shape, o, idx);
        for (int d = 0; d < nd - 2; d++) { /* ref_offset reads size-1 dims as broadcast */
            ia[d] = idx[d];
            ib[d] = idx[d];
        }
        ia[nd - 2] = idx[nd - 2];
        ib[nd - 1] = idx[nd - 1];
        double sf = 0;
        uint64_t si = 0;
        for (int64_t k = 0; k < K; k++) {
            ia[nd - 1] = k;
            ib[nd - 2] = k;
            int64_t ao = ref_offset(a, ia), bo = ref_offset(b, ib);
            if (fl)
                sf += ref_get_f(a, ao) * ref_get_f(b, bo);
            else
                si += (uint64_t)ref_get_i(a, ao) * (uint64_t)ref_get_i(b, bo);
        }
        if (fl)
            ref_set_f(out, ref_offset(out, idx), sf);
        else
            ref_set_i(out, ref_offset(out, idx), (int64_t)si);
    }
    return 0;
}

/* LINEAR_HALF: out[i, j] = sum over k of x[i, k] * w[j, k], x float32, w float16 or bfloat16
 * (ref_get_f widens it exactly), in double, rounded once. */
int ref_linear_half(tide_tensor *out, const tide_tensor *x, const tide_tensor *w)
{
    if (x->dtype != TIDE_FLOAT32 || out->dtype != TIDE_FLOAT32 ||
        (w->dtype != TIDE_FLOAT16 && w->dtype != TIDE_BFLOAT16))
        return ref_no_kernel(TIDE_OP_LINEAR_HALF, w->dtype);
    int64_t M = out->shape[0], N = out->shape[1], K = x->shape[1];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += ref_get_f(x, ref_offset(x, (int64_t[]){i, k})) *
                     ref_get_f(w, ref_offset(w, (int64_t[]){j, k}));
            ref_set_f(out, ref_offset(out, (int64_t[]){i, j}), s);
        }
    return 0;
}
