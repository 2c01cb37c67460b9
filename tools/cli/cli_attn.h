// SPDX-License-Identifier: MIT
/* One attention problem on a device, as `run` and `bench` use it: random inputs in packed BSHD
 * buffers, outputs (and gradients) beside them, and a timed loop over the forward or backward
 * call. */
#ifndef FA_CLI_ATTN_H
#define FA_CLI_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "cli_timer.h"
#include "flashattn.h"

typedef struct cli_attn_shape {
    fa_dtype dtype;
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    bool causal;
    bool deterministic;  /* fa_attention_desc.deterministic */
    int32_t num_splits;  /* fa_attention_desc.num_splits */
    int64_t page_size;   /* > 0: K and V as a paged cache (forward), seq_k a multiple */
    int64_t append;      /* > 0: each forward appends this many rows per sequence (k_new, v_new)
                            to a cache of seq_k - append keys, then attends to all seq_k */
    fa_window window;    /* fa_attention_desc.window */
    float softcap;       /* fa_attention_desc.softcap */
    bool alibi;          /* ALiBi with the geometric slopes of cli_attn.slopes_host */
    bool bias;           /* an additive bias (1, Sq, Hq, Sk) of random values (bias_host) */
    fa_dtype bias_dtype; /* the bias's: f32, f16 or bf16 */
    bool bias_bhsd;      /* the bias's memory in (1, Hq, Sq, Sk) order, else (1, Sq, Hq, Sk) */
    bool varlen; /* a packed batch (cu_seqlens_q/k) of `batch` sequences whose lengths are seeded
                    draws around seq_q and seq_k (cli_attn.cu_host) */
} cli_attn_shape;

/* The dtype of o: the shape's, but f16 for FP8 (e4m3) inputs. */
static inline fa_dtype cli_attn_o_dtype(const cli_attn_shape *s)
{
    return s->dtype == FA_DTYPE_E4M3 ? FA_DTYPE_F16 : s->dtype;
}

typedef struct cli_attn {
    fa_context *ctx; /* borrowed */
    cli_attn_shape shape;
    fa_attention_desc desc;
    bool with_grads;                     /* d_o, d_q, d_k, d_v exist */
    size_t q_elems, kv_elems, lse_elems; /* lse_elems = B * Hq * Sq */
    fa_buffer *q, *k, *v, *o, *lse, *d_o, *d_q, *d_k, *d_v;
    fa_tensor tq, tk, tv, to, tlse, tdo, tdq, tdk, tdv;
    /* A paged cache (shape.page_size > 0): k and v hold B * max_pages pages in the order of the
     * block table, a seeded shuffle; desc.block_table points at ttable, so a cli_attn must not
     * move once created. */
    int64_t max_pages;
    int32_t *table_host;
    fa_buffer *table;
    fa_tensor ttable;
    /* An append (shape.append > 0; cli_append.c): desc.k_new, v_new and seqlens_k point at
     * these, so the same rows are written again at every call. */
    uint64_t seed;
    fa_buffer *k_new, *v_new, *lens;
    fa_tensor tk_new, tv_new, tlens;
    /* ALiBi (shape.alibi): one slope per query head, 2^(-8 (h + 1) / Hq) (the ALiBi paper's
     * sequence for a power-of-two head count), shape (1, 1, Hq, 1); desc.alibi_slopes points at
     * talibi. */
    float *slopes_host;
    fa_buffer *slopes;
    fa_tensor talibi;
    /* An additive bias (shape.bias): shape.bias_dtype, one per query, head and key for every
     * batch entry (memory in (1, Sq, Hq, Sk) order, or (1, Hq, Sq, Sk) with shape.bias_bhsd),
     * random from the seed; desc.bias points at tbias. */
    void *bias_host;
    fa_buffer *bias;
    fa_tensor tbias;
    /* A packed batch (shape.varlen): the prefix sums of query and key rows, B + 1 each, drawn
     * from [S/2, 3S/2] per sequence (the same lengths for both when seq_q == seq_k); the
     * buffers then hold (1, total, H, D) and desc.cu_seqlens_q/k point at tcu. */
    int32_t *cu_host[2];
    fa_buffer *cu[2];
    fa_tensor tcu[2];
    char detail[256]; /* a failure of the tool's own (host memory, sizes); "" otherwise */
} cli_attn;

/** Creates the buffers (gradient buffers too when `with_grads`), fills q, k, v (and d_o) with
 * fa_testkit_fill_random from `seed` and writes zeros to the outputs, so that no later call
 * touches a page for the first time that belongs to an input or output. */
fa_status cli_attn_create(cli_attn *a, fa_context *ctx, const cli_attn_shape *shape,
                          bool with_grads, uint64_t seed);
