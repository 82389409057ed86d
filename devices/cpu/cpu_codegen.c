/*
 * cpu_codegen.c — the CPU device's code generator for jit fusion groups (jit/jit.h): each group
 * becomes a C function compiled in-process by libtcc, and an interpreter runs the same program
 * when code generation is off (TIDE_JIT_CODEGEN=0) or fails.
 *
 * Shape of the generated code, chosen by measurement (jit/README.md): libtcc's own arithmetic
 * is scalar and unoptimized, so the function walks the group's domain in rows (the reduced
 * trailing dims of a fused reduction, or 1024-element tiles of an elementwise chain) and calls
 * the library's vectorized contiguous kernels (cpu_elementwise_isa.c, cpu_reduce_isa.c, the
 * ones eager uses, so results match eager bit for bit) on each row held in L1-sized scratch.
 * What the generated code reads is given with tcc_add_symbol — no system header is included —
 * and scalars travel through pointers, never as extern data (libtcc 0.9.27 miscompiles
 * arithmetic on extern float data).
 */
#include <libtcc.h>
#include <pthread.h>
/* Weak: libtcc is linked into executables only (devices/cpu/tcc/cpu_tcc_anchor.c). */
#pragma weak tcc_new
#pragma weak tcc_delete
#pragma weak tcc_set_error_func
#pragma weak tcc_set_options
#pragma weak tcc_set_output_type
#pragma weak tcc_add_symbol
#pragma weak tcc_compile_string
#pragma weak tcc_relocate
#pragma weak tcc_get_symbol
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/log.h"
#include "../../core/strbuf.h"
#include "cpu_jit.h"
#include "cpu_elementwise.h"
#include "cpu_isa.h"
#include "cpu_reduce.h"

static const td_ew_kernels *ew_table(void)
{
    switch (td_cpu_isa()) {
    case TD_ISA_AVX512: return &td_ew_kernels_avx512;
    case TD_ISA_AVX2: return &td_ew_kernels_avx2;
    default: return &td_ew_kernels_baseline;
    }
}

static int log2_size(int es) { return es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3; }

/* A marker for ops the helpers below run (cast). */
static void cast_marker(void) {}

/* Outputs of at least this many bytes are written with streaming stores (td_jit_stream): past
 * the last-level cache, the next reader finds them in memory either way. At 8 MB, results of
 * 8-13 MB (a conv's, a batched linear's) that plain stores leave in this machine's L3 streamed
 * to memory instead, and those steps ran 8% slower than eager. */
#define TD_JIT_STREAM_BYTES (32LL << 20)
/* Tiles prefetch their operands (td_jit_prefetch) when the domain has at least this many bytes
 * of 4-byte elements: smaller operands are in cache, or near enough for the hardware's own
 * prefetcher, and the calls only cost time (6% of the MLP's training step; its largest update,
 * 1.6 MB per operand, ran 2% faster without them). */
#define TD_JIT_PREFETCH_BYTES (4LL << 20)

void *td_jit_tile_kernel(int op, int dtype)
{
    if (dtype < 0 || dtype >= TIDE_NUM_DTYPES)
        return NULL;
    const td_ew_kernels *k = ew_table();
    if (tide_op_is_unary((tide_op)op))
        return (void *)k->unary[op - TIDE_OP_FIRST_UNARY][dtype];
    if (tide_op_is_binary((tide_op)op))
        return (void *)k->binary[op - TIDE_OP_FIRST_BINARY][dtype];
    if (op == TIDE_OP_WHERE)
        return (void *)k->where[log2_size((int)td_dtype_sizes[dtype])];
    if (op == TIDE_OP_CAST)
        return (void *)cast_marker;
    if (op >= TIDE_OP_SUM && op <= TIDE_OP_MIN)
        return (void *)td_red_kernels_current()->run[op - TIDE_OP_SUM][dtype];
    return NULL;
}

/* Two float add/sub/mul/div in a row run as one pass over the tile (an arith2 kernel) where the
 * first's value is read by the second alone (not an output, not written back, no other member
 * reads it), as in x*a + b. A tile kernel costs ~15 ns per 512 elements however little it
 * computes; the tanh chain's two such pairs were ~9% of it. */
typedef struct tile_pair {
    int second;         /* index in g->members of the member run with this one, or -1 */
    int ops[3];         /* slots passed to the kernel: op1's two operands, then op2's other */
    int cfirst;         /* that other operand is op2's first */
    td_ew_arith2_fn fn; /* the kernel */
    /* or, for x - value then exp (softmax's rows): that kernel, reading ops[0] and the value */
    td_ew_binary_fn sub_exp;
    /* a member in no pair may read a single value in place (single_value): the kernel (NULL
     * when not), the value's slot, and whether it is the kernel's first operand */
    td_ew_binary_fn one;
    int one_slot, one_afirst;
} tile_pair;

/* The member the tile loop runs after member k (scalar members run once, before it) where that
 * member alone reads k's value and the value goes nowhere else (no output, write-back, stream
 * or splat), so the two may run as one kernel; else -1. */
