/*
 * to_device.c — moving tensors between devices (tide_to: the TO primitive, which the dispatcher
 * runs with td_copy_between_devices) and waiting for queued work (tide_sync). The copy goes
 * through the devices' read/write: one contiguous transfer, or two through a host buffer between
 * two devices whose memory is not host memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

tide_tensor *tide_to(const tide_tensor *t, const char *device)
{
    if (td_check_tensor("to", "tensor", t) < 0)
        return NULL;
    tide_device *dev = td_device_find("to", device);
    if (!dev)
        return NULL;
    return td_to_device(t, dev);
}

tide_tensor *td_to_device(const tide_tensor *t, tide_device *dev)
{
    if (t->device == dev)
        return tide_retain((tide_tensor *)t);
    td_meta meta = {t->ndim, {0}, (tide_dtype)t->dtype, dev};
    memcpy(meta.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    tide_tensor *in[1] = {(tide_tensor *)t};
    return td_dispatch(TIDE_OP_TO, &meta, in, 1, NULL);
}

/* src's bytes (contiguous, at byte offset off of its buffer) into out's buffer. */
static int copy_bytes(tide_tensor *out, const tide_tensor *src, size_t off, size_t nbytes)
{
    tide_device *from = src->device, *to = out->device;
    void *host_src = td_tensor_data(src), *host_dst = td_tensor_data(out);
    if (host_src) /* from host memory */
        return to->write(to, out->storage->buffer, 0, host_src, nbytes);
    if (host_dst) /* to host memory */
        return from->read(from, src->storage->buffer, off, host_dst, nbytes);
    /* neither is host memory: through a host buffer */
    void *bounce = td_malloc(nbytes);
    if (!bounce)
        return td_error("to: out of memory for %zu bytes on the way from %s to %s", nbytes,
                        from->name, to->name);
    int rc = from->read(from, src->storage->buffer, off, bounce, nbytes);
    if (rc == 0)
        rc = to->write(to, out->storage->buffer, 0, bounce, nbytes);
    free(bounce);
    return rc;
}

/* src itself when contiguous, else a contiguous copy on its device. The copy is part of TO, not
 * an op of its own: it bypasses the tracer and autograd (TO runs at a trace's break). */
static tide_tensor *contiguous_part(const tide_tensor *src)
{
    if (tide_is_contiguous(src))
        return tide_retain((tide_tensor *)src);
    tide_tensor *c = td_tensor_new("to", src->device, src->ndim, src->shape, (tide_dtype)src->dtype);
    tide_tensor *in[1] = {(tide_tensor *)src};
    if (c && td_run_eager_into(TIDE_OP_COPY, c, in, 1, NULL) < 0) {
        tide_release(c);
        return NULL;
    }
    return c;
}

int td_copy_between_devices(tide_tensor *out, const tide_tensor *src)
{
    if (!src->storage) /* a trace's result: the tracer computes it before TO runs */
        return td_error("to: a tensor computed while tracing was read after its trace ended "
                        "without being computed");
    tide_tensor *c = contiguous_part(src);
    if (!c)
        return -1;
    size_t es = td_dtype_sizes[c->dtype];
    size_t nbytes = (size_t)td_numel(c->ndim, c->shape) * es;
    int rc = copy_bytes(out, c, (size_t)c->offset * es, nbytes);
    tide_release(c);
    return rc;
}

int tide_sync(void)
{
    tide_device *cpu = tide_cpu_device();
    if (cpu->synchronize(cpu) < 0)
        return -1;
    for (int i = 0; td_device_opened(i); i++) {
        tide_device *d = td_device_opened(i);
        if (d != cpu && d->synchronize(d) < 0)
            return -1;
    }
    return 0;
}
