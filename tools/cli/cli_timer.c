// SPDX-License-Identifier: MIT
/* Timing and resident-memory probes: see cli_timer.h. */
#include "cli_timer.h"

#include <stdlib.h>
#include <string.h>

#include "fa_platform.h"

double cli_now(void)
{
    return fa_clock_seconds();
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *samples, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(samples, n, sizeof *samples, compare_double);
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

double cli_load_average(void)
{
    return fa_load_average();
}

void cli_rss_begin(cli_rss_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    uint64_t rss = 0;
    if (fa_process_resident(&rss)) {
        probe->exact = fa_process_peak_reset();
        /* Read again after the reset: the reset sets the peak to the size at that moment. */
        fa_process_resident(&rss);
        probe->rss_before = rss;
        probe->valid = true;
    } else {
        /* No current size: the peak is all there is; its growth is exact only when the process
         * is at its peak now. */
        probe->valid = fa_process_peak_resident(&probe->rss_before);
    }
}

void cli_rss_end(cli_rss_probe *probe)
{
    if (!probe->valid)
        return;
    uint64_t peak = 0;
    fa_process_peak_resident(&peak);
    probe->peak_after = peak;
    probe->growth = peak > probe->rss_before ? peak - probe->rss_before : 0;
}
