// SPDX-License-Identifier: MIT
/* The cooperative-matrix tile planner (backends/vulkan/vk_matrix_plan.c) on the property sets of
 * GPUs that are not here: every plan it returns must be one the shaders can run within the
 * device's limits, some are checked to the byte, and each refusal says why. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "vk_matrix_plan.h"

typedef struct property_set {
    const char *name;
    fa_vk_matrix_caps caps;
} property_set;

static const property_set devices[] = {
    {"nvidia",
     {.shared_memory_bytes = 48u << 10,
      .max_invocations = 1024,
      .subgroup_min = 32,
      .subgroup_max = 32,
      .subgroup_preferred = 32,
      .shape_count = 3,
      .shapes = {{16, 16, 16}, {16, 8, 16}, {16, 8, 8}}}},
    {"amd-rdna3",
     {.shared_memory_bytes = 64u << 10,
      .max_invocations = 1024,
      .subgroup_min = 32,
      .subgroup_max = 64,
      .subgroup_preferred = 32,
      .shape_count = 1,
      .shapes = {{16, 16, 16}}}},
    {"intel-arc-64k",
     {.shared_memory_bytes = 64u << 10,
      .max_invocations = 1024,
      .subgroup_min = 8,
      .subgroup_max = 32,
      .subgroup_preferred = 8,
      .shape_count = 1,
      .shapes = {{8, 8, 16}}}},
    {"intel-arc-128k",
     {.shared_memory_bytes = 128u << 10,
      .max_invocations = 1024,
      .subgroup_min = 8,
      .subgroup_max = 32,
      .subgroup_preferred = 8,
      .shape_count = 1,
      .shapes = {{8, 8, 16}}}},
    {"intel-xe2",
     {.shared_memory_bytes = 64u << 10,
      .max_invocations = 1024,
      .subgroup_min = 8,
      .subgroup_max = 32,
      .subgroup_preferred = 16,
      .shape_count = 1,
      .shapes = {{8, 16, 16}}}},
    {"lavapipe",
     {.shared_memory_bytes = 64u << 10,
      .max_invocations = 1024,
      .subgroup_min = 8,
      .subgroup_max = 8,
      .subgroup_preferred = 8,
      .shape_count = 1,
      .shapes = {{8, 8, 8}}}},
};
enum { DEVICE_COUNT = sizeof devices / sizeof devices[0] };

static const char *const kernel_names[] = {"fwd", "dkdv", "dq"};

static const fa_vk_matrix_caps *caps_of(const char *name)
{
    for (int i = 0; i < DEVICE_COUNT; i++)
        if (strcmp(devices[i].name, name) == 0)
            return &devices[i].caps;
    cr_assert_fail("no property set %s", name);
    return NULL;
}

static bool pow2(uint32_t x)
{
    return x && !(x & (x - 1));
}

static bool lists_shape(const fa_vk_matrix_caps *caps, fa_vk_matrix_shape s)
{
    for (uint32_t i = 0; i < caps->shape_count; i++)
        if (caps->shapes[i].m == s.m && caps->shapes[i].n == s.n && caps->shapes[i].k == s.k)
            return true;
    return false;
}

/* What every plan must satisfy for the shaders and the device. */
static void assert_runnable(const char *where, fa_vk_matrix_kernel kernel,
                            const fa_vk_matrix_caps *caps, uint32_t d, const fa_vk_matrix_plan *p)
{
    const fa_vk_matrix_shape s = p->shape;
    cr_assert(lists_shape(caps, s), "%s: shape %ux%ux%u not the device's", where, s.m, s.n, s.k);
    cr_assert_leq(p->shared_bytes, caps->shared_memory_bytes, "%s", where);
    cr_assert_eq(p->shared_bytes, fa_vk_matrix_shared_bytes(kernel, p, d), "%s", where);
    cr_assert_eq(d % s.k, 0, "%s: head dim %% k", where);
    cr_assert_eq(d % s.n, 0, "%s: head dim %% n", where);
    cr_assert_eq(p->bn % s.n, 0, "%s: bn %% n", where);
    cr_assert_eq(p->bn % s.k, 0, "%s: bn %% k", where);
    cr_assert(pow2(p->subgroup), "%s: subgroup %u", where, p->subgroup);
    cr_assert_geq(p->subgroup, caps->subgroup_min, "%s", where);
    cr_assert_leq(p->subgroup, caps->subgroup_max, "%s", where);
    cr_assert_geq(p->subgroups, 1, "%s", where);
    cr_assert_leq(p->subgroup * p->subgroups, caps->max_invocations, "%s", where);
    cr_assert(pow2(p->tm), "%s: tm %u", where, p->tm);
    cr_assert_eq(p->rows, p->tm * s.m * p->subgroups, "%s: rows", where);
    /* Each lane takes pairs of columns; lanes sharing a row split bn between them. */
    const uint32_t rm = p->tm * s.m, lanes_per_row = p->subgroup > rm ? p->subgroup / rm : 1;
    cr_assert_eq(p->bn % (2 * lanes_per_row), 0, "%s: pairs per lane", where);
}

