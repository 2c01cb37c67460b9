// SPDX-License-Identifier: MIT
/* The OpenCL decoding kernels' tile (shaders/opencl/fa_decode.cl): pure functions of the problem
 * and the device's local memory, unit-tested without a device (tests/test_cl_decode_plan.c). */
#ifndef FA_OPENCL_DECODE_PLAN_H
#define FA_OPENCL_DECODE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

/* Work-items of fa_decode (and of fa_decode_merge), the most packed query rows a KV head, and the
 * work-groups a compute unit the chunk count assumes; the same for the experiment of 32
 * work-items (FA_OPENCL_DECODE=w32), whose steps are 32 keys. */
enum {
    FA_CL_DEC_NT = 128,
    FA_CL_DEC_MAX_ROWS = 16,
    FA_CL_DEC_GROUPS_PER_UNIT = 8,
    FA_CL_DEC_W32 = 32,
    FA_CL_DEC_W32_GROUPS_PER_UNIT = 32,
};

/* Local memory of a decoding kernel for `rows` packed rows and tiles of bn keys at head_dim,
 * the K and V tiles kept as stored (`elem` bytes a value: 4 for f32, 2 for f16 and bf16). */
uint64_t fa_cl_decode_local_bytes(int head_dim, int rows, int bn, int elem, bool w32);

/* The key tile: for fa_decode the largest of 64, 32 and 16 (at most `cap`) whose local memory is
 * at most half of local_mem, so that a second work-group fits where the driver's per-group limit
 * is, else the largest that fits at all; for w32, 32 where it fits. 0: none fits. */
int fa_cl_decode_key_tile(int head_dim, int rows, int elem, uint64_t local_mem, int cap, bool w32);

#endif
