/*
 * vk_device.c — one Vulkan device (vk_instance.c finds them): its VkDevice and queue, memory
 * sub-allocated from large blocks, host transfers, and the batch: dispatches are recorded into
 * one command buffer and submitted when the host needs a result (a read, a synchronize) or the
 * batch is full. Everything lives in the device's vk_state (tide_device.state). See README.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define BLOCK_ALIGN 256

/* The result's name. The memory errors say "out of memory" too, so that tide_last_error_code()
 * reports TIDE_ERR_OUT_OF_MEMORY for them (core/error.c classifies by that phrase). */
const char *td_vk_result_str(VkResult r)
{
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY (the driver is out of memory)";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY (out of device memory)";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
        return "VK_ERROR_OUT_OF_POOL_MEMORY (a descriptor pool is out of memory)";
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_INCOMPLETE)
    R(VK_ERROR_INITIALIZATION_FAILED) R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED)
    R(VK_ERROR_LAYER_NOT_PRESENT) R(VK_ERROR_EXTENSION_NOT_PRESENT)
    R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER) R(VK_ERROR_TOO_MANY_OBJECTS)
    R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
#undef R
    default: return "VkResult error";
    }
}

/* ---- buffers ------------------------------------------------------------------------------ */

static uint32_t find_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                            VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want)
            return i;
    return UINT32_MAX;
}

static int make_buffer(vk_state *s, size_t size, uint32_t type, bool want_map, VkBuffer *buf,
                       VkDeviceMemory *mem, char **map)
{
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    /* the fault hook (core/fault.c) stands for the driver's allocations here */
    VkResult r = td_alloc_fails() ? VK_ERROR_OUT_OF_HOST_MEMORY
                                  : td_vk.vkCreateBuffer(s->device, &bi, NULL, buf);
    if (r != VK_SUCCESS)
        return td_error("vulkan: vkCreateBuffer of %zu bytes failed: %s", size,
                        td_vk_result_str(r));
    VkMemoryRequirements req;
    td_vk.vkGetBufferMemoryRequirements(s->device, *buf, &req);
    if (!(req.memoryTypeBits & (1u << type))) {
        td_vk.vkDestroyBuffer(s->device, *buf, NULL);
        return td_error("vulkan: no suitable memory type for a buffer");
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = td_alloc_fails() ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                         : td_vk.vkAllocateMemory(s->device, &ai, NULL, mem);
    if (r != VK_SUCCESS) {
        td_vk.vkDestroyBuffer(s->device, *buf, NULL);
        return td_error("vulkan: out of device memory allocating %zu bytes (%s)", size,
                        td_vk_result_str(r));
    }
    td_vk.vkBindBufferMemory(s->device, *buf, *mem, 0);
    *map = NULL;
    if (want_map) {
        void *p = NULL;
        r = td_vk.vkMapMemory(s->device, *mem, 0, VK_WHOLE_SIZE, 0, &p);
        if (r != VK_SUCCESS) {
            td_vk.vkFreeMemory(s->device, *mem, NULL);
            td_vk.vkDestroyBuffer(s->device, *buf, NULL);
            return td_error("vulkan: vkMapMemory failed: %s", td_vk_result_str(r));
        }
        *map = p;
    }
    return 0;
}

static void destroy_buffer(vk_state *s, VkBuffer buf, VkDeviceMemory mem)
{
    td_vk.vkDestroyBuffer(s->device, buf, NULL);
    td_vk.vkFreeMemory(s->device, mem, NULL);
}

static void destroy_block(vk_state *s, vk_block *b);

/* ---- opening one device, step by step (each step: 0, or -1 with why written) --------------- */

#define FAIL(...) (snprintf(why, n, __VA_ARGS__), -1)

/* The limits tide plans with. TIDE_VULKAN_MAX_GROUPS lowers the workgroup counts (for tests of
 * the split dispatch). */
static void read_limits(vk_state *s)
{
    td_vk.vkGetPhysicalDeviceProperties(s->phys, &s->props);
    const VkPhysicalDeviceLimits *lim = &s->props.limits;
    s->max_binding = lim->maxStorageBufferRange;
    s->offset_align = lim->minStorageBufferOffsetAlignment ? lim->minStorageBufferOffsetAlignment : 1;
    s->max_alloc = (size_t)1 << 30; /* the least Vulkan 1.1 guarantees */
    if (td_vk.vkGetPhysicalDeviceProperties2 && s->props.apiVersion >= VK_API_VERSION_1_1) {
        VkPhysicalDeviceMaintenance3Properties m3 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &m3};
        td_vk.vkGetPhysicalDeviceProperties2(s->phys, &p2);
        if (m3.maxMemoryAllocationSize)
            s->max_alloc = m3.maxMemoryAllocationSize;
    }
    const char *mg = getenv("TIDE_VULKAN_MAX_GROUPS");
    for (int i = 0; i < 3; i++) {
        s->max_groups[i] = lim->maxComputeWorkGroupCount[i];
        if (mg && atoi(mg) > 0 && (uint32_t)atoi(mg) < s->max_groups[i])
            s->max_groups[i] = (uint32_t)atoi(mg);
    }
}

