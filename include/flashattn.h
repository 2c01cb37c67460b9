// SPDX-License-Identifier: MIT
/* flashattn: exact FlashAttention (tiled online softmax, forward and backward) behind one C API,
 * on CUDA, Vulkan, OpenCL and the CPU. The library links no GPU runtime: each backend opens its
 * driver at run time and reports itself unavailable, with the reason, where it cannot.
 *
 * Every creation call takes a *_desc struct in which zero means "default", so callers write
 *   fa_context_create(&(fa_context_desc){ .backend = FA_BACKEND_CPU }, &ctx);
 * and new fields never break them. Every call returns an fa_status; on failure the context keeps
 * a sentence with the detail (which argument, which limit, the native error code), read by
 * fa_context_last_error(). The library never prints unless a log callback is set, never exits.
 *
 * Threads: a context, and the buffers made from it, are used by one thread at a time (the
 * caller serialises); separate contexts may run in separate threads at once. The queries that
 * take no context (fa_backend_query, fa_device_query, fa_status_name, ...) may be called from
 * any thread. */
#ifndef FLASHATTN_H
#define FLASHATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flashattn/status.h"

/* FA_API marks the exported functions: on Windows dllexport while the DLL is built and dllimport
 * for its callers (define FA_STATIC to link the static library instead; CMake's
 * flashattn::flashattn_static does), elsewhere default visibility in a library whose other
 * symbols are hidden. */
#if defined(FA_STATIC)
#define FA_API
#elif defined(_WIN32)
#if defined(FA_BUILDING_LIBRARY)
#define FA_API __declspec(dllexport)
#else
#define FA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define FA_API __attribute__((visibility("default")))
#else
#define FA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FA_VERSION_MAJOR 0
#define FA_VERSION_MINOR 2
#define FA_VERSION_PATCH 0
#define FA_VERSION_HEX ((FA_VERSION_MAJOR << 16) | (FA_VERSION_MINOR << 8) | FA_VERSION_PATCH)

/** The backward's limit on |LSE| (2^21): a row whose LSE reaches it gets NaN gradients on every
 * backend (fa_attention_backward says why). */
#define FA_BACKWARD_LSE_LIMIT 2097152.0f

/* ABI. Each struct below keeps its size and its fields' offsets for the life of a version line
 * (the SONAME: libflashattn.so.MAJOR.MINOR before 1.0, .MAJOR from 1.0; README). The structs a
 * caller fills (fa_context_desc, fa_buffer_desc, fa_attention_desc) end in `reserved`, which must
 * be zero: a later version of the line gives those bytes meaning, zero being this version's
 * behaviour, so a program built against this header keeps working with it; and a call that sets
 * bytes this library does not know fails with FA_ERROR_INVALID_ARGUMENT rather than ignoring
 * them. The structs the library fills (fa_backend_info, fa_device_info, fa_memory_stats) end in
 * `reserved` too, which it zeroes. fa_tensor is fixed. So: zero-initialise ({0} or memset), then
 * set the fields you need. */

/** The library's version as "MAJOR.MINOR.PATCH", a static string. */
FA_API const char *fa_version_string(void);
/** The library's version as FA_VERSION_HEX of the build that is running. */
FA_API unsigned fa_version(void);

/** A short sentence for a status ("invalid argument"); never NULL, "unknown status" if unknown. */
FA_API const char *fa_status_string(fa_status status);
/** The status's name without prefix ("ERROR_SHAPE_MISMATCH"); never NULL. */
FA_API const char *fa_status_name(fa_status status);

/* ---- backends and devices ------------------------------------------------------------------ */

typedef enum fa_backend {
    FA_BACKEND_AUTO = 0, /* CUDA (cc >= 8.0), else a Vulkan GPU, else an OpenCL GPU, else CPU */
    FA_BACKEND_CUDA,
    FA_BACKEND_VULKAN,
    FA_BACKEND_OPENCL,
    FA_BACKEND_CPU,
    FA_BACKEND_COUNT
} fa_backend;

