// SPDX-License-Identifier: MIT
/* A context's device: the VkDevice with its own volk function table and compute queue, the ring
 * of command buffers and fences through which calls are submitted (FA_VK_FRAMES in flight), and
 * the pipeline cache kept on disk between runs. */
#include "fa_cache.h"
#include "fa_platform.h"
#include "vk_coopmat_compat.h"
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Descriptor sets one submission may use before the pool is reset (a backward uses 3). */
enum { SETS_PER_SUBMISSION = 16, BINDINGS_PER_SET = 8 };

/* Why f16 does not run on the cooperative-matrix kernels in this context; NULL when it does.
 * FA_VULKAN_MATRIX=0 keeps it on the scalar shaders. */
static const char *matrix_off_reason(const fa_context *ctx, const fa_vk_state *st)
{
    const char *want = fa_knob_value(ctx, FA_KNOB_VULKAN_MATRIX);
    if (st->adopted)
        return "the application's device (flashattn/vulkan.h: its enabled features are not known)";
    if (!st->phys->matrix_supported)
        return st->phys->matrix_note;
    if (want && strcmp(want, "0") == 0)
        return "FA_VULKAN_MATRIX=0";
    if (!st->storage16)
        return "16-bit storage off (FA_VULKAN_NO_16BIT_STORAGE)";
    return NULL;
}

static fa_status create_device(fa_context *ctx, fa_vk_state *st)
{
    const fa_vk_physical *p = st->phys;
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p->handle, &n, NULL);
    VkQueueFamilyProperties families[32];
    n = n > 32 ? 32 : n;
    vkGetPhysicalDeviceQueueFamilyProperties(p->handle, &n, families);
    /* A compute queue; one without graphics first (often a dedicated async-compute engine). */
    int family = -1;
    for (uint32_t i = 0; i < n && family < 0; i++)
        if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            family = (int)i;
    for (uint32_t i = 0; i < n && family < 0; i++)
        if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = (int)i;
    if (family < 0)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "vulkan: %s has no compute queue", p->info.name);
    st->queue_family = (uint32_t)family;

    st->storage16 = p->storage16 && !fa_knob_on(ctx, FA_KNOB_VULKAN_NO_16BIT_STORAGE);
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = st->storage16,
    };
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &storage16};
    /* FA_VULKAN_PIPELINE_STATS=1 (tuning): the driver's statistics of each pipeline built, such
     * as its register count, go to the log at INFO level. */
    st->pipeline_stats = p->executable_props && fa_knob_on(ctx, FA_KNOB_VULKAN_PIPELINE_STATS);
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE,
    };
    const char *extensions[3];
    uint32_t n_ext = 0;
    if (p->portability_subset)
        extensions[n_ext++] = "VK_KHR_portability_subset";
    if (st->pipeline_stats) {
        extensions[n_ext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
        executable.pNext = features.pNext;
        features.pNext = &executable;
    }
    /* The matrix shaders declare Float16, VulkanMemoryModel and CooperativeMatrixKHR, and the
     * generic ones LocalSizeId (maintenance4); the device is 1.3 (fa_vk_matrix_probe), so
     * subgroup size control needs no extension. */
    st->matrix = matrix_off_reason(ctx, st) == NULL;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR matrix = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .pNext = features.pNext,
        .cooperativeMatrix = VK_TRUE,
    };
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
        .pNext = &matrix,
        .shaderFloat16 = VK_TRUE,
    };
    VkPhysicalDeviceMaintenance4Features maintenance4 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES,
        .pNext = &f16,
        .maintenance4 = VK_TRUE, /* LocalSizeId, how SPIR-V 1.6 takes the workgroup size */
    };
    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
        .pNext = &maintenance4,
        .vulkanMemoryModel = VK_TRUE,
        /* with the memory model on, device scope (the decoding merge's barriers and count, the
         * 16-bit stores' atomics) needs this too */
        .vulkanMemoryModelDeviceScope = VK_TRUE,
    };
    VkPhysicalDeviceSubgroupSizeControlFeatures size_control = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        .pNext = &memory_model,
        .subgroupSizeControl = p->size_control,
        .computeFullSubgroups = p->full_subgroups,
    };
    if (st->matrix) {
        extensions[n_ext++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
        features.pNext =
            p->size_control || p->full_subgroups ? (void *)&size_control : (void *)&memory_model;
    }
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = st->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    const VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &features,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateDevice(p->handle, &info, NULL, &st->device);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateDevice");
    volkLoadDeviceTable(&st->vk, st->device);
    st->vk.vkGetDeviceQueue(st->device, st->queue_family, 0, &st->queue);
    vkGetPhysicalDeviceMemoryProperties(p->handle, &st->memory_props);
    return FA_OK;
}

