// SPDX-License-Identifier: MIT
/* The on-disk cache folder shared by the backends: resolution, file names, LRU eviction. */
#include "fa_cache.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utime.h>

/* mkdir -p, owner-only for what it creates. */
static bool make_folders(char *dir)
{
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int made = mkdir(dir, 0700);
        *s = '/';
        if (made != 0 && errno != EEXIST)
            return false;
    }
    return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

void fa_cache_configure(fa_context *ctx, const char *dir, uint64_t max_bytes)
{
    const size_t cap = sizeof ctx->cache_dir;
    ctx->cache_max_bytes = max_bytes ? max_bytes : FA_CACHE_DEFAULT_MAX_BYTES;
    ctx->cache_dir[0] = '\0';
    if (dir) {
        snprintf(ctx->cache_dir, cap, "%s", dir); /* the caller checked the length */
        return;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = 0;
    if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        n = snprintf(ctx->cache_dir, cap, "%s/flashattn", xdg);
    else if (home && home[0])
        n = snprintf(ctx->cache_dir, cap, "%s/.cache/flashattn", home);
    if (n < 0 || (size_t)n >= cap)
        ctx->cache_dir[0] = '\0'; /* too long: no disk cache */
}

bool fa_cache_file(const fa_context *ctx, const char *name, char *path, size_t size)
{
    char dir[sizeof ctx->cache_dir];
    if (!ctx->cache_dir[0])
        return false;
    memcpy(dir, ctx->cache_dir, sizeof dir);
    if (!make_folders(dir))
        return false;
    /* another version never reads this version's files (and evicts them in time) */
    int n = snprintf(path, size, "%s/flashattn-%s-%s", ctx->cache_dir, fa_version_string(), name);
    return n > 0 && (size_t)n < size;
}

void fa_cache_touch(const char *path)
{
    utime(path, NULL); /* a failure only makes the file look older */
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

/* One pass per file removed, oldest first, and no allocation: the folder holds tens of files, and
 * a context creation must not fail (or allocate) for its cache's sake. */
int fa_cache_trim_dir(const char *dir, uint64_t max_bytes)
{
    int removed = 0;
    for (;;) {
        DIR *d = opendir(dir);
        if (!d)
            return removed;
        uint64_t total = 0;
        time_t oldest_time = 0;
        char oldest[1024] = "", path[1024];
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            struct stat st;
            if (!ours(e->d_name) ||
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
                stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            total += (uint64_t)st.st_size;
            if (!oldest[0] || st.st_mtime < oldest_time) {
                oldest_time = st.st_mtime;
                memcpy(oldest, path, sizeof oldest);
            }
        }
        closedir(d);
        if (total <= max_bytes || !oldest[0] || remove(oldest) != 0)
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
