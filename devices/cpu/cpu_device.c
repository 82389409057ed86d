/*
 * cpu_device.c — the CPU device: host memory from the caching allocator, synchronous kernels,
 * and run(), which routes each primitive to its kernel.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_isa.h"
#include "cpu_jit.h"
#include "cpu_kernels.h"
#include "cpu_matmul_bf16.h"

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
    case TIDE_OP_GATHER:
        return td_cpu_gather(out, in[0], in[1], (int)a->ints[0]);
    case TIDE_OP_SCATTER_ADD:
        return td_cpu_scatter_add(out, in[0], in[1], in[2], (int)a->ints[0]);
    case TIDE_OP_INDEX_SELECT:
        return td_cpu_index_select(out, in[0], in[1], (int)a->ints[0]);
    case TIDE_OP_MATMUL:
        return td_cpu_matmul(out, in[0], in[1]);
    case TIDE_OP_LINEAR_HALF:
        return td_cpu_linear_half(out, in[0], in[1]);
    case TIDE_OP_CONV2D:
        return td_cpu_conv2d(out, in[0], in[1], a->ints);
    case TIDE_OP_CONV2D_GRAD_INPUT:
        return td_cpu_conv2d_grad_input(out, in[0], in[1], a->ints);
    case TIDE_OP_CONV2D_GRAD_WEIGHT:
        return td_cpu_conv2d_grad_weight(out, in[0], in[1], a->ints);
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_MAX_POOL2D_INDICES:
    case TIDE_OP_AVG_POOL2D:
        return td_cpu_pool2d(op, out, in[0], a->ints);
    case TIDE_OP_AVG_POOL2D_GRAD:
        return td_cpu_avg_pool2d_grad(out, in[0], a->ints);
    case TIDE_OP_TOPK:
        return td_cpu_topk(out, in[0], (int)a->ints[0], a->ints[1], a->ints[2] != 0);
    case TIDE_OP_CUMSUM:
        return td_cpu_scan(out, in[0], (int)a->ints[0], a->nints > 1 ? (int)a->ints[1] : 0);
    case TIDE_OP_SORT:
        return td_cpu_sort(out, in[0], (int)a->ints[0], a->ints[1] != 0);
    case TIDE_OP_SDPA:
        return td_cpu_sdpa(out, in, a);
    case TIDE_OP_SDPA_GRAD:
        return td_cpu_sdpa_grad(out, in, nin, a);
    case TIDE_OP_QUANTIZE:
        return td_cpu_quantize(out, in[0], (int)a->ints[0]);
    case TIDE_OP_DEQUANTIZE:
        return td_cpu_dequantize(out, in[0], (int)a->ints[0]);
    case TIDE_OP_QLINEAR:
        return td_cpu_qlinear(out, in[0], in[1], (int)a->ints[0]);
    case TIDE_OP_RANDOM:
        return td_cpu_random(out, (int)a->ints[0], (uint64_t)a->ints[1], (uint64_t)a->ints[2],
                             a->values[0], a->values[1]);
    default:
        return td_error_code(TIDE_ERR_UNSUPPORTED, "cpu: no kernel for op %s", tide_op_name(op));
    }
}

static int cpu_synchronize(tide_device *dev)
{
    (void)dev;
    return 0;
}

/* bfloat16 matmul on AMX tiles (cpu_matmul_bf16.c); every other half-precision op widens. */
static bool cpu_takes_half(tide_device *dev, int op, int dtype)
{
    (void)dev;
    return op == TIDE_OP_MATMUL && dtype == TIDE_BFLOAT16 && td_cpu_bf16_native();
}

static tide_device cpu_device = {
    .name = "cpu",
    .host_buffers = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .write = cpu_write,
    .read = cpu_read,
    .host_ptr = cpu_host_ptr,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
    .jit_member = td_cpu_jit_member,
    .takes_half = cpu_takes_half,
    .jit_epilogue_rows = td_cpu_jit_epilogue_rows,
    .jit_compile = td_cpu_jit_compile,
    .jit_run = td_cpu_jit_run,
    .jit_free = td_cpu_jit_free,
    .jit_group_after_write = true,
    .jit_runtime_sizes = true,
};

tide_device *tide_cpu_device(void) { return &cpu_device; }

static int cpu_count(void) { return 1; }

static tide_device *cpu_open(int index, char *why, size_t n)
{
    (void)index, (void)why, (void)n;
    return &cpu_device;
}

/* The CPU's model (/proc/cpuinfo where there is one) and, as its type, the ISA tier the kernels
 * run at: what tide.devices() shows and the profiler's header prints. */
static int cpu_describe(int index, char *name, size_t n, const char **type)
{
    (void)index;
    snprintf(name, n, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(name, n, "%s", colon + 2 - (colon[1] != ' '));
            name[strcspn(name, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    *type = td_cpu_isa_name(td_cpu_isa());
    return 0;
}

static const td_device_provider cpu_provider = {
    .name = "cpu", .count = cpu_count, .open = cpu_open, .describe = cpu_describe};

void td_register_device_cpu(void);
void td_register_device_cpu(void) { td_device_register(&cpu_provider); }
