/*
 * vk_run.c — running one primitive on the Vulkan device: plan the operands (broadcast strides,
 * merged dims, bindings at aligned offsets) and record the shader's dispatch, or, for what has
 * no shader yet (see README.md), hand it to vk_fallback.c with the reason. Elementwise ops,
 * movement, reductions and matmul are here; pooling, convolution and indexing in vk_run_nn.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define BIND_ALIGN 32 /* bindings start on a 32-byte boundary: u64vec4, vec4 and uint views work */

/* why the last attempt on this thread declined to use a shader: per thread, since each Vulkan
 * device has a lock of its own and two devices may run ops at once */
static _Thread_local char why_not[200];

static int decline(const char *fmt, const char *arg)
{
    snprintf(why_not, sizeof why_not, fmt, arg);
    return 0;
}

int td_vk_decline(const char *fmt, const char *arg) { return decline(fmt, arg); }

/* Whether t is on the device of s (else on the CPU: the fallback and uploads read it). */
static bool on_device(const vk_state *s, const tide_tensor *t) { return t->device->state == s; }

static int vk_dtype(int dt)
{
    switch (dt) {
    case TIDE_FLOAT32: return (int)VK_DT_F32;
    case TIDE_INT32: return (int)VK_DT_I32;
    case TIDE_UINT8: return (int)VK_DT_U8;
    case TIDE_BOOL: return (int)VK_DT_BOOL;
    case TIDE_INT64: return (int)VK_DT_I64;
    case TIDE_FLOAT64: return (int)VK_DT_F64;
    case TIDE_FLOAT16: return (int)VK_DT_F16;
    case TIDE_BFLOAT16: return (int)VK_DT_BF16;
    default: return -1;
    }
}

void td_vk_span(const tide_tensor *t, int nd, const int64_t *shape, const int64_t *st,
                int64_t *lo, int64_t *hi)
{
    *lo = *hi = t->offset;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0) {
            *lo = *hi = t->offset;
            return;
        }
        int64_t e = (shape[d] - 1) * st[d];
        if (e < 0)
            *lo += e;
        else
            *hi += e;
    }
}

/* ---- operands -------------------------------------------------------------------------------- */

typedef vk_operand operand;

static void release_operands(vk_state *s, operand *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (ops[i].upload) {
            td_vk_free_locked(s, ops[i].upload);
            ops[i].upload = NULL;
        }
}

/* Binds t read with (shape, strides). A host tensor (a wrapped number, say) is copied into the
 * command stream first. 1 bound, 0 cannot (too large for one binding), -1 error. */
static int bind(vk_state *s, tide_tensor *t, int nd, const int64_t *shape, const int64_t *st,
                operand *op)
{
    op->upload = NULL;
    int64_t lo, hi;
    td_vk_span(t, nd, shape, st, &lo, &hi);
    size_t es = td_dtype_sizes[t->dtype];
    if (hi - lo >= INT32_MAX / 2)
        return decline("an operand spans more than 2^30 elements%s", "");
    if (!on_device(s, t)) {
        const char *data = td_tensor_data(t);
        if (!data)
            return td_error("vulkan: an operand on %s has no host data", t->device->name);
        size_t nbytes = (size_t)(hi - lo + 1) * es, padded = (nbytes + 3) & ~(size_t)3;
        if (padded > s->max_binding)
            return decline("an operand is larger than one binding%s", "");
        vk_buf *u = td_vk_alloc_locked(s, padded);
        if (!u)
            return td_error("vulkan: out of device memory for a %zu-byte operand", nbytes);
        const char *src = data + (lo - t->offset) * (int64_t)es;
        char small[64];
        const void *from = src;
        char *heap = NULL;
        if (padded != nbytes) {
            char *dst = padded <= sizeof small ? small : (heap = td_calloc(1, padded));
            if (!dst) {
                td_vk_free_locked(s, u);
                return td_error("vulkan: out of memory");
            }
            memset(dst, 0, padded);
            memcpy(dst, src, nbytes);
            from = dst;
        }
        int rc = td_vk_write_locked(s, u, 0, from, padded);
        free(heap);
        if (rc < 0) {
            td_vk_free_locked(s, u);
            return -1;
        }
        op->upload = u;
        op->b = (vk_binding){u->block->buffer, u->offset, (padded + 31) & ~(size_t)31};
        op->base = (int32_t)(t->offset - lo);
        return 1;
    }
    vk_buf *h = t->storage->buffer;
    size_t align = s->offset_align > BIND_ALIGN ? s->offset_align : BIND_ALIGN;
    size_t first = h->offset + (size_t)lo * es, end = h->offset + (size_t)(hi + 1) * es;
    size_t off = first - first % align;
    size_t range = (end - off + 31) & ~(size_t)31;
    if (off + range > h->block->size)
        range = h->block->size - off;
    if (range > s->max_binding)
        return decline("an operand is larger than one storage-buffer binding%s", "");
    op->b = (vk_binding){h->block->buffer, off, range};
    op->base = (int32_t)((h->offset + (size_t)t->offset * es - off) / es);
    return 1;
}

int td_vk_bind_operand(vk_state *s, tide_tensor *t, int nd, const int64_t *shape,
                       const int64_t *st, vk_operand *op)
{
    return bind(s, t, nd, shape, st, op);
}

