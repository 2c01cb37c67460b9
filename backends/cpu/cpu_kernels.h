// SPDX-License-Identifier: MIT
/* The CPU backend's compute kernels on f32 tiles, compiled once per instruction set
 * (cpu_kernels.c) and chosen at run time, so the library runs on any x86-64 and uses AVX-512
 * where the machine has it.
 *
 * Every matrix is row-major f32 in per-thread scratch. A GEMM's B operand and C are padded to
 * a multiple of FA_CPU_PAD columns: the kernels compute the padded columns (whatever finite
 * values they hold) and callers ignore them. Element-wise kernels touch only the real
 * rows x cols. */
#ifndef FA_CPU_KERNELS_H
#define FA_CPU_KERNELS_H

#include "flashattn.h"

/* Tile sizes: 128 queries share each 64-key K/V tile that is loaded (halving the conversion and
 * memory traffic of 64), and a head_dim-256 step still fits a 2 MiB L2 (forward: about 420 KiB;
 * backward: about 1 MiB). Up to FA_CPU_DECODE_ROWS query rows per KV head take the decoding
 * kernel, which scores up to FA_CPU_DECODE_HEADS KV heads a block and requests each K row
 * FA_CPU_DECODE_AHEAD rows before it reads it. */
enum {
    FA_CPU_TILE_Q = 128,
    FA_CPU_TILE_K = 64,
    FA_CPU_PAD = 16,
    FA_CPU_DECODE_ROWS = 8,
    FA_CPU_DECODE_HEADS = 16,
    FA_CPU_DECODE_AHEAD = 16
};

/* Bytes per element of the dtypes the kernels read (f32, f16, bf16, e4m3), inline: the kernels
 * are built without the runtime's fa_dtype_size (test_cpu_kernels links them alone). */
static inline int fa_cpu_dtype_bytes(fa_dtype dt)
{
    return dt == FA_DTYPE_F32 ? 4 : dt == FA_DTYPE_E4M3 ? 1 : 2;
}

/* One block of decoding's fused kernel: nq query rows for each of `heads` KV heads against nk
 * keys (at most FA_CPU_TILE_K), K and V read as stored. Row r = h * nq + i is query row i of
 * the block's KV head h (heads * nq <= FA_CPU_TILE_Q). */
typedef struct fa_cpu_decode_step {
    fa_dtype dtype; /* of K and V */
    int dim, heads, nq, nk;
    /* K and V rows of key j, head h at k[j * heads + h], v[j * heads + h] (the order they lie in
     * for BSHD and paged caches); k has `ahead` more, the next block's first, to request */
    const void *const *k, *const *v;
    int ahead;
    const float *q; /* heads * nq rows of ldq, f32, columns dim .. ldq - 1 zero */
    int64_t ldq;
    float scale;        /* applied to the raw dot products: scale * log2(e) */
    const int *visible; /* NULL, or per row: keys [0, visible[r]) seen, the rest masked */
    float *m, *l;       /* per row: running max (log2 units) and sum */
    float *o;           /* per row, ldo floats (a multiple of FA_CPU_PAD): the accumulator */
    int64_t ldo;
    float *s;    /* scratch of nk x lds floats: S, then P */
    int64_t lds; /* >= heads * nq; a multiple of FA_CPU_PAD keeps pass 2 in whole vectors */
} fa_cpu_decode_step;

typedef enum fa_cpu_gemm_mode {
    FA_CPU_GEMM_SET,         /* C = A B */
    FA_CPU_GEMM_ADD,         /* C += A B */
    FA_CPU_GEMM_RESCALE_ADD, /* C[r] = alpha[r] C[r] + (A B)[r] */
} fa_cpu_gemm_mode;

typedef struct fa_cpu_kernels {
    const char *name; /* "avx512", "avx2", "generic" */
    /* C (m x n) [mode] A (m x k) B (k x n). A[r][i] is a[r * a_row + i * a_col], so A may be
     * read transposed; B and C are row-major with ldb, ldc. n is a multiple of FA_CPU_PAD. */
    void (*gemm)(int m, int n, int k, const float *a, int64_t a_row, int64_t a_col, const float *b,
                 int64_t ldb, float *c, int64_t ldc, fa_cpu_gemm_mode mode, const float *alpha);
    /* Decoding (few query rows): per key, the rows' scores straight from the K row, then one
     * online-softmax step per row over the block (m, l; masked keys weigh 0), then
     * O = alpha O + P V straight from the V rows. Each K and V byte is read once, never
     * copied: decoding is bound by those reads. */
    void (*decode_block)(const fa_cpu_decode_step *step);
    /* dst[i] = scale * src[i] for n elements of `dtype` (f16 and bf16 converted exactly). */
    void (*load_row)(fa_dtype dtype, const void *src, int64_t n, float scale, float *dst);
    /* One online-softmax step on scores s (rows = keys, cols = queries, log2 units): per
     * column c updates the running max m[c] and sum l[c], writes the rescale factor of the
     * previous accumulator to alpha[c], and replaces s by exp2(s - m). Columns whose max is
     * still -inf get p = 0 and alpha = 0. */
    void (*softmax_cols)(float *s, int rows, int cols, int64_t ld, float *m, float *l,
                         float *alpha);
    /* s[r][c] = exp2(s[r][c] - row_bias[r] - col_bias[c]); a +inf bias gives 0. */
    void (*exp2_sub)(float *s, int rows, int cols, int64_t ld, const float *row_bias,
                     const float *col_bias);
    /* dp[r][c] = p[r][c] * (dp[r][c] - row_bias[r] - col_bias[c]): dS from P, dP and Delta. */
    void (*grad_scores)(const float *p, float *dp, int rows, int cols, int64_t ld,
                        const float *row_bias, const float *col_bias);
    /* Logit softcapping of raw scores: s[r][c] = out tanh(in s[r][c]) (in = scale / cap, out =
     * cap log2 e), and where deriv is not NULL deriv[r * ld + c] = 1 - tanh^2, the factor the
     * backward's dS takes. */
    void (*softcap)(float *s, int rows, int cols, int64_t ld, float in, float out, float *deriv);
} fa_cpu_kernels;

/* The fastest kernel set this CPU supports. */
const fa_cpu_kernels *fa_cpu_kernels_select(void);
/* Up to max of the kernel sets this CPU supports, fastest first (tests run each); how many. */
int fa_cpu_kernels_available(const fa_cpu_kernels **sets, int max);

#endif
