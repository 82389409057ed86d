/*
 * cpu_device.c — the CPU device: host memory from the caching allocator, synchronous kernels,
 * and run(), which routes each primitive to its kernel.
 */
#include <string.h>

#include "cpu_isa.h"
#include "cpu_kernels.h"

static void *cpu_alloc(tide_device *dev, size_t nbytes)
{
    (void)dev;
    return td_cache_alloc(nbytes);
}

static void cpu_free(tide_device *dev, void *buffer, size_t nbytes)
{
    (void)dev;
    td_cache_free(buffer, nbytes);
}

static int cpu_write(tide_device *dev, void *buffer, size_t offset, const void *src, size_t n)
{
    (void)dev;
    if (n)
        memcpy((char *)buffer + offset, src, n);
    return 0;
}

static int cpu_read(tide_device *dev, const void *buffer, size_t offset, void *dst, size_t n)
{
    (void)dev;
    if (n)
        memcpy(dst, (const char *)buffer + offset, n);
    return 0;
}

static void *cpu_host_ptr(tide_device *dev, void *buffer)
{
    (void)dev;
    return buffer;
}

static int cpu_run(tide_device *dev, tide_op op, tide_tensor *out, tide_tensor *const *in,
                   int nin, const tide_attrs *a)
{
    (void)dev;
    (void)nin;
    if (tide_op_is_unary(op))
        return td_cpu_unary(op, out, in[0]);
    if (tide_op_is_binary(op))
        return td_cpu_binary(op, out, in[0], in[1]);
    switch (op) {
    case TIDE_OP_SUM:
    case TIDE_OP_PROD:
    case TIDE_OP_MAX:
    case TIDE_OP_MIN:
        return td_cpu_reduce(op, out, in[0], a->ints, a->nints);
    case TIDE_OP_ARGMAX:
    case TIDE_OP_ARGMIN:
        return td_cpu_argreduce(op, out, in[0], (int)a->ints[0]);
    case TIDE_OP_WHERE:
        return td_cpu_where(out, in[0], in[1], in[2]);
    case TIDE_OP_CAST:
    case TIDE_OP_COPY:
        return td_cpu_copy(out, in[0]);
    case TIDE_OP_FILL:
        return td_cpu_fill(out, a->values[0]);
    case TIDE_OP_IOTA:
        return td_cpu_iota(out, a->values[0], a->values[1], a->values[2],
                           a->nints > 0 && a->ints[0] == 1);
    case TIDE_OP_CAT:
        return td_cpu_cat(out, in, nin, (int)a->ints[0]);
    case TIDE_OP_PAD:
        return td_cpu_pad(out, in[0], a->ints, a->values[0]);
    case TIDE_OP_FLIP:
        return td_cpu_flip(out, in[0], a->ints, a->nints);
    default:
        return td_error("cpu: no kernel for op %s", tide_op_name(op));
    }
}

static int cpu_synchronize(tide_device *dev)
{
    (void)dev;
    return 0;
}

static tide_device cpu_device = {
    .name = "cpu",
    .kind = TIDE_DEVICE_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .write = cpu_write,
    .read = cpu_read,
    .host_ptr = cpu_host_ptr,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
};

tide_device *tide_cpu_device(void) { return &cpu_device; }
