/* The one parameter block every CUDA kernel of flashattn takes by value, shared by the host code
 * (C11, backends/cuda) and the kernels (CUDA C++), so both sides agree on its layout. Pointers
 * already include each view's offset; strides are in elements; head_dim stride is 1. */
#ifndef FA_CUDA_ABI_H
#define FA_CUDA_ABI_H

typedef struct fa_cuda_tensor {
    unsigned long long ptr; /* device address of element (0, 0, 0, 0) */
    long long stride_b, stride_s, stride_h;
} fa_cuda_tensor;

typedef struct fa_cuda_params {
    fa_cuda_tensor q, k, v, o, lse, d_o, d_q, d_k, d_v;
    unsigned long long delta;    /* f32 (batch, heads_q, seq_q) workspace: rowsum(dO * O) */
    unsigned long long dq_accum; /* f32 (batch, heads_q, seq_q, head_dim) workspace, or 0 */
    int batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    int group;         /* heads_q / heads_kv */
    int causal;        /* bottom-right aligned: query i sees key j iff j <= i + causal_offset */
    int causal_offset; /* seq_k - seq_q */
    int has_lse;
    float scale;      /* softmax scale */
    float scale_log2; /* scale * log2(e): scores go through exp2 */
} fa_cuda_params;

#endif
