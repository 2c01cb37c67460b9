// SPDX-License-Identifier: MIT
/* flashattn test kit: a float64 reference of attention (forward and backward), a same-precision
 * naive baseline that measures what the dtype itself costs, deterministic random inputs, row
 * checks for large problems, and the conformance runner behind `flashattn conformance`.
 *
 * Pass rule (FlashAttention's own): an output passes when its max abs error against the float64
 * reference is at most k * (the baseline's max abs error) + 1e-5, with k = 2 for O and 3 for
 * dQ, dK, dV; the LSE within 1e-3 relative (|a - b| <= 1e-3 * max(1, |ref|)); no NaN or Inf
 * where the reference is finite, and a -inf LSE matched exactly.
 *
 * All host arrays here are packed BSHD (batch, seq, heads, dim) in the problem's dtype, and the
 * LSE is packed (batch, heads, seq_q) f32, the layouts of fa_tensor_bshd and fa_tensor_lse. */
#ifndef FA_TESTKIT_H
#define FA_TESTKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fa_ref_problem {
    fa_dtype dtype;
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    float scale;      /* 0 -> 1/sqrt(head_dim) */
    bool causal;      /* bottom-right aligned: query i sees keys j <= i + seq_k - seq_q */
    fa_window window; /* fa_attention_desc.window: as the library takes it */
    float softcap;    /* fa_attention_desc.softcap: 0 off, else s -> softcap tanh(s / softcap) */
    /* fa_attention_desc.alibi_slopes: NULL, none; else head h of batch entry b adds
     * -alibi_slopes[b * alibi_batch_stride + h] * |i + Sk - Sq - j| to the score of query i and
     * key j, after the scale and the softcap (alibi_batch_stride 0: one slope per head). Not
     * owned. */
    const float *alibi_slopes;
    int64_t alibi_batch_stride;
    /* fa_attention_desc.bias: NULL, none; else element (b, i, h, j) (query i of head h, key j) of
     * dtype bias_dtype at index b * bias_stride[0] + i * bias_stride[1] + h * bias_stride[2] + j
     * of `bias` (a stride 0 broadcasts), added after the softcap and ALiBi; -inf hides a key, and
     * a row whose keys are all hidden gets O = 0 and LSE = -inf. Not owned. */
    const void *bias;
    fa_dtype bias_dtype;
    int64_t bias_stride[3];
    /* FP8 (dtype FA_DTYPE_E4M3): o_dtype, o's dtype (f32, f16 or bf16; FA_DTYPE_INVALID: o is
     * in dtype, as without FP8), and descale[0..2], the factors of q, k and v
     * (fa_attention_desc.q_descale ...), each NULL (1) or B x Hkv floats, index b * Hkv + hk.
     * The reference and the baseline attend to q, k and v times their factors. Not owned. */
    fa_dtype o_dtype;
    const float *descale[3];
} fa_ref_problem;

/** The dtype of a problem's o: o_dtype where set, else dtype. */
fa_dtype fa_ref_o_dtype(const fa_ref_problem *p);

/* Deterministic random fill (splitmix/xorshift from seed) of n elements of dtype: values ~
 * N(0,1)-ish (or uniform [-1,1]), never all zero. */
void fa_testkit_fill_random(void *dst, fa_dtype dtype, size_t n, uint64_t seed);

typedef struct fa_row_check {
    int64_t rows_checked;
    double max_err_o, max_err_lse; /* vs float64 reference, max abs for O, max relative for LSE */
    double baseline_err_o; /* same-precision naive baseline's max abs error on the same rows */
    bool non_finite;       /* any NaN/Inf in O or LSE where the reference is finite */
    bool pass;             /* max_err_o <= 2*baseline_err_o + 1e-5, lse rel <= 1e-3, !non_finite */
} fa_row_check;

/* Checks a forward result on n_rows randomly sampled (b, h, i) query rows. q,k,v,o are packed
 * BSHD host arrays in p->dtype; lse packed (B,H,Sq) f32 or NULL. Cost O(n_rows * Sk * D). */
void fa_testkit_check_forward_rows(const fa_ref_problem *p, const void *q, const void *k,
                                   const void *v, const void *o, const float *lse, int64_t n_rows,
                                   uint64_t seed, fa_row_check *out);

