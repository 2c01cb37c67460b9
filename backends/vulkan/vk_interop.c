// SPDX-License-Identifier: MIT
/* The application's own Vulkan device (include/flashattn/vulkan.h): a context on its VkDevice and
 * queue, found among the backend's devices by its device UUID (the application's instance is
 * not the backend's, so handles differ), and buffers over its VkBuffers. The application keeps
 * ownership of all of them: vk_device.c and vk_memory.c skip destroying what is adopted. */
#include "vk_internal.h"

#include "flashattn/vulkan.h"

#include <stdlib.h>
#include <string.h>

/* The index of the backend's device that is the application's physical device, or -1. Its
 * properties are read through the application's instance. */
static int find_device(const fa_vulkan_objects *app)
{
    const VkInstance instance = (VkInstance)(uintptr_t)app->instance;
    const PFN_vkGetPhysicalDeviceProperties2 props2_fn =
        (PFN_vkGetPhysicalDeviceProperties2)vkGetInstanceProcAddr(instance,
                                                                  "vkGetPhysicalDeviceProperties2");
    if (!props2_fn)
        return -1;
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &id};
    props2_fn((VkPhysicalDevice)(uintptr_t)app->physical_device, &props);
    for (int i = 0; i < fa_vk.device_count; i++)
        if (!memcmp(fa_vk.devices[i].device_uuid, id.deviceUUID, VK_UUID_SIZE))
            return i;
    return -1;
}

fa_status fa_vk_context_adopt(fa_context *ctx, const void *app_objects, int *index)
{
    const fa_vulkan_objects *app = app_objects;
    const int i = find_device(app);
    if (i < 0)
        return fa_fail(ctx, FA_ERROR_INVALID_DEVICE,
                       "vulkan: the application's physical device is not one the Vulkan backend "
                       "lists (matched by device UUID)");
    const fa_vk_physical *p = &fa_vk.devices[i];
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p->handle, &n, NULL);
    VkQueueFamilyProperties families[32];
    n = n > 32 ? 32 : n;
    vkGetPhysicalDeviceQueueFamilyProperties(p->handle, &n, families);
    if (app->queue_family >= n || !(families[app->queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "vulkan: queue family %u of %s has no compute queues", app->queue_family,
                       p->info.name);
    if (app->queue_index >= families[app->queue_family].queueCount)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "vulkan: queue family %u has %u queues; index %u does not exist",
                       app->queue_family, families[app->queue_family].queueCount, app->queue_index);
    if (app->storage_buffer_16bit_access && !p->storage16)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "vulkan: storage_buffer_16bit_access is set, but %s does not have "
                       "storageBuffer16BitAccess",
                       p->info.name);
    fa_vk_state *st = calloc(1, sizeof *st);
    if (!st)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot allocate the context");
    st->phys = p;
    st->matrix_caps = p->matrix;
    st->adopted = true;
    st->device = (VkDevice)(uintptr_t)app->device;
    st->queue_family = app->queue_family;
    st->storage16 = app->storage_buffer_16bit_access;
    ctx->backend_state = st;
    volkLoadDeviceTable(&st->vk, st->device);
    st->vk.vkGetDeviceQueue(st->device, st->queue_family, app->queue_index, &st->queue);
    vkGetPhysicalDeviceMemoryProperties(p->handle, &st->memory_props);
    fa_status s = fa_vk_context_open(ctx);
    if (s == FA_OK)
        *index = i;
    return s;
}

fa_status fa_vk_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                            void **handle)
{
    const fa_vk_state *st = fa_vk_state_of(ctx);
    if (!st->adopted)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "fa_buffer_wrap_vulkan: the context's device is the library's own; open it "
                       "with fa_context_create_vulkan on the device the VkBuffer belongs to");
    (void)offset; /* always 0: the runtime adds it to the views (wrap_offset_in_views) */
    fa_vk_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot allocate a buffer record");
    *buf = (fa_vk_buffer){.buffer = (VkBuffer)(uintptr_t)native, .size = size, .wrapped = true};
    *handle = buf;
    return FA_OK;
}
