// SPDX-License-Identifier: MIT
/* The ABI policy of flashattn.h: every field of 0.2's public structs (tests/abi/) stays where it
 * was, fields added since lie in its reserved words, a program built against that layout runs
 * through it, reserved words set by a newer header are refused with a named status and nothing
 * touched, and the structs the library fills come back with their reserved words zeroed. Plain
 * C, no test framework. */
#include "abi/flashattn_v0_2_layout.h"
#include "flashattn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Field f of the current struct `now` sits where 0.2's `old` had it, with the same size. */
#define SAME(now, old, f)                                                                          \
    _Static_assert(offsetof(now, f) == offsetof(old, f) &&                                         \
                       sizeof(((now *)0)->f) == sizeof(((old *)0)->f),                             \
                   #now "." #f " moved or changed size")
#define SAME_SIZE(now, old) _Static_assert(sizeof(now) == sizeof(old), #now " changed size")

_Static_assert(sizeof(fa_backend) == sizeof(int) && sizeof(fa_dtype) == sizeof(int) &&
                   sizeof(fa_log_level) == sizeof(int) && sizeof(fa_device_kind) == sizeof(int),
               "enums are int-sized");
SAME_SIZE(fa_backend_info, v02_backend_info);
SAME(fa_backend_info, v02_backend_info, backend);
SAME(fa_backend_info, v02_backend_info, name);
SAME(fa_backend_info, v02_backend_info, built);
SAME(fa_backend_info, v02_backend_info, available);
SAME(fa_backend_info, v02_backend_info, device_count);
SAME(fa_backend_info, v02_backend_info, reason);
SAME(fa_backend_info, v02_backend_info, reserved);
SAME_SIZE(fa_device_info, v02_device_info);
SAME(fa_device_info, v02_device_info, backend);
SAME(fa_device_info, v02_device_info, index);
SAME(fa_device_info, v02_device_info, kind);
SAME(fa_device_info, v02_device_info, name);
SAME(fa_device_info, v02_device_info, vendor);
SAME(fa_device_info, v02_device_info, driver);
SAME(fa_device_info, v02_device_info, api_version);
SAME(fa_device_info, v02_device_info, api_major);
SAME(fa_device_info, v02_device_info, api_minor);
SAME(fa_device_info, v02_device_info, memory_bytes);
SAME(fa_device_info, v02_device_info, max_buffer_bytes);
SAME(fa_device_info, v02_device_info, compute_units);
SAME(fa_device_info, v02_device_info, shared_memory_bytes);
SAME(fa_device_info, v02_device_info, max_workgroup_size);
SAME(fa_device_info, v02_device_info, subgroup_size_min);
SAME(fa_device_info, v02_device_info, subgroup_size_max);
SAME(fa_device_info, v02_device_info, f16);
SAME(fa_device_info, v02_device_info, bf16);
SAME(fa_device_info, v02_device_info, matrix_units);
SAME(fa_device_info, v02_device_info, kernels);
SAME(fa_device_info, v02_device_info, reserved);
SAME_SIZE(fa_context_desc, v02_context_desc);
SAME(fa_context_desc, v02_context_desc, backend);
SAME(fa_context_desc, v02_context_desc, device);
SAME(fa_context_desc, v02_context_desc, log);
SAME(fa_context_desc, v02_context_desc, log_user_data);
SAME(fa_context_desc, v02_context_desc, log_level);
#define MOVED(now, f, old, g)                                                                      \
    _Static_assert(offsetof(now, f) == offsetof(old, g) &&                                         \
                       sizeof(((now *)0)->f) == sizeof(((old *)0)->g),                             \
                   #now "." #f " is not where " #old "." #g " was")
/* 0.2's cpu_threads and cuda_stream, now the per-backend options: the same bytes */
MOVED(fa_context_desc, cpu.threads, v02_context_desc, cpu_threads);
MOVED(fa_context_desc, cuda.stream, v02_context_desc, cuda_stream);
SAME(fa_context_desc, v02_context_desc, cache_dir);
SAME(fa_context_desc, v02_context_desc, cache_max_bytes);
SAME(fa_context_desc, v02_context_desc, reserved);
SAME_SIZE(fa_memory_stats, v02_memory_stats);
SAME(fa_memory_stats, v02_memory_stats, buffer_bytes);
SAME(fa_memory_stats, v02_memory_stats, buffer_peak_bytes);
SAME(fa_memory_stats, v02_memory_stats, workspace_bytes);
SAME(fa_memory_stats, v02_memory_stats, workspace_peak_bytes);
SAME(fa_memory_stats, v02_memory_stats, reserved);
SAME_SIZE(fa_buffer_desc, v02_buffer_desc);
SAME(fa_buffer_desc, v02_buffer_desc, size);
SAME(fa_buffer_desc, v02_buffer_desc, data);
SAME(fa_buffer_desc, v02_buffer_desc, reserved);
SAME_SIZE(fa_tensor, v02_tensor);
SAME(fa_tensor, v02_tensor, buffer);
SAME(fa_tensor, v02_tensor, offset);
SAME(fa_tensor, v02_tensor, dtype);
SAME(fa_tensor, v02_tensor, shape);
SAME(fa_tensor, v02_tensor, stride);
SAME_SIZE(fa_attention_desc, v02_attention_desc);
SAME(fa_attention_desc, v02_attention_desc, scale);
SAME(fa_attention_desc, v02_attention_desc, causal);
SAME(fa_attention_desc, v02_attention_desc, deterministic);
SAME(fa_attention_desc, v02_attention_desc, num_splits);
/* Fields added since 0.2.0, in words 0.2 reserved (whose zero is their default). */
#define CARVED(now, old, f)                                                                        \
    _Static_assert(offsetof(now, f) >= offsetof(old, reserved) &&                                  \
                       offsetof(now, f) + sizeof(((now *)0)->f) <=                                 \
                           offsetof(old, reserved) + sizeof(((old *)0)->reserved),                 \
                   #now "." #f " is not in 0.2's reserved words")
CARVED(fa_attention_desc, v02_attention_desc, seqlens_k_word_);
CARVED(fa_attention_desc, v02_attention_desc, block_table_word_);
CARVED(fa_attention_desc, v02_attention_desc, k_new_word_);
CARVED(fa_attention_desc, v02_attention_desc, v_new_word_);
CARVED(fa_attention_desc, v02_attention_desc, window_words_);
CARVED(fa_attention_desc, v02_attention_desc, softcap_word_);
CARVED(fa_attention_desc, v02_attention_desc, alibi_slopes_word_);
CARVED(fa_attention_desc, v02_attention_desc, bias_word_);
CARVED(fa_attention_desc, v02_attention_desc, cu_seqlens_q_word_);
CARVED(fa_attention_desc, v02_attention_desc, cu_seqlens_k_word_);
CARVED(fa_attention_desc, v02_attention_desc, max_seqlen_q);
CARVED(fa_attention_desc, v02_attention_desc, max_seqlen_k);
CARVED(fa_attention_desc, v02_attention_desc, q_descale_word_);
CARVED(fa_attention_desc, v02_attention_desc, k_descale_word_);
CARVED(fa_attention_desc, v02_attention_desc, v_descale_word_);
_Static_assert(sizeof(fa_window) <= sizeof(((fa_attention_desc *)0)->window_words_),
               "fa_window fits the words it took");
CARVED(fa_attention_desc, v02_attention_desc, reserved);

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static bool all_zero(const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i])
            return false;
    return true;
}

enum { B = 2, S = 37, H = 3, D = 16, N = B * S * H * D };

/* Reads o into host and says whether it still holds the poison pattern everywhere. */
static bool untouched(fa_buffer *o, const float *poison)
{
    float *host = malloc(N * sizeof(float));
    bool same = host && fa_buffer_read(o, 0, host, N * sizeof(float)) == FA_OK &&
                memcmp(host, poison, N * sizeof(float)) == 0;
    free(host);
    return same;
}

int main(void)
{
    /* The structs the library fills: reserved words zeroed over a garbage-filled struct. */
    v02_backend_info bi;
    memset(&bi, 0xab, sizeof bi);
    CHECK(fa_backend_query(FA_BACKEND_CPU, (fa_backend_info *)&bi) == FA_OK);
    CHECK(bi.available && all_zero(bi.reserved, 8));
    v02_device_info di;
    memset(&di, 0xab, sizeof di);
    CHECK(fa_device_query(FA_BACKEND_CPU, 0, (fa_device_info *)&di) == FA_OK);
    CHECK(all_zero(di.reserved, 16) && di.name[0] != '\0');

    /* A context, buffers and calls made through 0.2's layout. */
    v02_context_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.backend = FA_BACKEND_CPU;
    cd.cache_dir = "";
    cd.reserved[7] = 1; /* a newer header's field: refused */
    fa_context *ctx = (fa_context *)1;
    CHECK(fa_context_create((const fa_context_desc *)&cd, &ctx) == FA_ERROR_INVALID_ARGUMENT);
    CHECK(ctx == NULL && strstr(fa_last_create_error(), "fa_context_desc.reserved"));
    cd.reserved[7] = 0;
    CHECK(fa_context_create((const fa_context_desc *)&cd, &ctx) == FA_OK);
    if (!ctx)
        return 1;

    float *q = malloc(N * sizeof(float)), *poison = malloc(N * sizeof(float));
    float *o1 = malloc(N * sizeof(float)), *o2 = malloc(N * sizeof(float));
    if (!q || !poison || !o1 || !o2)
        return 1;
    srand(7);
    for (int i = 0; i < N; i++) {
        q[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
        poison[i] = nanf("");
    }
    v02_buffer_desc bd;
    memset(&bd, 0, sizeof bd);
    bd.size = N * sizeof(float);
    bd.data = q;
    bd.reserved[3] = 1;
    fa_buffer *qb = (fa_buffer *)1;
    CHECK(fa_buffer_create(ctx, (const fa_buffer_desc *)&bd, &qb) == FA_ERROR_INVALID_ARGUMENT);
    CHECK(qb == NULL && strstr(fa_context_last_error(ctx), "fa_buffer_desc.reserved"));
    bd.reserved[3] = 0;
    CHECK(fa_buffer_create(ctx, (const fa_buffer_desc *)&bd, &qb) == FA_OK);
    bd.data = poison;
    fa_buffer *ob = NULL;
    CHECK(fa_buffer_create(ctx, (const fa_buffer_desc *)&bd, &ob) == FA_OK);
    if (!qb || !ob)
        return 1;
    /* q, k and v are one buffer: self-attention of random rows. */
    const fa_tensor t = fa_tensor_bshd(qb, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor o = fa_tensor_bshd(ob, FA_DTYPE_F32, B, S, H, D);

    v02_attention_desc ad;
    memset(&ad, 0, sizeof ad);
    ad.causal = true;
    ad.reserved[29] = 1; /* the last word, still reserved */
    CHECK(fa_attention_forward(ctx, (const fa_attention_desc *)&ad, &t, &t, &t, &o, NULL) ==
          FA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(fa_context_last_error(ctx), "fa_attention_desc.reserved"));
    CHECK(untouched(ob, poison));
    ad.reserved[29] = 0;
    CHECK(fa_attention_forward(ctx, (const fa_attention_desc *)&ad, &t, &t, &t, &o, NULL) == FA_OK);
    CHECK(fa_buffer_read(ob, 0, o1, N * sizeof(float)) == FA_OK);
    /* The same call through the current header: the same bits, every element written. */
    CHECK(fa_buffer_write(ob, 0, poison, N * sizeof(float)) == FA_OK);
    const fa_attention_desc nd = {.causal = true};
    CHECK(fa_attention_forward(ctx, &nd, &t, &t, &t, &o, NULL) == FA_OK);
    CHECK(fa_buffer_read(ob, 0, o2, N * sizeof(float)) == FA_OK);
    CHECK(memcmp(o1, o2, N * sizeof(float)) == 0);
    int finite = 0;
    for (int i = 0; i < N; i++)
        finite += isfinite(o1[i]) && fabsf(o1[i]) <= 1.0f;
    CHECK(finite == N);

    v02_memory_stats ms;
    memset(&ms, 0xab, sizeof ms);
    CHECK(fa_context_memory(ctx, (fa_memory_stats *)&ms) == FA_OK);
    CHECK(all_zero(ms.reserved, 4) && ms.buffer_bytes == 2u * N * sizeof(float));

    fa_context_destroy(ctx);
    free(q);
    free(poison);
    free(o1);
    free(o2);
    if (failures)
        fprintf(stderr, "abi_layout: %d checks failed\n", failures);
    else
        printf("abi_layout: every field in place, 0.2's layout runs, reserved words refused and "
               "zeroed\n");
    return failures ? 1 : 0;
}
