/*
 * onnx_run.c — the interpreter: a model's nodes run in order through tide's ops (eagerly, or
 * recorded by the trace the caller runs in). A node whose inputs are all constants (initializers,
 * Constant nodes, shapes) runs with the trace paused, so shape arithmetic is folded to constants
 * and a reshape's target is known while capturing. Values are freed after their last reader.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

const char *onnx_node_label(const onnx_node *n, char *buf, size_t size)
{
    const Onnx__NodeProto *p = n->p;
    if (p->name && *p->name)
        snprintf(buf, size, "node '%s' (%s)", p->name, p->op_type ? p->op_type : "?");
    else
        snprintf(buf, size, "node with output '%s' (%s)",
                 p->n_output && p->output[0] ? p->output[0] : "", p->op_type ? p->op_type : "?");
    return buf;
}

static int vnode_error(const onnx_ctx *c, int code, const char *fmt, va_list ap)
{
    char label[200], msg[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    onnx_node_label(c->node, label, sizeof label);
    return td_error_code(code, "onnx: %s, opset %d: %s", label, c->m->opset, msg);
}

int onnx_error(const onnx_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vnode_error(c, TIDE_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return rc;
}

int onnx_unsupported(const onnx_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vnode_error(c, TIDE_ERR_UNSUPPORTED, fmt, ap);
    va_end(ap);
    return rc;
}

int onnx_fail(const onnx_ctx *c)
{
    char label[200], msg[700];
    snprintf(msg, sizeof msg, "%s", tide_last_error());
    onnx_node_label(c->node, label, sizeof label);
    int code = tide_last_error_code();
    return td_error_code(code ? code : TIDE_ERR_INTERNAL, "onnx: %s, opset %d: %s", label,
                         c->m->opset, msg);
}

int onnx_set(onnx_ctx *c, tide_tensor *t)
{
    c->out[0] = t;
    return t ? 0 : onnx_fail(c);
}

/* ---- running ------------------------------------------------------------------------------ */
typedef struct run_state {
    tide_onnx_model *m;
    tide_tensor **vals;
    bool *constant;
} run_state;

/* A node whose every input is a constant (and that makes no random numbers), or that reads
 * only shapes, folds. */
static bool folds(const run_state *s, const onnx_node *n)
{
    if (n->op->flags & ONNX_RANDOM)
        return false;
    if (n->op->flags & ONNX_SHAPE_ONLY)
        return true;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !s->constant[n->in[k]])
            return false;
    return true;
}

static int run_node(run_state *s, const onnx_node *n)
{
    /* out_small is all NULL: a handler that sets out[0] (onnx_set) or a second output the node
     * does not list (a node with no outputs, TopK with one) writes here, released below */
    tide_tensor *in_small[16], *out_small[16] = {0};
    bool const_small[16];
    tide_tensor **in = n->nin <= 16 ? in_small : td_calloc((size_t)n->nin, sizeof *in);
    tide_tensor **out = n->nout <= 16 ? out_small : td_calloc((size_t)n->nout, sizeof *out);
    bool *in_const = n->nin <= 16 ? const_small : td_calloc((size_t)n->nin, sizeof *in_const);
    onnx_ctx c = {s->m, n, in, n->nin, out, n->nout, in_const};
    if (!in || !out || !in_const) {
        if (in != in_small)
            free(in);
        if (out != out_small)
            free(out);
        if (in_const != const_small)
            free(in_const);
        return onnx_error(&c, "out of memory");
    }
    for (int k = 0; k < n->nin; k++) {
        in[k] = n->in[k] >= 0 ? s->vals[n->in[k]] : NULL;
        in_const[k] = n->in[k] >= 0 && s->constant[n->in[k]];
    }
    for (int k = 0; k < n->nout; k++)
        out[k] = NULL;
    bool fold = folds(s, n);
    void *paused = fold ? tide_jit_pause() : NULL;
    int rc = n->op->run(&c);
    tide_jit_resume(paused);
    for (int k = 0; k < n->nout; k++) {
        int v = n->out[k];
        if (rc == 0 && v >= 0 && !out[k])
            rc = onnx_error(&c, "output %d was not computed (an internal error)", k);
        if (rc == 0 && v >= 0) {
            s->vals[v] = out[k];
            s->constant[v] = fold;
        } else {
            tide_release(out[k]);
        }
    }
    for (int k = n->nout; out == out_small && k < 16; k++)
        tide_release(out_small[k]);
    if (in != in_small)
        free(in);
    if (out != out_small)
        free(out);
    if (in_const != const_small)
        free(in_const);
    return rc;
}

