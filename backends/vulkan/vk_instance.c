// SPDX-License-Identifier: MIT
/* The Vulkan loader, opened at run time through volk; the one VkInstance of the process (with
 * the Khronos validation layer when FA_VULKAN_VALIDATION=1); the physical device list; and the
 * mapping of VkResult values and validation messages to statuses. */
#include "fa_platform.h"
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fa_vk_process fa_vk;

/* ---- errors ------------------------------------------------------------------------------- */

const char *fa_vk_result_name(VkResult r)
{
    switch (r) {
#define FA_VK_NAME_(x)                                                                             \
    case x:                                                                                        \
        return #x;
        FA_VK_NAME_(VK_SUCCESS)
        FA_VK_NAME_(VK_NOT_READY)
        FA_VK_NAME_(VK_TIMEOUT)
        FA_VK_NAME_(VK_INCOMPLETE)
        FA_VK_NAME_(VK_ERROR_OUT_OF_HOST_MEMORY)
        FA_VK_NAME_(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        FA_VK_NAME_(VK_ERROR_INITIALIZATION_FAILED)
        FA_VK_NAME_(VK_ERROR_DEVICE_LOST)
        FA_VK_NAME_(VK_ERROR_MEMORY_MAP_FAILED)
        FA_VK_NAME_(VK_ERROR_LAYER_NOT_PRESENT)
        FA_VK_NAME_(VK_ERROR_EXTENSION_NOT_PRESENT)
        FA_VK_NAME_(VK_ERROR_FEATURE_NOT_PRESENT)
        FA_VK_NAME_(VK_ERROR_INCOMPATIBLE_DRIVER)
        FA_VK_NAME_(VK_ERROR_TOO_MANY_OBJECTS)
        FA_VK_NAME_(VK_ERROR_FORMAT_NOT_SUPPORTED)
        FA_VK_NAME_(VK_ERROR_FRAGMENTED_POOL)
        FA_VK_NAME_(VK_ERROR_UNKNOWN)
        FA_VK_NAME_(VK_ERROR_OUT_OF_POOL_MEMORY)
        FA_VK_NAME_(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        FA_VK_NAME_(VK_ERROR_FRAGMENTATION)
        FA_VK_NAME_(VK_ERROR_INVALID_SHADER_NV)
#undef FA_VK_NAME_
    default:
        return "VK_ERROR_(unlisted)";
    }
}

fa_status fa_vk_fail(fa_context *ctx, VkResult r, const char *what)
{
    fa_status st = FA_ERROR_DEVICE;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        st = FA_ERROR_OUT_OF_DEVICE_MEMORY;
    else if (r == VK_ERROR_OUT_OF_HOST_MEMORY)
        st = FA_ERROR_OUT_OF_HOST_MEMORY;
    else if (r == VK_ERROR_DEVICE_LOST)
        st = FA_ERROR_DEVICE_LOST;
    return fa_fail(ctx, st, "vulkan: %s failed: %s (%d)", what, fa_vk_result_name(r), (int)r);
}

/* ---- validation messages ------------------------------------------------------------------ */

static fa_mutex message_lock = FA_MUTEX_INIT;
static char message[768];
static unsigned message_count;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user)
{
    (void)type;
    (void)user;
    if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
        return VK_FALSE;
    /* volk (1.3.239, Debian 12) asks vkGetDeviceProcAddr for one instance-level function while
     * it fills a device table; newer layers report that. It returns NULL, which volk expects. */
    if (data && data->pMessage &&
        strstr(data->pMessage, "vkGetDeviceProcAddr(): pName is trying to grab") &&
        strstr(data->pMessage, "which is an instance level function"))
        return VK_FALSE;
    fa_mutex_lock(&message_lock);
    if (message_count++ == 0)
        snprintf(message, sizeof message, "%s", data && data->pMessage ? data->pMessage : "?");
    fa_mutex_unlock(&message_lock);
    return VK_FALSE;
}

fa_status fa_vk_check_validation(fa_context *ctx)
{
    if (!fa_vk.validation)
        return FA_OK;
    char text[sizeof message];
    unsigned count;
    fa_mutex_lock(&message_lock);
    count = message_count;
    memcpy(text, message, sizeof text);
    message_count = 0;
    message[0] = '\0';
    fa_mutex_unlock(&message_lock);
    if (!count)
        return FA_OK;
    return fa_fail(ctx, FA_ERROR_DEVICE, "vulkan validation (%u message%s): %s", count,
                   count == 1 ? "" : "s", text);
}

/* ---- instance ----------------------------------------------------------------------------- */

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n)
        return false;
    VkLayerProperties *layers = calloc(n, sizeof *layers);
    bool found = false;
    if (layers && vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(layers[i].layerName, name) == 0;
    free(layers);
    return found;
}

