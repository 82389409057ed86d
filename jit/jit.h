/*
 * jit.h — what the files of jit/ share: the traced graph (nodes in program order), the compiled
 * plan made from it (steps, fusion groups, a memory plan). What devices see of it is group.h.
 * See jit/README.md for the design.
 */
#ifndef TIDE_JIT_H
#define TIDE_JIT_H

#include <pthread.h>
#include <string.h>

#include "../core/tensor.h"
#include "group.h"
#include "../ops/dispatch.h"

#define JIT_ROW_MAX 32768 /* longest row a fused reduction keeps in scratch */

/* ---- the compiled plan -------------------------------------------------------------------- */

typedef enum jit_step_kind { JS_VIEW, JS_KERNEL, JS_INPLACE, JS_GROUP } jit_step_kind;

typedef struct jit_step {
    int kind;
    int node;  /* VIEW/KERNEL/INPLACE */
    int group; /* GROUP */
} jit_step;

typedef struct jit_compiled {
    /* key: the structural description this was compiled from */
    uint64_t hash;
    int64_t *key;
    size_t key_len;
    int nnodes;
    jit_node *nodes; /* after the passes (alias-resolved), stubs NULL */
    int *alias;      /* node -> the node whose value it has (CSE, simplification) */
    int nsteps;
    jit_step *steps;
    int ngroups;
    jit_group *groups;
    int noutputs;
    int *outputs;    /* node ids whose tensors leave the graph */
    /* memory plan: node -> byte offset in the arena, or -1 (own storage / view / extern) */
    int64_t *arena_off;
    int64_t arena_bytes;
    int *release_after; /* node -> last step that reads it (values freed after it) */
    int nconsts;
    tide_tensor **consts; /* node -> folded constant (indexed by node), NULL elsewhere */
    int nexterns;
    /* symbolic dims (cache.c, jit/README.md): the key's sizes (shapes, strides, view offsets
     * and view attributes, in key order) apart from its structure; per size its class, -1 for
     * a static size (a hit needs the same value), else every size of a class is equal and at
     * least 2 at a hit; per node whether its shape holds a symbolic size. A static plan has
     * dim_class and node_sym NULL. */
    int64_t *dims;
    size_t dims_len;
    int *dim_class;
    char *node_sym;
    /* the memory plan's buffers in placement order, placed again per run in a symbolic plan */
    int nbufs;
    struct jit_buf *bufs;
    uint64_t serial; /* unique per compiled plan (a symbolic plan's bound nodes are cached by it) */
    double compile_ms;
    struct tide_device *device; /* where it runs (a segment is on one device) */
    jit_plan view;              /* what its device sees (group.h), set before groups compile */
    int refs; /* the cache, graphs, segments running it */
    struct jit_compiled *next; /* in the cache bucket */
} jit_compiled;

/* The steps of jit_compile (compile.c), each 0 or -1 with the error set: the passes
 * (passes.c; live receives the live nodes), grouping into steps and groups (fusion.c), fusing
 * groups with the products they follow (fusion.c), and the memory plan (memplan.c). */
int jit_run_passes(jit_compiled *c, char *live, char *is_output, char *written);
int jit_schedule(jit_compiled *c, const char *live, const char *is_output, const char *written);
void jit_fuse_epilogues(jit_compiled *c, const char *written, const char *is_output);
int jit_plan_memory(jit_compiled *c, const char *is_output);
/* A symbolic plan's arena for one run: each buffer's offset (off, by node) for the run's
 * shapes (nodes), placed in the compile's order. Its size in bytes. */
int64_t jit_place_arena(const jit_compiled *c, const jit_node *nodes, int64_t *off);
/* A symbolic plan's sizes for one run: c's nodes with the shapes, strides and view offsets of
 * the run's trace (rt). The calling thread's copy (valid until its next call: runs on a thread
 * do not nest), or NULL with the error set. */
jit_node *jit_bind_nodes(const jit_compiled *c, const jit_node *rt);
/* Group g bound to a run's shapes (nodes): its domain, numel, nrows, and rowlen in row mode. */
void jit_bind_group(const jit_group *g, const jit_node *nodes, jit_group *out);
/* Whether a symbolic plan's groups accept the run's shapes (a fused row fits in scratch). */
bool jit_plan_fits(const jit_compiled *c, const jit_node *nodes);

static inline bool jit_is_reduce(int op)
{
    return op == TIDE_OP_SUM || op == TIDE_OP_PROD || op == TIDE_OP_MAX || op == TIDE_OP_MIN;
}
static inline int64_t jit_numel(const jit_node *nd) { return td_numel(nd->ndim, nd->shape); }
static inline bool jit_same_shape(int na, const int64_t *a, int nb, const int64_t *b)
{
    return na == nb && memcmp(a, b, sizeof(int64_t) * (size_t)na) == 0;
}

/* Builds the plan for nodes[0..n) with the given outputs (passes, fusion, memory plan, code
 * generation) to run on device, the segment's (trace.c: where its ops run). node_sym (NULL: a
 * static plan) marks the nodes whose shapes hold symbolic sizes: they are never folded, and
 * groups over them are symbolic (group.h). NULL with the error set. */
jit_compiled *jit_compile(const jit_node *nodes, int n, int nexterns, const int *outputs,
                          int noutputs, tide_device *device, uint64_t hash, const char *node_sym);
void jit_compiled_free(jit_compiled *c);
/* Runs a plan: ext are the external tensors, nodes the trace's nodes (runtime attributes:
 * RANDOM's seed and offset, FILL values). values receives a new reference per output node
 * (indexed like outputs). 0 or -1. */
int jit_execute(const jit_compiled *c, tide_tensor *const *ext, const jit_node *nodes,
                tide_tensor **out_values);

/* ---- profiling a plan's steps (exec_profile.c; ops/profile.h) ----------------------------- */

/* A fused group run from t0 with the tensors of its slots (t, as run_group passes them). */
void jit_profile_group(const jit_compiled *c, const jit_node *nodes, const jit_node *rt,
                       const jit_group *g, tide_tensor *const *t, double t0);

/* ---- shared state ------------------------------------------------------------------------- */

/* Where the current trace's code is (the Lua source line), or "" (for log lines). */
const char *jit_where(void);

#endif /* TIDE_JIT_H */
