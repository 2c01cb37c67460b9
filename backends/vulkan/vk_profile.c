// SPDX-License-Identifier: MIT
/* FA_VULKAN_PROFILE=1 (a developer knob): GPU timestamps at the start of each submission (after
 * its first barrier) and after each dispatch, read back when the submission's fence is waited
 * for. Each fa_context_synchronize logs (info) what the submissions since the last one took on
 * the GPU: per kernel the mean time from the previous timestamp to the end of its dispatches, per
 * submission its span, and the GPU's idle time between one submission's end and the next one's
 * start, which is what the host's recording and submitting cost where it cannot keep ahead; and
 * on the host's clock, per submission, its recording (from fa_vk_begin's first command, once the
 * slot is free and its command buffer begun, to vkQueueSubmit), the vkQueueSubmit call, and the
 * time from its return until the host saw the fence pass (the GPU's span plus the queue's start
 * and the fence's signal, where the host waits at once). */
#include "fa_platform.h"
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { QUERIES = 8 }; /* per submission: its start and up to 7 dispatches */

typedef struct fa_vk_profile {
    VkQueryPool pool;
    double ns_per_tick;
    uint64_t tick_mask;
    uint32_t used[FA_VK_FRAMES];                /* timestamps written in each slot's recording */
    fa_vk_kernel kernel[FA_VK_FRAMES][QUERIES]; /* the dispatch before timestamp i (i >= 1) */
    double kernel_ns[FA_VK_KERNEL_COUNT];
    uint64_t kernel_n[FA_VK_KERNEL_COUNT];
    double span_ns, idle_ns;
    uint64_t submissions, idle_n, last_end;
    bool has_last;
    double host_begin[FA_VK_FRAMES], host_submit[FA_VK_FRAMES], host_return[FA_VK_FRAMES];
    double record_s, submit_s, fence_s; /* sums over the submissions */
} fa_vk_profile;

void fa_vk_profile_open(fa_context *ctx, fa_vk_state *st)
{
    const char *knob = fa_knob_value(ctx, FA_KNOB_VULKAN_PROFILE);
    if (!knob || !strcmp(knob, "0"))
        return;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(st->phys->handle, &props);
    VkQueueFamilyProperties families[32];
    uint32_t n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(st->phys->handle, &n, families);
    const uint32_t timestamp_bits =
        st->queue_family < n ? families[st->queue_family].timestampValidBits : 0;
    if (!timestamp_bits || props.limits.timestampPeriod <= 0.0f) {
        fa_log(ctx, FA_LOG_WARN, "vulkan: FA_VULKAN_PROFILE: the queue has no timestamps");
        return;
    }
    fa_vk_profile *p = calloc(1, sizeof *p);
    if (!p)
        return;
    const VkQueryPoolCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = FA_VK_FRAMES * QUERIES,
    };
    if (st->vk.vkCreateQueryPool(st->device, &info, NULL, &p->pool) != VK_SUCCESS) {
        fa_log(ctx, FA_LOG_WARN, "vulkan: FA_VULKAN_PROFILE: vkCreateQueryPool failed");
        free(p);
        return;
    }
    p->ns_per_tick = props.limits.timestampPeriod;
    p->tick_mask = timestamp_bits >= 64 ? UINT64_MAX : (1ull << timestamp_bits) - 1;
    st->profile = p;
}

void fa_vk_profile_release(fa_vk_state *st)
{
    if (!st->profile)
        return;
    st->vk.vkDestroyQueryPool(st->device, st->profile->pool, NULL);
    free(st->profile);
    st->profile = NULL;
}

void fa_vk_profile_begin(fa_vk_state *st)
{
    fa_vk_profile *p = st->profile;
    if (!p)
        return;
    const uint32_t first = st->frame * QUERIES;
    st->vk.vkCmdResetQueryPool(st->cmd, p->pool, first, QUERIES);
    st->vk.vkCmdWriteTimestamp(st->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, first);
    p->used[st->frame] = 1;
    p->host_begin[st->frame] = fa_clock_seconds();
}

