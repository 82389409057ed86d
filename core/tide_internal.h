/*
 * tide_internal.h — entry points of libtide for tide's own Lua binding (lua/) and jit/, not for
 * applications: hooks of a trace session that tide.jit needs. Not installed; the names stay
 * exported (TIDE_API) so that a binding linked against libtide.so finds them. The rest of the
 * trace-session API (tide_jit_trace_begin/end, tide_jit_function_*) is public, in tide.h.
 */
#ifndef TIDE_INTERNAL_H
#define TIDE_INTERNAL_H

#include "primitive.h"
#include "tide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fn(ctx) is called at each graph break of the current session before the pending segment is
 * compiled (Lua collects garbage there, so dead temporaries do not become results). */
TIDE_API void tide_jit_trace_on_break(void (*fn)(void *ctx), void *ctx);
/* Ends the calling thread's capture (tide_jit_begin) without compiling it: tide.export when
 * the traced function raised. Does nothing when the thread does not capture. */
TIDE_API void tide_jit_cancel(void);
/* Runs what is pending now (a graph break without a read). 0 or -1. */
TIDE_API int tide_jit_trace_flush(void);
/* Whether this thread is in a trace session (tide.jit's function running). */
TIDE_API bool tide_jit_is_tracing(void);
/* Counts a fallback to eager (in stats, if given, and in the process's counts). */
TIDE_API void tide_jit_note_fallback(tide_jit_stats *stats);

/* What an importer attaches to a graph it compiled (jit/graph_info.c): the names and declared
 * types tide_graph_input_name & co. give, and replan, which tide_graph_run calls when the inputs
 * do not fit the captured layouts (a free dim at another size): it returns the graph to run
 * them with, owned by owner (NULL with the error set). release(owner) runs with tide_graph_free.
 * Strings and arrays are the info's own (freed with it). */
typedef struct tide_graph_io {
    char *name;
    tide_dtype dtype;
    int ndim;
    int64_t shape[8];    /* -1: free */
    char *dim_name[8];   /* a free dim's name, or NULL */
} tide_graph_io;
typedef struct tide_graph_info {
    int ninputs, noutputs;
    tide_graph_io *inputs, *outputs;
    void *owner;
    tide_graph *(*replan)(void *owner, tide_tensor *const *inputs, int ninputs);
    void (*release)(void *owner);
    int nmeta; /* string metadata: key, value pairs (a graph file's) */
    char **meta_keys, **meta_values;
} tide_graph_info;
/* The ONNX importer's op table (io/onnx/onnx_table.c), entry i: the op and the range of ai.onnx
 * opsets it serves (until 0: every later one). 0, or -1 past the last entry. */
int td_onnx_op_entry(int i, const char **name, int *since, int *until);

/* g takes info (allocated with malloc, with its strings and arrays) and frees it with itself. */
void td_graph_set_info(tide_graph *g, tide_graph_info *info);
void td_graph_info_free(tide_graph_info *info);

/* A compiled graph as data (jit/graph_desc.c): what io/graph_file.c writes to a graph file and
 * reads back. Nodes are the capture's, in program order: the inputs' and captured tensors'
 * EXTERN nodes, ops, views (layout relative to their root), in-place writes. */
enum { TD_GN_EXTERN, TD_GN_OP, TD_GN_VIEW, TD_GN_INPLACE };
typedef struct td_graph_node {
    int kind, op, dtype, ndim, flags;
    bool on_host; /* on the CPU while the graph runs elsewhere (a wrapped number) */
    int nin;
    int in[6];
    int root; /* VIEW: the root node */
    int ext;  /* EXTERN: the extern's index (inputs first) */
    int64_t shape[8], strides[8];
    int64_t offset; /* VIEW: from its root's; EXTERN: from its blob's first element */
    tide_attrs attrs;
} td_graph_node;
typedef struct td_graph_desc {
    int nnodes;
    td_graph_node *nodes;
    int ninputs, nexterns, noutputs;
    uint32_t *dyn;          /* per input its dynamic dims (bit d: dim d), or NULL */
    int *out_node;          /* [noutputs] */
    /* The captured tensors' values: each blob is the span of one storage they read (1-D,
     * contiguous; references of the description's own); extern e >= ninputs views blob
     * ext_blob[e] with its node's layout. */
    int nblobs;
    tide_tensor **blobs;
    int *ext_blob; /* [nexterns], -1 for inputs */
    const char *device;     /* the device it runs on ("cpu", "vulkan") */
} td_graph_desc;
/* g as data: d's arrays and blob references are its own (td_graph_desc_free). */
int td_graph_describe(const tide_graph *g, td_graph_desc *d);
void td_graph_desc_free(td_graph_desc *d);
/* A graph from data, compiled for device (NULL: where d ran). Checks the nodes first (indices,
 * dtypes, ranks, views inside their roots, shapes by each op's rule where the jit has one): a
 * damaged description is an error naming the node, never a kernel given bad sizes. Blobs on
 * the CPU are moved to the device here (a captured tensor of the CPU's stays a view of its
 * blob: a mapped file's bytes). NULL with the error set. */
tide_graph *td_graph_build(const td_graph_desc *d, const char *device);
/* Re-planning a built graph for inputs its plan does not take but its declared types do (a size
 * 1 in a dynamic dim, other strides): the owner takes d (its arrays and blobs; d is left empty) and builds
 * a graph per input layout from it, replaying the nodes' shape rules at those sizes (at most
 * 32 layouts; each kept until the owner is freed). For tide_graph_info's replan and release. */
void *td_graph_replanner_new(td_graph_desc *d, const char *device);
tide_graph *td_graph_replan(void *owner, tide_tensor *const *inputs, int ninputs);
void td_graph_replanner_free(void *owner);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_INTERNAL_H */
