// SPDX-License-Identifier: MIT
/* The one interface every backend implements. The runtime validates each call and resolves
 * defaults before a backend sees it, so backends may assume valid, non-empty input. */
#ifndef FA_BACKEND_H
#define FA_BACKEND_H

#include "flashattn.h"

/* A validated tensor as a backend sees it: its buffer's backend handle, and the offset and
 * strides in elements of the tensor's dtype. For the LSE, stride_s runs along queries. */
typedef struct fa_view {
    void *buffer;
    uint64_t offset;
    int64_t stride_b, stride_s, stride_h;
} fa_view;

/* One validated attention call. head_dim stride is 1 for every view; batch and heads are > 0.
 * seq_k may be 0 (then O = 0, LSE = -inf, dQ = 0). The forward always has seq_q > 0; the
 * backward may get seq_q = 0 with seq_k > 0, and must then write dK = dV = 0. */
typedef struct fa_attention_call {
    fa_dtype dtype;   /* of q, k, v, d_o, d_q, d_k, d_v and (but FP8) o; lse is always f32 */
    fa_dtype o_dtype; /* of o: dtype, but f32, f16 or bf16 where dtype is FA_DTYPE_E4M3 */
    /* FP8 descale factors (dtype FA_DTYPE_E4M3, forward): has_descale[i] and an f32 view of
     * the factor of q (0), k (1) and v (2) for batch entry b and KV head hk at
     * descale[i].offset + b * stride_b + hk * stride_h (strides 0 where broadcast); absent,
     * a factor of 1. Query head h takes the factors of KV head h / (heads_q / heads_kv):
     * S = scale dq dk Q K^T and O = dv softmax(S) V. Values not checked. */
    bool has_descale[3];
    fa_view descale[3];
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    float scale; /* resolved: never 0 */
    bool causal; /* bottom-right aligned: query i sees keys j <= i + seq_k - seq_q */
    /* A sliding window narrower than causal (fa_window, resolved): query i sees keys j with
     * j >= i + off - window_left (where window_left >= 0) and j <= i + off + window_right (where
     * window_right >= 0), off = seq_k - seq_q (per sequence with seqlens_k). Resolved so that
     * `window` is set only when a bound cuts: causal is folded in (a right bound of 0 sets causal,
     * and with causal window_right is 0), and bounds that reach past every key are -1, so that
     * window_left < seq_k and window_right < seq_q. fa_call_left and fa_call_right give the
     * bounds of any call. */
    bool window;
    int32_t window_left, window_right;
    float softcap; /* 0: off; else scaled scores s become softcap * tanh(s / softcap) */
    /* ALiBi (forward and backward): has_alibi, and an f32 view of the slopes, slope (b, h) at
     * alibi.offset + b * alibi.stride_b + h * alibi.stride_h (stride_b is 0 where one slope per
     * head serves every batch entry). Query i of head h adds -slope * |i + off - j| to its score
     * for key j after the scale and the softcap (off as for the window). Values not checked. */
    bool has_alibi;
    fa_view alibi;
    /* An additive bias (forward and backward): has_bias, its dtype (f32, f16 or bf16, not
     * necessarily the call's), and a view of (batch, query, head, key) elements: element
     * (b, i, h, j) at bias.offset + b * stride_b + i * stride_s + h * stride_h + j, a stride 0
     * where that dimension is broadcast. Added to the scores after the softcap and ALiBi; -inf
     * hides a key. */
    bool has_bias;
    fa_dtype bias_dtype;
    fa_view bias;
    bool deterministic; /* backward: bitwise-identical results run to run */
    int32_t num_splits; /* forward: 0 or the key chunks asked for (<= FA_MAX_SPLITS): fa_split.h */
    bool has_lse;
    fa_view q, k, v, o, lse;
    /* Per-sequence key counts (forward): has_seqlens_k, and an int32 view of B values (element
     * b at seqlens_k.offset + b * stride_b), not yet checked against [0, seq_k]. */
    bool has_seqlens_k;
    fa_view seqlens_k;
    /* A paged K/V cache (forward): has_block_table, an int32 view of B x max_pages page indices
     * (entry (b, p) at block_table.offset + b * stride_b + p * stride_s), not yet checked; k and
     * v then index pages by their batch stride and rows within a page by their seq stride, and
     * seq_k is max_pages * page_size. */
    bool has_block_table;
    fa_view block_table;
    int64_t page_size, num_pages;
    /* The KV-cache append (forward): k_new and v_new, (batch, seq_new, heads_kv, head_dim) in
     * the call's dtype. The runtime copies their rows into k and v (copy_regions) and points
     * seqlens_k at the lengths after the append before the backend's forward runs, so backends
     * ignore these. */
    /* A packed variable-length batch (forward and backward): has_varlen, varlen_batch (B, >= 0)
     * sequences, and int32 views of B + 1 prefix sums each (element b at offset + b * stride_b),
     * checked by the runtime (from 0, never decreasing, cu_seqlens_q[B] <= seq_q and
     * cu_seqlens_k[B] <= seq_k). batch is 1, seq_q and seq_k are the packed totals; the window
     * was resolved against those totals. A backend sees such a call only where its varlen_takes
     * says so, with cu_q_host and cu_k_host, the runtime's host copies of the prefix sums (valid
     * during the call); else the runtime runs each sequence as a call of its own
     * (fa_call_sequence, runtime/varlen.c). Rows past cu_seqlens_q[B] are the runtime's either
     * way. */
    bool has_varlen;
    int64_t varlen_batch;
    int64_t max_seqlen_q, max_seqlen_k; /* 0 or bounds the runtime checked; backends ignore */
    fa_view cu_seqlens_q, cu_seqlens_k;
    const int32_t *cu_q_host, *cu_k_host;
    bool has_append;
    int64_t seq_new;
    fa_view k_new, v_new;
    fa_view d_o, d_q, d_k, d_v; /* backward only */
} fa_attention_call;