void td_vk_release_operands(vk_state *s, vk_operand *ops, int n) { release_operands(s, ops, n); }

/* ---- elementwise ------------------------------------------------------------------------------ */

typedef struct ew_params {
    uint32_t n, ndim, op, nin;
    uint32_t out_dt, in_dt[3];
    int32_t shape[8];
    int32_t out_st[8];
    int32_t in_st[3][8];
    int32_t out_base, in_base[3];
    uint32_t bits, out_contig, bits_hi, pad0; /* bits_hi: eltwise64 only */
} ew_params;

typedef struct ew4_params {
    uint32_t n, op, nin, pad0;
    uint32_t scalar[2];
    int32_t in_base[2];
    int32_t out_base;
} ew4_params;

static uint32_t vk_opcode(tide_op op)
{
    static const uint32_t codes[] = {
        [TIDE_OP_NEG] = VK_OP_NEG, [TIDE_OP_ABS] = VK_OP_ABS, [TIDE_OP_EXP] = VK_OP_EXP,
        [TIDE_OP_LOG] = VK_OP_LOG, [TIDE_OP_SQRT] = VK_OP_SQRT, [TIDE_OP_RSQRT] = VK_OP_RSQRT,
        [TIDE_OP_SIN] = VK_OP_SIN, [TIDE_OP_COS] = VK_OP_COS, [TIDE_OP_TANH] = VK_OP_TANH,
        [TIDE_OP_SIGMOID] = VK_OP_SIGMOID, [TIDE_OP_RELU] = VK_OP_RELU,
        [TIDE_OP_FLOOR] = VK_OP_FLOOR, [TIDE_OP_CEIL] = VK_OP_CEIL, [TIDE_OP_ROUND] = VK_OP_ROUND,
        [TIDE_OP_SIGN] = VK_OP_SIGN, [TIDE_OP_RECIPROCAL] = VK_OP_RECIPROCAL,
        [TIDE_OP_LOGICAL_NOT] = VK_OP_NOT, [TIDE_OP_ERF] = VK_OP_ERF, [TIDE_OP_ADD] = VK_OP_ADD,
        [TIDE_OP_SUB] = VK_OP_SUB,
        [TIDE_OP_MUL] = VK_OP_MUL, [TIDE_OP_DIV] = VK_OP_DIV, [TIDE_OP_POW] = VK_OP_POW,
        [TIDE_OP_MAXIMUM] = VK_OP_MAXIMUM, [TIDE_OP_MINIMUM] = VK_OP_MINIMUM,
        [TIDE_OP_FLOOR_DIVIDE] = VK_OP_FLOORDIV, [TIDE_OP_REMAINDER] = VK_OP_REMAINDER,
        [TIDE_OP_EQ] = VK_OP_EQ, [TIDE_OP_NE] = VK_OP_NE, [TIDE_OP_LT] = VK_OP_LT,
        [TIDE_OP_LE] = VK_OP_LE, [TIDE_OP_GT] = VK_OP_GT, [TIDE_OP_GE] = VK_OP_GE,
        [TIDE_OP_LOGICAL_AND] = VK_OP_AND, [TIDE_OP_LOGICAL_OR] = VK_OP_OR,
        [TIDE_OP_WHERE] = VK_OP_WHERE, [TIDE_OP_CAST] = VK_OP_CAST, [TIDE_OP_COPY] = VK_OP_CAST,
        [TIDE_OP_FILL] = VK_OP_FILL, [TIDE_OP_LOG1P] = VK_OP_LOG1P, [TIDE_OP_EXPM1] = VK_OP_EXPM1,
        [TIDE_OP_LOG2] = VK_OP_LOG2, [TIDE_OP_TAN] = VK_OP_TAN, [TIDE_OP_ASIN] = VK_OP_ASIN,
        [TIDE_OP_ACOS] = VK_OP_ACOS, [TIDE_OP_ATAN] = VK_OP_ATAN, [TIDE_OP_SINH] = VK_OP_SINH,
        [TIDE_OP_COSH] = VK_OP_COSH, [TIDE_OP_TRUNC] = VK_OP_TRUNC, [TIDE_OP_ATAN2] = VK_OP_ATAN2,
        [TIDE_OP_FMOD] = VK_OP_FMOD, [TIDE_OP_GELU] = VK_OP_GELU,
    };
    return codes[op];
}

uint32_t td_vk_opcode(tide_op op) { return vk_opcode(op); }

int td_vk_bind_tensor(vk_state *s, tide_tensor *t, vk_binding *b, int32_t *base)
{
    operand o;
    int rc = bind(s, t, t->ndim, t->shape, t->strides, &o);
    if (rc == 1 && o.upload) { /* host tensors are not bound here */
        release_operands(s, &o, 1);
        return 0;
    }
    if (rc == 1) {
        *b = o.b;
        *base = o.base;
    }
    return rc;
}

