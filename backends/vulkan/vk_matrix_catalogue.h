// SPDX-License-Identifier: MIT
/* The cooperative-matrix kernels compiled ahead of time, one per (kernel, tiling, head dim) of
 * FA_VK_CM_TILINGS (backends/vulkan/matrix_shaders.cmake generates the table). Not installed. */
#ifndef FA_VK_MATRIX_CATALOGUE_H
#define FA_VK_MATRIX_CATALOGUE_H

#include "vk_matrix_plan.h"

#include <stddef.h>
#include <stdint.h>

extern const fa_vk_matrix_tiling fa_vk_catalogue_tilings[];
extern const unsigned char *const fa_vk_catalogue_code[];
extern const size_t *const fa_vk_catalogue_size[];
extern const char *const fa_vk_catalogue_names[]; /* for FA_VULKAN_SPV_DIR (vk_pipeline.c) */
extern const uint32_t fa_vk_catalogue_count;

#endif