/* The keys a query row sees, relative to its diagonal (key i + seq_k - seq_q of query i): from
 * fa_call_left(c) before it to fa_call_right(c) after it, -1 meaning no bound. */
static inline int64_t fa_call_left(const fa_attention_call *c)
{
    return c->window ? c->window_left : -1;
}
static inline int64_t fa_call_right(const fa_attention_call *c)
{
    return c->causal ? 0 : c->window ? c->window_right : -1;
}

/* Sets c's window from the bounds left and right (-1: none) against c->seq_q and c->seq_k,
 * causal already folded in: a left bound of seq_k or more reaches key 0 from every row (the last
 * row's diagonal is at most key seq_k - 1), a right bound of seq_q or more the last key from
 * every row (the first row's diagonal is at least key -seq_q + its sequence's length), so both
 * become -1; with neither left, the call has no window. */
static inline void fa_call_bound_window(fa_attention_call *c, int64_t left, int64_t right)
{
    c->window_left = left >= 0 && left < c->seq_k ? (int32_t)left : -1;
    c->window_right = c->causal ? 0 : right >= 0 && right < c->seq_q ? (int32_t)right : -1;
    c->window = c->window_left >= 0 || c->window_right > 0;
    if (!c->window)
        c->window_left = c->window_right = -1;
}

/* Sequence b of a packed batch (c->has_varlen) as a call of its own: batch 1, rows q0 to
 * q0 + sq - 1 of q, o, lse (and d_o, d_q) and k0 to k0 + sk - 1 of k, v (d_k, d_v), ALiBi's slopes
 * of entry b where they are per entry, and the window resolved again against sq and sk (bounds
 * that reach past the sequence's keys or queries become -1, as the runtime resolves a call's). */
static inline fa_attention_call fa_call_sequence(const fa_attention_call *c, int64_t b, int64_t q0,
                                                 int64_t sq, int64_t k0, int64_t sk)
{
    fa_attention_call s = *c;
    s.has_varlen = false;
    s.varlen_batch = 0;
    s.batch = 1;
    s.seq_q = sq;
    s.seq_k = sk;
    fa_view *rows_q[] = {&s.q, &s.o, &s.lse, &s.d_o, &s.d_q};
    fa_view *rows_k[] = {&s.k, &s.v, &s.d_k, &s.d_v};
    for (size_t i = 0; i < sizeof rows_q / sizeof rows_q[0]; i++)
        rows_q[i]->offset += (uint64_t)(q0 * rows_q[i]->stride_s);
    for (size_t i = 0; i < sizeof rows_k / sizeof rows_k[0]; i++)
        rows_k[i]->offset += (uint64_t)(k0 * rows_k[i]->stride_s);
    s.alibi.offset += (uint64_t)(b * s.alibi.stride_b);
    s.alibi.stride_b = 0;
    for (int i = 0; i < 3; i++) {
        s.descale[i].offset += (uint64_t)(b * s.descale[i].stride_b);
        s.descale[i].stride_b = 0;
    }
    fa_call_bound_window(&s, s.window_left, s.window_right);
    return s;
}

/* One copy of copy_regions: `bytes` (> 0) bytes from byte src_offset of the source buffer to
 * byte dst_offset of the destination. */
typedef struct fa_copy_region {
    uint64_t src_offset, dst_offset, bytes;
} fa_copy_region;

