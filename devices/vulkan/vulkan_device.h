/*
 * vulkan_device.h — what devices/vulkan offers beyond core/device.h and the public
 * tide_vulkan_* functions (core/tide.h): counters for tests and benchmarks.
 */
#ifndef TIDE_VULKAN_DEVICE_H
#define TIDE_VULKAN_DEVICE_H

#include <stdint.h>

/* Summed over the Vulkan devices opened, since start: command-buffer submissions, shader
 * dispatches, ops run on the CPU through host copies. */
void td_vulkan_stats(uint64_t *submits, uint64_t *dispatches, uint64_t *fallbacks);

#endif
