// SPDX-License-Identifier: MIT
/* The cooperative-matrix tile planner (see vk_matrix_plan.h). The shared-memory expressions
 * mirror the declarations of shaders/vulkan/attn_fwd_cm.comp and fa_backward_cm.glsl. */
#include "vk_matrix_plan.h"

#include <stdio.h>
#include <stdlib.h>

uint32_t fa_vk_matrix_max_head_dim(fa_vk_matrix_kernel kernel)
{
    return kernel == FA_VK_MATRIX_FWD ? 256u : 128u;
}

static bool pow2(uint32_t x)
{
    return x && !(x & (x - 1));
}

/* Row pitch of an f16 tile, in bytes: the head dim plus 8 elements (16 bytes) against bank
 * conflicts. */
static uint32_t tile_pitch(uint32_t d)
{
    return 2u * (d + 8u);
}

uint32_t fa_vk_matrix_shared_bytes(fa_vk_matrix_kernel kernel, const fa_vk_matrix_plan *p,
                                   uint32_t d)
{
    const uint64_t rm = (uint64_t)p->tm * p->shape.m, bn = p->bn;
    const uint64_t tiles = 2u * bn * tile_pitch(d);      /* K and V, or Q and dO */
    const uint64_t f32_block = 4u * rm * (bn + 4u);      /* one rm x bn f32 scratch, padded */
    const uint64_t f16_block = 2u * rm * (bn + 8u);      /* one rm x bn f16 scratch, padded */
    const uint64_t index = 4u * p->shape.m * p->shape.n; /* the index matrix */
    /* P, dS and dS^T skip shared memory where they turn into A operands in registers. */
    const uint64_t a_block = p->layout.a_from_c ? 0u : f16_block;
    uint64_t per_subgroup = 0, shared = tiles;
    switch (kernel) {
    case FA_VK_MATRIX_FWD:
        if (p->layout.elements) /* P; the index matrix */
            per_subgroup = a_block, shared += index;
        else /* S; P; the row factors as an rm x n matrix */
            per_subgroup = f32_block + f16_block + 4u * rm * p->shape.n;
        break;
    case FA_VK_MATRIX_DQ: /* dS; the rows' LSE and Delta as rm x n matrices (in registers
                             where the row form is known); the index matrix */
        per_subgroup = a_block + (p->layout.elements ? 0u : 8u * rm * p->shape.n);
        shared += index;
        break;
    case FA_VK_MATRIX_DKDV: /* P^T and dS^T; the tile's LSE and Delta as m x bn; the index */
        per_subgroup = 2u * a_block;
        shared += 8u * p->shape.m * bn + index;
        break;
    default:
        return UINT32_MAX;
    }
    shared += per_subgroup * p->subgroups;
    return shared > UINT32_MAX ? UINT32_MAX : (uint32_t)shared;
}

uint32_t fa_vk_matrix_fwd_tiles_per_group(uint32_t q_tiles, uint32_t seq_k, bool causal)
{
    return !causal && seq_k <= 2048u && q_tiles >= 2u ? 2u : 1u;
}

/* The subgroup size the pipeline will require: the preferred one, inside [min, max]. */
static uint32_t subgroup_of(const fa_vk_matrix_caps *caps)
{
    uint32_t sg = caps->subgroup_preferred ? caps->subgroup_preferred : caps->subgroup_max;
    if (sg < caps->subgroup_min)
        sg = caps->subgroup_min;
    if (sg > caps->subgroup_max)
        sg = caps->subgroup_max;
    return sg;
}

/* Whether plan p (shape, subgroup, subgroups, tm, bn set) is one the shader can run at head dim
 * d within the device's limits; fills rows and shared_bytes. */
