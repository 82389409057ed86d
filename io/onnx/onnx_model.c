/*
 * onnx_model.c — tide_onnx_open: parse a ModelProto, give every value an id, resolve each node
 * against the op table at the model's opset (anything unsupported is an error here, before
 * anything runs), check the graph is in topological order with every value defined once, load
 * the initializers, and note where each value is read last so the interpreter frees it there.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* ---- value names -> ids (open addressing; names live in the proto) ------------------------- */
typedef struct name_map {
    const char **keys;
    int *ids;
    int cap;
} name_map;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static int *map_slot(name_map *m, const char *name)
{
    int i = (int)(hash_name(name) & (uint64_t)(m->cap - 1));
    while (m->keys[i] && strcmp(m->keys[i], name))
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = name;
    return &m->ids[i];
}

typedef struct builder {
    tide_onnx_model *m;
    td_io_ctx io;
    name_map map;
    int cap_values;
    char *defined; /* value id -> whether something defined it yet */
} builder;

/* The id of name, made when new (ids[] start at -1). -1 with the error set. */
static int value_id(builder *b, const char *name)
{
    int *slot = map_slot(&b->map, name);
    if (*slot >= 0)
        return *slot;
    tide_onnx_model *m = b->m;
    if (m->nvalues == b->cap_values)
        return td_io_error(&b->io, "more values than the graph's size allows");
    m->names[m->nvalues] = name;
    *slot = m->nvalues;
    return m->nvalues++;
}

static int alloc_values(builder *b, const Onnx__GraphProto *g)
{
    size_t n = g->n_input + g->n_output + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++)
        n += g->node[i]->n_input + g->node[i]->n_output;
    if (n > (size_t)INT32_MAX / 4)
        return td_io_error(&b->io, "the graph is too large (%zu value references)", n);
    b->cap_values = (int)n + 1;
    int cap = 16;
    while (cap < 2 * b->cap_values)
        cap *= 2;
    b->map.cap = cap;
    b->map.keys = td_calloc((size_t)cap, sizeof *b->map.keys);
    b->map.ids = td_malloc(sizeof *b->map.ids * (size_t)cap);
    b->m->names = td_calloc((size_t)b->cap_values, sizeof *b->m->names);
    b->m->init = td_calloc((size_t)b->cap_values, sizeof *b->m->init);
    b->defined = td_calloc((size_t)b->cap_values, 1);
    if (!b->map.keys || !b->map.ids || !b->m->names || !b->m->init || !b->defined)
        return td_io_error(&b->io, "out of memory");
    for (int i = 0; i < cap; i++)
        b->map.ids[i] = -1;
    return 0;
}

/* ---- declared types of inputs and outputs -------------------------------------------------- */
static int declared_type(builder *b, const Onnx__ValueInfoProto *v, tide_graph_io *io,
                         const char *what)
{
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s '%s' is not a tensor "
                                "(sequences, maps and optionals are not supported)", what,
                                v->name);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    int dt = onnx_dtype(tt->elem_type);
    if (dt < 0)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s '%s' is %s, which tide has "
                                "no dtype for", what, v->name, onnx_dtype_name(tt->elem_type));
    io->dtype = (tide_dtype)dt;
    io->name = td_strdup(v->name);
    if (!io->name)
        return td_io_error(&b->io, "out of memory");
    io->ndim = tt->shape ? (int)tt->shape->n_dim : -1; /* -1: rank unknown */
    if (io->ndim > TIDE_MAX_DIMS)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s '%s' has %d dims; tide holds "
                                "at most %d", what, v->name, io->ndim, TIDE_MAX_DIMS);
    for (int d = 0; d < io->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        bool fixed = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        io->shape[d] = fixed ? dim->dim_value : -1;
        if (fixed && dim->dim_value < 0)
            return td_io_error(&b->io, "%s '%s' dim %d is %lld", what, v->name, d,
                               (long long)dim->dim_value);
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
            !(io->dim_name[d] = td_strdup(dim->dim_param)))
            return td_io_error(&b->io, "out of memory");
    }
    return 0;
}

/* Initializers first (their values are defined), then the graph inputs that are not
 * initializers (older models list initializers among the inputs, as defaults). */
static int load_inputs(builder *b, const Onnx__GraphProto *g)
{
    tide_onnx_model *m = b->m;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name)
            return td_io_error(&b->io, "initializer %zu has no name", i);
        int id = value_id(b, t->name);
        if (id < 0)
            return -1;
        if (b->defined[id])
            return td_io_error(&b->io, "initializer '%s' is defined twice", t->name);
        b->defined[id] = 1;
        if (!(m->init[id] = onnx_tensor_from_proto(&b->io, t, m->dir, m->device)))
            return -1;
    }
    if (g->n_sparse_initializer)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "sparse initializers are not "
                                "supported");
    m->in_value = td_malloc(sizeof *m->in_value * (g->n_input + 1));
    m->inputs = td_calloc(g->n_input + 1, sizeof *m->inputs);
    if (!m->in_value || !m->inputs)
        return td_io_error(&b->io, "out of memory");
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        int id = v->name ? value_id(b, v->name) : td_io_error(&b->io, "input %zu has no name", i);
        if (id < 0)
            return -1;
        if (m->init[id])
            continue;
        if (b->defined[id])
            return td_io_error(&b->io, "input '%s' is listed twice", v->name);
        b->defined[id] = 1;
        m->in_value[m->ninputs] = id;
        if (declared_type(b, v, &m->inputs[m->ninputs++], "input") < 0)
            return -1;
    }
    return 0;
}

