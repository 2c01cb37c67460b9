// SPDX-License-Identifier: MIT
/* fa_platform.h on Windows (Windows 7 and newer; built with MinGW-w64). */
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include "fa_platform.h"

#include <windows.h>

#include <psapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(fa_mutex) == sizeof(SRWLOCK), "fa_mutex holds an SRWLOCK");
_Static_assert(sizeof(fa_once) == sizeof(INIT_ONCE), "fa_once holds an INIT_ONCE");

void fa_mutex_lock(fa_mutex *m)
{
    AcquireSRWLockExclusive((PSRWLOCK)m);
}

void fa_mutex_unlock(fa_mutex *m)
{
    ReleaseSRWLockExclusive((PSRWLOCK)m);
}

typedef struct once_call {
    void (*fn)(void);
} once_call;

static BOOL CALLBACK once_trampoline(PINIT_ONCE once, PVOID param, PVOID *context)
{
    (void)once;
    (void)context;
    ((once_call *)param)->fn();
    return TRUE;
}

void fa_once_run(fa_once *once, void (*fn)(void))
{
    once_call call = {fn};
    InitOnceExecuteOnce((PINIT_ONCE)once, once_trampoline, &call, NULL);
}

/* "message (error N)" for GetLastError's code, without FormatMessage's trailing line break. */
static void last_error_text(const char *what, char *out, size_t size)
{
    DWORD code = GetLastError();
    char text[256] = "";
    FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, text,
                   sizeof text, NULL);
    text[strcspn(text, "\r\n")] = '\0';
    snprintf(out, size, "%s: %s (error %lu)", what, text[0] ? text : "cannot load",
             (unsigned long)code);
}

/* Whether `name` is a Windows library name (fa_dynlib_open): one ending in ".dll". */
static bool library_name_fits(const char *name)
{
    size_t n = strlen(name);
    return n >= 4 && !_stricmp(name + n - 4, ".dll");
}

