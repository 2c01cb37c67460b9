// SPDX-License-Identifier: MIT
/* An application with its own Vulkan device and buffers runs attention on them with no host copy:
 * it uploads Q, K and V with its own copy commands, submitted and not waited for, hands its
 * device, queue and buffers to flashattn (K and V share one VkBuffer, V wrapped at an offset),
 * then copies O out with its own commands on the same queue. Checked against a float64 computation.
 * Exit status 0 when within 1e-4, 77 when the machine has no Vulkan device (skipped), 1 otherwise.
 */
#include <flashattn/vulkan.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

enum { B = 1, S = 96, H = 2, D = 32 };
enum { N = B * S * H * D };

static VkDevice device;
static VkPhysicalDeviceMemoryProperties memory;

static int check(VkResult r, const char *what)
{
    if (r != VK_SUCCESS)
        fprintf(stderr, "%s: VkResult %d\n", what, (int)r);
    return r != VK_SUCCESS;
}

/* A buffer of `size` bytes in memory with the `want` properties (any type if none has them). */
static VkBuffer make_buffer(VkDeviceSize size, VkMemoryPropertyFlags want, VkDeviceMemory *mem)
{
    const VkBufferCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    };
    VkBuffer buf = VK_NULL_HANDLE;
    if (check(vkCreateBuffer(device, &info, NULL, &buf), "vkCreateBuffer"))
        exit(1);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, buf, &req);
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < memory.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) &&
            (memory.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    const VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                        .allocationSize = req.size,
                                        .memoryTypeIndex = type};
    if (type == UINT32_MAX ||
        check(vkAllocateMemory(device, &alloc, NULL, mem), "vkAllocateMemory") ||
        check(vkBindBufferMemory(device, buf, *mem, 0), "vkBindBufferMemory"))
        exit(1);
    return buf;
}

/* O for one (query i, head h, dim d), in float64, non-causal. */
static double reference(const float *q, const float *k, const float *v, int i, int h, int d)
{
    double s[S], m = -INFINITY, l = 0.0, acc = 0.0;
    for (int j = 0; j < S; j++) {
        double dot = 0.0;
        for (int e = 0; e < D; e++)
            dot += (double)q[(i * H + h) * D + e] * k[(j * H + h) * D + e];
        s[j] = dot / sqrt((double)D);
        m = s[j] > m ? s[j] : m;
    }
    for (int j = 0; j < S; j++) {
        const double p = exp(s[j] - m);
        l += p;
        acc += p * v[(j * H + h) * D + d];
    }
    return acc / l;
}

