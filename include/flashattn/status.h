// SPDX-License-Identifier: MIT
/* flashattn status codes: one X-macro table generates the enum, the names and the messages.
 * Zero is success; failures are negative and grouped by tens:
 *   -1..-19 invalid argument, -20..-29 unsupported, -30..-39 backend unavailable,
 *   -40..-49 out of memory, -50..-59 device error.
 * Device loss, on every backend alike: the call that meets it returns FA_ERROR_DEVICE_LOST, and
 * every later call on the context and its buffers returns FA_ERROR_CONTEXT_LOST without touching
 * the device; fa_buffer_destroy and fa_context_destroy still free everything. */
#ifndef FLASHATTN_STATUS_H
#define FLASHATTN_STATUS_H

#define FA_STATUS_TABLE(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(ERROR_INVALID_ARGUMENT, -1, "invalid argument")                                              \
    X(ERROR_NULL_POINTER, -2, "a required pointer is NULL")                                        \
    X(ERROR_SHAPE_MISMATCH, -3, "tensor shapes do not agree")                                      \
    X(ERROR_DTYPE_MISMATCH, -4, "tensor dtypes do not agree or are not valid")                     \
    X(ERROR_INVALID_STRIDE, -5, "tensor strides are not valid")                                    \
    X(ERROR_OUT_OF_BOUNDS, -6, "a tensor reaches past the end of its buffer")                      \
    X(ERROR_SIZE_OVERFLOW, -7, "a size overflows 64-bit arithmetic")                               \
    X(ERROR_FOREIGN_BUFFER, -8, "a buffer belongs to another context")                             \
    X(ERROR_INVALID_DEVICE, -9, "no device with that index")                                       \
    X(ERROR_INVALID_BACKEND, -10, "unknown backend")                                               \
    X(ERROR_INVALID_GQA, -11, "query heads are not a multiple of key/value heads")                 \
    X(ERROR_UNSUPPORTED, -20, "operation not supported by this backend or device")                 \
    X(ERROR_UNSUPPORTED_HEAD_DIM, -21, "head dim must be a multiple of 8 from 8 to 256")           \
    X(ERROR_UNSUPPORTED_DTYPE, -22, "dtype not supported by this backend or device")               \
    X(ERROR_TOO_LARGE, -23, "a tensor exceeds the backend's index range or buffer limit")          \
    X(ERROR_BACKEND_UNAVAILABLE, -30, "backend unavailable on this machine")                       \
    X(ERROR_BACKEND_NOT_BUILT, -31, "backend not built into this library")                         \
    X(ERROR_NO_DEVICE, -32, "no usable device found")                                              \
    X(ERROR_OUT_OF_HOST_MEMORY, -40, "out of host memory")                                         \
    X(ERROR_OUT_OF_DEVICE_MEMORY, -41, "out of device memory")                                     \
    X(ERROR_DEVICE, -50, "device or driver error")                                                 \
    X(ERROR_DEVICE_LOST, -51, "device lost; the context is no longer usable")                      \
    X(ERROR_KERNEL_BUILD, -52, "kernel or shader build failed")                                    \
    X(ERROR_CONTEXT_LOST, -53, "context unusable after an earlier device loss")

typedef enum fa_status {
#define FA_STATUS_ENUM_(name, value, message) FA_##name = value,
    FA_STATUS_TABLE(FA_STATUS_ENUM_)
#undef FA_STATUS_ENUM_
} fa_status;

#endif