static bool plan_valid(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                       fa_vk_matrix_plan *p)
{
    const fa_vk_matrix_shape s = p->shape;
    if (!pow2(s.m) || !s.n || !s.k || !pow2(p->subgroup) || !pow2(p->tm) || !p->subgroups || !p->bn)
        return false;
    /* Tiles are addressed 8 elements (16 bytes) at a time and the f16 scratch in pairs; a
     * block of rows never straddles the two tiles that stage the operands kept in registers. */
    if (s.k % 8u || s.n % 8u || d % s.k || d % s.n || p->bn % s.n || p->bn % s.k ||
        p->bn % (p->tm * s.m))
        return false;
    const uint32_t rm = p->tm * s.m;
    /* Lanes share a row (lanes_per_row) or own several; each lane takes pairs of columns. */
    const uint32_t lanes_per_row = p->subgroup > rm ? p->subgroup / rm : 1u;
    if (p->bn % (2u * lanes_per_row))
        return false;
    if ((uint64_t)p->subgroup * (p->subgroups + p->producers) > caps->max_invocations)
        return false;
    p->rows = rm * p->subgroups;
    p->shared_bytes = fa_vk_matrix_shared_bytes(kernel, p, d);
    return p->shared_bytes <= caps->shared_memory_bytes;
}

bool fa_vk_matrix_layout_classify(const uint32_t *index, uint32_t stride, uint32_t sg, uint32_t len,
                                  uint32_t m, uint32_t n, fa_vk_matrix_layout *out)
{
    *out = (fa_vk_matrix_layout){0};
    const uint64_t total = (uint64_t)m * n;
    if (!len || len > stride || !pow2(sg) || (uint64_t)sg * len != total || total > 65536)
        return false;
    /* Every element exactly once. */
    uint8_t *seen = calloc((size_t)total, 1);
    if (!seen)
        return false;
    bool ok = true;
    for (uint32_t l = 0; ok && l < sg; l++)
        for (uint32_t e = 0; ok && e < len; e++) {
            const uint32_t x = index[(size_t)l * stride + e];
            ok = x < total && !seen[x];
            if (ok)
                seen[x] = 1;
        }
    free(seen);
    if (!ok)
        return false;
#define ROW_(l_, e_) (index[(size_t)(l_)*stride + (e_)] / n)
    /* The fewest row slots: elements of one slot share a row, slots of a lane do not. */
    fa_vk_matrix_layout f = {0};
    for (uint32_t bits = 0; !f.elements && (1u << bits) <= len; bits++)
        for (uint32_t shift = 0;
             !f.elements && (shift + bits == 0 || (1u << (shift + bits)) <= len); shift++) {
            const uint32_t slots = 1u << bits;
            bool fits = true;
            for (uint32_t l = 0; fits && l < sg; l++)
                for (uint32_t e = 0; fits && e < len; e++) {
                    const uint32_t k = (e >> shift) & (slots - 1u);
                    const uint32_t first = k << shift; /* the slot's first element */
                    fits = first < len && ROW_(l, e) == ROW_(l, first);
                    for (uint32_t j = 0; fits && j < slots; j++)
                        fits =
                            j == k || (j << shift) >= len || ROW_(l, j << shift) != ROW_(l, first);
                }
            if (fits)
                f = (fa_vk_matrix_layout){
                    .elements = len, .slot_shift = bits ? shift : 0, .slot_bits = bits};
            if (!bits)
                break; /* one slot: the shift does not matter */
        }
    if (!f.elements)
        return false;
    /* The lanes holding lane 0's first row, which must be the subsets of some bits... */
    uint32_t xor_bits = 0, group = 0;
    for (uint32_t l = 0; l < sg; l++)
        for (uint32_t e = 0; e < len; e++)
            if (ROW_(l, e) == ROW_(0, 0)) {
                xor_bits |= l;
                group++;
                break;
            }
    uint32_t size = 1;
    for (uint32_t b = 1; b < sg; b <<= 1)
        size *= xor_bits & b ? 2u : 1u;
    ok = group == size && (uint64_t)size * (len >> f.slot_bits) == n;
    /* ...and every lane's partners across those bits hold the same rows in the same slots. */
    for (uint32_t l = 0; ok && l < sg; l++)
        for (uint32_t b = 1; ok && b < sg; b <<= 1)
            for (uint32_t k = 0; ok && (xor_bits & b) && k < (1u << f.slot_bits); k++)
                ok = ROW_(l, k << f.slot_shift) == ROW_(l ^ b, k << f.slot_shift);
#undef ROW_
    if (!ok)
        return false;
    f.lane_xor = xor_bits;
    *out = f;
    return true;
}

