// SPDX-License-Identifier: MIT
/* The CUDA backend's kernel choice as a pure function: plan(device capabilities, call) ->
 * launches + workspace, with no driver call, so that which kernel serves which call on sm_80,
 * sm_86, sm_89 and sm_90 is unit-tested on a machine without a GPU (tests/test_cuda_plan.c).
 * cuda_attention.c executes a plan. Not installed. */
#ifndef FA_CUDA_PLAN_H
#define FA_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

#include "../../shaders/cuda/fa_cuda_catalogue.h"

/* Every kernel of the catalogue, by index into fa_cuda_state.kernels; the sm_90a ones last. */
typedef enum fa_cuda_kernel {
#define FA_CUDA_KERNEL_ENUM_(id, name, family, dtype, d, p1, p2) FA_CUDA_K_##id,
    FA_CUDA_CATALOGUE(FA_CUDA_KERNEL_ENUM_) FA_CUDA_CATALOGUE_SM90(FA_CUDA_KERNEL_ENUM_)
#undef FA_CUDA_KERNEL_ENUM_
        FA_CUDA_K_COUNT
} fa_cuda_kernel;
#define FA_CUDA_K_SM90_FIRST FA_CUDA_K_FWD_WGMMA_F16_D64

typedef enum fa_cuda_family {
    FA_CUDA_FWD_MMA,
    FA_CUDA_FWD_WGMMA,
    FA_CUDA_FWD_GEN,
    FA_CUDA_FWD_TF32,
    FA_CUDA_BWD_DELTA,
    FA_CUDA_BWD_DKDV_GEN,
    FA_CUDA_BWD_DQ_GEN,
    FA_CUDA_BWD_V4,
    FA_CUDA_BWD_DKDV_MMA,
    FA_CUDA_BWD_DQ_MMA,
    FA_CUDA_BWD_DQ_CONVERT,
    FA_CUDA_BWD_WGMMA,
    FA_CUDA_FWD_SPLIT,
    FA_CUDA_FWD_SPLIT_MMA,
    FA_CUDA_FWD_MERGE,
    FA_CUDA_FWD_MMA_VARLEN,
    FA_CUDA_FWD_WGMMA_VARLEN,
    FA_CUDA_FWD_WGMMA_SOFTCAP,
    FA_CUDA_BWD_V4_VARLEN,
    FA_CUDA_BWD_WGMMA_VARLEN,
    FA_CUDA_FWD_MMA_BIAS, /* the mma.sync families' kernels for calls with a bias */
    FA_CUDA_BWD_V4_BIAS,
    FA_CUDA_BWD_DKDV_MMA_BIAS,
    FA_CUDA_BWD_DQ_MMA_BIAS,
} fa_cuda_family;

/* Head dim 64's tensor-memory kernels take causal calls (without a window) where the middle
 * query row sees this many keys or more (cuda_plan.c) */
#define FA_FWDW_TMA_D64_KEYS 1024

/* One catalogue row. */
typedef struct fa_cuda_kernel_info {
    const char *name;
    fa_cuda_family family;
    fa_dtype dtype;
    uint32_t d, p1, p2; /* see fa_cuda_catalogue.h */
} fa_cuda_kernel_info;

extern const fa_cuda_kernel_info fa_cuda_kernels[FA_CUDA_K_COUNT];

/* What the planner needs to know of the device and of the tuning knobs (FA_CUDA_* environment
 * variables, read once per context by cuda_backend.c). */
typedef struct fa_cuda_caps {
    int cc_major, cc_minor;
    int sm_count;   /* multiprocessors (the split-key forward's chunk count) */
    int smem_optin; /* bytes of shared memory a block may opt in to */
    /* the sm_90a kernels are loaded and serve the forward / the backward */
    bool wgmma_fwd, wgmma_bwd;
    bool force_general; /* FA_CUDA_KERNELS=general: tensor-core paths off (testing) */
    bool bwd4_q128_d64; /* v4's 128-row query tiles at head dim 64 where they fit */
    int fwd_qtile_d256; /* the forward's query rows per block at head dim 256 (0: by smem) */
    bool bwd_d256;      /* backward v4 at head dims 129-256 (else the general kernels) */
    bool bwd_dq_bulk;   /* the wgmma backward adds dQ by bulk reductions into a tiled accumulator
                         * (unless FA_CUDA_BWD_DQ=atomic or built FA_BWD_WGMMA_DQ_BULK=0) */
    int decode_warps;   /* FA_CUDA_DECODE_WARPS: the tensor-core split-key forward's warps per
                         * block (0: the planner's choice) */
    bool f32_cores;     /* FA_CUDA_F32=cores: the f32 forward on the CUDA-core kernel, not 3xTF32
                         * on tensor cores (fa_forward_tf32.cuh) */
    bool decode_cores;  /* FA_CUDA_DECODE=cores: the split-key forward on CUDA cores (fa_decode.cuh)
                         * for f16/bf16 too, not the tensor-core one (fa_decode_mma.cuh) */
    bool decode_merge_kernel; /* FA_CUDA_DECODE_MERGE=kernel: the chunks merged by a launch of
                               * their own (fa_decode_merge), never in the split kernel */
    bool fwd_tma;     /* the wgmma forward's loader copies tiles by the tensor-memory accelerator
                       * where the kernel has that loader and the views allow (use_tma): where
                       * built with FA_FWD_WGMMA_TMA, unless FA_CUDA_FWD_COPY=cpasync; =tma asks for
                       * it whatever the build says (an image through FA_CUDA_SM90_IMAGE) */
    bool fwd_tma_d64; /* and at head dim 64, by its kernels built with that loader (P2 = 1),
                       * where they gain (cuda_plan.c): as fwd_tma, unless FA_CUDA_FWD_COPY=tma128
                       * keeps head dim 64's copying loader */
    bool bwd_tma;     /* as fwd_tma, for the wgmma backward's Q and dO (FA_BWD_WGMMA_TMA,
                       * FA_CUDA_BWD_COPY) */
} fa_cuda_caps;