typedef enum fa_device_kind {
    FA_DEVICE_KIND_OTHER = 0,
    FA_DEVICE_KIND_DISCRETE_GPU,
    FA_DEVICE_KIND_INTEGRATED_GPU,
    FA_DEVICE_KIND_CPU,      /* the CPU backend itself */
    FA_DEVICE_KIND_SOFTWARE, /* a GPU API implemented on the CPU: lavapipe, PoCL */
} fa_device_kind;

/** What a backend is on this machine. `reason` says why it is not available, empty if it is. */
typedef struct fa_backend_info {
    fa_backend backend;
    const char *name; /* "cuda", "vulkan", "opencl", "cpu" */
    bool built;       /* compiled into this library */
    bool available;   /* its driver loaded and it has at least one device */
    int device_count;
    char reason[256];
    uint64_t reserved[8]; /* zeroed */
} fa_backend_info;

/** One device of one backend, with what matters for choosing and for kernels.
 * Fields a backend cannot know are zero or empty. */
typedef struct fa_device_info {
    fa_backend backend;
    int index; /* within its backend */
    fa_device_kind kind;
    char name[128];
    char vendor[64];
    char driver[64];      /* driver name and version */
    char api_version[32]; /* compute capability "9.0", Vulkan "1.3.239", "OpenCL 3.0", ... */
    int api_major, api_minor;
    uint64_t memory_bytes;
    uint64_t max_buffer_bytes; /* largest single buffer or binding the backend can address */
    uint32_t compute_units;
    uint32_t shared_memory_bytes; /* per workgroup / block */
    uint32_t max_workgroup_size;
    uint32_t subgroup_size_min, subgroup_size_max;
    bool f16;              /* native f16 arithmetic */
    bool bf16;             /* native bf16 arithmetic or conversion */
    bool matrix_units;     /* tensor cores, cooperative matrix, AMX, ... */
    char kernels[128];     /* which kernel family serves this device and why (backend-specific,
                              free text; "" where the backend says nothing) */
    uint64_t reserved[16]; /* zeroed */
} fa_device_info;

/** Short lower-case name of a backend ("auto", "cuda", ...); "unknown" when out of range. */
FA_API const char *fa_backend_name(fa_backend backend);
/** Parses "auto", "cuda", "vulkan", "opencl" or "cpu" (any case). ERROR_INVALID_BACKEND if none. */
FA_API fa_status fa_backend_from_name(const char *name, fa_backend *out);
/** Fills `out` for one backend, probing its driver on first use (thread-safe, done once). */
FA_API fa_status fa_backend_query(fa_backend backend, fa_backend_info *out);
/** Fills `out` for device `index` of an available backend. ERROR_INVALID_DEVICE past the end. */
FA_API fa_status fa_device_query(fa_backend backend, int index, fa_device_info *out);

/* ---- contexts -------------------------------------------------------------------------------- */

typedef struct fa_context fa_context;
typedef struct fa_buffer fa_buffer;

typedef enum fa_log_level {
    FA_LOG_ERROR = 0,
    FA_LOG_WARN,
    FA_LOG_INFO,
    FA_LOG_DEBUG,
} fa_log_level;

typedef void (*fa_log_fn)(void *user_data, fa_log_level level, const char *message);

/** Options of the CPU backend (fa_context_desc.cpu); ignored by the others. */
typedef struct fa_cpu_options {
    int threads; /* 0 = OpenMP's default */
} fa_cpu_options;

/** Options of the CUDA backend (fa_context_desc.cuda); set on another backend, a warning. */
typedef struct fa_cuda_options {
    /* A CUstream to issue work on, not owned; NULL = the context's own. CUDA's default streams,
     * whose handle 0 would read as NULL here (PyTorch's default stream is one), are
     * FA_CUDA_STREAM_LEGACY and FA_CUDA_STREAM_PER_THREAD (flashattn/cuda.h). */
    void *stream;
} fa_cuda_options;

/** How to open a context. Defaults (all zero): AUTO backend, whose choice the environment
 * variables FA_BACKEND (cuda|vulkan|opencl|cpu) and FA_DEVICE (index) override; device 0 of an
 * explicitly named backend; no logging; OpenMP's default thread count on the CPU backend. */
