// SPDX-License-Identifier: MIT
/* What the cooperative-matrix path can do on one device (VK_KHR_cooperative_matrix): its
 * f16 x f16 -> f32 subgroup shapes, the limits the tile planner (vk_matrix_plan.c) needs, the
 * features the matrix shaders declare, and a sentence saying whether f16 runs on it and why. */
#include "vk_coopmat_compat.h"
#include "vk_internal.h"
#include "vk_matrix_catalogue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device's f16 x f16 + f32 -> f32 subgroup shapes, in its order. volk of Debian 12 predates
 * the extension, so the entry point is loaded here. */
static void list_shapes(VkPhysicalDevice device, fa_vk_matrix_caps *caps)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            fa_vk.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!get || get(device, &n, NULL) != VK_SUCCESS || !n)
        return;
    VkCooperativeMatrixPropertiesKHR *props = calloc(n, sizeof *props);
    if (!props)
        return;
    for (uint32_t i = 0; i < n; i++)
        props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    VkResult r = get(device, &n, props);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        const VkCooperativeMatrixPropertiesKHR *m = &props[i];
        if (m->AType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
            m->BType != VK_COMPONENT_TYPE_FLOAT16_KHR ||
            m->CType != VK_COMPONENT_TYPE_FLOAT32_KHR ||
            m->ResultType != VK_COMPONENT_TYPE_FLOAT32_KHR || m->saturatingAccumulation ||
            m->scope != VK_SCOPE_SUBGROUP_KHR || caps->shape_count == FA_VK_MATRIX_MAX_SHAPES)
            continue;
        caps->shapes[caps->shape_count++] =
            (fa_vk_matrix_shape){.m = m->MSize, .n = m->NSize, .k = m->KSize};
    }
    free(props);
}

/* The subgroup size the matrix units run at: NVIDIA's tensor cores and RDNA's WMMA (wave32
 * native) at 32; Intel's XMX at 16 where its shapes are 16 wide (Xe2) and 8 where they are 8
 * (Xe-HPG); any other device at its default size. */
static uint32_t preferred_subgroup(uint32_t vendor, const fa_vk_matrix_caps *caps,
                                   uint32_t default_size)
{
    switch (vendor) {
    case 0x10de:
    case 0x1002:
        return 32;
    case 0x8086:
        return caps->shape_count && caps->shapes[0].n >= 16 ? 16 : 8;
    default:
        return default_size;
    }
}