static bool has_instance_extension(const char *layer, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    bool found = false;
    if (ext && vkEnumerateInstanceExtensionProperties(layer, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

static VkResult create_instance(uint32_t api_version)
{
    const char *layers[1], *extensions[2];
    uint32_t n_layers = 0, n_ext = 0;
    VkInstanceCreateFlags flags = 0;
    char *want = NULL;
    fa_env_get("FA_VULKAN_VALIDATION", &want); /* out of memory: as if unset */
    bool validation = want && want[0] && strcmp(want, "0") != 0;
    free(want);
    if (validation) {
        if (!has_layer("VK_LAYER_KHRONOS_validation")) {
            snprintf(fa_vk.validation_note, sizeof fa_vk.validation_note,
                     "FA_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not "
                     "installed; running without validation");
            validation = false;
        } else if (!has_instance_extension(NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
            snprintf(fa_vk.validation_note, sizeof fa_vk.validation_note,
                     "FA_VULKAN_VALIDATION is set but VK_EXT_debug_utils is missing");
            validation = false;
        } else {
            layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
            extensions[n_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        }
    }
    if (has_instance_extension(NULL, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        extensions[n_ext++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    const VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "flashattn",
        .pEngineName = "flashattn",
        .engineVersion =
            VK_MAKE_API_VERSION(0, FA_VERSION_MAJOR, FA_VERSION_MINOR, FA_VERSION_PATCH),
        .apiVersion = api_version,
    };
    const VkDebugUtilsMessengerCreateInfoEXT messenger = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = on_message,
    };
    const VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation ? &messenger : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateInstance(&info, NULL, &fa_vk.instance);
    if (r != VK_SUCCESS)
        return r;
    fa_vk.api_version = api_version;
    volkLoadInstanceOnly(fa_vk.instance);
    if (validation) {
        VkDebugUtilsMessengerEXT handle;
        r = vkCreateDebugUtilsMessengerEXT(fa_vk.instance, &messenger, NULL, &handle);
        if (r != VK_SUCCESS) {
            vkDestroyInstance(fa_vk.instance, NULL);
            fa_vk.instance = VK_NULL_HANDLE;
            return r;
        }
        fa_vk.validation = true;
    }
    return VK_SUCCESS;
}

/* ---- devices ------------------------------------------------------------------------------ */

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x10de:
        return "NVIDIA";
    case 0x1002:
        return "AMD";
    case 0x8086:
        return "Intel";
    case 0x13b5:
        return "ARM";
    case 0x5143:
        return "Qualcomm";
    case 0x106b:
        return "Apple";
    case 0x1010:
        return "Imagination";
    case 0x10005:
        return "Mesa";
    default:
        return NULL;
    }
}

bool fa_vk_has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ext[i].extensionName, name) == 0)
            return true;
    return false;
}

static void describe(fa_vk_physical *p)
{
    fa_device_info *d = &p->info;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(p->handle, &props);
    p->api_version = props.apiVersion;
    p->vendor_id = props.vendorID;
    p->device_id = props.deviceID;
    memcpy(p->cache_uuid, props.pipelineCacheUUID, VK_UUID_SIZE);
    p->max_push_constants = props.limits.maxPushConstantsSize;
    memcpy(p->max_group_count, props.limits.maxComputeWorkGroupCount, sizeof p->max_group_count);
    p->max_group_size_x = props.limits.maxComputeWorkGroupSize[0];

    uint32_t n_ext = 0;
    VkExtensionProperties *ext = NULL;
    if (vkEnumerateDeviceExtensionProperties(p->handle, NULL, &n_ext, NULL) == VK_SUCCESS &&
        n_ext) {
        ext = calloc(n_ext, sizeof *ext);
        if (!ext ||
            vkEnumerateDeviceExtensionProperties(p->handle, NULL, &n_ext, ext) != VK_SUCCESS)
            n_ext = 0;
    }
    const bool v12 = props.apiVersion >= VK_API_VERSION_1_2;
    const bool v13 = props.apiVersion >= VK_API_VERSION_1_3;
    const bool has_driver_props =
        v12 || fa_vk_has_extension(ext, n_ext, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
    const bool has_size_control =
        v13 || fa_vk_has_extension(ext, n_ext, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    const bool has_f16_ext =
        v12 || fa_vk_has_extension(ext, n_ext, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);

    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlProperties size_control = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &id};
    VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &subgroup};
    if (has_driver_props) {
        driver.pNext = props2.pNext;
        props2.pNext = &driver;
    }
    if (has_size_control) {
        size_control.pNext = props2.pNext;
        props2.pNext = &size_control;
    }
    /* Compute units, where the driver says (the decoding path's chunk count). */
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv_sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCorePropertiesAMD amd_core = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    if (fa_vk_has_extension(ext, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        nv_sm.pNext = props2.pNext;
        props2.pNext = &nv_sm;
    }
    if (fa_vk_has_extension(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
        amd_core.pNext = props2.pNext;
        props2.pNext = &amd_core;
    }
    vkGetPhysicalDeviceProperties2(p->handle, &props2);
    memcpy(p->device_uuid, id.deviceUUID, VK_UUID_SIZE);
    if (nv_sm.shaderSMCount)
        d->compute_units = nv_sm.shaderSMCount;
    else if (amd_core.shaderEngineCount)
        d->compute_units = amd_core.shaderEngineCount * amd_core.shaderArraysPerEngineCount *
                           amd_core.computeUnitsPerShaderArray;
    p->subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);

    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &storage16};
    if (has_f16_ext) {
        f16.pNext = features.pNext;
        features.pNext = &f16;
    }
    vkGetPhysicalDeviceFeatures2(p->handle, &features);
    p->storage16 = storage16.storageBuffer16BitAccess;
    p->portability_subset = fa_vk_has_extension(ext, n_ext, "VK_KHR_portability_subset");
    p->executable_props =
        fa_vk_has_extension(ext, n_ext, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);

    snprintf(d->name, sizeof d->name, "%.*s", (int)sizeof d->name - 1, props.deviceName);
    const char *vendor = vendor_name(props.vendorID);
    if (vendor)
        snprintf(d->vendor, sizeof d->vendor, "%s", vendor);
    else
        snprintf(d->vendor, sizeof d->vendor, "0x%04x", props.vendorID);
    switch (props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        d->kind = FA_DEVICE_KIND_DISCRETE_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        d->kind = FA_DEVICE_KIND_INTEGRATED_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        d->kind = FA_DEVICE_KIND_SOFTWARE;
        break;
    default:
        d->kind = FA_DEVICE_KIND_OTHER;
        break;
    }
    p->loop_limit = has_driver_props ? driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE
                                     : strstr(props.deviceName, "llvmpipe") != NULL;
    if (has_driver_props)
        snprintf(d->driver, sizeof d->driver, "%.31s %.31s", driver.driverName, driver.driverInfo);
    else
        snprintf(d->driver, sizeof d->driver, "0x%x", props.driverVersion);
    d->api_major = (int)VK_API_VERSION_MAJOR(props.apiVersion);
    d->api_minor = (int)VK_API_VERSION_MINOR(props.apiVersion);
    snprintf(d->api_version, sizeof d->api_version, "%d.%d.%u", d->api_major, d->api_minor,
             VK_API_VERSION_PATCH(props.apiVersion));

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(p->handle, &mem);
    for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
        if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            mem.memoryHeaps[i].size > d->memory_bytes)
            d->memory_bytes = mem.memoryHeaps[i].size;
    /* Whole buffers are bound, so a buffer may not exceed one binding's range; keep it a
     * multiple of 16 so the rounded-up allocation stays inside it. */
    d->max_buffer_bytes = props.limits.maxStorageBufferRange & ~(uint64_t)15;
    d->shared_memory_bytes = props.limits.maxComputeSharedMemorySize;
    d->max_workgroup_size = props.limits.maxComputeWorkGroupInvocations;
    if (has_size_control && size_control.minSubgroupSize) {
        d->subgroup_size_min = size_control.minSubgroupSize;
        d->subgroup_size_max = size_control.maxSubgroupSize;
    } else {
        d->subgroup_size_min = d->subgroup_size_max = subgroup.subgroupSize;
    }
    d->f16 = has_f16_ext && f16.shaderFloat16;
    d->bf16 = fa_vk_has_extension(ext, n_ext, "VK_KHR_shader_bfloat16");
    d->matrix_units = fa_vk_has_extension(ext, n_ext, "VK_KHR_cooperative_matrix") ||
                      fa_vk_has_extension(ext, n_ext, "VK_NV_cooperative_matrix");
    fa_vk_matrix_probe(p, ext, n_ext, &props, &subgroup, has_size_control ? &size_control : NULL);
    free(ext);
}