typedef struct fa_context_desc {
    fa_backend backend;
    int device;    /* index within `backend`; ignored for AUTO (see FA_DEVICE) */
    fa_log_fn log; /* optional */
    void *log_user_data;
    fa_log_level log_level; /* messages at or below this level reach `log`; default ERROR */
    /* Per-backend options (where 0.2 had cpu_threads and cuda_stream, at the same offsets).
     * Interop with an application's own objects: flashattn/cpu.h, cuda.h, vulkan.h, opencl.h. */
    fa_cpu_options cpu;
    fa_cuda_options cuda;
    /* Where compiled programs are kept between runs (Vulkan pipeline caches, OpenCL binaries):
     * NULL = $XDG_CACHE_HOME/flashattn or ~/.cache/flashattn (%LOCALAPPDATA%\flashattn on
     * Windows), "" = no disk cache. Files carry the library version, the device and its driver,
     * and a checksum: a stale, foreign or corrupt file is ignored and replaced. */
    const char *cache_dir;
    uint64_t cache_max_bytes; /* the folder's cap: least recently used files go first once
                                 the library's files pass it; 0 = 256 MiB */
    uint64_t reserved[8];     /* zero (ABI, above) */
} fa_context_desc;

/** Opens a context on one device. `desc` may be NULL for defaults. On failure *out is NULL and
 * the status says why; fa_last_create_error() holds the sentence. */
FA_API fa_status fa_context_create(const fa_context_desc *desc, fa_context **out);
/** Waits for pending work, frees every buffer still alive in the context, then the context.
 * NULL is ignored. As with free(), the context and all of its buffers are invalid afterwards:
 * destroying, reading or passing any of them again is undefined behaviour (a use after free). */
FA_API void fa_context_destroy(fa_context *ctx);
/** The backend the context runs on (never AUTO). */
FA_API fa_backend fa_context_backend(const fa_context *ctx);
/** The device the context runs on. */
FA_API fa_status fa_context_device(const fa_context *ctx, fa_device_info *out);
/** Waits until every call issued on the context has finished. */
FA_API fa_status fa_context_synchronize(fa_context *ctx);
/** The detail of the context's last failure, "" if none. Valid until the next call on ctx. */
FA_API const char *fa_context_last_error(const fa_context *ctx);
/** The detail of this thread's last failed fa_context_create, "" if none. */
FA_API const char *fa_last_create_error(void);

/** Memory the context holds on its device, in bytes. */
typedef struct fa_memory_stats {
    uint64_t buffer_bytes;         /* live buffers created by the caller */
    uint64_t buffer_peak_bytes;    /* their peak */
    uint64_t workspace_bytes;      /* scratch the backend holds now (tiles, D, partials) */
    uint64_t workspace_peak_bytes; /* its peak since the context was created */
    uint64_t reserved[4];          /* zeroed */
} fa_memory_stats;

FA_API fa_status fa_context_memory(const fa_context *ctx, fa_memory_stats *out);

/* ---- buffers --------------------------------------------------------------------------------- */

/** A buffer's size and, optionally, its first contents (`size` bytes copied from `data`). */
typedef struct fa_buffer_desc {
    size_t size;
    const void *data;     /* optional */
    uint64_t reserved[4]; /* zero (ABI, above) */
} fa_buffer_desc;

/** Allocates device memory in the context. ERROR_OUT_OF_DEVICE_MEMORY when it does not fit. */
FA_API fa_status fa_buffer_create(fa_context *ctx, const fa_buffer_desc *desc, fa_buffer **out);
/** Frees a buffer after the work that uses it has finished (a wrapped buffer on CUDA is forgotten
 * at once: the work queued on the stream keeps its address, and the caller's stream order protects
 * the memory, as for any kernel of theirs). NULL is ignored. As with free(), the
 * buffer is invalid afterwards; it must be destroyed before its context, or left to
 * fa_context_destroy (destroying it after its context is a use after free). */
FA_API void fa_buffer_destroy(fa_buffer *buf);
FA_API size_t fa_buffer_size(const fa_buffer *buf);
/** Copies `size` bytes from host `src` to the buffer at byte `offset`. */
FA_API fa_status fa_buffer_write(fa_buffer *buf, size_t offset, const void *src, size_t size);
/** Copies `size` bytes from the buffer at byte `offset` to host `dst`; waits for pending work. */
FA_API fa_status fa_buffer_read(fa_buffer *buf, size_t offset, void *dst, size_t size);

