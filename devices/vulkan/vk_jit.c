/*
 * vk_jit.c — the jit's fusion groups on the Vulkan device (the device's jit_compile/jit_run
 * hooks, core/device.h). An elementwise group is rendered to one GLSL compute shader: each
 * invocation makes 4 consecutive elements of the group's domain, reads every outside operand
 * once per element through its strides (broadcast dims have stride 0; the strides are constants
 * of the shader), computes every member in registers with the op bodies of common.glsl (the
 * eager shaders' own code, so the results are the eager ones) and stores only the members
 * needed outside. The GLSL is compiled at run time by glslang (linked statically) into SPIR-V,
 * and the pipeline goes through the device's VkPipelineCache, which is loaded from and saved to
 * disk together with the SPIR-V of each shader, so a second process compiles nothing.
 *
 * A row group (elementwise members into float32 reductions over rows of up to 32768 elements:
 * softmax) is one shader too, a workgroup per row (emit_rows). A symbolic group (jit/group.h,
 * step 4) reads its sizes from the parameters instead: the domain, each binding's strides and
 * the row length, set per run from the bound group and the tensors, so one shader serves every
 * size; which dims broadcast and which operands are contiguous stay the plan's (its guards). A group the renderer does not
 * take (integer reductions, uint8/bool/64-bit values in memory, more than 8 tensors to bind,
 * integer ops the shaders lack) runs its members one by one through the eager shaders
 * (td_vk_run), as it would without the jit: always correct.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>

#include "../../core/strbuf.h"
#include "../../jit/group.h"
#include "vk_internal.h"

extern const char td_vk_common_glsl[]; /* generated: vk_opcodes.h + common.glsl */

#define JB_MAX (VK_MAX_BINDINGS - 1) /* tensors bound per group */
#define JS_MAX 16                    /* host scalars per group (parameters) */
#define LOCAL 256                    /* invocations per workgroup; 4 elements each */
#define TD_STR_(x) #x
#define TD_STR(x) TD_STR_(x)

/* A compiled shader, shared by every group with the same text; lives until the device goes. */
typedef struct vk_jit_entry {
    uint64_t hash;
    char *text;
    VkPipeline pipe;
    struct vk_jit_entry *next;
} vk_jit_entry;

/* What a group's code needs at run time (jit_group.code). */
typedef struct vk_jit_code {
    VkPipeline pipe; /* NULL: the members run one by one */
    int nbind;
    int bind_slot[JB_MAX]; /* slot bound at binding 1 + b */
    int nd[JB_MAX];        /* the layout the shader assumed for it */
    int64_t shape[JB_MAX][TIDE_MAX_DIMS], strides[JB_MAX][TIDE_MAX_DIMS];
    int nscal;
    int scal_slot[JS_MAX]; /* a 0-dim host tensor read into the parameters */
    char why[160];         /* why not rendered */
    int warned;
} vk_jit_code;

typedef struct jit_params {
    int32_t n;
    int32_t base[JB_MAX];
    uint32_t sc[JS_MAX];
    /* a symbolic group's sizes (std430: the same offsets in the shader's Params) */
    int32_t rowlen;
    int32_t dom[TIDE_MAX_DIMS];
    int32_t st[JB_MAX][TIDE_MAX_DIMS];
} jit_params;
#define STATIC_PARAMS offsetof(jit_params, rowlen) /* what a static group's shader reads */

/* ---- the text ---------------------------------------------------------------------------------- */

/* The layout a node's tensor has when the group runs (exec.c): outside tensors and views their
 * own, results contiguous. */
static void layout_of(const jit_plan *c, int node, int *nd, int64_t *shape, int64_t *st)
{
    const jit_node *x = &c->nodes[node];
    *nd = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * x->ndim);
    if (x->kind == JN_EXTERN || x->kind == JN_VIEW)
        memcpy(st, x->strides, sizeof(int64_t) * x->ndim);
    else
        td_contiguous_strides(x->ndim, x->shape, st);
}

static bool is_float(int dt) { return dt == TIDE_FLOAT32; }
static bool value_dtype_ok(int dt)
{
    return dt == TIDE_FLOAT32 || dt == TIDE_INT32 || dt == TIDE_BOOL;
}

static bool is_compare(int op)
{
    return op == TIDE_OP_EQ || op == TIDE_OP_NE || op == TIDE_OP_LT || op == TIDE_OP_LE ||
           op == TIDE_OP_GT || op == TIDE_OP_GE || op == TIDE_OP_LOGICAL_AND ||
           op == TIDE_OP_LOGICAL_OR || op == TIDE_OP_LOGICAL_NOT;
}

/* Whether the layout is the domain's, contiguous: element i is at index i. */
static bool is_direct(const jit_group *g, int nd, const int64_t *shape, const int64_t *st)
{
    return nd == g->ndim && memcmp(shape, g->domain, sizeof(int64_t) * (size_t)nd) == 0 &&
           td_dense_layout(nd, shape, st);
}

/* The same for a symbolic group (binding bi): the domain's sizes and the binding's strides
 * are parameters; which dims broadcast (size 1) and which are 1 in the domain are the plan's. */