/* One queue of a compute-capable family, a compute-only family first: it is the async one. */
static int pick_queue_family(vk_state *s, char *why, size_t n)
{
    uint32_t nq = 0;
    td_vk.vkGetPhysicalDeviceQueueFamilyProperties(s->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16)
        nq = 16;
    td_vk.vkGetPhysicalDeviceQueueFamilyProperties(s->phys, &nq, qf);
    s->queue_family = UINT32_MAX;
    for (uint32_t q = 0; q < nq; q++)
        if ((qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
            s->queue_family = q;
            return 0;
        }
    for (uint32_t q = 0; q < nq; q++)
        if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            s->queue_family = q;
            return 0;
        }
    return FAIL("%s has no compute queue", s->props.deviceName);
}

/* The VkDevice with its queue; 64-bit shader types when the device has both, 16-bit storage
 * buffers when it has them (vk_half.c). */
static int create_logical_device(vk_state *s, char *why, size_t n)
{
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = s->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkPhysicalDeviceFeatures have, want;
    memset(&want, 0, sizeof want);
    td_vk.vkGetPhysicalDeviceFeatures(s->phys, &have);
    if (have.shaderInt64 && have.shaderFloat64) {
        want.shaderInt64 = want.shaderFloat64 = VK_TRUE;
        s->has64 = true;
    }
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .pEnabledFeatures = &want};
    VkPhysicalDevice16BitStorageFeatures want16;
    dci.pNext = td_vk_half_features(s, &want16);
    VkResult r = td_vk.vkCreateDevice(s->phys, &dci, NULL, &s->device);
    if (r != VK_SUCCESS) {
        s->device = VK_NULL_HANDLE;
        return FAIL("vkCreateDevice on %s failed: %s", s->props.deviceName, td_vk_result_str(r));
    }
    td_vk.vkGetDeviceQueue(s->device, s->queue_family, 0, &s->queue);
    return 0;
}

/* Memory: on a discrete GPU, device-local memory with staging copies; elsewhere (integrated
 * GPUs, CPU implementations) memory both device-local and host-visible, mapped, so host
 * transfers are plain copies. TIDE_VULKAN_STAGING=1 forces the staging path (for tests). */
static int choose_memory(vk_state *s, char *why, size_t n)
{
    VkPhysicalDeviceMemoryProperties mp;
    td_vk.vkGetPhysicalDeviceMemoryProperties(s->phys, &mp);
    const char *st = getenv("TIDE_VULKAN_STAGING");
    bool force_staging = st && *st && strcmp(st, "0") != 0;
    VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                               VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    s->staging_type = find_memory(&mp, ~0u, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (s->staging_type == UINT32_MAX)
        s->staging_type = find_memory(&mp, ~0u, hv);
    s->mem_type = UINT32_MAX;
    if (!force_staging && s->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
        s->mem_type = find_memory(&mp, ~0u, hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        s->mapped = s->mem_type != UINT32_MAX;
    }
    if (s->mem_type == UINT32_MAX) {
        s->mem_type = find_memory(&mp, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        s->mapped = false;
    }
    if (s->mem_type == UINT32_MAX || s->staging_type == UINT32_MAX)
        return FAIL("%s has no usable memory type", s->props.deviceName);
    VkDeviceSize heap = mp.memoryHeaps[mp.memoryTypes[s->mem_type].heapIndex].size;
    s->block_size = (size_t)64 << 20;
    if (s->block_size > s->max_alloc)
        s->block_size = s->max_alloc;
    if (s->block_size > heap / 4)
        s->block_size = (size_t)(heap / 4) & ~(size_t)(BLOCK_ALIGN - 1);
    return 0;
}

/* The batch: a command pool, its one command buffer, a fence, a descriptor pool. */
static int create_batch(vk_state *s, char *why, size_t n)
{
    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                   .queueFamilyIndex = s->queue_family};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (td_vk.vkCreateCommandPool(s->device, &cpi, NULL, &s->cmd_pool) != VK_SUCCESS ||
        td_vk.vkCreateFence(s->device, &fci, NULL, &s->fence) != VK_SUCCESS)
        return FAIL("could not create a command pool or fence");
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = s->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    if (td_vk.vkAllocateCommandBuffers(s->device, &cai, &s->cmd) != VK_SUCCESS)
        return FAIL("could not allocate a command buffer");
    s->desc_cap = 1024;
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               (uint32_t)(s->desc_cap * VK_MAX_BINDINGS)};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .maxSets = (uint32_t)s->desc_cap,
                                      .poolSizeCount = 1,
                                      .pPoolSizes = &ps};
    if (td_vk.vkCreateDescriptorPool(s->device, &dpi, NULL, &s->desc_pool) != VK_SUCCESS)
        return FAIL("could not create a descriptor pool");
    return 0;
}