Test(vk_matrix_plan, every_property_set_plans_every_kernel_and_head_dim)
{
    for (int i = 0; i < DEVICE_COUNT; i++)
        for (int k = 0; k < FA_VK_MATRIX_KERNEL_COUNT; k++) {
            const fa_vk_matrix_kernel kernel = (fa_vk_matrix_kernel)k;
            const uint32_t max_d = kernel == FA_VK_MATRIX_FWD ? 256 : 128;
            cr_assert_eq(fa_vk_matrix_max_head_dim(kernel), max_d);
            for (uint32_t d = 16; d <= max_d; d += 16) {
                char where[96], why[160] = "";
                snprintf(where, sizeof where, "%s %s d=%u", devices[i].name, kernel_names[k], d);
                fa_vk_matrix_plan p;
                cr_assert(fa_vk_matrix_plan_select(kernel, &devices[i].caps, d, NULL, &p, why,
                                                   sizeof why),
                          "%s: no plan: %s", where, why);
                assert_runnable(where, kernel, &devices[i].caps, d, &p);
            }
        }
}

static fa_vk_matrix_plan plan_of(fa_vk_matrix_kernel kernel, const char *device, uint32_t d,
                                 const char *override_tiles)
{
    fa_vk_matrix_plan p;
    char why[160] = "";
    cr_assert(
        fa_vk_matrix_plan_select(kernel, caps_of(device), d, override_tiles, &p, why, sizeof why),
        "%s d=%u: %s", device, d, why);
    return p;
}

static void assert_plan(const fa_vk_matrix_plan *p, fa_vk_matrix_shape s, uint32_t subgroup,
                        uint32_t subgroups, uint32_t tm, uint32_t bn, uint32_t shared_bytes)
{
    cr_assert_eq(p->shape.m, s.m);
    cr_assert_eq(p->shape.n, s.n);
    cr_assert_eq(p->shape.k, s.k);
    cr_assert_eq(p->subgroup, subgroup);
    cr_assert_eq(p->subgroups, subgroups);
    cr_assert_eq(p->tm, tm);
    cr_assert_eq(p->bn, bn);
    cr_assert_eq(p->rows, tm * s.m * subgroups);
    cr_assert_eq(p->shared_bytes, shared_bytes);
}

/* Shared bytes below: K and V tiles 2 * bn * 2 (d + 8), plus per subgroup the kernel's f32
 * (4 rm (bn + 4)) and f16 (2 rm (bn + 8)) scratch blocks, worked out by hand. */
Test(vk_matrix_plan, nvidia_forward_tiles)
{
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 128, NULL);
    /* bn 64 would take 65536 bytes; bn 32: 17408 + 4 * (2304 + 1280 + 1024). */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 35840);
    p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 256, NULL);
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 16, 29184);
}

