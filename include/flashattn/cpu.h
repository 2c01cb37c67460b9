// SPDX-License-Identifier: MIT
/* flashattn's CPU backend on an application's own memory: buffers over host memory it
 * allocated (NumPy arrays, CPU tensors, mmaps), used in place with no copy. */
#ifndef FLASHATTN_CPU_H
#define FLASHATTN_CPU_H

#include "../flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** CPU backend only: a buffer over `bytes` of host memory the caller allocated (a NumPy array, a
 * CPU torch tensor, an mmap), so tensors can be used in place. The pointer must be 4-byte aligned
 * (ERROR_INVALID_ARGUMENT otherwise) and the memory stay valid until the buffer is destroyed;
 * flashattn never frees it: fa_buffer_destroy only forgets it. ERROR_UNSUPPORTED on the GPU
 * backends, whose kernels cannot read host memory (fa_buffer_create and fa_buffer_write there). */
FA_API fa_status fa_buffer_wrap_host(fa_context *ctx, void *host_pointer, size_t bytes,
                                     fa_buffer **out);
#ifdef __cplusplus
}
#endif

#endif
