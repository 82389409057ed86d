/*
 * vk_instance.c — what all Vulkan devices of the process share: libvulkan loaded with dlopen,
 * one VkInstance, the list of physical devices and the default one; the provider the registry
 * (core/device.h) opens devices through, one tide_device per physical device ("vulkan" for
 * the default, "vulkan:N" for the others); and the public tide_vulkan_* functions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"
#include "vulkan_device.h"

td_vk_fns td_vk;

static pthread_once_t instance_once = PTHREAD_ONCE_INIT;
static struct {
    VkInstance instance;
    VkPhysicalDevice *phys;
    vk_device_info *info;
    int count;
    int chosen;             /* the index "vulkan" means; -1 when none */
    char why[512];          /* why there is no default device, when there is none */
    tide_device **opened;   /* per index, once opened */
    pthread_mutex_t lock;   /* guards opened */
} vk = {.chosen = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

const char *td_vk_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

/* Keeps every shared library loaded so far in memory for good. Called once the driver is in:
 * the loader unloads the driver at vkDestroyInstance, but drivers (Mesa's) leave atexit handlers
 * and allocations behind, and a leak checker must be able to name the module they belong to. */
static int pin_library(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (info->dlpi_name && info->dlpi_name[0]) {
        void *h = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (h)
            dlclose(h);
    }
    return 0;
}

/* libvulkan and its global entry points; NULL with vk.why set. The loader stays loaded: drivers
 * register atexit handlers of their own, and unloading them under those would crash at exit. */
static PFN_vkGetInstanceProcAddr load_loader(void)
{
    const char *libs[] = {"libvulkan.so.1", "libvulkan.so"};
    void *lib = NULL;
    for (int i = 0; i < 2 && !lib; i++)
        lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(vk.why, sizeof vk.why,
                 "the Vulkan loader libvulkan.so.1 could not be loaded (%s)", dlerror());
        return NULL;
    }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
    if (!gipa) {
        snprintf(vk.why, sizeof vk.why, "libvulkan.so.1 has no vkGetInstanceProcAddr");
        dlclose(lib);
        return NULL;
    }
#define LOAD_GLOBAL(name) td_vk.name = (PFN_##name)gipa(NULL, #name);
    TD_VK_GLOBAL_FNS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
    return gipa;
}

/* The instance (Vulkan 1.1 when the loader has it) and its entry points. Device-level entry
 * points are taken from the instance too: the loader's trampolines then dispatch each call to
 * the driver of the device (or command buffer) it names, so one table serves every device. */
static int create_instance(PFN_vkGetInstanceProcAddr gipa)
{
    uint32_t api = VK_API_VERSION_1_0;
    if (td_vk.vkEnumerateInstanceVersion)
        td_vk.vkEnumerateInstanceVersion(&api);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "tide",
                             .pEngineName = "tide",
                             .apiVersion = api >= VK_API_VERSION_1_1 ? VK_API_VERSION_1_1
                                                                     : VK_API_VERSION_1_0};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    VkResult r = td_vk.vkCreateInstance ? td_vk.vkCreateInstance(&ici, NULL, &vk.instance)
                                        : VK_ERROR_INITIALIZATION_FAILED;
    if (r != VK_SUCCESS) {
        vk.instance = VK_NULL_HANDLE;
        snprintf(vk.why, sizeof vk.why, "vkCreateInstance failed: %s%s", td_vk_result_str(r),
                 r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver (ICD) is installed; "
                                                     "on Debian: mesa-vulkan-drivers)"
                                                   : "");
        return -1;
    }
    dl_iterate_phdr(pin_library, NULL);
#define LOAD_INSTANCE(name) td_vk.name = (PFN_##name)gipa(vk.instance, #name);
    TD_VK_INSTANCE_FNS(LOAD_INSTANCE)
    TD_VK_DEVICE_FNS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
    return 0;
}

/* Whether physical device p has a queue family that computes. */
static bool has_compute(VkPhysicalDevice p)
{
    uint32_t nq = 0;
    td_vk.vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16)
        nq = 16;
    td_vk.vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, qf);
    for (uint32_t q = 0; q < nq; q++)
        if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT)
            return true;
    return false;
}

/* Fills vk.phys and vk.info. */
static int list_devices(void)
{
    uint32_t n = 0;
    VkResult r = td_vk.vkEnumeratePhysicalDevices(vk.instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(vk.why, sizeof vk.why, "no Vulkan device found (vkEnumeratePhysicalDevices: "
                 "%s, %u devices)", td_vk_result_str(r), n);
        return -1;
    }
    vk.phys = td_calloc(n, sizeof *vk.phys);
    vk.info = td_calloc(n, sizeof *vk.info);
    vk.opened = td_calloc(n, sizeof *vk.opened);
    if (!vk.phys || !vk.info || !vk.opened) {
        snprintf(vk.why, sizeof vk.why, "out of memory");
        return -1;
    }
    td_vk.vkEnumeratePhysicalDevices(vk.instance, &n, vk.phys);
    vk.count = (int)n;
    for (int i = 0; i < vk.count; i++) {
        VkPhysicalDeviceProperties p;
        td_vk.vkGetPhysicalDeviceProperties(vk.phys[i], &p);
        snprintf(vk.info[i].name, sizeof vk.info[i].name, "%s", p.deviceName);
        vk.info[i].type = p.deviceType;
        vk.info[i].api_version = p.apiVersion;
        vk.info[i].has_compute = has_compute(vk.phys[i]);
    }
    return 0;
}

