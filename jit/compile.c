/*
 * compile.c — from a traced segment to a plan: the passes (passes.c), fusion grouping and
 * epilogues (fusion.c, the device compiling each group), the memory plan (memplan.c), and the
 * plan's dump for TIDE_DUMP.
 *
 * The graph is a program: nodes in the order the ops were called, in-place writes included.
 * Passes keep that order's meaning: CSE never merges across a write (epochs), a written node
 * is never folded, merged or simplified away, and a fusion group never spans a write.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/strbuf.h"
#include "jit.h"


int jit_op_fusible(int op)
{
    return tide_op_is_unary((tide_op)op) || tide_op_is_binary((tide_op)op) ||
           op == TIDE_OP_WHERE || op == TIDE_OP_CAST;
}

bool jit_codegen_enabled(void)
{
    static int enabled = -1; /* read once; a benign race writes the same value */
    if (enabled < 0) {
        const char *e = getenv("TIDE_JIT_CODEGEN");
        enabled = !(e && strcmp(e, "0") == 0);
    }
    return enabled;
}

void jit_dump_source(const char *text, uint64_t hash, int index, const char *ext)
{
    const char *dir = getenv("TIDE_DUMP");
    if (!dir || !*dir)
        return;
    char path[4096];
    if (index >= 0)
        snprintf(path, sizeof path, "%s/tide_jit_%016llx_g%d.%s", dir, (unsigned long long)hash,
                 index, ext);
    else
        snprintf(path, sizeof path, "%s/tide_jit_%016llx_%s", dir, (unsigned long long)hash, ext);
    FILE *f = fopen(path, "w");
    if (!f) {
        td_log("jit", "TIDE_DUMP: cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

void jit_compiled_free(jit_compiled *c)
{
    if (!c)
        return;
    for (int g = 0; g < c->ngroups; g++) {
        if (c->device && c->device->jit_free)
            c->device->jit_free(c->device, &c->groups[g]);
        free(c->groups[g].slots);
        free(c->groups[g].members);
        free(c->groups[g].source);
    }
    if (c->consts)
        for (int i = 0; i < c->nnodes; i++)
            tide_release(c->consts[i]);
    free(c->consts);
    free(c->groups);
    free(c->steps);
    free(c->nodes);
    free(c->alias);
    free(c->outputs);
    free(c->arena_off);
    free(c->release_after);
    free(c->bufs);
    free(c->dims);
    free(c->dim_class);
    free(c->node_sym);
    free(c->key);
    free(c);
}

/* ---- entry --------------------------------------------------------------------------------- */

/* "op dtype[shape] <- %in, ..." of node i, for the plan dump. */
static void describe_node(td_sbuf *b, const jit_compiled *c, int i)
{
    const jit_node *nd = &c->nodes[i];
    static const char *kinds[] = {"extern", "op", "view", "inplace", "const"};
    td_emit(b, "%%%d %s %s %s[", i, kinds[nd->kind],
            nd->kind == JN_OP || nd->kind == JN_INPLACE ? tide_op_name((tide_op)nd->op) : "",
            tide_dtype_name((tide_dtype)nd->dtype));
    for (int d = 0; d < nd->ndim; d++)
        td_emit(b, d ? ",%lld" : "%lld", (long long)nd->shape[d]);
    td_emit(b, "]");
    for (int j = 0; j < nd->nin; j++)
        td_emit(b, j ? ", %%%d" : " <- %%%d", nd->in[j]);
    if (nd->kind == JN_VIEW)
        td_emit(b, " (view of %%%d)", nd->root);
}

/* TIDE_DUMP=dir: the plan's steps as dir/tide_jit_<hash>_plan.txt, one line per step (fusion
 * groups with their members), so a user can see what was fused and what runs alone. */
static void dump_plan(const jit_compiled *c)
{
    const char *dir = getenv("TIDE_DUMP");
    if (!dir || !*dir)
        return;
    td_sbuf b = {0};
    static const char *steps[] = {"view", "kernel", "inplace", "group"};
    for (int k = 0; k < c->nsteps; k++) {
        const jit_step *st = &c->steps[k];
        td_emit(&b, "step %d %s", k, steps[st->kind]);
        if (st->kind != JS_GROUP) {
            td_emit(&b, ": ");
            describe_node(&b, c, st->node);
            td_emit(&b, "\n");
            continue;
        }
        const jit_group *g = &c->groups[st->group];
        td_emit(&b, " %d (%s of %lld", st->group, g->row_mode ? "rows" : "tiles",
                (long long)g->rowlen);
        if (g->producer >= 0) {
            td_emit(&b, ", the epilogue of ");
            describe_node(&b, c, g->producer);
            if (c->nodes[g->producer].op == TIDE_OP_CONV2D)
                td_emit(&b, " whole");
            else
                td_emit(&b, " in blocks of %lld row%s", (long long)g->block_units,
                        g->block_units == 1 ? "" : "s");
        }
        td_emit(&b, "):\n");
        for (int m = 0; m < g->nmembers; m++) {
            const jit_slot *sl = &g->slots[g->members[m]];
            td_emit(&b, "    ");
            describe_node(&b, c, sl->node);
            td_emit(&b, "%s%s\n", sl->output ? " (output)" : "",
                    sl->into >= 0 ? " (written back)" : "");
        }
    }
    if (!b.failed)
        jit_dump_source(b.s, c->hash, -1, "plan.txt");
    free(b.s);
}

jit_compiled *jit_compile(const jit_node *nodes, int n, int nexterns, const int *outputs,
                          int noutputs, tide_device *device, uint64_t hash, const char *node_sym)
{
    jit_compiled *c = td_calloc(1, sizeof *c);
    char *live = td_malloc((size_t)n + 1), *is_output = td_calloc((size_t)n + 1, 1),
         *written = td_calloc((size_t)n + 1, 1);
    if (!c || !live || !is_output || !written)
        goto oom;
    static uint64_t serials;
    c->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    c->nnodes = n;
    c->hash = hash;
    c->nexterns = nexterns;
    c->nodes = td_malloc(sizeof *c->nodes * (size_t)(n ? n : 1));
    c->alias = td_malloc(sizeof(int) * (size_t)(n ? n : 1));
    c->consts = td_calloc((size_t)(n ? n : 1), sizeof *c->consts);
    c->outputs = td_malloc(sizeof(int) * (size_t)(noutputs ? noutputs : 1));
    if (!c->nodes || !c->alias || !c->consts || !c->outputs)
        goto oom;
    memcpy(c->nodes, nodes, sizeof *c->nodes * (size_t)n);
    if (node_sym) {
        if (!(c->node_sym = td_malloc((size_t)n + 1)))
            goto oom;
        memcpy(c->node_sym, node_sym, (size_t)n);
    }
    c->device = device;
    for (int i = 0; i < n; i++) {
        c->nodes[i].stub = NULL;
        c->alias[i] = i;
    }
    c->view = (jit_plan){hash, n, c->nodes, c->device};
    c->noutputs = noutputs;
    memcpy(c->outputs, outputs, sizeof(int) * (size_t)noutputs);
    for (int i = 0; i < noutputs; i++)
        is_output[outputs[i]] = 1;
    for (int i = 0; i < n; i++)
        if (nodes[i].kind == JN_INPLACE) {
            written[nodes[i].in[0]] = 1;
            written[nodes[nodes[i].in[0]].root] = 1;
        }
    /* a node read through a view that is written is written too (the view's root is marked) */
    for (int i = 0; i < n; i++)
        if (nodes[i].kind == JN_VIEW && written[nodes[i].root])
            written[i] = 1;
    if (jit_run_passes(c, live, is_output, written) < 0)
        goto fail;
    /* outputs may have been aliased: re-point them (never to another output's storage) */
    for (int i = 0; i < noutputs; i++)
        c->outputs[i] = c->alias[c->outputs[i]];
    if (jit_schedule(c, live, is_output, written) < 0)
        goto fail;
    jit_fuse_epilogues(c, written, is_output);
    if (jit_plan_memory(c, is_output) < 0)
        goto fail;
    dump_plan(c);
    free(live);
    free(is_output);
    free(written);
    return c;
oom:
    td_error("jit: out of memory compiling a graph of %d nodes", n);
fail:
    free(live);
    free(is_output);
    free(written);
    jit_compiled_free(c);
    return NULL;
}