/* Integer arithmetic the shaders do; the rest (pow, float functions) is float-only. */
static bool int_op_ok(uint32_t op)
{
    switch (op) {
    case VK_OP_POW: case VK_OP_DIV: case VK_OP_EXP: case VK_OP_LOG: case VK_OP_SQRT:
    case VK_OP_RSQRT: case VK_OP_SIN: case VK_OP_COS: case VK_OP_TANH: case VK_OP_SIGMOID:
    case VK_OP_FLOOR: case VK_OP_CEIL: case VK_OP_ROUND: case VK_OP_RECIPROCAL: case VK_OP_ERF:
    case VK_OP_LOG1P: case VK_OP_EXPM1: case VK_OP_LOG2: case VK_OP_TAN: case VK_OP_ASIN:
    case VK_OP_ACOS: case VK_OP_ATAN: case VK_OP_SINH: case VK_OP_COSH: case VK_OP_TRUNC:
    case VK_OP_GELU:
    case VK_OP_ATAN2:
        return false;
    default:
        return true;
    }
}

bool td_vk_int_op_ok(uint32_t code) { return int_op_ok(code); }

/* The bit pattern of value stored as dtype, as the CPU's fill makes it. */
static int fill_bits(double value, tide_dtype dtype, uint32_t bits[2])
{
    tide_device *cpu = tide_cpu_device();
    int64_t one = 1;
    tide_tensor *t = td_tensor_new("fill", cpu, 1, &one, dtype);
    if (!t)
        return -1;
    tide_attrs a = {.values = {value}};
    int rc = cpu->run(cpu, TIDE_OP_FILL, t, NULL, 0, &a);
    bits[0] = bits[1] = 0;
    if (rc == 0)
        memcpy(bits, td_tensor_data(t), td_dtype_sizes[dtype]);
    tide_release(t);
    return rc;
}

/* out = op(in...) (or the fill/copy into out's view). 1 done, 0 no shader, -1 error. */
/* What run_eltwise works out before binding: the dtype codes, and every operand's strides over
 * out's shape (0: out, k + 1: in[k]), then with dims merged (innermost first). */
typedef struct ew_plan {
    uint32_t op;
    int odt, idt[3];
    bool wide; /* a 64-bit operand: the eltwise64 shader */
    bool half; /* a float16/bfloat16 operand (cast, copy, fill): the eltwise16 shader */
    int64_t n;
    int m; /* merged dims */
    int64_t st[4][TIDE_MAX_DIMS];
    int64_t ms[TIDE_MAX_DIMS], mst[4][TIDE_MAX_DIMS];
} ew_plan;

static int run_eltwise(vk_state *s, tide_op top, tide_tensor *out, tide_tensor *const *in,
                       int nin, const tide_attrs *attrs);

/* Whether the shaders have op on these dtypes: 1, or 0 (declined, why_not says why). */
static int ew_check(vk_state *s, tide_op top, tide_tensor *out, tide_tensor *const *in, int nin,
                    ew_plan *e)
{
    uint32_t op = e->op = vk_opcode(top);
    int odt = e->odt = vk_dtype(out->dtype);
    if (odt < 0)
        return decline("no shader for %s", tide_dtype_name((tide_dtype)out->dtype));
    int *idt = e->idt;
    for (int k = 0; k < nin; k++)
        if ((idt[k] = vk_dtype(in[k]->dtype)) < 0)
            return decline("no shader for %s", tide_dtype_name((tide_dtype)in[k]->dtype));
    e->half = td_vk_half_involved(out, in, nin); /* td_vk_half_plan checked the rest */
    int cdt = nin > 0 ? idt[nin == 3 ? 1 : 0] : odt; /* the computation's dtype */
    bool float_in = cdt == (int)VK_DT_F32 || cdt == (int)VK_DT_F64;
    bool arith = nin > 0 && top != TIDE_OP_WHERE && top != TIDE_OP_CAST && top != TIDE_OP_COPY;
    if (arith && !float_in && !int_op_ok(op))
        return decline("no integer shader for %s", tide_op_name(top));
    bool wide = odt == (int)VK_DT_I64 || odt == (int)VK_DT_F64;
    for (int k = 0; k < nin; k++)
        wide = wide || idt[k] == (int)VK_DT_I64 || idt[k] == (int)VK_DT_F64;
    e->wide = wide = wide && !e->half; /* half with 64 bits: vk_half.c's two steps */
    if (wide && !s->has64)
        return decline("the device has no 64-bit shader arithmetic for %s",
                       tide_dtype_name((tide_dtype)(odt >= (int)VK_DT_I64 ? out->dtype
                                                                          : in[0]->dtype)));
    if (wide && arith && cdt == (int)VK_DT_F64 &&
        (op == VK_OP_EXP || op == VK_OP_LOG || op == VK_OP_SIN || op == VK_OP_COS ||
         op == VK_OP_TANH || op == VK_OP_SIGMOID || op == VK_OP_POW || op == VK_OP_ERF ||
         (op >= VK_OP_LOG1P && op <= VK_OP_COSH) || op == VK_OP_ATAN2 || op == VK_OP_GELU))
        return decline("no float64 shader for %s", tide_op_name(top));
    if (top == TIDE_OP_COPY && on_device(s, in[0]) && in[0]->storage == out->storage)
        return decline("%s between overlapping views of one buffer", "copy");
    e->n = td_numel(out->ndim, out->shape);
    if (e->n > (int64_t)UINT32_MAX - 4096)
        return decline("more than 2^32 elements%s", "");
    return 1;
}