/** K or V as read back from its buffer (`paged`), in the logical (B, Sk, Hkv, D) order into
 * `logical`; a copy where the cache is not paged. */
void cli_attn_unpage(const cli_attn *a, const void *paged, void *logical);
/** With shape.append: creates k_new and v_new (random from the seed) and seqlens_k (seq_k -
 * append for every sequence) and points the forward's desc at them (cli_attn_create calls it). */
fa_status cli_attn_append_init(cli_attn *a);
/** With shape.append: what K (which = 0) or V (1) must hold after the calls, in the logical
 * (B, Sk, Hkv, D) order: their first contents with each sequence's last `append` keys replaced
 * by the rows of k_new or v_new. False when out of host memory. */
bool cli_attn_appended(const cli_attn *a, int which, void *logical);
/** Frees the buffers; a zeroed or half-created cli_attn is fine. */
void cli_attn_destroy(cli_attn *a);

/** One forward (or backward) call, ended by fa_context_synchronize. */
fa_status cli_attn_call(cli_attn *a, bool backward);

/** Prints the failure of one of the calls above (cli_fail format); returns 1. */
int cli_attn_fail(const cli_attn *a, fa_status status);

/** FlashAttention's FLOP count: forward 4*B*H*Sq*Sk*D, halved when causal; backward 2.5x. With
 * a window, 4*B*H*D per (query, key) pair the mask leaves, counted. */
/* --window L,R and --softcap C of run and bench: false where the text is not one. */
bool cli_parse_window(const char *text, fa_window *out);
bool cli_parse_softcap(const char *text, float *out);
double cli_attn_flops(const cli_attn_shape *s, bool backward);
/** The FLOPs of a's call: cli_attn_flops, summed over the sequences of a packed batch. */
double cli_attn_call_flops(const cli_attn *a, bool backward);
/** The bytes of K and V a's call reads (cli_attn_kv_bytes over the packed rows). */
double cli_attn_call_kv_bytes(const cli_attn *a);
/** The bytes of K and V a forward reads at least once: 2*B*Sk*Hkv*D*element size. */
double cli_attn_kv_bytes(const cli_attn_shape *s);
/** What a standard attention's f32 score matrix takes: B*H*Sq*Sk*4 bytes (saturating). */
uint64_t cli_attn_score_bytes(const cli_attn_shape *s);

/** How many calls to time. The first call is always timed on its own (with a memory probe);
 * it counts as the first warm-up, or as the first timed run when warmup is 0. With
 * `auto_reduce`, a first call over `slow_s` seconds is followed by a second, and when that one
 * is over `slow_s` too it is the only timed run (a first call may hold one-time costs). With
 * max_total_s > 0 the timed runs stop once they have taken that long. */
typedef struct cli_time_plan {
    int warmup, repeat;
    bool auto_reduce;
    double slow_s;
    double max_total_s;
    /* After the warm-up calls, more until the warm-up has taken this long: a GPU raises its
     * clocks only after some busy time, and short calls would be timed before it does. */
    double warmup_s;
    /* With sample_s > 0, calls shorter than it are timed in groups queued back to back with one
     * synchronisation at the end (each sample the group's time over its calls), so that a short
     * GPU call is not timed with a host round trip per call. */
    double sample_s;
} cli_time_plan;

typedef struct cli_timing {
    double first_s;  /* the first call, one-time costs included */
    double median_s; /* median of the timed runs */
    double min_s;
    int warmup_runs, timed_runs;
    int calls_per_sample;    /* cli_time_plan.sample_s */
    bool reduced;            /* auto_reduce took the first call as the measurement */
    cli_rss_probe first_rss; /* peak resident growth over the first call */
} cli_timing;

fa_status cli_attn_time(cli_attn *a, bool backward, const cli_time_plan *plan, cli_timing *out);

/** The warm-up, in seconds, that brings ctx's device to its working clock before timing: 0.6 on
 * a GPU (NVIDIA's driver, with no CUDA context open, lets an idle GPU's clock fall and Vulkan work
 * took 0.3-0.6 s to raise it: docs/PERF.md), 0 on the CPU and on CPU-based drivers. */
double cli_gpu_warmup_s(fa_context *ctx);

/** fa_context_create on backend's device (its first GPU where device_seen is false and the
 * backend is named: PoCL is often OpenCL's device 0) with `threads` CPU threads and, where
 * log_level >= 0 (cli_parse_log), the library's messages up to it on stderr. */
fa_status cli_context_create(fa_backend backend, int64_t device, bool device_seen, int64_t threads,
                             int log_level, fa_context **ctx);

#endif