static void emit_index_symbolic(td_sbuf *b, const jit_group *g, int bi, int nd,
                                const int64_t *shape)
{
    int lead = g->ndim - nd;
    td_emit(b, "0; int q = i");
    for (int d = g->ndim - 1; d >= 0; d--) {
        int td = d - lead;
        if (g->domain[d] == 1)
            continue;
        bool bcast = td < 0 || shape[td] == 1;
        if (d == 0) {
            if (!bcast)
                td_emit(b, "; r += q * P.st[%d][%d]", bi, td);
        } else {
            if (!bcast)
                td_emit(b, "; r += (q %% P.dom[%d]) * P.st[%d][%d]", d, bi, td);
            td_emit(b, "; q /= P.dom[%d]", d);
        }
    }
}

static void emit_index(td_sbuf *b, const jit_group *g, int nd, const int64_t *shape,
                       const int64_t *st)
{
    int lead = g->ndim - nd;
    if (is_direct(g, nd, shape, st)) {
        td_emit(b, "i");
        return;
    }
    td_emit(b, "0");
    int64_t inner = 1;
    for (int d = g->ndim - 1; d >= 0; d--) {
        int td = d - lead;
        int64_t s = td < 0 || shape[td] == 1 ? 0 : st[td];
        if (s != 0 && g->domain[d] > 1) {
            if (d == 0)
                td_emit(b, " + (i / %lld) * %lld", (long long)inner, (long long)s);
            else
                td_emit(b, " + ((i / %lld) %% %lld) * %lld", (long long)inner,
                     (long long)g->domain[d], (long long)s);
        }
        inner *= g->domain[d];
    }
}

static const char *vtype(int dt) { return is_float(dt) ? "vec4" : "ivec4"; }

/* Declines to render: the reason goes to the log and the fallback runs. */
static int decline(vk_jit_code *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int decline(vk_jit_code *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->why, sizeof k->why, fmt, ap);
    va_end(ap);
    return 0;
}

/* The member's value expression: 1 rendered, 0 declined. */
static int emit_member(td_sbuf *b, vk_jit_code *k, const jit_plan *c, const jit_group *g, int s)
{
    const jit_node *nd = &c->nodes[g->slots[s].node];
    int op = nd->op, dt = nd->dtype;
    int q[JIT_MAX_IN];
    for (int j = 0; j < nd->nin; j++)
        if ((q[j] = jit_slot_of(g, nd->in[j])) < 0)
            return decline(k, "an operand is not in the group");
    int xdt = nd->nin ? c->nodes[nd->in[0]].dtype : dt;
    if (!value_dtype_ok(dt) || !value_dtype_ok(xdt))
        return decline(k, "%s of %s", tide_op_name((tide_op)op), tide_dtype_name((tide_dtype)xdt));
    td_emit(b, "    %s v%d = ", vtype(dt), s);
    if (op == TIDE_OP_CAST) {
        if (is_float(xdt) == is_float(dt) && (dt != TIDE_BOOL || xdt == TIDE_BOOL))
            td_emit(b, "v%d;\n", q[0]);
        else if (dt == TIDE_BOOL)
            td_emit(b, is_float(xdt) ? "ivec4(not(equal(v%d, vec4(0.0))));\n"
                                  : "ivec4(notEqual(v%d, ivec4(0)));\n", q[0]);
        else if (is_float(dt))
            td_emit(b, "vec4(v%d);\n", q[0]);
        else
            td_emit(b, "ivec4(f2i(v%d.x), f2i(v%d.y), f2i(v%d.z), f2i(v%d.w));\n", q[0], q[0],
                 q[0], q[0]);
        return 1;
    }
    if (op == TIDE_OP_WHERE) {
        if (xdt != TIDE_BOOL)
            return decline(k, "where with a %s condition", tide_dtype_name((tide_dtype)xdt));
        if (c->nodes[nd->in[1]].dtype != dt || c->nodes[nd->in[2]].dtype != dt)
            return decline(k, "where of mixed dtypes");
        td_emit(b, "mix(v%d, v%d, notEqual(v%d, ivec4(0)));\n", q[2], q[1], q[0]);
        return 1;
    }
    bool unary = tide_op_is_unary((tide_op)op), binary = tide_op_is_binary((tide_op)op);
    if (!unary && !binary)
        return decline(k, "%s is not elementwise", tide_op_name((tide_op)op));
    if (binary && c->nodes[nd->in[1]].dtype != xdt)
        return decline(k, "%s of mixed dtypes", tide_op_name((tide_op)op));
    uint32_t code = td_vk_opcode((tide_op)op);
    const char *res_conv = "";
    if (is_float(xdt)) {
        if (!is_float(dt))
            res_conv = "ivec4";
        else if (op == TIDE_OP_LOGICAL_NOT || is_compare(op))
            return decline(k, "%s giving %s", tide_op_name((tide_op)op),
                           tide_dtype_name((tide_dtype)dt));
        if (unary)
            td_emit(b, "%s(unary_f(%uu, v%d));\n", res_conv, code, q[0]);
        else
            td_emit(b, "%s(binary_f(%uu, v%d, v%d));\n", res_conv, code, q[0], q[1]);
    } else {
        if (!td_vk_int_op_ok(code) || is_float(dt))
            return decline(k, "%s of %s", tide_op_name((tide_op)op),
                           tide_dtype_name((tide_dtype)xdt));
        bool norm = dt == TIDE_BOOL && !is_compare(op);
        if (norm)
            td_emit(b, "ivec4(notEqual(");
        if (unary)
            td_emit(b, "unary_i(%uu, v%d)", code, q[0]);
        else
            td_emit(b, "binary_i(%uu, v%d, v%d)", code, q[0], q[1]);
        td_emit(b, norm ? ", ivec4(0)));\n" : ";\n");
    }
    return 1;
}