/* The layout every compute pipeline shares (bindings 0..VK_MAX_BINDINGS-1, all storage
 * buffers), the table of the library's pipelines, and the pipeline cache from disk. */
static int create_pipeline_layout(vk_state *s, char *why, size_t n)
{
    VkDescriptorSetLayoutBinding lb[VK_MAX_BINDINGS];
    for (int i = 0; i < VK_MAX_BINDINGS; i++)
        lb[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                               .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               .descriptorCount = 1,
                                               .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo sli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = VK_MAX_BINDINGS,
                                           .pBindings = lb};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &s->set_layout};
    if (td_vk.vkCreateDescriptorSetLayout(s->device, &sli, NULL, &s->set_layout) != VK_SUCCESS ||
        td_vk.vkCreatePipelineLayout(s->device, &pli, NULL, &s->pipe_layout) != VK_SUCCESS)
        return FAIL("could not create the pipeline layout");
    s->pipelines = td_calloc((size_t)td_vk_num_shaders * VK_MAX_SPEC, sizeof *s->pipelines);
    if (!s->pipelines)
        return FAIL("out of memory");
    td_vk_cache_open(s);
    return 0;
}

/* Parameters: one slot per dispatch (a descriptor set's worth), host-visible and mapped. */
static int create_param_buffer(vk_state *s, char *why, size_t n)
{
    size_t slot = VK_PARAM_SLOT;
    while (slot % s->offset_align)
        slot *= 2;
    s->param_cap = (size_t)s->desc_cap * slot;
    if (make_buffer(s, s->param_cap, s->staging_type, true, &s->param_buf, &s->param_mem,
                    &s->param_map) < 0)
        return FAIL("could not map the parameter buffer: %s", tide_last_error());
    return 0;
}

#undef FAIL

