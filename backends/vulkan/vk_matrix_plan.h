// SPDX-License-Identifier: MIT
/* The tile planner of the cooperative-matrix shaders (shaders/vulkan/attn_*_cm.comp): a pure
 * function of the device's matrix shapes and limits, the head dim and a tuning override, with no
 * driver call, so that it is unit-tested on property sets of GPUs that are not here
 * (tests/test_vk_matrix_plan.c). Not installed. */
#ifndef FA_VK_MATRIX_PLAN_H
#define FA_VK_MATRIX_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FA_VK_MATRIX_MAX_SHAPES 16

/* One M x N x K shape the device lists for f16 x f16 + f32 -> f32 at subgroup scope. */
typedef struct fa_vk_matrix_shape {
    uint32_t m, n, k;
} fa_vk_matrix_shape;

typedef enum fa_vk_matrix_kernel {
    FA_VK_MATRIX_FWD = 0,      /* rows: queries; steps: key tiles of bn */
    FA_VK_MATRIX_DKDV,         /* rows: keys; steps: query tiles of bn */
    FA_VK_MATRIX_DQ,           /* rows: queries; steps: key tiles of bn */
    FA_VK_MATRIX_KERNEL_COUNT, /* the kernels the planner tiles; past them, catalogue kinds: */
    /* the decoding forward (attn_decode.comp's FA_DEC_MATRIX; vk_decode.c picks its module) */
    FA_VK_MATRIX_DECODE = FA_VK_MATRIX_KERNEL_COUNT
} fa_vk_matrix_kernel;

/* Where a device keeps the elements of an M x N f32 accumulator (the forward's row reductions,
 * and the dQ pass's per-row LSE and Delta, run on them in registers when a catalogue module was
 * compiled for it; FA_CM_LAYOUT_* in shaders/vulkan/fa_matrix.glsl): each lane holds
 * `elements`; element e is in the lane's row slot (e >> slot_shift) % 2^slot_bits, one row per
 * slot; the lanes that hold the same rows differ only in the bits of lane_xor and together hold
 * every element of those rows. elements = 0: unknown, or not of this form.
 *
 * a_from_c: where N = K, each lane holds the same elements of an M x K A matrix as of the
 * accumulator, A's element i being the accumulator's element (a_from_c >> 4 i) & 15 in every
 * lane, so that a product's result turns into the next product's A operand in registers
 * (FA_CM_A_FROM_C); 0: unknown, or no such permutation (it then goes through shared memory). */
typedef struct fa_vk_matrix_layout {
    uint32_t elements, slot_shift, slot_bits, lane_xor;
    uint32_t a_from_c;
} fa_vk_matrix_layout;

/* One kernel's tiling at one head dim, as compiled ahead of time (vk_matrix_catalogue.h), and
 * the accumulator layout the module assumes (elements = 0: none, the generic row pass). */
typedef struct fa_vk_matrix_tiling {
    fa_vk_matrix_kernel kernel;
    uint32_t d;
    fa_vk_matrix_shape shape;
    uint32_t subgroup, subgroups, tm, bn;
    fa_vk_matrix_layout layout;
    /* Subgroups more that only copy K and V (the forward's producer form, attn_fwd_cm.comp
     * FA_CM_PRODUCERS): the computing ones wait for them by spinning, so such a module runs only
     * where a workgroup's subgroups make progress independently (caps.independent_subgroups). */
    uint32_t producers;
} fa_vk_matrix_tiling;

/* What the planner needs to know of a device. */
typedef struct fa_vk_matrix_caps {
    uint32_t shared_memory_bytes;        /* maxComputeSharedMemorySize */
    uint32_t max_invocations;            /* per workgroup along x */
    uint32_t subgroup_min, subgroup_max; /* sizes a pipeline may require (equal: the fixed size) */
    uint32_t subgroup_preferred; /* the size the matrix units run at (vendor rule: vk_matrix.c) */
    uint32_t shape_count;
    fa_vk_matrix_shape shapes[FA_VK_MATRIX_MAX_SHAPES]; /* in the driver's order of preference */
    /* The accumulator layout of each shape at subgroup_preferred, where probed on a device
     * (vk_matrix_layout.c; elements = 0: not probed or of no usable form). */
    fa_vk_matrix_layout layouts[FA_VK_MATRIX_MAX_SHAPES];
    /* Tilings compiled ahead of time (faster than the generic modules), tried first: */
    const fa_vk_matrix_tiling *tilings;
    uint32_t tiling_count;
    bool independent_subgroups; /* a GPU's; not a CPU device's, which runs them in turns */
} fa_vk_matrix_caps;

