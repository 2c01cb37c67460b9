// SPDX-License-Identifier: MIT
/* Prints docs/CUDA_KERNELS.md: which CUDA kernel serves which call on which architecture, from
 * the catalogue (shaders/cuda/fa_cuda_catalogue.h) through the planner (backends/cuda/
 * cuda_plan.c), so that the map cannot drift from the code (the test cuda_kernel_map_current
 * compares the two). Regenerate with: build/cuda_kernel_map > docs/CUDA_KERNELS.md */
#include <stdio.h>
#include <string.h>

#include "cuda_plan.h"

typedef struct column {
    const char *name;
    fa_cuda_caps caps;
} column;

/* The head dims the tensor-core kernels pad to, as ranges of the multiples of 8 they take. */
static const struct {
    const char *label;
    int64_t head_dim;
} rows[] = {{"8-32", 32}, {"40-64", 64}, {"72-96", 96}, {"104-128", 128}, {"136-256", 256}};

static void cell(const fa_cuda_plan *plan, bool backward)
{
    printf(" |");
    /* the backward's Delta launch is always first and always the same: left out */
    for (unsigned i = backward ? 1 : 0; i < plan->count; i++)
        printf(" `%s`%s", fa_cuda_kernels[plan->launches[i].kernel].name,
               i + 1 < plan->count ? " +" : "");
}

/* A table's title and header row: `first` names the rows, then one column per architecture. */
static void table_head(const char *title, const char *first, const column *cols, size_t ncols)
{
    printf("\n### %s\n\n| %s |", title, first);
    for (size_t c = 0; c < ncols; c++)
        printf(" %s |", cols[c].name);
    printf("\n| --- |");
    for (size_t c = 0; c < ncols; c++)
        printf(" --- |");
    printf("\n");
}

static void table(const char *title, const column *cols, size_t ncols, fa_dtype dtype,
                  bool backward, bool deterministic)
{
    table_head(title, "head dim", cols, ncols);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        printf("| %s", rows[r].label);
        for (size_t c = 0; c < ncols; c++) {
            const fa_cuda_problem pb = {.dtype = dtype,
                                        .batch = 1,
                                        .seq_q = 4096,
                                        .seq_k = 4096,
                                        .heads_q = 8,
                                        .heads_kv = 8,
                                        .head_dim = rows[r].head_dim,
                                        .deterministic = deterministic,
                                        .aligned = true};
            fa_cuda_plan plan;
            if (backward)
                fa_cuda_plan_backward(&cols[c].caps, &pb, &plan);
            else
                fa_cuda_plan_forward(&cols[c].caps, &pb, &plan);
            cell(&plan, backward);
        }
        printf(" |\n");
    }
}

static const char *family_names[] = {
    [FA_CUDA_FWD_MMA] = "forward, mma.sync",
    [FA_CUDA_FWD_WGMMA] = "forward, wgmma (sm_90a)",
    [FA_CUDA_FWD_GEN] = "forward, CUDA cores",
    [FA_CUDA_FWD_TF32] = "forward, f32 as 3xTF32 on tensor cores (mma.sync)",
    [FA_CUDA_BWD_DELTA] = "backward: Delta = rowsum(dO O)",
    [FA_CUDA_BWD_DKDV_GEN] = "backward: dK, dV, CUDA cores",
    [FA_CUDA_BWD_DQ_GEN] = "backward: dQ, CUDA cores",
    [FA_CUDA_BWD_V4] = "backward v4: dK, dV, atomic dQ, mma.sync",
    [FA_CUDA_BWD_DKDV_MMA] = "deterministic backward: dK, dV, mma.sync",
    [FA_CUDA_BWD_DQ_MMA] = "deterministic backward: dQ, mma.sync",
    [FA_CUDA_FWD_MMA_BIAS] = "forward, mma.sync, with a bias",
    [FA_CUDA_BWD_V4_BIAS] = "backward v4, with a bias",
    [FA_CUDA_BWD_DKDV_MMA_BIAS] = "deterministic backward: dK, dV, with a bias",
    [FA_CUDA_BWD_DQ_MMA_BIAS] = "deterministic backward: dQ, with a bias",
    [FA_CUDA_BWD_DQ_CONVERT] = "backward: dQ from the f32 accumulator",
    [FA_CUDA_BWD_WGMMA] = "backward: dK, dV, atomic dQ, wgmma (sm_90a)",
    [FA_CUDA_FWD_SPLIT] = "forward, split keys (decoding), CUDA cores",
    [FA_CUDA_FWD_SPLIT_MMA] = "forward, split keys (decoding), tensor cores",
    [FA_CUDA_FWD_MERGE] = "forward: merge of the split keys",
    [FA_CUDA_FWD_MMA_VARLEN] = "forward over a packed batch, mma.sync",
    [FA_CUDA_FWD_WGMMA_VARLEN] = "forward over a packed batch, wgmma (sm_90a)",
    [FA_CUDA_FWD_WGMMA_SOFTCAP] = "forward with a softcap alone, folded, wgmma (sm_90a)",
    [FA_CUDA_BWD_V4_VARLEN] = "backward v4 over a packed batch: dK, dV, atomic dQ, mma.sync",
    [FA_CUDA_BWD_WGMMA_VARLEN] = "backward over a packed batch: dK, dV, atomic dQ, wgmma (sm_90a)",
};

