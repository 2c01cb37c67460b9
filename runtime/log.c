// SPDX-License-Identifier: MIT
/* Last-error sentences and the optional log callback. The library never prints by itself. */
#include "fa_internal.h"

#include <stdio.h>

/* Failures before a context exists (fa_context_create) are kept per thread. */
static _Thread_local char create_error[1024];

const char *fa_last_create_error(void)
{
    return create_error;
}

const char *fa_context_last_error(const fa_context *ctx)
{
    return ctx ? ctx->last_error : "context is NULL";
}

static void log_message(const fa_context *ctx, fa_log_level level, const char *message)
{
    if (ctx && ctx->log && level <= ctx->log_level)
        ctx->log(ctx->log_user_data, level, message);
}

fa_status fa_fail(fa_context *ctx, fa_status status, const char *fmt, ...)
{
    char *dst = ctx ? ctx->last_error : create_error;
    size_t size = ctx ? sizeof ctx->last_error : sizeof create_error;
    va_list args;
    va_start(args, fmt);
    vsnprintf(dst, size, fmt, args);
    va_end(args);
    log_message(ctx, FA_LOG_ERROR, dst);
    return status;
}

void fa_log(const fa_context *ctx, fa_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log || level > ctx->log_level)
        return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    log_message(ctx, level, message);
}

void fa_workspace_track(fa_context *ctx, int64_t delta_bytes)
{
    fa_memory_stats *m = &ctx->memory;
    m->workspace_bytes = (uint64_t)((int64_t)m->workspace_bytes + delta_bytes);
    if (m->workspace_bytes > m->workspace_peak_bytes)
        m->workspace_peak_bytes = m->workspace_bytes;
}