/* ---- tensors and attention ------------------------------------------------------------------- */

typedef enum fa_dtype {
    FA_DTYPE_INVALID = 0,
    FA_DTYPE_F32,
    FA_DTYPE_F16,
    FA_DTYPE_BF16,
    FA_DTYPE_I32, /* index tensors only (fa_attention_desc.seqlens_k, block_table) */
    /* FP8 e4m3 (OCP's E4M3, CUDA's __nv_fp8_e4m3, PyTorch's float8_e4m3fn): 1 sign, 4 exponent
     * (bias 7) and 3 mantissa bits, no infinities, largest value 448. Forward inputs q, k, v
     * (and k_new, v_new) only, with an o of f32, f16 or bf16 and optional descale factors:
     * fa_attention_desc.q_descale. */
    FA_DTYPE_E4M3,
} fa_dtype;

/* "f32", "f16", "bf16", "i32", "e4m3", "invalid" */
FA_API const char *fa_dtype_name(fa_dtype dtype);
FA_API size_t fa_dtype_size(fa_dtype dtype); /* bytes per element, 0 if invalid */

/** Converts `count` elements of dtype `from` at `src` into dtype `to` at `dst`, on the host, for
 * filling f16, bf16 and e4m3 tensors and reading them back: f32, f16, bf16 and e4m3 in any
 * direction, rounding to nearest even (the rounding the backends use), overflow to infinity
 * (to e4m3, which has none: saturated to +-448, as FP8 quantization does), NaN to a quiet NaN;
 * the same dtype copies. In place only where dst == src and the element sizes agree; any other
 * overlap is FA_ERROR_INVALID_ARGUMENT. Other dtypes: FA_ERROR_UNSUPPORTED_DTYPE; NULL with
 * count > 0: FA_ERROR_NULL_POINTER. Needs no context; thread-safe. */
FA_API fa_status fa_convert(fa_dtype to, void *dst, fa_dtype from, const void *src, size_t count);

enum { FA_DIM_BATCH = 0, FA_DIM_SEQ = 1, FA_DIM_HEADS = 2, FA_DIM_HEAD = 3 };

/** A view of a buffer as a 4-D tensor in the logical order (batch, seq, heads, head_dim).
 * `offset` is in bytes; `stride` is in elements, per logical dimension, and stride[3] must be 1.
 * All-zero strides mean packed BSHD. For the LSE the shape is (batch, seq_q, heads, 1), dtype
 * F32, and all-zero strides mean packed (batch, heads, seq_q), the usual LSE layout. */
typedef struct fa_tensor {
    fa_buffer *buffer;
    uint64_t offset;
    fa_dtype dtype;
    int64_t shape[4];
    int64_t stride[4];
} fa_tensor;

/** Packed (batch, seq, heads, dim) view at byte offset 0. */
FA_API fa_tensor fa_tensor_bshd(fa_buffer *buf, fa_dtype dtype, int64_t batch, int64_t seq,
                                int64_t heads, int64_t dim);
/** Packed (batch, heads, seq, dim) memory, seen in the logical (batch, seq, heads, dim) order. */
FA_API fa_tensor fa_tensor_bhsd(fa_buffer *buf, fa_dtype dtype, int64_t batch, int64_t seq,
                                int64_t heads, int64_t dim);
/** Packed (batch, heads, seq_q) f32 LSE view. */
FA_API fa_tensor fa_tensor_lse(fa_buffer *buf, int64_t batch, int64_t heads, int64_t seq_q);

/** A sliding window (fa_attention_desc.window), FlashAttention's local attention. Off (`enabled`
 * false, the zero value): every key the call's other options allow. On: query i sees the keys j
 * with i + Sk - Sq - left <= j <= i + Sk - Sq + right (aligned bottom-right like the causal mask;
 * Sk is the sequence's own key count where seqlens_k gives one), a bound of -1 meaning none; so
 * (-1, 0) is the causal mask, and with fa_attention_desc.causal set too the right bound is
 * min(right, 0). Bounds below -1 are ERROR_INVALID_ARGUMENT, and so are bounds other than 0 and
 * -1 while `enabled` is false (a window set up but not switched on). A row that sees no key gets
 * O = 0 and LSE = -inf. */
