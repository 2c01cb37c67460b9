// SPDX-License-Identifier: MIT
/* flashattn with an application's own CUDA objects: its streams (fa_context_desc.cuda.stream)
 * and its device memory as buffers, so that tensors from cudaMalloc or PyTorch are used in
 * place. The CUDA backend works in the device's primary context. Needs no CUDA headers. */
#ifndef FLASHATTN_CUDA_H
#define FLASHATTN_CUDA_H

#include "../flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** fa_context_desc.cuda.stream for CUDA's default streams: the driver's CU_STREAM_LEGACY (the
 * legacy default stream, which cudaStreamLegacy and a stream handle of 0 name) and
 * CU_STREAM_PER_THREAD. */
#define FA_CUDA_STREAM_LEGACY ((void *)0x1)
#define FA_CUDA_STREAM_PER_THREAD ((void *)0x2)

/** CUDA only: a buffer over `bytes` of device memory the caller allocated on the context's device
 * (cuMemAlloc, cudaMalloc, PyTorch), so tensors can be used in place. flashattn never frees it:
 * fa_buffer_destroy only forgets it. ERROR_UNSUPPORTED on other backends; ERROR_FOREIGN_BUFFER
 * when the pointer is not device memory of this device; ERROR_OUT_OF_BOUNDS when `bytes` runs
 * past the end of its allocation. */
FA_API fa_status fa_buffer_wrap_cuda(fa_context *ctx, uint64_t device_pointer, size_t bytes,
                                     fa_buffer **out);
#ifdef __cplusplus
}
#endif

#endif