typedef struct fa_backend_iface {
    fa_backend id;
    const char *name;
    /* Loads the driver and counts devices; called once per process. Returns false with a reason
     * when the backend cannot run here. */
    bool (*probe)(int *device_count, char *reason, size_t reason_size);
    void (*device_info)(int index, fa_device_info *out);
    /* Opens device `index` for ctx, storing whatever it needs in ctx->backend_state. */
    fa_status (*context_init)(fa_context *ctx, int index);
    /* (optional) Opens ctx on the application's own objects (`app`: the backend's interop struct,
     * such as fa_opencl_objects), setting *index to their device's index in the backend's list.
     * NULL = the backend has no interop. */
    fa_status (*context_adopt)(fa_context *ctx, const void *app, int *index);
    void (*context_release)(fa_context *ctx);
    fa_status (*buffer_alloc)(fa_context *ctx, size_t size, void **handle);
    /* (optional) a handle over `size` bytes from byte `offset` of memory the caller owns (a
     * device pointer, a cl_mem); buffer_free must then release only the handle (and what the
     * backend retained), never the memory. NULL = the backend cannot wrap. */
    fa_status (*buffer_wrap)(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                             void **handle);
    /* buffer_wrap takes no offset (a Vulkan descriptor's offset has an alignment rule): the
     * runtime wraps from 0 and adds the offset to every view and host copy of the buffer. */
    bool wrap_offset_in_views;
    void (*buffer_free)(fa_context *ctx, void *handle);
    /* (optional) releases a handle from buffer_wrap where buffer_free cannot tell it from an
     * allocation (the CPU backend's handles are plain pointers). NULL = buffer_free does. */
    void (*buffer_unwrap)(fa_context *ctx, void *handle);
    fa_status (*buffer_write)(fa_context *ctx, void *handle, size_t offset, const void *src,
                              size_t size);
    fa_status (*buffer_read)(fa_context *ctx, void *handle, size_t offset, void *dst, size_t size);
    fa_status (*synchronize)(fa_context *ctx);
    fa_status (*forward)(fa_context *ctx, const fa_attention_call *call);
    fa_status (*backward)(fa_context *ctx, const fa_attention_call *call);
    /* Copies n (> 0) regions from buffer src to buffer dst (handles; the same buffer or not),
     * queued in order with the context's other work, as forward is: after every call issued
     * before, before every call issued after. The runtime guarantees that no destination range
     * overlaps another or any source range. */
    fa_status (*copy_regions)(fa_context *ctx, void *src, void *dst, const fa_copy_region *regions,
                              size_t n);
    /* (optional) rejects calls the device cannot run (dtype, head dim, sizes) with a status and
     * a message, before any work is issued. NULL = every valid call is supported. */
    fa_status (*check_call)(fa_context *ctx, const fa_attention_call *call, bool backward);
    /* The forward takes per-sequence key counts (fa_attention_call.seqlens_k). */
    bool seqlens_k;
    /* The forward takes a paged K/V cache (fa_attention_call.block_table); check_call may still
     * refuse particular calls. */
    bool paged_kv;
    /* The kernels that read seqlens_k and block_table clamp every value and report one out of
     * range at the next synchronize (FA_ERROR_OUT_OF_BOUNDS), so the runtime does not read them
     * back before each call (which waits for the device); it still does for an append, whose
     * rows it places from the host. */
    bool index_check_on_device;
    /* The forward and backward take a sliding window (fa_attention_call.window) and logit
     * softcapping (fa_attention_call.softcap); the runtime refuses such calls on a backend that
     * does not say so, and check_call may still refuse particular ones. */
    bool window;
    bool softcap;
    /* ... and ALiBi slopes (fa_attention_call.has_alibi), and an additive bias (has_bias),
     * likewise. */
    bool alibi;
    bool bias;
    /* The forward takes FP8 calls (dtype FA_DTYPE_E4M3, with descale and o_dtype); the runtime
     * refuses them elsewhere. */
    bool fp8;
    /* (optional) Whether the backend takes the packed batch `call` (has_varlen, cu_q_host set)
     * in one call, all sequences at once; NULL or false: the runtime runs it sequence by
     * sequence. check_call still sees the call first. */
    bool (*varlen_takes)(fa_context *ctx, const fa_attention_call *call, bool backward);
    /* A wrapped buffer's handle may be released while work that uses its memory is still queued
     * (the kernels took the address when they were issued), so fa_buffer_destroy need not wait:
     * a wrap per call then costs no synchronisation. */
    bool unwrap_without_wait;
} fa_backend_iface;

#endif