uint32_t fa_vk_matrix_a_from_c(const uint32_t *c_index, uint32_t c_len, const uint32_t *a_index,
                               uint32_t a_len, uint32_t stride, uint32_t sg, uint32_t m, uint32_t n,
                               uint32_t k)
{
    if (n != k || !c_len || c_len != a_len || c_len > 8u || c_len > stride || !sg ||
        (uint64_t)sg * c_len != (uint64_t)m * n)
        return 0;
    uint32_t code = 0;
    for (uint32_t i = 0; i < a_len; i++) {
        /* The accumulator element of lane 0 with A element i's row and column... */
        uint32_t from = c_len;
        for (uint32_t e = 0; e < c_len && from == c_len; e++)
            if (c_index[e] == a_index[i])
                from = e;
        if (from == c_len)
            return 0;
        /* ...is that element in every lane (r * k + c = r * n + c, as n = k). */
        for (uint32_t l = 0; l < sg; l++)
            if (c_index[(size_t)l * stride + from] != a_index[(size_t)l * stride + i] ||
                a_index[(size_t)l * stride + i] >= m * k)
                return 0;
        code |= from << (4u * i);
    }
    /* Each accumulator element feeds one A element (an A matrix that repeats one is not a
     * matrix of this shape). */
    uint32_t used = 0;
    for (uint32_t i = 0; i < a_len; i++)
        used |= 1u << ((code >> (4u * i)) & 15u);
    return used == (1u << c_len) - 1u ? code : 0;
}

/* Whether the probed layout `have` serves a module compiled for `want`: the row form where the
 * module reduces rows, the A permutation where it turns results into A operands in registers. */
static bool layout_serves(fa_vk_matrix_layout want, fa_vk_matrix_layout have)
{
    if (want.elements && (want.elements != have.elements || want.slot_shift != have.slot_shift ||
                          want.slot_bits != have.slot_bits || want.lane_xor != have.lane_xor))
        return false;
    return !want.a_from_c || want.a_from_c == have.a_from_c;
}

/* The tiling `t` (subgroup, tm, subgroups, bn set) with the first of the device's shapes (only
 * `shape` when not NULL) at which it is valid, into *plan; false when there is none. A tiling
 * with a layout fits only a shape whose probed layout is the same. */
static bool first_fit(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                      const fa_vk_matrix_shape *shape, fa_vk_matrix_plan t, fa_vk_matrix_plan *plan)
{
    for (uint32_t i = 0; i < caps->shape_count && i < FA_VK_MATRIX_MAX_SHAPES; i++) {
        const fa_vk_matrix_shape s = caps->shapes[i];
        if (shape && (s.m != shape->m || s.n != shape->n || s.k != shape->k))
            continue;
        t.shape = s;
        if (!layout_serves(t.layout, caps->layouts[i]))
            continue;
        if (plan_valid(kernel, caps, d, &t)) {
            *plan = t;
            return true;
        }
    }
    return false;
}

/* The first of the tilings compiled ahead for this kernel and head dim, at the subgroup size
 * the device runs (with `only`: only those with a layout and only's tm, subgroups and bn), that
 * fits one of its shapes, into *plan. The dK/dV pass has no per-row values: a tiling with a row
 * form serves only the forward and dQ. A tiling with producers serves only GPUs. */