/* Decoding rows: f16, head dim 128, 32 query heads on 8 KV heads, one query token (and one
 * with 16). */
static void decode_table(const column *cols, size_t ncols)
{
    static const struct {
        int64_t batch, seq_q, seq_k;
    } shapes[] = {{1, 1, 32768}, {16, 1, 32768}, {64, 1, 4096},
                  {1, 1, 1024},  {4, 4, 32768},  {1, 16, 32768}};
    table_head("Forward, decoding (f16, head dim 128, 32 query heads on 8 KV heads)",
               "batch, queries, keys", cols, ncols);
    for (size_t r = 0; r < sizeof shapes / sizeof shapes[0]; r++) {
        printf("| %lld, %lld, %lld", (long long)shapes[r].batch, (long long)shapes[r].seq_q,
               (long long)shapes[r].seq_k);
        for (size_t c = 0; c < ncols; c++) {
            const fa_cuda_problem pb = {.dtype = FA_DTYPE_F16,
                                        .batch = shapes[r].batch,
                                        .seq_q = shapes[r].seq_q,
                                        .seq_k = shapes[r].seq_k,
                                        .heads_q = 32,
                                        .heads_kv = 8,
                                        .head_dim = 128,
                                        .aligned = true};
            fa_cuda_plan plan;
            fa_cuda_plan_forward(&cols[c].caps, &pb, &plan);
            cell(&plan, false);
            if (plan.splits)
                printf(" (%d chunk%s of %d keys)", plan.splits, plan.splits == 1 ? "" : "s",
                       plan.split_keys);
        }
        printf(" |\n");
    }
}