typedef struct fa_grad_check {
    int64_t rows_checked, key_rows_checked;
    double err_dq, tol_dq, err_dk, tol_dk, err_dv, tol_dv; /* max abs error and its tolerance */
    bool non_finite; /* any NaN/Inf in dQ, dK or dV where the reference is finite */
    bool pass;       /* each err <= its tol (3 x the baseline's + 1e-5) and !non_finite */
} fa_grad_check;

/* Checks a backward result (dq, dk, dv for upstream gradient d_o, all packed BSHD host arrays in
 * p->dtype) as the conformance matrix does for large problems: dQ on sampled query rows, dK and
 * dV on sampled key rows of one random (batch, KV head), against a float64 reference and a
 * same-precision baseline. Cost O(G * Sq * Sk * D) for the key rows (G: query heads per KV
 * head). False, with out zeroed, when host memory runs out. */
bool fa_testkit_check_backward_rows(const fa_ref_problem *p, const void *q, const void *k,
                                    const void *v, const void *d_o, const void *dq, const void *dk,
                                    const void *dv, uint64_t seed, fa_grad_check *out);

/* ---- tolerances ------------------------------------------------------------------------------ */

#define FA_TESTKIT_ABS_SLACK 1e-5 /* added to k * baseline error */
#define FA_TESTKIT_LSE_REL 1e-3
#define FA_TESTKIT_K_FORWARD 2.0
#define FA_TESTKIT_K_BACKWARD 3.0

/* ---- element access -------------------------------------------------------------------------- */

/** Element i of a host array of dtype, as double. */
double fa_testkit_load(const void *base, fa_dtype dtype, size_t i);
/** Stores x rounded to dtype (round to nearest even) as element i. */
void fa_testkit_store(void *base, fa_dtype dtype, size_t i, double x);
/** x rounded to dtype and back (f32: rounded to float). */
double fa_testkit_round(fa_dtype dtype, double x);
/** The scale a problem actually uses: p->scale, or 1/sqrt(head_dim) when it is 0. */
double fa_ref_scale(const fa_ref_problem *p);
/** Index of the last key query row i sees: i + Sk - Sq when causal, Sk - 1 otherwise, and with
 * a window at most i + Sk - Sq + right (may be < 0, meaning no key). */
int64_t fa_ref_last_key(const fa_ref_problem *p, int64_t i);
/** Index of the first key query row i sees: 0, or with a window's left bound
 * max(0, i + Sk - Sq - left) (past the last key when it sees none). */
int64_t fa_ref_first_key(const fa_ref_problem *p, int64_t i);

/* ---- float64 reference ------------------------------------------------------------------------
 */

/** The float64 forward over the whole problem. Inputs are packed BSHD in p->dtype, read exactly
 * as their dtype holds them; o (B,Sq,Hq,D) and lse (B,Hq,Sq) are double, lse may be NULL. Rows
 * that see no key get O = 0 and LSE = -inf. Materialises one Sk-long score row at a time: memory
 * O(Sk), cost O(B * Hq * Sq * Sk * D). (For large problems the conformance runner checks sampled
 * rows instead; see expect.c.) */
void fa_ref64_forward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                      double *o, double *lse);

/** The float64 backward: dq (B,Sq,Hq,D), dk and dv (B,Sk,Hkv,D) in double; d_o in p->dtype.
 * Recomputes the softmax in double (takes O and LSE from nowhere), one query row at a time:
 * memory O(Sk) beyond the outputs, cost O(B * Hq * Sq * Sk * D). */
void fa_ref64_backward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                       const void *d_o, double *dq, double *dk, double *dv);

/** The float64 reference of a packed variable-length batch (fa_attention_desc.cu_seqlens_q,
 * cu_seqlens_k): n sequences, sequence b the rows cu_q[b] .. cu_q[b+1] - 1 of q (total_q rows,
 * packed (total_q, Hq, D) in p->dtype) and cu_k[b] .. cu_k[b+1] - 1 of k and v, each attended as
 * fa_ref64_forward attends a problem of batch 1 and its own lengths, with p's options (batch,
 * seq_q, seq_k ignored; bias must be NULL; alibi_slopes per sequence where alibi_batch_stride is
 * not 0). o is (total_q, Hq, D) and lse (Hq, total_q), both double; rows past cu_q[n] get O = 0
 * and LSE = -inf. The prefix sums must be valid (from 0, never decreasing, inside the tensors). */
