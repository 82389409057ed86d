/*
 * vk_run_nn.c — pooling, convolution and indexing on the Vulkan device (pool.comp, conv.comp,
 * index.comp): td_vk_run (vk_run.c) hands these primitives here; each plans its operands and
 * records its shader's dispatch, or declines with the reason (then vk_fallback.c runs it).
 */
#include <stdint.h>
#include <string.h>

#include "vk_internal.h"

typedef vk_operand operand;

/* ---- pooling and convolution --------------------------------------------------------------- */

typedef struct pool_params {
    uint32_t total, op, C, H;
    uint32_t W, OH, OW, cip;
    int32_t kh, kw, sh, sw;
    int32_t ph, pw, in_base, pad0;
    int32_t s[4];
} pool_params;

static bool fits32(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] > INT32_MAX / 2 || v[i] < -(INT32_MAX / 2))
            return false;
    return true;
}

/* Binds out (fresh, contiguous) and the inputs; 1, 0 (decline) or -1. */
static int bind_all(vk_state *s, tide_tensor *out, tide_tensor *const *in, int nin, operand *ops)
{
    memset(ops, 0, sizeof(operand) * (size_t)(nin + 1));
    int rc = td_vk_bind_operand(s, out, out->ndim, out->shape, out->strides, &ops[0]);
    if (rc == 1 && ops[0].base != 0)
        rc = td_vk_decline("an output not at the start of its binding%s", "");
    for (int k = 0; k < nin && rc == 1; k++)
        rc = td_vk_bind_operand(s, in[k], in[k]->ndim, in[k]->shape, in[k]->strides, &ops[k + 1]);
    if (rc != 1)
        td_vk_release_operands(s, ops, nin + 1);
    return rc;
}

int td_vk_run_pool(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *x,
                   const tide_attrs *a)
{
    if (x->dtype != TIDE_FLOAT32)
        return td_vk_decline("no pooling shader for %s", tide_dtype_name((tide_dtype)x->dtype));
    bool grad = op == TIDE_OP_AVG_POOL2D_GRAD;
    const int64_t *plane = grad ? out->shape : x->shape, *pooled = grad ? x->shape : out->shape;
    int64_t total = td_numel(out->ndim, out->shape);
    if (total > INT32_MAX / 2 || !fits32(x->strides, 4) || !fits32(a->ints, 7))
        return td_vk_decline("a pooling too large for 32-bit indices%s", "");
    pool_params p = {.total = (uint32_t)total,
                     .op = op == TIDE_OP_MAX_POOL2D ? 0 : op == TIDE_OP_MAX_POOL2D_INDICES ? 1
                                                      : op == TIDE_OP_AVG_POOL2D ? 2 : 3,
                     .C = (uint32_t)plane[1], .H = (uint32_t)plane[2], .W = (uint32_t)plane[3],
                     .OH = (uint32_t)pooled[2], .OW = (uint32_t)pooled[3],
                     .cip = a->ints[6] != 0,
                     .kh = (int32_t)a->ints[0], .kw = (int32_t)a->ints[1],
                     .sh = (int32_t)a->ints[2], .sw = (int32_t)a->ints[3],
                     .ph = (int32_t)a->ints[4], .pw = (int32_t)a->ints[5]};
    for (int d = 0; d < 4; d++)
        p.s[d] = (int32_t)x->strides[d];
    operand ops[2];
    int rc = bind_all(s, out, &x, 1, ops);
    if (rc != 1)
        return rc;
    p.in_base = ops[1].base;
    static int sh = -2;
    if (sh == -2)
        sh = td_vk_shader_index("pool");
    vk_binding b[2] = {ops[0].b, ops[1].b};
    rc = td_vk_dispatch(s, sh, p.op, &p, sizeof p, b, 2, ((uint64_t)total + 255) / 256);
    td_vk_release_operands(s, ops, 2);
    return rc < 0 ? -1 : 1;
}

typedef struct conv_params {
    uint32_t total, mode, N, C;
    uint32_t H, W, O, OH;
    uint32_t OW, KH, KW, groups;
    int32_t sh, sw, ph, pw;
    int32_t dh, dw, a_base, b_base;
    int32_t sa[4], sb[4];
} conv_params;