fa_dynlib *fa_dynlib_open(const char *const *names, char *reason, size_t reason_size)
{
    if (reason && reason_size)
        snprintf(reason, reason_size, "no library name for this system");
    int tried = 0;
    for (const char *const *name = names; *name; name++) {
        if (!library_name_fits(*name))
            continue;
        /* The application's folder and System32, not the current folder, which a program may
         * not control; plain LoadLibrary where the system lacks the flag (Windows 7 without
         * KB2533623). */
        HMODULE lib = LoadLibraryExA(*name, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
        if (!lib && GetLastError() == ERROR_INVALID_PARAMETER)
            lib = LoadLibraryA(*name);
        if (lib)
            return (fa_dynlib *)lib;
        if (reason && reason_size && !tried++)
            last_error_text(*name, reason, reason_size);
    }
    return NULL;
}

void *fa_dynlib_symbol(fa_dynlib *lib, const char *symbol)
{
    /* GetProcAddress returns a function pointer type; the callers store it as one. */
    return lib ? (void *)(uintptr_t)GetProcAddress((HMODULE)lib, symbol) : NULL;
}

void fa_dynlib_close(fa_dynlib *lib)
{
    if (lib)
        FreeLibrary((HMODULE)lib);
}

double fa_clock_seconds(void)
{
    LARGE_INTEGER now, frequency;
    QueryPerformanceCounter(&now);
    QueryPerformanceFrequency(&frequency);
    return (double)now.QuadPart / (double)frequency.QuadPart;
}

void *fa_aligned_alloc(size_t alignment, size_t size)
{
    return _aligned_malloc(size, alignment);
}

void fa_aligned_free(void *p)
{
    _aligned_free(p);
}

uint64_t fa_physical_memory(void)
{
    MEMORYSTATUSEX status = {.dwLength = sizeof status};
    return GlobalMemoryStatusEx(&status) ? (uint64_t)status.ullTotalPhys : 0;
}

/* A string value of the first processor's registry key, leading spaces dropped. */
static bool processor_value(const char *value, char *out, size_t size)
{
    char text[256];
    DWORD bytes = sizeof text;
    out[0] = '\0';
    if (RegGetValueA(HKEY_LOCAL_MACHINE, "HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0",
                     value, RRF_RT_REG_SZ, NULL, text, &bytes) != ERROR_SUCCESS)
        return false;
    const char *start = text + strspn(text, " \t");
    snprintf(out, size, "%s", start);
    return out[0] != '\0';
}

bool fa_cpu_names(char *name, size_t name_size, char *vendor, size_t vendor_size)
{
    bool named = processor_value("ProcessorNameString", name, name_size);
    return processor_value("VendorIdentifier", vendor, vendor_size) || named;
}

double fa_load_average(void)
{
    return -1.0; /* Windows keeps no load average */
}

static bool memory_counters(PROCESS_MEMORY_COUNTERS *pmc)
{
    return K32GetProcessMemoryInfo(GetCurrentProcess(), pmc, sizeof *pmc) != 0;
}

bool fa_process_resident(uint64_t *bytes)
{
    PROCESS_MEMORY_COUNTERS pmc;
    if (!memory_counters(&pmc))
        return false;
    *bytes = (uint64_t)pmc.WorkingSetSize;
    return true;
}

bool fa_process_peak_resident(uint64_t *bytes)
{
    PROCESS_MEMORY_COUNTERS pmc;
    if (!memory_counters(&pmc))
        return false;
    *bytes = (uint64_t)pmc.PeakWorkingSetSize;
    return true;
}

bool fa_process_peak_reset(void)
{
    return false; /* Windows keeps the peak working set for the life of the process */
}

unsigned long fa_process_id(void)
{
    return (unsigned long)GetCurrentProcessId();
}

/* The process's environment block rather than the C runtime's copy of it, which does not see
 * what a host application sets with SetEnvironmentVariable. */
bool fa_env_get(const char *name, char **value)
{
    *value = NULL;
    for (;;) {
        DWORD need = GetEnvironmentVariableA(name, NULL, 0);
        if (need == 0)
            return true; /* unset (an empty value needs 1) */
        char *copy = malloc(need);
        if (!copy)
            return false;
        DWORD got = GetEnvironmentVariableA(name, copy, need);
        if (got < need) {
            copy[got] = '\0';
            *value = copy;
            return true;
        }
        free(copy); /* it grew in between: again */
    }
}

bool fa_cache_home(char *out, size_t size)
{
    DWORD n = GetEnvironmentVariableA("LOCALAPPDATA", out, (DWORD)size);
    return n > 0 && n < size;
}

static bool is_dir(const char *path)
{
    DWORD attributes = GetFileAttributesA(path);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}

/* Each prefix ending before a separator is created in turn, failures ignored (a drive, a share,
 * a folder that exists): only whether the whole path ends up a folder counts. */
bool fa_dir_make(const char *path)
{
    char dir[1024];
    int len = snprintf(dir, sizeof dir, "%s", path);
    if (len <= 0 || (size_t)len >= sizeof dir)
        return false;
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/' && *s != '\\')
            continue;
        const char separator = *s;
        *s = '\0';
        CreateDirectoryA(dir, NULL);
        *s = separator;
    }
    CreateDirectoryA(dir, NULL);
    return is_dir(dir);
}

/* 100 ns ticks since 1601 to seconds since 1970. */
static int64_t unix_seconds(FILETIME t)
{
    const uint64_t ticks = ((uint64_t)t.dwHighDateTime << 32) | t.dwLowDateTime;
    return (int64_t)(ticks / 10000000u) - INT64_C(11644473600);
}

bool fa_dir_files(const char *dir, void (*visit)(const fa_dir_entry *entry, void *user), void *user)
{
    char pattern[1024];
    if (snprintf(pattern, sizeof pattern, "%s\\*", dir) >= (int)sizeof pattern)
        return false;
    WIN32_FIND_DATAA found;
    HANDLE h = FindFirstFileA(pattern, &found);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND; /* an empty folder */
    do {
        if (found.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT))
            continue;
        const fa_dir_entry entry = {
            found.cFileName,
            ((uint64_t)found.nFileSizeHigh << 32) | found.nFileSizeLow,
            unix_seconds(found.ftLastWriteTime),
        };
        visit(&entry, user);
    } while (FindNextFileA(h, &found));
    FindClose(h);
    return true;
}

bool fa_file_replace(const char *from, const char *to)
{
    return MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING) != 0;
}

bool fa_file_touch(const char *path)
{
    HANDLE h = CreateFileA(path, FILE_WRITE_ATTRIBUTES,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return false;
    FILETIME now;
    GetSystemTimeAsFileTime(&now);
    bool ok = SetFileTime(h, NULL, NULL, &now) != 0;
    CloseHandle(h);
    return ok;
}
#endif