/* The load of input slot s into v<s> (4 lanes at indices <lane>0..3; host scalars from the
 * parameters). */
static void emit_load(td_sbuf *b, const jit_plan *c, const jit_group *g, const vk_jit_code *k,
                      int s, const int *bind_of, const bool *direct, const char *lane)
{
    (void)g;
    int dt = c->nodes[g->slots[s].node].dtype;
    if (bind_of[s] < 0) { /* a host scalar */
        int si = 0;
        while (k->scal_slot[si] != s)
            si++;
        if (is_float(dt))
            td_emit(b, "    vec4 v%d = vec4(uintBitsToFloat(P.sc[%d]));\n", s, si);
        else
            td_emit(b, "    ivec4 v%d = ivec4(int(P.sc[%d]));\n", s, si);
        return;
    }
    int bi = bind_of[s];
    td_emit(b, "    %s v%d;\n", is_float(dt) ? "vec4" : "ivec4", s);
    if (direct && direct[bi])
        td_emit(b, "    if (fast) v%d = %s(q%d[(P.base[%d] + first) >> 2]); else\n", s,
             is_float(dt) ? "uintBitsToFloat" : "ivec4", bi, bi);
    td_emit(b, "    v%d = %s(", s, is_float(dt) ? "vec4" : "ivec4");
    for (int l = 0; l < 4; l++) {
        const char *sep = l ? ", " : "";
        if (dt == TIDE_FLOAT32)
            td_emit(b, "%suintBitsToFloat(b%d[P.base[%d] + ix%d(%s%d)])", sep, bi, bi, bi, lane, l);
        else if (dt == TIDE_INT32)
            td_emit(b, "%sint(b%d[P.base[%d] + ix%d(%s%d)])", sep, bi, bi, bi, lane, l);
        else /* a byte */
            td_emit(b, "%sint((b%d[(P.base[%d] + ix%d(%s%d)) >> 2] >> (uint((P.base[%d] + "
                    "ix%d(%s%d)) & 3) * 8u)) & 0xffu)", sep, bi, bi, bi, lane, l, bi, bi, lane, l);
    }
    td_emit(b, ");\n");
    if (dt == TIDE_BOOL)
        td_emit(b, "    v%d = ivec4(notEqual(v%d, ivec4(0)));\n", s, s);
}

static bool is_reduce_op(int op)
{
    return op == TIDE_OP_SUM || op == TIDE_OP_PROD || op == TIDE_OP_MAX || op == TIDE_OP_MIN;
}

/* The binary op code that combines values of reduction op, and its identity (GLSL text). */
static uint32_t reduce_combine(int op, const char **id)
{
    switch (op) {
    case TIDE_OP_SUM: *id = "0.0"; return td_vk_opcode(TIDE_OP_ADD);
    case TIDE_OP_PROD: *id = "1.0"; return td_vk_opcode(TIDE_OP_MUL);
    case TIDE_OP_MAX: *id = "uintBitsToFloat(0xff800000u)"; /* -inf */
        return td_vk_opcode(TIDE_OP_MAXIMUM);
    default: *id = "uintBitsToFloat(0x7f800000u)"; /* +inf */
        return td_vk_opcode(TIDE_OP_MINIMUM);
    }
}

/* The end of a pass over a row: for reduction member s (its operand slot q) the accumulator
 * folded, then combined across the workgroup through shared memory; for the final pass
 * (s < 0) the stores of the full-row results. */
/* A row's length in the shader: a constant, or in a symbolic group the parameter. */
static const char *row_length(const jit_group *g, char *buf, size_t size)
{
    if (g->symbolic)
        return "P.rowlen";
    snprintf(buf, size, "%lld", (long long)g->rowlen);
    return buf;
}

static void emit_pass_end(td_sbuf *b, const jit_plan *c, const jit_group *g,
                          const vk_jit_code *k, int s, int q, uint32_t code, const char *id)
{
    char buf[32];
    const char *rowlen = row_length(g, buf, sizeof buf);
    if (s >= 0) {
        td_emit(b, "    acc = binary_f(%uu, acc, mix(v%d, vec4(%s), greaterThanEqual(ivec4(e) + "
                "ivec4(0, 1, 2, 3), ivec4(%s))));\n    }\n", code, q, id, rowlen);
        td_emit(b, "    red_sh[t] = binary_f(%uu, binary_f(%uu, acc.xxxx, acc.yyyy), "
                "binary_f(%uu, acc.zzzz, acc.wwww)).x;\n    barrier();\n"
                "    for (int h = %d; h > 0; h >>= 1) {\n"
                "        if (t < h) red_sh[t] = binary_f(%uu, vec4(red_sh[t]), "
                "vec4(red_sh[t + h])).x;\n        barrier();\n    }\n"
                "    v%d = vec4(red_sh[0]);\n    barrier();\n    }\n",
             code, code, code, LOCAL / 2, code, s);
    } else {
        td_emit(b, "    for (int j = 0; j < 4; j++) {\n        if (e + j >= %s) break;\n"
                "        int i = rbase + e + j;\n", rowlen);
        for (int bi = 0; bi < k->nbind; bi++) {
            int o = k->bind_slot[bi];
            if (!g->slots[o].member || g->slots[o].vkind != JV_FULL)
                continue;
            td_emit(b, "        b%d[P.base[%d] + ix%d(i)] = %s(v%d[j]);\n", bi, bi, bi,
                 c->nodes[g->slots[o].node].dtype == TIDE_FLOAT32 ? "floatBitsToUint"
                                                                   : "uint", o);
        }
        td_emit(b, "    }\n    }\n    }\n");
    }
}

