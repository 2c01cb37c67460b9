// SPDX-License-Identifier: MIT
/* The environment's developer knobs (README: unstable, for tuning and kernel work), read once
 * when a context is created, so that no call reads the environment and a context keeps the
 * values it was created with. The user-facing variables are read elsewhere: FA_BACKEND and
 * FA_DEVICE by fa_context_create, FA_VULKAN_VALIDATION where the process's Vulkan instance is
 * created. */
#ifndef FA_TUNING_H
#define FA_TUNING_H

#include <stdbool.h>

/* FA_<name> for each knob. */
#define FA_KNOBS(X)                                                                                \
    X(TEST_DEVICE_LOSS)                                                                            \
    X(CUDA_KERNELS)                                                                                \
    X(CUDA_WGMMA)                                                                                  \
    X(CUDA_SM90_IMAGE)                                                                             \
    X(CUDA_BWD4_QTILE_D64)                                                                         \
    X(CUDA_FWD_QTILE_D256)                                                                         \
    X(CUDA_BWD_D256)                                                                               \
    X(CUDA_BWD_DQ)                                                                                 \
    X(CUDA_DECODE)                                                                                 \
    X(CUDA_F32)                                                                                    \
    X(CUDA_DECODE_WARPS)                                                                           \
    X(CUDA_DECODE_MERGE)                                                                           \
    X(CUDA_FWD_COPY)                                                                               \
    X(CUDA_BWD_COPY)                                                                               \
    X(VULKAN_DECODE)                                                                               \
    X(VULKAN_DECODE_MERGE)                                                                         \
    X(VULKAN_MATRIX)                                                                               \
    X(VULKAN_MATRIX_LAYOUT)                                                                        \
    X(VULKAN_MATRIX_FWD_TILES)                                                                     \
    X(VULKAN_MATRIX_BWD_TILES)                                                                     \
    X(VULKAN_MATRIX_FWD_PER)                                                                       \
    X(VULKAN_NO_16BIT_STORAGE)                                                                     \
    X(VULKAN_PIPELINE_STATS)                                                                       \
    X(VULKAN_PIPELINE_CACHE)                                                                       \
    X(VULKAN_PROFILE)                                                                              \
    X(VULKAN_SPV_DIR)                                                                              \
    X(VULKAN_WAIT_SPIN_US)                                                                         \
    X(VULKAN_IN_FLIGHT)                                                                            \
    X(VULKAN_FWD_TILES)                                                                            \
    X(VULKAN_BWD_TILES)                                                                            \
    X(VULKAN_FWD_VARIANT)                                                                          \
    X(VULKAN_FWD_UNROLL)                                                                           \
    X(VULKAN_BWD_UNROLL)                                                                           \
    X(OPENCL_FWD_TILES)                                                                            \
    X(OPENCL_BWD_TILES)                                                                            \
    X(OPENCL_BUILD_OPTIONS)                                                                        \
    X(OPENCL_DISK_CACHE)                                                                           \
    X(OPENCL_DECODE)

typedef enum fa_knob {
#define FA_KNOB_ENUM_(name) FA_KNOB_##name,
    FA_KNOBS(FA_KNOB_ENUM_)
#undef FA_KNOB_ENUM_
        FA_KNOB_COUNT
} fa_knob;

/* Each knob's value as the environment held it, NULL where unset. */
typedef struct fa_tuning {
    char *value[FA_KNOB_COUNT];
} fa_tuning;

/* Copies the knobs that are set; false (nothing held) when out of memory. */
bool fa_tuning_read(fa_tuning *t);
void fa_tuning_free(fa_tuning *t);

#endif
