// SPDX-License-Identifier: MIT
/* The decoding path of the Vulkan backend (shaders/vulkan/attn_decode.comp, attn_merge.comp):
 * which forward calls take it and with what tiling, as a pure function of the device's limits and
 * the problem, unit-tested without a GPU (tests/test_vk_decode_plan.c). Not installed. */
#ifndef FA_VK_DECODE_PLAN_H
#define FA_VK_DECODE_PLAN_H

#include "fa_split.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Invocations per workgroup of both shaders (their local_size_x). */
#define FA_VK_DECODE_THREADS 128
/* The most query rows (query positions x the query heads of one KV head) a KV head may have for
 * the path; a workgroup takes up to FA_VK_DECODE_GROUP_ROWS of them. */
#define FA_VK_DECODE_MAX_ROWS 16
#define FA_VK_DECODE_GROUP_ROWS 8
/* Compute units assumed where the driver does not say (no VK_NV_shader_sm_builtins nor
 * VK_AMD_shader_core_properties). */
#define FA_VK_DECODE_DEFAULT_UNITS 16
/* Workgroups each compute unit is assumed to keep busy (the chunk count aims at one wave). 2,
 * not 4: with the merge in the split dispatch, half the chunks ran 8-41 % faster on the H200 at
 * B=1 Sk=32k and 128k, B=16 and B=64 Sk=4k (docs/PERF.md). */
#define FA_VK_DECODE_GROUPS_PER_UNIT 2
/* The decoding workspace begins with this many 32-bit counts, one per group of workgroups that
 * share their query rows (KV head x row group x batch entry): with several chunks, the group's
 * last workgroup to finish merges them and resets its count. More groups: attn_merge.comp. A
 * multiple of 64, so the chunks' O after the counts stays 256-byte aligned. */
#define FA_VK_DECODE_DONE_SLOTS 4096

typedef struct fa_vk_decode_device {
    uint32_t shared_memory_bytes;        /* maxComputeSharedMemorySize */
    uint32_t max_invocations;            /* per workgroup along x */
    uint32_t subgroup_min, subgroup_max; /* sizes the driver may run a pipeline at */
    bool subgroup_required;              /* a pipeline may require one of them (size control) */
    bool subgroup_arithmetic;            /* subgroup arithmetic in compute shaders */
    uint32_t compute_units;              /* 0: unknown */
    uint32_t max_group_count_y;
    uint64_t max_buffer_bytes; /* the workspace must fit one binding */
} fa_vk_decode_device;

typedef struct fa_vk_decode_problem {
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    uint32_t element_bytes; /* 2 (f16, bf16) or 4 (f32) */
    int32_t num_splits;     /* fa_attention_desc.num_splits: 0 = choose */
    bool stageable;         /* the build has the staged module for the call's storage */
} fa_vk_decode_problem;

/* What the staged module (FA_DEC_STAGE_K: each subgroup's K rows through shared memory)
 * declares beyond the others: 16 units of 16 bytes for each of the workgroup's lanes. */
#define FA_VK_DECODE_STAGED_BYTES (FA_VK_DECODE_THREADS * 16u * 16u)
/* and the largest head dim it serves (at 256 it spilled on NVIDIA's driver: docs/PERF.md) */
#define FA_VK_DECODE_STAGED_MAX_DIM 128

typedef struct fa_vk_decode_plan {
    uint32_t rows;            /* packed query rows per workgroup (RW in attn_decode.comp): 4 or 8 */
    uint32_t row_groups;      /* workgroups per KV head along the packed rows */
    uint32_t subgroup;        /* the subgroup size the pipeline runs at (SG; required if several) */
    uint32_t shared_bytes;    /* what the decode shader declares */
    bool staged;              /* the staged module serves it (FA_VK_DECODE_STAGED_*) */
    fa_split split;           /* over B x KV heads x row_groups items */
    bool merge_in_split;      /* split.splits > 1 and the groups have counts: no merge kernel */
    uint64_t workspace_bytes; /* counts, partial O and LSE where split.splits > 1, else 0 */
    uint64_t part_o_offset;   /* in floats, within the workspace (after the counts) */
    uint64_t part_lse_offset; /* in floats, within the workspace */
} fa_vk_decode_plan;

/* The shared memory attn_decode.comp declares for `rows` packed rows at head dim d with
 * subgroups of `subgroup`. */
uint32_t fa_vk_decode_shared_bytes(uint32_t d, uint32_t rows, uint32_t subgroup);

/* The shared memory attn_decode.comp declares with FA_DEC_MATRIX (the decoding forward on
 * cooperative matrices of m x m x m, vk_decode.c) for `rows` packed rows at head dim d. */
uint32_t fa_vk_decode_matrix_shared_bytes(uint32_t d, uint32_t rows, uint32_t subgroup, uint32_t m);

/* Whether the call takes the decoding path, and its plan; false with the reason in `why`. The
 * rule: at most FA_VK_DECODE_MAX_ROWS packed rows per KV head (4 or 8 a workgroup), head dim a
 * multiple of 8 up to 256, subgroup arithmetic, one subgroup size of 4 to 64 invocations (the
 * device's only one, else 32 or the nearest it has, required at pipeline creation), shared
 * memory for it; the staged module where the problem is stageable, at head dims up to
 * FA_VK_DECODE_STAGED_MAX_DIM, and FA_VK_DECODE_STAGED_BYTES more fit; the chunk count from
 * fa_split_choose for the device's compute units; with several chunks, the merge inside the split
 * kernel where there are at most FA_VK_DECODE_DONE_SLOTS groups. */
bool fa_vk_decode_plan_select(const fa_vk_decode_device *dev, const fa_vk_decode_problem *pb,
                              fa_vk_decode_plan *plan, char *why, size_t why_size);

#endif
