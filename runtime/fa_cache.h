// SPDX-License-Identifier: MIT
/* Where backends keep what they compile (Vulkan pipeline caches, OpenCL binaries). */
#ifndef FA_CACHE_H
#define FA_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* Writes to `path` the full name of cache file `name` in $XDG_CACHE_HOME/flashattn (or
 * ~/.cache/flashattn), creating the folders as needed. False when there is no usable folder;
 * callers then simply run without a cache. */
bool fa_cache_file(const char *name, char *path, size_t size);

#endif
