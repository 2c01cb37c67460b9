// SPDX-License-Identifier: MIT
/* Shader modules (the SPIR-V embedded at build time, one per kernel and storage variant),
 * pipeline layouts, and compute pipelines specialized per (head dim, tile sizes, causal), built
 * on first use through the context's pipeline cache and kept for the context's life. */
#include "fa_platform.h"
#include "fa_spec_ids.h"
#include "vk_internal.h"
#include "vk_matrix_catalogue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FA_VK_SPV_(kernel, storage)                                                                \
    extern const unsigned char fa_spv_##kernel##_##storage[];                                      \
    extern const size_t fa_spv_##kernel##_##storage##_size;
#define FA_VK_SPV_KERNEL_(kernel)                                                                  \
    FA_VK_SPV_(kernel, f32)                                                                        \
    FA_VK_SPV_(kernel, f16_s16)                                                                    \
    FA_VK_SPV_(kernel, bf16_s16)                                                                   \
    FA_VK_SPV_(kernel, f16_words)                                                                  \
    FA_VK_SPV_(kernel, bf16_words)
FA_VK_SPV_KERNEL_(attn_fwd)
FA_VK_SPV_KERNEL_(attn_bwd_prep)
FA_VK_SPV_KERNEL_(attn_bwd_dkdv)
FA_VK_SPV_KERNEL_(attn_bwd_dq)
FA_VK_SPV_KERNEL_(attn_decode)
FA_VK_SPV_KERNEL_(attn_merge)
FA_VK_SPV_KERNEL_(attn_decode_sg32)
FA_VK_SPV_(attn_decode_staged, f16_s16)
FA_VK_SPV_(attn_fwd_cm, f16_s16)
FA_VK_SPV_(attn_bwd_dkdv_cm, f16_s16)
FA_VK_SPV_(attn_bwd_dq_cm, f16_s16)
FA_VK_SPV_(matrix_layout, f16_s16)

typedef struct spv_blob {
    const unsigned char *code;
    const size_t *size;
} spv_blob;