int td_vk_run_conv(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in,
                    const tide_attrs *a)
{
    if (in[0]->dtype != TIDE_FLOAT32 || in[1]->dtype != TIDE_FLOAT32)
        return td_vk_decline("no conv2d shader for %s", tide_dtype_name((tide_dtype)in[0]->dtype));
    /* the shapes of x, w and the conv output, whichever of them is out */
    const int64_t *x = op == TIDE_OP_CONV2D_GRAD_INPUT ? out->shape : in[0]->shape;
    const int64_t *w = op == TIDE_OP_CONV2D ? in[1]->shape
                       : op == TIDE_OP_CONV2D_GRAD_INPUT ? in[1]->shape : out->shape;
    const int64_t *y = op == TIDE_OP_CONV2D ? out->shape
                       : op == TIDE_OP_CONV2D_GRAD_INPUT ? in[0]->shape : in[1]->shape;
    int64_t total = td_numel(out->ndim, out->shape);
    if (total > INT32_MAX / 2 || !fits32(in[0]->strides, 4) || !fits32(in[1]->strides, 4) ||
        td_numel(4, x) > INT32_MAX / 2 || td_numel(4, y) > INT32_MAX / 2)
        return td_vk_decline("a convolution too large for 32-bit indices%s", "");
    conv_params p = {.total = (uint32_t)total,
                     .mode = op == TIDE_OP_CONV2D ? 0 : op == TIDE_OP_CONV2D_GRAD_INPUT ? 1 : 2,
                     .N = (uint32_t)x[0], .C = (uint32_t)x[1], .H = (uint32_t)x[2],
                     .W = (uint32_t)x[3], .O = (uint32_t)w[0], .OH = (uint32_t)y[2],
                     .OW = (uint32_t)y[3], .KH = (uint32_t)w[2], .KW = (uint32_t)w[3],
                     .groups = (uint32_t)a->ints[6],
                     .sh = (int32_t)a->ints[0], .sw = (int32_t)a->ints[1],
                     .ph = (int32_t)a->ints[2], .pw = (int32_t)a->ints[3],
                     .dh = (int32_t)a->ints[4], .dw = (int32_t)a->ints[5]};
    for (int d = 0; d < 4; d++) {
        p.sa[d] = (int32_t)in[0]->strides[d];
        p.sb[d] = (int32_t)in[1]->strides[d];
    }
    operand ops[3];
    int rc = bind_all(s, out, in, 2, ops);
    if (rc != 1)
        return rc;
    p.a_base = ops[1].base;
    p.b_base = ops[2].base;
    static int sh = -2;
    if (sh == -2)
        sh = td_vk_shader_index("conv");
    vk_binding b[3] = {ops[0].b, ops[1].b, ops[2].b};
    uint64_t groups = p.mode == 2 ? (uint64_t)total : ((uint64_t)total + 255) / 256;
    rc = td_vk_dispatch(s, sh, p.mode, &p, sizeof p, b, 3, groups);
    td_vk_release_operands(s, ops, 3);
    return rc < 0 ? -1 : 1;
}

/* ---- indexing ----------------------------------------------------------------------------------- */

typedef struct idx_params {
    uint32_t mode, n, ndim, dim;
    uint32_t bound, idx64, is_float, pad0;
    int32_t shape[8], xst[8], ist[8], sst[8];
    int32_t x_base, i_base, s_base, out_base;
} idx_params;

static int index_shader(void)
{
    static int sh = -2;
    if (sh == -2)
        sh = td_vk_shader_index("index");
    return sh;
}

/* Checks on the device that every index lies in [0, bound): 1 when all do, 0 when one does not
 * (the CPU kernel then reports which, with its usual message), -1 on error. Waits for the
 * device: the answer is needed before anything reads memory through the indices. */
