// SPDX-License-Identifier: MIT
/* Buffers: device-local storage buffers for tensors and the workspace, one host-visible
 * staging buffer per context through which writes and reads pass in chunks, and copies between
 * buffers on the device. */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

enum { STAGING_BYTES = 16u << 20 };

/* The first memory type allowed by `bits` with all of `want`, else -1. */
static int find_memory_type(const VkPhysicalDeviceMemoryProperties *props, uint32_t bits,
                            VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < props->memoryTypeCount; i++)
        if ((bits & (1u << i)) && (props->memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

fa_status fa_vk_buffer_create(fa_context *ctx, VkDeviceSize size, bool staging, fa_vk_buffer *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    memset(out, 0, sizeof *out);
    size = (size + 15) & ~(VkDeviceSize)15; /* never 0; whole 32-bit words for word access */
    if (!size)
        size = 16;
    const VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 (staging ? 0 : VK_BUFFER_USAGE_STORAGE_BUFFER_BIT),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = st->vk.vkCreateBuffer(st->device, &info, NULL, &out->buffer);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    st->vk.vkGetBufferMemoryRequirements(st->device, out->buffer, &req);
    int type;
    if (staging) {
        const VkMemoryPropertyFlags visible =
            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        type = find_memory_type(&st->memory_props, req.memoryTypeBits,
                                visible | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        if (type < 0)
            type = find_memory_type(&st->memory_props, req.memoryTypeBits, visible);
    } else {
        type = find_memory_type(&st->memory_props, req.memoryTypeBits,
                                VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        if (type < 0)
            type = find_memory_type(&st->memory_props, req.memoryTypeBits, 0);
    }
    if (type < 0) {
        fa_vk_buffer_destroy(st, out);
        return fa_fail(ctx, FA_ERROR_DEVICE, "vulkan: no memory type for a %s buffer",
                       staging ? "staging" : "storage");
    }
    const VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    r = st->vk.vkAllocateMemory(st->device, &alloc, NULL, &out->memory);
    if (r == VK_SUCCESS)
        r = st->vk.vkBindBufferMemory(st->device, out->buffer, out->memory, 0);
    if (r == VK_SUCCESS && staging)
        r = st->vk.vkMapMemory(st->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped);
    if (r != VK_SUCCESS) {
        fa_vk_buffer_destroy(st, out);
        return fa_vk_fail(
            ctx, r, staging ? "allocating the staging buffer" : "vkAllocateMemory (device buffer)");
    }
    out->size = size;
    return FA_OK;
}

void fa_vk_buffer_destroy(fa_vk_state *st, fa_vk_buffer *buf)
{
    if (buf->buffer && !buf->wrapped)
        st->vk.vkDestroyBuffer(st->device, buf->buffer, NULL);
    if (buf->memory)
        st->vk.vkFreeMemory(st->device, buf->memory, NULL); /* unmaps too */
    memset(buf, 0, sizeof *buf);
}

fa_status fa_vk_buffer_alloc(fa_context *ctx, size_t size, void **handle)
{
    fa_vk_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot allocate a buffer record");
    fa_status s = fa_vk_buffer_create(ctx, size, false, buf);
    if (s == FA_OK)
        s = fa_vk_check_validation(ctx);
    if (s != FA_OK) {
        fa_vk_buffer_destroy(fa_vk_state_of(ctx), buf);
        free(buf);
        return s;
    }
    *handle = buf;
    return FA_OK;
}

void fa_vk_buffer_free(fa_context *ctx, void *handle)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (!handle)
        return;
    if (fa_vk_busy(st) && !ctx->lost)
        fa_vk_wait(ctx);
    fa_vk_buffer_destroy(st, handle);
    free(handle);
}

static fa_status ensure_staging(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    return st->staging.buffer ? FA_OK : fa_vk_buffer_create(ctx, STAGING_BYTES, true, &st->staging);
}

/* One chunk: host -> staging -> buffer, or buffer -> staging -> host; synchronous. */
static fa_status copy_chunk(fa_context *ctx, VkBuffer buffer, size_t offset, void *host,
                            size_t size, bool to_device)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_status s = fa_vk_begin(ctx);
    if (s != FA_OK)
        return s;
    if (to_device)
        memcpy(st->staging.mapped, host, size);
    const VkBufferCopy region = {
        .srcOffset = to_device ? 0 : offset,
        .dstOffset = to_device ? offset : 0,
        .size = size,
    };
    if (to_device) {
        st->vk.vkCmdCopyBuffer(st->cmd, st->staging.buffer, buffer, 1, &region);
    } else {
        st->vk.vkCmdCopyBuffer(st->cmd, buffer, st->staging.buffer, 1, &region);
        const VkMemoryBarrier to_host = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
            .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
        };
        st->vk.vkCmdPipelineBarrier(st->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
    }
    s = fa_vk_submit(ctx, true);
    if (s == FA_OK && !to_device)
        memcpy(host, st->staging.mapped, size);
    return s;
}

static fa_status copy(fa_context *ctx, void *handle, size_t offset, void *host, size_t size,
                      bool to_device)
{
    fa_vk_buffer *buf = handle;
    fa_status s = ensure_staging(ctx);
    for (size_t done = 0; s == FA_OK && done < size;) {
        size_t n = size - done < STAGING_BYTES ? size - done : STAGING_BYTES;
        s = copy_chunk(ctx, buf->buffer, offset + done, (char *)host + done, n, to_device);
        done += n;
    }
    return s;
}

fa_status fa_vk_buffer_write(fa_context *ctx, void *handle, size_t offset, const void *src,
                             size_t size)
{
    return copy(ctx, handle, offset, (void *)src, size, true);
}

fa_status fa_vk_buffer_read(fa_context *ctx, void *handle, size_t offset, void *dst, size_t size)
{
    return copy(ctx, handle, offset, dst, size, false);
}

fa_status fa_vk_copy_regions(fa_context *ctx, void *src, void *dst, const fa_copy_region *regions,
                             size_t n)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (n > UINT32_MAX)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE, "vulkan: %zu copies in one command", n);
    VkBufferCopy *copies = malloc(n * sizeof *copies);
    if (!copies)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot list %zu copies", n);
    for (size_t i = 0; i < n; i++)
        copies[i] = (VkBufferCopy){regions[i].src_offset, regions[i].dst_offset, regions[i].bytes};
    /* fa_vk_begin orders it after earlier work; the next recording's barrier, before later. */
    fa_status s = fa_vk_begin(ctx);
    if (s == FA_OK)
        st->vk.vkCmdCopyBuffer(st->cmd, ((fa_vk_buffer *)src)->buffer,
                               ((fa_vk_buffer *)dst)->buffer, (uint32_t)n, copies);
    free(copies);
    return s == FA_OK ? fa_vk_finish(ctx, FA_OK, false) : s;
}

