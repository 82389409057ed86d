/*
 * vk_internal.h — what the files of devices/vulkan share: the Vulkan entry points (loaded with
 * dlopen, so tide has no link-time dependency on libvulkan), the device state, buffers
 * sub-allocated from large blocks, and the batch of recorded commands.
 */
#ifndef TIDE_VK_INTERNAL_H
#define TIDE_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <vulkan/vulkan.h>

#include "../../core/log.h"
#include "../../core/tensor.h"
#include "vk_opcodes.h"

#define TD_VK_GLOBAL_FNS(X)                                                                        \
    X(vkCreateInstance) X(vkEnumerateInstanceVersion)

#define TD_VK_INSTANCE_FNS(X)                                                                      \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)          \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties)               \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)            \
    X(vkGetPhysicalDeviceFeatures) X(vkGetPhysicalDeviceFeatures2)

#define TD_VK_DEVICE_FNS(X)                                                                        \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                   \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)   \
    X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool)               \
    X(vkResetCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)                   \
    X(vkEndCommandBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence)                   \
    X(vkWaitForFences) X(vkResetFences) X(vkCreateShaderModule) X(vkDestroyShaderModule)        \
    X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout)    \
    X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)                 \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)              \
    X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCmdBindPipeline)                 \
    X(vkCmdBindDescriptorSets) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer)     \
    X(vkCmdUpdateBuffer) X(vkDeviceWaitIdle) X(vkCreatePipelineCache)                         \
    X(vkDestroyPipelineCache) X(vkGetPipelineCacheData)

typedef struct td_vk_fns {
#define TD_VK_FN_FIELD(name) PFN_##name name;
    TD_VK_GLOBAL_FNS(TD_VK_FN_FIELD)
    TD_VK_INSTANCE_FNS(TD_VK_FN_FIELD)
    TD_VK_DEVICE_FNS(TD_VK_FN_FIELD)
#undef TD_VK_FN_FIELD
} td_vk_fns;

extern td_vk_fns td_vk;

/* ---- memory --------------------------------------------------------------------------------- */

typedef struct vk_range {
    size_t offset, size;
    struct vk_range *next;
} vk_range;

/* One VkDeviceMemory with one VkBuffer over all of it. Tensors get ranges of it. */
typedef struct vk_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    size_t size;
    char *map;          /* host address when the memory is mapped, else NULL */
    vk_range *free;     /* free ranges, sorted by offset */
    size_t used;
    bool dedicated;     /* made for one large tensor; freed when that tensor goes */
    struct vk_block *next;
} vk_block;

/* The handle a tide_storage holds for a Vulkan buffer. */
typedef struct vk_buf {
    vk_block *block;
    size_t offset; /* bytes into the block */
    size_t size;   /* bytes reserved (rounded up) */
} vk_buf;

/* ---- pipelines ------------------------------------------------------------------------------- */

#define VK_MAX_BINDINGS 9 /* 0: parameters; 1..8: data (the library's shaders use 1..4) */
#define VK_PARAM_SLOT 512 /* bytes of parameters per dispatch */

typedef struct vk_shader {
    const char *name;
    const uint32_t *code;
    size_t size; /* bytes */
} vk_shader;

/* Generated at build time from the shaders folder (vk_shader_table.c, device.cmake). */
extern const vk_shader td_vk_shaders[];
extern const int td_vk_num_shaders;

/* ---- the device -------------------------------------------------------------------------- */

typedef struct vk_device_info {
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkPhysicalDeviceType type;
    uint32_t api_version;
    bool has_compute;
} vk_device_info;