/* The body of a row group: a workgroup per row. Each reduction is a pass over the row (the
 * elementwise members before it recomputed from the inputs, 4 elements per invocation), a
 * workgroup tree reduction in shared memory, and its value uniform afterwards; row members are
 * computed once between passes; a last pass stores the elementwise results. 1, 0 declined. */
static int emit_rows(td_sbuf *b, const jit_plan *c, const jit_group *g, vk_jit_code *k,
                     const int *bind_of)
{
    char buf[32];
    const char *rowlen = row_length(g, buf, sizeof buf);
    bool full_out = false;
    for (int bi = 0; bi < k->nbind; bi++) {
        const jit_slot *sl = &g->slots[k->bind_slot[bi]];
        full_out = full_out || (sl->member && sl->vkind == JV_FULL);
    }
    td_emit(b, "shared float red_sh[%d];\n", LOCAL);
    td_emit(b, "void main()\n{\n    int row = int(group_index());\n    if (row >= P.n) return;\n"
            "    int t = int(gl_LocalInvocationID.x);\n    int rbase = row * %s;\n"
            "    int r0 = rbase, r1 = rbase, r2 = rbase, r3 = rbase;\n", rowlen);
    for (int s = 0; s < g->nslots; s++)
        if (!g->slots[s].member && g->slots[s].vkind != JV_FULL)
            emit_load(b, c, g, k, s, bind_of, NULL, "r");
    for (int m = 0; m <= g->nmembers; m++) {
        int s = m < g->nmembers ? g->members[m] : -1;
        const jit_node *nd = s >= 0 ? &c->nodes[g->slots[s].node] : NULL;
        if (s >= 0 && g->slots[s].vkind != JV_FULL && !is_reduce_op(nd->op)) {
            if (emit_member(b, k, c, g, s) <= 0)
                return 0;
            continue;
        }
        if (s >= 0 && g->slots[s].vkind == JV_FULL)
            continue; /* computed inside the passes */
        if (s < 0 && !full_out)
            break;
        /* a pass over the row: reduction member s, or (s < 0) the final stores */
        int q = -1;
        const char *id = "0.0";
        uint32_t code = 0;
        if (s >= 0) {
            q = jit_slot_of(g, nd->in[0]);
            if (q < 0 || nd->dtype != TIDE_FLOAT32 || c->nodes[nd->in[0]].dtype != TIDE_FLOAT32 ||
                g->slots[q].vkind != JV_FULL)
                return decline(k, "%s of %s", tide_op_name((tide_op)nd->op),
                               tide_dtype_name((tide_dtype)c->nodes[nd->in[0]].dtype));
            code = reduce_combine(nd->op, &id);
            td_emit(b, "    vec4 v%d;\n    {\n    vec4 acc = vec4(%s);\n", s, id);
        } else {
            td_emit(b, "    {\n");
        }
        td_emit(b, "    for (int e = t * 4; e < %s; e += %d) {\n"
                "    int l0 = rbase + e, l1 = rbase + min(e + 1, %s - 1), l2 = rbase + min(e + 2, "
                "%s - 1), l3 = rbase + min(e + 3, %s - 1);\n", rowlen, 4 * LOCAL, rowlen, rowlen,
             rowlen);
        for (int i = 0; i < g->nslots; i++)
            if (!g->slots[i].member && g->slots[i].vkind == JV_FULL)
                emit_load(b, c, g, k, i, bind_of, NULL, "l");
        for (int j = 0; j < (s >= 0 ? m : g->nmembers); j++) {
            int f = g->members[j];
            if (g->slots[f].vkind == JV_FULL && emit_member(b, k, c, g, f) <= 0)
                return 0;
        }
        emit_pass_end(b, c, g, k, s, q, code, id);
    }
    /* row results: one value per row, contiguous */
    for (int bi = 0; bi < k->nbind; bi++) {
        int o = k->bind_slot[bi];
        if (!g->slots[o].member || g->slots[o].vkind == JV_FULL)
            continue;
        td_emit(b, "    if (t == 0) b%d[P.base[%d] + row] = %s(v%d.x);\n", bi, bi,
             c->nodes[g->slots[o].node].dtype == TIDE_FLOAT32 ? "floatBitsToUint" : "uint", o);
    }
    td_emit(b, "}\n");
    return 1;
}

/* The bindings of group g: outside Vulkan tensors read, then the members written; a host
 * scalar becomes a parameter. bind_of[slot]: its binding, or -1. 1, or 0 (declined). */
