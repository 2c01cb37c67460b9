// SPDX-License-Identifier: MIT
/* flashattn on an application's own Vulkan device: a context that records its work in its own
 * command buffers and submits them to the application's queue, and buffers over the
 * application's VkBuffers, so that attention runs on data the application already holds, with
 * no host copy. Handles pass as 64-bit values, so this header needs no Vulkan SDK.
 *
 * Ordering: each of the library's submissions begins with a memory barrier over all commands
 * before it in the queue and ends with one over all commands after it, so work the application
 * submitted to the same queue before a call is seen by it, and work it submits after sees its
 * results. Vulkan requires queue access to be externally synchronised: the application must not
 * submit to the queue from another thread while a flashattn call runs. fa_context_synchronize
 * waits for the library's own submissions only. */
#ifndef FLASHATTN_VULKAN_H
#define FLASHATTN_VULKAN_H

#include "../flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The application's Vulkan objects (Vulkan 1.1 or newer), and what it enabled on the device
 * that the library can use. None is retained or destroyed by the library; they must outlive the
 * fa_context. */
typedef struct fa_vulkan_objects {
    uint64_t instance;        /* VkInstance */
    uint64_t physical_device; /* VkPhysicalDevice of that instance */
    uint64_t device;          /* VkDevice created on it */
    uint32_t queue_family;    /* a queue family of the device with VK_QUEUE_COMPUTE_BIT */
    uint32_t queue_index;     /* a queue of that family the device was created with */
    /* The device was created with storageBuffer16BitAccess (VkPhysicalDevice16BitStorageFeatures
     * or VkPhysicalDeviceVulkan11Features): f16 and bf16 then use 16-bit buffers, else 32-bit
     * words (slower, same results). */
    bool storage_buffer_16bit_access;
    uint64_t reserved[4]; /* zero (ABI, flashattn.h) */
} fa_vulkan_objects;

/** Opens a Vulkan context on the application's device and queue. `desc` as for
 * fa_context_create (NULL: defaults), with its backend AUTO or VULKAN and its device ignored:
 * the device is the application's, which must be a GPU the Vulkan backend lists
 * (fa_device_query; matched by its device UUID). This version runs the scalar shaders there: the
 * cooperative-matrix kernels need features (cooperativeMatrix, shaderFloat16, vulkanMemoryModel,
 * maintenance4, subgroup size control) that the library cannot see enabled on a device it did not
 * create. ERROR_INVALID_DEVICE when the device is not listed; ERROR_INVALID_ARGUMENT when the
 * queue family has no compute or the 16-bit flag names a feature the device lacks;
 * ERROR_BACKEND_UNAVAILABLE without a Vulkan loader. */
FA_API fa_status fa_context_create_vulkan(const fa_context_desc *desc, const fa_vulkan_objects *app,
                                          fa_context **out);

/** A buffer over `bytes` of the application's VkBuffer from byte `offset` (a multiple of 4:
 * tensors in it then start at the buffer's offset 0), created on the context's device with
 * VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, and TRANSFER_SRC and TRANSFER_DST for fa_buffer_read and
 * fa_buffer_write. Not destroyed by the library: fa_buffer_destroy forgets it. The library
 * cannot check that `bytes` lies inside the VkBuffer: that is the caller's promise.
 * ERROR_UNSUPPORTED on other backends and on contexts not opened by fa_context_create_vulkan
 * (a VkBuffer of another device cannot be used); ERROR_INVALID_ARGUMENT for an offset that is
 * not a multiple of 4. */
FA_API fa_status fa_buffer_wrap_vulkan(fa_context *ctx, uint64_t buffer, size_t offset,
                                       size_t bytes, fa_buffer **out);

#ifdef __cplusplus
}
#endif

#endif
