/*
 * vk_cache.c — what the Vulkan device keeps on disk between processes: the VkPipelineCache of
 * each physical device (by vendor and device id; the driver checks its own header and ignores
 * a file from another version) and the files the jit writes next to it (vk_jit.c: SPIR-V by
 * hash of the GLSL text). The folder is $TIDE_VULKAN_CACHE_DIR, else $XDG_CACHE_HOME/tide, else
 * ~/.cache/tide; a missing or unwritable folder only means nothing is kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk_internal.h"

/* $TIDE_VULKAN_CACHE_DIR (empty or "0": none), else $XDG_CACHE_HOME/tide, else ~/.cache/tide. */
int td_vk_cache_dir(char *dir, size_t n)
{
    const char *e = getenv("TIDE_VULKAN_CACHE_DIR");
    if (e)
        return *e && strcmp(e, "0") != 0 && snprintf(dir, n, "%s", e) < (int)n;
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x)
        return snprintf(dir, n, "%s/tide", x) < (int)n;
    if (h && *h)
        return snprintf(dir, n, "%s/.cache/tide", h) < (int)n;
    return 0;
}

static void make_dirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *q = p + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(p, 0755);
            *q = '/';
        }
    mkdir(p, 0755);
}

char *td_vk_cache_read(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && n < (1l << 28) && fseek(f, 0, SEEK_SET) == 0 && (data = td_malloc((size_t)n))) {
            if (fread(data, 1, (size_t)n, f) != (size_t)n) {
                free(data);
                data = NULL;
            } else {
                *size = (size_t)n;
            }
        }
    }
    fclose(f);
    return data;
}

/* Writes through a temporary file and a rename, so a concurrent reader never sees half. */
void td_vk_cache_write(const char *dir, const char *path, const void *data, size_t n)
{
    make_dirs(dir);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

static void cache_path(vk_state *s, char *path, size_t n, const char *dir)
{
    snprintf(path, n, "%s/vulkan_pipelines_%04x_%04x.bin", dir, s->props.vendorID,
             s->props.deviceID);
}

void td_vk_cache_open(vk_state *s)
{
    char dir[4096], path[4200];
    size_t n = 0;
    char *data = NULL;
    if (td_vk_cache_dir(dir, sizeof dir)) {
        cache_path(s, path, sizeof path, dir);
        data = td_vk_cache_read(path, &n);
    }
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = data ? n : 0,
                                    .pInitialData = data};
    /* a file from another driver version is ignored by the driver (its header says which) */
    if (td_vk.vkCreatePipelineCache(s->device, &ci, NULL, &s->pipe_cache) != VK_SUCCESS) {
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        if (td_vk.vkCreatePipelineCache(s->device, &ci, NULL, &s->pipe_cache) != VK_SUCCESS)
            s->pipe_cache = VK_NULL_HANDLE;
    }
    td_log("vulkan", "pipeline cache: %zu bytes from %s", data ? n : 0,
           data ? path : "nowhere (none yet, or TIDE_VULKAN_CACHE_DIR off)");
    free(data);
}

void td_vk_cache_close(vk_state *s)
{
    if (!s->pipe_cache)
        return;
    char dir[4096], path[4200];
    size_t n = 0;
    if (td_vk_cache_dir(dir, sizeof dir) &&
        td_vk.vkGetPipelineCacheData(s->device, s->pipe_cache, &n, NULL) == VK_SUCCESS && n) {
        void *data = td_malloc(n);
        if (data && td_vk.vkGetPipelineCacheData(s->device, s->pipe_cache, &n, data) ==
                        VK_SUCCESS) {
            cache_path(s, path, sizeof path, dir);
            td_vk_cache_write(dir, path, data, n);
        }
        free(data);
    }
    td_vk.vkDestroyPipelineCache(s->device, s->pipe_cache, NULL);
    s->pipe_cache = VK_NULL_HANDLE;
}
