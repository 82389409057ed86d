/*
 * onnx_compile.c — tide_onnx_load: a model captured into a compiled tide_graph (the jit's public
 * capture API: tide_jit_begin / tide_jit_end), with the model's names and declared types attached
 * (tide_graph_input_name & co.). Free dims (dim_param) first get one symbolic plan for every
 * size (onnx_symbolic.c); where that is not sound, they are captured at the sizes the caller
 * gives (1 otherwise). Inputs the graph cannot take (other sizes of a per-shape plan, a size of
 * 1 for a symbolic one) get a graph of their own, captured at their first run and kept.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

typedef struct shape_plan {
    int64_t *sizes; /* every input's dims, concatenated */
    tide_graph *g;
} shape_plan;

typedef struct onnx_plans {
    tide_onnx_model *m;
    pthread_mutex_t lock;
    shape_plan *v;
    int n, cap;
    int nsizes; /* the sum of the inputs' ranks */
} onnx_plans;

/* Runs m between tide_jit_begin and tide_jit_end on inputs: the graph, or NULL. */
static tide_graph *capture(tide_onnx_model *m, tide_tensor *const *inputs)
{
    tide_tensor *outs_small[16];
    tide_tensor **outs = m->noutputs <= 16 ? outs_small
                                           : td_calloc((size_t)m->noutputs, sizeof *outs);
    if (!outs) {
        td_error("onnx_load: out of memory");
        return NULL;
    }
    tide_graph *g = NULL;
    if (tide_jit_begin(inputs, m->ninputs) == 0) {
        if (tide_onnx_run(m, inputs, m->ninputs, outs) == 0) {
            g = tide_jit_end(outs, m->noutputs);
            for (int k = 0; k < m->noutputs; k++)
                tide_release(outs[k]);
        } else {
            /* end the capture; keep the run's error */
            char why[700];
            snprintf(why, sizeof why, "%s", tide_last_error());
            int code = tide_last_error_code();
            tide_graph_free(tide_jit_end(NULL, 0));
            td_error_code(code, "%s", why);
        }
    }
    if (outs != outs_small)
        free(outs);
    return g;
}

/* Zeros of each input's declared dtype and shape, free dims at their given sizes. */
static int capture_inputs(const tide_onnx_model *m, const tide_onnx_options *o,
                          tide_tensor **ins)
{
    const char *dev = m->device ? m->device : tide_get_default_device();
    for (int i = 0; i < m->ninputs; i++) {
        const tide_graph_io *io = &m->inputs[i];
        if (io->ndim < 0)
            return td_error("onnx_load: %s: input '%s' declares no shape; tide_onnx_open runs "
                            "such a model eagerly", m->path, io->name);
        int64_t shape[TIDE_MAX_DIMS];
        for (int d = 0; d < io->ndim; d++) {
            shape[d] = io->shape[d] >= 0 ? io->shape[d] : 1;
            for (int k = 0; o && io->dim_name[d] && k < o->ndims; k++)
                if (o->dim_names[k] && !strcmp(o->dim_names[k], io->dim_name[d]))
                    shape[d] = o->dim_sizes[k];
            if (shape[d] < 0)
                return td_error("onnx_load: %s: free dim '%s' is given size %lld", m->path,
                                io->dim_name[d] ? io->dim_name[d] : "?", (long long)shape[d]);
        }
        if (!(ins[i] = tide_zeros_on(dev, io->ndim, shape, io->dtype)))
            return -1;
    }
    return 0;
}

/* ---- re-plans per shape ------------------------------------------------------------------- */
static bool same_sizes(const onnx_plans *p, const int64_t *sizes, tide_tensor *const *inputs)
{
    int k = 0;
    for (int i = 0; i < p->m->ninputs; i++)
        for (int d = 0; d < tide_ndim(inputs[i]); d++)
            if (k >= p->nsizes || sizes[k++] != tide_shape(inputs[i])[d])
                return false;
    return k == p->nsizes;
}