static bool catalogue_fit(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                          const fa_vk_matrix_plan *only, fa_vk_matrix_plan *plan)
{
    const uint32_t sg = subgroup_of(caps);
    for (uint32_t t = 0; caps->tilings && t < caps->tiling_count; t++) {
        const fa_vk_matrix_tiling *c = &caps->tilings[t];
        if (c->kernel != kernel || c->d != d || c->subgroup != sg ||
            (c->layout.elements && kernel == FA_VK_MATRIX_DKDV) ||
            (c->producers && !caps->independent_subgroups))
            continue;
        if (only && ((!c->layout.elements && !c->layout.a_from_c) || c->tm != only->tm ||
                     c->subgroups != only->subgroups || c->bn != only->bn))
            continue;
        const fa_vk_matrix_plan p = {.subgroup = sg,
                                     .tm = c->tm,
                                     .subgroups = c->subgroups,
                                     .bn = c->bn,
                                     .layout = c->layout,
                                     .producers = c->producers};
        if (first_fit(kernel, caps, d, &c->shape, p, plan))
            return true;
    }
    return false;
}

bool fa_vk_matrix_plan_select(fa_vk_matrix_kernel kernel, const fa_vk_matrix_caps *caps, uint32_t d,
                              const char *override_tiles, fa_vk_matrix_plan *plan, char *why,
                              size_t why_size)
{
    if (kernel < 0 || kernel >= FA_VK_MATRIX_KERNEL_COUNT) {
        snprintf(why, why_size, "no such matrix kernel");
        return false;
    }
    if (!caps->shape_count) {
        snprintf(why, why_size, "no f16 x f16 -> f32 subgroup matrix shape");
        return false;
    }
    if (d > fa_vk_matrix_max_head_dim(kernel)) {
        snprintf(why, why_size, "head dim %u above the matrix path's %u", d,
                 fa_vk_matrix_max_head_dim(kernel));
        return false;
    }
    const uint32_t sg = subgroup_of(caps);
    if (!pow2(sg)) {
        snprintf(why, why_size, "subgroup size %u is not a power of 2", sg);
        return false;
    }
    unsigned o_tm = 0, o_nsg = 0, o_bn = 0;
    if (override_tiles && override_tiles[0] &&
        sscanf(override_tiles, "%u,%u,%u", &o_tm, &o_nsg, &o_bn) == 3) {
        const fa_vk_matrix_plan o = {.subgroup = sg, .tm = o_tm, .subgroups = o_nsg, .bn = o_bn};
        /* As a catalogue tiling with a layout where one matches, else as given. */
        if (catalogue_fit(kernel, caps, d, &o, plan) || first_fit(kernel, caps, d, NULL, o, plan))
            return true;
    }
    if (catalogue_fit(kernel, caps, d, NULL, plan))
        return true;
    /* No override, or one that fits no shape: the preferred tilings. */
    static const uint32_t nsg_pref[] = {4, 2, 1};
    static const uint32_t bn_pref[] = {64, 32, 16};
    bool divides = false;
    for (uint32_t i = 0; i < caps->shape_count && i < FA_VK_MATRIX_MAX_SHAPES; i++) {
        fa_vk_matrix_plan p = {.shape = caps->shapes[i], .subgroup = sg};
        divides = divides || (p.shape.n && p.shape.k && d % p.shape.n == 0 && d % p.shape.k == 0);
        /* About 16 rows per subgroup: enough reuse of each K/V operand, few registers. */
        p.tm = p.shape.m >= 16u ? 1u : 16u / (p.shape.m ? p.shape.m : 1u);
        for (size_t a = 0; a < sizeof nsg_pref / sizeof nsg_pref[0]; a++)
            for (size_t b = 0; b < sizeof bn_pref / sizeof bn_pref[0]; b++) {
                p.subgroups = nsg_pref[a];
                p.bn = bn_pref[b];
                if (plan_valid(kernel, caps, d, &p)) {
                    *plan = p;
                    return true;
                }
            }
    }
    if (!divides)
        snprintf(why, why_size, "head dim %u is not a multiple of any matrix shape's N and K", d);
    else
        snprintf(why, why_size,
                 "no tiling of the device's matrix shapes fits head dim %u in %u bytes of "
                 "shared memory",
                 d, caps->shared_memory_bytes);
    return false;
}