/* Fills e->st, then merges dims whose strides line up in every operand. 1, or 0 (declined). */
static int ew_merge_dims(tide_tensor *out, tide_tensor *const *in, int nin, ew_plan *e)
{
    int nd = out->ndim, m = 0;
    memcpy(e->st[0], out->strides, sizeof(int64_t) * (size_t)nd);
    for (int k = 0; k < nin; k++)
        td_broadcast_strides(in[k], nd, out->shape, e->st[k + 1]);
    for (int d = nd - 1; d >= 0; d--) {
        if (out->shape[d] == 1)
            continue;
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k <= nin; k++)
                merge = merge && e->st[k][d] == e->mst[k][m - 1] * e->ms[m - 1];
            if (merge) {
                e->ms[m - 1] *= out->shape[d];
                continue;
            }
        }
        e->ms[m] = out->shape[d];
        for (int k = 0; k <= nin; k++)
            e->mst[k][m] = e->st[k][d];
        m++;
    }
    if (m == 0) {
        e->ms[0] = 1;
        for (int k = 0; k <= nin; k++)
            e->mst[k][0] = 1;
        m = 1;
    }
    e->m = m;
    for (int d = 0; d < m; d++)
        for (int k = 0; k <= nin; k++)
            if (e->mst[k][d] > INT32_MAX / 2 || e->mst[k][d] < -(INT32_MAX / 2))
                return decline("strides beyond 32 bits%s", "");
    return 1;
}

/* Operands larger than one storage-buffer binding, read as one row each: in pieces. -2 when
 * the op fits one binding (or is not one row), else what run_eltwise gives. */
static int ew_in_pieces(vk_state *s, tide_op top, tide_tensor *out, tide_tensor *const *in,
                        int nin, const tide_attrs *attrs, const ew_plan *e)
{
    if (e->m != 1 || out->ndim == 0)
        return -2;
    int64_t widest = 1, n = e->n;
    for (int k = 0; k <= nin; k++) {
        int64_t st0 = e->mst[k][0] < 0 ? -e->mst[k][0] : e->mst[k][0];
        int64_t span = (st0 ? st0 : 1) * (int64_t)td_dtype_sizes[k ? in[k - 1]->dtype : out->dtype];
        if (span > widest)
            widest = span;
    }
    if ((uint64_t)n * (uint64_t)widest <= s->max_binding - 65536)
        return -2;
    int64_t piece = (int64_t)((s->max_binding / 2) / (uint64_t)widest) / 1024 * 1024;
    if (piece < 1024)
        return decline("an element stride too large for one binding%s", "");
    for (int64_t at = 0; at < n; at += piece) {
        int64_t len = n - at < piece ? n - at : piece;
        tide_tensor parts[4], *pin[3];
        for (int k = 0; k <= nin; k++) {
            tide_tensor *t = k ? in[k - 1] : out;
            parts[k] = *t;
            parts[k].ndim = 1;
            parts[k].shape[0] = len;
            parts[k].strides[0] = e->mst[k][0];
            parts[k].offset = t->offset + at * e->mst[k][0];
            if (k)
                pin[k - 1] = &parts[k];
        }
        int rc = run_eltwise(s, top, &parts[0], pin, nin, attrs);
        if (rc != 1)
            return rc;
    }
    return 1;
}

/* float32 operands each contiguous or one scalar: the vec4 shader (8 floats per access where
 * the bases allow). -2 when it does not apply, else 0 or -1. */
static int ew_vec4(vk_state *s, tide_op top, const ew_plan *e, int nin, const operand *ops,
                   const vk_binding *b, bool out_contig)
{
    int m = e->m;
    bool vec4 = out_contig && m == 1 && e->odt == (int)VK_DT_F32 && nin >= 1 && nin <= 2 &&
                top != TIDE_OP_WHERE && (top == TIDE_OP_CAST || top == TIDE_OP_COPY ||
                                         tide_op_is_unary(top) || tide_op_is_binary(top));
    ew4_params p4 = {.n = (uint32_t)e->n, .op = e->op, .nin = (uint32_t)nin,
                     .out_base = ops[0].base};
    uint32_t spec = e->op;
    bool v8 = s->has64 && ops[0].base % 8 == 0;
    for (int k = 0; k < nin && vec4; k++) {
        bool scalar = true, contig = m == 1 && e->mst[k + 1][0] == 1 && ops[k + 1].base % 4 == 0;
        for (int d = 0; d < m; d++)
            scalar = scalar && e->mst[k + 1][d] == 0;
        vec4 = e->idt[k] == (int)VK_DT_F32 && (scalar || contig);
        v8 = v8 && (scalar || ops[k + 1].base % 8 == 0);
        p4.scalar[k] = scalar;
        p4.in_base[k] = ops[k + 1].base;
        if (scalar)
            spec |= 128u << k;
    }
    if (!vec4)
        return -2;
    static int sh4 = -2, sh8 = -2;
    if (sh4 == -2) {
        sh4 = td_vk_shader_index("eltwise_vec4");
        sh8 = td_vk_shader_index("eltwise_v8");
    }
    uint64_t per_group = v8 ? 2048 : 1024;
    return td_vk_dispatch(s, v8 ? sh8 : sh4, spec, &p4, sizeof p4, b, nin + 1,
                          ((uint64_t)e->n + per_group - 1) / per_group);
}

