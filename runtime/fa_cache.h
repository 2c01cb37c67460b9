// SPDX-License-Identifier: MIT
/* Where backends keep what they compile (Vulkan pipeline caches, OpenCL binaries): the folder a
 * context names (fa_context_desc.cache_dir), capped in size, least recently used files evicted
 * first. Every file name starts with "flashattn-<version>-", and callers check a
 * checksum of what they read, so stale, foreign or corrupt files are ignored and replaced. */
#ifndef FA_CACHE_H
#define FA_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fa_internal.h"

#define FA_CACHE_DEFAULT_MAX_BYTES ((uint64_t)256 << 20)

/* Resolves the context's folder at creation: dir NULL = "flashattn" in the platform's cache
 * folder (fa_cache_home), "" = no disk cache; max_bytes 0 = FA_CACHE_DEFAULT_MAX_BYTES. */
void fa_cache_configure(fa_context *ctx, const char *dir, uint64_t max_bytes);

/* Writes to `path` the full name of the context's cache file "flashattn-<version>-<name>", creating
 * the folder as needed. False when the context has no disk cache or no usable folder; callers
 * then simply run without one. */
bool fa_cache_file(const fa_context *ctx, const char *name, char *path, size_t size);

/* A file was just read from the cache: it becomes the most recently used. */
void fa_cache_touch(const char *path);

/* Evicts the library's least recently used files (by modification time, oldest first) until they
 * total at most the context's cap. A backend that keeps files calls it when its context opens (so
 * that a cap lowered since the last run holds from the start) and after each file it writes. */
void fa_cache_trim(const fa_context *ctx);

/* fa_cache_trim on a folder: only files named flashattn-..., or by earlier versions
 * ("opencl-...", "vulkan-..."), are counted and removed. Returns how many were removed. */
int fa_cache_trim_dir(const char *dir, uint64_t max_bytes);

/* 64-bit FNV-1a of n bytes continued from h (FA_CACHE_HASH_SEED to start): the checksum cache
 * files carry, and the hash of what names them. */
#define FA_CACHE_HASH_SEED 0xcbf29ce484222325ull
uint64_t fa_cache_hash(uint64_t h, const void *data, size_t n);

#endif
