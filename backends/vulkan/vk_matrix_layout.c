// SPDX-License-Identifier: MIT
/* The layout probe: which lane of a subgroup holds which element of a cooperative matrix is the
 * driver's choice, so the library asks the device. For each shape that a catalogue module was
 * compiled for a layout of, one dispatch of shaders/vulkan/matrix_layout.comp reads back where
 * each element of an accumulator and of an A matrix lands; fa_vk_matrix_layout_classify
 * (vk_matrix_plan.c) says whether the accumulator has the form the register row reductions
 * need, and fa_vk_matrix_a_from_c whether an accumulator turns into an A matrix in registers.
 * Runs once per context. */
#include "vk_internal.h"
#include "vk_matrix_catalogue.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_E = 64 }; /* matrix_layout.comp */

/* Whether a catalogue module assumes a layout of `shape` at subgroup size sg. */
static bool wanted(const fa_vk_matrix_shape *shape, uint32_t sg)
{
    for (uint32_t i = 0; i < fa_vk_catalogue_count; i++) {
        const fa_vk_matrix_tiling *t = &fa_vk_catalogue_tilings[i];
        if ((t->layout.elements || t->layout.a_from_c) && t->subgroup == sg &&
            t->shape.m == shape->m && t->shape.n == shape->n && t->shape.k == shape->k)
            return true;
    }
    return false;
}

/* Runs the probe for `shape` and classifies what it read back into *out. */
static fa_status probe_shape(fa_context *ctx, const fa_vk_matrix_shape *shape, uint32_t sg,
                             fa_vk_matrix_layout *out)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const size_t words = 2 + 2 * (size_t)sg * MAX_E;
    uint32_t *host = calloc(words, sizeof *host);
    if (!host)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: layout probe");
    fa_vk_buffer buf = {0};
    const fa_vk_spec spec = {
        .cm_m = shape->m, .cm_n = shape->n, .cm_k = shape->k, .cm_sg = sg, .cm_nsg = 1};
    VkPipeline pipeline;
    fa_status s = fa_vk_pipeline_get(ctx, FA_VK_MATRIX_LAYOUT, FA_VK_F16_S16, &spec, &pipeline);
    if (s == FA_OK)
        s = fa_vk_buffer_create(ctx, words * sizeof *host, false, &buf);
    if (s == FA_OK)
        s = fa_vk_begin(ctx);
    if (s == FA_OK)
        s = fa_vk_finish(
            ctx, fa_vk_dispatch(ctx, FA_VK_MATRIX_LAYOUT, pipeline, &buf.buffer, NULL, 0, 1, 1, 1),
            true);
    if (s == FA_OK)
        s = fa_vk_buffer_read(ctx, &buf, 0, host, words * sizeof *host);
    if (s == FA_OK) {
        const uint32_t *c_index = host + 2, *a_index = host + 2 + (size_t)sg * MAX_E;
        fa_vk_matrix_layout_classify(c_index, MAX_E, sg, host[0], shape->m, shape->n, out);
        out->a_from_c = fa_vk_matrix_a_from_c(c_index, host[0], a_index, host[1], MAX_E, sg,
                                              shape->m, shape->n, shape->k);
        fa_log(ctx, FA_LOG_INFO,
               "vulkan: %ux%u accumulator on %u lanes: %u elements per lane, %s (%u.%u.%u.%u); "
               "%ux%u A matrix: %u elements per lane, %s (0x%x)",
               shape->m, shape->n, sg, host[0],
               out->elements ? "row slots known" : "no usable row form", out->elements,
               out->slot_shift, out->slot_bits, out->lane_xor, shape->m, shape->k, host[1],
               out->a_from_c ? "the accumulator's elements" : "no register conversion",
               out->a_from_c);
    }
    fa_vk_buffer_destroy(st, &buf);
    free(host);
    return s;
}

void fa_vk_matrix_layout_probe(fa_context *ctx)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_vk_matrix_caps *caps = &st->matrix_caps;
    const uint32_t sg = caps->subgroup_preferred;
    /* For comparisons: FA_VULKAN_MATRIX_LAYOUT=0: no probe, so the forward keeps the generic
     * row pass; =rows: the row form only, so P and dS keep going through shared memory. */
    const char *env = fa_knob_value(ctx, FA_KNOB_VULKAN_MATRIX_LAYOUT);
    if (env && !strcmp(env, "0"))
        return;
    const bool rows_only = env && !strcmp(env, "rows");
    for (uint32_t i = 0; i < caps->shape_count && i < FA_VK_MATRIX_MAX_SHAPES; i++) {
        caps->layouts[i] = (fa_vk_matrix_layout){0};
        if (!wanted(&caps->shapes[i], sg))
            continue;
        if (probe_shape(ctx, &caps->shapes[i], sg, &caps->layouts[i]) != FA_OK) {
            caps->layouts[i] = (fa_vk_matrix_layout){0};
            fa_log(ctx, FA_LOG_WARN, "vulkan: layout probe of %ux%u failed (%s); generic row pass",
                   caps->shapes[i].m, caps->shapes[i].n, fa_context_last_error(ctx));
        }
        if (rows_only)
            caps->layouts[i].a_from_c = 0;
    }
}