/* Grows *buf to at least `size` bytes (waits first; tracked); *fresh: it is a new buffer. */
static fa_status grow(fa_context *ctx, fa_vk_buffer *buf, VkDeviceSize size, bool *fresh)
{
    *fresh = false;
    if (buf->buffer && buf->size >= size)
        return FA_OK;
    fa_status s = fa_vk_wait(ctx);
    if (s != FA_OK)
        return s;
    fa_vk_workspace_release(ctx, buf);
    s = fa_vk_buffer_create(ctx, size, false, buf);
    if (s == FA_OK) {
        fa_workspace_track(ctx, (int64_t)buf->size);
        *fresh = true;
    }
    return s;
}

fa_status fa_vk_workspace(fa_context *ctx, VkDeviceSize size)
{
    bool fresh;
    return grow(ctx, &fa_vk_state_of(ctx)->workspace, size, &fresh);
}

fa_status fa_vk_decode_workspace(fa_context *ctx, VkDeviceSize size, bool *fresh)
{
    return grow(ctx, &fa_vk_state_of(ctx)->decode_workspace, size, fresh);
}

void fa_vk_workspace_release(fa_context *ctx, fa_vk_buffer *buf)
{
    if (!buf->buffer)
        return;
    fa_workspace_track(ctx, -(int64_t)buf->size);
    fa_vk_buffer_destroy(fa_vk_state_of(ctx), buf);
}
