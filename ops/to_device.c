/*
 * to_device.c — moving tensors between devices (tide_to), waiting for queued work (tide_sync)
 * and what the public API tells about the Vulkan device. The copy goes through the devices'
 * read/write: one contiguous transfer.
 */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"

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
            rc = td_error_code(TIDE_ERR_UNSUPPORTED, "to: no path from %s to %s", c->device->name,
                               dev->name);
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

bool tide_vulkan_available(char *why, size_t n)
{
    char buf[512];
    bool ok = td_vulkan_device(buf, sizeof buf) != NULL;
    if (why && n)
        snprintf(why, n, "%s", ok ? "" : buf);
    return ok;
}

int tide_vulkan_device_count(void) { return td_vulkan_device_count(); }

int tide_vulkan_device_info(int i, char *name, size_t n, const char **kind, bool *selected)
{
    if (td_vulkan_device_info(i, name, n, kind, selected) < 0)
        return td_error("vulkan_device_info: no Vulkan device %d (there are %d)", i,
                        td_vulkan_device_count());
    return 0;
}
