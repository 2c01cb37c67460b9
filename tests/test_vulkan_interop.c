// SPDX-License-Identifier: MIT
/* flashattn on the application's own Vulkan device (flashattn/vulkan.h): what the context and the
 * buffers refuse. The attention itself on such objects runs in examples/vulkan_interop.c. */
#include <criterion/criterion.h>
#include <flashattn/vulkan.h>
#include <vulkan/vulkan.h>

static VkInstance instance;
static VkPhysicalDevice physical;
static VkDevice device;
static uint32_t family = UINT32_MAX;

static void setup(void)
{
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                   .apiVersion = VK_API_VERSION_1_1};
    const VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                       .pApplicationInfo = &app};
    uint32_t n = 1;
    if (vkCreateInstance(&info, NULL, &instance) != VK_SUCCESS ||
        vkEnumeratePhysicalDevices(instance, &n, &physical) < 0 || n == 0)
        cr_skip_test("no Vulkan device");
    uint32_t count = 16;
    VkQueueFamilyProperties fam[16];
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, fam);
    for (uint32_t i = 0; i < count && family == UINT32_MAX; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = i;
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           .queueFamilyIndex = family,
                                           .queueCount = 1,
                                           .pQueuePriorities = &priority};
    const VkDeviceCreateInfo dev = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                    .queueCreateInfoCount = 1,
                                    .pQueueCreateInfos = &queue};
    cr_assert_eq(vkCreateDevice(physical, &dev, NULL, &device), VK_SUCCESS);
}

static void teardown(void)
{
    if (device)
        vkDestroyDevice(device, NULL);
    if (instance)
        vkDestroyInstance(instance, NULL);
}

static fa_vulkan_objects objects(void)
{
    return (fa_vulkan_objects){.instance = (uint64_t)(uintptr_t)instance,
                               .physical_device = (uint64_t)(uintptr_t)physical,
                               .device = (uint64_t)(uintptr_t)device,
                               .queue_family = family};
}

TestSuite(vulkan_interop, .init = setup, .fini = teardown);

Test(vulkan_interop, refuses_what_it_cannot_use)
{
    fa_context *ctx = NULL;
    fa_vulkan_objects app = objects();
    cr_expect_eq(fa_context_create_vulkan(NULL, NULL, &ctx), FA_ERROR_NULL_POINTER);
    app.device = 0;
    cr_expect_eq(fa_context_create_vulkan(NULL, &app, &ctx), FA_ERROR_NULL_POINTER);
    app = objects();
    app.queue_family = 99;
    cr_expect_eq(fa_context_create_vulkan(NULL, &app, &ctx), FA_ERROR_INVALID_ARGUMENT);
    app = objects();
    app.queue_index = 5;
    cr_expect_eq(fa_context_create_vulkan(NULL, &app, &ctx), FA_ERROR_INVALID_ARGUMENT);
    app = objects();
    app.reserved[0] = 1;
    cr_expect_eq(fa_context_create_vulkan(NULL, &app, &ctx), FA_ERROR_INVALID_ARGUMENT);
    app = objects();
    cr_expect_eq(
        fa_context_create_vulkan(&(fa_context_desc){.backend = FA_BACKEND_OPENCL}, &app, &ctx),
        FA_ERROR_INVALID_BACKEND);
    cr_expect_null(ctx);
}

Test(vulkan_interop, wraps_on_the_application_device_at_an_offset)
{
    fa_context *ctx = NULL;
    const fa_vulkan_objects app = objects();
    cr_assert_eq(fa_context_create_vulkan(NULL, &app, &ctx), FA_OK, "%s", fa_last_create_error());
    const VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                     .size = 4096,
                                     .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                              VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                              VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer buf;
    cr_assert_eq(vkCreateBuffer(device, &info, NULL, &buf), VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, buf, &req);
    uint32_t type = 0;
    while (!(req.memoryTypeBits & (1u << type)))
        type++;
    VkDeviceMemory mem;
    const VkMemoryAllocateInfo mem_info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                           .allocationSize = req.size,
                                           .memoryTypeIndex = type};
    cr_assert_eq(vkAllocateMemory(device, &mem_info, NULL, &mem), VK_SUCCESS);
    cr_assert_eq(vkBindBufferMemory(device, buf, mem, 0), VK_SUCCESS);
    fa_buffer *fb = NULL;
    cr_expect_eq(fa_buffer_wrap_vulkan(ctx, (uint64_t)(uintptr_t)buf, 2, 64, &fb),
                 FA_ERROR_INVALID_ARGUMENT); /* an offset not a multiple of 4 */
    cr_expect_null(fb);
    /* at an offset: its size is what was asked, and host copies land at the offset */
    fa_buffer *whole = NULL;
    cr_assert_eq(fa_buffer_wrap_vulkan(ctx, (uint64_t)(uintptr_t)buf, 0, 4096, &whole), FA_OK);
    cr_assert_eq(fa_buffer_wrap_vulkan(ctx, (uint64_t)(uintptr_t)buf, 256, 64, &fb), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_expect_eq(fa_buffer_size(fb), 64);
    unsigned char pattern[64], back[64];
    for (int i = 0; i < 64; i++)
        pattern[i] = (unsigned char)(i * 37 + 11);
    cr_assert_eq(fa_buffer_write(whole, 0, (unsigned char[320]){0}, 320), FA_OK);
    cr_assert_eq(fa_buffer_write(fb, 0, pattern, sizeof pattern), FA_OK);
    cr_assert_eq(fa_buffer_read(whole, 256, back, sizeof back), FA_OK);
    cr_expect_arr_eq(back, pattern, sizeof pattern);
    cr_expect_eq(fa_buffer_write(fb, 8, pattern, sizeof pattern), FA_ERROR_OUT_OF_BOUNDS);
    fa_buffer_destroy(fb);
    fa_buffer_destroy(whole);
    fb = NULL;
    cr_expect_eq(fa_buffer_wrap_vulkan(ctx, 0, 0, 64, &fb), FA_ERROR_NULL_POINTER);
    cr_expect_null(fb);
    fa_context_destroy(ctx);
    /* a context on the library's own device cannot take the application's buffers */
    fa_context *own = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_VULKAN}, &own), FA_OK);
    cr_expect_eq(fa_buffer_wrap_vulkan(own, (uint64_t)(uintptr_t)buf, 0, 64, &fb),
                 FA_ERROR_UNSUPPORTED);
    fa_context_destroy(own);
    vkDestroyBuffer(device, buf, NULL); /* still the application's */
    vkFreeMemory(device, mem, NULL);
}
