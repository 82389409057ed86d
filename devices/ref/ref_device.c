/*
 * ref_device.c — the reference device ("ref"): host memory, synchronous plain loops, and run(),
 * which routes each primitive to its kernel. It exists to be the oracle of differential tests
 * (README.md); it registers itself as one device of kind "ref".
 */
#include <stdio.h>
#include <string.h>

#include "ref_internal.h"

static void *ref_alloc(tide_device *dev, size_t nbytes)
{
    (void)dev;
    return td_cache_alloc(nbytes);
}

static void ref_free(tide_device *dev, void *buffer, size_t nbytes)
{
    (void)dev;
    td_cache_free(buffer, nbytes);
}

static int ref_write(tide_device *dev, void *buffer, size_t offset, const void *src, size_t n)
{
    (void)dev;
    if (n)
        memcpy((char *)buffer + offset, src, n);
    return 0;
}

static int ref_read(tide_device *dev, const void *buffer, size_t offset, void *dst, size_t n)
{
    (void)dev;
    if (n)
        memcpy(dst, (const char *)buffer + offset, n);
    return 0;
}

static void *ref_host_ptr(tide_device *dev, void *buffer)
{
    (void)dev;
    return buffer;
}

static int ref_run_library(tide_op op, tide_tensor *out, tide_tensor *const *in,
                           const tide_attrs *a)
{
    switch (op) {
    case TIDE_OP_MATMUL: return ref_matmul(out, in[0], in[1]);
    case TIDE_OP_LINEAR_HALF: return ref_linear_half(out, in[0], in[1]);
    case TIDE_OP_CONV2D: return ref_conv2d(out, in[0], in[1], a->ints);
    case TIDE_OP_CONV2D_GRAD_INPUT: return ref_conv2d_grad_input(out, in[0], in[1], a->ints);
    case TIDE_OP_CONV2D_GRAD_WEIGHT: return ref_conv2d_grad_weight(out, in[0], in[1], a->ints);
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_MAX_POOL2D_INDICES:
    case TIDE_OP_AVG_POOL2D: return ref_pool2d(op, out, in[0], a->ints);
    case TIDE_OP_AVG_POOL2D_GRAD: return ref_avg_pool2d_grad(out, in[0], a->ints);
    case TIDE_OP_TOPK: return ref_topk(out, in[0], (int)a->ints[0], a->ints[1], a->ints[2] != 0);
    case TIDE_OP_CUMSUM:
        if (a->nints > 1 && a->ints[1] != TIDE_SCAN_SUM)
            return ref_scan(out, in[0], (int)a->ints[0], (int)a->ints[1]);
        return ref_cumsum(out, in[0], (int)a->ints[0]);
    /* a sort is a topk of every element: ranks by the same definition, ties to the lower
     * position, NaN the largest */
    case TIDE_OP_SORT:
        return ref_topk(out, in[0], (int)a->ints[0], in[0]->ndim > 0 ? in[0]->shape[a->ints[0]] : 1,
                        a->ints[1] != 0);
    case TIDE_OP_SDPA: return ref_sdpa(out, in, a);
    case TIDE_OP_QUANTIZE: return ref_quantize(out, in[0], (int)a->ints[0]);
    case TIDE_OP_DEQUANTIZE: return ref_dequantize(out, in[0], (int)a->ints[0]);
    case TIDE_OP_QLINEAR: return ref_qlinear(out, in[0], in[1], (int)a->ints[0]);
    case TIDE_OP_SDPA_GRAD: return ref_sdpa_grad(out, in, a->ints[1] ? 6 : 5, a);
    case TIDE_OP_RANDOM:
        return ref_random(out, (int)a->ints[0], (uint64_t)a->ints[1], (uint64_t)a->ints[2],
                          a->values[0], a->values[1]);
    default:
        /* view ops never reach a device: the dispatcher makes them without a kernel */
        return td_error("ref: no kernel for op %s", tide_op_name(op));
    }
}