static int sole_next_reader(const jit_plan *c, const jit_group *g, int k)
{
    int next = k + 1;
    while (next < g->nmembers && g->slots[g->members[next]].vkind == JV_SCALAR)
        next++;
    if (next >= g->nmembers)
        return -1;
    const jit_slot *s1 = &g->slots[g->members[k]], *s2 = &g->slots[g->members[next]];
    if (s1->vkind != JV_FULL || s2->vkind != JV_FULL || s1->output || s1->into >= 0 ||
        s1->stream >= 0 || s1->splat >= 0)
        return -1;
    for (int m = 0; m < g->nmembers; m++) {
        const jit_node *nd = &c->nodes[g->slots[g->members[m]].node];
        for (int j = 0; m != next && j < nd->nin; j++)
            if (nd->in[j] == s1->node)
                return -1;
    }
    return next;
}

/* Whether member k can start a pair with the next member the tile loop runs; fills *p. */
static bool fused_pair(const jit_plan *c, const jit_group *g, int k, tile_pair *p)
{
    int next = sole_next_reader(c, g, k);
    if (next < 0)
        return false;
    const jit_slot *s1 = &g->slots[g->members[k]], *s2 = &g->slots[g->members[next]];
    const jit_node *n1 = &c->nodes[s1->node], *n2 = &c->nodes[s2->node];
    if (n1->op < TIDE_OP_ADD || n1->op > TIDE_OP_DIV || n2->op < TIDE_OP_ADD ||
        n2->op > TIDE_OP_DIV || n1->nin != 2 || n2->nin != 2)
        return false;
    int dt = n1->dtype;
    if ((dt != TIDE_FLOAT32 && dt != TIDE_FLOAT64) || n2->dtype != dt)
        return false;
    for (int j = 0; j < 2; j++)
        if (c->nodes[n1->in[j]].dtype != dt || c->nodes[n2->in[j]].dtype != dt)
            return false;
    if ((n2->in[0] == s1->node) == (n2->in[1] == s1->node))
        return false; /* op2 must read op1's value exactly once */
    p->second = next;
    p->cfirst = n2->in[1] == s1->node;
    p->ops[0] = jit_slot_of(g, n1->in[0]);
    p->ops[1] = jit_slot_of(g, n1->in[1]);
    p->ops[2] = jit_slot_of(g, n2->in[p->cfirst ? 0 : 1]);
    p->fn = ew_table()->arith2[dt == TIDE_FLOAT64][n1->op - TIDE_OP_ADD][n2->op - TIDE_OP_ADD]
                              [p->cfirst];
    return true;
}

/* Member k (in no pair) as a single-value kernel, filling p->one: a FULL float
 * add/sub/mul/div with exactly one operand a SCALAR or ROW value (x - max, e / sum, x * 2)
 * reads that value in place instead of a splat buffer the row would fill and the kernel read
 * back (softmax's two per row: 32 KB of a 4096-wide row's 80 KB of scratch). Same bits as the
 * binary kernel. */
static void single_value(const jit_plan *c, const jit_group *g, int k, tile_pair *p)
{
    const jit_slot *ms = &g->slots[g->members[k]];
    const jit_node *nd = &c->nodes[ms->node];
    int dt = nd->dtype;
    if (ms->vkind != JV_FULL || nd->op < TIDE_OP_ADD || nd->op > TIDE_OP_DIV || nd->nin != 2 ||
        (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT64) || c->nodes[nd->in[0]].dtype != dt ||
        c->nodes[nd->in[1]].dtype != dt)
        return;
    int s0 = jit_slot_of(g, nd->in[0]), s1 = jit_slot_of(g, nd->in[1]);
    bool full0 = g->slots[s0].vkind == JV_FULL, full1 = g->slots[s1].vkind == JV_FULL;
    if (full0 == full1)
        return;
    p->one_afirst = !full0;
    p->one_slot = full0 ? s1 : s0;
    p->one = ew_table()->scalar[dt == TIDE_FLOAT64][nd->op - TIDE_OP_ADD][p->one_afirst];
}

/* Member k, a float32 x - value (single_value), with an exp that alone reads it next: one
 * kernel for both (exp(x - max), softmax's), filling p->second and p->sub_exp. */
static bool sub_then_exp(const jit_plan *c, const jit_group *g, int k, tile_pair *p)
{
    const jit_node *n1 = &c->nodes[g->slots[g->members[k]].node];
    if (!p->one || n1->op != TIDE_OP_SUB || p->one_afirst || n1->dtype != TIDE_FLOAT32)
        return false;
    int next = sole_next_reader(c, g, k);
    if (next < 0)
        return false;
    const jit_node *n2 = &c->nodes[g->slots[g->members[next]].node];
    if (n2->op != TIDE_OP_EXP || n2->dtype != TIDE_FLOAT32 ||
        n2->in[0] != g->slots[g->members[k]].node)
        return false;
    p->second = next;
    p->ops[0] = jit_slot_of(g, n1->in[0]);
    p->ops[1] = p->one_slot;
    p->sub_exp = ew_table()->sub_s_exp_f32;
    return true;
}

/* The group's pairs, taken in program order: pairs[k].second >= 0 where member k starts one.
 * A member computed as a pair's second is stored, so it starts none (a third op would need a
 * kernel of its own). A member in no pair may be a single-value kernel (pairs[k].one). Planned
 * once per group; render and compile_group read it. NULL when out of memory. */
static tile_pair *plan_pairs(const jit_plan *c, const jit_group *g)
{
    tile_pair *pairs = td_malloc(sizeof *pairs * (size_t)(g->nmembers ? g->nmembers : 1));
    if (!pairs)
        return NULL;
    int busy = -1; /* the member last taken as a second */
    for (int k = 0; k < g->nmembers; k++) {
        pairs[k].second = -1;
        pairs[k].one = NULL;
        pairs[k].sub_exp = NULL;
        if (k == busy)
            continue;
        if (fused_pair(c, g, k, &pairs[k]))
            busy = pairs[k].second;
        else {
            single_value(c, g, k, &pairs[k]);
            if (sub_then_exp(c, g, k, &pairs[k]))
                busy = pairs[k].second;
        }
    }
    return pairs;
}

