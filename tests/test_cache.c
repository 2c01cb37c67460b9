// SPDX-License-Identifier: MIT
/* The disk cache of compiled programs: least recently used files evicted past the cap (only the
 * library's own), and on every backend that keeps one (Vulkan, OpenCL) the folder a context names,
 * "" for none, a cap honoured, and a corrupted file ignored and replaced. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "fa_cache.h"
#include "flashattn.h"

static void make_file(const char *dir, const char *name, size_t bytes, time_t when)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    for (size_t i = 0; i < bytes; i++)
        fputc((int)(i & 0xff), f);
    cr_assert_eq(fclose(f), 0);
    struct utimbuf t = {when, when};
    cr_assert_eq(utime(path, &t), 0);
}

static bool exists(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* The library's files in dir: how many, their total size; `names` gets up to 16 of them. */
static int library_files(const char *dir, size_t *total, char names[16][256])
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    *total = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, "flashattn-", 10) != 0 || stat(path, &st) != 0)
            continue;
        if (names && n < 16)
            snprintf(names[n], 256, "%s", e->d_name);
        *total += (size_t)st.st_size;
        n++;
    }
    closedir(d);
    return n;
}

Test(cache, trim_evicts_least_recently_used_library_files_only)
{
    char dir[] = "/tmp/fa-cache-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    make_file(dir, "flashattn-0.1.0-opencl-a.bin", 100, 1000);
    make_file(dir, "vulkan-old.bin", 100, 2000); /* an earlier version's name */
    make_file(dir, "flashattn-0.1.0-opencl-c.bin", 100, 3000);
    make_file(dir, "flashattn-0.1.0-vulkan-d.bin", 100, 4000);
    make_file(dir, "notes.txt", 1000, 500); /* not the library's: never counted or removed */
    cr_assert_eq(fa_cache_trim_dir(dir, 400), 0, "under the cap: nothing goes");
    cr_assert_eq(fa_cache_trim_dir(dir, 250), 2);
    cr_assert(!exists(dir, "flashattn-0.1.0-opencl-a.bin"));
    cr_assert(!exists(dir, "vulkan-old.bin"));
    cr_assert(exists(dir, "flashattn-0.1.0-opencl-c.bin"));
    cr_assert(exists(dir, "flashattn-0.1.0-vulkan-d.bin"));
    cr_assert(exists(dir, "notes.txt"));
    cr_assert_eq(fa_cache_trim_dir(dir, 0), 2);
    cr_assert(exists(dir, "notes.txt"));
    remove(dir);
}

/* One small forward on a fresh context of `backend` with the cache folder `dir` and cap. */
static void run_forward(fa_backend backend, const char *dir, uint64_t cap, float *o_out)
{
    enum { S = 33, H = 2, D = 64 };
    const size_t n = (size_t)S * H * D;
    fa_context *ctx = NULL;
    cr_assert_eq(
        fa_context_create(
            &(fa_context_desc){.backend = backend, .cache_dir = dir, .cache_max_bytes = cap}, &ctx),
        FA_OK, "%s", fa_last_create_error());
    float *host = malloc(n * sizeof *host);
    cr_assert_not_null(host);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    fa_buffer *q, *o;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4, .data = host}, &q), FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4}, &o), FA_OK);
    fa_tensor tq = fa_tensor_bshd(q, FA_DTYPE_F32, 1, S, H, D);
    fa_tensor to = fa_tensor_bshd(o, FA_DTYPE_F32, 1, S, H, D);
    cr_assert_eq(
        fa_attention_forward(ctx, &(fa_attention_desc){.causal = true}, &tq, &tq, &tq, &to, NULL),
        FA_OK, "%s", fa_context_last_error(ctx));
    cr_assert_eq(fa_buffer_read(o, 0, o_out, n * 4), FA_OK);
    free(host);
    fa_context_destroy(ctx); /* the Vulkan backend writes its pipeline cache here */
}

ParameterizedTestParameters(cache, folder_cap_and_corruption)
{
    static fa_backend backends[] = {FA_BACKEND_VULKAN, FA_BACKEND_OPENCL};
    return cr_make_param_array(fa_backend, backends, 2);
}

ParameterizedTest(fa_backend *backend, cache, folder_cap_and_corruption)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(*backend, &info), FA_OK);
    if (!info.available)
        cr_skip_test("%s unavailable: %s", info.name, info.reason);
    static float first[33 * 2 * 64], again[33 * 2 * 64];
    char dir[] = "/tmp/fa-cache-test-XXXXXX", none[] = "/tmp/fa-cache-none-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_not_null(mkdtemp(none));

    /* "" = no disk cache, wherever the default would be */
    setenv("XDG_CACHE_HOME", none, 1);
    run_forward(*backend, "", 0, first);
    size_t total;
    cr_assert_eq(library_files(none, &total, NULL), 0, "cache_dir \"\" wrote a file");

    /* the named folder gets the programs */
    run_forward(*backend, dir, 0, first);
    char names[16][256];
    const int n = library_files(dir, &total, names);
    cr_assert_gt(n, 0, "%s wrote nothing to the cache folder", info.name);

    /* every file corrupted in its middle: ignored (same result) and replaced */
    for (int i = 0; i < n && i < 16; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "r+b");
        cr_assert_not_null(f);
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        const long len = ftell(f);
        cr_assert_eq(fseek(f, len / 2, SEEK_SET), 0);
        for (int b = 0; b < 16 && len / 2 + b < len; b++)
            fputc(0x5a, f);
        cr_assert_eq(fclose(f), 0);
    }
    run_forward(*backend, dir, 0, again);
    cr_assert_eq(memcmp(first, again, sizeof first), 0, "a corrupted cache changed the result");
    for (int i = 0; i < n && i < 16; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s was removed, not replaced", names[i]);
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        const long len = ftell(f);
        cr_assert_eq(fseek(f, len / 2, SEEK_SET), 0);
        int same = 0;
        for (int b = 0; b < 16 && len / 2 + b < len; b++)
            same += fgetc(f) == 0x5a;
        fclose(f);
        cr_assert_lt(same, 16, "%s still holds the corrupted bytes", names[i]);
    }

    /* a cap below one file: the library's files never stay above it */
    run_forward(*backend, dir, 1, again);
    cr_assert_eq(library_files(dir, &total, NULL), 0, "%zu bytes left under a 1-byte cap", total);
    remove(dir);
    remove(none);
}