typedef struct fa_window {
    bool enabled;
    int32_t left, right; /* keys before and after the row's diagonal it sees; -1: all */
} fa_window;

/** Options of one attention call. Zero is the default for every field:
 *   scale  0 -> 1/sqrt(head_dim);
 *   causal off; when on, aligned bottom-right: query i sees keys j <= i + seq_k - seq_q;
 *   deterministic off; when on, the backward gives bitwise-identical results run to run. Off, the
 *   CUDA backend's tensor-core backward (f16/bf16; head dims up to 256 on compute capability 8.0
 *   and 9.0, up to 64 on 8.6 and 8.9: docs/CUDA_KERNELS.md) sums dQ with float atomics, faster
 *   but not repeatable in the last bits; every other backward is deterministic anyway;
 *   num_splits 0: the backend decides; n from 1 to 256 asks the forward's split-key path
 *   (decoding: few query rows per KV head, many keys) for n chunks of keys, each attended in
 *   parallel and then merged exactly by their LSEs (fewer where there are fewer keys); 1 turns
 *   splitting off. The CUDA backend (docs/CUDA_KERNELS.md says which calls), the Vulkan and
 *   OpenCL backends (at most 16 query rows per KV head, README) and the CPU backend (calls of
 *   one query tile) have that path;
 *   seqlens_k NULL: every batch entry attends to all Sk keys. Else per-sequence cache lengths
 *   (forward only): an FA_DTYPE_I32 tensor of shape (B, 1, 1, 1); batch entry b attends to the
 *   first seqlens_k[b] keys of K and V (whose seq dimension is the cache's capacity), and its
 *   causal mask aligns on that length (query i sees keys j <= i + seqlens_k[b] - Sq); a length
 *   of 0 gives O = 0 and LSE = -inf; a length outside [0, Sk] is ERROR_OUT_OF_BOUNDS, with
 *   nothing written (the call reads the lengths back, waiting for work queued before it; on
 *   CUDA, whose kernels clamp every length, the next fa_context_synchronize returns it instead,
 *   and that call's outputs are undefined, except with k_new). The CPU, Vulkan and OpenCL
 *   backends take it, CUDA on its decoding path (other calls: ERROR_UNSUPPORTED); the backward
 *   on no backend;
 *   block_table NULL: K and V are (B, Sk, Hkv, D). Else a paged KV cache (forward only; the
 *   vLLM / FlashAttention convention): K and V are pages, (num_pages, page_size, Hkv, D) (their
 *   batch dimension counts pages, their seq dimension is the page size), and block_table an
 *   FA_DTYPE_I32 tensor of shape (B, max_pages, 1, 1): key j of batch entry b is row
 *   j % page_size of page block_table[b][j / page_size]. The cache's capacity Sk is max_pages x
 *   page_size; with seqlens_k, entry b reads only the pages its seqlens_k[b] keys cover, and the
 *   other entries of its row may hold anything. Every entry a call reads must be in
 *   [0, num_pages), else ERROR_OUT_OF_BOUNDS with nothing written (the call reads the table
 *   back, waiting for work queued before it; CUDA: as for seqlens_k, at the next
 *   fa_context_synchronize). The CPU backend takes it, and CUDA, Vulkan and OpenCL on their
 *   decoding paths (README); elsewhere ERROR_UNSUPPORTED;
 *   k_new, v_new NULL: K and V are only read. Else both (one without the other is
 *   ERROR_NULL_POINTER) append this step's rows to the KV cache before attending, as
 *   FlashAttention's kv-cache call does (forward only; they need seqlens_k, else
 *   ERROR_INVALID_ARGUMENT): shape (B, S_new, Hkv, D) in the dtype of k and v, any strides (a
 *   view whose (Hkv, D) rows are not contiguous is copied head by head). For each batch entry b
 *   and i < S_new, row i of k_new and v_new (all Hkv heads) is written into k and v at key
 *   position pos = seqlens_k[b] + i (paged: row pos % page_size of page
 *   block_table[b][pos / page_size]), and the attention then runs over the first
 *   seqlens_k[b] + S_new keys (causal aligned on that length). seqlens_k itself is not modified:
 *   the caller advances it. k and v become outputs, so they must not overlap each other, q, o,
 *   lse, k_new, v_new, seqlens_k or block_table (ERROR_INVALID_ARGUMENT). A position past the
 *   cache's capacity (Sk: k.shape[1], or max_pages x page_size when paged), or a table entry
 *   outside [0, num_pages) for a page the call writes or reads, is ERROR_OUT_OF_BOUNDS with
 *   nothing written. S_new = 0 writes nothing; the rows are written even when the attention
 *   itself has nothing to do (Sq = 0). Every backend that takes seqlens_k takes it (the runtime
 *   copies the rows on the device, queued before the attention);
 *   window off: no sliding window (fa_window above); forward and backward;
 *   softcap 0: off. Else logit softcapping, as in Gemma 2: each scaled score s becomes
 *   softcap * tanh(s / softcap) before the softmax (and the backward takes its derivative,
 *   1 - tanh^2); it must be finite and positive (a negative or non-finite value is
 *   ERROR_INVALID_ARGUMENT). Forward and backward.
 *   alibi_slopes NULL: no ALiBi. Else an FA_DTYPE_F32 tensor of per-head slopes, of shape
 *   (1, 1, Hq, 1) (one slope per query head, for every batch entry) or (B, 1, Hq, 1) (per batch
 *   entry and head), any strides (zero: packed); query i of head h then adds
 *   -slope[b][h] * |i + Sk - Sq - j| to its score for key j after the scale and the softcap
 *   (FlashAttention's convention: the distance from the row's bottom-right aligned diagonal;
 *   with seqlens_k, Sk is the sequence's own length). The LSE includes the bias. Any other dtype
 *   is ERROR_DTYPE_MISMATCH, any other shape ERROR_SHAPE_MISMATCH; the values are not checked (a
 *   non-finite slope gives NaN rows, as IEEE arithmetic does). Forward and backward (the bias is
 *   constant, so the gradients go through the softmax as without it).
 *   bias NULL: no additive bias. Else a tensor added to the scores after the scale, the softcap
 *   and ALiBi (T5-style relative positions, an arbitrary mask: -inf entries hide a key, and a
 *   row whose every key is hidden gets O = 0 and LSE = -inf): the logical (B, Hq, Sq, Sk) bias,
 *   held as fa_tensor's order has it, shape (B, Sq, Hq, Sk) (batch, seq, heads, last), element
 *   (b, i, h, j) the bias of query i of head h and key j. The batch, query and head dimensions
 *   may be 1 (one bias for every batch entry, query or head), and any stride but the keys' (which
 *   must be 1) may be 0, which broadcasts as well; all-zero strides mean packed, as for every
 *   tensor. f32, f16 or bf16 whatever the call's dtype (ERROR_DTYPE_MISMATCH else); another
 *   shape is ERROR_SHAPE_MISMATCH. With seqlens_k, key j of a sequence is column j; with a paged
 *   cache, the logical key index. Forward and backward: dQ, dK and dV go through it, the bias
 *   itself taken as a constant (no dBias is computed). Every backend takes it, the CPU's with
 *   seqlens_k and a paged cache too; CUDA, Vulkan and OpenCL not with a paged cache, and CUDA
 *   not with seqlens_k either (ERROR_UNSUPPORTED: their decoding paths, which alone read those,
 *   take no bias).
 *   cu_seqlens_q, cu_seqlens_k NULL: q, k, v hold B separate sequences of Sq and Sk rows. Else
 *   (both, or ERROR_NULL_POINTER) a packed variable-length batch, as FlashAttention's varlen
 *   calls: q, o (and d_q, d_o) are (1, total_q, Hq, D) and k, v (d_k, d_v) (1, total_k, Hkv, D),
 *   sequence b holding rows cu_seqlens_q[b] to cu_seqlens_q[b + 1] - 1 of q and rows
 *   cu_seqlens_k[b] to cu_seqlens_k[b + 1] - 1 of k and v; both FA_DTYPE_I32 of shape
 *   (B + 1, 1, 1, 1), B >= 0. The LSE is (1, total_q, Hq, 1) (zero strides: packed
 *   (Hq, total_q)). Every other option applies per sequence with that sequence's own lengths:
 *   the causal mask and the window aligned bottom-right, ALiBi's distance, GQA; alibi_slopes may
 *   be (B, 1, Hq, 1) for a slope per sequence and head. Rows past cu_seqlens_q[B] get O = 0 and
 *   LSE = -inf (dQ = 0), keys past cu_seqlens_k[B] dK = dV = 0. The values must start at 0
 *   (ERROR_INVALID_ARGUMENT), never decrease (ERROR_INVALID_ARGUMENT) and end inside the packed
 *   tensors, cu_seqlens_q[B] <= total_q and cu_seqlens_k[B] <= total_k (ERROR_OUT_OF_BOUNDS); the
 *   call reads them back, waiting for work queued before it, and writes nothing when one fails.
 *   max_seqlen_q, max_seqlen_k: 0, or bounds on every sequence's length (a longer sequence is
 *   ERROR_OUT_OF_BOUNDS, a negative bound ERROR_INVALID_ARGUMENT); only with cu_seqlens (else
 *   ERROR_INVALID_ARGUMENT). Not with seqlens_k, block_table, k_new or bias
 *   (ERROR_UNSUPPORTED). Forward and backward, on every backend: CUDA's tensor-core forward
 *   and atomic backward take the whole batch in one launch (README says which head dims);
 *   everywhere else the runtime runs each sequence as a call of its own over its rows (queued
 *   one after another, so one launch or a few per sequence).
 *   q_descale, k_descale, v_descale NULL: a factor of 1. Else (forward with e4m3 q, k, v only;
 *   with another dtype ERROR_INVALID_ARGUMENT) the FP8 descale factors, as FlashAttention 3
 *   takes them: FA_DTYPE_F32 tensors of shape (B, 1, Hkv, 1), where the batch and head
 *   dimensions may be 1 (one factor for every batch entry or KV head; (1, 1, 1, 1) is per
 *   tensor), any strides; any other dtype is ERROR_DTYPE_MISMATCH, shape
 *   ERROR_SHAPE_MISMATCH. The call attends as if q, k and v held their values times the
 *   factor of their batch entry and KV head (query head h takes q_descale of its KV head
 *   h / (Hq / Hkv)): S = scale (q_descale k_descale) Q K^T, O = v_descale softmax(S) V. With
 *   cu_seqlens, the batch dimension counts sequences. The values are not checked.
 *   FP8 (q.dtype FA_DTYPE_E4M3): k, v (and k_new, v_new) e4m3 too, o f32, f16 or bf16
 *   (ERROR_DTYPE_MISMATCH else), every other option as for any dtype; forward only (the
 *   backward: ERROR_UNSUPPORTED_DTYPE). The CPU backend takes it; the others return
 *   ERROR_UNSUPPORTED_DTYPE with the reason (README).
 *   A backend that does not implement window, softcap, ALiBi or the bias for a call returns
 *   ERROR_UNSUPPORTED with the reason (README's support table says which take them where). */
