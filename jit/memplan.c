/*
 * memplan.c — the memory plan of a compiled segment: intermediates share one arena by
 * liveness (each gets a byte offset), tensors that leave the graph get their own storage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/strbuf.h"
#include "jit.h"

/* ---- memory plan --------------------------------------------------------------------------- */

/* A buffer of the arena: its node, bytes, and the steps it lives through. */
typedef struct jit_buf {
    int node;
    int64_t bytes, first, last;
} jit_buf;

static int cmp_req(const void *a, const void *b)
{
    const jit_buf *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : x->node - y->node;
}

static void note_read(jit_compiled *c, int *last, int node, int step)
{
    int r = c->nodes[node].root;
    if (last[node] < step)
        last[node] = step;
    if (last[r] < step)
        last[r] = step;
}

/* Each node's lifetime in steps: first[i] the step that writes it, last[i] the last that
 * reads it (a view's readers keep its root alive). */
static void note_lifetimes(jit_compiled *c, int *first, int *last)
{
    int n = c->nnodes;
    for (int s = 0; s < c->nsteps; s++) {
        const jit_step *st = &c->steps[s];
        if (st->kind == JS_GROUP) {
            const jit_group *g = &c->groups[st->group];
            if (g->producer >= 0) { /* the fused product: written and its inputs read here */
                first[g->producer] = s;
                for (int k = 0; k < c->nodes[g->producer].nin; k++)
                    note_read(c, last, c->nodes[g->producer].in[k], s);
            }
            for (int k = 0; k < g->nslots; k++) {
                const jit_slot *sl = &g->slots[k];
                if (sl->member && sl->output)
                    first[sl->node] = s;
                else if (!sl->member)
                    note_read(c, last, sl->node, s);
                if (sl->into >= 0)
                    note_read(c, last, sl->into, s);
            }
            continue;
        }
        const jit_node *nd = &c->nodes[st->node];
        if (st->kind == JS_KERNEL)
            first[st->node] = s;
        for (int k = 0; k < nd->nin; k++)
            note_read(c, last, nd->in[k], s);
        if (st->kind == JS_VIEW)
            note_read(c, last, nd->root, s);
    }
    /* a view's readers keep its root alive */
    for (int i = n - 1; i >= 0; i--)
        if (c->nodes[i].kind == JN_VIEW && last[c->nodes[i].root] < last[i])
            last[c->nodes[i].root] = last[i];
}

/* Places the buffers in order (at compile time the largest first, sorted by cmp_req): each at
 * the lowest offset of the arena that overlaps no placed buffer alive at the same time. Any
 * order gives a valid plan, so a symbolic plan places them again per run in the same order.
 * Offsets into off (by node); the arena's size. */
static int64_t place_buffers(const jit_buf *req, int nreq, int64_t *off_of)
{
    int64_t top = 0;
    for (int r = 0; r < nreq; r++) {
        /* lowest offset that does not overlap a placed buffer alive at the same time */
        int64_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int q = 0; q < r; q++) {
                const jit_buf *p = &req[q];
                if (p->last < req[r].first || req[r].last < p->first)
                    continue;
                int64_t po = off_of[p->node];
                if (off < po + p->bytes && po < off + req[r].bytes) {
                    off = po + p->bytes;
                    moved = true;
                }
            }
        }
        off_of[req[r].node] = off;
        if (off + req[r].bytes > top)
            top = off + req[r].bytes;
    }
    return top;
}

static int64_t buffer_bytes(const jit_node *nd)
{
    int64_t bytes = jit_numel(nd) * (int64_t)td_dtype_sizes[nd->dtype];
    return (bytes + 63) / 64 * 64;
}

int jit_plan_memory(jit_compiled *c, const char *is_output)
{
    int n = c->nnodes;
    int *first = td_malloc(sizeof(int) * (size_t)n);
    int *last = td_malloc(sizeof(int) * (size_t)n);
    jit_buf *req = td_malloc(sizeof *req * (size_t)(n ? n : 1));
    c->arena_off = td_malloc(sizeof(int64_t) * (size_t)n);
    if (!first || !last || !req || !c->arena_off) {
        free(first);
        free(last);
        free(req);
        return td_error("jit: out of memory");
    }
    for (int i = 0; i < n; i++) {
        first[i] = -1;
        last[i] = -1;
        c->arena_off[i] = -1;
    }
    note_lifetimes(c, first, last);
    int nreq = 0;
    for (int i = 0; i < n; i++) {
        /* a copy's result on another device (TO) gets its own storage there */
        if (first[i] < 0 || is_output[i] || c->nodes[i].kind != JN_OP ||
            c->nodes[i].device != c->device)
            continue;
        req[nreq++] = (jit_buf){i, buffer_bytes(&c->nodes[i]), first[i],
                                last[i] < first[i] ? first[i] : last[i]};
    }
    qsort(req, (size_t)nreq, sizeof *req, cmp_req);
    c->arena_bytes = place_buffers(req, nreq, c->arena_off);
    free(first);
    c->release_after = last;
    c->bufs = req;
    c->nbufs = nreq;
    return 0;
}

int64_t jit_place_arena(const jit_compiled *c, const jit_node *nodes, int64_t *off)
{
    if (c->nbufs == 0)
        return 0;
    jit_buf *req = td_malloc(sizeof *req * (size_t)c->nbufs);
    if (!req)
        return td_error("jit: out of memory");
    for (int r = 0; r < c->nbufs; r++) {
        req[r] = c->bufs[r];
        req[r].bytes = buffer_bytes(&nodes[req[r].node]);
    }
    int64_t top = place_buffers(req, c->nbufs, off);
    free(req);
    return top;
}