/* ---- nodes ------------------------------------------------------------------------------- */
static int resolve_node(builder *b, onnx_node *n)
{
    const Onnx__NodeProto *p = n->p;
    char label[200];
    onnx_node_label(n, label, sizeof label);
    if (!p->op_type)
        return td_io_error(&b->io, "%s has no op_type", label);
    if (p->domain && *p->domain && strcmp(p->domain, "ai.onnx"))
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s is in domain '%s', which "
                                "tide does not support (only ai.onnx)", label, p->domain);
    n->op = onnx_find_op(p->op_type, b->m->opset);
    if (!n->op)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s: op %s is not supported at "
                                "opset %d (docs/onnx.md lists the supported ops)", label,
                                p->op_type, b->m->opset);
    int nin = (int)p->n_input;
    if (nin < n->op->min_in || (n->op->max_in >= 0 && nin > n->op->max_in))
        return td_io_error(&b->io, "%s (opset %d) has %d inputs; it takes %d to %d", label,
                           b->m->opset, nin, n->op->min_in, n->op->max_in);
    for (size_t a = 0; a < p->n_attribute; a++)
        if (p->attribute[a]->g || p->attribute[a]->n_graphs)
            return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s (opset %d): subgraph "
                                    "attributes are not supported", label, b->m->opset);
    char why[200] = "";
    int rc = n->op->check ? n->op->check(n, why, sizeof why) : 0;
    if (rc > 0)
        return td_io_error_code(&b->io, TIDE_ERR_UNSUPPORTED, "%s (opset %d): %s", label,
                                b->m->opset, why);
    if (rc < 0)
        return td_io_error(&b->io, "%s (opset %d): %s", label, b->m->opset, tide_last_error());
    return 0;
}

/* Inputs must be defined before the node (topological order: a cycle or a missing value is
 * an error); each output is defined once. */
static int link_node(builder *b, onnx_node *n)
{
    const Onnx__NodeProto *p = n->p;
    char label[200];
    onnx_node_label(n, label, sizeof label);
    n->nin = (int)p->n_input;
    n->nout = (int)p->n_output;
    n->in = td_malloc(sizeof *n->in * (size_t)(n->nin + 1));
    n->out = td_malloc(sizeof *n->out * (size_t)(n->nout + 1));
    if (!n->in || !n->out)
        return td_io_error(&b->io, "out of memory");
    for (int k = 0; k < n->nin; k++) {
        const char *name = p->input[k];
        n->in[k] = -1;
        if (!name || !*name)
            continue;
        int id = value_id(b, name);
        if (id < 0)
            return -1;
        if (!b->defined[id])
            return td_io_error(&b->io, "%s reads '%s', which no initializer, input or earlier "
                               "node defines (a missing value, or a cycle)", label, name);
        n->in[k] = id;
    }
    for (int k = 0; k < n->nout; k++) {
        const char *name = p->output[k];
        n->out[k] = -1;
        if (!name || !*name)
            continue;
        int id = value_id(b, name);
        if (id < 0)
            return -1;
        if (b->defined[id])
            return td_io_error(&b->io, "%s defines '%s', which is already defined", label, name);
        b->defined[id] = 1;
        n->out[k] = id;
    }
    return 0;
}

static int load_nodes(builder *b, const Onnx__GraphProto *g)
{
    tide_onnx_model *m = b->m;
    m->nodes = td_calloc(g->n_node + 1, sizeof *m->nodes);
    if (!m->nodes)
        return td_io_error(&b->io, "out of memory");
    for (size_t i = 0; i < g->n_node; i++) {
        onnx_node *n = &m->nodes[m->nnodes++];
        n->p = g->node[i];
        if (resolve_node(b, n) < 0 || link_node(b, n) < 0)
            return -1;
    }
    return 0;
}

static int load_outputs(builder *b, const Onnx__GraphProto *g)
{
    tide_onnx_model *m = b->m;
    m->out_value = td_malloc(sizeof *m->out_value * (g->n_output + 1));
    m->outputs = td_calloc(g->n_output + 1, sizeof *m->outputs);
    if (!m->out_value || !m->outputs)
        return td_io_error(&b->io, "out of memory");
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *v = g->output[i];
        int id = v->name ? value_id(b, v->name) : td_io_error(&b->io, "output %zu has no name", i);
        if (id < 0)
            return -1;
        if (!b->defined[id])
            return td_io_error(&b->io, "output '%s' is not computed by any node", v->name);
        m->out_value[m->noutputs] = id;
        if (declared_type(b, v, &m->outputs[m->noutputs++], "output") < 0)
            return -1;
    }
    return 0;
}