int main(void)
{
    const fa_cuda_caps base = {.bwd4_q128_d64 = true, .bwd_d256 = true};
    column cols[4] = {{"sm_80 (163 KiB)", base},
                      {"sm_86, sm_89 (99 KiB)", base},
                      {"sm_90 (227 KiB)", base},
                      {"sm_90 without sm_90a", base}};
    const int smem[4] = {166912, 101376, 232448, 232448};
    const int sms[4] = {108, 84, 132, 132}; /* A100, RTX 3090 / 4090-class, H100 / H200 */
    for (int c = 0; c < 4; c++) {
        cols[c].caps.cc_major = c >= 2 ? 9 : 8;
        cols[c].caps.cc_minor = c == 1 ? 6 : 0;
        cols[c].caps.smem_optin = smem[c];
        cols[c].caps.sm_count = sms[c];
        cols[c].caps.wgmma_fwd = cols[c].caps.wgmma_bwd = c == 2;
        /* the Hopper forward's tensor maps, where built so (the library's default) */
        cols[c].caps.fwd_tma = cols[c].caps.fwd_tma_d64 = c == 2 && FA_FWD_WGMMA_TMA;
    }
    printf(
        "# CUDA kernels: which one serves which call\n\n"
        "Generated by `cuda_kernel_map` (tools/kernel_map/) from the kernel catalogue\n"
        "(`shaders/cuda/fa_cuda_catalogue.h`) through the planner (`backends/cuda/cuda_plan.c`);\n"
        "do not edit: `build/cuda_kernel_map > docs/CUDA_KERNELS.md` regenerates it, and the test\n"
        "`cuda_kernel_map_current` fails when it is stale.\n\n"
        "Columns: compute capability and the shared memory a block may opt in to (and, for the\n"
        "decoding table, the multiprocessors: 108, 84, 132, 132). The tables show\n"
        "f16 with 16-byte aligned rows; bf16 takes the same kernels in bf16, but that the wgmma\n"
        "forward at head dims 40-64 takes the 128-key kernels (`*_k128_bf16_d64`) where the\n"
        "middle query row sees %d keys or more (causal and windows counted), and that at\n"
        "head dims 40-64 the tables show calls without a mask: calls with a window, and causal\n"
        "calls whose middle query row sees fewer than %d keys, take the kernels without `tma_`\n"
        "in their name (the loader's copies, not tensor maps). f32 inputs (but\n"
        "for the forward, which has its own table), unaligned views and\n"
        "`FA_CUDA_KERNELS=general` take the CUDA-core kernels (`fa_*_gen_*`). Every\n"
        "backward starts with `fa_bwd_delta_<dtype>` (left out below). Knobs (`FA_CUDA_*`, "
        "README)\n"
        "change some choices; the defaults are shown.\n",
        FA_FWD_WGMMA_K128_KEYS, FA_FWDW_TMA_D64_KEYS);
    table("Forward", cols, 4, FA_DTYPE_F16, false, false);
    table("Forward, f32", cols, 4, FA_DTYPE_F32, false, false);
    table("Forward, FP8 (e4m3: head dims that are multiples of 16; an empty cell is "
          "ERROR_UNSUPPORTED_DTYPE)",
          cols, 4, FA_DTYPE_E4M3, false, false);
    decode_table(cols, 4);
    table("Backward", cols, 4, FA_DTYPE_F16, true, false);
    table("Backward, deterministic", cols, 4, FA_DTYPE_F16, true, true);
    printf("\n## The catalogue\n\n| kernel | family | dtype | head dim | P1 | P2 |\n"
           "| --- | --- | --- | ---: | ---: | ---: |\n");
    for (int k = 0; k < FA_CUDA_K_COUNT; k++) {
        const fa_cuda_kernel_info *i = &fa_cuda_kernels[k];
        printf("| `%s` | %s | %s | %u | %u | %u |\n", i->name, family_names[i->family],
               i->dtype == FA_DTYPE_F32    ? "f32"
               : i->dtype == FA_DTYPE_F16  ? "f16"
               : i->dtype == FA_DTYPE_BF16 ? "bf16"
                                           : "e4m3",
               i->d, i->p1, i->p2);
    }
    printf(
        "\nP1, P2: the forward's query rows per block; backward v4's query rows per tile and keys\n"
        "per block. The split-key forward serves calls with at most 16 query rows per KV head\n"
        "(queries x query heads per KV head) and 16-byte aligned rows, any dtype (f16 and bf16 on\n"
        "tensor cores, f32 or FA_CUDA_DECODE=cores on CUDA cores); the chunk count is\n"
        "runtime/split.c's (fa_attention_desc.num_splits overrides it). It is the one CUDA\n"
        "kernel that takes per-sequence key counts (seqlens_k: a chunk past a sequence's length\n"
        "writes O = 0 and LSE = -inf, which the merge weighs 0) and a paged KV cache "
        "(block_table,\n"
        "any page size: K and V rows read through the table, entries clamped into\n"
        "[0, num_pages)); a call with either that it does not serve (more packed rows, unaligned\n"
        "views, FA_CUDA_KERNELS=general) is ERROR_UNSUPPORTED. Several chunks are merged by the\n"
        "split kernel's last block of each group of chunks (the same rows: KV head, batch entry,\n"
        "and on CUDA cores the 4-row chunk); fa_fwd_merge_* runs\n"
        "only for more than %d groups or with FA_CUDA_DECODE_MERGE=kernel.\n",
        FA_DEC_DONE_SLOTS);
    printf("\nA sliding window, a logit softcap or ALiBi takes the kernels the same call without\n"
           "them would, the CUDA-core split-key forward (f32, FA_CUDA_DECODE=cores) excepted,\n"
           "which takes none of them: such a decoding call takes the ordinary forward, and with\n"
           "seqlens_k or block_table is ERROR_UNSUPPORTED.\n");
    printf("\nAn additive bias takes the kernels the same call without it would, but never the\n"
           "split-key forward (neither of its kernels reads one): a decoding call with a bias\n"
           "takes the ordinary forward, and with seqlens_k or block_table is\n"
           "ERROR_UNSUPPORTED; the wgmma backward reads one at head dim 64 only (at 128 the\n"
           "loads would spill): a backward with a bias at head dims 72-128 on sm_90 takes\n"
           "`fa_bwd_v4_bias_*_d96` or `fa_bwd_v4_bias_*_d128`, as without sm_90a. The mma.sync\n"
           "kernels serve a bias as twins of their own (`fa_fwd_mma_bias_*`, `fa_bwd_v4_bias_*`,\n"
           "`fa_bwd_dkdv_mma_bias_*`, `fa_bwd_dq_mma_bias_*`: in the others its code cost\n"
           "registers they do not have), which take it as the initial value of S, before a\n"
           "softcap would apply, so a call with both takes the wgmma kernels where those\n"
           "serve it, else the CUDA-core ones.\n");
    return 0;
}