void fa_vk_matrix_probe(fa_vk_physical *p, const VkExtensionProperties *ext, uint32_t n_ext,
                        const VkPhysicalDeviceProperties *props,
                        const VkPhysicalDeviceSubgroupProperties *subgroup,
                        const VkPhysicalDeviceSubgroupSizeControlProperties *size_props)
{
    fa_vk_matrix_caps *caps = &p->matrix;
    memset(caps, 0, sizeof *caps);
    p->matrix_supported = p->size_control = p->full_subgroups = false;

    const uint32_t api =
        props->apiVersion < fa_vk.api_version ? props->apiVersion : fa_vk.api_version;
    const bool v12 = api >= VK_API_VERSION_1_2, v13 = api >= VK_API_VERSION_1_3;
    const bool has_matrix =
        fa_vk_has_extension(ext, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    const bool has_size_control =
        size_props &&
        (v13 || fa_vk_has_extension(ext, n_ext, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME));
    const bool has_memory_model =
        v12 || fa_vk_has_extension(ext, n_ext, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);

    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
    VkPhysicalDeviceSubgroupSizeControlFeatures size_control = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR matrix = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    VkPhysicalDeviceMaintenance4Features maintenance4 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    void **tail = &features.pNext;
    if (has_memory_model) {
        *tail = &memory_model;
        tail = &memory_model.pNext;
    }
    if (has_size_control) {
        *tail = &size_control;
        tail = &size_control.pNext;
    }
    if (v13) {
        *tail = &maintenance4;
        tail = &maintenance4.pNext;
    }
    if (has_matrix)
        *tail = &matrix;
    vkGetPhysicalDeviceFeatures2(p->handle, &features);

    const VkPhysicalDeviceLimits *limits = &props->limits;
    caps->shared_memory_bytes = limits->maxComputeSharedMemorySize;
    caps->max_invocations =
        limits->maxComputeWorkGroupInvocations < limits->maxComputeWorkGroupSize[0]
            ? limits->maxComputeWorkGroupInvocations
            : limits->maxComputeWorkGroupSize[0];
    p->size_control = has_size_control && size_control.subgroupSizeControl &&
                      (size_props->requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    p->full_subgroups = has_size_control && size_control.computeFullSubgroups;
    if (p->size_control && size_props->minSubgroupSize) {
        caps->subgroup_min = size_props->minSubgroupSize;
        caps->subgroup_max = size_props->maxSubgroupSize;
    } else {
        caps->subgroup_min = caps->subgroup_max = subgroup->subgroupSize;
    }
    if (has_matrix && matrix.cooperativeMatrix)
        list_shapes(p->handle, caps);
    caps->tilings = fa_vk_catalogue_tilings;
    caps->tiling_count = fa_vk_catalogue_count;
    caps->independent_subgroups = props->deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
    uint32_t sg = preferred_subgroup(props->vendorID, caps, subgroup->subgroupSize);
    sg = sg < caps->subgroup_min ? caps->subgroup_min : sg;
    caps->subgroup_preferred = sg > caps->subgroup_max ? caps->subgroup_max : sg;
    /* A pipeline that requires a subgroup size holds at most maxComputeWorkgroupSubgroups. */
    if (caps->subgroup_min != caps->subgroup_max && size_props->maxComputeWorkgroupSubgroups) {
        const uint64_t cap =
            (uint64_t)size_props->maxComputeWorkgroupSubgroups * caps->subgroup_preferred;
        if (cap < caps->max_invocations)
            caps->max_invocations = (uint32_t)cap;
    }

    const bool built = fa_vk_kernel_built(FA_VK_FWD_CM, FA_VK_F16_S16) &&
                       fa_vk_kernel_built(FA_VK_BWD_DKDV_CM, FA_VK_F16_S16) &&
                       fa_vk_kernel_built(FA_VK_BWD_DQ_CM, FA_VK_F16_S16);
    char not_built[128];
    snprintf(not_built, sizeof not_built, "matrix shaders not built (%.90s)",
             fa_vk_matrix_build_note[0] ? fa_vk_matrix_build_note : "unknown reason");
    /* The matrix shaders' row work (fa_matrix.glsl). */
    const VkSubgroupFeatureFlags subgroup_ops =
        VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
    const char *off = NULL;
    if (!has_matrix)
        off = "no VK_KHR_cooperative_matrix";
    else if (!matrix.cooperativeMatrix)
        off = "cooperativeMatrix feature not supported";
    else if (!v13)
        off = "Vulkan 1.3 needed (the matrix shaders are SPIR-V 1.6)";
    else if (!caps->shape_count)
        off = "no f16 x f16 -> f32 subgroup shape";
    else if (!p->info.f16) /* shaderFloat16, as describe() found it */
        off = "no shaderFloat16";
    else if (!p->storage16)
        off = "no 16-bit storage";
    else if (!(has_memory_model && memory_model.vulkanMemoryModel))
        off = "no vulkanMemoryModel";
    else if (!memory_model.vulkanMemoryModelDeviceScope) /* any device scope, with the model on */
        off = "no vulkanMemoryModelDeviceScope";
    else if (!maintenance4.maintenance4) /* SPIR-V 1.6 sets the workgroup size by LocalSizeId */
        off = "no maintenance4";
    else if (!(subgroup->supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
             (subgroup->supportedOperations & subgroup_ops) != subgroup_ops)
        off = "no subgroup basic and shuffle operations in compute shaders";
    else if (!built)
        off = not_built;

    fa_device_info *d = &p->info;
    if (off) {
        snprintf(p->matrix_note, sizeof p->matrix_note, "%s", off);
        snprintf(d->kernels, sizeof d->kernels, "scalar (%.110s)", p->matrix_note);
        return;
    }
    p->matrix_supported = true;
    snprintf(p->matrix_note, sizeof p->matrix_note, "cooperative matrix %ux%ux%u, subgroup %u",
             caps->shapes[0].m, caps->shapes[0].n, caps->shapes[0].k, caps->subgroup_preferred);
    snprintf(d->kernels, sizeof d->kernels, "f16: %.80s; bf16, f32: scalar", p->matrix_note);
}