static fa_status create_submission_objects(fa_context *ctx, fa_vk_state *st)
{
    const VkCommandPoolCreateInfo pool = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = st->queue_family,
    };
    VkResult r = st->vk.vkCreateCommandPool(st->device, &pool, NULL, &st->pool);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateCommandPool");
    VkCommandBuffer cmds[FA_VK_FRAMES];
    const VkCommandBufferAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = st->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = FA_VK_FRAMES,
    };
    r = st->vk.vkAllocateCommandBuffers(st->device, &alloc, cmds);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkAllocateCommandBuffers");
    const VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    const VkDescriptorPoolSize size = {
        .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = SETS_PER_SUBMISSION * BINDINGS_PER_SET,
    };
    const VkDescriptorPoolCreateInfo dpool = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = SETS_PER_SUBMISSION,
        .poolSizeCount = 1,
        .pPoolSizes = &size,
    };
    for (unsigned i = 0; i < FA_VK_FRAMES; i++) {
        fa_vk_frame *f = &st->frames[i];
        f->cmd = cmds[i];
        r = st->vk.vkCreateFence(st->device, &fence, NULL, &f->fence);
        if (r != VK_SUCCESS)
            return fa_vk_fail(ctx, r, "vkCreateFence");
        r = st->vk.vkCreateDescriptorPool(st->device, &dpool, NULL, &f->descriptors);
        if (r != VK_SUCCESS)
            return fa_vk_fail(ctx, r, "vkCreateDescriptorPool");
    }
    return FA_OK;
}

fa_status fa_vk_context_init(fa_context *ctx, int index)
{
    if (index < 0 || index >= fa_vk.device_count)
        return fa_fail(ctx, FA_ERROR_INVALID_DEVICE, "vulkan: no device %d", index);
    if (fa_vk.validation_note[0])
        fa_log(ctx, FA_LOG_WARN, "%s", fa_vk.validation_note);
    fa_vk_state *st = calloc(1, sizeof *st);
    if (!st)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot allocate the context");
    st->phys = &fa_vk.devices[index];
    st->matrix_caps = st->phys->matrix;
    ctx->backend_state = st;
    fa_status s = create_device(ctx, st);
    if (s != FA_OK) {
        fa_vk_context_release(ctx);
        return s;
    }
    return fa_vk_context_open(ctx);
}

