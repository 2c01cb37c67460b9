// SPDX-License-Identifier: MIT
/* Loading the CUDA driver at run time: the library names to try, each symbol into the table,
 * cuInit. Failures become a reason string, never an abort. */
#include "cuda_loader.h"

#include <stdio.h>
#include <string.h>

#include "fa_platform.h"

static fa_once load_once = FA_ONCE_INIT;
static fa_cuda_driver driver;
static bool loaded;
static char load_reason[256];

static void load(void)
{
    /* Linux's and Windows' names; fa_dynlib_open tries those of the system it runs on. */
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", "nvcuda.dll", NULL};
    char why[192] = "";
    fa_dynlib *lib = fa_dynlib_open(names, why, sizeof why);
    if (!lib) {
        snprintf(load_reason, sizeof load_reason, "no CUDA driver: %s", why);
        return;
    }
#define FA_CUDA_RESOLVE_(name, symbol, params)                                                     \
    *(void **)&driver.name = fa_dynlib_symbol(lib, symbol);                                        \
    if (!driver.name) {                                                                            \
        snprintf(load_reason, sizeof load_reason,                                                  \
                 "the CUDA driver lacks %s (driver too old; CUDA 12 or newer is needed)", symbol); \
        fa_dynlib_close(lib);                                                                      \
        return;                                                                                    \
    }
    FA_CUDA_FUNCTIONS(FA_CUDA_RESOLVE_)
#undef FA_CUDA_RESOLVE_
    CUresult r = driver.cuInit(0);
    if (r != CUDA_SUCCESS) {
        char text[128];
        snprintf(load_reason, sizeof load_reason, "cuInit failed: %s",
                 fa_cuda_error_text(&driver, r, text, sizeof text));
        fa_dynlib_close(lib);
        return;
    }
    if (driver.cuDriverGetVersion(&driver.version) != CUDA_SUCCESS)
        driver.version = 0;
    loaded = true; /* the library stays open for the life of the process */
}

const fa_cuda_driver *fa_cuda_driver_load(char *reason, size_t reason_size)
{
    fa_once_run(&load_once, load);
    if (!loaded && reason && reason_size)
        snprintf(reason, reason_size, "%s", load_reason);
    return loaded ? &driver : NULL;
}

const char *fa_cuda_error_text(const fa_cuda_driver *cu, CUresult result, char *buf,
                               size_t buf_size)
{
    const char *name = NULL, *text = NULL;
    if (cu && cu->cuGetErrorName)
        cu->cuGetErrorName(result, &name);
    if (cu && cu->cuGetErrorString)
        cu->cuGetErrorString(result, &text);
    if (name && text)
        snprintf(buf, buf_size, "%s (%s)", name, text);
    else if (name)
        snprintf(buf, buf_size, "%s", name);
    else
        snprintf(buf, buf_size, "CUresult %d", result);
    return buf;
}