/* Whether some kernel of the generated code reads slot q's splat buffer: a FULL member reading
 * it that does not take it as a single value. */
static bool splat_read(const jit_plan *c, const jit_group *g, const tile_pair *pairs, int q)
{
    for (int k = 0; k < g->nmembers; k++) {
        const jit_slot *ms = &g->slots[g->members[k]];
        if (ms->vkind != JV_FULL || pairs[k].one)
            continue;
        const jit_node *nd = &c->nodes[ms->node];
        for (int j = 0; j < nd->nin; j++)
            if (jit_slot_of(g, nd->in[j]) == q)
                return true;
    }
    return false;
}

/* ---- the interpreter ------------------------------------------------------------------------ */

static void compute(const jit_plan *c, const jit_group *g, const jit_slot *ms, char **p,
                    char *scratch, int64_t n)
{
    const jit_node *nd = &c->nodes[ms->node];
    const void *in[JIT_MAX_IN];
    for (int j = 0; j < nd->nin; j++) {
        int q = jit_slot_of(g, nd->in[j]);
        const jit_slot *qs = &g->slots[q];
        in[j] = ms->vkind == JV_FULL && qs->vkind != JV_FULL ? scratch + qs->splat : p[q];
    }
    char *out = p[ms - g->slots];
    int op = nd->op;
    const jit_node *x = &c->nodes[nd->in[0]];
    if (op == TIDE_OP_CAST && x->dtype == nd->dtype && !ms->output) {
        p[ms - g->slots] = (char *)in[0]; /* a clone nobody sees: the operand itself */
        return;
    }
    if (op >= TIDE_OP_SUM && op <= TIDE_OP_MIN)
        td_jit_reduce(op, x->dtype, nd->dtype, out, in[0], g->rowlen);
    else if (op == TIDE_OP_CAST)
        td_jit_cast(n, out, nd->dtype, in[0], x->dtype);
    else if (op == TIDE_OP_WHERE)
        ((td_ew_where_fn)td_jit_tile_kernel(op, nd->dtype))(n, out, in[0], in[1], in[2]);
    else if (tide_op_is_unary((tide_op)op))
        ((td_ew_unary_fn)td_jit_tile_kernel(op, x->dtype))(n, out, in[0]);
    else
        ((td_ew_binary_fn)td_jit_tile_kernel(op, x->dtype))(n, out, in[0], in[1]);
}

int td_cpu_group_interpret(const jit_plan *c, const jit_group *g, void **args, int64_t r0,
                           int64_t r1, char *scratch)
{
    char *pbuf[64];
    char **p = g->nslots <= 64 ? pbuf : td_malloc(sizeof(char *) * (size_t)g->nslots);
    if (!p)
        return -1;
    /* scalars: once per call */
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (!sl->member && sl->vkind == JV_SCALAR) {
            p[s] = args[sl->arg];
            if (sl->splat >= 0)
                td_jit_splat(sl->es, scratch + sl->splat, p[s], g->rowlen);
        }
    }
    for (int k = 0; k < g->nmembers; k++) {
        const jit_slot *ms = &g->slots[g->members[k]];
        if (ms->vkind != JV_SCALAR)
            continue;
        p[g->members[k]] = scratch + ms->scratch;
        if (ms->output) /* computed in scratch, stored by the first chunk */
            p[g->members[k]] = scratch + ms->scratch;
        compute(c, g, ms, p, scratch, 1);
        if (ms->output && r0 == 0)
            memcpy(args[ms->arg], p[g->members[k]], (size_t)ms->es);
        if (ms->splat >= 0)
            td_jit_splat(ms->es, scratch + ms->splat, p[g->members[k]], g->rowlen);
    }
    for (int s = 0; s < g->nslots; s++) { /* vectors repeated within every tile: once */
        const jit_slot *sl = &g->slots[s];
        if (!sl->member && sl->direct == JIT_TILE_CONST) {
            p[s] = scratch + sl->scratch;
            td_jit_gather(args[sl->arg], p[s], 0, g->numel < g->rowlen ? g->numel : g->rowlen);
        }
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t s0 = r * g->rowlen;
        int64_t n = g->numel - s0 < g->rowlen ? g->numel - s0 : g->rowlen;
        for (int s = 0; s < g->nslots; s++) {
            const jit_slot *sl = &g->slots[s];
            if (sl->member || sl->vkind == JV_SCALAR || sl->direct == JIT_TILE_CONST)
                continue;
            if (td_cpu_slot_in_place(sl)) {
                int64_t at = sl->direct == JIT_PERIODIC ? s0 % sl->period : s0;
                p[s] = (char *)args[sl->arg] + at * sl->es;
                continue;
            }
            p[s] = scratch + sl->scratch;
            if (sl->vkind == JV_FULL) {
                td_jit_gather(args[sl->arg], p[s], s0, n);
            } else {
                td_jit_gather(args[sl->arg], p[s], r, 1);
                if (sl->splat >= 0)
                    td_jit_splat(sl->es, scratch + sl->splat, p[s], n);
            }
        }
        for (int k = 0; k < g->nmembers; k++) {
            int s = g->members[k];
            const jit_slot *ms = &g->slots[s];
            if (ms->vkind == JV_SCALAR)
                continue;
            if (ms->output)
                p[s] = (char *)args[ms->arg] + (ms->vkind == JV_FULL ? s0 : r) * ms->es;
            else
                p[s] = scratch + ms->scratch;
            compute(c, g, ms, p, scratch, ms->vkind == JV_FULL ? n : 1);
            if (ms->into >= 0)
                memcpy((char *)args[ms->arg] + s0 * ms->es, p[s], (size_t)(n * ms->es));
            if (ms->vkind == JV_ROW && ms->splat >= 0)
                td_jit_splat(ms->es, scratch + ms->splat, p[s], n);
        }
    }
    if (p != pbuf)
        free(p);
    return 0;
}