fa_status fa_vk_context_open(fa_context *ctx)
{
    fa_vk_state *st = ctx->backend_state;
    /* Poll a submission's fence for up to FA_VULKAN_WAIT_SPIN_US microseconds (tuning; by default
     * 200 on a GPU, none on a CPU device, whose threads the polling would take) before sleeping on
     * it: the sleeping wait's wake-up cost a decoding step about 20 us on NVIDIA's driver, where
     * the step's kernel takes 85 (docs/PERF.md). */
    const char *spin = fa_knob_value(ctx, FA_KNOB_VULKAN_WAIT_SPIN_US);
    const double spin_us = spin                                             ? strtod(spin, NULL)
                           : st->phys->info.kind == FA_DEVICE_KIND_SOFTWARE ? 0.0
                                                                            : 200.0;
    st->wait_spin_s = spin_us > 0 && spin_us <= 1e6 ? spin_us * 1e-6 : 0.0;
    /* FA_VULKAN_IN_FLIGHT=n (tuning): at most n submissions in flight (1 to FA_VK_FRAMES; 1 waits
     * for each call before recording the next, as versions before the ring did). */
    const char *flight = fa_knob_value(ctx, FA_KNOB_VULKAN_IN_FLIGHT);
    const long n = flight ? strtol(flight, NULL, 10) : 0;
    st->in_flight = n >= 1 && n <= FA_VK_FRAMES ? (unsigned)n : FA_VK_FRAMES;
    fa_status s = create_submission_objects(ctx, st);
    if (s == FA_OK)
        s = fa_vk_check_validation(ctx);
    if (s == FA_OK)
        fa_vk_profile_open(ctx, st);
    if (s != FA_OK) {
        fa_vk_context_release(ctx);
        return s;
    }
    /* FA_VULKAN_PIPELINE_CACHE (tuning): 0 builds every pipeline without a VkPipelineCache and
     * neither reads nor writes the cache file; rebuild builds each pipeline a second time from
     * the cache the first build filled and keeps the second. */
    const char *cache = fa_knob_value(ctx, FA_KNOB_VULKAN_PIPELINE_CACHE);
    st->pipeline_rebuild = cache && !strcmp(cache, "rebuild");
    if (!cache || strcmp(cache, "0") != 0)
        fa_vk_pipeline_cache_load(ctx);
    if (st->matrix)
        fa_vk_matrix_layout_probe(ctx);
    fa_log(ctx, FA_LOG_INFO,
           "vulkan: %s, queue family %u, 16-bit storage %s, shaderFloat16 %s, validation %s",
           st->phys->info.name, st->queue_family, st->storage16 ? "on" : "off (32-bit words)",
           st->phys->info.f16 ? "yes" : "no", fa_vk.validation ? "on" : "off");
    if (st->matrix)
        fa_log(ctx, FA_LOG_INFO, "vulkan: matrix path on for f16: %s", st->phys->matrix_note);
    else
        fa_log(ctx, FA_LOG_INFO, "vulkan: matrix path off: %s", matrix_off_reason(ctx, st));
    return FA_OK;
}

void fa_vk_context_release(fa_context *ctx)
{
    fa_vk_state *st = ctx->backend_state;
    if (!st)
        return;
    if (st->device) {
        if (st->adopted) /* the application's queue may hold its own work: wait for ours */
            fa_vk_wait(ctx);
        else
            st->vk.vkDeviceWaitIdle(st->device);
        fa_vk_pipeline_cache_save(ctx);
        fa_vk_profile_release(st);
        fa_vk_pipelines_release(st);
        fa_vk_buffer_destroy(st, &st->staging);
        fa_vk_workspace_release(ctx, &st->workspace);
        fa_vk_workspace_release(ctx, &st->decode_workspace);
        if (st->cache)
            st->vk.vkDestroyPipelineCache(st->device, st->cache, NULL);
        for (unsigned i = 0; i < FA_VK_FRAMES; i++) {
            if (st->frames[i].descriptors)
                st->vk.vkDestroyDescriptorPool(st->device, st->frames[i].descriptors, NULL);
            if (st->frames[i].fence)
                st->vk.vkDestroyFence(st->device, st->frames[i].fence, NULL);
        }
        if (st->pool)
            st->vk.vkDestroyCommandPool(st->device, st->pool, NULL);
        if (!st->adopted)
            st->vk.vkDestroyDevice(st->device, NULL);
    }
    free(st);
    ctx->backend_state = NULL;
    fa_vk_check_validation(ctx);
}

/* ---- submission --------------------------------------------------------------------------- */

/* Waits for slot f's submission, if any. */
static fa_status wait_frame(fa_context *ctx, fa_vk_frame *f)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (!f->pending)
        return FA_OK;
    VkResult r = VK_NOT_READY;
    const char *call = "vkGetFenceStatus";
    if (st->wait_spin_s > 0) {
        const double until = fa_clock_seconds() + st->wait_spin_s;
        do
            r = st->vk.vkGetFenceStatus(st->device, f->fence);
        while (r == VK_NOT_READY && fa_clock_seconds() < until);
    }
    if (r == VK_NOT_READY) {
        call = "vkWaitForFences";
        r = st->vk.vkWaitForFences(st->device, 1, &f->fence, VK_TRUE, UINT64_MAX);
    }
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, call);
    fa_vk_profile_collect(st, (unsigned)(f - st->frames));
    f->pending = false;
    r = st->vk.vkResetFences(st->device, 1, &f->fence);
    return r == VK_SUCCESS ? FA_OK : fa_vk_fail(ctx, r, "vkResetFences");
}

