/*
 * tide_internal.h — entry points of libtide for tide's own Lua binding (lua/) and jit/, not for
 * applications: hooks of a trace session that tide.jit needs. Not installed; the names stay
 * exported (TIDE_API) so that a binding linked against libtide.so finds them. The rest of the
 * trace-session API (tide_jit_trace_begin/end, tide_jit_function_*) is public, in tide.h.
 */
#ifndef TIDE_INTERNAL_H
#define TIDE_INTERNAL_H

#include "tide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fn(ctx) is called at each graph break of the current session before the pending segment is
 * compiled (Lua collects garbage there, so dead temporaries do not become results). */
TIDE_API void tide_jit_trace_on_break(void (*fn)(void *ctx), void *ctx);
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
} tide_graph_info;
/* The ONNX importer's op table (io/onnx/onnx_table.c), entry i: the op and the range of ai.onnx
 * opsets it serves (until 0: every later one). 0, or -1 past the last entry. */
int td_onnx_op_entry(int i, const char **name, int *since, int *until);

/* g takes info (allocated with malloc, with its strings and arrays) and frees it with itself. */
void td_graph_set_info(tide_graph *g, tide_graph_info *info);
void td_graph_info_free(tide_graph_info *info);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_INTERNAL_H */