/* ---- C generation and libtcc ---------------------------------------------------------------- */

static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

static void tcc_error_cb(void *opaque, const char *msg)
{
    td_sbuf *b = opaque;
    td_emit(b, "%s; ", msg);
}

/* Compiled code shared by every group whose C is the same text (the kernels each symbol names
 * are spelled out in the text): a new batch size re-plans a graph but compiles no C. */
typedef struct code_entry {
    uint64_t hash;
    char *src;
    TCCState *state;
    void (*fn)(void **, int64_t, int64_t, char *);
    int refs;
    struct code_entry *next;
} code_entry;
#define CODE_BUCKETS 256
static code_entry *code_cache[CODE_BUCKETS]; /* under tcc_lock */

/* A symbolic row group's sizes are the run's (jit/group.h, step 4): its row length is L and its
 * scratch layout O (both arguments of the generated code, set by cpu_jit_run.c), so one text
 * serves every size. Elementwise groups keep constants: their tiles do not change with size. */
static bool runtime_rows(const jit_group *g) { return g->symbolic && g->row_mode; }

#define ROW_CHUNKS 4
enum { AT_SCRATCH, AT_SPLAT, AT_STREAM }; /* which buffer of a slot (O[3 * slot + which]) */

/* The address of slot s's buffer in the scratch. */
static void emit_at(td_sbuf *b, const jit_group *g, int s, int which)
{
    const jit_slot *sl = &g->slots[s];
    int64_t off = which == AT_SCRATCH ? sl->scratch : which == AT_SPLAT ? sl->splat : sl->stream;
    if (runtime_rows(g))
        td_emit(b, "S+O[%d]", 3 * s + which);
    else
        td_emit(b, "S+%lld", (long long)off);
}

/* A row's (or tile's) length. */
static void emit_len(td_sbuf *b, const jit_group *g)
{
    if (runtime_rows(g))
        td_emit(b, "L");
    else
        td_emit(b, "%lldL", (long long)g->rowlen);
}

/* js(...): slot s's single value splatted over its splat buffer, n elements (NULL: a row or
 * tile, at most the domain: a small domain's tiles read no more). */
static void emit_splat(td_sbuf *b, const jit_group *g, int s, const char *indent, const char *n)
{
    td_emit(b, "%sjs(%d, ", indent, g->slots[s].es);
    emit_at(b, g, s, AT_SPLAT);
    td_emit(b, ", p%d, ", s);
    if (n) {
        td_emit(b, "%s", n);
    } else if (g->row_mode) {
        emit_len(b, g);
    } else {
        td_emit(b, "N < ");
        emit_len(b, g);
        td_emit(b, " ? N : ");
        emit_len(b, g);
    }
    td_emit(b, ");\n");
}

/* The operand expression member ms reads for its j-th input, off elements into the row (a
 * chunk of an elementwise call; a single value read in place has no offset). */
static void operand(td_sbuf *b, const jit_group *g, const jit_slot *ms, int q, int in_place,
                    int64_t off)
{
    const jit_slot *qs = &g->slots[q];
    bool splat = ms->vkind == JV_FULL && qs->vkind != JV_FULL && q != in_place;
    if (splat)
        emit_at(b, g, q, AT_SPLAT);
    else
        td_emit(b, "p%d", q);
    if (off && (splat || qs->vkind == JV_FULL))
        td_emit(b, " + %lld", (long long)(off * qs->es));
}

/* Member s's kernel call over n elements from off; in_place: the slot of a single value the
 * kernel reads in place (a single-value kernel, tile_pair.one), else -1. */
static void emit_compute(td_sbuf *b, const jit_plan *c, const jit_group *g, int s,
                         const char *n, int in_place, int64_t off)
{
    const jit_slot *ms = &g->slots[s];
    const jit_node *nd = &c->nodes[ms->node];
    const jit_node *x = &c->nodes[nd->in[0]];
    int op = nd->op;
    if (op >= TIDE_OP_SUM && op <= TIDE_OP_MIN) {
        td_emit(b, "    jr(%d, %d, %d, p%d, ", op, x->dtype, nd->dtype, s);
        operand(b, g, ms, jit_slot_of(g, nd->in[0]), -1, 0);
        td_emit(b, ", ");
        emit_len(b, g);
        td_emit(b, "); /* %s */\n", tide_op_name((tide_op)op));
        return;
    }
    if (op == TIDE_OP_CAST && x->dtype == nd->dtype && !ms->output) {
        td_emit(b, "    p%d = (char *)", s); /* a clone nobody sees: the operand itself */
        operand(b, g, ms, jit_slot_of(g, nd->in[0]), -1, 0);
        td_emit(b, "; /* clone */\n");
        return;
    }
    if (op == TIDE_OP_CAST) {
        td_emit(b, "    jc(%s, p%d, %d, ", n, s, nd->dtype);
        operand(b, g, ms, jit_slot_of(g, nd->in[0]), -1, 0);
        td_emit(b, ", %d); /* cast */\n", x->dtype);
        return;
    }
    td_emit(b, "    k%d(%s, p%d", s, n, s);
    if (off)
        td_emit(b, " + %lld", (long long)(off * ms->es));
    for (int j = 0; j < nd->nin; j++) {
        td_emit(b, ", ");
        operand(b, g, ms, jit_slot_of(g, nd->in[j]), in_place, off);
    }
    td_emit(b, "); /* %s */\n", tide_op_name((tide_op)op));
}