fa_status fa_vk_wait(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    /* Oldest first: the ring's order is submission order. */
    for (unsigned i = 1; i <= st->in_flight; i++) {
        fa_status s = wait_frame(ctx, &st->frames[(st->frame + i) % st->in_flight]);
        if (s != FA_OK)
            return s;
    }
    return fa_vk_check_validation(ctx);
}

bool fa_vk_busy(const fa_vk_state *st)
{
    for (unsigned i = 0; i < FA_VK_FRAMES; i++)
        if (st->frames[i].pending)
            return true;
    return false;
}

fa_status fa_vk_synchronize(fa_context *ctx)
{
    fa_status s = fa_vk_wait(ctx);
    if (s == FA_OK)
        fa_vk_profile_report(ctx, fa_vk_state_of(ctx));
    return s;
}

void fa_vk_barrier(fa_vk_state *st)
{
    const VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    st->vk.vkCmdPipelineBarrier(st->cmd, stages, stages, 0, 1, &barrier, 0, NULL, 0, NULL);
}

/* On the application's queue: every command before the barrier in submission order, the
 * application's included, and its writes, against every command after it. */
static void queue_barrier(fa_vk_state *st)
{
    const VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT,
    };
    st->vk.vkCmdPipelineBarrier(st->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &barrier, 0, NULL, 0,
                                NULL);
}

fa_status fa_vk_begin(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const unsigned next = (st->frame + 1) % st->in_flight;
    fa_vk_frame *f = &st->frames[next];
    fa_status s = wait_frame(ctx, f);
    if (s == FA_OK)
        s = fa_vk_check_validation(ctx);
    if (s != FA_OK)
        return s;
    /* Also after a recording that was never submitted (fa_vk_finish on an error). */
    VkResult r = st->vk.vkResetDescriptorPool(st->device, f->descriptors, 0);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkResetDescriptorPool");
    st->frame = next;
    st->cmd = f->cmd;
    st->descriptors = f->descriptors;
    const VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    r = st->vk.vkBeginCommandBuffer(st->cmd, &begin);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkBeginCommandBuffer");
    st->recording = true;
    /* Work of earlier submissions (finished, but not made visible by the fence) comes first. */
    if (st->adopted)
        queue_barrier(st);
    else
        fa_vk_barrier(st);
    fa_vk_profile_begin(st);
    return FA_OK;
}

fa_status fa_vk_finish(fa_context *ctx, fa_status s, bool wait)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (s == FA_OK)
        return fa_vk_submit(ctx, wait);
    if (st->recording) {
        st->recording = false;
        st->vk.vkEndCommandBuffer(st->cmd);
    }
    return s;
}

fa_status fa_vk_submit(fa_context *ctx, bool wait)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    st->recording = false;
    if (st->adopted) /* and what the application submits next sees its results */
        queue_barrier(st);
    VkResult r = st->vk.vkEndCommandBuffer(st->cmd);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkEndCommandBuffer");
    const VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &st->cmd,
    };
    fa_vk_frame *f = &st->frames[st->frame];
    fa_vk_profile_submit(st, false);
    r = st->vk.vkQueueSubmit(st->queue, 1, &submit, f->fence);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkQueueSubmit");
    fa_vk_profile_submit(st, true);
    f->pending = true;
    return wait ? fa_vk_wait(ctx) : fa_vk_check_validation(ctx);
}

/* ---- pipeline cache ----------------------------------------------------------------------- */

/* flashattn-<version>-vulkan-<vendor>-<device>-<uuid>.bin in the context's cache folder (the
 * pipeline cache UUID changes with the driver). The file is the driver's data followed by its
 * 64-bit checksum (fa_cache_hash). */
