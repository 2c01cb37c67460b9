// SPDX-License-Identifier: MIT
/* The OpenCL ICD loader opened at run time: a table of typed function pointers (the volk/cuew
 * pattern), so that nothing links libOpenCL, and the names of OpenCL error codes. */
#ifndef FA_OPENCL_LOADER_H
#define FA_OPENCL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <stdbool.h>
#include <stddef.h>

/* Every entry point the backend calls, as X(name). */
#define FA_CL_FUNCTIONS(X)                                                                         \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clReleaseContext)                                                                            \
    X(clCreateCommandQueue)                                                                        \
    X(clReleaseCommandQueue)                                                                       \
    X(clRetainContext)                                                                             \
    X(clRetainCommandQueue)                                                                        \
    X(clGetCommandQueueInfo)                                                                       \
    X(clRetainMemObject)                                                                           \
    X(clGetMemObjectInfo)                                                                          \
    X(clCreateSubBuffer)                                                                           \
    X(clCreateBuffer)                                                                              \
    X(clReleaseMemObject)                                                                          \
    X(clEnqueueWriteBuffer)                                                                        \
    X(clEnqueueReadBuffer)                                                                         \
    X(clEnqueueCopyBuffer)                                                                         \
    X(clCreateProgramWithSource)                                                                   \
    X(clCreateProgramWithBinary)                                                                   \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clGetProgramInfo)                                                                            \
    X(clReleaseProgram)                                                                            \
    X(clCreateKernel)                                                                              \
    X(clReleaseKernel)                                                                             \
    X(clSetKernelArg)                                                                              \
    X(clGetKernelWorkGroupInfo)                                                                    \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clFlush)                                                                                     \
    X(clFinish)

typedef struct fa_cl_api {
#define FA_CL_MEMBER_(name) __typeof__(&name) name;
    FA_CL_FUNCTIONS(FA_CL_MEMBER_)
#undef FA_CL_MEMBER_
} fa_cl_api;

/* Opens the loader and resolves every entry point, once per process. Returns NULL with a
 * reason when the loader or one of its symbols is missing. */
const fa_cl_api *fa_cl_load(char *reason, size_t reason_size);
/* The loaded table; only valid after fa_cl_load succeeded. */
extern fa_cl_api fa_cl;

/* "CL_INVALID_WORK_GROUP_SIZE" for -54; "CL_UNKNOWN_ERROR" for codes not in the table. */
const char *fa_cl_error_name(cl_int err);

#endif
