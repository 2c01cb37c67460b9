// SPDX-License-Identifier: MIT
/* The scalar tilings that the Vulkan and OpenCL kernels share (runtime/fwd_tiling.c,
 * runtime/bwd_tiling.c), on the property sets of devices that are not here: every head dim the
 * runtime admits must get a tiling that fits the device's local memory and work-group limit and
 * divides the way the kernels need, and a tuning override is taken only when it fits. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "fa_bwd_tiling.h"
#include "fa_fwd_tiling.h"

typedef struct device {
    const char *name;
    uint64_t local_bytes, max_wg;
    bool tile16; /* the Vulkan forward with 16-bit storage */
} device;

/* Local memory and the largest work-group as those drivers report them (Vulkan's figures less
 * what vk_attention.c keeps back are close enough: the fits are checked against these). */
static const device devices[] = {
    {"nvidia vulkan", 48u << 10, 1024, true}, {"nvidia opencl", 48u << 10, 1024, false},
    {"amd rdna", 64u << 10, 1024, true},      {"intel arc", 64u << 10, 1024, true},
    {"intel xe2", 128u << 10, 1024, true},    {"lavapipe", 32u << 10, 1024, true},
    {"mali-like", 32u << 10, 256, true},      {"adreno-like", 32u << 10, 512, false},
    {"pocl (cpu)", 512u << 10, 4096, false},  {"small gpu", 16u << 10, 256, false},
};

static bool pow2(int x)
{
    return x > 0 && !(x & (x - 1));
}

Test(tiling, forward_fits_every_head_dim_on_every_device)
{
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        const device *dev = &devices[i];
        for (int d = 8; d <= 256; d += 8)
            for (int t16 = 0; t16 <= (dev->tile16 ? 1 : 0); t16++) {
                fa_fwd_tiling t;
                if (!fa_fwd_tiling_select(d, t16, dev->local_bytes, dev->max_wg, NULL, &t)) {
                    /* Vulkan's minimum, 16 KiB, cannot hold even 8 x 8 f32 tiles at the largest
                     * head dims: the backend then reports FA_ERROR_UNSUPPORTED_HEAD_DIM */
                    cr_expect(dev->local_bytes < (32u << 10) && d > 128,
                              "%s D=%d: no forward tiling", dev->name, d);
                    continue;
                }
                cr_expect(t.local_bytes <= dev->local_bytes && (uint64_t)t.nt <= dev->max_wg,
                          "%s D=%d", dev->name, d);
                cr_expect(pow2(t.bm) && pow2(t.bn) && pow2(t.nt) && pow2(t.s_tx) && pow2(t.o_tx),
                          "%s D=%d", dev->name, d);
                /* S: s_tx work-items along the keys, nt / s_tx along the rows, all dividing */
                cr_expect(t.bn % t.s_tx == 0 && t.bm % (t.nt / t.s_tx) == 0, "%s D=%d", dev->name,
                          d);
                /* O: o_tx along the column groups, nt / o_tx along the rows */
                cr_expect(t.nt % t.o_tx == 0 && t.bm % (t.nt / t.o_tx) == 0, "%s D=%d", dev->name,
                          d);
                /* the register budget that keeps GPU compilers from spilling */
                cr_expect(t.bm * d / t.nt <= 64 && t.bm * t.bn / t.nt <= 32, "%s D=%d", dev->name,
                          d);
                cr_expect(!t.tile16 || t16, "%s D=%d: 16-bit tiles where not allowed", dev->name,
                          d);
                const uint64_t tiles = t.tile16 ? 2 * (uint64_t)(t.bm + t.bn) * (uint64_t)(d + 8)
                                                : 4 * (uint64_t)(t.bm + t.bn) * (uint64_t)(d + 4);
                cr_expect(t.local_bytes >= tiles, "%s D=%d: Q and K/V tiles alone need %llu",
                          dev->name, d, (unsigned long long)tiles);
            }
    }
}

Test(tiling, forward_documented_choices)
{
    fa_fwd_tiling t;
    /* 16-bit tiles fit 64 x 32 at D = 128 in NVIDIA's 48 KiB; f32 tiles 64 x 16 (measured faster
     * than 32 x 32 there) */
    cr_assert(fa_fwd_tiling_select(128, true, 48u << 10, 1024, NULL, &t));
    cr_expect(t.tile16 && t.bm == 64 && t.bn == 32, "got %d x %d, 16-bit %d", t.bm, t.bn, t.tile16);
    cr_assert(fa_fwd_tiling_select(128, false, 48u << 10, 1024, NULL, &t));
    cr_expect(!t.tile16 && t.bm == 64 && t.bn == 16, "got %d x %d", t.bm, t.bn);
}

Test(tiling, backward_fits_every_head_dim_on_every_device)
{
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        const device *dev = &devices[i];
        const uint64_t reserved = 32;
        for (int d = 8; d <= 256; d += 8) {
            fa_bwd_tiling t;
            if (!fa_bwd_tiling_select(d, dev->local_bytes, reserved, dev->max_wg, NULL, NULL, &t)) {
                /* likewise only the smallest device, at the largest head dims */
                cr_expect(dev->local_bytes < (32u << 10) && d > 128, "%s D=%d: no backward tiling",
                          dev->name, d);
                continue;
            }
            cr_expect(t.local_bytes <= dev->local_bytes && (uint64_t)t.nt <= dev->max_wg, "%s D=%d",
                      dev->name, d);
            cr_expect(pow2(t.bm) && pow2(t.bn) && pow2(t.nt), "%s D=%d", dev->name, d);
            cr_expect(t.dp >= d && t.dp % (4 * t.kx) == 0 && t.dp % (4 * t.qx) == 0, "%s D=%d",
                      dev->name, d);
            cr_expect(t.bn % t.sx == 0 && t.bm % (t.nt / t.sx) == 0, "%s D=%d", dev->name, d);
            cr_expect(t.dc >= 4 && t.dc % 4 == 0 && t.rk >= 1 && t.rq >= 1, "%s D=%d", dev->name,
                      d);
        }
    }
}

Test(tiling, overrides_only_when_they_fit)
{
    fa_fwd_tiling f;
    cr_assert(fa_fwd_tiling_select(64, false, 48u << 10, 1024, "32,32,64", &f));
    cr_expect(f.bm == 32 && f.bn == 32 && f.nt == 64 && !f.tile16);
    /* too large for 16 KiB: the preferred list serves instead */
    cr_assert(fa_fwd_tiling_select(128, false, 16u << 10, 1024, "64,64,256", &f));
    cr_expect(f.local_bytes <= 16u << 10 && !(f.bm == 64 && f.bn == 64));
    /* not powers of two: ignored */
    cr_assert(fa_fwd_tiling_select(64, false, 48u << 10, 1024, "48,16,128", &f));
    cr_expect(f.bm != 48);
    fa_bwd_tiling b;
    cr_assert(fa_bwd_tiling_select(64, 48u << 10, 32, 1024, "32,32,64", NULL, &b));
    cr_expect(b.bm == 32 && b.bn == 32 && b.nt == 64);
    /* above the work-group limit */
    cr_assert(fa_bwd_tiling_select(64, 48u << 10, 32, 1024, "32,32,2048", NULL, &b));
    cr_expect(b.nt <= 1024);
}