static bool cache_path(const fa_context *ctx, const fa_vk_physical *p, char *path, size_t path_size)
{
    char uuid[2 * VK_UUID_SIZE + 1], name[128];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        snprintf(uuid + 2 * i, 3, "%02x", p->cache_uuid[i]);
    snprintf(name, sizeof name, "vulkan-%04x-%04x-%s.bin", p->vendor_id, p->device_id, uuid);
    return fa_cache_file(ctx, name, path, path_size);
}

/* Only data whose header names this device and driver is handed to the driver. */
static bool cache_header_ok(const fa_vk_physical *p, const unsigned char *data, size_t size)
{
    uint32_t header[4];
    if (size < 16 + VK_UUID_SIZE)
        return false;
    memcpy(header, data, sizeof header);
    return header[0] >= 16 + VK_UUID_SIZE && header[0] <= size &&
           header[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && header[2] == p->vendor_id &&
           header[3] == p->device_id && memcmp(data + 16, p->cache_uuid, VK_UUID_SIZE) == 0;
}

void fa_vk_pipeline_cache_load(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    char path[1200];
    unsigned char *data = NULL;
    size_t size = 0;
    fa_cache_trim(ctx); /* a cap lowered since the last run holds from the start */
    if (cache_path(ctx, st->phys, path, sizeof path)) {
        FILE *f = fopen(path, "rb");
        if (f) {
            if (fseek(f, 0, SEEK_END) == 0) {
                long len = ftell(f);
                if (len > 8 && len < (64l << 20) && fseek(f, 0, SEEK_SET) == 0) {
                    data = malloc((size_t)len);
                    if (data && fread(data, 1, (size_t)len, f) == (size_t)len)
                        size = (size_t)len - 8;
                }
            }
            fclose(f);
        }
    }
    uint64_t sum = 0;
    if (size)
        memcpy(&sum, data + size, sizeof sum);
    if (size && (sum != fa_cache_hash(FA_CACHE_HASH_SEED, data, size) ||
                 !cache_header_ok(st->phys, data, size))) {
        fa_log(ctx, FA_LOG_DEBUG, "vulkan: ignoring stale or corrupt pipeline cache %s", path);
        size = 0;
    } else if (size) {
        fa_cache_touch(path);
    }
    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = size,
        .pInitialData = size ? data : NULL,
    };
    VkResult r = st->vk.vkCreatePipelineCache(st->device, &info, NULL, &st->cache);
    if (r != VK_SUCCESS && size) {
        info.initialDataSize = 0;
        info.pInitialData = NULL;
        r = st->vk.vkCreatePipelineCache(st->device, &info, NULL, &st->cache);
    }
    if (r != VK_SUCCESS)
        st->cache = VK_NULL_HANDLE; /* pipelines are then built without a cache */
    free(data);
}

void fa_vk_pipeline_cache_save(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    char path[1200], tmp[1300];
    if (!st->cache || !st->pipeline_count || !cache_path(ctx, st->phys, path, sizeof path))
        return;
    size_t size = 0;
    if (st->vk.vkGetPipelineCacheData(st->device, st->cache, &size, NULL) != VK_SUCCESS || !size)
        return;
    void *data = malloc(size);
    if (!data)
        return;
    if (st->vk.vkGetPipelineCacheData(st->device, st->cache, &size, data) == VK_SUCCESS) {
        /* Write a temporary file and rename it into place, so a concurrent reader never sees
         * half a file. Any failure only means no cache. */
        snprintf(tmp, sizeof tmp, "%s.%lu.tmp", path, fa_process_id());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            const uint64_t sum = fa_cache_hash(FA_CACHE_HASH_SEED, data, size);
            bool ok = fwrite(data, 1, size, f) == size && fwrite(&sum, sizeof sum, 1, f) == 1;
            ok = fclose(f) == 0 && ok;
            if (!ok || !fa_file_replace(tmp, path))
                remove(tmp);
            else
                fa_cache_trim(ctx);
        }
    }
    free(data);
}
