// SPDX-License-Identifier: MIT
/* Run-time loading of driver libraries (libcuda, the Vulkan loader, the OpenCL ICD loader). */
#include "fa_dynlib.h"

#include <stdio.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

fa_dynlib *fa_dynlib_open(const char *const *names, char *reason, size_t reason_size)
{
    if (reason && reason_size)
        reason[0] = '\0';
    for (const char *const *name = names; *name; name++) {
#if defined(_WIN32)
        void *lib = (void *)LoadLibraryA(*name);
        if (lib)
            return (fa_dynlib *)lib;
        if (reason && reason_size)
            snprintf(reason, reason_size, "%s not found (error %lu)", *name, GetLastError());
#else
        void *lib = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return (fa_dynlib *)lib;
        if (reason && reason_size)
            snprintf(reason, reason_size, "%s", dlerror());
#endif
    }
    return NULL;
}

void *fa_dynlib_symbol(fa_dynlib *lib, const char *symbol)
{
    if (!lib)
        return NULL;
#if defined(_WIN32)
    return (void *)GetProcAddress((HMODULE)lib, symbol);
#else
    return dlsym(lib, symbol);
#endif
}

void fa_dynlib_close(fa_dynlib *lib)
{
    if (!lib)
        return;
#if defined(_WIN32)
    FreeLibrary((HMODULE)lib);
#else
    dlclose(lib);
#endif
}
