/*
 * onnx_symbolic.c — a model with free dims (dim_param, or no size) captured once as a symbolic
 * plan (the jit's dynamic capture, jit/README.md), so one compiled graph serves every size of
 * those dims, where that is sound.
 *
 * The capture folds what the model computes from shapes (Shape, Size, and the handlers' own
 * reads of sizes) into constants. The jit's shape rules follow most of them at other sizes (a
 * Reshape whose target came from Shape keeps the dynamic size in the dim that carried it), and
 * tide_jit_end refuses what they cannot follow. A folded number used as a value would not
 * follow (x / Shape(x)[0]), and nothing in the graph says so. So the plan is checked before it
 * is kept: the model runs eagerly at other sizes of its free dims, on deterministic inputs, and
 * the plan must give the same outputs bit for bit (the compiled graph equals eager on the CPU).
 * Otherwise, or when the capture is refused, the caller plans per shape as before; TIDE_LOG=jit
 * says why.
 */
#include <stdlib.h>
#include <string.h>

#include "../../core/log.h"
#include "onnx_internal.h"

/* Bit d of masks[i]: dim d of input i is free. False when no input has one. */
static bool free_dims(const tide_onnx_model *m, uint32_t *masks)
{
    bool any = false;
    for (int i = 0; i < m->ninputs; i++) {
        masks[i] = 0;
        for (int d = 0; d < m->inputs[i].ndim && d < 32; d++)
            if (m->inputs[i].shape[d] < 0)
                masks[i] |= 1u << d;
        any = any || masks[i];
    }
    return any;
}

/* The size the options give the free dim named name, else dflt. */
static int64_t given_size(const tide_onnx_options *o, const char *name, int64_t dflt)
{
    for (int k = 0; o && name && k < o->ndims; k++)
        if (o->dim_names[k] && !strcmp(o->dim_names[k], name))
            return o->dim_sizes[k];
    return dflt;
}

/* Input i at its declared sizes, free dims at `size` (or, when size is 0, at least 2: a dynamic
 * dim is captured at 2 or more); floating-point inputs hold deterministic values in [-1, 1),
 * others zeros. On the model's device. */
static tide_tensor *probe_input(const tide_onnx_model *m, const tide_onnx_options *o, int i,
                                int64_t size)
{
    const tide_graph_io *io = &m->inputs[i];
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0; d < io->ndim; d++) {
        int64_t given = given_size(o, io->dim_name[d], 2);
        shape[d] = io->shape[d] >= 0 ? io->shape[d] : size ? size : given > 2 ? given : 2;
    }
    const char *dev = m->device ? m->device : tide_get_default_device();
    if (io->dtype != TIDE_FLOAT32 && io->dtype != TIDE_FLOAT64)
        return tide_zeros_on(dev, io->ndim, shape, io->dtype);
    int64_t n = 1;
    for (int d = 0; d < io->ndim; d++)
        n *= shape[d];
    double *v = td_malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) {
        td_error("onnx_load: out of memory");
        return NULL;
    }
    uint64_t state = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    for (int64_t k = 0; k < n; k++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v[k] = (double)(state >> 11) / 4503599627370496.0 - 1; /* [-1, 1) */
    }
    tide_tensor *f64 = tide_from_data(v, io->ndim, shape, TIDE_FLOAT64);
    free(v);
    tide_tensor *t = f64 ? tide_cast(f64, io->dtype) : NULL;
    tide_release(f64);
    if (t && strcmp(dev, "cpu")) {
        tide_tensor *moved = tide_to(t, dev);
        tide_release(t);
        t = moved;
    }
    return t;
}

/* Whether a and b have one shape, dtype and the same bytes. */
static bool same_bits(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_get_dtype(a) != tide_get_dtype(b) || tide_ndim(a) != tide_ndim(b) ||
        memcmp(tide_shape(a), tide_shape(b), sizeof(int64_t) * (size_t)tide_ndim(a)))
        return false;
    size_t bytes = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    char *x = td_malloc(bytes * 2 + 1);
    bool same = x && tide_to_buffer(a, x, bytes) == 0 && tide_to_buffer(b, x + bytes, bytes) == 0 &&
                memcmp(x, x + bytes, bytes) == 0;
    free(x);
    return same;
}

/* g run at free-dim size `size` against the interpreter on the same inputs. */
static bool agrees_at(tide_onnx_model *m, const tide_onnx_options *o, tide_graph *g, int64_t size)
{
    int n = m->ninputs, k = m->noutputs;
    tide_tensor **t = td_calloc((size_t)(n + 2 * k) + 1, sizeof *t);
    bool ok = t != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = (t[i] = probe_input(m, o, i, size)) != NULL;
    ok = ok && tide_onnx_run(m, t, n, t + n) == 0 && tide_graph_run(g, t, n, t + n + k) == 0;
    for (int j = 0; ok && j < k; j++)
        ok = same_bits(t[n + j], t[n + k + j]);
    for (int i = 0; t && i < n + 2 * k; i++)
        tide_release(t[i]);
    free(t);
    return ok;
}

/* The capture itself: tide_jit_begin_dynamic around one run of the interpreter. */
static tide_graph *capture_dynamic(tide_onnx_model *m, tide_tensor *const *ins,
                                   const uint32_t *masks)
{
    tide_tensor **outs = td_calloc((size_t)m->noutputs + 1, sizeof *outs);
    if (!outs || tide_jit_begin_dynamic(ins, m->ninputs, masks) < 0) {
        free(outs);
        return NULL;
    }
    tide_graph *g = NULL;
    if (tide_onnx_run(m, ins, m->ninputs, outs) == 0)
        g = tide_jit_end(outs, m->noutputs);
    else
        tide_graph_free(tide_jit_end(NULL, 0));
    for (int k = 0; k < m->noutputs; k++)
        tide_release(outs[k]);
    free(outs);
    return g;
}

tide_graph *onnx_capture_symbolic(tide_onnx_model *m, const tide_onnx_options *o)
{
    uint32_t *masks = td_calloc((size_t)m->ninputs + 1, sizeof *masks);
    if (!masks || !free_dims(m, masks)) {
        free(masks);
        return NULL;
    }
    tide_tensor **ins = td_calloc((size_t)m->ninputs + 1, sizeof *ins);
    bool ok = ins != NULL;
    for (int i = 0; ok && i < m->ninputs; i++)
        ok = (ins[i] = probe_input(m, o, i, 0)) != NULL;
    tide_graph *g = ok ? capture_dynamic(m, ins, masks) : NULL;
    int64_t at = 0;
    for (int i = 0; g && i < m->ninputs; i++)
        for (int d = 0; d < tide_ndim(ins[i]) && !at; d++)
            if (masks[i] >> d & 1)
                at = tide_shape(ins[i])[d];
    const char *why = !g ? tide_last_error() : NULL;
    /* two other sizes, one odd: a folded size shows in at least one of them */
    if (g && !(agrees_at(m, o, g, at + 1) && agrees_at(m, o, g, 2 * at + 3))) {
        why = "the symbolic plan differs from eager at other sizes (a size read as a number)";
        tide_graph_free(g);
        g = NULL;
    }
    if (!g)
        td_log("jit", "onnx_load: %s: free dims planned per shape: %s", m->path,
               why && why[0] ? why : "the capture failed");
    for (int i = 0; ins && i < m->ninputs; i++)
        tide_release(ins[i]);
    free(ins);
    free(masks);
    tide_clear_error();
    return g;
}