/* Any layout, any dtype the shaders have: the eltwise (or eltwise64) shader. 0 or -1. */
static int ew_general(vk_state *s, tide_op top, tide_tensor *out, const tide_attrs *attrs,
                      const ew_plan *e, int nin, const operand *ops, const vk_binding *b,
                      bool out_contig)
{
    ew_params p;
    memset(&p, 0, sizeof p);
    p.n = (uint32_t)e->n;
    p.ndim = (uint32_t)e->m;
    p.op = e->op;
    p.nin = (uint32_t)nin;
    p.out_dt = (uint32_t)e->odt;
    p.out_base = ops[0].base;
    p.out_contig = out_contig;
    for (int d = 0; d < e->m; d++) {
        p.shape[d] = (int32_t)e->ms[d];
        p.out_st[d] = (int32_t)e->mst[0][d];
        for (int k = 0; k < nin; k++)
            p.in_st[k][d] = (int32_t)e->mst[k + 1][d];
    }
    for (int k = 0; k < nin; k++) {
        p.in_dt[k] = (uint32_t)e->idt[k];
        p.in_base[k] = ops[k + 1].base;
    }
    if (top == TIDE_OP_FILL) {
        uint32_t bits[2] = {0, 0};
        if (fill_bits(attrs->values[0], (tide_dtype)out->dtype, bits) < 0)
            return -1;
        p.bits = bits[0];
        p.bits_hi = bits[1];
    }
    static int sh = -2, sh64 = -2, sh16 = -2;
    if (sh == -2) {
        sh = td_vk_shader_index("eltwise");
        sh64 = td_vk_shader_index("eltwise64");
        sh16 = td_vk_shader_index("eltwise16");
    }
    return td_vk_dispatch(s, e->half ? sh16 : e->wide ? sh64 : sh, e->op, &p, sizeof p, b, nin + 1,
                          ((uint64_t)e->n + 1023) / 1024);
}

static int run_eltwise(vk_state *s, tide_op top, tide_tensor *out, tide_tensor *const *in,
                       int nin, const tide_attrs *attrs)
{
    if (td_vk_half_involved(out, in, nin)) {
        int hr = td_vk_half_plan(s, top, out, in);
        if (hr != -2)
            return hr;
    }
    ew_plan e;
    memset(&e, 0, sizeof e);
    int rc = ew_check(s, top, out, in, nin, &e);
    if (rc == 1)
        rc = ew_merge_dims(out, in, nin, &e);
    if (rc != 1)
        return rc;
    rc = ew_in_pieces(s, top, out, in, nin, attrs, &e);
    if (rc != -2)
        return rc;
    operand ops[4];
    memset(ops, 0, sizeof ops);
    rc = bind(s, out, out->ndim, out->shape, e.st[0], &ops[0]);
    for (int k = 0; k < nin && rc == 1; k++)
        rc = bind(s, in[k], out->ndim, out->shape, e.st[k + 1], &ops[k + 1]);
    if (rc != 1) {
        release_operands(s, ops, nin + 1);
        return rc;
    }
    bool out_contig = td_is_contiguous(out) && ops[0].base % 4 == 0;
    if ((e.odt == (int)VK_DT_U8 || e.odt == (int)VK_DT_BOOL) && !out_contig) {
        release_operands(s, ops, nin + 1);
        return decline("a %s output that is not contiguous", tide_dtype_name((tide_dtype)out->dtype));
    }
    vk_binding b[4];
    for (int k = 0; k <= nin; k++)
        b[k] = ops[k].b;
    rc = ew_vec4(s, top, &e, nin, ops, b, out_contig);
    if (rc == -2)
        rc = ew_general(s, top, out, attrs, &e, nin, ops, b, out_contig);
    release_operands(s, ops, nin + 1);
    return rc < 0 ? -1 : 1;
}

int td_vk_eltwise(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                  const tide_attrs *attrs)
{
    return run_eltwise(s, op, out, in, nin, attrs);
}

/* ---- copying movement: cat, pad and flip as copies between views --------------------------- */

static tide_tensor view_of(const tide_tensor *t, const int64_t *shape, const int64_t *strides,
                           int64_t offset)
{
    tide_tensor v = *t;
    memcpy(v.shape, shape, sizeof v.shape);
    memcpy(v.strides, strides, sizeof v.strides);
    v.offset = offset;
    return v;
}

static int copy_view(vk_state *s, tide_tensor *dst, tide_tensor *src)
{
    if (td_numel(dst->ndim, dst->shape) == 0)
        return 1;
    return run_eltwise(s, TIDE_OP_COPY, dst, &src, 1, NULL);
}

static int run_cat(vk_state *s, tide_tensor *out, tide_tensor *const *xs, int n, int dim)
{
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (xs[i]->ndim != out->ndim) /* a 1-D empty tensor, skipped as in PyTorch */
            continue;
        int64_t shape[TIDE_MAX_DIMS];
        memcpy(shape, out->shape, sizeof shape);
        shape[dim] = xs[i]->shape[dim];
        tide_tensor part = view_of(out, shape, out->strides, out->offset + at * out->strides[dim]);
        int rc = copy_view(s, &part, xs[i]);
        if (rc != 1)
            return rc;
        at += xs[i]->shape[dim];
    }
    return 1;
}