static int plan_bindings(const jit_plan *c, const jit_group *g, vk_jit_code *k, int *bind_of)
{
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        bind_of[s] = -1;
        int node = sl->member && sl->into >= 0 ? sl->into : sl->node;
        if (sl->member && !sl->output && sl->into < 0)
            continue;
        const jit_node *x = &c->nodes[node];
        if (!sl->member && x->device != c->device) { /* a host scalar: a parameter */
            if (x->ndim != 0 || k->nscal == JS_MAX || !value_dtype_ok(x->dtype))
                return decline(k, "a host operand that is not a scalar");
            k->scal_slot[k->nscal++] = s;
            continue;
        }
        int dt = sl->member ? c->nodes[sl->node].dtype : x->dtype;
        if (sl->member ? (dt != TIDE_FLOAT32 && dt != TIDE_INT32)
                       : (!value_dtype_ok(dt) && dt != TIDE_UINT8))
            return decline(k, "a %s %s in memory", tide_dtype_name((tide_dtype)dt),
                           sl->member ? "result" : "operand");
        if (sl->member && c->nodes[node].dtype != dt)
            return decline(k, "a write-back of another dtype");
        if (k->nbind == JB_MAX)
            return decline(k, "more than %d tensors", JB_MAX);
        int bi = k->nbind++;
        k->bind_slot[bi] = s;
        bind_of[s] = bi;
        layout_of(c, node, &k->nd[bi], k->shape[bi], k->strides[bi]);
        if (sl->member && sl->into >= 0 && g->row_mode)
            return decline(k, "a write-back from a row group");
        if (sl->member && g->row_mode && sl->vkind != JV_FULL) {
            if (td_numel(c->nodes[node].ndim, c->nodes[node].shape) != g->nrows)
                return decline(k, "a row result of another shape");
            continue;
        }
        if (sl->member && sl->into >= 0) {
            /* the destination must be the domain's shape: each element written once */
            if (k->nd[bi] != g->ndim ||
                memcmp(k->shape[bi], g->domain, sizeof(int64_t) * g->ndim) != 0)
                return decline(k, "a write-back into a broadcast destination");
        }
        if (sl->member && sl->output && sl->into < 0 &&
            td_numel(c->nodes[node].ndim, c->nodes[node].shape) != g->numel)
            return decline(k, "a result smaller than the domain");
    }
    return 1;
}

/* The shader's start: common.glsl, the parameter and data bindings (a uvec4 view as well of
 * those read or written contiguously: direct[bi]) and each binding's index function. */
static void emit_header(td_sbuf *b, const jit_plan *c, const jit_group *g,
                        const vk_jit_code *k, bool *direct)
{
    td_emit(b, "#version 450\n%s\n", td_vk_common_glsl);
    td_emit(b, "layout(local_size_x = %d) in;\n", LOCAL);
    td_emit(b, "layout(std430, binding = 0) readonly buffer Params { int n; int base[%d]; "
             "uint sc[%d];%s } P;\n", JB_MAX, JS_MAX, g->symbolic ? " int rowlen; "
             "int dom[" TD_STR(TIDE_MAX_DIMS) "]; int st[" TD_STR(JB_MAX) "][" TD_STR(TIDE_MAX_DIMS)
             "];" : "");
    for (int bi = 0; bi < k->nbind; bi++) {
        const jit_slot *sl = &g->slots[k->bind_slot[bi]];
        int dt = c->nodes[sl->member && sl->into >= 0 ? sl->into : sl->node].dtype;
        /* 16-byte accesses where contiguous (lavapipe's cost is per access) */
        direct[bi] = !g->row_mode && (dt == TIDE_FLOAT32 || dt == TIDE_INT32) &&
                     is_direct(g, k->nd[bi], k->shape[bi], k->strides[bi]);
        td_emit(b, "layout(std430, binding = %d) %sbuffer B%d { uint b%d[]; };\n", bi + 1,
             sl->member ? "" : "readonly ", bi, bi);
        if (direct[bi])
            td_emit(b, "layout(std430, binding = %d) %sbuffer Q%d { uvec4 q%d[]; };\n", bi + 1,
                 sl->member ? "" : "readonly ", bi, bi);
    }
    for (int bi = 0; bi < k->nbind; bi++) {
        if (g->symbolic && !is_direct(g, k->nd[bi], k->shape[bi], k->strides[bi])) {
            td_emit(b, "int ix%d(int i) { int r = ", bi);
            emit_index_symbolic(b, g, bi, k->nd[bi], k->shape[bi]);
            td_emit(b, "; return r; }\n");
            continue;
        }
        td_emit(b, "int ix%d(int i) { return ", bi);
        emit_index(b, g, k->nd[bi], k->shape[bi], k->strides[bi]);
        td_emit(b, "; }\n");
    }
}

/* main() of an elementwise group: 4 elements per invocation, loaded, computed, stored (16-byte
 * accesses for direct bindings when all 4 are there). 1, 0 (declined) or -1. */
