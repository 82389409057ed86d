/*
 * onnx_attr.c — what the op handlers read besides tensors: a node's attributes (with defaults),
 * small integer inputs read to the host (shapes, axes, pads, repeats), and ONNX's axes.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

const Onnx__AttributeProto *onnx_attr(const onnx_node *n, const char *name)
{
    for (size_t i = 0; i < n->p->n_attribute; i++)
        if (n->p->attribute[i]->name && !strcmp(n->p->attribute[i]->name, name))
            return n->p->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

float onnx_attr_float(const onnx_node *n, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

const int64_t *onnx_attr_ints(const onnx_node *n, const char *name, int *count)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    *count = a ? (int)a->n_ints : 0;
    return a && a->n_ints ? a->ints : NULL;
}

const float *onnx_attr_floats(const onnx_node *n, const char *name, int *count)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    *count = a ? (int)a->n_floats : 0;
    return a && a->n_floats ? a->floats : NULL;
}

const char *onnx_attr_string(const onnx_node *n, const char *name, const char *dflt, char *buf,
                             size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || !a->has_s)
        return dflt;
    size_t len = a->s.len < size - 1 ? a->s.len : size - 1;
    memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return buf;
}

int onnx_input_ints(const onnx_ctx *c, int k, int64_t *dst, int max, int *count)
{
    const tide_tensor *t = k < c->nin ? c->in[k] : NULL;
    if (!t)
        return onnx_error(c, "input %d is missing", k);
    tide_dtype d = tide_get_dtype(t);
    if (d != TIDE_INT64 && d != TIDE_INT32)
        return onnx_error(c, "input %d is %s; it must be int64", k, tide_dtype_name(d));
    int64_t n = tide_numel(t);
    if (n > max)
        return onnx_error(c, "input %d has %lld values; at most %d are supported", k,
                          (long long)n, max);
    tide_tensor *wide = d == TIDE_INT64 ? tide_retain((tide_tensor *)t) : tide_cast(t, TIDE_INT64);
    int rc = wide ? tide_to_buffer(wide, dst, sizeof *dst * (size_t)(n ? n : 1) ) : -1;
    tide_release(wide);
    if (rc < 0)
        return onnx_error(c, "reading input %d: %s", k, tide_last_error());
    *count = (int)n;
    return 0;
}

int onnx_input_scalar(const onnx_ctx *c, int k, double *value)
{
    const tide_tensor *t = k < c->nin ? c->in[k] : NULL;
    if (!t)
        return onnx_error(c, "input %d is missing", k);
    if (tide_numel(t) != 1)
        return onnx_error(c, "input %d has %lld elements; it must have one", k,
                          (long long)tide_numel(t));
    if (tide_item(t, value) < 0)
        return onnx_error(c, "reading input %d: %s", k, tide_last_error());
    return 0;
}

bool onnx_const_scalar(const onnx_ctx *c, int k, double *value)
{
    if (k >= c->nin || !c->in[k] || !c->in_const || !c->in_const[k] || tide_numel(c->in[k]) != 1)
        return false;
    void *paused = tide_jit_pause();
    int rc = tide_item(c->in[k], value);
    tide_jit_resume(paused);
    if (rc < 0)
        tide_clear_error();
    return rc == 0;
}

int onnx_axis(const onnx_ctx *c, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= (rank ? rank : 1))
        return onnx_error(c, "axis %lld is out of range for a tensor of %d dims",
                          (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}
