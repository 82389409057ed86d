/*
 * trace.h — what the files of the recorder share (jit/README.md): the trace of one thread, the
 * compile cache, segments and graph breaks, graphs for C, and sessions.
 *   trace.c    the recorder: the dispatcher's trace hook, nodes and stubs, graph breaks
 *   cache.c    keys, the compile cache, statistics
 *   segment.c  ending a segment: compile (or find) and run it, give stubs their storage
 *   graph.c    the C capture API (tide_jit_begin/end, tide_graph_run)
 *   session.c  trace sessions (tide_jit_trace_*), each thread's spare trace
 */
#ifndef TIDE_JIT_TRACE_H
#define TIDE_JIT_TRACE_H

#include "jit.h"

/* A trace's buffers, grown as needed: a thread keeps them from session to session (its spare
 * trace), so a new session clears everything else and keeps these. */
typedef struct trace_buffers {
    jit_node *nodes;
    int cap;
    tide_tensor **ext; /* references */
    int extcap;
    int *ext_node; /* extern index -> its node */
    /* open-addressing map: outside tensor pointer -> extern node (cleared after each segment) */
    const tide_tensor **map_key;
    int *map_val;
    int map_cap;
    const tide_storage **wstor; /* storages of outside tensors written in this segment */
    int wstorcap;
    int64_t *key; /* the cache key being built: the segment's structure */
    size_t key_cap;
    int64_t *dims; /* and its sizes (symbolic.c), each with the node it belongs to */
    int *dim_node;
    size_t dims_cap;
} trace_buffers;

typedef struct jit_trace {
    trace_buffers b;
    int n;         /* nodes */
    int next;      /* externs */
    int map_used;
    int nwrites;
    int nwstor;
    int ninputs;       /* capture mode: the declared inputs are externs 0..ninputs-1 */
    bool capture;      /* C capture (tide_jit_begin): a graph break is an error */
    tide_jit_stats *stats;
    const char *(*where)(void *);
    void *where_ctx;
    void (*on_break)(void *);
    void *on_break_ctx;
    td_hooks saved;
    int flushing;
    tide_device *dev; /* the device of the pending segment's ops (a segment is on one) */
    /* symbolic dims (symbolic.c): the function traced (NULL: a bare session or a capture), the
     * sizes of its dynamic argument dims in this call, and whether plans stay per shape */
    struct tide_jit_function *fn;
    int ndyn;
    int64_t dyn[16];
    bool static_only;
    /* a dynamic capture (tide_jit_begin_dynamic): per input its dynamic dims (bit d: dim d),
     * and the graph at other sizes of them (replay.c; what tide_jit_end compiles a symbolic
     * plan from) */
    uint32_t *cap_dyn;
    jit_node *cap_probe;
    /* a graph file's capture (graph_desc.c): compiled, not run at its end (its placeholder
     * inputs hold no data: zeros are no valid indices) */
    bool no_run;
} jit_trace;


/* The calling thread's trace, NULL when it does not trace. */
extern _Thread_local jit_trace *jit_current;
/* A segment longer than this runs in pieces (a whole loop inside one jit call): the trace's
 * nodes (~400 bytes each) and a compile stay bounded. Compiling grows about linearly (GPT step:
 * 4096 nodes in 20-45 ms, 6541 in 56-87 ms, on a loaded 2-core Zen 3), so the bound sits above
 * a whole training step of a mid-size model: at 4096 the GPT step of examples/gpt.lua (6 layers,
 * 384 wide; ~6,500 nodes) was cut inside AdamW into two plans (1614 steps, 315 fused groups,
 * the cut's live values in storage of their own, no DCE across it); in one plan it is 1397
 * steps and 241 groups, and 77 dead nodes go. */
#define SEGMENT_MAX_NODES 16384

#define JIT_AUTOCAST_ANY (-1000)

typedef struct tide_graph {
    jit_compiled *plan;
    int nnodes;
    jit_node *nodes;      /* runtime attributes */
    int ninputs;
    int nexterns;
    tide_tensor **captured; /* externs ninputs.. (references) */
    int noutputs;
    /* per output: the node whose value it is (a root), and the view of it handed out */
    int *out_root;        /* -1: the output is extern out_ext */
    int *out_ext;
    jit_node *out_view;   /* layout (shape/strides/offset relative to the root) */
    int *plan_index;      /* out i -> index in plan->outputs */
    int *out_node;        /* out i -> its node (a dynamic graph's output layouts are replayed) */
    uint32_t *dyn;        /* a dynamic graph: per input its dynamic dims; NULL: static */
    int autocast;         /* the autocast dtype it was captured under (tide_get_autocast), or
                             JIT_AUTOCAST_ANY (a loaded graph: its casts are nodes) */
    struct tide_graph_info *info; /* an importer's names, types and re-plan (graph_info.c) */
    /* A run's copy of nodes, kept for the next run (graph.c, run_nodes): one run at a time
     * takes it (scratch_busy, atomic) and restores the nodes the run before changed (dirty). */
    jit_node *scratch;
    int *dirty, ndirty;
    struct jit_key_scratch *key; /* the key jit_plan_serves builds, kept with scratch */
    int *input_index;            /* per input its node's index (graph.c, input_index) */
    int scratch_busy;
} tide_graph;

