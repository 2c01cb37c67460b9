// SPDX-License-Identifier: MIT
/* What the Vulkan backend's files share: the per-process instance and device list, the
 * per-context state, and the helpers each file provides. Not installed. */
#ifndef FA_VK_INTERNAL_H
#define FA_VK_INTERNAL_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <volk.h>

#include "fa_internal.h"
#include "vk_decode_plan.h"
#include "vk_matrix_plan.h"

#define FA_VK_MAX_DEVICES 16

/* One physical device as probed: what the device list reports and what context_init needs. */
typedef struct fa_vk_physical {
    VkPhysicalDevice handle;
    fa_device_info info;
    uint32_t api_version;
    uint32_t vendor_id, device_id;
    uint8_t cache_uuid[VK_UUID_SIZE];
    uint8_t device_uuid[VK_UUID_SIZE]; /* VkPhysicalDeviceIDProperties: the GPU across instances */
    uint32_t max_push_constants;
    uint32_t max_group_count[3];
    uint32_t max_group_size_x; /* maxComputeWorkGroupSize[0] */
    bool storage16;            /* storageBuffer16BitAccess */
    bool portability_subset;   /* VK_KHR_portability_subset must be enabled */
    bool executable_props;     /* VK_KHR_pipeline_executable_properties */
    bool size_control;         /* subgroupSizeControl for compute: pipelines may require a size */
    bool full_subgroups;       /* computeFullSubgroups */
    bool subgroup_arithmetic;  /* subgroup arithmetic operations in compute shaders */
    /* Mesa's llvmpipe (lavapipe) ends a shader invocation after 65,535 loop iterations in all,
     * silently (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS): vk_attention.c refuses the calls whose
     * key or query loops could reach it. */
    bool loop_limit;
    /* The cooperative-matrix path (VK_KHR_cooperative_matrix): usable when matrix_supported;
     * matrix_note says why not, or which shape and subgroup size it runs at. */
    bool matrix_supported;
    fa_vk_matrix_caps matrix;
    char matrix_note[128];
} fa_vk_physical;

/* Process-wide state, filled once by probe (vk_instance.c). */
typedef struct fa_vk_process {
    VkInstance instance;
    uint32_t api_version; /* the instance's: devices run at most this version */
    bool validation;      /* FA_VULKAN_VALIDATION=1 and the layer was found */
    char validation_note[160];
    int device_count;
    fa_vk_physical devices[FA_VK_MAX_DEVICES];
} fa_vk_process;

extern fa_vk_process fa_vk;

/* A device buffer (the handle behind an fa_buffer, and the backward's workspace). */
typedef struct fa_vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    void *mapped; /* staging only */
    bool wrapped; /* the application's VkBuffer (fa_buffer_wrap_vulkan): never destroyed here */
} fa_vk_buffer;

typedef enum fa_vk_kernel {
    FA_VK_FWD = 0,
    FA_VK_BWD_PREP,
    FA_VK_BWD_DKDV,
    FA_VK_BWD_DQ,
    FA_VK_FWD_CM, /* cooperative-matrix kernels: f16 in 16-bit storage only */
    FA_VK_BWD_DKDV_CM,
    FA_VK_BWD_DQ_CM,
    FA_VK_MATRIX_LAYOUT, /* the accumulator layout probe (vk_matrix_layout.c) */
    FA_VK_DECODE,        /* the decoding forward and its merge (vk_decode.c) */
    FA_VK_MERGE,
    FA_VK_DECODE_SG32,   /* the decoding forward compiled for subgroups of 32 and unrolled */
    FA_VK_DECODE_STAGED, /* the decoding forward with K staged in shared memory (f16, 16-bit) */
    FA_VK_DECODE_CM,     /* the decoding forward on cooperative matrices (catalogue modules) */
    FA_VK_KERNEL_COUNT
} fa_vk_kernel;