/* Each value is freed after its last reader, unless it is a graph output or an initializer. */
static int plan_frees(builder *b)
{
    tide_onnx_model *m = b->m;
    int *last = td_malloc(sizeof *last * (size_t)(m->nvalues + 1));
    if (!last)
        return td_io_error(&b->io, "out of memory");
    for (int v = 0; v < m->nvalues; v++)
        last[v] = -1;
    for (int i = 0; i < m->nnodes; i++)
        for (int k = 0; k < m->nodes[i].nin; k++)
            if (m->nodes[i].in[k] >= 0)
                last[m->nodes[i].in[k]] = i;
    for (int k = 0; k < m->noutputs; k++)
        last[m->out_value[k]] = -1;
    for (int i = 0; i < m->nnodes; i++) {
        onnx_node *n = &m->nodes[i];
        n->frees = td_malloc(sizeof *n->frees * (size_t)(n->nin + n->nout + 1));
        if (!n->frees) {
            free(last);
            return td_io_error(&b->io, "out of memory");
        }
        for (int k = 0; k < n->nin + n->nout; k++) {
            int v = k < n->nin ? n->in[k] : n->out[k - n->nin];
            if (v < 0 || m->init[v])
                continue;
            bool dead_output = k >= n->nin && last[v] < 0;
            bool read_last = k < n->nin && last[v] == i;
            bool listed = false;
            for (int j = 0; j < n->nfrees; j++)
                listed |= n->frees[j] == v;
            bool is_output = false;
            for (int j = 0; j < m->noutputs; j++)
                is_output |= m->out_value[j] == v;
            if ((dead_output || read_last) && !listed && !is_output)
                n->frees[n->nfrees++] = v;
        }
    }
    free(last);
    return 0;
}

static int read_opset(builder *b)
{
    const Onnx__ModelProto *p = b->m->proto;
    int64_t opset = -1; /* checked before it becomes an int */
    for (size_t i = 0; i < p->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = p->opset_import[i];
        if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            opset = o->version;
    }
    if (opset < 0)
        opset = 1; /* IR version 1-2 models may import nothing: opset 1 */
    if (opset < 1 || opset > 10000)
        return td_io_error(&b->io, "the ai.onnx opset is %lld", (long long)opset);
    b->m->opset = (int)opset;
    if (!p->graph)
        return td_io_error(&b->io, "the model has no graph");
    return 0;
}

static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return td_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = td_malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

static int build(builder *b, const char *path, const char *device)
{
    tide_onnx_model *m = b->m;
    m->path = td_strdup(path);
    m->dir = folder_of(path);
    m->device = device ? td_strdup(device) : NULL;
    if (!m->path || !m->dir || (device && !m->device))
        return td_io_error(&b->io, "out of memory");
    size_t len;
    uint8_t *data = onnx_read_file(&b->io, &len);
    if (!data)
        return -1;
    m->proto = onnx__model_proto__unpack(&onnx_allocator, len, data);
    free(data);
    if (!m->proto)
        return td_io_error(&b->io, "not an ONNX model (the protobuf does not parse)");
    const Onnx__GraphProto *g = m->proto->graph;
    if (read_opset(b) < 0 || alloc_values(b, (g = m->proto->graph)) < 0 ||
        load_inputs(b, g) < 0 || load_nodes(b, g) < 0 || load_outputs(b, g) < 0)
        return -1;
    return plan_frees(b);
}

tide_onnx_model *tide_onnx_open(const char *path, const char *device)
{
    if (td_io_check_path("onnx_open", path) < 0)
        return NULL;
    builder b = {.io = {"onnx_open", path}};
    b.m = td_calloc(1, sizeof *b.m);
    if (!b.m) {
        td_io_error(&b.io, "out of memory");
        return NULL;
    }
    int rc = build(&b, path, device);
    free(b.map.keys);
    free(b.map.ids);
    free(b.defined);
    if (rc < 0) {
        tide_onnx_close(b.m);
        return NULL;
    }
    return b.m;
}

static void free_ios(tide_graph_io *io, int n)
{
    for (int i = 0; io && i < n; i++) {
        free(io[i].name);
        for (int d = 0; d < 8; d++)
            free(io[i].dim_name[d]);
    }
    free(io);
}

void tide_onnx_close(tide_onnx_model *m)
{
    if (!m)
        return;
    for (int i = 0; m->nodes && i < m->nnodes; i++) {
        free(m->nodes[i].in);
        free(m->nodes[i].out);
        free(m->nodes[i].frees);
    }
    free(m->nodes);
    for (int v = 0; m->init && v < m->nvalues; v++)
        tide_release(m->init[v]);
    free(m->init);
    free(m->names);
    free(m->in_value);
    free(m->out_value);
    /* an input can fail half made: free every slot allocated */
    free_ios(m->inputs, m->proto && m->proto->graph ? (int)m->proto->graph->n_input : 0);
    free_ios(m->outputs, m->proto && m->proto->graph ? (int)m->proto->graph->n_output : 0);
    if (m->proto)
        onnx__model_proto__free_unpacked(m->proto, &onnx_allocator);
    free(m->path);
    free(m->dir);
    free(m->device);
    free(m);
}
