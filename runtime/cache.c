// SPDX-License-Identifier: MIT
/* The on-disk cache folder shared by the backends. */
#include "fa_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

bool fa_cache_file(const char *name, char *path, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char dir[1024];
    int n;
    if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        n = snprintf(dir, sizeof dir, "%s/flashattn", xdg);
    else if (home && home[0])
        n = snprintf(dir, sizeof dir, "%s/.cache/flashattn", home);
    else
        return false;
    if (n < 0 || (size_t)n >= sizeof dir || !make_folders(dir))
        return false;
    n = snprintf(path, size, "%s/%s", dir, name);
    return n > 0 && (size_t)n < size;
}