/* The call as the planner sees it (validated by the runtime: head_dim a multiple of 8 from 8 to
 * 256, heads_q a multiple of heads_kv). */
typedef struct fa_cuda_problem {
    fa_dtype dtype;
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    bool deterministic; /* backward: no atomics */
    int32_t num_splits; /* forward: fa_attention_desc.num_splits (0: the planner chooses) */
    bool aligned;       /* every view's rows start on 16 bytes (what cp.async needs) */
    /* forward: per-sequence key counts (seqlens_k), a paged K/V cache (block_table); only the
     * split-key forward takes them */
    bool seqlens_k, paged;
    /* a sliding window (fa_attention_call.window: a left bound, or a right bound past causal's)
     * and logit softcapping, which only some kernels take; the window's bounds (keys before and
     * after a row's diagonal, -1: none; fa_call_left, fa_call_right) where `window` is set */
    bool window, softcap;
    int32_t window_left, window_right;
    /* a softcap the wgmma forward folds into its exponent (no ALiBi, no bias, softcap log2 e
     * under 1024): the FWD_WGMMA_SOFTCAP kernels (fa_forward_wgmma.cuh) */
    bool softcap_fold;
    bool alibi; /* ALiBi slopes (fa_attention_call.has_alibi), which only some kernels take */
    /* a packed variable-length batch of `batch` sequences in one launch, seq_q and seq_k the
     * longest sequence's lengths: only the *_VARLEN kernels take it (with Delta and the dQ
     * conversion) */
    bool varlen;
    bool bias; /* an additive bias (fa_attention_call.has_bias): not the split-key forwards */
    /* a right bound on the keys (causal, or a window's right edge): fa_cuda_params.causal, whose
     * blocks the wgmma forward runs one query tile each, never persistent */
    bool causal;
} fa_cuda_problem;

typedef struct fa_cuda_launch {
    fa_cuda_kernel kernel;
    unsigned grid[3], threads, smem; /* smem: dynamic shared memory, bytes */
    const char *what;                /* for the error message of a failed launch */
} fa_cuda_launch;

#define FA_CUDA_MAX_LAUNCHES 4

/* Launches in order on one stream. The backward's workspace holds Delta (one float per query
 * row) and, when atomic_dq, the f32 dQ accumulator at accum_offset (accum_elems floats), which
 * must be zeroed before the first launch. The split-key forward's (splits > 1) holds the chunks'
 * O at 0 and their LSE at part_lse_offset. */
typedef struct fa_cuda_plan {
    fa_cuda_launch launches[FA_CUDA_MAX_LAUNCHES];
    unsigned count;
    bool atomic_dq;
    uint32_t dq_tiled; /* the accumulator in the wgmma kernel's tiles of this head dim (else 0) */
    size_t workspace_bytes, accum_offset, accum_elems;
    int splits, split_keys; /* the split-key forward: key chunks (0: another forward) */
    size_t part_lse_offset;
    /* splits > 1: the split kernel merges the chunks itself (fa_cuda_params.split_done: the
     * host passes its chunk counts), with no merge launch */
    bool merge_in_split;
} fa_cuda_plan;

/* A forward with seqlens_k or paged that the split-key forward cannot take gets no launch
 * (count 0): the host refuses such calls first, with fa_cuda_split_takes's reason. So does a
 * packed batch (varlen) that no *_VARLEN kernel takes (f32, unaligned rows, head dims that
 * take no such row: on mma.sync 33-64, and 97-128 in f16, have one; on wgmma 33-128): the
 * runtime then runs it sequence by sequence. The backward likewise plans nothing for a packed
 * batch off its atomic tensor-core kernels (wgmma, v4 up to head dim 128) or without a
 * *_VARLEN row for the tiling they would take. */
void fa_cuda_plan_forward(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan);
void fa_cuda_plan_backward(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan);

/* Whether the split-key forward (the decoding path) takes the forward call pb; if not, and why
 * is not NULL, a sentence saying why (at most why_size bytes with the NUL). */
bool fa_cuda_split_takes(const fa_cuda_caps *caps, const fa_cuda_problem *pb, char *why,
                         size_t why_size);

/* The same for an FP8 forward (dtype FA_DTYPE_E4M3), which only the wgmma forward's E4M3 row
 * serves: sm_90a loaded, head dims that are multiples of 16 up to 128 (padded to 128), 16-byte
 * aligned rows, no seqlens_k or block_table; a packed batch runs sequence by sequence. */
bool fa_cuda_fp8_takes(const fa_cuda_caps *caps, const fa_cuda_problem *pb, char *why,
                       size_t why_size);

#endif