typedef struct fa_attention_desc {
    float scale;
    bool causal;
    bool deterministic;
    int32_t num_splits;
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *seqlens_k;
        uint64_t seqlens_k_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *block_table;
        uint64_t block_table_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *k_new;
        uint64_t k_new_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *v_new;
        uint64_t v_new_word_;
    };
    union { /* 16 bytes on every target, as the two reserved words it took */
        fa_window window;
        uint64_t window_words_[2];
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        float softcap;
        uint64_t softcap_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *alibi_slopes;
        uint64_t alibi_slopes_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *bias;
        uint64_t bias_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *cu_seqlens_q;
        uint64_t cu_seqlens_q_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *cu_seqlens_k;
        uint64_t cu_seqlens_k_word_;
    };
    int64_t max_seqlen_q, max_seqlen_k; /* each in a reserved word it took */
    union {                             /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *q_descale;
        uint64_t q_descale_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *k_descale;
        uint64_t k_descale_word_;
    };
    union { /* 8 bytes on every target, as the reserved word it took */
        const fa_tensor *v_descale;
        uint64_t v_descale_word_;
    };
    uint64_t reserved[14]; /* zero (ABI, above) */
} fa_attention_desc;

/** O = softmax(scale * Q K^T [softcapped, + ALiBi, + bias, masked]) V and LSE = logsumexp of each
 * row (natural log, f32).
 * q: (B, Sq, Hq, D); k, v: (B, Sk, Hkv, D) with Hq % Hkv == 0 (query head h reads KV head
 * h / (Hq / Hkv)); o like q; lse (B, Sq, Hq, 1) f32, or NULL when not needed. q, k, v, o share
 * one dtype (but FP8: desc above); accumulation is f32. A row that sees no key gets O = 0 and LSE =
 * -inf. B = 0 or Sq = 0 attends to nothing (an append, desc->k_new, still writes its rows). Outputs
 * must not share memory with inputs or with each other; interleaved views such as (B, S, 3, H, D)
 * packed tensors are fine. May run asynchronously. */
