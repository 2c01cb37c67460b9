// SPDX-License-Identifier: MIT
/* The operating system behind one small interface, as libuv does it: runtime/platform_posix.c and
 * runtime/platform_win32.c each implement all of it, and the rest of the library, the CLI and the
 * test kit reach threads, shared libraries, clocks, the environment, files and folders only
 * through it. Not installed. On Windows, paths and names are in the ANSI code page, as fopen()
 * takes them. */
#ifndef FA_PLATFORM_H
#define FA_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- locks and one-time initialisation, both statically initialised ------------------------- */

#if defined(_WIN32)
/* An SRWLOCK and an INIT_ONCE: one pointer each, zero when initialised statically (windows.h
 * stays out of this header). */
typedef struct fa_mutex {
    void *opaque;
} fa_mutex;
typedef struct fa_once {
    void *opaque;
} fa_once;
#define FA_MUTEX_INIT                                                                              \
    {                                                                                              \
        0                                                                                          \
    }
#define FA_ONCE_INIT                                                                               \
    {                                                                                              \
        0                                                                                          \
    }
#else
#include <pthread.h>
typedef struct fa_mutex {
    pthread_mutex_t mutex;
} fa_mutex;
typedef struct fa_once {
    pthread_once_t once;
} fa_once;
#define FA_MUTEX_INIT                                                                              \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER                                                                  \
    }
#define FA_ONCE_INIT                                                                               \
    {                                                                                              \
        PTHREAD_ONCE_INIT                                                                          \
    }
#endif

void fa_mutex_lock(fa_mutex *m);
void fa_mutex_unlock(fa_mutex *m);
/* Runs fn once per `once` in the life of the process; callers that arrive meanwhile wait. */
void fa_once_run(fa_once *once, void (*fn)(void));

/* ---- shared libraries ------------------------------------------------------------------------ */

typedef struct fa_dynlib fa_dynlib;

/* Opens the first of `names` (NULL-terminated) that loads, trying only the names this system's
 * libraries have: on Windows those ending in ".dll", on macOS those ending in ".dylib", on other
 * systems the rest. So a caller lists every system's names in one table, without an #if. On
 * failure returns NULL and writes into `reason` the loader's message for the first name tried,
 * the usual one (or, when no name fits the system, says so). */
fa_dynlib *fa_dynlib_open(const char *const *names, char *reason, size_t reason_size);
/* The address of `symbol`, or NULL when the library lacks it. */
void *fa_dynlib_symbol(fa_dynlib *lib, const char *symbol);
void fa_dynlib_close(fa_dynlib *lib);

/* ---- clock, memory, the machine and the process --------------------------------------------- */

/* Monotonic seconds from an arbitrary origin. */
double fa_clock_seconds(void);

/* C11's aligned_alloc (size a multiple of alignment), which Windows' C runtime lacks; what it
 * returns is freed by fa_aligned_free, never by free(). */
void *fa_aligned_alloc(size_t alignment, size_t size);
void fa_aligned_free(void *p);

/* The machine's physical memory in bytes; 0 where it cannot be read. */
uint64_t fa_physical_memory(void);
/* The processor's model name and vendor, "" each where the system does not say; false when
 * neither could be read. */
bool fa_cpu_names(char *name, size_t name_size, char *vendor, size_t vendor_size);

/* The 1-minute load average; negative where the system has none (Windows). */
double fa_load_average(void);
/* The process's resident memory now, and its peak; false where the system does not say. */
bool fa_process_resident(uint64_t *bytes);
bool fa_process_peak_resident(uint64_t *bytes);
/* Resets the peak to the current resident size; false where the system cannot (Windows). */
bool fa_process_peak_reset(void);
unsigned long fa_process_id(void);

/* ---- the environment ------------------------------------------------------------------------- */

/* A copy of environment variable `name` (free() it) in *value, NULL where it is unset; false,
 * with *value NULL, when out of memory. */
bool fa_env_get(const char *name, char **value);
/* The user's folder for caches, to which the library adds "flashattn": $XDG_CACHE_HOME (when
 * absolute) or $HOME/.cache on POSIX, %LOCALAPPDATA% on Windows. False when there is none or it
 * does not fit in `size`. */
bool fa_cache_home(char *out, size_t size);

/* ---- files and folders ----------------------------------------------------------------------- */

/* Creates the folder and any missing parents (owner-only where the system has modes); true when
 * it exists afterwards. */
bool fa_dir_make(const char *path);

typedef struct fa_dir_entry {
    const char *name; /* within the folder */
    uint64_t size;    /* bytes */
    int64_t mtime;    /* last modification, seconds since 1970 */
} fa_dir_entry;

/* Calls visit for each regular file in dir, in no particular order; false when the folder cannot
 * be read. Allocates nothing beyond what the system's listing does. */
bool fa_dir_files(const char *dir, void (*visit)(const fa_dir_entry *entry, void *user),
                  void *user);
/* Renames `from` to `to`, replacing `to` where it exists (rename() does not on Windows). */
bool fa_file_replace(const char *from, const char *to);
/* Sets the file's modification time to now. */
bool fa_file_touch(const char *path);

#endif