typedef struct vk_state {
    pthread_mutex_t lock;
    int index;               /* of the physical device, as vulkan:index names it */
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkPhysicalDeviceProperties props;
    size_t max_binding;      /* maxStorageBufferRange */
    size_t max_alloc;        /* maxMemoryAllocationSize */
    size_t offset_align;     /* minStorageBufferOffsetAlignment */
    uint32_t max_groups[3];  /* maxComputeWorkGroupCount (lowered by TIDE_VULKAN_MAX_GROUPS) */
    size_t block_size;
    uint32_t mem_type;       /* for tensors */
    bool mapped;             /* tensor memory is host-visible and mapped */
    bool has64;              /* shaderInt64 and shaderFloat64: the int64/float64 shaders work */
    bool has16;              /* storageBuffer16BitAccess: the float16/bfloat16 shader works */
    char no16[96];           /* why not, when it does not */
    uint32_t staging_type;   /* host-visible, for staging copies */
    vk_block *blocks;
    vk_block *spare;         /* freed dedicated blocks kept for reuse (the next tensor of a size) */
    size_t spare_bytes;
    size_t bytes_in_use;

    /* shared layout of every compute pipeline */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkPipeline *pipelines; /* per shader and specialization value, made at first use */
    VkPipelineCache pipe_cache; /* loaded from and saved to disk (vk_jit.c) */
    struct vk_jit_entry *jit_code; /* the jit's pipelines, by GLSL text (vk_jit.c) */

    /* the batch being recorded */
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    bool recording;
    int ndispatch;
    VkDescriptorPool desc_pool;
    int desc_used, desc_cap;
    VkBuffer param_buf;
    VkDeviceMemory param_mem;
    char *param_map;
    size_t param_used, param_cap;
    /* staging buffers to free once the batch has run */
    struct vk_staging *staging;
    /* counters for tests and benchmarks */
    uint64_t submits, dispatches, fallbacks;
} vk_state;

/* vk_instance.c */
const char *td_vk_type_name(VkPhysicalDeviceType t);

/* vk_device.c: one device, in its own tide_device (state: its vk_state). NULL with why set. */
tide_device *td_vk_open_device(VkPhysicalDevice phys, int index, const char *name, char *why,
                               size_t n);
/* Destroys the device's Vulkan objects and its state (at exit); dev->state becomes NULL and dev
 * stays, so a tensor freed later frees only its handle. */
void td_vk_close_device(tide_device *dev);
void td_vk_add_stats(tide_device *dev, uint64_t counts[3]); /* submits, dispatches, fallbacks */

/* vk_device.c */
void *td_vk_alloc_locked(vk_state *s, size_t nbytes);
void td_vk_free_locked(vk_state *s, void *buffer);
int td_vk_write_locked(vk_state *s, vk_buf *b, size_t offset, const void *src, size_t n);
int td_vk_read_locked(vk_state *s, const vk_buf *b, size_t offset, void *dst, size_t n);
int td_vk_flush(vk_state *s);          /* submits the batch and waits for it */
int td_vk_begin(vk_state *s);          /* opens the batch's command buffer if needed */
void td_vk_barrier(vk_state *s);       /* orders every earlier command before every later one */
const char *td_vk_result_str(VkResult r);

/* One binding of a dispatch: a range of a buffer. */
typedef struct vk_binding {
    VkBuffer buffer;
    VkDeviceSize offset, range;
} vk_binding;

/* Records one dispatch of shader (index into td_vk_shaders) with the given parameters (at most
 * VK_PARAM_SLOT bytes) and data bindings 1..nb; groups is the number of workgroups, spread over
 * x and y when it exceeds the limit (the shader reads gl_NumWorkGroups.x). 0 or -1. */
/* spec: the value of the shader's specialization constant 0 (the op, for the elementwise
 * shaders: the driver then compiles that op alone), below VK_MAX_SPEC. */
#define VK_MAX_SPEC 512
int td_vk_dispatch(vk_state *s, int shader, uint32_t spec, const void *params, size_t nparams,
                   const vk_binding *b, int nb, uint64_t groups);
int td_vk_dispatch3(vk_state *s, int shader, uint32_t spec, const void *params, size_t nparams,
                    const vk_binding *b, int nb, uint32_t gx, uint32_t gy, uint32_t gz);
int td_vk_shader_index(const char *name);
/* Makes a compute pipeline of SPIR-V code with the shared layout (through the pipeline cache). */
VkPipeline td_vk_make_pipeline(vk_state *s, const uint32_t *code, size_t size, const char *what);
/* td_vk_dispatch with a pipeline of one's own (the jit's). */
int td_vk_dispatch_pipe(vk_state *s, VkPipeline pipe, const void *params, size_t nparams,
                        const vk_binding *b, int nb, uint64_t groups);