FA_API fa_status fa_attention_forward(fa_context *ctx, const fa_attention_desc *desc,
                                      const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                                      const fa_tensor *o, const fa_tensor *lse);

/** Gradients of the forward above, recomputing the scores from Q, K and LSE: dq like q, dk and dv
 * like k and v, all in the input dtype; o, d_o and lse as the forward wrote them. Rows that see no
 * key get zero gradients. dq, dk, dv are overwritten, not accumulated into.
 *
 * Accuracy: P is recomputed as exp(scale S - LSE) from the f32 LSE, and Delta = rowsum(dO * O)
 * from the stored, rounded O, as in FlashAttention; so the gradients carry a relative error of
 * about |LSE| 2^-24 in P beyond what the dtype costs (at scores of 1e4 about 6e-4; at 1e6 in f32
 * about 0.06), which an implementation keeping its softmax in memory would not pay. The
 * conformance matrix checks scores up to 1e4 in every dtype and 1e6 in f32 (README). Where
 * |LSE| >= FA_BACKWARD_LSE_LIMIT (2^21) the f32 LSE no longer resolves P (its spacing is 0.25 or
 * more, so P would be off by e^0.125 or worse, and at scale = 1e30 by any factor): such a row is
 * taken as NaN, so its gradients, and dK and dV of the keys it sees, are NaN on every backend
 * rather than wrong and finite. The forward has no such limit.
 *
 * NaN and infinity (forward and backward, every backend alike): IEEE arithmetic. A row that sees
 * a NaN score (a NaN in its Q row or in a visible key's K row, or infinities that cancel) gets NaN
 * O and NaN LSE, and NaN gradients wherever that row's P enters; rows that do not see it are
 * unaffected. One exception, shared with FlashAttention and with any tiled matrix product: a
 * masked score still multiplies its operands in the tile's product, as 0 x value, so under a
 * causal mask a NaN or infinity in V (forward) or in any input (backward) can also reach rows and
 * keys of the same tile that do not see it, and which those are depends on the backend's tiles.
 * Without a mask every row sees every key, so the result is the same on every backend. */