/* Storage variants of each kernel: f32, f16/bf16 in 16-bit buffers, f16/bf16 in 32-bit words. */
typedef enum fa_vk_storage {
    FA_VK_F32 = 0,
    FA_VK_F16_S16,
    FA_VK_BF16_S16,
    FA_VK_F16_WORDS,
    FA_VK_BF16_WORDS,
    FA_VK_STORAGE_COUNT
} fa_vk_storage;

/* The specialization constants of one pipeline (IDs and meanings in shaders/vulkan/fa_spec_ids.h):
 * the common head dim, causal flag and GQA ratio, the scalar backward's and forward's tilings and
 * tuning, and the matrix kernels' plan. Zero leaves the shader's default (false for the bools);
 * each kernel sets only its own. */
typedef struct fa_vk_spec {
    uint32_t head_dim, bwd_threads, bwd_bm, bwd_bn;
    uint32_t causal, gqa; /* gqa: query heads per key/value head (0 in passes without heads) */
    uint32_t fwd_threads, fwd_bm, fwd_bn, fwd_s_tx, fwd_o_tx;
    uint32_t bwd_sx, bwd_kx, bwd_qx, bwd_dp, bwd_dc, bwd_rk, bwd_rq;
    uint32_t fwd_tile16;
    uint32_t bwd_align4, bwd_unroll;
    uint32_t fwd_variant, fwd_unroll;
    /* Cooperative-matrix kernels (shaders/vulkan/fa_spec_ids.h): the plan's shape, subgroup
     * size, subgroups per workgroup, row blocks per subgroup and columns per step, and the
     * accumulator layout its catalogue module was compiled for (zero: none). */
    uint32_t cm_m, cm_n, cm_k, cm_sg, cm_nsg, cm_tm, cm_bn;
    fa_vk_matrix_layout cm_layout;
    uint32_t dec_rw, dec_sg, dec_merge; /* the decoding forward's plan (vk_decode_plan.h) */
    uint32_t dec_aligned;               /* attn_decode.comp's ALIGNED */
    uint32_t window, softcap, alibi;    /* the variants (bools; the matrix kernels' too) */
    uint32_t bias; /* and the bias's fa_dtype, 0 for none (scalar passes only) */
} fa_vk_spec;

typedef struct fa_vk_pipeline {
    fa_vk_kernel kernel;
    fa_vk_storage storage;
    fa_vk_spec spec;
    VkPipeline pipeline;
} fa_vk_pipeline;

/* Submissions a context keeps in flight: a call records while the GPU still runs the ones
 * before it, so the GPU does not idle for the host between calls; the call FA_VK_FRAMES later
 * waits for the first. */
enum { FA_VK_FRAMES = 4 };

/* One submission slot: its command buffer, the fence it signals and the descriptor pool its
 * sets come from (reset when the slot is reused). */
typedef struct fa_vk_frame {
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool descriptors;
    bool pending; /* submitted, its fence not yet waited for */
} fa_vk_frame;

/* Per context: one VkDevice, its function table, one compute queue, a ring of submission slots
 * (cmd and descriptors name the slot being recorded), the pipelines built so far and the
 * pipeline cache. */