/* Before the part-th of a tile's nparts elementwise kernels: that part of the tile two ahead,
 * for every operand read straight from memory and every output written straight to it. Spread
 * over the kernels, the requests overlap the arithmetic instead of queuing all at once (in one
 * burst per tile, the prefetches themselves stalled on the line-fill buffers). */
static void emit_prefetch(td_sbuf *b, const jit_group *g, int nparts, int part)
{
    int64_t chunk = (g->rowlen + nparts - 1) / nparts;
    int64_t ahead = g->row_mode ? 1 : 2; /* rows: 4096 elements and more */
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        bool in = !sl->member && sl->vkind == JV_FULL && sl->direct == JIT_IN_PLACE;
        bool out = sl->member && sl->output && sl->vkind == JV_FULL;
        if (!in && !out)
            continue;
        td_emit(b, "        if (far%s) jp(A[%d], ", out && sl->stream >= 0 ? " && !big" : "",
                sl->arg);
        if (runtime_rows(g)) /* the same offsets, computed from the run's row length */
            td_emit(b, "s0 + %lld * L + %d * ((L + %d) / %d), (L + %d) / %d", (long long)ahead,
                    part, nparts - 1, nparts, nparts - 1, nparts);
        else
            td_emit(b, "s0 + %lldL, %lldL", (long long)(ahead * g->rowlen + part * chunk),
                    (long long)chunk);
        td_emit(b, ", N, %d, %d);\n", sl->es, out);
    }
}

/* Whether a piece of the prefetches goes before member ms's kernel: every elementwise kernel of
 * a tile; every kernel of a row, the reductions included (a row's first kernel, its reduction,
 * reads it from memory). */
static bool prefetch_before(const jit_group *g, const jit_slot *ms)
{
    return g->row_mode ? ms->vkind != JV_SCALAR : ms->vkind == JV_FULL;
}

/* The helpers the group calls and its kernels, each extern with the kernel named in a comment:
 * groups whose text is the same share compiled code, so the text says all that differs. */
static void emit_declarations(td_sbuf *b, const jit_plan *c, const jit_group *g,
                              const tile_pair *pairs)
{
    td_emit(b, "typedef long I;\n"
             "extern void jg(const void *d, void *dst, I begin, I n);\n"
             "extern void js(I es, void *dst, const void *src, I n);\n"
             "extern void jr(int op, int dt, int odt, void *out, const void *x, I n);\n"
             "extern void jc(I n, void *out, int odt, const void *x, int idt);\n"
             "extern void jp(const void *b, I begin, I n, I total, I es, int write);\n"
             "extern void jw(void *dst, const void *src, I bytes);\n"
             "extern void jf(void);\n"
             "extern void *memcpy(void *d, const void *s, unsigned long n);\n");
    for (int k = 0; k < g->nmembers; k++) {
        int s = g->members[k];
        const jit_node *nd = &c->nodes[g->slots[s].node];
        if (nd->op == TIDE_OP_CAST || (nd->op >= TIDE_OP_SUM && nd->op <= TIDE_OP_MIN))
            continue;
        int kdt = nd->op == TIDE_OP_WHERE ? nd->dtype : c->nodes[nd->in[0]].dtype;
        td_emit(b, "extern void k%d(I n, void *o%s); /* %s %s%s */\n", s,
             nd->op == TIDE_OP_WHERE ? ", const void *c, const void *a, const void *b"
             : tide_op_is_unary((tide_op)nd->op) ? ", const void *a"
                                                   : ", const void *a, const void *b",
             tide_op_name((tide_op)nd->op), tide_dtype_name((tide_dtype)kdt),
             !pairs[k].one ? "" : pairs[k].one_afirst ? ", a one value" : ", b one value");
    }
    for (int k = 0; k < g->nmembers; k++)
        if (pairs[k].sub_exp) {
            td_emit(b, "extern void f%d(I n, void *o, const void *a, const void *b);"
                        " /* sub then exp float32, b one value */\n", g->members[pairs[k].second]);
        } else if (pairs[k].second >= 0) {
            /* the text names the kernel whole: groups with the same text share compiled code */
            const jit_node *n1 = &c->nodes[g->slots[g->members[k]].node];
            const jit_node *n2 = &c->nodes[g->slots[g->members[pairs[k].second]].node];
            td_emit(b, "extern void f%d(I n, void *o, const void *a, const void *b, const void *c);"
                        " /* %s then %s(%s) %s */\n", g->members[pairs[k].second],
                    tide_op_name((tide_op)n1->op), tide_op_name((tide_op)n2->op),
                    pairs[k].cfirst ? "c, t" : "t, c", tide_dtype_name((tide_dtype)n1->dtype));
        }
}

