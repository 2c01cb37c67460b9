// SPDX-License-Identifier: MIT
/* fa_platform.h on Linux and other POSIX systems. */
#if !defined(_WIN32)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sysconf(_SC_PHYS_PAGES), clock_gettime */
#endif
#include "fa_platform.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

void fa_mutex_lock(fa_mutex *m)
{
    pthread_mutex_lock(&m->mutex);
}

void fa_mutex_unlock(fa_mutex *m)
{
    pthread_mutex_unlock(&m->mutex);
}

void fa_once_run(fa_once *once, void (*fn)(void))
{
    pthread_once(&once->once, fn);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Whether `name` is a library name of this system (fa_dynlib_open). */
static bool library_name_fits(const char *name)
{
    if (ends_with(name, ".dll"))
        return false;
#if defined(__APPLE__)
    return ends_with(name, ".dylib");
#else
    return !ends_with(name, ".dylib");
#endif
}

fa_dynlib *fa_dynlib_open(const char *const *names, char *reason, size_t reason_size)
{
    if (reason && reason_size)
        snprintf(reason, reason_size, "no library name for this system");
    int tried = 0;
    for (const char *const *name = names; *name; name++) {
        if (!library_name_fits(*name))
            continue;
        void *lib = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return (fa_dynlib *)lib;
        const char *why = dlerror();
        if (reason && reason_size && !tried++)
            snprintf(reason, reason_size, "%s", why ? why : *name);
    }
    return NULL;
}

void *fa_dynlib_symbol(fa_dynlib *lib, const char *symbol)
{
    return lib ? dlsym(lib, symbol) : NULL;
}

void fa_dynlib_close(fa_dynlib *lib)
{
    if (lib)
        dlclose(lib);
}

double fa_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *fa_aligned_alloc(size_t alignment, size_t size)
{
    return aligned_alloc(alignment, size);
}

void fa_aligned_free(void *p)
{
    free(p);
}

uint64_t fa_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

/* Copies the value of the first "key<spaces>: value" line of /proc/cpuinfo into out. */
static bool cpuinfo_field(const char *key, char *out, size_t out_size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    size_t key_len = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) != 0 ||
            (line[key_len] != ' ' && line[key_len] != '\t' && line[key_len] != ':'))
            continue;
        char *value = strchr(line, ':');
        if (!value)
            continue;
        value++;
        while (*value == ' ' || *value == '\t')
            value++;
        value[strcspn(value, "\r\n")] = '\0';
        snprintf(out, out_size, "%s", value);
        found = out[0] != '\0';
    }
    fclose(f);
    return found;
}

bool fa_cpu_names(char *name, size_t name_size, char *vendor, size_t vendor_size)
{
    name[0] = vendor[0] = '\0';
    bool named = cpuinfo_field("model name", name, name_size);
    return cpuinfo_field("vendor_id", vendor, vendor_size) || named;
}

double fa_load_average(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1.0;
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    return load;
}

/* A "Vm...:   1234 kB" line of /proc/self/status, in bytes; false where there is none. */
static bool proc_status_kb(const char *key, uint64_t *bytes)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return false;
    char line[256];
    size_t key_len = strlen(key);
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
            unsigned long long kb = strtoull(line + key_len + 1, NULL, 10);
            *bytes = (uint64_t)kb * 1024u;
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

bool fa_process_resident(uint64_t *bytes)
{
    return proc_status_kb("VmRSS", bytes);
}

bool fa_process_peak_resident(uint64_t *bytes)
{
    if (proc_status_kb("VmHWM", bytes))
        return true;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss <= 0)
        return false;
#if defined(__APPLE__)
    *bytes = (uint64_t)ru.ru_maxrss; /* bytes on macOS */
#else
    *bytes = (uint64_t)ru.ru_maxrss * 1024u; /* kilobytes on Linux and the BSDs */
#endif
    return true;
}

bool fa_process_peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok;
}

unsigned long fa_process_id(void)
{
    return (unsigned long)getpid();
}

bool fa_env_get(const char *name, char **value)
{
    const char *env = getenv(name);
    *value = NULL;
    if (!env)
        return true;
    const size_t n = strlen(env) + 1;
    if (!(*value = malloc(n)))
        return false;
    memcpy(*value, env, n);
    return true;
}

bool fa_cache_home(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        n = snprintf(out, size, "%s", xdg);
    else if (home && home[0])
        n = snprintf(out, size, "%s/.cache", home);
    return n > 0 && (size_t)n < size;
}

bool fa_dir_make(const char *path)
{
    char dir[1024];
    int len = snprintf(dir, sizeof dir, "%s", path);
    if (len <= 0 || (size_t)len >= sizeof dir)
        return false;
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

bool fa_dir_files(const char *dir, void (*visit)(const fa_dir_entry *entry, void *user), void *user)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    char path[1024];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        const fa_dir_entry entry = {e->d_name, (uint64_t)st.st_size, (int64_t)st.st_mtime};
        visit(&entry, user);
    }
    closedir(d);
    return true;
}

bool fa_file_replace(const char *from, const char *to)
{
    return rename(from, to) == 0;
}

bool fa_file_touch(const char *path)
{
    return utime(path, NULL) == 0;
}
#endif