/* The default device: TIDE_VULKAN_DEVICE=i, else a discrete GPU, then integrated, virtual, CPU. */
static void choose_default(void)
{
    const char *env = getenv("TIDE_VULKAN_DEVICE");
    if (env && *env) {
        char *end;
        long k = strtol(env, &end, 10);
        if (*end || k < 0 || k >= vk.count)
            snprintf(vk.why, sizeof vk.why,
                     "TIDE_VULKAN_DEVICE=%s is not a device index (there are %d: 0..%d)", env,
                     vk.count, vk.count - 1);
        else if (!vk.info[k].has_compute)
            snprintf(vk.why, sizeof vk.why, "TIDE_VULKAN_DEVICE=%ld names %s, which has no "
                     "compute queue", k, vk.info[k].name);
        else
            vk.chosen = (int)k;
        return;
    }
    for (int i = 0; i < vk.count; i++)
        if (vk.info[i].has_compute &&
            (vk.chosen < 0 || type_rank(vk.info[i].type) < type_rank(vk.info[vk.chosen].type)))
            vk.chosen = i;
    if (vk.chosen < 0)
        snprintf(vk.why, sizeof vk.why, "no Vulkan device has a compute queue");
}

static void at_exit(void)
{
    for (int i = 0; i < vk.count; i++)
        if (vk.opened[i])
            td_vk_close_device(vk.opened[i]); /* the tide_device stays: late frees reach it */
    if (vk.instance)
        td_vk.vkDestroyInstance(vk.instance, NULL);
    vk.instance = VK_NULL_HANDLE;
    td_vk_jit_shutdown();
    free(vk.phys);
    free(vk.info);
    vk.phys = NULL;
    vk.info = NULL;
    vk.count = 0;
}

static void instance_init(void)
{
    PFN_vkGetInstanceProcAddr gipa = load_loader();
    if (!gipa || create_instance(gipa) < 0)
        return;
    atexit(at_exit);
    if (list_devices() == 0)
        choose_default();
}

static int device_info(int i, char *name, size_t n, const char **type, bool *selected);

/* ---- the provider --------------------------------------------------------------------------- */

static int vk_count(void)
{
    pthread_once(&instance_once, instance_init);
    return vk.count;
}

static int vk_default_index(void)
{
    pthread_once(&instance_once, instance_init);
    return vk.chosen;
}

/* Also asked with no device present (count 0): it then says why. With no default (a bad
 * TIDE_VULKAN_DEVICE, no compute queue anywhere) no Vulkan device is used. */
static tide_device *vk_open(int index, char *why, size_t n)
{
    pthread_once(&instance_once, instance_init);
    if (vk.chosen < 0 || index < 0 || index >= vk.count) {
        snprintf(why, n, "%s", vk.why[0] ? vk.why : "there is no such Vulkan device");
        return NULL;
    }
    pthread_mutex_lock(&vk.lock);
    tide_device *d = vk.opened[index];
    if (!d) {
        char name[32];
        if (index == vk.chosen)
            snprintf(name, sizeof name, "vulkan");
        else
            snprintf(name, sizeof name, "vulkan:%d", index);
        d = vk.opened[index] = td_vk_open_device(vk.phys[index], index, name, why, n);
    }
    pthread_mutex_unlock(&vk.lock);
    return d;
}

static int vk_describe(int index, char *name, size_t n, const char **type)
{
    return device_info(index, name, n, type, NULL);
}

static const td_device_provider vk_provider = {.name = "vulkan",
                                               .count = vk_count,
                                               .open = vk_open,
                                               .describe = vk_describe,
                                               .default_index = vk_default_index};

void td_register_device_vulkan(void);
void td_register_device_vulkan(void) { td_device_register(&vk_provider); }

/* ---- what the public API asks --------------------------------------------------------------- */

static int device_info(int i, char *name, size_t n, const char **type, bool *selected)
{
    pthread_once(&instance_once, instance_init);
    if (i < 0 || i >= vk.count)
        return -1;
    if (name && n)
        snprintf(name, n, "%s", vk.info[i].name);
    if (type)
        *type = td_vk_type_name(vk.info[i].type);
    if (selected)
        *selected = i == vk.chosen;
    return 0;
}

void td_vulkan_stats(uint64_t *submits, uint64_t *dispatches, uint64_t *fallbacks)
{
    uint64_t c[3] = {0, 0, 0};
    pthread_mutex_lock(&vk.lock);
    for (int i = 0; i < vk.count; i++)
        if (vk.opened[i])
            td_vk_add_stats(vk.opened[i], c);
    pthread_mutex_unlock(&vk.lock);
    if (submits)
        *submits = c[0];
    if (dispatches)
        *dispatches = c[1];
    if (fallbacks)
        *fallbacks = c[2];
}

bool tide_vulkan_available(char *why, size_t n)
{
    char buf[512] = "";
    bool ok = vk_default_index() >= 0 && td_device_lookup("vulkan", buf, sizeof buf);
    if (why && n)
        snprintf(why, n, "%s", ok ? "" : vk.why[0] ? vk.why : buf);
    return ok;
}

int tide_vulkan_device_count(void) { return vk_count(); }

int tide_vulkan_device_info(int i, char *name, size_t n, const char **kind, bool *selected)
{
    if (device_info(i, name, n, kind, selected) < 0)
        return td_error("vulkan_device_info: no Vulkan device %d (there are %d)", i, vk_count());
    return 0;
}