static int run_pad(vk_state *s, tide_tensor *out, tide_tensor *x, const tide_attrs *a)
{
    bool grows = false;
    int64_t shape[TIDE_MAX_DIMS] = {0}, out_off = out->offset, x_off = x->offset;
    for (int d = 0; d < x->ndim; d++) {
        int64_t before = a->ints[2 * d], after = a->ints[2 * d + 1];
        grows |= before > 0 || after > 0;
        int64_t skip_front = before < 0 ? -before : 0, skip_back = after < 0 ? -after : 0;
        shape[d] = x->shape[d] - skip_front - skip_back;
        if (shape[d] < 0)
            shape[d] = 0;
        x_off += skip_front * x->strides[d];
        out_off += (before > 0 ? before : 0) * out->strides[d];
    }
    if (grows) {
        tide_attrs fill = {.values = {a->values[0]}};
        int rc = run_eltwise(s, TIDE_OP_FILL, out, NULL, 0, &fill);
        if (rc != 1)
            return rc;
    }
    tide_tensor dst = view_of(out, shape, out->strides, out_off);
    tide_tensor src = view_of(x, shape, x->strides, x_off);
    return copy_view(s, &dst, &src);
}

static int run_flip(vk_state *s, tide_tensor *out, tide_tensor *x, const tide_attrs *a)
{
    int64_t strides[TIDE_MAX_DIMS] = {0}, offset = x->offset;
    memcpy(strides, x->strides, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < a->nints; i++) {
        int64_t d = a->ints[i];
        if (x->shape[d] > 0)
            offset += (x->shape[d] - 1) * strides[d];
        strides[d] = -strides[d];
    }
    tide_tensor src = view_of(x, x->shape, strides, offset);
    return copy_view(s, out, &src);
}

/* ---- reductions ------------------------------------------------------------------------------- */

typedef struct red_params {
    uint32_t nout, nred, op, mode;
    uint32_t nkept, nreduced, chunk, nchunks;
    int32_t kshape[8], kst[8];
    int32_t rshape[8], rst[8];
    int32_t in_base, in_dt, out_dt, pad0; /* dtypes: the 64-bit shaders only */
} red_params;

static int red_dispatch(vk_state *s, int sh, red_params *p, const vk_binding *out,
                        const vk_binding *in)
{
    vk_binding b[2] = {*out, *in};
    uint64_t groups = p->mode == 1 ? ((uint64_t)p->nout + 255) / 256
                                   : (uint64_t)p->nout * p->nchunks;
    return td_vk_dispatch(s, sh, p->op, p, sizeof *p, b, 2, groups);
}

static void choose_mode(red_params *p, bool arg)
{
    p->nchunks = 1;
    p->chunk = p->nred;
    if (p->nout >= 1024 && p->nred <= 256) {
        p->mode = 1;
        return;
    }
    p->mode = 0;
    if (!arg && p->nout < 256 && p->nred >= 16384) { /* few long reductions: split them */
        uint32_t want = (256 + p->nout - 1) / p->nout, most = (p->nred + 4095) / 4096;
        p->nchunks = want < most ? want : most;
        p->chunk = (p->nred + p->nchunks - 1) / p->nchunks;
    }
}

/* p's kept and reduced dims of x (size-1 dims dropped), innermost first; their counts in
 * p->nout and p->nred. 1, or 0 (declined). */
static int red_dims(const tide_tensor *x, int red_mask, red_params *p)
{
    uint64_t nout = 1, nred = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (x->shape[d] == 1)
            continue;
        if (x->strides[d] > INT32_MAX / 2 || x->strides[d] < -(INT32_MAX / 2))
            return decline("strides beyond 32 bits%s", "");
        if (red_mask & (1 << d)) {
            p->rshape[p->nreduced] = (int32_t)x->shape[d];
            p->rst[p->nreduced++] = (int32_t)x->strides[d];
            nred *= (uint64_t)x->shape[d];
        } else {
            p->kshape[p->nkept] = (int32_t)x->shape[d];
            p->kst[p->nkept++] = (int32_t)x->strides[d];
            nout *= (uint64_t)x->shape[d];
        }
    }
    if (nred == 0 || nout == 0)
        return decline("an empty reduction%s", "");
    if (nred > UINT32_MAX / 2 || nout > UINT32_MAX / 2)
        return decline("more than 2^31 elements%s", "");
    if (p->nreduced == 0) { /* reducing size-1 dims only */
        p->nreduced = 1;
        p->rshape[0] = 1;
        p->rst[0] = 0;
    }
    p->nout = (uint32_t)nout;
    p->nred = (uint32_t)nred;
    return 1;
}

/* Two passes: partial results [nout, nchunks] (in the accumulator's width, wide_dt when not
 * float32), then a pass that reduces them into out. 0 or -1. */