/* Before the rows: the scalar operands (pointers, splatted to a row where read as one) and the
 * scalar members, computed once (the first range stores an output). */
static void emit_scalars(td_sbuf *b, const jit_plan *c, const jit_group *g,
                         const tile_pair *pairs)
{
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (!sl->member && sl->vkind == JV_SCALAR) {
            td_emit(b, "    p%d = (char *)A[%d];\n", s, sl->arg);
            if (sl->splat >= 0 && splat_read(c, g, pairs, s))
                emit_splat(b, g, s, "    ", NULL);
        }
    }
    for (int k = 0; k < g->nmembers; k++) {
        int s = g->members[k];
        const jit_slot *ms = &g->slots[s];
        if (ms->vkind != JV_SCALAR)
            continue;
        td_emit(b, "    p%d = ", s);
        emit_at(b, g, s, AT_SCRATCH);
        td_emit(b, ";\n");
        emit_compute(b, c, g, s, "1", -1, 0);
        if (ms->output)
            td_emit(b, "    if (r0 == 0) memcpy(A[%d], p%d, %d);\n", ms->arg, s, ms->es);
        if (ms->splat >= 0 && splat_read(c, g, pairs, s))
            emit_splat(b, g, s, "    ", NULL);
    }
}

/* Before the rows: the vectors repeated within every tile (JIT_TILE_CONST), gathered once. */
static void emit_tile_constants(td_sbuf *b, const jit_group *g)
{
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (sl->member || sl->direct != JIT_TILE_CONST)
            continue;
        td_emit(b, "    p%d = ", s);
        emit_at(b, g, s, AT_SCRATCH);
        td_emit(b, ";\n    jg(A[%d], p%d, 0, N < %lldL ? N : %lldL);\n", sl->arg, s,
                (long long)g->rowlen, (long long)g->rowlen);
    }
}

/* In a row: the pointers to its non-scalar inputs, read in place or gathered into scratch. */
static void emit_row_inputs(td_sbuf *b, const jit_plan *c, const jit_group *g,
                            const tile_pair *pairs)
{
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (sl->member || sl->vkind == JV_SCALAR || sl->direct == JIT_TILE_CONST)
            continue;
        if (sl->direct == JIT_PERIODIC) { /* a repeated vector: a row's stretch of it (a bias) */
            td_emit(b, "        p%d = (char *)A[%d] + s0 %% %lldL * %d;\n", s, sl->arg,
                    (long long)sl->period, sl->es);
            continue;
        }
        if (sl->direct == JIT_IN_PLACE) {
            td_emit(b, "        p%d = (char *)A[%d] + s0 * %d;\n", s, sl->arg, sl->es);
            continue;
        }
        td_emit(b, "        p%d = ", s);
        emit_at(b, g, s, AT_SCRATCH);
        td_emit(b, ";\n");
        if (sl->vkind == JV_FULL) {
            td_emit(b, "        jg(A[%d], p%d, s0, n);\n", sl->arg, s);
        } else {
            td_emit(b, "        jg(A[%d], p%d, r, 1);\n", sl->arg, s);
            if (sl->splat >= 0 && splat_read(c, g, pairs, s))
                emit_splat(b, g, s, "        ", "n");
        }
    }
}

/* Calls member k's elementwise kernel (or the pair that ends at it: first >= 0) is cut into
 * along a long row of a fixed length, each after its piece of the prefetches: with one piece
 * per whole-row call the next row's lines queued behind the line-fill buffers and held the
 * kernels (softmax 4096²: 11% slower at AVX2, 9% at AVX-512; 8 chunks gained nothing over 4).
 * Elementwise: the chunks, whole vectors each, give the bits of one call. Reductions, casts
 * and symbolic rows: one call. */
static int row_chunks(const jit_plan *c, const jit_group *g, int k, int first)
{
    const jit_slot *ms = &g->slots[g->members[k]];
    int op = c->nodes[ms->node].op;
    if (!g->row_mode || runtime_rows(g) || g->rowlen < 2048 || ms->vkind != JV_FULL ||
        (first < 0 && (op == TIDE_OP_CAST || (op >= TIDE_OP_SUM && op <= TIDE_OP_MIN))))
        return 1;
    return ROW_CHUNKS;
}

/* In a row: each member's kernel call (or its fused pair's), with its output's pointer and
 * what follows the call: a streamed or written-back store, a splat of a row value. */
