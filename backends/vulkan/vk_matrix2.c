// SPDX-License-Identifier: MIT
/* VK_NV_cooperative_matrix2 on one device, for the experimental forward attn_fwd_cm2.comp
 * (workgroup-scope matrices that the driver stages through shared memory, row reductions,
 * per-element functions, tensor-addressed loads and stores): the features that shader declares,
 * the limits and the f16 x f16 -> f32 flexible shapes at workgroup scope. Nothing chooses that
 * shader yet: FA_VULKAN_MATRIX2=1 enables the features on the device (vk_device.c) so that its
 * modules can stand in for catalogue modules (FA_VULKAN_SPV_DIR, bench/vk_cm2.sh). */
#include "vk_coopmat_compat.h"
#include "vk_internal.h"
#include <stdio.h>
#include <string.h>

static void list_flexible_shapes(VkPhysicalDevice device, fa_vk_matrix2 *m)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)
            vkGetInstanceProcAddr(
                fa_vk.instance,
                "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV props[32];
    uint32_t n = 0;
    if (!get || get(device, &n, NULL) != VK_SUCCESS || !n)
        return;
    n = n > 32 ? 32 : n;
    for (uint32_t i = 0; i < n; i++)
        props[i] = (VkCooperativeMatrixFlexibleDimensionsPropertiesNV){
            .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV};
    const VkResult r = get(device, &n, props);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        const VkCooperativeMatrixFlexibleDimensionsPropertiesNV *f = &props[i];
        if (!fa_vk_f16_matrix_types(f->AType, f->BType, f->CType, f->ResultType,
                                    f->saturatingAccumulation) ||
            m->shape_count == FA_VK_MATRIX2_MAX_SHAPES)
            continue;
        m->shapes[m->shape_count].m = f->MGranularity;
        m->shapes[m->shape_count].n = f->NGranularity;
        m->shapes[m->shape_count].k = f->KGranularity;
        m->shapes[m->shape_count].scope = (uint32_t)f->scope;
        m->shapes[m->shape_count++].invocations = f->workgroupInvocations;
    }
}

void fa_vk_matrix2_probe(fa_vk_physical *p, const VkExtensionProperties *ext, uint32_t n_ext)
{
    fa_vk_matrix2 *m = &p->matrix2;
    memset(m, 0, sizeof *m);
    m->listed = fa_vk_has_extension(ext, n_ext, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
    if (!m->listed || !p->matrix_supported)
        return;
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV features = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    VkPhysicalDeviceFeatures2 all = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                     .pNext = &features};
    vkGetPhysicalDeviceFeatures2(p->handle, &all);
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV limits = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &limits};
    vkGetPhysicalDeviceProperties2(p->handle, &props);
    m->max_workgroup = limits.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    m->max_dimension = limits.cooperativeMatrixFlexibleDimensionsMaxDimension;
    m->reserved_shared_bytes = limits.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
    if (features.cooperativeMatrixFlexibleDimensions)
        list_flexible_shapes(p->handle, m);
    const VkBool32 listed[7] = {features.cooperativeMatrixWorkgroupScope,
                                features.cooperativeMatrixFlexibleDimensions,
                                features.cooperativeMatrixReductions,
                                features.cooperativeMatrixConversions,
                                features.cooperativeMatrixPerElementOperations,
                                features.cooperativeMatrixTensorAddressing,
                                features.cooperativeMatrixBlockLoads};
    for (int i = 0; i < 7; i++)
        m->features[i] = listed[i] ? "WFRCPTB"[i] : '-';
    m->usable = features.cooperativeMatrixFlexibleDimensions &&
                features.cooperativeMatrixReductions && features.cooperativeMatrixConversions &&
                features.cooperativeMatrixPerElementOperations && m->shape_count > 0;
    m->tensor = features.cooperativeMatrixTensorAddressing;
    for (uint32_t i = 0; i < m->shape_count; i++)
        m->workgroup |= features.cooperativeMatrixWorkgroupScope &&
                        m->shapes[i].scope == VK_SCOPE_WORKGROUP_KHR;
}

void fa_vk_matrix2_note(const fa_vk_matrix2 *m, char *out, size_t out_size)
{
    if (!m->listed) {
        snprintf(out, out_size, "no VK_NV_cooperative_matrix2");
        return;
    }
    int len = snprintf(out, out_size,
                       "VK_NV_cooperative_matrix2 %s (features %s): workgroups up to %u, "
                       "dimensions up to %u, %u bytes of shared memory reserved; f16 shapes",
                       !m->usable     ? "lacks a feature the forward needs"
                       : m->workgroup ? "usable at workgroup scope"
                                      : "usable at subgroup scope",
                       m->features, m->max_workgroup, m->max_dimension, m->reserved_shared_bytes);
    for (uint32_t i = 0; i < m->shape_count && len > 0 && (size_t)len < out_size; i++)
        len += snprintf(out + len, out_size - (size_t)len, " %ux%ux%u %s%u", m->shapes[i].m,
                        m->shapes[i].n, m->shapes[i].k,
                        m->shapes[i].scope == VK_SCOPE_WORKGROUP_KHR ? "workgroup/" : "subgroup/",
                        m->shapes[i].invocations);
    if (!m->shape_count && len > 0 && (size_t)len < out_size)
        snprintf(out + len, out_size - (size_t)len, " none");
}