typedef struct fa_vk_state {
    const fa_vk_physical *phys;
    VkDevice device;
    struct VolkDeviceTable vk;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool pool;
    fa_vk_frame frames[FA_VK_FRAMES];
    unsigned frame;     /* the slot recorded last */
    unsigned in_flight; /* slots in use: FA_VK_FRAMES, or FA_VULKAN_IN_FLIGHT (1 to it) */
    VkCommandBuffer cmd;
    VkDescriptorPool descriptors;
    bool recording;
    bool adopted;   /* the device is the application's (flashattn/vulkan.h): never destroyed here */
    bool storage16; /* 16-bit storage enabled (FA_VULKAN_NO_16BIT_STORAGE=1 turns it off) */
    bool pipeline_stats;   /* FA_VULKAN_PIPELINE_STATS=1: each new pipeline's statistics logged */
    bool pipeline_rebuild; /* FA_VULKAN_PIPELINE_CACHE=rebuild: each pipeline built twice */
    double wait_spin_s;    /* FA_VULKAN_WAIT_SPIN_US: fence polling before a sleeping wait */
    bool matrix;           /* the cooperative-matrix kernels serve f16 (FA_VULKAN_MATRIX=0: off) */
    fa_vk_matrix_caps matrix_caps; /* the device's, with the layouts probed on this context */
    uint32_t memory_type_device, memory_type_staging;
    VkPhysicalDeviceMemoryProperties memory_props;
    fa_vk_buffer staging;
    fa_vk_buffer workspace;
    /* The decoding path's: its counts (vk_decode_plan.h), then the chunks' O and LSE. */
    fa_vk_buffer decode_workspace;
    bool decode_counts_unset; /* a new decoding workspace: its counts not yet zeroed */
    VkPipelineCache cache;
    VkDescriptorSetLayout set_layouts[FA_VK_KERNEL_COUNT];
    VkPipelineLayout layouts[FA_VK_KERNEL_COUNT];
    VkShaderModule modules[FA_VK_KERNEL_COUNT][FA_VK_STORAGE_COUNT];
    VkShaderModule *catalogue_modules; /* one per vk_matrix_catalogue.h entry, made on first use */
    fa_vk_pipeline *pipelines;
    size_t pipeline_count, pipeline_capacity;
    struct fa_vk_profile *profile; /* FA_VULKAN_PROFILE=1 (vk_profile.c); NULL: off */
} fa_vk_state;

static inline fa_vk_state *fa_vk_state_of(fa_context *ctx)
{
    return ctx->backend_state;
}

/* The storage variant of the kernels that serve `dtype` on this context. */
static inline fa_vk_storage fa_vk_storage_of(const fa_vk_state *st, fa_dtype dtype)
{
    if (dtype == FA_DTYPE_F32)
        return FA_VK_F32;
    if (dtype == FA_DTYPE_F16)
        return st->storage16 ? FA_VK_F16_S16 : FA_VK_F16_WORDS;
    return st->storage16 ? FA_VK_BF16_S16 : FA_VK_BF16_WORDS;
}

/* A view in push-constant form: offset and strides in elements (a size-1 dimension's stride
 * is irrelevant and may be huge, so it becomes 0). */
typedef struct fa_vk_push_view {
    uint32_t off, sb, ss, sh;
} fa_vk_push_view;

static inline fa_vk_push_view fa_vk_pv(const fa_view *v, int64_t batch, int64_t seq, int64_t heads)
{
    return (fa_vk_push_view){(uint32_t)v->offset, batch > 1 ? (uint32_t)v->stride_b : 0,
                             seq > 1 ? (uint32_t)v->stride_s : 0,
                             heads > 1 ? (uint32_t)v->stride_h : 0};
}

/* Whether the view's offset and strides are all multiples of n elements (a power of two). */
static inline bool fa_vk_pv_aligned(fa_vk_push_view v, uint32_t n)
{
    return ((v.off | v.sb | v.ss | v.sh) & (n - 1u)) == 0;
}

/* The VkBuffer behind a view. */
static inline VkBuffer fa_vk_handle(const fa_view *v)
{
    return ((const fa_vk_buffer *)v->buffer)->buffer;
}

#define FA_VK_LOG2E 1.4426950408889634f

/* The push constants every forward kernel begins with (FA_FWD_PARAMS in
 * shaders/vulkan/fa_params.glsl), and their values for a call (vk_attention.c). */
typedef struct fa_vk_fwd_push {
    fa_vk_push_view q, k, v, o, lse;
    uint32_t seq_q, seq_k, has_lse;
    float scale_log2;
    uint32_t sl_off, sl_sb, has_sl;
} fa_vk_fwd_push;
fa_vk_fwd_push fa_vk_fwd_push_of(const fa_attention_call *call);