/* Destroys whatever part of s was made, and s. */
static void destroy_state(vk_state *s)
{
    if (s->device) {
        if (s->recording)
            td_vk_flush(s);
        td_vk.vkDeviceWaitIdle(s->device);
        td_vk_jit_close(s);
        td_vk_cache_close(s);
        for (int i = 0; s->pipelines && i < td_vk_num_shaders * VK_MAX_SPEC; i++)
            if (s->pipelines[i])
                td_vk.vkDestroyPipeline(s->device, s->pipelines[i], NULL);
        free(s->pipelines);
        if (s->pipe_layout)
            td_vk.vkDestroyPipelineLayout(s->device, s->pipe_layout, NULL);
        if (s->set_layout)
            td_vk.vkDestroyDescriptorSetLayout(s->device, s->set_layout, NULL);
        if (s->desc_pool)
            td_vk.vkDestroyDescriptorPool(s->device, s->desc_pool, NULL);
        if (s->param_buf)
            destroy_buffer(s, s->param_buf, s->param_mem);
        if (s->fence)
            td_vk.vkDestroyFence(s->device, s->fence, NULL);
        if (s->cmd_pool)
            td_vk.vkDestroyCommandPool(s->device, s->cmd_pool, NULL);
        for (int list = 0; list < 2; list++)
            for (vk_block *b = list ? s->spare : s->blocks, *next; b; b = next) {
                next = b->next;
                destroy_block(s, b);
            }
        td_vk.vkDestroyDevice(s->device, NULL);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static tide_device *new_tide_device(vk_state *s, const char *name);

tide_device *td_vk_open_device(VkPhysicalDevice phys, int index, const char *name, char *why,
                               size_t n)
{
    vk_state *s = td_calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    s->phys = phys;
    s->index = index;
    pthread_mutexattr_t ma; /* recursive: the CPU fallback makes and frees tensors inside run */
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    read_limits(s);
    if (pick_queue_family(s, why, n) < 0 || create_logical_device(s, why, n) < 0 ||
        choose_memory(s, why, n) < 0 || create_batch(s, why, n) < 0 ||
        create_pipeline_layout(s, why, n) < 0 || create_param_buffer(s, why, n) < 0) {
        destroy_state(s);
        return NULL;
    }
    tide_device *dev = new_tide_device(s, name);
    if (!dev) {
        snprintf(why, n, "out of memory");
        destroy_state(s);
        return NULL;
    }
    td_log("vulkan", "%s is device %d: %s (%s), Vulkan %u.%u, maxStorageBufferRange %zu, "
           "maxMemoryAllocationSize %zu, %s memory", name, index, s->props.deviceName,
           td_vk_type_name(s->props.deviceType), VK_VERSION_MAJOR(s->props.apiVersion),
           VK_VERSION_MINOR(s->props.apiVersion), s->max_binding, s->max_alloc,
           s->mapped ? "mapped" : "staged");
    return dev;
}

void td_vk_close_device(tide_device *dev)
{
    vk_state *s = dev->state;
    if (!s)
        return;
    dev->state = NULL;
    destroy_state(s);
}

/* ---- memory ---------------------------------------------------------------------------------- */

static vk_block *new_block(vk_state *s, size_t size, bool dedicated)
{
    vk_block *b = td_calloc(1, sizeof *b);
    vk_range *r = td_malloc(sizeof *r);
    if (!b || !r) {
        free(b);
        free(r);
        return NULL;
    }
    if (make_buffer(s, size, s->mem_type, s->mapped, &b->buffer, &b->memory, &b->map) < 0) {
        free(b);
        free(r);
        return NULL;
    }
    b->size = size;
    b->dedicated = dedicated;
    *r = (vk_range){0, size, NULL};
    b->free = r;
    b->next = s->blocks;
    s->blocks = b;
    return b;
}

/* First fit in one block; the range is cut from the free list. */
static bool take_range(vk_block *b, size_t size, size_t *offset)
{
    for (vk_range **p = &b->free; *p; p = &(*p)->next) {
        vk_range *r = *p;
        if (r->size < size)
            continue;
        *offset = r->offset;
        r->offset += size;
        r->size -= size;
        if (r->size == 0) {
            *p = r->next;
            free(r);
        }
        b->used += size;
        return true;
    }
    return false;
}

static void give_range(vk_block *b, size_t offset, size_t size)
{
    b->used -= size;
    vk_range **p = &b->free, *prev = NULL;
    while (*p && (*p)->offset < offset) {
        prev = *p;
        p = &(*p)->next;
    }
    vk_range *next = *p;
    if (prev && prev->offset + prev->size == offset) {
        prev->size += size;
        if (next && prev->offset + prev->size == next->offset) {
            prev->size += next->size;
            prev->next = next->next;
            free(next);
        }
        return;
    }
    if (next && offset + size == next->offset) {
        next->offset = offset;
        next->size += size;
        return;
    }
    vk_range *r = td_malloc(sizeof *r);
    if (!r)
        return; /* the range is lost to this block until exit: no worse than a leak */
    *r = (vk_range){offset, size, next};
    *p = r;
}

void *td_vk_alloc_locked(vk_state *s, size_t nbytes)
{
    vk_buf *h = td_malloc(sizeof *h);
    if (!h)
        return NULL;
    size_t size = (nbytes + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    if (size == 0)
        size = BLOCK_ALIGN;
    if (size > s->max_alloc) {
        td_error("vulkan: %zu bytes is more than %s can allocate at once "
                 "(maxMemoryAllocationSize %zu)", nbytes, s->props.deviceName, s->max_alloc);
        free(h);
        return NULL;
    }
    vk_block *b = NULL;
    size_t off = 0;
    if (size > s->block_size / 2) {
        /* a spare dedicated block of about this size first: no new memory, no page faults */
        for (vk_block **p = &s->spare; *p; p = &(*p)->next)
            if ((*p)->size >= size && (*p)->size - size <= size / 4) {
                b = *p;
                *p = b->next;
                s->spare_bytes -= b->size;
                b->next = s->blocks;
                s->blocks = b;
                break;
            }
        if (!b)
            b = new_block(s, size, true);
        if (b && !take_range(b, size, &off))
            b = NULL;
    } else {
        for (b = s->blocks; b; b = b->next)
            if (!b->dedicated && take_range(b, size, &off))
                break;
        if (!b) {
            b = new_block(s, s->block_size, false);
            if (b && !take_range(b, size, &off))
                b = NULL;
        }
    }
    if (!b) {
        free(h);
        return NULL;
    }
    h->block = b;
    h->offset = off;
    h->size = size;
    s->bytes_in_use += size;
    return h;
}

/* A freed range may be handed out again at once: commands already recorded that use it come
 * before any later command in the same stream (every command ends with a full barrier), and a
 * host write into mapped memory first waits for the batch (td_vk_write_locked). */
#define SPARE_LIMIT ((size_t)512 << 20)

static void destroy_block(vk_state *s, vk_block *b)
{
    destroy_buffer(s, b->buffer, b->memory);
    for (vk_range *r = b->free, *rn; r; r = rn) {
        rn = r->next;
        free(r);
    }
    free(b);
}

void td_vk_free_locked(vk_state *s, void *buffer)
{
    vk_buf *h = buffer;
    if (!h)
        return;
    vk_block *b = h->block;
    give_range(b, h->offset, h->size);
    s->bytes_in_use -= h->size;
    free(h);
    if (b->dedicated && b->used == 0) {
        for (vk_block **p = &s->blocks; *p; p = &(*p)->next)
            if (*p == b) {
                *p = b->next;
                break;
            }
        /* kept for the next tensor of its size while the spares stay under SPARE_LIMIT; the
         * oldest spares go first (they are at the end of the list) */
        b->next = s->spare;
        s->spare = b;
        s->spare_bytes += b->size;
        while (s->spare_bytes > SPARE_LIMIT) {
            vk_block **last = &s->spare;
            while ((*last)->next)
                last = &(*last)->next;
            vk_block *old = *last;
            *last = NULL;
            s->spare_bytes -= old->size;
            if (s->recording)
                td_vk_flush(s); /* the memory goes away: nothing queued may still use it */
            destroy_block(s, old);
        }
    }
}

/* ---- the batch ------------------------------------------------------------------------------- */

typedef struct vk_staging {
    VkBuffer buffer;
    VkDeviceMemory memory;
    struct vk_staging *next;
} vk_staging;

int td_vk_begin(vk_state *s)
{
    if (s->recording)
        return 0;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = td_vk.vkBeginCommandBuffer(s->cmd, &bi);
    if (r != VK_SUCCESS)
        return td_error("vulkan: vkBeginCommandBuffer failed: %s", td_vk_result_str(r));
    s->recording = true;
    s->ndispatch = 0;
    return 0;
}

void td_vk_barrier(vk_state *s)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT};
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                  VK_PIPELINE_STAGE_TRANSFER_BIT;
    td_vk.vkCmdPipelineBarrier(s->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

int td_vk_flush(vk_state *s)
{
    if (!s->recording)
        return 0;
    s->recording = false;
    int rc = 0;
    VkResult r = td_vk.vkEndCommandBuffer(s->cmd);
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &s->cmd};
        r = td_vk.vkQueueSubmit(s->queue, 1, &si, s->fence);
        if (r == VK_SUCCESS) {
            r = td_vk.vkWaitForFences(s->device, 1, &s->fence, VK_TRUE, UINT64_MAX);
            td_vk.vkResetFences(s->device, 1, &s->fence);
        }
        s->submits++;
    }
    if (r != VK_SUCCESS)
        rc = td_error("vulkan: submitting %d queued commands failed: %s", s->ndispatch,
                      td_vk_result_str(r));
    td_vk.vkResetCommandPool(s->device, s->cmd_pool, 0);
    td_vk.vkResetDescriptorPool(s->device, s->desc_pool, 0);
    s->desc_used = 0;
    s->param_used = 0;
    s->ndispatch = 0;
    for (vk_staging *st = s->staging, *next; st; st = next) {
        next = st->next;
        destroy_buffer(s, st->buffer, st->memory);
        free(st);
    }
    s->staging = NULL;
    return rc;
}

/* ---- host transfers ---------------------------------------------------------------------- */

/* A host-visible buffer of n bytes that lives until the batch has run. */
static vk_staging *staging(vk_state *s, size_t n, char **map)
{
    vk_staging *st = td_malloc(sizeof *st);
    if (!st) {
        td_error("vulkan: out of memory for a staging buffer");
        return NULL;
    }
    if (make_buffer(s, n ? n : 4, s->staging_type, true, &st->buffer, &st->memory, map) < 0) {
        free(st);
        return NULL;
    }
    st->next = s->staging;
    s->staging = st;
    return st;
}

int td_vk_write_locked(vk_state *s, vk_buf *b, size_t offset, const void *src, size_t n)
{
    if (!n)
        return 0;
    size_t dst = b->offset + offset;
    /* Small writes go into the command stream, ordered with the dispatches around them: a
     * scalar operand costs no wait. */
    if (n <= 65536 && n % 4 == 0 && dst % 4 == 0) {
        if (td_vk_begin(s) < 0)
            return -1;
        td_vk.vkCmdUpdateBuffer(s->cmd, b->block->buffer, dst, n, src);
        td_vk_barrier(s);
        s->ndispatch++;
        return 0;
    }
    if (b->block->map) {
        if (td_vk_flush(s) < 0) /* queued commands may still read the old contents */
            return -1;
        memcpy(b->block->map + dst, src, n);
        return 0;
    }
    char *map;
    if (td_vk_begin(s) < 0)
        return -1;
    vk_staging *st = staging(s, n, &map);
    if (!st)
        return -1;
    memcpy(map, src, n);
    VkBufferCopy c = {0, dst, n};
    td_vk.vkCmdCopyBuffer(s->cmd, st->buffer, b->block->buffer, 1, &c);
    td_vk_barrier(s);
    s->ndispatch++;
    return 0;
}

int td_vk_read_locked(vk_state *s, const vk_buf *b, size_t offset, void *dst, size_t n)
{
    if (!n)
        return 0;
    size_t src = b->offset + offset;
    if (b->block->map) {
        if (td_vk_flush(s) < 0)
            return -1;
        memcpy(dst, b->block->map + src, n);
        return 0;
    }
    char *map;
    if (td_vk_begin(s) < 0)
        return -1;
    vk_staging *st = staging(s, n, &map);
    if (!st)
        return -1;
    VkBufferCopy c = {src, 0, n};
    td_vk.vkCmdCopyBuffer(s->cmd, b->block->buffer, st->buffer, 1, &c);
    td_vk_barrier(s);
    s->ndispatch++;
    s->staging = st->next; /* take it off the list so the flush does not free it yet */
    int rc = td_vk_flush(s);
    if (rc == 0)
        memcpy(dst, map, n);
    destroy_buffer(s, st->buffer, st->memory);
    free(st);
    return rc;
}

/* ---- dispatches ------------------------------------------------------------------------------ */

int td_vk_shader_index(const char *name)
{
    for (int i = 0; i < td_vk_num_shaders; i++)
        if (strcmp(td_vk_shaders[i].name, name) == 0)
            return i;
    return -1;
}

static VkPipeline pipeline(vk_state *s, int shader, uint32_t spec)
{
    VkPipeline *slot = &s->pipelines[(size_t)shader * VK_MAX_SPEC + spec];
    if (*slot)
        return *slot;
    const vk_shader *sh = &td_vk_shaders[shader];
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sh->size,
                                   .pCode = sh->code};
    VkShaderModule mod;
    VkResult r = td_vk.vkCreateShaderModule(s->device, &mi, NULL, &mod);
    if (r != VK_SUCCESS) {
        td_error("vulkan: shader %s: vkCreateShaderModule failed: %s", sh->name,
                 td_vk_result_str(r));
        return VK_NULL_HANDLE;
    }
    VkSpecializationMapEntry entry = {0, 0, sizeof(uint32_t)};
    VkSpecializationInfo si = {1, &entry, sizeof spec, &spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod,
                  .pName = "main",
                  .pSpecializationInfo = &si},
        .layout = s->pipe_layout};
    r = td_vk.vkCreateComputePipelines(s->device, s->pipe_cache, 1, &ci, NULL, slot);
    td_vk.vkDestroyShaderModule(s->device, mod, NULL);
    if (r != VK_SUCCESS) {
        *slot = VK_NULL_HANDLE;
        td_error("vulkan: shader %s: vkCreateComputePipelines failed: %s", sh->name,
                 td_vk_result_str(r));
    }
    return *slot;
}