/* graph_info.c: whether an importer's graph runs inputs that miss the captured layouts through
 * another plan: then *handled is set and the result is that run's. */
bool jit_graph_inputs_fit(const tide_graph *g, tide_tensor *const *inputs); /* graph.c */
int jit_graph_run_other(tide_graph *g, tide_tensor *const *inputs, int ninputs,
                        tide_tensor **outputs, bool *handled);
/* The graph the importer's re-plan hook gives for inputs a symbolic plan's guards refused,
 * run; -1 with the refusal's error when g has no hook. */
int jit_graph_run_replanned(tide_graph *g, tide_tensor *const *inputs, int ninputs,
                            tide_tensor **outputs);

/* recorder (trace.c) */
void jit_map_clear(jit_trace *tr);
int jit_map_find(const jit_trace *tr, const tide_tensor *t);
int jit_stub_node(const jit_trace *tr, const tide_tensor *t);
int jit_node_of(jit_trace *tr, const tide_tensor *t);
tide_tensor *jit_trace_hook(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                            tide_tensor *const *in, int nin, const tide_attrs *attrs,
                            const tide_tensor *out_view);
int jit_materialize_hook(void *ctx, const tide_tensor *t);
/* cache (cache.c) */
void jit_plan_release(jit_compiled *c);
void jit_stats_add(jit_trace *tr, int compiles, int hits, int misses, int breaks, int fallbacks,
                   double ms);
jit_compiled *jit_lookup_or_compile(jit_trace *tr, const jit_node *nodes, int n, int nexterns,
                                    const int *outs, int nouts);
/* symbolic dims (symbolic.c): whether plan c accepts a segment's sizes (dims) and nodes;
 * which sizes a new plan makes symbolic (sym[p], given the latest plan of the same structure or
 * NULL; false when none, or the device or the function keeps plans per shape); the plan's
 * classes and symbolic nodes from sym; why a segment missed plan `similar` (for the log and
 * f:stats()). */
bool jit_guards_hold(const jit_compiled *c, const int64_t *dims, const jit_node *nodes);
bool jit_choose_symbolic(const jit_trace *tr, const jit_compiled *similar, const int64_t *dims,
                         size_t ndims, char *sym);
int jit_symbolic_classes(const int64_t *dims, const char *sym, size_t ndims, int **dim_class);
char *jit_symbolic_nodes(const char *sym, const int *dim_node, size_t ndims, int nnodes);
void jit_explain_miss(const jit_compiled *similar, const int64_t *dims, const int *dim_node,
                      const jit_node *nodes, char *buf, size_t size);
/* A recompile's reason, kept by the traced function (signatures.c) for f:stats(). */
void jit_function_note_recompile(struct tide_jit_function *fn, const char *reason);
/* A dynamic capture's plan (cache.c): compiled outside the cache (graph.c holds it), symbolic
 * in every size that differs between nodes and probe (the graph replayed at other sizes of its
 * dynamic dims). NULL with the error set. */
jit_compiled *jit_compile_dynamic(jit_trace *tr, const jit_node *nodes, const jit_node *probe,
                                  int n, int nexterns, const int *outs, int nouts);
/* Whether a dynamic graph's plan c serves nodes (its nodes replayed at a run's sizes): 1 when
 * the structure is the same and c's guards hold; else 0 with why in buf, or -1 with the error
 * set (out of memory). */
int jit_plan_serves(const jit_compiled *c, const jit_node *nodes, int n, char *buf, size_t size,
                    struct jit_key_scratch **scratch);
/* A key's buffers kept between calls of jit_plan_serves (NULL-safe free). */
typedef struct jit_key_scratch jit_key_scratch;
void jit_key_scratch_free(jit_key_scratch *s);
/* replay.c: the shapes of a captured graph (cap) at a run's sizes: nodes starts as a copy of cap
 * whose input EXTERN nodes hold the run's layouts; every other node gets the shape (a view its
 * strides and offset) its op gives on its inputs' new layouts. who names the caller in errors.
 * 0, or -1 with an error naming the op that cannot follow the sizes. */
int jit_replay_shapes(const jit_node *cap, jit_node *nodes, int n, const char *who,
                      int *changed, int *nchanged);
/* Op node i's shape by its op's rule on its inputs' shapes, into nodes[i]: 0; 1 when the jit
 * has no rule for the op; -1 with the error set when the inputs or attributes do not fit it. */
int jit_shape_rule(jit_node *nodes, int i);
/* segments (segment.c): ends the segment (forced: the capture's outputs; graph: receives the
 * capture's graph); resets the trace for the next one */
int jit_flush(jit_trace *tr, tide_tensor *const *forced, int nforced, tide_graph **graph);
void jit_reset_segment(jit_trace *tr);
/* sessions (session.c): begins one on this thread (capture: C capture mode), ends it; frees a
 * trace; drops this thread's spare trace (not while tracing) */
int jit_session_begin(bool capture, tide_jit_stats *stats, const char *(*where)(void *),
                      void *where_ctx);
void jit_session_free(jit_trace *tr);
void jit_trace_destroy(void *p);
void jit_drop_spare(void);

#endif /* TIDE_JIT_TRACE_H */