static int check_indices(vk_state *s, tide_tensor *index, int64_t bound)
{
    idx_params p;
    memset(&p, 0, sizeof p);
    int64_t n = td_numel(index->ndim, index->shape);
    if (n == 0)
        return 1;
    p.mode = 0;
    p.n = (uint32_t)n;
    p.ndim = (uint32_t)(index->ndim ? index->ndim : 1);
    p.shape[0] = 1;
    for (int d = 0; d < index->ndim; d++) {
        p.shape[d] = (int32_t)index->shape[d];
        p.ist[d] = (int32_t)index->strides[d];
    }
    p.bound = (uint32_t)bound;
    p.idx64 = index->dtype == TIDE_INT64;
    operand oi;
    int rc = td_vk_bind_operand(s, index, index->ndim, index->shape, index->strides, &oi);
    if (rc != 1)
        return rc;
    p.i_base = oi.base;
    vk_buf *flag = td_vk_alloc_locked(s, 4);
    uint32_t zero = 0, got = 1;
    if (!flag) {
        td_vk_release_operands(s, &oi, 1);
        return td_error("vulkan: out of device memory");
    }
    vk_binding b[3] = {{flag->block->buffer, flag->offset, 16}, oi.b, oi.b};
    rc = td_vk_write_locked(s, flag, 0, &zero, 4);
    if (rc == 0)
        rc = td_vk_dispatch(s, index_shader(), 0, &p, sizeof p, b, 3, ((uint64_t)n + 255) / 256);
    if (rc == 0)
        rc = td_vk_read_locked(s, flag, 0, &got, 4);
    td_vk_free_locked(s, flag);
    td_vk_release_operands(s, &oi, 1);
    if (rc < 0)
        return -1;
    return got == 0 ? 1 : td_vk_decline("an index out of range (the CPU kernel names it)%s", "");
}

int td_vk_run_index(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in,
                     const tide_attrs *a)
{
    tide_tensor *x = in[0], *index = in[1], *src = op == TIDE_OP_SCATTER_ADD ? in[2] : NULL;
    int dim = (int)a->ints[0];
    if (td_dtype_sizes[x->dtype] != 4 || (src && src->dtype != x->dtype))
        return td_vk_decline("no indexing shader for %s", tide_dtype_name((tide_dtype)x->dtype));
    if (x->ndim == 0 || index->ndim == 0)
        return td_vk_decline("no indexing shader for 0-dim tensors%s", "");
    if (td_numel(out->ndim, out->shape) > INT32_MAX / 2 || !fits32(x->strides, x->ndim) ||
        !fits32(index->strides, index->ndim) || (src && !fits32(src->strides, src->ndim)))
        return td_vk_decline("indexing too large for 32-bit offsets%s", "");
    int rc = check_indices(s, index, x->shape[dim]);
    if (rc != 1)
        return rc;
    if (src) { /* out starts as a copy of x */
        rc = td_vk_eltwise(s, TIDE_OP_COPY, out, &x, 1, NULL);
        if (rc != 1)
            return rc;
    }
    idx_params p;
    memset(&p, 0, sizeof p);
    p.mode = op == TIDE_OP_GATHER ? 1 : op == TIDE_OP_INDEX_SELECT ? 2 : 3;
    p.dim = (uint32_t)dim;
    p.bound = (uint32_t)x->shape[dim];
    p.idx64 = index->dtype == TIDE_INT64;
    p.is_float = x->dtype == TIDE_FLOAT32;
    const tide_tensor *iter = op == TIDE_OP_INDEX_SELECT ? out : index;
    p.ndim = (uint32_t)iter->ndim;
    p.n = (uint32_t)td_numel(iter->ndim, iter->shape);
    for (int d = 0; d < iter->ndim; d++)
        p.shape[d] = (int32_t)iter->shape[d];
    for (int d = 0; d < x->ndim; d++)
        p.xst[d] = (int32_t)(src ? out->strides[d] : x->strides[d]);
    for (int d = 0; d < index->ndim; d++)
        p.ist[d] = (int32_t)index->strides[d];
    for (int d = 0; src && d < src->ndim; d++)
        p.sst[d] = (int32_t)src->strides[d];
    tide_tensor *ins[3] = {x, index, src};
    operand ops[4];
    rc = bind_all(s, out, ins, src ? 3 : 2, ops);
    if (rc != 1)
        return rc;
    p.x_base = ops[1].base;
    p.i_base = ops[2].base;
    p.s_base = src ? ops[3].base : 0;
    vk_binding b[4] = {ops[0].b, ops[1].b, ops[2].b, src ? ops[3].b : ops[2].b};
    rc = td_vk_dispatch(s, index_shader(), p.mode, &p, sizeof p, b, 4, ((uint64_t)p.n + 255) / 256);
    td_vk_release_operands(s, ops, src ? 4 : 3);
    return rc < 0 ? -1 : 1;
}