Test(vk_matrix_plan, nvidia_backward_tiles)
{
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_DKDV, "nvidia", 128, NULL);
    /* 17408 + 4 * (P^T and dS^T 2 * 1280) + the tile's LSE and Delta 2 * 16 * 32 * 4 + the index
     * matrix 1024; bn 64 would take 62464. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 32768);
    p = plan_of(FA_VK_MATRIX_DQ, "nvidia", 128, NULL);
    /* 17408 + 4 * (dS 1280 + the rows' LSE and Delta 2 * 16 * 16 * 4) + 1024. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 31744);
}

Test(vk_matrix_plan, narrow_shapes_stack_row_blocks)
{
    /* 8-row shapes take two row blocks per subgroup (16 rows). */
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_FWD, "intel-arc-64k", 128, NULL);
    assert_plan(&p, (fa_vk_matrix_shape){8, 8, 16}, 8, 4, 2, 64, 63488);
    p = plan_of(FA_VK_MATRIX_FWD, "intel-xe2", 64, NULL);
    assert_plan(&p, (fa_vk_matrix_shape){8, 16, 16}, 16, 4, 2, 64, 49152);
    p = plan_of(FA_VK_MATRIX_FWD, "lavapipe", 64, NULL);
    assert_plan(&p, (fa_vk_matrix_shape){8, 8, 8}, 8, 4, 2, 64, 47104);
}

Test(vk_matrix_plan, subgroup_is_the_preferred_size_clamped_to_the_range)
{
    cr_assert_eq(plan_of(FA_VK_MATRIX_FWD, "amd-rdna3", 64, NULL).subgroup, 32);
    fa_vk_matrix_caps caps = *caps_of("amd-rdna3");
    caps.subgroup_preferred = 128;
    fa_vk_matrix_plan p;
    char why[160];
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 64, NULL, &p, why, sizeof why));
    cr_assert_eq(p.subgroup, 64);
    caps.subgroup_preferred = 0; /* unknown: the largest */
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 64, NULL, &p, why, sizeof why));
    cr_assert_eq(p.subgroup, 64);
}

Test(vk_matrix_plan, later_shapes_serve_what_the_first_cannot)
{
    /* Head dim 24: not a multiple of 16, so NVIDIA's 16x8x8 serves it. */
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 24, NULL);
    cr_assert_eq(p.shape.n, 8);
    cr_assert_eq(p.shape.k, 8);
    assert_runnable("nvidia fwd d=24", FA_VK_MATRIX_FWD, caps_of("nvidia"), 24, &p);
    /* Exactly 4 KiB at d=16: 16x16x16 needs 4608 bytes, 16x8x16 with bn 16 exactly 4096. */
    fa_vk_matrix_caps caps = *caps_of("nvidia");
    caps.shared_memory_bytes = 4096;
    char why[160];
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 16, NULL, &p, why, sizeof why),
              "%s", why);
    assert_plan(&p, (fa_vk_matrix_shape){16, 8, 16}, 32, 1, 1, 16, 4096);
}

