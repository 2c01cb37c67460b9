// SPDX-License-Identifier: MIT
/* Names and sentences for statuses, dtypes, backends, and the library version. */
#include "fa_internal.h"

#include <ctype.h>
#include <string.h>

#define FA_STR_(x) #x
#define FA_XSTR_(x) FA_STR_(x)

const char *fa_version_string(void)
{
    return FA_XSTR_(FA_VERSION_MAJOR) "." FA_XSTR_(FA_VERSION_MINOR) "." FA_XSTR_(FA_VERSION_PATCH);
}

unsigned fa_version(void)
{
    return FA_VERSION_HEX;
}

const char *fa_status_string(fa_status status)
{
    switch (status) {
#define FA_STATUS_STRING_(name, value, message)                                                    \
    case FA_##name:                                                                                \
        return message;
        FA_STATUS_TABLE(FA_STATUS_STRING_)
#undef FA_STATUS_STRING_
    }
    return "unknown status";
}

const char *fa_status_name(fa_status status)
{
    switch (status) {
#define FA_STATUS_NAME_(name, value, message)                                                      \
    case FA_##name:                                                                                \
        return #name;
        FA_STATUS_TABLE(FA_STATUS_NAME_)
#undef FA_STATUS_NAME_
    }
    return "UNKNOWN_STATUS";
}

const char *fa_dtype_name(fa_dtype dtype)
{
    switch (dtype) {
    case FA_DTYPE_F32:
        return "f32";
    case FA_DTYPE_F16:
        return "f16";
    case FA_DTYPE_BF16:
        return "bf16";
    case FA_DTYPE_I32:
        return "i32";
    case FA_DTYPE_E4M3:
        return "e4m3";
    default:
        return "invalid";
    }
}

size_t fa_dtype_size(fa_dtype dtype)
{
    switch (dtype) {
    case FA_DTYPE_F32:
    case FA_DTYPE_I32:
        return 4;
    case FA_DTYPE_F16:
    case FA_DTYPE_BF16:
        return 2;
    case FA_DTYPE_E4M3:
        return 1;
    default:
        return 0;
    }
}

static const char *const backend_names[FA_BACKEND_COUNT] = {
    [FA_BACKEND_AUTO] = "auto",     [FA_BACKEND_CUDA] = "cuda", [FA_BACKEND_VULKAN] = "vulkan",
    [FA_BACKEND_OPENCL] = "opencl", [FA_BACKEND_CPU] = "cpu",
};

const char *fa_backend_name(fa_backend backend)
{
    if ((unsigned)backend >= FA_BACKEND_COUNT)
        return "unknown";
    return backend_names[backend];
}

fa_status fa_backend_from_name(const char *name, fa_backend *out)
{
    if (!name || !out)
        return FA_ERROR_NULL_POINTER;
    for (int b = 0; b < FA_BACKEND_COUNT; b++) {
        const char *known = backend_names[b];
        size_t i = 0;
        while (known[i] && tolower((unsigned char)name[i]) == known[i])
            i++;
        if (!known[i] && !name[i]) {
            *out = (fa_backend)b;
            return FA_OK;
        }
    }
    return FA_ERROR_INVALID_BACKEND;
}