/* The push constants the scalar forward (after fa_vk_fwd_push) and the backward passes end with
 * (FA_VARIANT_MEMBERS in shaders/vulkan/fa_params.glsl): the raw score's multiplier (scale
 * log2 e, or with a softcap 2 log2 e scale / softcap), softcap log2 e, and the window's bounds
 * with causal folded in (-1: none). */
typedef struct fa_vk_variant_push {
    float score_mul, cap_log2;
    int32_t win_left, win_right;
} fa_vk_variant_push;
fa_vk_variant_push fa_vk_variant_push_of(const fa_attention_call *call);

/* vk_instance.c: errors and validation messages. */
const char *fa_vk_result_name(VkResult result);
/* Maps a failed VkResult to a status and records "<what>: <VkResult name>" on ctx. */
fa_status fa_vk_fail(fa_context *ctx, VkResult result, const char *what);
/* FA_OK, or FA_ERROR_DEVICE with the first validation message recorded since the last check. */
fa_status fa_vk_check_validation(fa_context *ctx);
bool fa_vk_probe(int *device_count, char *reason, size_t reason_size);
/* Whether `name` is among the n extensions of `ext`. */
bool fa_vk_has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name);
void fa_vk_device_info(int index, fa_device_info *out);

/* vk_matrix.c: fills p's matrix_supported, matrix, matrix_note, size_control, full_subgroups
 * and info.kernels from the device (called by describe() once it has set p->storage16 and
 * p->info.f16, with the device's extension list and the properties it queried; size_props NULL
 * where it had no subgroup size control to query). */
void fa_vk_matrix_probe(fa_vk_physical *p, const VkExtensionProperties *ext, uint32_t n_ext,
                        const VkPhysicalDeviceProperties *props,
                        const VkPhysicalDeviceSubgroupProperties *subgroup,
                        const VkPhysicalDeviceSubgroupSizeControlProperties *size_props);
/* Generated by backends/vulkan/matrix_shaders.cmake: why the build has no matrix shaders, ""
 * when it has them. */
extern const char fa_vk_matrix_build_note[];

/* vk_matrix_layout.c: probes, on the context's device, the accumulator layout of each shape a
 * catalogue module was compiled for a layout of, into st->matrix_caps.layouts (left zero where
 * the probe cannot run or the layout has no usable form; never fails the context). */
void fa_vk_matrix_layout_probe(fa_context *ctx);
/* A matrix kernel's specialization (its spec's cm_* fields) from its plan (vk_attention.c). */
void fa_vk_matrix_spec(const fa_vk_matrix_plan *p, fa_vk_spec *spec);

/* vk_device.c */
fa_status fa_vk_context_init(fa_context *ctx, int index);
/* The context's submission objects, pipeline cache and probes, on ctx->backend_state's device
 * (made by fa_vk_context_init or adopted by fa_vk_context_adopt); releases the state on
 * failure. */
fa_status fa_vk_context_open(fa_context *ctx);
/* vk_interop.c: a context on the application's device and queue (fa_vulkan_objects; iface
 * context_adopt), and buffers over its VkBuffers (iface buffer_wrap). */
fa_status fa_vk_context_adopt(fa_context *ctx, const void *app, int *index);
fa_status fa_vk_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                            void **handle);
void fa_vk_context_release(fa_context *ctx);
/* Waits for every submission in flight. */
fa_status fa_vk_wait(fa_context *ctx);
/* Whether a submission may still run. */
bool fa_vk_busy(const fa_vk_state *st);
fa_status fa_vk_synchronize(fa_context *ctx);
/* Begins the next slot's command buffer (after waiting for that slot's last submission), with a
 * barrier against earlier submissions. */
fa_status fa_vk_begin(fa_context *ctx);
/* Ends and submits it; waits for every submission when `wait`. */
fa_status fa_vk_submit(fa_context *ctx, bool wait);
/* fa_vk_submit where s is FA_OK; else ends a recording in progress unsubmitted and returns s. */
fa_status fa_vk_finish(fa_context *ctx, fa_status s, bool wait);
/* Compute/transfer write -> compute/transfer read barrier inside the command buffer. */
void fa_vk_barrier(fa_vk_state *st);
void fa_vk_pipeline_cache_load(fa_context *ctx);
void fa_vk_pipeline_cache_save(fa_context *ctx);