Test(vk_matrix_plan, invocation_limit_caps_the_subgroups)
{
    fa_vk_matrix_caps caps = *caps_of("nvidia");
    caps.max_invocations = 64;
    fa_vk_matrix_plan p;
    char why[160];
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 64, NULL, &p, why, sizeof why),
              "%s", why);
    /* 4 subgroups of 32 would be 128 invocations; 2 with bn 64: 18432 + 2 * 7680. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 2, 1, 64, 33792);
}

static void assert_refused(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                           const char *override_tiles, const char *expected_why)
{
    fa_vk_matrix_plan p;
    char why[160] = "";
    cr_assert_not(fa_vk_matrix_plan_select(kernel, caps, d, override_tiles, &p, why, sizeof why),
                  "d=%u planned, expected: %s", d, expected_why);
    cr_assert_str_eq(why, expected_why);
}

Test(vk_matrix_plan, refusals_say_why)
{
    fa_vk_matrix_caps none = *caps_of("nvidia");
    none.shape_count = 0;
    assert_refused(FA_VK_MATRIX_FWD, &none, 64, NULL, "no f16 x f16 -> f32 subgroup matrix shape");
    assert_refused(FA_VK_MATRIX_FWD, caps_of("amd-rdna3"), 24, NULL,
                   "head dim 24 is not a multiple of any matrix shape's N and K");
    assert_refused(FA_VK_MATRIX_DKDV, caps_of("nvidia"), 256, NULL,
                   "head dim 256 above the matrix path's 128");
    assert_refused(FA_VK_MATRIX_DQ, caps_of("nvidia"), 256, NULL,
                   "head dim 256 above the matrix path's 128");
    assert_refused(FA_VK_MATRIX_FWD, caps_of("nvidia"), 272, NULL,
                   "head dim 272 above the matrix path's 256");
    fa_vk_matrix_caps small = *caps_of("nvidia");
    small.shared_memory_bytes = 4096;
    /* At d=64 the K and V tiles alone take 4608 bytes with the narrowest step. */
    assert_refused(FA_VK_MATRIX_FWD, &small, 64, NULL,
                   "no tiling of the device's matrix shapes fits head dim 64 in 4096 bytes of "
                   "shared memory");
    assert_refused((fa_vk_matrix_kernel)FA_VK_MATRIX_KERNEL_COUNT, caps_of("nvidia"), 64, NULL,
                   "no such matrix kernel");
}

Test(vk_matrix_plan, override_is_taken_when_it_fits)
{
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_FWD, "amd-rdna3", 64, "1,4,64");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 64, 49152);
    /* One the default would not pick: 2 row blocks, 2 subgroups, 32 columns. */
    p = plan_of(FA_VK_MATRIX_FWD, "amd-rdna3", 64, "2,2,32");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 2, 2, 32, 27648);
    /* Not three numbers: no override, the default. */
    p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 128, "fast");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 35840);
    p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 128, "");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 35840);
}

/* A well-formed override that fits no shape is ignored: the default tiling serves. */
Test(vk_matrix_plan, override_that_does_not_fit_falls_back)
{
    fa_vk_matrix_plan p = plan_of(FA_VK_MATRIX_FWD, "nvidia", 128, "1,4,64");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 35840);
    /* tm 3 is not a power of 2. */
    p = plan_of(FA_VK_MATRIX_FWD, "amd-rdna3", 64, "3,2,32");
    fa_vk_matrix_plan q = plan_of(FA_VK_MATRIX_FWD, "amd-rdna3", 64, NULL);
    cr_assert_eq(p.tm, q.tm);
    cr_assert_eq(p.subgroups, q.subgroups);
    cr_assert_eq(p.bn, q.bn);
}

/* Tilings compiled ahead (the catalogue) come first where the device can run them, else the
 * preferred generic tilings serve. */