void fa_vk_profile_submit(fa_vk_state *st, bool submitted)
{
    fa_vk_profile *p = st->profile;
    if (!p)
        return;
    double *stamp = submitted ? p->host_return : p->host_submit;
    stamp[st->frame] = fa_clock_seconds();
}

void fa_vk_profile_dispatch(fa_vk_state *st, fa_vk_kernel kernel)
{
    fa_vk_profile *p = st->profile;
    if (!p || p->used[st->frame] >= QUERIES)
        return;
    const uint32_t i = p->used[st->frame]++;
    p->kernel[st->frame][i] = kernel;
    st->vk.vkCmdWriteTimestamp(st->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool,
                               st->frame * QUERIES + i);
}

void fa_vk_profile_collect(fa_vk_state *st, unsigned frame)
{
    fa_vk_profile *p = st->profile;
    if (!p || !p->used[frame])
        return;
    const double seen = fa_clock_seconds();
    uint64_t t[QUERIES];
    const uint32_t n = p->used[frame];
    p->used[frame] = 0;
    if (st->vk.vkGetQueryPoolResults(st->device, p->pool, frame * QUERIES, n, sizeof t, t,
                                     sizeof t[0], VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
        return;
    for (uint32_t i = 0; i < n; i++)
        t[i] &= p->tick_mask;
    for (uint32_t i = 1; i < n; i++) {
        p->kernel_ns[p->kernel[frame][i]] += (double)(t[i] - t[i - 1]) * p->ns_per_tick;
        p->kernel_n[p->kernel[frame][i]]++;
    }
    if (p->has_last && t[0] >= p->last_end) {
        p->idle_ns += (double)(t[0] - p->last_end) * p->ns_per_tick;
        p->idle_n++;
    }
    p->span_ns += (double)(t[n - 1] - t[0]) * p->ns_per_tick;
    p->submissions++;
    p->record_s += p->host_submit[frame] - p->host_begin[frame];
    p->submit_s += p->host_return[frame] - p->host_submit[frame];
    p->fence_s += seen - p->host_return[frame];
    p->last_end = t[n - 1];
    p->has_last = true;
}

void fa_vk_profile_report(fa_context *ctx, fa_vk_state *st)
{
    fa_vk_profile *p = st->profile;
    if (!p || !p->submissions)
        return;
    char line[768];
    const double n = (double)p->submissions;
    int len = snprintf(line, sizeof line,
                       "vulkan profile: %llu submissions, %.2f us each on the GPU, idle %.2f us "
                       "between them; host: recording %.2f us, vkQueueSubmit %.2f us, fence seen "
                       "%.2f us after it;",
                       (unsigned long long)p->submissions, p->span_ns / n * 1e-3,
                       p->idle_n ? p->idle_ns / p->idle_n * 1e-3 : 0.0, p->record_s / n * 1e6,
                       p->submit_s / n * 1e6, p->fence_s / n * 1e6);
    for (int k = 0; k < FA_VK_KERNEL_COUNT && len > 0 && (size_t)len < sizeof line; k++)
        if (p->kernel_n[k])
            len += snprintf(line + len, sizeof line - (size_t)len, " %s %.2f us x %llu;",
                            fa_vk_kernel_name((fa_vk_kernel)k),
                            p->kernel_ns[k] / p->kernel_n[k] * 1e-3,
                            (unsigned long long)p->kernel_n[k]);
    fa_log(ctx, FA_LOG_INFO, "%s", line);
    memset(p->kernel_ns, 0, sizeof p->kernel_ns);
    memset(p->kernel_n, 0, sizeof p->kernel_n);
    p->span_ns = p->idle_ns = 0.0;
    p->record_s = p->submit_s = p->fence_s = 0.0;
    p->submissions = p->idle_n = 0;
    p->has_last = false;
}