static void emit_row_kernels(td_sbuf *b, const jit_plan *c, const jit_group *g,
                             const tile_pair *pairs)
{
    /* the tile's kernel calls, each preceded by a piece of the prefetches (a fused pair is one
     * call: two pieces back to back made the tanh chain 8% slower, the line-fill buffers full) */
    int nfull = 0, kfull = 0, first = -1; /* first: the member whose pair the next call ends */
    for (int k = 0, f = -1; k < g->nmembers; k++) {
        if (prefetch_before(g, &g->slots[g->members[k]]) && pairs[k].second < 0)
            nfull += row_chunks(c, g, k, f);
        f = pairs[k].second >= 0 ? k : -1;
    }
    for (int k = 0; k < g->nmembers; k++) {
        int s = g->members[k];
        const jit_slot *ms = &g->slots[s];
        if (ms->vkind == JV_SCALAR)
            continue;
        if (pairs[k].second >= 0) {
            first = k; /* computed with its second, never stored */
            continue;
        }
        if (ms->output && ms->stream >= 0) {
            td_emit(b, "        p%d = big ? ", s);
            emit_at(b, g, s, AT_STREAM);
            td_emit(b, " : (char *)A[%d] + s0 * %d;\n", ms->arg, ms->es);
        } else if (ms->output) {
            td_emit(b, "        p%d = (char *)A[%d] + %s * %d;\n", s, ms->arg,
                    ms->vkind == JV_FULL ? "s0" : "r", ms->es);
        } else {
            td_emit(b, "        p%d = ", s);
            emit_at(b, g, s, AT_SCRATCH);
            td_emit(b, ";\n");
        }
        int nch = row_chunks(c, g, k, first);
        int64_t chunk = (g->rowlen + nch - 1) / nch;
        chunk = (chunk + 15) / 16 * 16; /* whole vectors: chunks give the whole call's bits */
        for (int ch = 0; ch < nch; ch++) {
            int64_t off = ch * chunk, len = g->rowlen - off < chunk ? g->rowlen - off : chunk;
            char n[32];
            snprintf(n, sizeof n, nch > 1 ? "%lldL" : "n", (long long)len);
            if (prefetch_before(g, ms))
                emit_prefetch(b, g, nfull, kfull++);
            if (first >= 0) {
                td_emit(b, "        f%d(%s, p%d", s, n, s);
                if (off)
                    td_emit(b, " + %lld", (long long)(off * ms->es));
                int nops = pairs[first].sub_exp ? 2 : 3;
                int in_place = pairs[first].sub_exp ? pairs[first].ops[1] : -1; /* the value */
                for (int j = 0; j < nops; j++) {
                    td_emit(b, ", ");
                    operand(b, g, ms, pairs[first].ops[j], in_place, off);
                }
                td_emit(b, "); /* %s then %s */\n",
                        tide_op_name((tide_op)c->nodes[g->slots[g->members[first]].node].op),
                        tide_op_name((tide_op)c->nodes[ms->node].op));
            } else {
                td_emit(b, "    ");
                emit_compute(b, c, g, s, ms->vkind == JV_FULL ? n : "1",
                             pairs[k].one ? pairs[k].one_slot : -1, off);
            }
        }
        first = -1;
        if (ms->output && ms->stream >= 0)
            td_emit(b, "        if (big) jw((char *)A[%d] + s0 * %d, p%d, n * %d);\n", ms->arg,
                    ms->es, s, ms->es);
        if (ms->into >= 0)
            td_emit(b, "        memcpy((char *)A[%d] + s0 * %d, p%d, n * %d); /* write-back */\n",
                 ms->arg, ms->es, s, ms->es);
        if (ms->vkind == JV_ROW && ms->splat >= 0 && splat_read(c, g, pairs, s))
            emit_splat(b, g, s, "        ", "n");
    }
}

/* The C text of group g: grp(A, r0, r1, S) runs its rows (or tiles) r0..r1-1; A holds the
 * operands, then N; S is the scratch. NULL when out of memory. */