static int emit_elementwise(td_sbuf *b, const jit_plan *c, const jit_group *g,
                            vk_jit_code *k, const int *bind_of, const bool *direct)
{
    td_emit(b, "void main()\n{\n"
             "    int first = int(group_index() * %du + gl_LocalInvocationID.x) * 4;\n"
             "    if (first >= P.n) return;\n"
             "    int l0 = first, l1 = min(first + 1, P.n - 1), l2 = min(first + 2, P.n - 1),"
             " l3 = min(first + 3, P.n - 1);\n", LOCAL);
    /* whole vec4s: 4 elements left, and every contiguous operand's base a multiple of 4 */
    td_emit(b, "    bool fast = first + 3 < P.n");
    for (int bi = 0; bi < k->nbind; bi++)
        if (direct[bi])
            td_emit(b, " && (P.base[%d] & 3) == 0", bi);
    td_emit(b, ";\n");
    /* loads */
    for (int s = 0; s < g->nslots; s++)
        if (!g->slots[s].member)
            emit_load(b, c, g, k, s, bind_of, direct, "l");
    /* members, in program order */
    for (int m = 0; m < g->nmembers; m++) {
        int rc = emit_member(b, k, c, g, g->members[m]);
        if (rc <= 0)
            return rc;
    }
    /* stores */
    td_emit(b, "    if (fast) {\n");
    for (int bi = 0; bi < k->nbind; bi++) {
        int s = k->bind_slot[bi];
        if (!g->slots[s].member || !direct[bi])
            continue;
        td_emit(b, "        q%d[(P.base[%d] + first) >> 2] = %s(v%d);\n", bi, bi,
             c->nodes[g->slots[s].node].dtype == TIDE_FLOAT32 ? "floatBitsToUint" : "uvec4", s);
    }
    td_emit(b, "    }\n");
    td_emit(b, "    for (int j = 0; j < 4; j++) {\n        int i = first + j;\n"
             "        if (i >= P.n) break;\n");
    for (int bi = 0; bi < k->nbind; bi++) {
        int s = k->bind_slot[bi];
        if (!g->slots[s].member)
            continue;
        int dt = c->nodes[g->slots[s].node].dtype;
        td_emit(b, "        %sb%d[P.base[%d] + ix%d(i)] = %s(v%d[j]);\n",
             direct[bi] ? "if (!fast) " : "", bi, bi, bi,
             dt == TIDE_FLOAT32 ? "floatBitsToUint" : "uint", s);
    }
    td_emit(b, "    }\n}\n");
    return 1;
}

/* Renders group g; 1 rendered (text in *out), 0 declined (k->why), -1 error. */
static int render(const jit_plan *c, const jit_group *g, vk_jit_code *k, char **out)
{
    *out = NULL;
    if (g->row_mode && (g->rowlen > 32768 || g->rowlen < 1))
        return decline(k, "rows of %lld elements", (long long)g->rowlen);
    if (!g->symbolic && g->numel > INT32_MAX - 8) /* a symbolic group checks at each run */
        return decline(k, "more than 2^31 elements");
    int bind_of[512];
    if (g->nslots > 512)
        return decline(k, "too many values");
    if (plan_bindings(c, g, k, bind_of) != 1)
        return 0;
    td_sbuf b = {0};
    bool direct[JB_MAX];
    emit_header(&b, c, g, k, direct);
    int rc = g->row_mode ? emit_rows(&b, c, g, k, bind_of)
                         : emit_elementwise(&b, c, g, k, bind_of, direct);
    if (rc <= 0 || b.failed) {
        free(b.s);
        return rc <= 0 ? rc : td_error("jit: out of memory for a Vulkan shader");
    }
    *out = b.s;
    return 1;
}

/* ---- compiling --------------------------------------------------------------------------------- */

static pthread_once_t glslang_once = PTHREAD_ONCE_INIT;
static bool glslang_up;
static void glslang_init(void) { glslang_up = glslang_initialize_process() != 0; }

/* GLSL -> SPIR-V. A malloc'd word array (size in bytes in *size), or NULL with the error set. */
static uint32_t *glsl_to_spirv(const char *text, size_t *size)
{
    pthread_once(&glslang_once, glslang_init);
    if (!glslang_up) {
        td_error("jit: glslang failed to initialize");
        return NULL;
    }
    glslang_input_t in = {
        .language = GLSLANG_SOURCE_GLSL,
        .stage = GLSLANG_STAGE_COMPUTE,
        .client = GLSLANG_CLIENT_VULKAN,
        .client_version = GLSLANG_TARGET_VULKAN_1_0,
        .target_language = GLSLANG_TARGET_SPV,
        .target_language_version = GLSLANG_TARGET_SPV_1_0,
        .code = text,
        .default_version = 450,
        .default_profile = GLSLANG_NO_PROFILE,
        .messages = GLSLANG_MSG_DEFAULT_BIT,
        .resource = glslang_default_resource(),
    };
    glslang_shader_t *sh = glslang_shader_create(&in);
    glslang_program_t *p = NULL;
    uint32_t *words = NULL;
    if (!sh) {
        td_error("jit: glslang: out of memory");
        return NULL;
    }
    if (!glslang_shader_preprocess(sh, &in) || !glslang_shader_parse(sh, &in)) {
        td_error("jit: the generated GLSL does not compile (a bug; TIDE_DUMP=dir writes it): %s",
                 glslang_shader_get_info_log(sh));
        goto done;
    }
    p = glslang_program_create();
    glslang_program_add_shader(p, sh);
    if (!glslang_program_link(p, GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT)) {
        td_error("jit: the generated GLSL does not link: %s", glslang_program_get_info_log(p));
        goto done;
    }
    glslang_spv_options_t opt = {.disable_optimizer = false, .optimize_size = false};
    glslang_program_SPIRV_generate_with_options(p, GLSLANG_STAGE_COMPUTE, &opt);
    size_t n = glslang_program_SPIRV_get_size(p);
    words = td_malloc(n * sizeof *words + 1);
    if (!words) {
        td_error("jit: out of memory");
        goto done;
    }
    glslang_program_SPIRV_get(p, words);
    *size = n * sizeof *words;
done:
    if (p)
        glslang_program_delete(p);
    glslang_shader_delete(sh);
    return words;
}