#define FA_VK_ROW_(kernel)                                                                         \
    {                                                                                              \
        {fa_spv_##kernel##_f32, &fa_spv_##kernel##_f32_size},                                      \
            {fa_spv_##kernel##_f16_s16, &fa_spv_##kernel##_f16_s16_size},                          \
            {fa_spv_##kernel##_bf16_s16, &fa_spv_##kernel##_bf16_s16_size},                        \
            {fa_spv_##kernel##_f16_words, &fa_spv_##kernel##_f16_words_size},                      \
            {fa_spv_##kernel##_bf16_words, &fa_spv_##kernel##_bf16_words_size},                    \
    }
static const spv_blob spirv[FA_VK_KERNEL_COUNT][FA_VK_STORAGE_COUNT] = {
    [FA_VK_FWD] = FA_VK_ROW_(attn_fwd),
    [FA_VK_BWD_PREP] = FA_VK_ROW_(attn_bwd_prep),
    [FA_VK_BWD_DKDV] = FA_VK_ROW_(attn_bwd_dkdv),
    [FA_VK_BWD_DQ] = FA_VK_ROW_(attn_bwd_dq),
    [FA_VK_DECODE] = FA_VK_ROW_(attn_decode),
    [FA_VK_MERGE] = FA_VK_ROW_(attn_merge),
    [FA_VK_DECODE_SG32] = FA_VK_ROW_(attn_decode_sg32),
    [FA_VK_DECODE_STAGED][FA_VK_F16_S16] = {fa_spv_attn_decode_staged_f16_s16,
                                            &fa_spv_attn_decode_staged_f16_s16_size},
    /* The matrix kernels: f16 in 16-bit storage only; the other variants stay NULL. */
    [FA_VK_FWD_CM][FA_VK_F16_S16] = {fa_spv_attn_fwd_cm_f16_s16, &fa_spv_attn_fwd_cm_f16_s16_size},
    [FA_VK_BWD_DKDV_CM][FA_VK_F16_S16] = {fa_spv_attn_bwd_dkdv_cm_f16_s16,
                                          &fa_spv_attn_bwd_dkdv_cm_f16_s16_size},
    [FA_VK_BWD_DQ_CM][FA_VK_F16_S16] = {fa_spv_attn_bwd_dq_cm_f16_s16,
                                        &fa_spv_attn_bwd_dq_cm_f16_s16_size},
    [FA_VK_MATRIX_LAYOUT][FA_VK_F16_S16] = {fa_spv_matrix_layout_f16_s16,
                                            &fa_spv_matrix_layout_f16_s16_size},
};

static const char *const kernel_names[FA_VK_KERNEL_COUNT] = {
    "attn_fwd",         "attn_bwd_prep",      "attn_bwd_dkdv",  "attn_bwd_dq", "attn_fwd_cm",
    "attn_bwd_dkdv_cm", "attn_bwd_dq_cm",     "matrix_layout",  "attn_decode", "attn_merge",
    "attn_decode_sg32", "attn_decode_staged", "attn_decode_cm",
};

const char *fa_vk_kernel_name(fa_vk_kernel kernel)
{
    return (unsigned)kernel < FA_VK_KERNEL_COUNT ? kernel_names[kernel] : "?";
}

/* The kernels that declare cooperative matrices (f16 in 16-bit storage only, run at the plan's
 * subgroup size). */
static bool is_matrix_kernel(fa_vk_kernel kernel)
{
    return kernel == FA_VK_FWD_CM || kernel == FA_VK_BWD_DKDV_CM || kernel == FA_VK_BWD_DQ_CM ||
           kernel == FA_VK_MATRIX_LAYOUT || kernel == FA_VK_DECODE_CM;
}

/* Storage-buffer bindings of each kernel, numbered 0..n-1 (see shaders/vulkan/). */
uint32_t fa_vk_kernel_bindings(fa_vk_kernel kernel)
{
    static const uint32_t n[FA_VK_KERNEL_COUNT] = {8, 4, 8, 7, 8, 8, 7, 1, 8, 3, 8, 8, 8};
    return n[kernel];
}

bool fa_vk_kernel_built(fa_vk_kernel kernel, fa_vk_storage storage)
{
    if ((unsigned)kernel >= FA_VK_KERNEL_COUNT || (unsigned)storage >= FA_VK_STORAGE_COUNT)
        return false;
    const spv_blob *blob = &spirv[kernel][storage];
    return blob->code && blob->size && *blob->size;
}

enum { PUSH_BYTES = 128 }; /* the minimum every Vulkan device guarantees */

static fa_status ensure_layout(fa_context *ctx, fa_vk_kernel kernel)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (st->layouts[kernel])
        return FA_OK;
    VkDescriptorSetLayoutBinding bindings[8];
    const uint32_t n = fa_vk_kernel_bindings(kernel);
    for (uint32_t i = 0; i < n; i++)
        bindings[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    const VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = n,
        .pBindings = bindings,
    };
    VkResult r =
        st->vk.vkCreateDescriptorSetLayout(st->device, &set_info, NULL, &st->set_layouts[kernel]);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateDescriptorSetLayout");
    const VkPushConstantRange push = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = PUSH_BYTES};
    const VkPipelineLayoutCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &st->set_layouts[kernel],
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &push,
    };
    r = st->vk.vkCreatePipelineLayout(st->device, &info, NULL, &st->layouts[kernel]);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreatePipelineLayout");
    return FA_OK;
}

/* FA_VULKAN_SPV_DIR=folder (an unstable developer knob, for timing shader variants in one run):
 * <folder>/<name>.spv, where present, replaces the embedded SPIR-V of module `name`
 * (<kernel>_<storage>, or cat_<catalogue name>). NULL: none. */
static uint32_t *load_override(fa_context *ctx, const char *name, size_t *size)
{
    const char *dir = fa_knob_value(ctx, FA_KNOB_VULKAN_SPV_DIR);
    if (!dir || !dir[0])
        return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.spv", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint32_t *code = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && n % 4 == 0 && fseek(f, 0, SEEK_SET) == 0 && (code = malloc((size_t)n)) &&
        fread(code, 1, (size_t)n, f) != (size_t)n) {
        free(code);
        code = NULL;
    }
    fclose(f);
    if (code) {
        *size = (size_t)n;
        fa_log(ctx, FA_LOG_WARN, "vulkan: %s from %s (FA_VULKAN_SPV_DIR)", name, path);
    }
    return code;
}

/* Shader module `name`: the SPIR-V of FA_VULKAN_SPV_DIR where it has one (load_override), else
 * the `size` embedded bytes at `bytes`, which need not be 4-byte aligned (pCode must be, so
 * they are copied). */
static fa_status create_module(fa_context *ctx, const char *name, const void *bytes, size_t size,
                               VkShaderModule *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    uint32_t *code = load_override(ctx, name, &size);
    if (!code && (code = malloc(size)))
        memcpy(code, bytes, size);
    if (!code)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot copy SPIR-V");
    const VkShaderModuleCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = size,
        .pCode = code,
    };
    VkResult r = st->vk.vkCreateShaderModule(st->device, &info, NULL, out);
    free(code);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateShaderModule");
    return FA_OK;
}