static char *render(const jit_plan *c, const jit_group *g, int index, const tile_pair *pairs)
{
    td_sbuf b = {0};
    (void)index;
    td_emit(&b, "/* tide jit: a fusion group in %s of %lld elements */\n",
         g->row_mode ? "rows" : "tiles", (long long)g->rowlen);
    emit_declarations(&b, c, g, pairs);
    td_emit(&b, "void grp(void **A, I r0, I r1, char *S)\n{\n    I r, s0, n;\n");
    td_emit(&b, "    I N = *(const I *)A[%d]; /* elements in the domain: a runtime size */\n",
         g->nargs);
    if (runtime_rows(g))
        td_emit(&b, "    I L = *(const I *)A[%d]; /* elements per row */\n"
                    "    const I *O = (const I *)A[%d]; /* the scratch's layout */\n",
                g->nargs + 1, g->nargs + 2);
    for (int s = 0; s < g->nslots; s++)
        td_emit(&b, "    char *p%d;\n", s);
    int stream_es = 0; /* the widest output that may stream */
    for (int s = 0; s < g->nslots; s++)
        if (g->slots[s].stream >= 0 && g->slots[s].es > stream_es)
            stream_es = g->slots[s].es;
    if (stream_es)
        td_emit(&b, "    I big = N * %d >= %lldL; /* outputs stream past the caches */\n",
                stream_es, (long long)TD_JIT_STREAM_BYTES);
    td_emit(&b, "    I far = N >= %lldL; /* operands come from memory, not cache */\n",
            (long long)(TD_JIT_PREFETCH_BYTES / 4));
    emit_scalars(&b, c, g, pairs);
    emit_tile_constants(&b, g);
    td_emit(&b, "    for (r = r0; r < r1; r++) {\n        s0 = r * ");
    emit_len(&b, g);
    td_emit(&b, ";\n");
    if (g->row_mode) {
        td_emit(&b, "        n = ");
        emit_len(&b, g);
        td_emit(&b, ";\n");
    } else {
        td_emit(&b, "        n = N - s0;\n        if (n > %lldL) n = %lldL;\n",
             (long long)g->rowlen, (long long)g->rowlen);
    }
    emit_row_inputs(&b, c, g, pairs);
    emit_row_kernels(&b, c, g, pairs);
    td_emit(&b, "    }\n");
    if (stream_es)
        td_emit(&b, "    if (big) jf();\n");
    td_emit(&b, "}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The names the group's text declares extern: the helpers, then each member's kernel (or the
 * fused pair's function) for this plan's ops and dtypes. */
static void add_symbols(TCCState *s, const jit_plan *c, const jit_group *g, const tile_pair *pairs)
{
    tcc_add_symbol(s, "jg", (const void *)td_jit_gather);
    tcc_add_symbol(s, "js", (const void *)td_jit_splat);
    tcc_add_symbol(s, "jr", (const void *)td_jit_reduce);
    tcc_add_symbol(s, "jc", (const void *)td_jit_cast);
    tcc_add_symbol(s, "jp", (const void *)td_jit_prefetch);
    tcc_add_symbol(s, "jw", (const void *)td_jit_stream);
    tcc_add_symbol(s, "jf", (const void *)td_jit_stream_fence);
    tcc_add_symbol(s, "memcpy", (const void *)memcpy);
    for (int k = 0; k < g->nmembers; k++) {
        int sl = g->members[k];
        const jit_node *nd = &c->nodes[g->slots[sl].node];
        if (nd->op == TIDE_OP_CAST || (nd->op >= TIDE_OP_SUM && nd->op <= TIDE_OP_MIN))
            continue;
        int kdt = nd->op == TIDE_OP_WHERE ? nd->dtype : c->nodes[nd->in[0]].dtype;
        char name[32];
        snprintf(name, sizeof name, "k%d", sl);
        tcc_add_symbol(s, name, pairs[k].one ? (const void *)pairs[k].one
                                             : td_jit_tile_kernel(nd->op, kdt));
    }
    for (int k = 0; k < g->nmembers; k++)
        if (pairs[k].second >= 0) {
            char name[32];
            snprintf(name, sizeof name, "f%d", g->members[pairs[k].second]);
            tcc_add_symbol(s, name, pairs[k].sub_exp ? (const void *)pairs[k].sub_exp
                                                     : (const void *)pairs[k].fn);
        }
}

/* g->source through libtcc into g->fn, or the shared code of a group with the same text; where
 * libtcc fails, g->fn stays NULL and the interpreter runs the group. */
static void compile_group(const jit_plan *c, jit_group *g, int index, const tile_pair *pairs)
{
    uint64_t h = td_text_hash(g->source);
    pthread_mutex_lock(&tcc_lock);
    for (code_entry *e = code_cache[h % CODE_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->src, g->source) == 0) {
            e->refs++;
            g->fn = e->fn;
            g->code = e;
            pthread_mutex_unlock(&tcc_lock);
            return;
        }
    td_sbuf err = {0};
    double t0 = jit_now_ms();
    TCCState *s = td_alloc_fails() ? NULL : tcc_new(); /* the hook stands for libtcc's mallocs */
    int ok = s != NULL;
    if (ok) {
        tcc_set_error_func(s, &err, tcc_error_cb);
        tcc_set_options(s, "-nostdlib");
        tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
        add_symbols(s, c, g, pairs);
        ok = tcc_compile_string(s, g->source) == 0 && tcc_relocate(s, TCC_RELOCATE_AUTO) >= 0;
        if (ok)
            g->fn = (void (*)(void **, int64_t, int64_t, char *))tcc_get_symbol(s, "grp");
        ok = ok && g->fn;
    }
    code_entry *e = ok ? td_calloc(1, sizeof *e) : NULL;
    char *src = e ? td_strdup(g->source) : NULL;
    if (e && src) {
        e->hash = h;
        e->src = src;
        e->state = s;
        e->fn = g->fn;
        e->refs = 1;
        e->next = code_cache[h % CODE_BUCKETS];
        code_cache[h % CODE_BUCKETS] = e;
        g->code = e;
    } else {
        free(e);
        free(src);
        if (ok)
            td_emit(&err, "out of memory");
        ok = 0;
    }
    pthread_mutex_unlock(&tcc_lock);
    if (!ok) {
        /* the interpreter runs the same program; say why codegen did not */
        td_log("jit", "libtcc failed on group %d (%s); interpreting it", index,
               err.s ? err.s : "no TCCState");
        if (s)
            tcc_delete(s);
        g->fn = NULL;
        g->code = NULL;
    } else {
        td_log("jit", "libtcc: group %d compiled in %.2f ms", index, jit_now_ms() - t0);
    }
    free(err.s);
}

int td_cpu_codegen_group(const jit_plan *c, jit_group *g, int index)
{
    g->fn = NULL;
    g->code = NULL;
    tile_pair *pairs = plan_pairs(c, g);
    g->source = pairs ? render(c, g, index, pairs) : NULL;
    if (!g->source) {
        free(pairs);
        return td_error("jit: out of memory rendering a fusion group");
    }
    jit_dump_source(g->source, c->hash, index, "c");
    if (jit_codegen_enabled() && tcc_new)
        compile_group(c, g, index, pairs);
    free(pairs);
    return 0;
}

void td_cpu_codegen_free(jit_group *g)
{
    code_entry *e = g->code;
    if (e) {
        pthread_mutex_lock(&tcc_lock);
        if (--e->refs == 0) {
            code_entry **p = &code_cache[e->hash % CODE_BUCKETS];
            while (*p != e)
                p = &(*p)->next;
            *p = e->next;
            tcc_delete(e->state);
            free(e->src);
            free(e);
        }
        pthread_mutex_unlock(&tcc_lock);
    }
    g->code = NULL;
    g->fn = NULL;
}