/* vk_run.c */
int td_vk_run(tide_device *dev, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
              const tide_attrs *attrs);
/* Binds a Vulkan tensor read or written through its own layout: b, and base (the element index
 * of its offset inside the binding). 1 bound, 0 cannot (larger than one binding), -1 error. */
int td_vk_bind_tensor(vk_state *s, tide_tensor *t, vk_binding *b, int32_t *base);
uint32_t td_vk_opcode(tide_op op);   /* the shaders' op code (vk_opcodes.h) */
bool td_vk_int_op_ok(uint32_t code); /* whether the integer shaders have the op */

/* vk_run.c: an operand bound for a shader; a host tensor (a wrapped number, say) is copied
 * into the command stream first and freed by td_vk_release_operands */
typedef struct vk_operand {
    vk_binding b;
    int32_t base;   /* element index of the tensor's offset inside the binding */
    vk_buf *upload; /* a host operand's temporary device copy */
} vk_operand;
/* Binds t read with (shape, strides): 1 bound, 0 cannot (declined: too large for one
 * binding), -1 error. */
int td_vk_bind_operand(vk_state *s, tide_tensor *t, int nd, const int64_t *shape,
                       const int64_t *st, vk_operand *op);
void td_vk_release_operands(vk_state *s, vk_operand *ops, int n);
/* vk_run_nn.c: pooling, convolution and indexing; 1 ran, 0 declined (why_not set), -1 error */
int td_vk_run_pool(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *x,
                   const tide_attrs *a);
int td_vk_run_conv(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in,
                   const tide_attrs *a);
int td_vk_run_index(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in,
                    const tide_attrs *a);
/* vk_run.c: run_eltwise and its reason for declining, for vk_half.c */
int td_vk_eltwise(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                  const tide_attrs *attrs);
int td_vk_decline(const char *fmt, const char *arg); /* sets why_not; 0 */
/* The elements [lo, hi] of t's storage that t read with (shape, strides) touches. */
void td_vk_span(const tide_tensor *t, int nd, const int64_t *shape, const int64_t *st,
                int64_t *lo, int64_t *hi);
/* vk_fallback.c: op on the CPU kernel over host copies of the operands, out written back; why
 * is logged once per op under TIDE_LOG=vulkan. Called with s->lock held. 0 or -1. */
int td_vk_fallback(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                   const tide_attrs *attrs, const char *why);

/* vk_half.c: cast, copy and fill with a float16/bfloat16 operand (eltwise16.comp) */
bool td_vk_half_involved(const tide_tensor *out, tide_tensor *const *in, int nin);
/* Whether eltwise16 runs the op in one dispatch (-2), else runs it in two steps through a
 * float32 temporary (1), declines with why_not set (0), or fails (-1). */
int td_vk_half_plan(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in);
/* vk_half.c: whether the device has 16-bit storage buffers; features to chain into device
 * creation (NULL: none), with s->has16 and s->no16 set */
const void *td_vk_half_features(vk_state *s, VkPhysicalDevice16BitStorageFeatures *want);

/* vk_jit.c: the jit's fusion groups as GLSL compiled at run time */
int td_vk_jit_compile(tide_device *dev, const void *plan, void *group, int index);
int td_vk_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t);
void td_vk_jit_free(tide_device *dev, void *group);
void td_vk_jit_close(vk_state *s); /* destroys the jit's pipelines of one device */
void td_vk_jit_shutdown(void);     /* glslang's process-wide state, once every device is gone */

/* vk_cache.c: the files kept between processes */
int td_vk_cache_dir(char *dir, size_t n); /* 0: nothing is kept */
char *td_vk_cache_read(const char *path, size_t *size);
void td_vk_cache_write(const char *dir, const char *path, const void *data, size_t n);
void td_vk_cache_open(vk_state *s);  /* the pipeline cache, from disk */
void td_vk_cache_close(vk_state *s); /* saves it and destroys it */

#endif