/* Destroys the jit's pipelines of s (at the device's teardown). */
void td_vk_jit_close(vk_state *s)
{
    for (vk_jit_entry *e = s->jit_code, *next; e; e = next) {
        next = e->next;
        if (e->pipe)
            td_vk.vkDestroyPipeline(s->device, e->pipe, NULL);
        free(e->text);
        free(e);
    }
    s->jit_code = NULL;
}

/* Ends glslang's process-wide state once every device is gone (at exit). */
void td_vk_jit_shutdown(void)
{
    if (glslang_up) {
        glslang_finalize_process();
        glslang_up = false;
    }
}

/* The pipeline of a text: from the in-process table, else SPIR-V from the disk cache or glslang.
 * Under s->lock. */
static VkPipeline pipeline_of(vk_state *s, const char *text, int index)
{
    uint64_t h = td_text_hash(text);
    for (vk_jit_entry *e = s->jit_code; e; e = e->next)
        if (e->hash == h && strcmp(e->text, text) == 0)
            return e->pipe;
    double t0 = jit_now_ms();
    char dir[4096], path[4200];
    bool disk = td_vk_cache_dir(dir, sizeof dir);
    if (disk)
        snprintf(path, sizeof path, "%s/jit_%016llx.spv", dir, (unsigned long long)h);
    size_t size = 0;
    const char *from = "the disk cache";
    uint32_t *spv = disk ? (uint32_t *)td_vk_cache_read(path, &size) : NULL;
    if (spv && (size % 4 || size < 20 || spv[0] != 0x07230203u)) {
        free(spv);
        spv = NULL;
    }
    if (!spv) {
        from = "glslang";
        spv = glsl_to_spirv(text, &size);
        if (!spv)
            return VK_NULL_HANDLE;
        if (disk)
            td_vk_cache_write(dir, path, spv, size);
    }
    double t1 = jit_now_ms();
    VkPipeline pipe = td_vk_make_pipeline(s, spv, size, "jit group");
    free(spv);
    if (!pipe)
        return VK_NULL_HANDLE;
    vk_jit_entry *e = td_calloc(1, sizeof *e);
    char *copy = td_strdup(text);
    if (!e || !copy) {
        free(e);
        free(copy);
        td_vk.vkDestroyPipeline(s->device, pipe, NULL);
        td_error("jit: out of memory");
        return VK_NULL_HANDLE;
    }
    e->hash = h;
    e->text = copy;
    e->pipe = pipe;
    e->next = s->jit_code;
    s->jit_code = e;
    td_log("jit", "vulkan: group %d compiled in %.2f ms (SPIR-V from %s %.2f ms, pipeline "
           "%.2f ms)", index, jit_now_ms() - t0, from, t1 - t0, jit_now_ms() - t1);
    return pipe;
}

int td_vk_jit_compile(tide_device *dev, const void *plan, void *group, int index)
{
    const jit_plan *c = plan;
    jit_group *g = group;
    vk_state *s = dev->state;
    if (!s)
        return td_error("vulkan: %s has been shut down", dev->name);
    vk_jit_code *k = td_calloc(1, sizeof *k);
    if (!k)
        return td_error("jit: out of memory");
    g->code = k;
    g->fn = NULL;
    if (!jit_codegen_enabled()) {
        decline(k, "TIDE_JIT_CODEGEN=0");
        return 0;
    }
    char *text = NULL;
    int rc = render(c, g, k, &text);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        k->nbind = k->nscal = 0;
        td_log("jit", "vulkan: group %d (%d ops) runs op by op: %s", index, g->nmembers, k->why);
        return 0;
    }
    jit_dump_source(text, c->hash, index, "comp");
    pthread_mutex_lock(&s->lock);
    k->pipe = pipeline_of(s, text, index);
    pthread_mutex_unlock(&s->lock);
    g->source = text;
    if (!k->pipe) { /* never fails the graph: its ops run as they would eagerly */
        decline(k, "%s", tide_last_error());
        td_log("jit", "vulkan: group %d (%d ops) runs op by op: %s", index, g->nmembers, k->why);
        tide_clear_error();
    }
    return 0;
}

void td_vk_jit_free(tide_device *dev, void *group)
{
    (void)dev;
    jit_group *g = group;
    free(g->code); /* the pipeline stays in the device's table */
    g->code = NULL;
}

/* ---- running ----------------------------------------------------------------------------------- */

/* The members one by one through the eager shaders: values outside the group's slots are
 * temporaries on the device. */
