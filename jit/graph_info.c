/*
 * graph_info.c — what an importer attaches to a graph it compiled (core/tide_internal.h,
 * tide_graph_info): the names and declared types behind tide_graph_input_name & co., and the
 * re-plan that runs inputs of other sizes through a graph of their own.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/tide_internal.h"
#include "trace.h"

void td_graph_info_free(tide_graph_info *info)
{
    if (!info)
        return;
    if (info->release)
        info->release(info->owner);
    for (int k = 0; k < 2; k++) {
        tide_graph_io *io = k ? info->outputs : info->inputs;
        int n = k ? info->noutputs : info->ninputs;
        for (int i = 0; io && i < n; i++) {
            free(io[i].name);
            for (int d = 0; d < 8; d++)
                free(io[i].dim_name[d]);
        }
        free(io);
    }
    for (int i = 0; i < info->nmeta; i++) {
        free(info->meta_keys ? info->meta_keys[i] : NULL);
        free(info->meta_values ? info->meta_values[i] : NULL);
    }
    free(info->meta_keys);
    free(info->meta_values);
    free(info);
}

int tide_graph_num_metadata(const tide_graph *g) { return g && g->info ? g->info->nmeta : 0; }

const char *tide_graph_metadata_key(const tide_graph *g, int i)
{
    return i >= 0 && i < tide_graph_num_metadata(g) ? g->info->meta_keys[i] : NULL;
}

const char *tide_graph_metadata(const tide_graph *g, const char *key)
{
    for (int i = 0; key && i < tide_graph_num_metadata(g); i++)
        if (g->info->meta_keys[i] && strcmp(g->info->meta_keys[i], key) == 0)
            return g->info->meta_values[i];
    return NULL;
}

void td_graph_set_info(tide_graph *g, tide_graph_info *info)
{
    td_graph_info_free(g->info);
    g->info = info;
}

int jit_graph_run_other(tide_graph *g, tide_tensor *const *inputs, int ninputs,
                        tide_tensor **outputs, bool *handled)
{
    *handled = false;
    if (!g->info || !g->info->replan || !inputs || ninputs != g->ninputs ||
        jit_graph_inputs_fit(g, inputs))
        return 0;
    for (int i = 0; i < ninputs; i++)
        if (!inputs[i])
            return 0; /* the guards name it */
    *handled = true;
    tide_graph *other = g->info->replan(g->info->owner, inputs, ninputs);
    if (!other)
        return -1;
    return tide_graph_run(other, inputs, ninputs, outputs);
}

int jit_graph_run_replanned(tide_graph *g, tide_tensor *const *inputs, int ninputs,
                            tide_tensor **outputs)
{
    if (!g->info || !g->info->replan)
        return -1; /* no owner to ask: the refusal's error stands */
    tide_clear_error();
    tide_graph *other = g->info->replan(g->info->owner, inputs, ninputs);
    if (!other)
        return -1;
    return tide_graph_run(other, inputs, ninputs, outputs);
}

/* ---- names and declared types ------------------------------------------------------------- */

static const tide_graph_io *graph_io(const tide_graph *g, int i, bool output)
{
    if (!g || !g->info)
        return NULL;
    int n = output ? g->info->noutputs : g->info->ninputs;
    if (i < 0 || i >= n)
        return NULL;
    return output ? &g->info->outputs[i] : &g->info->inputs[i];
}

int tide_graph_num_inputs(const tide_graph *g) { return g ? g->ninputs : 0; }

static const char *io_name(const tide_graph *g, int i, bool output)
{
    const tide_graph_io *io = graph_io(g, i, output);
    if (io)
        return io->name;
    if (!g || i < 0 || i >= (output ? g->noutputs : g->ninputs)) {
        td_error("tide_graph_%s_name: no %s %d", output ? "output" : "input",
                 output ? "output" : "input", i);
        return NULL;
    }
    /* a plain capture's: "input0", "output1"... (kept in static tables, read-only) */
    static const char *const in_names[] = {"input0", "input1", "input2", "input3",
                                           "input4", "input5", "input6", "input7"};
    static const char *const out_names[] = {"output0", "output1", "output2", "output3",
                                            "output4", "output5", "output6", "output7"};
    if (i < 8)
        return output ? out_names[i] : in_names[i];
    return output ? "output" : "input";
}

const char *tide_graph_input_name(const tide_graph *g, int i) { return io_name(g, i, false); }
const char *tide_graph_output_name(const tide_graph *g, int i) { return io_name(g, i, true); }

static int io_info(const tide_graph *g, int i, bool output, tide_dtype *dtype, int *ndim,
                   int64_t *shape, int max_dims)
{
    const tide_graph_io *io = graph_io(g, i, output);
    if (!io)
        return td_error("tide_graph_%s_info: %s %d has no declared type (the graph has %d; "
                        "only an imported model's graph declares them)",
                        output ? "output" : "input", output ? "output" : "input", i,
                        g ? (output ? g->noutputs : g->ninputs) : 0);
    if (dtype)
        *dtype = io->dtype;
    if (ndim)
        *ndim = io->ndim;
    for (int d = 0; shape && d < io->ndim && d < max_dims; d++)
        shape[d] = io->shape[d];
    return 0;
}

int tide_graph_input_info(const tide_graph *g, int i, tide_dtype *dtype, int *ndim,
                          int64_t *shape, int max_dims)
{
    return io_info(g, i, false, dtype, ndim, shape, max_dims);
}

int tide_graph_output_info(const tide_graph *g, int i, tide_dtype *dtype, int *ndim,
                           int64_t *shape, int max_dims)
{
    return io_info(g, i, true, dtype, ndim, shape, max_dims);
}

const char *tide_graph_dim_name(const tide_graph *g, int i, int d)
{
    const tide_graph_io *io = graph_io(g, i, false);
    if (!io || d < 0 || d >= io->ndim || d >= 8)
        return NULL;
    return io->dim_name[d];
}
