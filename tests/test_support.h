// SPDX-License-Identifier: MIT
/* What several test suites share: a context on a backend's test device, and a filled buffer. */
#ifndef FA_TEST_SUPPORT_H
#define FA_TEST_SUPPORT_H

#include <criterion/criterion.h>

#include "fa_testkit.h"
#include "flashattn.h"

/* A context on `backend`'s test device (fa_testkit_default_device) with no disk cache, or NULL
 * where the backend is unavailable (info->reason says why). */
static inline fa_context *test_context(fa_backend backend, fa_backend_info *info)
{
    cr_assert_eq(fa_backend_query(backend, info), FA_OK);
    if (!info->available)
        return NULL;
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = backend,
                                                      .device = fa_testkit_default_device(backend),
                                                      .cache_dir = ""},
                                   &ctx),
                 FA_OK, "%s: %s", info->name, fa_last_create_error());
    return ctx;
}

/* A buffer of `bytes`, holding `data` where it is not NULL. */
static inline fa_buffer *test_buffer(fa_context *ctx, const void *data, size_t bytes)
{
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = data}, &buf), FA_OK,
                 "%s", fa_context_last_error(ctx));
    return buf;
}

#endif