Test(vk_matrix_plan, catalogue_tilings_first)
{
    static const fa_vk_matrix_tiling catalogue[] = {
        {FA_VK_MATRIX_FWD, 64, {16, 16, 16}, 32, 2, 2, 32, {0}, 0},
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 64, 4, 1, 32, {0}, 0}, /* a subgroup size not run */
        {FA_VK_MATRIX_DQ, 64, {16, 8, 16}, 32, 4, 1, 32, {0}, 0},    /* a shape not listed */
    };
    fa_vk_matrix_caps caps = *caps_of("amd-rdna3");
    caps.tilings = catalogue;
    caps.tiling_count = 3;
    fa_vk_matrix_plan p;
    char why[160];
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 64, NULL, &p, why, sizeof why));
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 2, 2, 32,
                fa_vk_matrix_shared_bytes(FA_VK_MATRIX_FWD, &p, 64));
    /* The others fall back to what the planner picks without a catalogue. */
    const fa_vk_matrix_kernel kernels[] = {FA_VK_MATRIX_FWD, FA_VK_MATRIX_DQ};
    const uint32_t dims[] = {128, 64};
    for (int i = 0; i < 2; i++) {
        fa_vk_matrix_plan q = plan_of(kernels[i], "amd-rdna3", dims[i], NULL);
        cr_assert(fa_vk_matrix_plan_select(kernels[i], &caps, dims[i], NULL, &p, why, sizeof why));
        cr_assert_eq(p.bn, q.bn);
        cr_assert_eq(p.subgroups, q.subgroups);
        cr_assert_eq(p.tm, q.tm);
        cr_assert_eq(p.shape.n, q.shape.n);
    }
    /* An override still wins over the catalogue. */
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 64, "1,4,32", &p, why, sizeof why));
    cr_assert_eq(p.subgroups, 4);
    cr_assert_eq(p.bn, 32);
}

/* Accumulator layouts as a probe reads them back: index[lane * len + e] = r * n + c. */
enum { MAX_LANES = 64, MAX_LEN = 16 };
typedef struct probed {
    uint32_t sg, len, m, n;
    uint32_t index[MAX_LANES * MAX_LEN];
} probed;

/* NVIDIA's 16 x 16 f32 accumulator on 32 lanes as its driver (580) lays it out (the probe on the
 * H200 found 8.2.1.3): lane 4 g + t holds row g in elements 0-3 and row g + 8 in 4-7, columns
 * 2 t, 2 t + 1, 2 t + 8, 2 t + 9. */
static probed nvidia_16x16(void)
{
    probed p = {.sg = 32, .len = 8, .m = 16, .n = 16};
    for (uint32_t l = 0; l < 32; l++)
        for (uint32_t e = 0; e < 8; e++) {
            const uint32_t r = l / 4 + 8 * (e >> 2), c = 2 * (l % 4) + (e & 1) + 8 * ((e >> 1) & 1);
            p.index[l * 8 + e] = r * 16 + c;
        }
    return p;
}

static bool classify(const probed *p, fa_vk_matrix_layout *out)
{
    return fa_vk_matrix_layout_classify(p->index, p->len, p->sg, p->len, p->m, p->n, out);
}

static void assert_layout(fa_vk_matrix_layout f, uint32_t e, uint32_t shift, uint32_t bits,
                          uint32_t x)
{
    cr_assert_eq(f.elements, e);
    cr_assert_eq(f.slot_shift, shift);
    cr_assert_eq(f.slot_bits, bits);
    cr_assert_eq(f.lane_xor, x, "lane_xor %u, expected %u", f.lane_xor, x);
}

Test(vk_matrix_layout, nvidia_rows_in_two_slots_across_quads)
{
    probed p = nvidia_16x16();
    fa_vk_matrix_layout f;
    cr_assert(classify(&p, &f));
    assert_layout(f, 8, 2, 1, 3);
}

/* RDNA3's wave32 WMMA accumulator: lane l holds column l % 16 of rows 2 e + l / 16. */
Test(vk_matrix_layout, amd_one_row_per_element_across_half_waves)
{
    probed p = {.sg = 32, .len = 8, .m = 16, .n = 16};
    for (uint32_t l = 0; l < 32; l++)
        for (uint32_t e = 0; e < 8; e++)
            p.index[l * 8 + e] = (2 * e + l / 16) * 16 + l % 16;
    fa_vk_matrix_layout f;
    cr_assert(classify(&p, &f));
    assert_layout(f, 8, 0, 3, 15);
}