/* vk_memory.c */
fa_status fa_vk_buffer_create(fa_context *ctx, VkDeviceSize size, bool staging, fa_vk_buffer *out);
void fa_vk_buffer_destroy(fa_vk_state *st, fa_vk_buffer *buf);
fa_status fa_vk_buffer_alloc(fa_context *ctx, size_t size, void **handle);
void fa_vk_buffer_free(fa_context *ctx, void *handle);
fa_status fa_vk_buffer_write(fa_context *ctx, void *handle, size_t offset, const void *src,
                             size_t size);
fa_status fa_vk_buffer_read(fa_context *ctx, void *handle, size_t offset, void *dst, size_t size);
/* fa_backend_iface.copy_regions: one vkCmdCopyBuffer, submitted without waiting. */
fa_status fa_vk_copy_regions(fa_context *ctx, void *src, void *dst, const fa_copy_region *regions,
                             size_t n);
/* Grows the context's workspace, or the decoding path's (*fresh: a new buffer, its contents
 * undefined), to at least `size` bytes (waits first; tracked); releases one. */
fa_status fa_vk_workspace(fa_context *ctx, VkDeviceSize size);
fa_status fa_vk_decode_workspace(fa_context *ctx, VkDeviceSize size, bool *fresh);
void fa_vk_workspace_release(fa_context *ctx, fa_vk_buffer *buf);

/* vk_profile.c (FA_VULKAN_PROFILE=1; each does nothing where it is off): the query pool; a
 * timestamp at the start of the recording and after each dispatch; the host's clock around the
 * slot's vkQueueSubmit (before: false, after: true); the slot's timestamps read once its fence
 * has passed; the summary logged at each synchronize. */
void fa_vk_profile_open(fa_context *ctx, fa_vk_state *st);
void fa_vk_profile_release(fa_vk_state *st);
void fa_vk_profile_begin(fa_vk_state *st);
void fa_vk_profile_dispatch(fa_vk_state *st, fa_vk_kernel kernel);
void fa_vk_profile_submit(fa_vk_state *st, bool submitted);
void fa_vk_profile_collect(fa_vk_state *st, unsigned frame);
void fa_vk_profile_report(fa_context *ctx, fa_vk_state *st);
const char *fa_vk_kernel_name(fa_vk_kernel kernel);

/* vk_decode.c: whether a forward call takes the decoding path (vk_decode_plan.h), with its
 * plan; and that forward, recorded and submitted. */
bool fa_vk_decode_plan_for(fa_context *ctx, const fa_attention_call *call, fa_vk_decode_plan *plan);
fa_status fa_vk_decode_forward(fa_context *ctx, const fa_attention_call *call,
                               const fa_vk_decode_plan *plan);

/* vk_pipeline.c */
uint32_t fa_vk_kernel_bindings(fa_vk_kernel kernel);
/* Whether the library holds SPIR-V for `kernel` in `storage` (the matrix kernels exist only in
 * FA_VK_F16_S16, and only when the build's glslang had GL_KHR_cooperative_matrix). */
bool fa_vk_kernel_built(fa_vk_kernel kernel, fa_vk_storage storage);
fa_status fa_vk_pipeline_get(fa_context *ctx, fa_vk_kernel kernel, fa_vk_storage storage,
                             const fa_vk_spec *spec, VkPipeline *out);
/* Allocates a descriptor set of `kernel`'s layout, binds `buffers` (whole), the pipeline, the
 * push constants, and records the dispatch. */
fa_status fa_vk_dispatch(fa_context *ctx, fa_vk_kernel kernel, VkPipeline pipeline,
                         VkBuffer const *buffers, const void *push, uint32_t push_size, uint32_t gx,
                         uint32_t gy, uint32_t gz);
void fa_vk_pipelines_release(fa_vk_state *st);

#endif
