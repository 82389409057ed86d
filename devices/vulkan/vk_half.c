/*
 * vk_half.c — float16 and bfloat16 on the Vulkan device. The dispatcher computes every op on
 * half tensors in float32 between casts (ops/dispatch.c), so the device sees them only in cast,
 * copy and fill. Those run in eltwise16.comp, which reads and writes 16-bit elements through
 * 16-bit storage buffers (the device feature storageBuffer16BitAccess, enabled here when the
 * device has it) and converts in integer arithmetic as core/half.h does, so the bits equal the
 * CPU's. Casts between a half dtype and int64, float64, uint8 or bool take two steps through a
 * float32 temporary, exactly the CPU's path (its casts to half go through float32, and float32
 * holds every half value). Without the feature these ops fall back to the CPU, saying why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

const void *td_vk_half_features(vk_state *s, VkPhysicalDevice16BitStorageFeatures *want)
{
    s->has16 = false;
    const char *off = getenv("TIDE_VULKAN_NO_16BIT"); /* tests of the fallback */
    if (off && *off && strcmp(off, "0") != 0) {
        snprintf(s->no16, sizeof s->no16, "TIDE_VULKAN_NO_16BIT turns 16-bit storage off");
        return NULL;
    }
    if (!td_vk.vkGetPhysicalDeviceFeatures2 || s->props.apiVersion < VK_API_VERSION_1_1) {
        snprintf(s->no16, sizeof s->no16, "a Vulkan 1.0 device: no 16-bit storage buffers");
        return NULL;
    }
    VkPhysicalDevice16BitStorageFeatures have = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &have};
    td_vk.vkGetPhysicalDeviceFeatures2(s->phys, &f2);
    if (!have.storageBuffer16BitAccess) {
        snprintf(s->no16, sizeof s->no16, "the device has no storageBuffer16BitAccess");
        return NULL;
    }
    *want = (VkPhysicalDevice16BitStorageFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE};
    s->has16 = true;
    return want;
}

bool td_vk_half_involved(const tide_tensor *out, tide_tensor *const *in, int nin)
{
    return td_dtype_is_half(out->dtype) || (nin > 0 && td_dtype_is_half(in[0]->dtype));
}

/* The dtypes eltwise16 reads besides the half ones, and those it writes. */
static bool shader_reads(int dt)
{
    return dt == TIDE_FLOAT32 || dt == TIDE_INT32 || dt == TIDE_UINT8 || dt == TIDE_BOOL;
}
static bool shader_writes(int dt) { return dt == TIDE_FLOAT32 || dt == TIDE_INT32; }

/* out = cast(in) as in -> float32 -> out, through a contiguous temporary on the device. */
static int through_float32(vk_state *s, tide_tensor *out, tide_tensor *in)
{
    int64_t n = td_numel(out->ndim, out->shape);
    size_t bytes = (size_t)n * sizeof(float);
    if (bytes > s->max_binding)
        return td_vk_decline("a float32 temporary larger than one binding%s", "");
    vk_buf *b = td_vk_alloc_locked(s, bytes);
    if (!b)
        return td_error("vulkan: out of device memory for a %zu-byte temporary", bytes);
    tide_storage st = {.refcount = 1, .device = out->device, .buffer = b, .nbytes = bytes};
    tide_tensor tmp = {.refcount = 1, .dtype = TIDE_FLOAT32, .ndim = out->ndim,
                       .storage = &st, .device = out->device};
    memcpy(tmp.shape, out->shape, sizeof tmp.shape);
    td_contiguous_strides(out->ndim, out->shape, tmp.strides);
    tide_tensor *tp = &tmp;
    int rc = td_vk_eltwise(s, TIDE_OP_CAST, &tmp, &in, 1, NULL);
    if (rc == 1)
        rc = td_vk_eltwise(s, TIDE_OP_CAST, out, &tp, 1, NULL);
    /* a freed range may be reused at once: every recorded command ends with a full barrier */
    td_vk_free_locked(s, b);
    return rc;
}

int td_vk_half_plan(vk_state *s, tide_op op, tide_tensor *out, tide_tensor *const *in)
{
    if (op != TIDE_OP_CAST && op != TIDE_OP_COPY && op != TIDE_OP_FILL)
        return td_vk_decline("no %s shader for float16/bfloat16 (the dispatcher computes in "
                             "float32)", tide_op_name(op));
    if (!s->has16)
        return td_vk_decline("%s", s->no16);
    if (op == TIDE_OP_FILL || td_numel(out->ndim, out->shape) == 0)
        return -2;
    int from = in[0]->dtype, to = out->dtype;
    bool half_from = td_dtype_is_half(from), half_to = td_dtype_is_half(to);
    if ((half_from || shader_reads(from)) && (half_to || shader_writes(to)))
        return -2;
    int other = half_to ? from : to;
    if ((other == TIDE_INT64 || other == TIDE_FLOAT64) && !s->has64)
        return td_vk_decline("the device has no 64-bit shader arithmetic for %s",
                             tide_dtype_name((tide_dtype)other));
    return through_float32(s, out, in[0]);
}