FA_API fa_status fa_attention_backward(fa_context *ctx, const fa_attention_desc *desc,
                                       const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                                       const fa_tensor *o, const fa_tensor *d_o,
                                       const fa_tensor *lse, const fa_tensor *d_q,
                                       const fa_tensor *d_k, const fa_tensor *d_v);

/** Combines n (1 to 256) partial results of one attention over disjoint key ranges into the
 * exact O and LSE: o_parts[i] and lse_parts[i] as fa_attention_forward wrote them for part i's
 * keys (same queries, scale and dtype); O = sum_i w_i O_i / sum_i w_i with w_i = exp(LSE_i -
 * max LSE), LSE = max + log(sum_i w_i); a row no part saw gets O = 0 and LSE = -inf. lse may
 * be NULL. For context parallelism: each device attends its shard of the keys, the parts are
 * brought to one context, merged. Exact for non-causal attention, and for a causal one where
 * each part was computed with the whole call's mask on its keys (a causal call on a key range
 * aligns to that range, not to the whole). Runs on the host: it reads the parts (waiting for
 * pending work) and writes o and lse; outputs must not overlap any part. */
FA_API fa_status fa_attention_merge(fa_context *ctx, int n, const fa_tensor *o_parts,
                                    const fa_tensor *lse_parts, const fa_tensor *o,
                                    const fa_tensor *lse);

#ifdef __cplusplus
}
#endif

#endif