static int ref_run(tide_device *dev, tide_op op, tide_tensor *out, tide_tensor *const *in,
                   int nin, const tide_attrs *a)
{
    (void)dev;
    if (tide_op_is_unary(op))
        return ref_unary(op, out, in[0]);
    if (tide_op_is_binary(op))
        return ref_binary(op, out, in[0], in[1]);
    switch (op) {
    case TIDE_OP_SUM:
    case TIDE_OP_PROD:
    case TIDE_OP_MAX:
    case TIDE_OP_MIN: return ref_reduce(op, out, in[0], a->ints, a->nints);
    case TIDE_OP_ARGMAX:
    case TIDE_OP_ARGMIN: return ref_argreduce(op, out, in[0], (int)a->ints[0]);
    case TIDE_OP_WHERE: return ref_where(out, in[0], in[1], in[2]);
    case TIDE_OP_CAST:
    case TIDE_OP_COPY: return ref_copy(out, in[0]);
    case TIDE_OP_FILL: return ref_fill(out, a->values[0]);
    case TIDE_OP_IOTA:
        return ref_iota(out, a->values[0], a->values[1], a->values[2],
                        a->nints > 0 && a->ints[0] == 1);
    case TIDE_OP_CAT: return ref_cat(out, in, nin, (int)a->ints[0]);
    case TIDE_OP_PAD: return ref_pad(out, in[0], a->ints, a->values[0]);
    case TIDE_OP_FLIP: return ref_flip(out, in[0], a->ints, a->nints);
    case TIDE_OP_GATHER: return ref_gather(out, in[0], in[1], (int)a->ints[0]);
    case TIDE_OP_SCATTER_ADD: return ref_scatter_add(out, in[0], in[1], in[2], (int)a->ints[0]);
    case TIDE_OP_INDEX_SELECT: return ref_index_select(out, in[0], in[1], (int)a->ints[0]);
    default: return ref_run_library(op, out, in, a);
    }
}

static int ref_synchronize(tide_device *dev)
{
    (void)dev;
    return 0;
}

bool ref_jit_member(tide_device *dev, int op, int dtype);
int64_t ref_jit_epilogue_rows(tide_device *dev, const void *plan, int p);
int ref_jit_compile(tide_device *dev, const void *plan, void *group, int index);
int ref_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t);
void ref_jit_free(tide_device *dev, void *group);

/* The jit hooks: ref_jit.c interprets every fusion group. jit_group_after_write: a member reads
 * each operand when it computes its own element (members run in program order within a row),
 * so a member after a fused write-back reads the written elements. */
static tide_device ref_device = {
    .name = "ref",
    .host_buffers = true,
    .alloc = ref_alloc,
    .free = ref_free,
    .write = ref_write,
    .read = ref_read,
    .host_ptr = ref_host_ptr,
    .run = ref_run,
    .synchronize = ref_synchronize,
    .jit_member = ref_jit_member,
    .jit_epilogue_rows = ref_jit_epilogue_rows,
    .jit_compile = ref_jit_compile,
    .jit_run = ref_jit_run,
    .jit_free = ref_jit_free,
    .jit_group_after_write = true,
    .jit_runtime_sizes = true,
};

static int ref_count(void) { return 1; }

static tide_device *ref_open(int index, char *why, size_t n)
{
    (void)index, (void)why, (void)n;
    return &ref_device;
}

static int ref_describe(int index, char *name, size_t n, const char **type)
{
    (void)index;
    snprintf(name, n, "reference (plain scalar loops)");
    if (type)
        *type = "cpu";
    return 0;
}

static const td_device_provider ref_provider = {
    .name = "ref", .count = ref_count, .open = ref_open, .describe = ref_describe};

void td_register_device_ref(void);
void td_register_device_ref(void) { td_device_register(&ref_provider); }