VkPipeline td_vk_make_pipeline(vk_state *s, const uint32_t *code, size_t size, const char *what)
{
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = size,
                                   .pCode = code};
    VkShaderModule mod;
    VkResult r = td_vk.vkCreateShaderModule(s->device, &mi, NULL, &mod);
    if (r != VK_SUCCESS) {
        td_error("vulkan: %s: vkCreateShaderModule failed: %s", what, td_vk_result_str(r));
        return VK_NULL_HANDLE;
    }
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod,
                  .pName = "main"},
        .layout = s->pipe_layout};
    VkPipeline pipe = VK_NULL_HANDLE;
    r = td_vk.vkCreateComputePipelines(s->device, s->pipe_cache, 1, &ci, NULL, &pipe);
    td_vk.vkDestroyShaderModule(s->device, mod, NULL);
    if (r != VK_SUCCESS) {
        td_error("vulkan: %s: vkCreateComputePipelines failed: %s", what, td_vk_result_str(r));
        return VK_NULL_HANDLE;
    }
    return pipe;
}

static int dispatch_pipe3(vk_state *s, VkPipeline pipe, const void *params, size_t nparams,
                          const vk_binding *b, int nb, uint32_t gx, uint32_t gy, uint32_t gz);

int td_vk_dispatch3(vk_state *s, int shader, uint32_t spec, const void *params, size_t nparams,
                    const vk_binding *b, int nb, uint32_t gx, uint32_t gy, uint32_t gz)
{
    if (shader < 0 || spec >= VK_MAX_SPEC)
        return td_error("vulkan: internal error: unknown shader");
    VkPipeline pipe = pipeline(s, shader, spec);
    if (!pipe)
        return -1;
    return dispatch_pipe3(s, pipe, params, nparams, b, nb, gx, gy, gz);
}