static int red_two_pass(vk_state *s, int sh, int wide_dt, red_params *p, const vk_binding *out,
                        const vk_binding *in)
{
    int final_dt = p->out_dt;
    if (wide_dt)
        p->out_dt = wide_dt;
    size_t bytes = (size_t)p->nout * p->nchunks * (wide_dt ? 8 : 4);
    vk_buf *tmp = td_vk_alloc_locked(s, bytes);
    if (!tmp)
        return td_error("vulkan: out of device memory for %zu bytes of partial sums", bytes);
    vk_binding tb = {tmp->block->buffer, tmp->offset, tmp->size};
    int rc = red_dispatch(s, sh, p, &tb, in);
    if (rc == 0) {
        red_params q;
        memset(&q, 0, sizeof q);
        q.op = p->op;
        q.in_dt = wide_dt ? wide_dt : (int)VK_DT_F32;
        q.out_dt = final_dt;
        q.nout = p->nout;
        q.nred = p->nchunks;
        q.nkept = 1;
        q.kshape[0] = (int32_t)p->nout;
        q.kst[0] = (int32_t)p->nchunks;
        q.nreduced = 1;
        q.rshape[0] = (int32_t)p->nchunks;
        q.rst[0] = 1;
        choose_mode(&q, false);
        q.nchunks = 1;
        q.chunk = q.nred;
        rc = red_dispatch(s, sh, &q, out, &tb);
    }
    td_vk_free_locked(s, tmp);
    return rc;
}

static int run_reduce(vk_state *s, tide_op top, tide_tensor *out, tide_tensor *x,
                      const tide_attrs *a)
{
    bool arg = top == TIDE_OP_ARGMAX || top == TIDE_OP_ARGMIN;
    static int sh32 = -2, shi = -2, shf = -2;
    if (sh32 == -2) {
        sh32 = td_vk_shader_index("reduce");
        shi = td_vk_shader_index("reduce_i64");
        shf = td_vk_shader_index("reduce_f64");
    }
    /* float32 in "reduce"; other dtypes accumulate in int64 or double */
    int sh = sh32, wide_dt = 0;
    if (x->dtype != TIDE_FLOAT32 || (!arg && out->dtype != TIDE_FLOAT32)) {
        bool outs_ok = arg || out->dtype == TIDE_INT64 || out->dtype == TIDE_FLOAT64 ||
                       out->dtype == TIDE_INT32;
        if (!s->has64 || x->dtype == TIDE_FLOAT32 || !outs_ok)
            return decline("no reduction shader for %s", tide_dtype_name((tide_dtype)x->dtype));
        sh = x->dtype == TIDE_FLOAT64 ? shf : shi;
        wide_dt = x->dtype == TIDE_FLOAT64 ? (int)VK_DT_F64 : (int)VK_DT_I64;
    }
    int red_mask = 0;
    if (arg)
        red_mask = x->ndim ? 1 << a->ints[0] : 0;
    else
        for (int i = 0; i < a->nints; i++)
            red_mask |= 1 << a->ints[i];
    red_params p;
    memset(&p, 0, sizeof p);
    static const uint32_t codes[] = {[TIDE_OP_SUM] = VK_RED_SUM, [TIDE_OP_PROD] = VK_RED_PROD,
                                     [TIDE_OP_MAX] = VK_RED_MAX, [TIDE_OP_MIN] = VK_RED_MIN,
                                     [TIDE_OP_ARGMAX] = VK_RED_ARGMAX,
                                     [TIDE_OP_ARGMIN] = VK_RED_ARGMIN};
    p.op = codes[top];
    if (red_dims(x, red_mask, &p) != 1)
        return 0;
    p.in_dt = vk_dtype(x->dtype);
    p.out_dt = arg ? (int)VK_DT_I64 : vk_dtype(out->dtype);
    choose_mode(&p, arg);
    operand ox, oo;
    int rc = bind(s, x, x->ndim, x->shape, x->strides, &ox);
    if (rc != 1)
        return rc;
    rc = bind(s, out, out->ndim, out->shape, out->strides, &oo);
    if (rc != 1 || oo.base != 0) {
        release_operands(s, &ox, 1);
        return rc != 1 ? rc : decline("an output not at the start of its binding%s", "");
    }
    p.in_base = ox.base;
    if (p.nchunks == 1) {
        rc = red_dispatch(s, sh, &p, &oo.b, &ox.b);
    } else {
        rc = red_two_pass(s, sh, wide_dt, &p, &oo.b, &ox.b);
    }
    release_operands(s, &ox, 1);
    release_operands(s, &oo, 1);
    return rc < 0 ? -1 : 1;
}

/* ---- matmul ----------------------------------------------------------------------------------- */

typedef struct mm_params {
    uint32_t M, N, K, nbatch;
    int32_t a_sm, a_sk, b_sk, b_sn;
    int32_t a_base, b_base, ndb, pad0;
    int32_t bshape[8], a_bst[8], b_bst[8];
} mm_params;

