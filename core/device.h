/*
 * device.h — what a device is: a plain struct of function pointers (in the spirit of ggml's
 * backend interface). core/ and ops/ reach device memory and kernels only through it, so a
 * device whose buffers are not host pointers (Vulkan) and that runs asynchronously fits without
 * changes elsewhere: buffers are opaque handles, kernels may be queued, and `synchronize` waits.
 */
#ifndef TIDE_DEVICE_H
#define TIDE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "primitive.h"
#include "tide.h"

typedef struct tide_device tide_device;

struct tide_device {
    const char *name;
    /* Buffers are host pointers (td_tensor_data then reads them without a call). */
    bool host_buffers;
    /* A number no other open device has (the CPU's is 0; the registry numbers the others as
     * it opens them): what the jit's cache keys hold for a node's device. */
    uint8_t key_id;
    /* A buffer of nbytes (64-byte aligned where that means anything), or NULL when out of
     * memory. The handle is opaque to everyone but the device. */
    void *(*alloc)(tide_device *dev, size_t nbytes);
    void (*free)(tide_device *dev, void *buffer, size_t nbytes);
    /* Host <-> device copies of raw bytes at a byte offset into a buffer. They complete (or are
     * ordered before every later kernel) when they return. 0 or -1 with the error set. */
    int (*write)(tide_device *dev, void *buffer, size_t offset, const void *src, size_t nbytes);
    int (*read)(tide_device *dev, const void *buffer, size_t offset, void *dst, size_t nbytes);
    /* The host address of a buffer when the device's memory is host memory, else NULL. */
    void *(*host_ptr)(tide_device *dev, void *buffer);
    /* Runs one primitive. The dispatcher has validated everything: shapes, dtypes, attributes.
     * out is allocated with its final shape and dtype (contiguous, except COPY/FILL whose out
     * is the destination view); inputs may have any strides, including 0 and negative.
     * Binary ops get inputs of one dtype (the dispatcher inserts casts); their output dtype is
     * that dtype, or bool for comparisons and logical ops. 0 or -1 with the error set. */
    int (*run)(tide_device *dev, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
               const tide_attrs *attrs);
    /* Waits until every queued kernel and copy has finished. */
    int (*synchronize)(tide_device *dev);
    void *state; /* the device's own data */
    /* The jit's fusion groups (jit/group.h says the contract; plan is a jit_plan, group a
     * jit_group). NULL jit_run: the jit runs the device's ops one by one, eagerly, without
     * tracing them. jit_member: whether a member of op on operands of dtype can be rendered
     * (NULL: every fusible op). jit_epilogue_rows: rows of product node p's result per block
     * when a group may follow it block by block as its epilogue, else 0 (NULL: never).
     * jit_group_after_write: a group may go on after a fused write-back (the device's code
     * reads each operand where it uses it, not up front). */
    bool (*jit_member)(tide_device *dev, int op, int dtype);
    /* Whether run() takes op with every operand and the result of the 16-bit float dtype as
     * they are (a kernel of its own, such as the CPU's bfloat16 matmul on AMX tiles); NULL or
     * false: the dispatcher widens them to float32 around the op (ops/dispatch.c). */
    bool (*takes_half)(tide_device *dev, int op, int dtype);
    int64_t (*jit_epilogue_rows)(tide_device *dev, const void *plan, int p);
    int (*jit_compile)(tide_device *dev, const void *plan, void *group, int index);
    int (*jit_run)(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t);
    void (*jit_free)(tide_device *dev, void *group);
    bool jit_group_after_write;
    /* jit_runtime_sizes: the device's jit_compile/jit_run read a symbolic group's sizes at run
     * time (jit/group.h, step 4), so the jit may give it plans with symbolic dims; without it
     * every shape gets its own plan. */
    bool jit_runtime_sizes;
};

/* The CPU device; always present. */
tide_device *tide_cpu_device(void);

/* ---- the registry (core/device_registry.c) ---------------------------------------------------
 * A folder under devices/ provides one kind of device. The build lists the folders
 * (TIDE_DEVICES in CMakeLists.txt) and generates td_register_devices(), which calls each
 * folder's td_register_device_<name>() once, before the first lookup; that function calls
 * td_device_register. Devices are named "<kind>" (its default device) or "<kind>:<index>". */
typedef struct td_device_provider {
    const char *name; /* the kind: "cpu", "vulkan", ... */
    /* How many devices of this kind are present, without opening any (0 when none). */
    int (*count)(void);
    /* Opens device index (0 <= index < count()). Called at most once per index: the registry
     * keeps the result for the life of the process. NULL with the reason written into why.
     * With count() 0 it is called only to say why there is none (it returns NULL). */
    tide_device *(*open)(int index, char *why, size_t n);
    /* What device index is (its name and type, such as "integrated gpu"), without opening it;
     * NULL when the kind has nothing to tell. 0 or -1. */
    int (*describe)(int index, char *name, size_t n, const char **type);
    /* The index the bare kind name means (NULL: 0), such as the GPU an environment variable
     * or a ranking picks. */
    int (*default_index)(void);
} td_device_provider;

/* Adds a kind of device (p must stay valid). Called from td_register_device_<name>(). */
void td_device_register(const td_device_provider *p);
/* The device called name ("cpu", "vulkan" (the kind's default), "vulkan:1"), opened at first use. NULL with an error
 * naming op and saying why (an unknown name lists the kinds). */
tide_device *td_device_find(const char *op, const char *name);
/* The same without setting the error: NULL, and why says it. */
tide_device *td_device_lookup(const char *name, char *why, size_t n);
/* Kinds registered, and kind i's provider (NULL past the end). */
int td_device_kind_count(void);
const td_device_provider *td_device_kind(int i);
/* Whether a device other than the CPU has been opened (an atomic read: the jit asks per op). */
bool td_device_others_opened(void);
/* The devices opened so far, in order of opening (NULL past the end); for sync and stats. */
tide_device *td_device_opened(int i);

#endif /* TIDE_DEVICE_H */