static int check_inputs(const tide_onnx_model *m, tide_tensor *const *inputs, int ninputs)
{
    if (ninputs != m->ninputs)
        return td_error("onnx_run: %s takes %d inputs; %d given", m->path, m->ninputs, ninputs);
    for (int i = 0; i < ninputs; i++) {
        const tide_graph_io *io = &m->inputs[i];
        if (!inputs || !inputs[i])
            return td_error("onnx_run: input %d ('%s') is NULL", i, io->name);
        tide_tensor *t = inputs[i];
        if (tide_get_dtype(t) != io->dtype)
            return td_error("onnx_run: input '%s' is %s; the model declares %s", io->name,
                            tide_dtype_name(tide_get_dtype(t)), tide_dtype_name(io->dtype));
        bool ok = io->ndim < 0 || tide_ndim(t) == io->ndim;
        for (int d = 0; ok && io->ndim > 0 && d < io->ndim; d++)
            ok = io->shape[d] < 0 || io->shape[d] == tide_shape(t)[d];
        if (!ok) {
            char a[160], b[160];
            td_io_shape_str(a, sizeof a, tide_ndim(t), tide_shape(t));
            int64_t decl[TIDE_MAX_DIMS];
            for (int d = 0; d < io->ndim; d++)
                decl[d] = io->shape[d];
            td_io_shape_str(b, sizeof b, io->ndim, decl);
            return td_error("onnx_run: input '%s' has shape %s; the model declares %s (-1: "
                            "any size)", io->name, a, b);
        }
    }
    return 0;
}

static int run_all(run_state *s, tide_tensor *const *inputs, tide_tensor **outputs)
{
    tide_onnx_model *m = s->m;
    for (int v = 0; v < m->nvalues; v++)
        if (m->init[v]) {
            s->vals[v] = tide_retain(m->init[v]);
            s->constant[v] = true;
        }
    for (int i = 0; i < m->ninputs; i++)
        s->vals[m->in_value[i]] = tide_retain(inputs[i]);
    for (int i = 0; i < m->nnodes; i++) {
        const onnx_node *n = &m->nodes[i];
        if (run_node(s, n) < 0)
            return -1;
        for (int k = 0; k < n->nfrees; k++) {
            tide_release(s->vals[n->frees[k]]);
            s->vals[n->frees[k]] = NULL;
        }
    }
    for (int k = 0; k < m->noutputs; k++)
        outputs[k] = tide_retain(s->vals[m->out_value[k]]);
    return 0;
}

int tide_onnx_run(tide_onnx_model *m, tide_tensor *const *inputs, int ninputs,
                  tide_tensor **outputs)
{
    if (!m)
        return td_error("onnx_run: model is NULL");
    if (m->noutputs && !outputs)
        return td_error("onnx_run: outputs is NULL; %s has %d", m->path, m->noutputs);
    if (check_inputs(m, inputs, ninputs) < 0)
        return -1;
    run_state s = {m, td_calloc((size_t)m->nvalues + 1, sizeof *s.vals),
                   td_calloc((size_t)m->nvalues + 1, sizeof *s.constant)};
    int rc = -1;
    if (!s.vals || !s.constant)
        td_error("onnx_run: out of memory");
    else
        rc = run_all(&s, inputs, outputs);
    for (int v = 0; s.vals && v < m->nvalues; v++)
        tide_release(s.vals[v]);
    free(s.vals);
    free(s.constant);
    if (rc < 0)
        for (int k = 0; k < m->noutputs; k++)
            outputs[k] = NULL;
    return rc;
}

/* ---- the model's names and declared types -------------------------------------------------- */
int tide_onnx_num_inputs(const tide_onnx_model *m) { return m ? m->ninputs : 0; }
int tide_onnx_num_outputs(const tide_onnx_model *m) { return m ? m->noutputs : 0; }

static const tide_graph_io *model_io(const tide_onnx_model *m, int i, bool output)
{
    int n = m ? (output ? m->noutputs : m->ninputs) : 0;
    if (i < 0 || i >= n) {
        td_error("onnx: no %s %d (the model has %d)", output ? "output" : "input", i, n);
        return NULL;
    }
    return output ? &m->outputs[i] : &m->inputs[i];
}

const char *tide_onnx_input_name(const tide_onnx_model *m, int i)
{
    const tide_graph_io *io = model_io(m, i, false);
    return io ? io->name : NULL;
}

const char *tide_onnx_output_name(const tide_onnx_model *m, int i)
{
    const tide_graph_io *io = model_io(m, i, true);
    return io ? io->name : NULL;
}

static int io_info(const tide_graph_io *io, tide_dtype *dtype, int *ndim, int64_t *shape,
                   const char **dim_names, int max_dims)
{
    if (!io)
        return -1;
    if (dtype)
        *dtype = io->dtype;
    if (ndim)
        *ndim = io->ndim;
    for (int d = 0; d < io->ndim && d < max_dims; d++) {
        if (shape)
            shape[d] = io->shape[d];
        if (dim_names)
            dim_names[d] = io->dim_name[d];
    }
    return 0;
}

int tide_onnx_input_info(const tide_onnx_model *m, int i, tide_dtype *dtype, int *ndim,
                         int64_t *shape, const char **dim_names, int max_dims)
{
    return io_info(model_io(m, i, false), dtype, ndim, shape, dim_names, max_dims);
}

int tide_onnx_output_info(const tide_onnx_model *m, int i, tide_dtype *dtype, int *ndim,
                          int64_t *shape, const char **dim_names, int max_dims)
{
    return io_info(model_io(m, i, true), dtype, ndim, shape, dim_names, max_dims);
}
