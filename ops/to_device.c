/*
 * to_device.c — moving tensors between devices (tide_to) and waiting for queued work
 * (tide_sync). The copy goes through the devices' read/write: one contiguous transfer, or two
 * through a host buffer between two devices whose memory is not host memory.
 */
#include <stdlib.h>

#include "dispatch.h"

/* Device to device (vulkan to vulkan:1): read into a host buffer, write from it. */
static int through_host(const tide_tensor *c, tide_tensor *r, size_t nbytes)
{
    void *host = td_malloc(nbytes);
    if (!host)
        return td_error("to: out of memory for a %zu-byte copy from %s to %s", nbytes,
                        c->device->name, r->device->name);
    size_t es = td_dtype_sizes[c->dtype];
    int rc = c->device->read(c->device, c->storage->buffer, (size_t)c->offset * es, host, nbytes);
    if (rc == 0)
        rc = r->device->write(r->device, r->storage->buffer, 0, host, nbytes);
    free(host);
    return rc;
}

tide_tensor *tide_to(const tide_tensor *t, const char *device)
{
    if (td_check_tensor("to", "tensor", t) < 0)
        return NULL;
    tide_device *dev = td_device_find("to", device);
    if (!dev)
        return NULL;
    if (t->device == dev)
        return tide_retain((tide_tensor *)t);
    if (td_materialize(t) < 0)
        return NULL;
    tide_tensor *c = tide_contiguous(t);
    if (!c)
        return NULL;
    tide_tensor *r = td_tensor_new("to", dev, c->ndim, c->shape, (tide_dtype)c->dtype);
    size_t es = td_dtype_sizes[c->dtype];
    size_t nbytes = (size_t)td_numel(c->ndim, c->shape) * es;
    int rc = r ? 0 : -1;
    if (rc == 0 && nbytes) {
        void *src = td_tensor_data(c), *dst = td_tensor_data(r);
        if (src) /* from host memory */
            rc = dev->write(dev, r->storage->buffer, 0, src, nbytes);
        else if (dst) /* to host memory */
            rc = c->device->read(c->device, c->storage->buffer, (size_t)c->offset * es, dst,
                                 nbytes);
        else
            rc = through_host(c, r, nbytes);
    }
    tide_release(c);
    if (rc < 0) {
        tide_release(r);
        return NULL;
    }
    return r;
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