static int dispatch_pipe3(vk_state *s, VkPipeline pipe, const void *params, size_t nparams,
                          const vk_binding *b, int nb, uint32_t gx, uint32_t gy, uint32_t gz)
{
    size_t slot = s->param_cap / (size_t)s->desc_cap;
    if (s->desc_used >= s->desc_cap || s->param_used + slot > s->param_cap)
        if (td_vk_flush(s) < 0)
            return -1;
    if (td_vk_begin(s) < 0)
        return -1;
    size_t poff = s->param_used;
    memcpy(s->param_map + poff, params, nparams);
    s->param_used += slot;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = s->desc_pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &s->set_layout};
    VkDescriptorSet set;
    VkResult r = td_vk.vkAllocateDescriptorSets(s->device, &ai, &set);
    if (r != VK_SUCCESS)
        return td_error("vulkan: vkAllocateDescriptorSets failed: %s", td_vk_result_str(r));
    s->desc_used++;
    VkDescriptorBufferInfo info[VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[VK_MAX_BINDINGS];
    info[0] = (VkDescriptorBufferInfo){s->param_buf, poff, slot};
    for (int i = 1; i < VK_MAX_BINDINGS; i++)
        info[i] = i <= nb ? (VkDescriptorBufferInfo){b[i - 1].buffer, b[i - 1].offset,
                                                     b[i - 1].range}
                          : info[0]; /* unused bindings point at the parameters */
    for (int i = 0; i < VK_MAX_BINDINGS; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = set,
                                      .dstBinding = (uint32_t)i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &info[i]};
    td_vk.vkUpdateDescriptorSets(s->device, VK_MAX_BINDINGS, w, 0, NULL);
    td_vk.vkCmdBindPipeline(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    td_vk.vkCmdBindDescriptorSets(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, s->pipe_layout, 0, 1,
                                  &set, 0, NULL);
    td_vk.vkCmdDispatch(s->cmd, gx, gy, gz);
    td_vk_barrier(s);
    s->ndispatch++;
    s->dispatches++;
    return 0;
}

static int spread(vk_state *s, uint64_t groups, uint32_t g[3])
{
    uint64_t gx = groups < s->max_groups[0] ? groups : s->max_groups[0];
    uint64_t rest = (groups + gx - 1) / gx;
    uint64_t gy = rest < s->max_groups[1] ? rest : s->max_groups[1];
    uint64_t gz = (rest + gy - 1) / gy;
    if (gz > s->max_groups[2])
        return td_error("vulkan: %llu workgroups are more than one dispatch can hold",
                        (unsigned long long)groups);
    g[0] = (uint32_t)gx;
    g[1] = (uint32_t)gy;
    g[2] = (uint32_t)gz;
    return 0;
}

int td_vk_dispatch_pipe(vk_state *s, VkPipeline pipe, const void *params, size_t nparams,
                        const vk_binding *b, int nb, uint64_t groups)
{
    uint32_t g[3] = {0, 0, 0};
    if (groups == 0)
        return 0;
    if (spread(s, groups, g) < 0)
        return -1;
    return dispatch_pipe3(s, pipe, params, nparams, b, nb, g[0], g[1], g[2]);
}

int td_vk_dispatch(vk_state *s, int shader, uint32_t spec, const void *params, size_t nparams,
                   const vk_binding *b, int nb, uint64_t groups)
{
    if (groups == 0)
        return 0;
    if (shader < 0 || spec >= VK_MAX_SPEC)
        return td_error("vulkan: internal error: unknown shader");
    VkPipeline pipe = pipeline(s, shader, spec);
    if (!pipe)
        return -1;
    /* spread over x, then y, then z; the shaders read their group index back linearly */
    return td_vk_dispatch_pipe(s, pipe, params, nparams, b, nb, groups);
}

/* ---- the tide_device ------------------------------------------------------------------------- */

static void *vk_alloc(tide_device *dev, size_t nbytes)
{
    vk_state *s = dev->state;
    if (!s) {
        td_error("vulkan: %s has been shut down", dev->name);
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    void *p = td_vk_alloc_locked(s, nbytes);
    pthread_mutex_unlock(&s->lock);
    return p;
}

static void vk_free(tide_device *dev, void *buffer, size_t nbytes)
{
    (void)nbytes;
    vk_state *s = dev->state;
    if (!s) { /* after the device's teardown at exit: the memory is already gone */
        free(buffer);
        return;
    }
    pthread_mutex_lock(&s->lock);
    td_vk_free_locked(s, buffer);
    pthread_mutex_unlock(&s->lock);
}

static int vk_write(tide_device *dev, void *buffer, size_t offset, const void *src, size_t n)
{
    vk_state *s = dev->state;
    if (!s)
        return td_error("vulkan: %s has been shut down", dev->name);
    pthread_mutex_lock(&s->lock);
    int rc = td_vk_write_locked(s, buffer, offset, src, n);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int vk_read(tide_device *dev, const void *buffer, size_t offset, void *dst, size_t n)
{
    vk_state *s = dev->state;
    if (!s)
        return td_error("vulkan: %s has been shut down", dev->name);
    pthread_mutex_lock(&s->lock);
    int rc = td_vk_read_locked(s, buffer, offset, dst, n);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void *vk_host_ptr(tide_device *dev, void *buffer)
{
    (void)dev;
    (void)buffer;
    return NULL; /* device memory is never handed to the host directly */
}

static int vk_synchronize(tide_device *dev)
{
    vk_state *s = dev->state;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    int rc = td_vk_flush(s);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* The tide_device of s, named name (the registry's name for it: "vulkan" or "vulkan:N"). */
static tide_device *new_tide_device(vk_state *s, const char *name)
{
    tide_device *d = td_calloc(1, sizeof *d);
    char *copy = td_strdup(name);
    if (!d || !copy) {
        free(d);
        free(copy);
        return NULL;
    }
    *d = (tide_device){
        .name = copy,
        .alloc = vk_alloc,
        .free = vk_free,
        .write = vk_write,
        .read = vk_read,
        .host_ptr = vk_host_ptr,
        .run = td_vk_run,
        .synchronize = vk_synchronize,
        .state = s,
        .jit_compile = td_vk_jit_compile,
        .jit_run = td_vk_jit_run,
        .jit_free = td_vk_jit_free,
        .jit_runtime_sizes = true,
    };
    return d;
}

void td_vk_add_stats(tide_device *dev, uint64_t counts[3])
{
    vk_state *s = dev->state;
    if (!s)
        return;
    counts[0] += s->submits;
    counts[1] += s->dispatches;
    counts[2] += s->fallbacks;
}