static int run_members(tide_device *dev, const jit_plan *c, const jit_group *g,
                       tide_tensor *const *t)
{
    tide_tensor *vbuf[64];
    tide_tensor **v = g->nslots <= 64 ? vbuf : td_calloc((size_t)g->nslots, sizeof *v);
    bool *own = td_calloc((size_t)g->nslots + 1, 1);
    if (!v || !own) {
        if (v != vbuf)
            free(v);
        free(own);
        return td_error("jit: out of memory");
    }
    int rc = 0;
    for (int s = 0; s < g->nslots; s++)
        v[s] = g->slots[s].member ? NULL : t[s];
    for (int m = 0; m < g->nmembers && rc == 0; m++) {
        int s = g->members[m];
        const jit_slot *sl = &g->slots[s];
        const jit_node *nd = &c->nodes[sl->node];
        tide_tensor *in[JIT_MAX_IN];
        for (int j = 0; j < nd->nin; j++) {
            int q = jit_slot_of(g, nd->in[j]);
            in[j] = q >= 0 ? v[q] : NULL;
            if (!in[j]) {
                rc = td_error("jit: internal error: an operand of %s is missing",
                              tide_op_name((tide_op)nd->op));
                break;
            }
        }
        if (rc < 0)
            break;
        if (sl->output && sl->into < 0) {
            v[s] = t[s];
        } else {
            v[s] = td_tensor_new("jit", dev, nd->ndim, nd->shape, (tide_dtype)nd->dtype);
            own[s] = true;
            if (!v[s]) {
                rc = -1;
                break;
            }
        }
        if (td_numel(nd->ndim, nd->shape) > 0)
            rc = td_vk_run(dev, (tide_op)nd->op, v[s], in, nd->nin, &nd->attrs);
        if (rc == 0 && sl->into >= 0 && td_numel(t[s]->ndim, t[s]->shape) > 0) {
            tide_attrs none = {0};
            rc = td_vk_run(dev, TIDE_OP_COPY, t[s], &v[s], 1, &none);
        }
    }
    for (int s = 0; s < g->nslots; s++)
        if (own[s])
            tide_release(v[s]);
    if (v != vbuf)
        free(v);
    free(own);
    return rc;
}

static bool same_layout(const tide_tensor *t, int nd, const int64_t *shape, const int64_t *st)
{
    return t->ndim == nd && memcmp(t->shape, shape, sizeof(int64_t) * nd) == 0 &&
           memcmp(t->strides, st, sizeof(int64_t) * nd) == 0;
}

/* A symbolic group's sizes for this run into p: the bound domain, each binding's strides, the
 * row length. false when they do not fit the shader's 32-bit indices (its ops run one by one). */
static bool symbolic_params(const jit_group *g, const vk_jit_code *k, tide_tensor *const *t,
                            jit_params *p)
{
    if (g->numel > INT32_MAX - 8)
        return false;
    p->rowlen = (int32_t)g->rowlen;
    for (int d = 0; d < g->ndim; d++)
        p->dom[d] = (int32_t)g->domain[d];
    for (int bi = 0; bi < k->nbind; bi++) {
        const tide_tensor *x = t[k->bind_slot[bi]];
        if (x->ndim != k->nd[bi])
            return false;
        for (int d = 0; d < x->ndim; d++) {
            if (x->strides[d] > INT32_MAX || x->strides[d] < INT32_MIN)
                return false;
            p->st[bi][d] = (int32_t)x->strides[d];
        }
    }
    return true;
}

int td_vk_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t)
{
    const jit_plan *c = plan;
    const jit_group *g = group;
    vk_jit_code *k = g->code;
    vk_state *s = dev->state;
    if (!s)
        return td_error("vulkan: %s has been shut down", dev->name);
    if (!k || !k->pipe)
        return run_members(dev, c, g, t);
    if (g->numel == 0)
        return 0;
    jit_params p = {.n = (int32_t)(g->row_mode ? g->nrows : g->numel)};
    vk_binding b[JB_MAX];
    for (int bi = 0; bi < k->nbind; bi++) {
        tide_tensor *x = t[k->bind_slot[bi]];
        if (!x || x->device != dev ||
            (!g->symbolic && !same_layout(x, k->nd[bi], k->shape[bi], k->strides[bi]))) {
            if (__atomic_fetch_add(&k->warned, 1, __ATOMIC_RELAXED) == 0)
                td_log("jit", "vulkan: a group's operand has another layout than compiled; "
                              "its ops run one by one");
            return run_members(dev, c, g, t);
        }
    }
    if (g->symbolic && !symbolic_params(g, k, t, &p))
        return run_members(dev, c, g, t);
    for (int si = 0; si < k->nscal; si++) {
        const tide_tensor *x = t[k->scal_slot[si]];
        const char *d = x ? td_tensor_data(x) : NULL;
        if (!d || x->device != tide_cpu_device())
            return run_members(dev, c, g, t);
        if (x->dtype == TIDE_BOOL)
            p.sc[si] = *(const uint8_t *)d != 0;
        else
            memcpy(&p.sc[si], d, 4);
    }
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    for (int bi = 0; bi < k->nbind && rc == 0; bi++) {
        rc = td_vk_bind_tensor(s, t[k->bind_slot[bi]], &b[bi], &p.base[bi]);
        if (rc == 0) { /* larger than one binding */
            pthread_mutex_unlock(&s->lock);
            return run_members(dev, c, g, t);
        }
        rc = rc < 0 ? -1 : 0;
    }
    if (rc == 0)
        rc = td_vk_dispatch_pipe(s, k->pipe, &p, g->symbolic ? sizeof p : STATIC_PARAMS, b, k->nbind,
                                 g->row_mode ? (uint64_t)g->nrows
                                             : ((uint64_t)g->numel + 4 * LOCAL - 1) / (4 * LOCAL));
    pthread_mutex_unlock(&s->lock);
    return rc;
}