int main(void)
{
    const VkApplicationInfo app_info = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                        .apiVersion = VK_API_VERSION_1_1};
    const VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                            .pApplicationInfo = &app_info};
    VkInstance instance;
    uint32_t n = 1;
    VkPhysicalDevice physical;
    if (vkCreateInstance(&inst_info, NULL, &instance) != VK_SUCCESS ||
        vkEnumeratePhysicalDevices(instance, &n, &physical) < 0 || n == 0) {
        printf("no Vulkan device: skipped\n");
        return 77;
    }
    uint32_t families = 16, family = UINT32_MAX;
    VkQueueFamilyProperties fam[16];
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, fam);
    for (uint32_t i = 0; i < families && family == UINT32_MAX; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = i;
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &storage16};
    vkGetPhysicalDeviceFeatures2(physical, &features); /* enable what the device has */
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                .queueFamilyIndex = family,
                                                .queueCount = 1,
                                                .pQueuePriorities = &priority};
    const VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                         .pNext = &features,
                                         .queueCreateInfoCount = 1,
                                         .pQueueCreateInfos = &queue_info};
    if (family == UINT32_MAX ||
        check(vkCreateDevice(physical, &dev_info, NULL, &device), "vkCreateDevice"))
        return 1;
    VkQueue queue;
    vkGetDeviceQueue(device, family, 0, &queue);
    vkGetPhysicalDeviceMemoryProperties(physical, &memory);

    /* The application's buffers in device memory: Q; K and V in one (V behind K, as a cache
     * allocation holds them); O; LSE; and one host-visible staging buffer for the upload (Q, K,
     * V) and the readback (O). */
    const VkDeviceSize bytes = N * sizeof(float);
    const VkDeviceSize sizes[4] = {bytes, 2 * bytes, bytes, B * H * S * 4};
    VkDeviceMemory mems[5];
    VkBuffer bufs[4];
    for (int i = 0; i < 4; i++)
        bufs[i] = make_buffer(sizes[i], VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &mems[i]);
    VkBuffer staging = make_buffer(
        4 * bytes, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
        &mems[4]);
    float *host = NULL;
    if (check(vkMapMemory(device, mems[4], 0, VK_WHOLE_SIZE, 0, (void **)&host), "vkMapMemory"))
        return 1;
    float *q = host, *k = host + N, *v = host + 2 * N, *o = host + 3 * N;
    for (int i = 0; i < N; i++) {
        q[i] = sinf((float)i * 0.37f);
        k[i] = cosf((float)i * 0.11f);
        v[i] = sinf((float)i * 0.05f + 1.0f);
        o[i] = NAN;
    }
    const VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                               .queueFamilyIndex = family};
    VkCommandPool pool;
    VkCommandBuffer cmd[2];
    const VkCommandBufferAllocateInfo alloc = {.sType =
                                                   VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                               .commandPool = VK_NULL_HANDLE,
                                               .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                               .commandBufferCount = 2};
    if (check(vkCreateCommandPool(device, &pool_info, NULL, &pool), "vkCreateCommandPool"))
        return 1;
    VkCommandBufferAllocateInfo alloc_pool = alloc;
    alloc_pool.commandPool = pool;
    if (check(vkAllocateCommandBuffers(device, &alloc_pool, cmd), "vkAllocateCommandBuffers"))
        return 1;
    const VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    /* the upload, submitted and not waited for: the queue orders it before the attention */
    vkBeginCommandBuffer(cmd[0], &begin);
    for (int i = 0; i < 3; i++) /* Q to bufs[0], K and V to bufs[1] */
        vkCmdCopyBuffer(cmd[0], staging, bufs[i > 0], 1,
                        &(VkBufferCopy){.srcOffset = (VkDeviceSize)i * bytes,
                                        .dstOffset = i == 2 ? bytes : 0,
                                        .size = bytes});
    vkEndCommandBuffer(cmd[0]);
    const VkSubmitInfo upload = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                 .commandBufferCount = 1,
                                 .pCommandBuffers = &cmd[0]};
    if (check(vkQueueSubmit(queue, 1, &upload, VK_NULL_HANDLE), "vkQueueSubmit (upload)"))
        return 1;

    fa_context *ctx = NULL;
    const fa_vulkan_objects objects = {
        .instance = (uint64_t)(uintptr_t)instance,
        .physical_device = (uint64_t)(uintptr_t)physical,
        .device = (uint64_t)(uintptr_t)device,
        .queue_family = family,
        .storage_buffer_16bit_access = storage16.storageBuffer16BitAccess,
    };
    fa_status st = fa_context_create_vulkan(NULL, &objects, &ctx);
    if (st != FA_OK) {
        fprintf(stderr, "fa_context_create_vulkan: %s: %s\n", fa_status_name(st),
                fa_last_create_error());
        return 1;
    }
    /* Q, K, V, O, LSE: K the first half of bufs[1], V its second half */
    static const int which[5] = {0, 1, 1, 2, 3};
    fa_buffer *fb[5];
    for (int i = 0; i < 5; i++)
        if ((st =
                 fa_buffer_wrap_vulkan(ctx, (uint64_t)(uintptr_t)bufs[which[i]], i == 2 ? bytes : 0,
                                       i == 4 ? B * H * S * 4 : bytes, &fb[i])) != FA_OK) {
            fprintf(stderr, "fa_buffer_wrap_vulkan: %s: %s\n", fa_status_name(st),
                    fa_context_last_error(ctx));
            return 1;
        }
    const fa_tensor tq = fa_tensor_bshd(fb[0], FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tk = fa_tensor_bshd(fb[1], FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tv = fa_tensor_bshd(fb[2], FA_DTYPE_F32, B, S, H, D);
    const fa_tensor to = fa_tensor_bshd(fb[3], FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tl = fa_tensor_lse(fb[4], B, H, S);
    st = fa_attention_forward(ctx, &(fa_attention_desc){0}, &tq, &tk, &tv, &to, &tl);
    if (st != FA_OK) {
        fprintf(stderr, "fa_attention_forward: %s: %s\n", fa_status_name(st),
                fa_context_last_error(ctx));
        return 1;
    }
    /* the readback, the application's own, behind the attention on the same queue */
    vkBeginCommandBuffer(cmd[1], &begin);
    vkCmdCopyBuffer(cmd[1], bufs[2], staging, 1,
                    &(VkBufferCopy){.dstOffset = 3 * bytes, .size = bytes});
    vkEndCommandBuffer(cmd[1]);
    const VkSubmitInfo readback = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                   .commandBufferCount = 1,
                                   .pCommandBuffers = &cmd[1]};
    if (check(vkQueueSubmit(queue, 1, &readback, VK_NULL_HANDLE), "vkQueueSubmit (readback)") ||
        check(vkQueueWaitIdle(queue), "vkQueueWaitIdle"))
        return 1;

    double worst = 0.0;
    for (int i = 0; i < S; i++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                const double e = fabs(o[(i * H + h) * D + d] - reference(q, k, v, i, h, d));
                worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
            }
    fa_device_info info;
    fa_context_device(ctx, &info);
    printf("vulkan interop on %s: worst |O - float64| = %.3g\n", info.name, worst);

    fa_context_destroy(ctx); /* forgets the wrapped buffers; the device stays the application's */
    for (int i = 0; i < 4; i++)
        vkDestroyBuffer(device, bufs[i], NULL);
    vkDestroyBuffer(device, staging, NULL);
    for (int i = 0; i < 5; i++)
        vkFreeMemory(device, mems[i], NULL);
    vkDestroyCommandPool(device, pool, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    return worst < 1e-4 ? 0 : 1;
}
