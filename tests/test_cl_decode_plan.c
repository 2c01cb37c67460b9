// SPDX-License-Identifier: MIT
/* The OpenCL decoding kernels' key tile (backends/opencl/opencl_decode_plan.c) on the local
 * memories of devices that are not here: what fits, the half-memory rule, the knob's cap and the
 * w32 experiment. */
#include <criterion/criterion.h>

#include "opencl_decode_plan.h"

#define NVIDIA 49152ull   /* NVIDIA's OpenCL: 48 KiB a work-group */
#define AMD 65536ull      /* AMD: 64 KiB */
#define POCL (2ull << 20) /* PoCL on a CPU: global memory stands in, 2 MiB */

static int tile(int d, int rows, int elem, uint64_t local)
{
    return fa_cl_decode_key_tile(d, rows, elem, local, 64, false);
}

Test(cl_decode_plan, measured_shapes_on_nvidia)
{
    /* the tiles timed in the fifty-first session (docs/PERF.md) */
    cr_assert_eq(tile(128, 4, 2, NVIDIA), 32);
    cr_assert_eq(tile(128, 4, 4, NVIDIA), 16);
    cr_assert_eq(tile(64, 4, 2, NVIDIA), 64);
    cr_assert_eq(tile(128, 1, 2, NVIDIA), 32);
}

Test(cl_decode_plan, a_second_work_group_fits_where_it_can)
{
    static const uint64_t locals[] = {NVIDIA, AMD, POCL};
    static const int dims[] = {8, 40, 64, 128, 200, 256};
    for (size_t m = 0; m < sizeof locals / sizeof *locals; m++)
        for (size_t i = 0; i < sizeof dims / sizeof *dims; i++)
            for (int rows = 1; rows <= FA_CL_DEC_MAX_ROWS; rows++)
                for (int elem = 2; elem <= 4; elem += 2) {
                    const int bn = tile(dims[i], rows, elem, locals[m]);
                    cr_assert(bn == 0 || bn == 16 || bn == 32 || bn == 64);
                    if (!bn) { /* nothing fits: not even 16 keys */
                        cr_assert_gt(fa_cl_decode_local_bytes(dims[i], rows, 16, elem, false),
                                     locals[m] - 64);
                        continue;
                    }
                    const uint64_t bytes = fa_cl_decode_local_bytes(dims[i], rows, bn, elem, false);
                    cr_assert_leq(bytes + 64, locals[m]);
                    cr_assert_geq(bn, (rows + 3) / 4 * 4, "the tiles hold O at the end");
                    /* in half the memory where any tile fits there, and then the largest */
                    const bool half =
                        fa_cl_decode_local_bytes(dims[i], rows, 16, elem, false) + 64 <=
                        locals[m] / 2;
                    if (half)
                        cr_assert_leq(bytes + 64, locals[m] / 2);
                    if (bn < 64)
                        cr_assert_gt(fa_cl_decode_local_bytes(dims[i], rows, 2 * bn, elem, false) +
                                         64,
                                     half ? locals[m] / 2 : locals[m]);
                }
}

Test(cl_decode_plan, bytes_count_what_the_kernel_declares)
{
    /* fa_decode at f16, D=128, 4 rows, 32 keys: K and V tiles 2 x 32 x 33 x 8, Q 4 x 32 x 16, the
     * scores 4 x 32 x 4, three row statistics 3 x 4 x 4 (the driver's 19,504 on the H100) */
    cr_assert_eq(fa_cl_decode_local_bytes(128, 4, 32, 2, false), 16896 + 2048 + 512 + 48);
    /* the w32 kernel: the same tiles and Q, the step's scores and P */
    cr_assert_eq(fa_cl_decode_local_bytes(128, 4, 32, 2, true), 16896 + 2048 + 1024);
}

Test(cl_decode_plan, the_cap_and_w32)
{
    cr_assert_eq(fa_cl_decode_key_tile(64, 4, 2, NVIDIA, 16, false), 16);
    cr_assert_eq(fa_cl_decode_key_tile(64, 4, 2, NVIDIA, 32, false), 32);
    cr_assert_eq(fa_cl_decode_key_tile(64, 4, 2, POCL, 64, false), 64);
    cr_assert_eq(fa_cl_decode_key_tile(128, 4, 2, NVIDIA, 32, true), FA_CL_DEC_W32);
    /* w32 at D=256 with 16 rows: 33,280 + 16,384 + 4,096 bytes do not fit 48 KiB */
    cr_assert_eq(fa_cl_decode_key_tile(256, 16, 2, NVIDIA, 32, true), 0);
    cr_assert_eq(fa_cl_decode_key_tile(256, 16, 2, AMD, 32, true), FA_CL_DEC_W32);
}