static int run_matmul(vk_state *s, tide_tensor *out, tide_tensor *a, tide_tensor *b)
{
    if (a->dtype != TIDE_FLOAT32 || b->dtype != TIDE_FLOAT32)
        return decline("no matmul shader for %s", tide_dtype_name((tide_dtype)a->dtype));
    int nd = out->ndim;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[nd - 1];
    if (K == 0)
        return decline("matmul with K = 0%s", "");
    int64_t ashape[TIDE_MAX_DIMS], bshape[TIDE_MAX_DIMS], ast[TIDE_MAX_DIMS], bst[TIDE_MAX_DIMS];
    memcpy(ashape, out->shape, sizeof(int64_t) * (size_t)nd);
    memcpy(bshape, out->shape, sizeof(int64_t) * (size_t)nd);
    ashape[nd - 1] = K;
    bshape[nd - 2] = K;
    td_broadcast_strides(a, nd, ashape, ast);
    td_broadcast_strides(b, nd, bshape, bst);
    mm_params p;
    memset(&p, 0, sizeof p);
    p.M = (uint32_t)M;
    p.N = (uint32_t)N;
    p.K = (uint32_t)K;
    p.a_sm = (int32_t)ast[nd - 2];
    p.a_sk = (int32_t)ast[nd - 1];
    p.b_sk = (int32_t)bst[nd - 2];
    p.b_sn = (int32_t)bst[nd - 1];
    uint64_t nbatch = 1;
    for (int d = nd - 3; d >= 0; d--) {
        p.bshape[p.ndb] = (int32_t)out->shape[d];
        p.a_bst[p.ndb] = (int32_t)ast[d];
        p.b_bst[p.ndb++] = (int32_t)bst[d];
        nbatch *= (uint64_t)out->shape[d];
    }
    uint64_t gx = ((uint64_t)N + 63) / 64, gy = ((uint64_t)M + 63) / 64;
    if (gx > s->max_groups[0] || gy > s->max_groups[1] || nbatch > s->max_groups[2] ||
        (uint64_t)M * N * nbatch > INT32_MAX)
        return decline("a matmul too large for one dispatch%s", "");
    p.nbatch = (uint32_t)nbatch;
    operand oa, ob, oc;
    int rc = bind(s, a, nd, ashape, ast, &oa);
    if (rc != 1)
        return rc;
    rc = bind(s, b, nd, bshape, bst, &ob);
    if (rc != 1) {
        release_operands(s, &oa, 1);
        return rc;
    }
    rc = bind(s, out, nd, out->shape, out->strides, &oc);
    if (rc == 1 && oc.base != 0)
        rc = decline("an output not at the start of its binding%s", "");
    if (rc == 1) {
        p.a_base = oa.base;
        p.b_base = ob.base;
        static int sh = -2;
        if (sh == -2)
            sh = td_vk_shader_index("matmul");
        vk_binding bb[3] = {oc.b, oa.b, ob.b};
        rc = td_vk_dispatch3(s, sh, 0, &p, sizeof p, bb, 3, (uint32_t)gx, (uint32_t)gy,
                             (uint32_t)nbatch);
        rc = rc < 0 ? -1 : 1;
    }
    release_operands(s, &oa, 1);
    release_operands(s, &ob, 1);
    return rc;
}


/* ---- run ---------------------------------------------------------------------------------- */

int td_vk_run(tide_device *dev, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
              const tide_attrs *attrs)
{
    vk_state *s = dev->state;
    if (!s)
        return td_error("vulkan: %s has been shut down", dev->name);
    pthread_mutex_lock(&s->lock);
    why_not[0] = 0;
    int rc = 0;
    if (tide_op_is_unary(op) || tide_op_is_binary(op) || op == TIDE_OP_WHERE ||
        op == TIDE_OP_CAST || op == TIDE_OP_COPY || op == TIDE_OP_FILL)
        rc = run_eltwise(s, op, out, in, nin, attrs);
    else if (op >= TIDE_OP_SUM && op <= TIDE_OP_ARGMIN)
        rc = run_reduce(s, op, out, in[0], attrs);
    else if (op == TIDE_OP_MATMUL)
        rc = run_matmul(s, out, in[0], in[1]);
    else if (op >= TIDE_OP_MAX_POOL2D && op <= TIDE_OP_AVG_POOL2D_GRAD)
        rc = td_vk_run_pool(s, op, out, in[0], attrs);
    else if (op == TIDE_OP_CONV2D || op == TIDE_OP_CONV2D_GRAD_INPUT ||
             op == TIDE_OP_CONV2D_GRAD_WEIGHT)
        rc = td_vk_run_conv(s, op, out, in, attrs);
    else if (op == TIDE_OP_GATHER || op == TIDE_OP_INDEX_SELECT || op == TIDE_OP_SCATTER_ADD)
        rc = td_vk_run_index(s, op, out, in, attrs);
    else if (op == TIDE_OP_CAT)
        rc = run_cat(s, out, in, nin, (int)attrs->ints[0]);
    else if (op == TIDE_OP_PAD)
        rc = run_pad(s, out, in[0], attrs);
    else if (op == TIDE_OP_FLIP)
        rc = run_flip(s, out, in[0], attrs);
    else if (op == TIDE_OP_LINEAR_HALF)
        rc = decline("no %s shader: float32 x half weight runs on the CPU kernel", "linear_half");
    if (rc == 0)
        rc = td_vk_fallback(s, op, out, in, nin, attrs, why_not[0] ? why_not : "no shader yet");
    pthread_mutex_unlock(&s->lock);
    return rc < 0 ? -1 : 0;
}
