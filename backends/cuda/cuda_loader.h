// SPDX-License-Identifier: MIT
/* The CUDA driver API, opened at run time from libcuda.so.1 into one table of typed function
 * pointers (as cuew does), so that the library links no CUDA library and builds without the
 * toolkit's headers. Only the few types, constants and entry points the backend uses are
 * declared here, with the values and ABI of cuda.h (driver API 12.x/13.x). */
#ifndef FA_CUDA_LOADER_H
#define FA_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
    CUDA_ERROR_INVALID_PC = 718,
    CUDA_ERROR_LAUNCH_FAILED = 719,
};

enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };
enum { CU_STREAM_NON_BLOCKING = 1 };
enum { CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9 };

/* X(return-less name in this table, symbol in libcuda, parameter list) */
#define FA_CUDA_FUNCTIONS(X)                                                                       \
    X(cuInit, "cuInit", (unsigned flags))                                                          \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *version))                                    \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                                          \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                                \
    X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice dev))                     \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *value, int attribute, CUdevice dev))     \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice dev))                     \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice dev))       \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))                   \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext ctx))                                    \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext * ctx))                                    \
    X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))                \
    X(cuModuleLoad, "cuModuleLoad", (CUmodule * module, const char *path))                         \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule module))                                         \
    X(cuModuleGetFunction, "cuModuleGetFunction",                                                  \
      (CUfunction * function, CUmodule module, const char *name))                                  \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction function, int attribute, int value))   \
    X(cuLaunchKernel, "cuLaunchKernel",                                                            \
      (CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,          \
       unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void **params,  \
       void **extra))                                                                              \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * ptr, size_t bytes))                              \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr ptr))                                                \
    X(cuMemGetAddressRange, "cuMemGetAddressRange_v2",                                             \
      (CUdeviceptr * base, size_t * bytes, CUdeviceptr ptr))                                       \
    X(cuPointerGetAttribute, "cuPointerGetAttribute",                                              \
      (void *data, int attribute, CUdeviceptr ptr))                                                \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                   \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                           \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                   \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                                 \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                   \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                           \
    X(cuMemsetD32Async, "cuMemsetD32Async",                                                        \
      (CUdeviceptr dst, unsigned value, size_t count, CUstream stream))                            \
    X(cuMemsetD8Async, "cuMemsetD8Async",                                                          \
      (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream))                       \
    X(cuStreamCreate, "cuStreamCreate", (CUstream * stream, unsigned flags))                       \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                    \
    X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                               \
    X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled",                                            \
      (void *map, int dtype, unsigned rank, void *address, const unsigned long long *dims,         \
       const unsigned long long *strides, const unsigned *box, const unsigned *element_strides,    \
       int interleave, int swizzle, int l2_promotion, int oob_fill))                               \
    X(cuGetErrorName, "cuGetErrorName", (CUresult error, const char **name))                       \
    X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char **text))

typedef struct fa_cuda_driver {
#define FA_CUDA_MEMBER_(name, symbol, params) CUresult(*name) params;
    FA_CUDA_FUNCTIONS(FA_CUDA_MEMBER_)
#undef FA_CUDA_MEMBER_
    int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} fa_cuda_driver;

/* Opens libcuda, resolves every entry point and calls cuInit, once per process (thread-safe).
 * Returns the table, or NULL with the reason in `reason`. */
const fa_cuda_driver *fa_cuda_driver_load(char *reason, size_t reason_size);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a CUresult; never NULL. */
const char *fa_cuda_error_text(const fa_cuda_driver *cu, CUresult result, char *buf,
                               size_t buf_size);

#endif
