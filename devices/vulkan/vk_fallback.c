/*
 * vk_fallback.c — a primitive the Vulkan device has no shader for runs on the CPU kernel: each
 * Vulkan operand is read into a host copy of the part of its storage it uses, the CPU device
 * runs the op on views with the same layouts, and the output's part is written back. Said once
 * per op under TIDE_LOG=vulkan, with the reason vk_run.c gives; counted in s->fallbacks.
 */
#include <stdlib.h>

#include "vk_internal.h"

/* A CPU tensor with t's layout over a host copy of the part of t's storage it uses (read: the
 * copy holds t's values; else it is left as allocated, for an output the op writes whole). */
static tide_tensor *host_view(vk_state *s, tide_tensor *t, bool read)
{
    if (t->device->state != s)
        return tide_retain(t);
    int64_t lo, hi;
    td_vk_span(t, t->ndim, t->shape, t->strides, &lo, &hi);
    int64_t n = hi - lo + 1;
    tide_tensor *h = td_tensor_new("vulkan fallback", tide_cpu_device(), 1, &n,
                                   (tide_dtype)t->dtype);
    if (!h)
        return NULL;
    size_t es = td_dtype_sizes[t->dtype];
    if (read && td_vk_read_locked(s, t->storage->buffer, (size_t)lo * es, td_tensor_data(h),
                                  (size_t)n * es) < 0) {
        tide_release(h);
        return NULL;
    }
    tide_tensor *v = td_tensor_view(h, t->ndim, t->shape, t->strides, t->offset - lo);
    tide_release(h);
    return v;
}

/* out's host copy back into its storage. */
static int write_back(vk_state *s, tide_tensor *out, const tide_tensor *hout)
{
    int64_t lo, hi;
    td_vk_span(out, out->ndim, out->shape, out->strides, &lo, &hi);
    size_t es = td_dtype_sizes[out->dtype];
    return td_vk_write_locked(s, out->storage->buffer, (size_t)lo * es,
                              (const char *)td_tensor_data(hout) - (out->offset - lo) * (int64_t)es,
                              (size_t)(hi - lo + 1) * es);
}

int td_vk_fallback(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                   const tide_attrs *attrs, const char *why)
{
    static bool logged[TIDE_NUM_OPS];
    if (!logged[op]) {
        logged[op] = true;
        td_log("vulkan", "%s runs on the CPU through host copies (%s)", tide_op_name(op), why);
    }
    s->fallbacks++;
    /* most ops have a few inputs; a cat of many takes its host views from the heap */
    tide_tensor *few[8] = {NULL};
    tide_tensor **hin = nin > 8 ? td_calloc((size_t)nin, sizeof *hin) : few;
    if (!hin)
        return td_error("vulkan: out of memory");
    tide_tensor *hout = NULL;
    int rc = -1, k = 0;
    for (; k < nin; k++)
        if (!(hin[k] = host_view(s, in[k], true)))
            break;
    /* COPY and FILL may write part of out through a view: the rest must keep its values */
    if (k == nin && (hout = host_view(s, out, op == TIDE_OP_COPY || op == TIDE_OP_FILL))) {
        tide_device *cpu = tide_cpu_device();
        rc = cpu->run(cpu, op, hout, hin, nin, attrs);
    }
    for (int j = 0; j < k; j++)
        tide_release(hin[j]);
    if (hin != few)
        free(hin);
    if (rc == 0)
        rc = write_back(s, out, hout);
    tide_release(hout);
    return rc;
}