/* A lane per row (8 x 8 on 8 lanes): one slot, no shuffles. */
Test(vk_matrix_layout, one_row_per_lane)
{
    probed p = {.sg = 8, .len = 8, .m = 8, .n = 8};
    for (uint32_t l = 0; l < 8; l++)
        for (uint32_t e = 0; e < 8; e++)
            p.index[l * 8 + e] = l * 8 + e;
    fa_vk_matrix_layout f;
    cr_assert(classify(&p, &f));
    assert_layout(f, 8, 0, 0, 0);
}

/* Forms the register reductions cannot use, or a read-back that is not the matrix. */
Test(vk_matrix_layout, refuses_what_it_cannot_reduce)
{
    fa_vk_matrix_layout f = {1, 1, 1, 1, 1};
    /* Two lanes swap one element: a row's lanes are no longer closed under the xor. */
    probed p = nvidia_16x16();
    const uint32_t tmp = p.index[0 * 8 + 2];
    p.index[0 * 8 + 2] = p.index[5 * 8 + 2];
    p.index[5 * 8 + 2] = tmp;
    cr_assert_not(classify(&p, &f));
    cr_assert_eq(f.elements, 0);
    /* An element twice, another never. */
    p = nvidia_16x16();
    p.index[3] = p.index[4];
    cr_assert_not(classify(&p, &f));
    /* Replicated (twice the elements a matrix has) or an index past the matrix. */
    p = nvidia_16x16();
    p.len = 16;
    cr_assert_not(fa_vk_matrix_layout_classify(p.index, 16, 32, 16, 16, 16, &f));
    p = nvidia_16x16();
    p.index[7] = 256;
    cr_assert_not(classify(&p, &f));
    /* A lane per column, element e in row e: usable (a slot per element, all lanes share). */
    p = (probed){.sg = 8, .len = 8, .m = 8, .n = 8};
    for (uint32_t l = 0; l < 8; l++)
        for (uint32_t e = 0; e < 8; e++)
            p.index[l * 8 + e] = e * 8 + l;
    cr_assert(classify(&p, &f));
    assert_layout(f, 8, 0, 3, 7);
    /* Rows rotated per lane: lanes hold a row in different slots. */
    for (uint32_t l = 0; l < 8; l++)
        for (uint32_t e = 0; e < 8; e++)
            p.index[l * 8 + e] = ((l + e) % 8) * 8 + l;
    cr_assert_not(classify(&p, &f));
}

/* A catalogue tiling compiled for a layout serves only a device whose probe found that layout,
 * and it needs less shared memory (no S scratch, no row factors). */
Test(vk_matrix_layout, catalogue_layout_only_where_probed)
{
    static const fa_vk_matrix_tiling catalogue[] = {
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 4, 1, 32, {8, 2, 1, 3, 0}, 0},
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 4, 1, 32, {0}, 0},
    };
    fa_vk_matrix_caps caps = *caps_of("nvidia");
    caps.tilings = catalogue;
    caps.tiling_count = 2;
    fa_vk_matrix_plan p;
    char why[160];
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.elements, 0, "no probe: the generic row pass");
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 35840);
    caps.layouts[0] = (fa_vk_matrix_layout){8, 0, 3, 15, 0}; /* another layout */
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.elements, 0);
    caps.layouts[0] = (fa_vk_matrix_layout){8, 2, 1, 3, 0};
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.lane_xor, 3);
    /* K and V tiles 2 x 32 x 136 x 2, P 4 x 16 x 40 x 2, the index matrix 16 x 16 x 4. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 17408 + 5120 + 1024);
    /* The dK/dV pass (no per-row values) never takes a row-form tiling... */
    fa_vk_matrix_tiling bwd = catalogue[0];
    bwd.kernel = FA_VK_MATRIX_DKDV;
    caps.tilings = &bwd;
    caps.tiling_count = 1;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_DKDV, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.elements, 0);
    /* ...the dQ pass does, and keeps its rows' LSE and Delta in registers: K and V tiles, dS
     * 4 x 16 x 40 x 2, the index matrix. */
    bwd.kernel = FA_VK_MATRIX_DQ;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_DQ, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.lane_xor, 3);
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 17408 + 5120 + 1024);
}

