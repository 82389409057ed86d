/*
 * graph_desc.h — what the files of graph files' jit side share (core/tide_internal.h has the
 * description itself): graph_desc.c describes and builds, graph_check.c checks, graph_ops.c
 * holds the per-op rules, graph_replan.c plans other input layouts.
 */
#ifndef TIDE_JIT_GRAPH_DESC_H
#define TIDE_JIT_GRAPH_DESC_H

#include "../core/tide_internal.h"
#include "trace.h"

/* Every node of d checked (graph_check.c). 0, or -1 with an error naming the node. */
int jit_graph_check(const td_graph_desc *d);
/* A node as the jit holds it (for the shape rules of replay.c). */
void jit_graph_node_to_jit(const td_graph_node *n, jit_node *nd);
/* The elements a node's layout spans from its offset (0 when empty). */
int64_t jit_graph_layout_span(const td_graph_node *n);
/* Op node k's dtypes, attributes and result shape against what its kernels take for granted
 * (graph_ops.c): 0, or -1 with an error naming the node and the fault; an op graph files do
 * not hold yet is refused by name. */
int jit_graph_check_op(const td_graph_node *nodes, int k);

#endif /* TIDE_JIT_GRAPH_DESC_H */
