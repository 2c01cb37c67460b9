// SPDX-License-Identifier: MIT
/* The on-disk cache folder shared by the backends: resolution, file names, LRU eviction. */
#include "fa_cache.h"

#include <stdio.h>
#include <string.h>

#include "fa_platform.h"

void fa_cache_configure(fa_context *ctx, const char *dir, uint64_t max_bytes)
{
    const size_t cap = sizeof ctx->cache_dir;
    ctx->cache_max_bytes = max_bytes ? max_bytes : FA_CACHE_DEFAULT_MAX_BYTES;
    ctx->cache_dir[0] = '\0';
    if (dir) {
        snprintf(ctx->cache_dir, cap, "%s", dir); /* the caller checked the length */
        return;
    }
    char home[sizeof ctx->cache_dir];
    if (!fa_cache_home(home, sizeof home))
        return; /* none, or too long: no disk cache */
    int n = snprintf(ctx->cache_dir, cap, "%s/flashattn", home);
    if (n < 0 || (size_t)n >= cap)
        ctx->cache_dir[0] = '\0';
}

bool fa_cache_file(const fa_context *ctx, const char *name, char *path, size_t size)
{
    if (!ctx->cache_dir[0] || !fa_dir_make(ctx->cache_dir))
        return false;
    /* another version never reads this version's files (and evicts them in time) */
    int n = snprintf(path, size, "%s/flashattn-%s-%s", ctx->cache_dir, fa_version_string(), name);
    return n > 0 && (size_t)n < size;
}

void fa_cache_touch(const char *path)
{
    fa_file_touch(path); /* a failure only makes the file look older */
}

void fa_cache_trim(const fa_context *ctx)
{
    if (ctx->cache_dir[0])
        fa_cache_trim_dir(ctx->cache_dir, ctx->cache_max_bytes);
}

static bool ours(const char *name)
{
    static const char *const prefixes[] = {"flashattn-", "opencl-", "vulkan-"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* What one pass over the folder finds: the library's files' total and the oldest of them. */
typedef struct trim_pass {
    const char *dir;
    uint64_t total;
    int64_t oldest_time;
    char oldest[1024];
} trim_pass;

static void trim_visit(const fa_dir_entry *e, void *user)
{
    trim_pass *p = user;
    char path[sizeof p->oldest];
    if (!ours(e->name) || snprintf(path, sizeof path, "%s/%s", p->dir, e->name) >= (int)sizeof path)
        return;
    p->total += e->size;
    if (!p->oldest[0] || e->mtime < p->oldest_time) {
        p->oldest_time = e->mtime;
        memcpy(p->oldest, path, sizeof p->oldest);
    }
}

/* One pass per file removed, oldest first, and no allocation: the folder holds tens of files, and
 * a context creation must not fail (or allocate) for its cache's sake. */
int fa_cache_trim_dir(const char *dir, uint64_t max_bytes)
{
    int removed = 0;
    for (;;) {
        trim_pass pass = {.dir = dir};
        if (!fa_dir_files(dir, trim_visit, &pass) || pass.total <= max_bytes || !pass.oldest[0] ||
            remove(pass.oldest) != 0)
            return removed;
        removed++;
    }
}

uint64_t fa_cache_hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