/* The A matrix of m x k a probe reads back (a_index[lane * len + e] = r * k + c) in the order of
 * NVIDIA's mma.sync fragments: lane 4 g + t holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1),
 * then the same at columns + 8. */
static probed nvidia_a_16x16(void)
{
    probed p = {.sg = 32, .len = 8, .m = 16, .n = 16};
    for (uint32_t l = 0; l < 32; l++)
        for (uint32_t e = 0; e < 8; e++) {
            const uint32_t r = l / 4 + 8 * ((e >> 1) & 1), c = 2 * (l % 4) + (e & 1) + 8 * (e >> 2);
            p.index[l * 8 + e] = r * 16 + c;
        }
    return p;
}

static uint32_t a_from_c(const probed *c, const probed *a)
{
    return fa_vk_matrix_a_from_c(c->index, c->len, a->index, a->len, c->len, c->sg, c->m, c->n,
                                 a->n);
}

/* A result turns into an A operand in registers where every lane holds the same elements of
 * both, in one order for all lanes. */
Test(vk_matrix_layout, a_from_c_is_the_lane_uniform_permutation)
{
    const probed c = nvidia_16x16(), a = nvidia_a_16x16();
    cr_assert_eq(a_from_c(&c, &a), 0x76325410u, "0x%x", a_from_c(&c, &a));
    cr_assert_eq(a_from_c(&c, &c), 0x76543210u, "the same layout: the identity");
    /* One lane holds its elements in another order: no single permutation. */
    probed b = a;
    const uint32_t tmp = b.index[5 * 8 + 0];
    b.index[5 * 8 + 0] = b.index[5 * 8 + 1];
    b.index[5 * 8 + 1] = tmp;
    cr_assert_eq(a_from_c(&c, &b), 0u);
    /* Elements held by other lanes (RDNA3-like A: a lane per row against a lane per column). */
    probed rows = {.sg = 32, .len = 8, .m = 16, .n = 16};
    for (uint32_t l = 0; l < 32; l++)
        for (uint32_t e = 0; e < 8; e++)
            rows.index[l * 8 + e] = (l % 16) * 16 + 2 * e + l / 16;
    cr_assert_eq(a_from_c(&c, &rows), 0u);
    /* N != K, counts that differ, more than 8 elements, an index past the matrix. */
    cr_assert_eq(fa_vk_matrix_a_from_c(c.index, 8, a.index, 8, 8, 32, 16, 16, 8), 0u);
    cr_assert_eq(fa_vk_matrix_a_from_c(c.index, 8, a.index, 4, 8, 32, 16, 16, 16), 0u);
    cr_assert_eq(fa_vk_matrix_a_from_c(c.index, 16, a.index, 16, 16, 16, 16, 16, 16), 0u);
    b = a;
    b.index[0] = 256;
    cr_assert_eq(a_from_c(&c, &b), 0u);
}

/* A catalogue tiling compiled with an A permutation serves only where the probe found that
 * permutation; without P (and dS) in shared memory it needs less of it, and the backward
 * kernels take it too (they need no row form). */
