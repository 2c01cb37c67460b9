// SPDX-License-Identifier: MIT
/* What the runtime shares with backends: the context and buffer objects, error and log helpers,
 * workspace accounting. Not installed. */
#ifndef FA_INTERNAL_H
#define FA_INTERNAL_H

#include "fa_backend.h"
#include "fa_tuning.h"

#include <stdarg.h>
#include <string.h>

#if defined(__MINGW32__) /* the build uses MinGW's C99 printf; plain "printf" means msvcrt's */
#define FA_PRINTF(fmt_index, args_index) __attribute__((format(gnu_printf, fmt_index, args_index)))
#elif defined(__GNUC__)
#define FA_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define FA_PRINTF(fmt_index, args_index)
#endif

struct fa_buffer {
    fa_context *ctx;
    void *handle; /* the backend's */
    size_t size;
    bool wrapped;  /* from buffer_wrap: the memory is the caller's */
    uint64_t base; /* bytes before the buffer in its handle (a wrap at an offset the backend
                      takes in views: iface wrap_offset_in_views); added to every view and copy */
    fa_buffer *prev, *next;
};

struct fa_context {
    const fa_backend_iface *backend;
    int device;
    fa_device_info device_info;
    void *backend_state;
    fa_log_fn log;
    void *log_user_data;
    fa_log_level log_level;
    int cpu_threads;
    void *cuda_stream;   /* from fa_context_desc: the CUDA backend issues work there when set */
    char cache_dir[768]; /* the disk cache's folder, resolved at creation; "" = none */
    uint64_t cache_max_bytes; /* its cap (fa_context_desc) */
    bool lost; /* set after a device loss: every later call fails with ERROR_CONTEXT_LOST */
    /* FA_TEST_DEVICE_LOSS=N (for tests): the N-th backend call of the context reports
     * FA_ERROR_DEVICE_LOST instead of running. 0: off. */
    long inject_loss_at, backend_calls;
    fa_tuning tuning; /* the developer knobs, read at creation (fa_knob_value) */
    fa_buffer *buffers;
    /* The per-sequence lengths after a KV-cache append (runtime/append.c), as the forward reads
     * them: a backend buffer of append_lens_bytes, grown on demand, freed with the context. */
    void *append_lens;
    size_t append_lens_bytes;
    fa_memory_stats memory;
    char last_error[1024];
};

/* A developer knob's value as the environment held it when ctx was created; NULL if unset. */
static inline const char *fa_knob_value(const fa_context *ctx, fa_knob knob)
{
    return ctx->tuning.value[knob];
}

/* Whether a switch knob is on: set, not empty and not "0". */
static inline bool fa_knob_on(const fa_context *ctx, fa_knob knob)
{
    const char *v = ctx->tuning.value[knob];
    return v && v[0] && strcmp(v, "0") != 0;
}

/* Whether a public struct's `reserved` words are all zero (flashattn.h: ABI). */
static inline bool fa_reserved_zero(const uint64_t *words, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (words[i])
            return false;
    return true;
}
#define FA_RESERVED_MESSAGE                                                                        \
    "%s.reserved is not zero: zero-initialise the struct (a field of a newer flashattn than "      \
    "this %s?)"

/* Records `status` with a formatted sentence as the context's last error, logs it at ERROR
 * level, and returns `status`, so failures read `return fa_fail(ctx, FA_ERROR_X, "...", ...)`. */
fa_status fa_fail(fa_context *ctx, fa_status status, const char *fmt, ...) FA_PRINTF(3, 4);
void fa_log(const fa_context *ctx, fa_log_level level, const char *fmt, ...) FA_PRINTF(3, 4);
/* Every call into the backend after context_init goes between these two: fa_backend_enter
 * returns FA_OK to go on (or the injected device loss of FA_TEST_DEVICE_LOSS), fa_backend_leave
 * passes the backend's status through and is the one place that latches a device loss, so that
 * every later call fails with FA_ERROR_CONTEXT_LOST whichever backend lost its device. */
fa_status fa_backend_enter(fa_context *ctx);
fa_status fa_backend_leave(fa_context *ctx, fa_status status);
/* Backends report scratch memory they allocate (+) and free (-). */
void fa_workspace_track(fa_context *ctx, int64_t delta_bytes);

/* Registry (runtime/registry.c): the iface of a built backend, or NULL. */
const fa_backend_iface *fa_registry_get(fa_backend backend);

#endif
