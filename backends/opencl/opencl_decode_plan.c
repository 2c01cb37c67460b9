// SPDX-License-Identifier: MIT
/* The OpenCL decoding kernels' tile: see opencl_decode_plan.h. */
#include "opencl_decode_plan.h"

/* Reserved by some drivers beside the kernel's own local memory. */
#define LOCAL_SLACK 64

uint64_t fa_cl_decode_local_bytes(int head_dim, int rows, int bn, int elem, bool w32)
{
    const uint64_t rwp = (uint64_t)(rows + 3) / 4 * 4, d4 = (uint64_t)head_dim / 4;
    const uint64_t tiles = 2 * (uint64_t)bn * (d4 + 1) * 4 * (uint64_t)elem, q = rwp * d4 * 16;
    if (w32) /* the step's scores and its P */
        return tiles + q + 2 * rwp * (uint64_t)bn * 4;
    /* the scores and three row statistics */
    return tiles + q + rwp * (uint64_t)bn * 4 + 3 * rwp * 4;
}

int fa_cl_decode_key_tile(int head_dim, int rows, int elem, uint64_t local_mem, int cap, bool w32)
{
    if (w32) {
        const uint64_t bytes = fa_cl_decode_local_bytes(head_dim, rows, FA_CL_DEC_W32, elem, true);
        return bytes + LOCAL_SLACK <= local_mem ? FA_CL_DEC_W32 : 0;
    }
    static const int tiles[3] = {64, 32, 16};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 3; i++)
            if (tiles[i] <= cap &&
                fa_cl_decode_local_bytes(head_dim, rows, tiles[i], elem, false) + LOCAL_SLACK <=
                    local_mem / (pass == 0 ? 2 : 1))
                return tiles[i];
    return 0;
}