void fa_ref64_forward_packed(const fa_ref_problem *p, int64_t n, const int32_t *cu_q,
                             const int32_t *cu_k, int64_t total_q, const void *q, const void *k,
                             const void *v, double *o, double *lse);
/** Its backward, as fa_ref64_backward per sequence: dq (total_q, Hq, D), dk and dv
 * (total_k, Hkv, D) in double, zero past the last sequence. */
void fa_ref64_backward_packed(const fa_ref_problem *p, int64_t n, const int32_t *cu_q,
                              const int32_t *cu_k, int64_t total_q, int64_t total_k, const void *q,
                              const void *k, const void *v, const void *d_o, double *dq, double *dk,
                              double *dv);

/* ---- same-precision baseline ----------------------------------------------------------------- */

/** What an ordinary non-flash implementation computes in p->dtype: S = scale QK^T with f32
 * accumulation rounded to the dtype, softmax in f32, P rounded to the dtype, O = PV with f32
 * accumulation rounded to the dtype. Outputs in p->dtype (packed BSHD), lse f32 (B,Hq,Sq) or
 * NULL. FP8 (e4m3), what an FP8 attention does instead: S rounded to o's dtype, the softmax's
 * unnormalised exp(S - max) rounded to e4m3 where it enters P V (f32 accumulation), divided by
 * the f32 sum of the unrounded values, and O rounded to o's dtype. */
void fa_baseline_forward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                         void *o, float *lse);
/** The baseline backward: FlashAttention's backward done plainly from what its interface hands
 * it, an exact forward's O rounded to the dtype and LSE rounded to f32. In f32: S = scale QK^T,
 * P = exp(S - LSE), Delta = rowsum(dO * O), dS = P (dO V^T - Delta); P and dS rounded to the
 * dtype where they enter dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K (f32 accumulation,
 * rounded). Outputs in p->dtype packed BSHD. */
void fa_baseline_backward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                          const void *d_o, void *dq, void *dk, void *dv);

/* ---- random numbers -------------------------------------------------------------------------- */

uint64_t fa_testkit_splitmix64(uint64_t *state);
/** Uniform integer in [0, n). */
uint64_t fa_testkit_rand_below(uint64_t *state, uint64_t n);

/* ---- conformance runner ---------------------------------------------------------------------- */

/** Options of one conformance run; zero means: all backends, quick, seed 1, no files, calls
 * without fa_attention_desc.deterministic (set `deterministic` to run every call with it). */
typedef struct fa_conformance_options {
    int backend;           /* -1 or FA_BACKEND_AUTO (0): every backend; else one fa_backend */
    unsigned backend_mask; /* when not 0: the backends b with bit (1 << b) set, over `backend` */
    bool device_given;     /* false: on each backend its first GPU device, else its device 0 */
    int device;            /* with device_given: this index on every backend tested */
    bool full;
    bool verbose;
    bool deterministic;
    uint64_t seed;           /* 0 -> 1 */
    const char *report_path; /* Markdown */
    const char *junit_path;
    const char *json_path;
    const char *filter; /* only cases whose name contains one of these '|'-separated
                           substrings; NULL: all */
    int64_t limit;      /* run at most this many generated cases (0: all); for tests */
    int shard_count;    /* > 1: only the cases of every shard_count-th group of cases that */
    int shard_index;    /* build the same programs, from group shard_index: one matrix shared
                           by several processes */
    FILE *out;          /* table and summary; NULL -> stdout */
    FILE *progress;     /* progress lines; NULL -> stderr */
    fa_log_fn log;      /* every context's messages up to log_level (NULL: none) */
    fa_log_level log_level;
} fa_conformance_options;

typedef struct fa_conformance_totals {
    int64_t passed, failed, skipped;
} fa_conformance_totals;

/** Runs the conformance suite. Returns 0 when nothing failed, 1 otherwise, writes totals if not
 * NULL. */
int fa_conformance_run(const fa_conformance_options *opt, fa_conformance_totals *totals);
/* The device a tool uses on an explicitly named backend when none is given: its first GPU, else
 * device 0 (a machine with PoCL beside a GPU driver lists the CPU device first). */
int fa_testkit_default_device(fa_backend backend);
/** The number of cases a run generates, edge cases included (no filter, no limit). */
int64_t fa_conformance_case_count(bool full);

#ifdef __cplusplus
}
#endif

#endif