static tide_graph *find_or_capture(onnx_plans *p, tide_tensor *const *inputs)
{
    for (int j = 0; j < p->n; j++)
        if (same_sizes(p, p->v[j].sizes, inputs))
            return p->v[j].g;
    for (int i = 0; i < p->m->ninputs; i++)
        if (tide_ndim(inputs[i]) != p->m->inputs[i].ndim) {
            td_error("tide_graph_run: input '%s' has %d dims; the model declares %d",
                     p->m->inputs[i].name, tide_ndim(inputs[i]), p->m->inputs[i].ndim);
            return NULL;
        }
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4;
        shape_plan *v = td_realloc(p->v, sizeof *v * (size_t)cap);
        if (!v) {
            td_error("tide_graph_run: out of memory");
            return NULL;
        }
        p->v = v;
        p->cap = cap;
    }
    int64_t *sizes = td_malloc(sizeof *sizes * (size_t)(p->nsizes + 1));
    tide_graph *g = sizes ? capture(p->m, inputs) : NULL;
    if (!g) {
        free(sizes);
        return NULL;
    }
    for (int i = 0, k = 0; i < p->m->ninputs; i++)
        for (int d = 0; d < tide_ndim(inputs[i]); d++)
            sizes[k++] = tide_shape(inputs[i])[d];
    p->v[p->n++] = (shape_plan){sizes, g};
    return g;
}

static tide_graph *replan(void *owner, tide_tensor *const *inputs, int ninputs)
{
    onnx_plans *p = owner;
    (void)ninputs;
    pthread_mutex_lock(&p->lock);
    tide_graph *g = find_or_capture(p, inputs);
    pthread_mutex_unlock(&p->lock);
    return g;
}

static void release_plans(void *owner)
{
    onnx_plans *p = owner;
    for (int j = 0; j < p->n; j++) {
        tide_graph_free(p->v[j].g);
        free(p->v[j].sizes);
    }
    free(p->v);
    tide_onnx_close(p->m);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ---- names and declared types ------------------------------------------------------------ */
static int copy_ios(tide_graph_io **dst, const tide_graph_io *src, int n)
{
    *dst = td_calloc((size_t)n + 1, sizeof **dst);
    if (!*dst)
        return -1;
    for (int i = 0; i < n; i++) {
        (*dst)[i] = src[i];
        (*dst)[i].name = td_strdup(src[i].name);
        for (int d = 0; d < 8; d++)
            (*dst)[i].dim_name[d] = src[i].dim_name[d] ? td_strdup(src[i].dim_name[d]) : NULL;
        if (!(*dst)[i].name)
            return -1;
    }
    return 0;
}

static tide_graph_info *make_info(onnx_plans *p)
{
    tide_graph_info *info = td_calloc(1, sizeof *info);
    if (!info)
        return NULL;
    info->ninputs = p->m->ninputs;
    info->noutputs = p->m->noutputs;
    if (copy_ios(&info->inputs, p->m->inputs, p->m->ninputs) < 0 ||
        copy_ios(&info->outputs, p->m->outputs, p->m->noutputs) < 0) {
        td_graph_info_free(info);
        return NULL;
    }
    info->owner = p;
    info->replan = replan;
    info->release = release_plans;
    return info;
}

tide_graph *tide_onnx_load(const char *path, const tide_onnx_options *opts)
{
    if (opts && opts->ndims > 0 && (!opts->dim_names || !opts->dim_sizes)) {
        td_error("onnx_load: options give %d free dims without names or sizes", opts->ndims);
        return NULL;
    }
    tide_onnx_model *m = tide_onnx_open(path, opts ? opts->device : NULL);
    onnx_plans *p = m ? td_calloc(1, sizeof *p) : NULL;
    tide_tensor *ins_small[16] = {0};
    tide_tensor **ins = !m || m->ninputs <= 16 ? ins_small
                                               : td_calloc((size_t)m->ninputs, sizeof *ins);
    tide_graph *g = NULL;
    tide_graph_info *info = NULL;
    if (m && (!p || !ins))
        td_error("onnx_load: out of memory");
    else if (m && ((g = onnx_capture_symbolic(m, opts)) ||
                   (capture_inputs(m, opts, ins) == 0 && (g = capture(m, ins))))) {
        p->m = m;
        pthread_mutex_init(&p->lock, NULL);
        for (int i = 0; i < m->ninputs; i++)
            p->nsizes += m->inputs[i].ndim;
        if (!(info = make_info(p))) {
            td_error("onnx_load: out of memory");
            pthread_mutex_destroy(&p->lock);
            tide_graph_free(g);
            g = NULL;
        } else {
            td_graph_set_info(g, info); /* now g owns p and m */
        }
    }
    for (int i = 0; m && ins && i < m->ninputs; i++)
        tide_release(ins[i]);
    if (ins != ins_small)
        free(ins);
    if (!g) {
        free(p);
        tide_onnx_close(m);
    }
    return g;
}