static fa_status ensure_module(fa_context *ctx, fa_vk_kernel kernel, fa_vk_storage storage)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (st->modules[kernel][storage])
        return FA_OK;
    if (is_matrix_kernel(kernel) && storage == FA_VK_F16_S16 &&
        !fa_vk_kernel_built(kernel, storage))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "vulkan: %s: matrix shaders not built (%s)",
                       kernel_names[kernel], fa_vk_matrix_build_note);
    if (!fa_vk_kernel_built(kernel, storage))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "vulkan: no SPIR-V for %s in storage variant %d",
                       kernel_names[kernel], (int)storage);
    /* Without the extension and features enabled the module would be invalid usage. */
    if (is_matrix_kernel(kernel) && !st->matrix)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "vulkan: %s: the matrix path is off (%s)",
                       kernel_names[kernel],
                       st->phys->matrix_supported ? "FA_VULKAN_MATRIX=0 or 32-bit words"
                                                  : st->phys->matrix_note);
    static const char *const storage_names[FA_VK_STORAGE_COUNT] = {"f32", "f16_s16", "bf16_s16",
                                                                   "f16_words", "bf16_words"};
    char name[96];
    snprintf(name, sizeof name, "%s_%s", kernel_names[kernel], storage_names[storage]);
    const spv_blob *blob = &spirv[kernel][storage];
    return create_module(ctx, name, blob->code, *blob->size, &st->modules[kernel][storage]);
}

/* Logs the driver's statistics of each executable of `pipeline` (VK_KHR_pipeline_executable_
 * properties; for tuning, see FA_VULKAN_PIPELINE_STATS in vk_device.c). */