/* One kernel's tiling: subgroups of `subgroup` invocations, each owning tm * shape.m rows, so a
 * workgroup owns `rows` rows; bn columns per step; the accumulator layout its forward's row
 * reductions use (elements = 0: the generic row pass); shared_bytes as the shader lays it out. */
typedef struct fa_vk_matrix_plan {
    fa_vk_matrix_shape shape;
    uint32_t subgroup, subgroups, tm, bn, rows;
    fa_vk_matrix_layout layout;
    uint32_t shared_bytes;
    uint32_t producers; /* subgroups more that only copy (fa_vk_matrix_tiling) */
} fa_vk_matrix_plan;

/* Largest head dim each kernel takes on the matrix path (above it, the accumulators and the
 * operands kept in registers would spill). */
uint32_t fa_vk_matrix_max_head_dim(fa_vk_matrix_kernel kernel);

/* Bytes of shared memory `kernel` declares with plan `p` at head dim d (must match the shader). */
uint32_t fa_vk_matrix_shared_bytes(fa_vk_matrix_kernel kernel, const fa_vk_matrix_plan *p,
                                   uint32_t d);

/* The layout of an m x n accumulator on subgroups of sg lanes from what a probe read back:
 * index[lane * stride + e] = r * n + c for each element e < len that the lane holds (the
 * element's row r and column c). False (and *out zeroed) when the elements are not exactly the
 * matrix's, each once, or not of fa_vk_matrix_layout's form. */
bool fa_vk_matrix_layout_classify(const uint32_t *index, uint32_t stride, uint32_t sg, uint32_t len,
                                  uint32_t m, uint32_t n, fa_vk_matrix_layout *out);

/* The a_from_c of fa_vk_matrix_layout from what a probe read back of an m x n accumulator
 * (c_index, c_len elements per lane, as for fa_vk_matrix_layout_classify) and of an m x k A
 * matrix (a_index[lane * stride + e] = r * k + c, a_len per lane): the permutation, the same in
 * every lane, that maps each A element to the accumulator element of the same row and column
 * in the same lane; 0 when n != k, the counts differ or exceed 8, or no such permutation
 * exists. */
uint32_t fa_vk_matrix_a_from_c(const uint32_t *c_index, uint32_t c_len, const uint32_t *a_index,
                               uint32_t a_len, uint32_t stride, uint32_t sg, uint32_t m, uint32_t n,
                               uint32_t k);

/* The plan for `kernel` at head dim d: the override "tm,subgroups,bn" (a tuning knob; NULL or
 * empty = none), as a catalogue tiling with a layout where one matches, else with the first of
 * the device's shapes it fits; else the first of caps->tilings for this kernel and head dim that
 * the device can run and fits; else the first of the preferred tilings that fits, over the
 * shapes in the device's order. A tiling with a layout serves only at a shape whose probed
 * layout (caps->layouts) serves it, and one with a row form not the dK/dV pass. False, with the
 * reason in `why`, when none fits (the caller then uses the scalar shaders). */
bool fa_vk_matrix_plan_select(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                              const char *override_tiles, fa_vk_matrix_plan *plan, char *why,
                              size_t why_size);

/* How many query tiles each workgroup of the forward takes (the shader walks its head's tiles x,
 * x + groups, ...; groups = ceil(q_tiles / this)): 2 for a call without causal mask with at
 * most 2,048 keys and at least 2 tiles, else 1. Where a tile's key loop is short, its fixed
 * cost (staging Q, writing O, the workgroup's start) is a third of its time on the H200; a
 * second tile loads its Q during the first one's last key step and its first K and V tiles
 * while the first writes O. Longer key loops hide that cost, and halving the workgroups then
 * only rounds the last wave up; causal tiles differ in length (docs/PERF.md). */
uint32_t fa_vk_matrix_fwd_tiles_per_group(uint32_t q_tiles, uint32_t seq_k, bool causal);

#endif