/* Why the loader reports Vulkan 1.0 only: an old loader creates a 1.0 instance, one that has
 * found no working driver (wine's vulkan-1.dll without a display driver, say) cannot. */
static void explain_old_loader(uint32_t loader, char *reason, size_t reason_size)
{
    const VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance instance = VK_NULL_HANDLE;
    VkResult r = vkCreateInstance(&info, NULL, &instance);
    if (r != VK_SUCCESS) {
        snprintf(reason, reason_size,
                 "the Vulkan loader reports Vulkan %u.%u and cannot create an instance (%s): it "
                 "has no working driver",
                 VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader), fa_vk_result_name(r));
        return;
    }
    PFN_vkDestroyInstance destroy =
        (PFN_vkDestroyInstance)vkGetInstanceProcAddr(instance, "vkDestroyInstance");
    if (destroy)
        destroy(instance, NULL);
    snprintf(reason, reason_size, "the Vulkan loader supports only Vulkan %u.%u; 1.1 needed",
             VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader));
}

bool fa_vk_probe(int *device_count, char *reason, size_t reason_size)
{
    *device_count = 0;
    /* The loader is opened here rather than by volkInitialize, so that a failure says why (the
     * system's message) under every system's names; fa_dynlib_open tries those of the system it
     * runs on. It stays open for the life of the process, as the instance does. */
    static const char *const names[] = {"libvulkan.so.1",
                                        "libvulkan.so",
                                        "vulkan-1.dll",
                                        "libvulkan.1.dylib",
                                        "libvulkan.dylib",
                                        "libMoltenVK.dylib",
                                        NULL};
    char why[200];
    fa_dynlib *lib = fa_dynlib_open(names, why, sizeof why);
    if (!lib) {
        snprintf(reason, reason_size, "no Vulkan loader: %s", why);
        return false;
    }
    PFN_vkGetInstanceProcAddr get_proc;
    *(void **)&get_proc = fa_dynlib_symbol(lib, "vkGetInstanceProcAddr");
    if (!get_proc) {
        snprintf(reason, reason_size, "the Vulkan loader lacks vkGetInstanceProcAddr");
        fa_dynlib_close(lib);
        return false;
    }
    volkInitializeCustom(get_proc);
    /* A loader without vkEnumerateInstanceVersion is 1.0; one whose call fails has found no
     * working Vulkan (wine's vulkan-1.dll without a display driver, say). */
    uint32_t loader = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion) {
        VkResult r = vkEnumerateInstanceVersion(&loader);
        if (r != VK_SUCCESS) {
            snprintf(reason, reason_size,
                     "the Vulkan loader does not work here: vkEnumerateInstanceVersion failed: %s",
                     fa_vk_result_name(r));
            return false;
        }
    }
    if (loader < VK_API_VERSION_1_1) {
        explain_old_loader(loader, reason, reason_size);
        return false;
    }
    VkResult r = create_instance(loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader);
    if (r != VK_SUCCESS) {
        snprintf(reason, reason_size, "vkCreateInstance failed: %s", fa_vk_result_name(r));
        return false;
    }
    uint32_t n = 0;
    r = vkEnumeratePhysicalDevices(fa_vk.instance, &n, NULL);
    VkPhysicalDevice handles[FA_VK_MAX_DEVICES];
    if (r == VK_SUCCESS && n) {
        n = n > FA_VK_MAX_DEVICES ? FA_VK_MAX_DEVICES : n;
        r = vkEnumeratePhysicalDevices(fa_vk.instance, &n, handles);
        if (r == VK_INCOMPLETE)
            r = VK_SUCCESS;
    }
    if (r != VK_SUCCESS) {
        snprintf(reason, reason_size, "vkEnumeratePhysicalDevices failed: %s",
                 fa_vk_result_name(r));
        return false;
    }
    int skipped = 0;
    for (uint32_t i = 0; i < n; i++) {
        fa_vk_physical *p = &fa_vk.devices[fa_vk.device_count];
        memset(p, 0, sizeof *p);
        p->handle = handles[i];
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(handles[i], &props);
        if (props.apiVersion < VK_API_VERSION_1_1) { /* 1.1 core: features2, 16-bit storage */
            skipped++;
            continue;
        }
        describe(p);
        fa_vk.device_count++;
    }
    if (!fa_vk.device_count) {
        snprintf(reason, reason_size, "%s",
                 skipped ? "no Vulkan 1.1 device (only 1.0 devices found)"
                         : "no Vulkan device found");
        return false;
    }
    *device_count = fa_vk.device_count;
    return true;
}

void fa_vk_device_info(int index, fa_device_info *out)
{
    if (index >= 0 && index < fa_vk.device_count)
        *out = fa_vk.devices[index].info;
}