static void log_statistics(fa_context *ctx, fa_vk_kernel kernel, VkPipeline pipeline)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (!st->vk.vkGetPipelineExecutablePropertiesKHR ||
        !st->vk.vkGetPipelineExecutableStatisticsKHR)
        return;
    const VkPipelineInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR,
                                    .pipeline = pipeline};
    VkPipelineExecutablePropertiesKHR props[4];
    uint32_t n = 4;
    for (uint32_t i = 0; i < n; i++)
        props[i] = (VkPipelineExecutablePropertiesKHR){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    VkResult r = st->vk.vkGetPipelineExecutablePropertiesKHR(st->device, &info, &n, props);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return;
    for (uint32_t e = 0; e < n; e++) {
        VkPipelineExecutableStatisticKHR stat[32];
        uint32_t m = 32;
        for (uint32_t i = 0; i < m; i++)
            stat[i] = (VkPipelineExecutableStatisticKHR){
                .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
        const VkPipelineExecutableInfoKHR exe = {.sType =
                                                     VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                                 .pipeline = pipeline,
                                                 .executableIndex = e};
        r = st->vk.vkGetPipelineExecutableStatisticsKHR(st->device, &exe, &m, stat);
        if (r != VK_SUCCESS && r != VK_INCOMPLETE)
            continue;
        char line[1024];
        int len = snprintf(line, sizeof line, "vulkan: %s statistics (%s):", kernel_names[kernel],
                           props[e].name);
        for (uint32_t i = 0; i < m && len > 0 && (size_t)len < sizeof line; i++) {
            const VkPipelineExecutableStatisticValueKHR *v = &stat[i].value;
            char value[32];
            if (stat[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR)
                snprintf(value, sizeof value, "%s", v->b32 ? "true" : "false");
            else if (stat[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR)
                snprintf(value, sizeof value, "%lld", (long long)v->i64);
            else if (stat[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR)
                snprintf(value, sizeof value, "%llu", (unsigned long long)v->u64);
            else
                snprintf(value, sizeof value, "%g", v->f64);
            len += snprintf(line + len, sizeof line - (size_t)len, " %s=%s;", stat[i].name, value);
        }
        fa_log(ctx, FA_LOG_INFO, "%s", line);
    }
}

/* The catalogue entry compiled for this matrix kernel's head dim, tiling and layout, or -1. */
static int catalogue_index(fa_vk_kernel kernel, const fa_vk_spec *spec)
{
    if (kernel != FA_VK_FWD_CM && kernel != FA_VK_BWD_DKDV_CM && kernel != FA_VK_BWD_DQ_CM &&
        kernel != FA_VK_DECODE_CM)
        return -1;
    const fa_vk_matrix_kernel k = kernel == FA_VK_FWD_CM        ? FA_VK_MATRIX_FWD
                                  : kernel == FA_VK_BWD_DKDV_CM ? FA_VK_MATRIX_DKDV
                                  : kernel == FA_VK_BWD_DQ_CM   ? FA_VK_MATRIX_DQ
                                                                : FA_VK_MATRIX_DECODE;
    for (uint32_t i = 0; i < fa_vk_catalogue_count; i++) {
        const fa_vk_matrix_tiling *t = &fa_vk_catalogue_tilings[i];
        if (t->kernel == k && t->d == spec->head_dim && t->shape.m == spec->cm_m &&
            t->shape.n == spec->cm_n && t->shape.k == spec->cm_k && t->subgroup == spec->cm_sg &&
            t->subgroups == spec->cm_nsg && t->tm == spec->cm_tm && t->bn == spec->cm_bn &&
            !memcmp(&t->layout, &spec->cm_layout, sizeof t->layout))
            return (int)i;
    }
    return -1;
}

static fa_status ensure_catalogue_module(fa_context *ctx, int i, VkShaderModule *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    if (!st->catalogue_modules &&
        !(st->catalogue_modules = calloc(fa_vk_catalogue_count, sizeof(VkShaderModule))))
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot allocate the catalogue");
    if (!st->catalogue_modules[i]) {
        char name[160];
        snprintf(name, sizeof name, "cat_%s", fa_vk_catalogue_names[i]);
        fa_status s = create_module(ctx, name, fa_vk_catalogue_code[i], *fa_vk_catalogue_size[i],
                                    &st->catalogue_modules[i]);
        if (s != FA_OK)
            return s;
    }
    *out = st->catalogue_modules[i];
    return FA_OK;
}

static fa_status create_pipeline(fa_context *ctx, fa_vk_kernel kernel, fa_vk_storage storage,
                                 const fa_vk_spec *spec, VkPipeline *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_status s = ensure_layout(ctx, kernel);
    /* A matrix kernel compiled ahead for this head dim and tiling, else the generic module. */
    const int cat = is_matrix_kernel(kernel) && st->matrix && storage == FA_VK_F16_S16
                        ? catalogue_index(kernel, spec)
                        : -1;
    VkShaderModule module = VK_NULL_HANDLE;
    if (s == FA_OK && cat >= 0)
        s = ensure_catalogue_module(ctx, cat, &module);
    else if (s == FA_OK && (s = ensure_module(ctx, kernel, storage)) == FA_OK)
        module = st->modules[kernel][storage];
    if (s != FA_OK)
        return s;
    const uint32_t values[FA_SPEC_COUNT] = {
        [FA_SPEC_HEAD_DIM] = spec->head_dim,
        [FA_SPEC_BWD_THREADS] = spec->bwd_threads,
        [FA_SPEC_BWD_BM] = spec->bwd_bm,
        [FA_SPEC_BWD_BN] = spec->bwd_bn,
        [FA_SPEC_CAUSAL] = spec->causal ? 1u : 0u,
        [FA_SPEC_FWD_THREADS] = spec->fwd_threads,
        [FA_SPEC_FWD_BM] = spec->fwd_bm,
        [FA_SPEC_FWD_BN] = spec->fwd_bn,
        [FA_SPEC_FWD_S_TX] = spec->fwd_s_tx,
        [FA_SPEC_FWD_O_TX] = spec->fwd_o_tx,
        [FA_SPEC_BWD_SX] = spec->bwd_sx,
        [FA_SPEC_BWD_KX] = spec->bwd_kx,
        [FA_SPEC_BWD_QX] = spec->bwd_qx,
        [FA_SPEC_BWD_DP] = spec->bwd_dp,
        [FA_SPEC_BWD_DC] = spec->bwd_dc,
        [FA_SPEC_BWD_RK] = spec->bwd_rk,
        [FA_SPEC_BWD_RQ] = spec->bwd_rq,
        [FA_SPEC_FWD_TILE16] = spec->fwd_tile16 ? 1u : 0u,
        [FA_SPEC_BWD_ALIGN4] = spec->bwd_align4,
        [FA_SPEC_BWD_UNROLL] = spec->bwd_unroll,
        [FA_SPEC_FWD_VARIANT] = spec->fwd_variant,
        [FA_SPEC_FWD_UNROLL] = spec->fwd_unroll,
        [FA_SPEC_GQA] = spec->gqa,
        [FA_SPEC_CM_M] = spec->cm_m,
        [FA_SPEC_CM_N] = spec->cm_n,
        [FA_SPEC_CM_K] = spec->cm_k,
        [FA_SPEC_CM_SG] = spec->cm_sg,
        [FA_SPEC_CM_NSG] = spec->cm_nsg,
        [FA_SPEC_CM_TM] = spec->cm_tm,
        [FA_SPEC_CM_BN] = spec->cm_bn,
        [FA_SPEC_CM_WG] = spec->cm_sg * spec->cm_nsg,
        [FA_SPEC_DEC_RW] = spec->dec_rw,
        [FA_SPEC_DEC_SG] = spec->dec_sg,
        [FA_SPEC_WINDOW] = spec->window ? 1u : 0u,
        [FA_SPEC_SOFTCAP] = spec->softcap ? 1u : 0u,
        [FA_SPEC_ALIBI] = spec->alibi ? 1u : 0u,
        [FA_SPEC_BIAS] = spec->bias,
        [FA_SPEC_DEC_MERGE] = spec->dec_merge ? 1u : 0u,
        [FA_SPEC_DEC_ALIGNED] = spec->dec_aligned ? 1u : 0u,
    };
    _Static_assert(FA_SPEC_COUNT == FA_SPEC_DEC_ALIGNED + 1, "FA_SPEC_COUNT counts every ID");
    /* Constant i at offset 4 i; zeros keep the default. The bools (causal, the forward's 16-bit
     * tiles, the backward's alignment) take 4 bytes as well (VkBool32), 0 or 1. */
    VkSpecializationMapEntry entries[sizeof values / sizeof values[0]];
    uint32_t n = 0;
    for (uint32_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (values[i])
            entries[n++] = (VkSpecializationMapEntry){.constantID = i, .offset = i * 4, .size = 4};
    const VkSpecializationInfo specialization = {
        .mapEntryCount = n,
        .pMapEntries = entries,
        .dataSize = sizeof values,
        .pData = values,
    };
    /* The matrix kernels and the decoding forward run at their plan's subgroup size: where the
     * device has several, it is required, with full subgroups where the device can promise them
     * (both features are enabled with the matrix path's: vk_device.c, fa_vk_decode_plan_for). */
    const bool decode = kernel == FA_VK_DECODE || kernel == FA_VK_DECODE_SG32 ||
                        kernel == FA_VK_DECODE_STAGED || kernel == FA_VK_DECODE_CM;
    const VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = decode ? spec->dec_sg : spec->cm_sg,
    };
    const fa_vk_physical *ph = st->phys;
    const bool require_size =
        (is_matrix_kernel(kernel) || (decode && st->matrix)) && ph->size_control &&
        (decode ? ph->info.subgroup_size_min != ph->info.subgroup_size_max
                : st->matrix_caps.subgroup_min != st->matrix_caps.subgroup_max);
    /* The decoding kernels reduce over whole subgroups (subgroupMax, subgroupAdd). */
    const bool whole = st->matrix && (decode || kernel == FA_VK_MERGE);
    VkPipelineShaderStageCreateFlags stage_flags = 0;
    if ((require_size || whole) && ph->full_subgroups)
        stage_flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    const VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = st->pipeline_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = require_size ? &subgroup : NULL,
                .flags = stage_flags,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = &specialization,
            },
        .layout = st->layouts[kernel],
    };
    const double started = fa_clock_seconds();
    VkResult r = st->vk.vkCreateComputePipelines(st->device, st->cache, 1, &info, NULL, out);
    if (r == VK_SUCCESS && st->pipeline_rebuild) {
        st->vk.vkDestroyPipeline(st->device, *out, NULL);
        r = st->vk.vkCreateComputePipelines(st->device, st->cache, 1, &info, NULL, out);
    }
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkCreateComputePipelines");
    const double ms = 1e3 * (fa_clock_seconds() - started);
    if (st->pipeline_stats)
        log_statistics(ctx, kernel, *out);
    if (is_matrix_kernel(kernel))
        fa_log(ctx, FA_LOG_DEBUG,
               "vulkan: built %s (variant %d) D=%u causal=%u gqa=%u M=%u N=%u K=%u SG=%u NSG=%u "
               "TM=%u BN=%u layout=%u.%u.%u.%u a=0x%x window=%u softcap=%u alibi=%u bias=%u%s, "
               "module %s%s, %.0f ms",
               kernel_names[kernel], (int)storage, spec->head_dim, spec->causal, spec->gqa,
               spec->cm_m, spec->cm_n, spec->cm_k, spec->cm_sg, spec->cm_nsg, spec->cm_tm,
               spec->cm_bn, spec->cm_layout.elements, spec->cm_layout.slot_shift,
               spec->cm_layout.slot_bits, spec->cm_layout.lane_xor, spec->cm_layout.a_from_c,
               spec->window, spec->softcap, spec->alibi, spec->bias,
               require_size ? " (subgroup size required)" : "", cat >= 0 ? "cat_" : "generic",
               cat >= 0 ? fa_vk_catalogue_names[cat] : "", ms);
    else if (decode)
        fa_log(ctx, FA_LOG_DEBUG,
               "vulkan: built %s (variant %d) D=%u causal=%u gqa=%u rows=%u SG=%u merge=%s "
               "aligned=%u%s, %.0f ms",
               kernel_names[kernel], (int)storage, spec->head_dim, spec->causal, spec->gqa,
               spec->dec_rw, spec->dec_sg, spec->dec_merge ? "here" : "kernel", spec->dec_aligned,
               require_size ? " (subgroup size required)" : "", ms);
    else if (kernel == FA_VK_FWD)
        fa_log(
            ctx, FA_LOG_DEBUG,
            "vulkan: built %s (variant %d) D=%u causal=%u gqa=%u BM=%u BN=%u NT=%u S_TX=%u "
            "O_TX=%u tiles=%s tuning=%u unroll=%u window=%u softcap=%u alibi=%u bias=%u, %.0f ms",
            kernel_names[kernel], (int)storage, spec->head_dim, spec->causal, spec->gqa,
            spec->fwd_bm, spec->fwd_bn, spec->fwd_threads, spec->fwd_s_tx, spec->fwd_o_tx,
            spec->fwd_tile16 ? "16-bit" : "f32", spec->fwd_variant, spec->fwd_unroll, spec->window,
            spec->softcap, spec->alibi, spec->bias, ms);
    else
        fa_log(ctx, FA_LOG_DEBUG,
               "vulkan: built %s (variant %d) D=%u causal=%u gqa=%u BM=%u BN=%u NT=%u SX=%u KX=%u "
               "QX=%u DP=%u DC=%u RK=%u RQ=%u align4=%u unroll=%u window=%u softcap=%u alibi=%u "
               "bias=%u, %.0f ms",
               kernel_names[kernel], (int)storage, spec->head_dim, spec->causal, spec->gqa,
               spec->bwd_bm, spec->bwd_bn, spec->bwd_threads, spec->bwd_sx, spec->bwd_kx,
               spec->bwd_qx, spec->bwd_dp, spec->bwd_dc, spec->bwd_rk, spec->bwd_rq,
               spec->bwd_align4, spec->bwd_unroll, spec->window, spec->softcap, spec->alibi,
               spec->bias, ms);
    return FA_OK;
}

fa_status fa_vk_pipeline_get(fa_context *ctx, fa_vk_kernel kernel, fa_vk_storage storage,
                             const fa_vk_spec *spec, VkPipeline *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    for (size_t i = 0; i < st->pipeline_count; i++) {
        const fa_vk_pipeline *p = &st->pipelines[i];
        if (p->kernel == kernel && p->storage == storage && !memcmp(&p->spec, spec, sizeof *spec)) {
            *out = p->pipeline;
            return FA_OK;
        }
    }
    if (st->pipeline_count == st->pipeline_capacity) {
        size_t cap = st->pipeline_capacity ? 2 * st->pipeline_capacity : 16;
        fa_vk_pipeline *grown = realloc(st->pipelines, cap * sizeof *grown);
        if (!grown)
            return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot grow pipeline list");
        st->pipelines = grown;
        st->pipeline_capacity = cap;
    }
    fa_status s = create_pipeline(ctx, kernel, storage, spec, out);
    if (s != FA_OK)
        return s;
    st->pipelines[st->pipeline_count++] =
        (fa_vk_pipeline){.kernel = kernel, .storage = storage, .spec = *spec, .pipeline = *out};
    return FA_OK;
}

fa_status fa_vk_dispatch(fa_context *ctx, fa_vk_kernel kernel, VkPipeline pipeline,
                         VkBuffer const *buffers, const void *push, uint32_t push_size, uint32_t gx,
                         uint32_t gy, uint32_t gz)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const VkDescriptorSetAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = st->descriptors,
        .descriptorSetCount = 1,
        .pSetLayouts = &st->set_layouts[kernel],
    };
    VkDescriptorSet set;
    VkResult r = st->vk.vkAllocateDescriptorSets(st->device, &alloc, &set);
    if (r != VK_SUCCESS)
        return fa_vk_fail(ctx, r, "vkAllocateDescriptorSets");
    const uint32_t n = fa_vk_kernel_bindings(kernel);
    VkDescriptorBufferInfo infos[8];
    VkWriteDescriptorSet writes[8];
    for (uint32_t i = 0; i < n; i++) {
        infos[i] =
            (VkDescriptorBufferInfo){.buffer = buffers[i], .offset = 0, .range = VK_WHOLE_SIZE};
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[i],
        };
    }
    st->vk.vkUpdateDescriptorSets(st->device, n, writes, 0, NULL);
    st->vk.vkCmdBindPipeline(st->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    st->vk.vkCmdBindDescriptorSets(st->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, st->layouts[kernel], 0,
                                   1, &set, 0, NULL);
    if (push_size)
        st->vk.vkCmdPushConstants(st->cmd, st->layouts[kernel], VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                  push_size, push);
    st->vk.vkCmdDispatch(st->cmd, gx, gy, gz);
    fa_vk_profile_dispatch(st, kernel);
    return FA_OK;
}

void fa_vk_pipelines_release(fa_vk_state *st)
{
    for (size_t i = 0; i < st->pipeline_count; i++)
        st->vk.vkDestroyPipeline(st->device, st->pipelines[i].pipeline, NULL);
    free(st->pipelines);
    st->pipelines = NULL;
    st->pipeline_count = st->pipeline_capacity = 0;
    for (uint32_t i = 0; st->catalogue_modules && i < fa_vk_catalogue_count; i++)
        if (st->catalogue_modules[i])
            st->vk.vkDestroyShaderModule(st->device, st->catalogue_modules[i], NULL);
    free(st->catalogue_modules);
    st->catalogue_modules = NULL;
    for (int k = 0; k < FA_VK_KERNEL_COUNT; k++) {
        for (int s = 0; s < FA_VK_STORAGE_COUNT; s++)
            if (st->modules[k][s])
                st->vk.vkDestroyShaderModule(st->device, st->modules[k][s], NULL);
        if (st->layouts[k])
            st->vk.vkDestroyPipelineLayout(st->device, st->layouts[k], NULL);
        if (st->set_layouts[k])
            st->vk.vkDestroyDescriptorSetLayout(st->device, st->set_layouts[k], NULL);
    }
}
