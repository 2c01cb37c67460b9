// SPDX-License-Identifier: MIT
/* Opening the OpenCL ICD loader into fa_cl, and naming error codes. */
#include "opencl_loader.h"

#include "fa_platform.h"

#include <stdio.h>
#include <string.h>

fa_cl_api fa_cl;

static fa_once load_once = FA_ONCE_INIT;
static bool load_ok;
static char load_reason[256];

static void load(void)
{
    /* Linux's and Windows' names; fa_dynlib_open tries those of the system it runs on. */
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", "OpenCL.dll", NULL};
    char why[200];
    fa_dynlib *lib = fa_dynlib_open(names, why, sizeof why);
    if (!lib) {
        snprintf(load_reason, sizeof load_reason, "OpenCL ICD loader not found (%s)", why);
        return;
    }
#define FA_CL_RESOLVE_(name)                                                                       \
    *(void **)&fa_cl.name = fa_dynlib_symbol(lib, #name);                                          \
    if (!fa_cl.name) {                                                                             \
        snprintf(load_reason, sizeof load_reason, "OpenCL ICD loader lacks %s", #name);            \
        fa_dynlib_close(lib);                                                                      \
        memset(&fa_cl, 0, sizeof fa_cl);                                                           \
        return;                                                                                    \
    }
    FA_CL_FUNCTIONS(FA_CL_RESOLVE_)
#undef FA_CL_RESOLVE_
    /* The library stays open for the life of the process: contexts may outlive any caller. */
    load_ok = true;
}

const fa_cl_api *fa_cl_load(char *reason, size_t reason_size)
{
    fa_once_run(&load_once, load);
    if (!load_ok) {
        if (reason && reason_size)
            snprintf(reason, reason_size, "%s", load_reason);
        return NULL;
    }
    return &fa_cl;
}

const char *fa_cl_error_name(cl_int err)
{
    switch (err) {
#define FA_CL_CASE_(code)                                                                          \
    case code:                                                                                     \
        return #code;
        FA_CL_CASE_(CL_SUCCESS)
        FA_CL_CASE_(CL_DEVICE_NOT_FOUND)
        FA_CL_CASE_(CL_DEVICE_NOT_AVAILABLE)
        FA_CL_CASE_(CL_COMPILER_NOT_AVAILABLE)
        FA_CL_CASE_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        FA_CL_CASE_(CL_OUT_OF_RESOURCES)
        FA_CL_CASE_(CL_OUT_OF_HOST_MEMORY)
        FA_CL_CASE_(CL_PROFILING_INFO_NOT_AVAILABLE)
        FA_CL_CASE_(CL_MEM_COPY_OVERLAP)
        FA_CL_CASE_(CL_IMAGE_FORMAT_MISMATCH)
        FA_CL_CASE_(CL_IMAGE_FORMAT_NOT_SUPPORTED)
        FA_CL_CASE_(CL_BUILD_PROGRAM_FAILURE)
        FA_CL_CASE_(CL_MAP_FAILURE)
        FA_CL_CASE_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        FA_CL_CASE_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        FA_CL_CASE_(CL_COMPILE_PROGRAM_FAILURE)
        FA_CL_CASE_(CL_LINKER_NOT_AVAILABLE)
        FA_CL_CASE_(CL_LINK_PROGRAM_FAILURE)
        FA_CL_CASE_(CL_DEVICE_PARTITION_FAILED)
        FA_CL_CASE_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        FA_CL_CASE_(CL_INVALID_VALUE)
        FA_CL_CASE_(CL_INVALID_DEVICE_TYPE)
        FA_CL_CASE_(CL_INVALID_PLATFORM)
        FA_CL_CASE_(CL_INVALID_DEVICE)
        FA_CL_CASE_(CL_INVALID_CONTEXT)
        FA_CL_CASE_(CL_INVALID_QUEUE_PROPERTIES)
        FA_CL_CASE_(CL_INVALID_COMMAND_QUEUE)
        FA_CL_CASE_(CL_INVALID_HOST_PTR)
        FA_CL_CASE_(CL_INVALID_MEM_OBJECT)
        FA_CL_CASE_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        FA_CL_CASE_(CL_INVALID_IMAGE_SIZE)
        FA_CL_CASE_(CL_INVALID_SAMPLER)
        FA_CL_CASE_(CL_INVALID_BINARY)
        FA_CL_CASE_(CL_INVALID_BUILD_OPTIONS)
        FA_CL_CASE_(CL_INVALID_PROGRAM)
        FA_CL_CASE_(CL_INVALID_PROGRAM_EXECUTABLE)
        FA_CL_CASE_(CL_INVALID_KERNEL_NAME)
        FA_CL_CASE_(CL_INVALID_KERNEL_DEFINITION)
        FA_CL_CASE_(CL_INVALID_KERNEL)
        FA_CL_CASE_(CL_INVALID_ARG_INDEX)
        FA_CL_CASE_(CL_INVALID_ARG_VALUE)
        FA_CL_CASE_(CL_INVALID_ARG_SIZE)
        FA_CL_CASE_(CL_INVALID_KERNEL_ARGS)
        FA_CL_CASE_(CL_INVALID_WORK_DIMENSION)
        FA_CL_CASE_(CL_INVALID_WORK_GROUP_SIZE)
        FA_CL_CASE_(CL_INVALID_WORK_ITEM_SIZE)
        FA_CL_CASE_(CL_INVALID_GLOBAL_OFFSET)
        FA_CL_CASE_(CL_INVALID_EVENT_WAIT_LIST)
        FA_CL_CASE_(CL_INVALID_EVENT)
        FA_CL_CASE_(CL_INVALID_OPERATION)
        FA_CL_CASE_(CL_INVALID_GL_OBJECT)
        FA_CL_CASE_(CL_INVALID_BUFFER_SIZE)
        FA_CL_CASE_(CL_INVALID_MIP_LEVEL)
        FA_CL_CASE_(CL_INVALID_GLOBAL_WORK_SIZE)
        FA_CL_CASE_(CL_INVALID_PROPERTY)
        FA_CL_CASE_(CL_INVALID_IMAGE_DESCRIPTOR)
        FA_CL_CASE_(CL_INVALID_COMPILER_OPTIONS)
        FA_CL_CASE_(CL_INVALID_LINKER_OPTIONS)
        FA_CL_CASE_(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef FA_CL_CASE_
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "CL_UNKNOWN_ERROR";
    }
}