Test(vk_matrix_layout, catalogue_a_permutation_only_where_probed)
{
    static const fa_vk_matrix_tiling catalogue[] = {
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 8, 1, 32, {8, 2, 1, 3, 0x76325410u}, 0},
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 8, 1, 32, {8, 2, 1, 3, 0}, 0},
        {FA_VK_MATRIX_DKDV, 128, {16, 16, 16}, 32, 4, 1, 32, {0, 0, 0, 0, 0x76325410u}, 0},
        {FA_VK_MATRIX_DKDV, 128, {16, 16, 16}, 32, 4, 1, 32, {0}, 0},
        {FA_VK_MATRIX_DQ, 128, {16, 16, 16}, 32, 4, 1, 32, {0, 0, 0, 0, 0x76325410u}, 0},
        {FA_VK_MATRIX_DQ, 128, {16, 16, 16}, 32, 4, 1, 32, {0}, 0},
    };
    fa_vk_matrix_caps caps = *caps_of("nvidia");
    caps.tilings = catalogue;
    caps.tiling_count = sizeof catalogue / sizeof catalogue[0];
    fa_vk_matrix_plan p;
    char why[160];
    /* The row form alone: the tiling that keeps P in shared memory. */
    caps.layouts[0] = (fa_vk_matrix_layout){8, 2, 1, 3, 0};
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0u);
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 8, 1, 32, 17408 + 10240 + 1024);
    /* Another permutation: the same. */
    caps.layouts[0].a_from_c = 0x76543210u;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0u);
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_DQ, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0u);
    /* The probed one: K and V tiles and the index matrix only; the backward takes it too. */
    caps.layouts[0].a_from_c = 0x76325410u;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0x76325410u);
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 8, 1, 32, 17408 + 1024);
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_DKDV, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0x76325410u);
    cr_assert_eq(p.layout.elements, 0u);
    /* Q and dO tiles, LSE and Delta as 16 x 32 f32 each, the index matrix. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 17408 + 4096 + 1024);
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_DQ, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.layout.a_from_c, 0x76325410u);
    /* K and V tiles, the rows' LSE and Delta as 4 x 16 x 16 f32 each, the index matrix. */
    assert_plan(&p, (fa_vk_matrix_shape){16, 16, 16}, 32, 4, 1, 32, 17408 + 8192 + 1024);
}

Test(vk_matrix_plan, forward_tiles_per_group)
{
    /* Short key loops: two tiles per workgroup; long ones, causal calls and single tiles: one. */
    cr_assert_eq(fa_vk_matrix_fwd_tiles_per_group(4, 512, false), 2u);
    cr_assert_eq(fa_vk_matrix_fwd_tiles_per_group(16, 2048, false), 2u);
    cr_assert_eq(fa_vk_matrix_fwd_tiles_per_group(32, 4096, false), 1u);
    cr_assert_eq(fa_vk_matrix_fwd_tiles_per_group(4, 512, true), 1u);
    cr_assert_eq(fa_vk_matrix_fwd_tiles_per_group(1, 512, false), 1u);
}

/* A tiling with producer subgroups (the forward's subgroups spin on theirs) serves only a device
 * whose subgroups make progress independently, never a CPU device such as lavapipe, and its
 * producers count against the workgroup's invocations. */
Test(vk_matrix_layout, producer_tilings_only_on_gpus)
{
    fa_vk_matrix_tiling catalogue[] = {
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 8, 1, 64, {8, 2, 1, 3, 0x76325410u}, 1},
        {FA_VK_MATRIX_FWD, 128, {16, 16, 16}, 32, 8, 1, 32, {8, 2, 1, 3, 0x76325410u}, 0},
    };
    fa_vk_matrix_caps caps = *caps_of("nvidia");
    caps.layouts[0] = (fa_vk_matrix_layout){8, 2, 1, 3, 0x76325410u};
    caps.tilings = catalogue;
    caps.tiling_count = 2;
    fa_vk_matrix_plan p;
    char why[160];
    caps.independent_subgroups = true;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.producers, 1);
    cr_assert_eq(p.bn, 64);
    caps.independent_subgroups = false; /* a CPU device: the next tiling */
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.producers, 0);
    cr_assert_eq(p.bn, 32);
    /* Nine subgroups of 32 need 288 invocations a workgroup. */
    caps.independent_subgroups = true;
    caps.max_invocations = 256;
    cr_assert(fa_vk_matrix_plan_select(FA_VK_MATRIX_FWD, &caps, 128, NULL, &p, why, sizeof why));
    cr_assert_eq(p.producers, 0);
}
