// SPDX-License-Identifier: MIT
/* Wall-clock timing and the process's memory, for honest "how long" and "how much extra". */
#ifndef FA_CLI_TIMER_H
#define FA_CLI_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Monotonic seconds from an arbitrary origin. */
double cli_now(void);
/** Median of n samples (sorts them in place); 0 when n is 0. */
double cli_median(double *samples, size_t n);

/** The 1-minute load average, or a negative number where it cannot be read. Timings taken while
 * it exceeds the number of threads are shared with other processes. */
double cli_load_average(void);

/** Peak resident memory growth over a stretch of code. On Linux the peak (VmHWM) is reset to the
 * current resident size first (/proc/self/clear_refs), so the growth is exact; where the reset is
 * refused, the growth is measured from the current size to the new peak, an upper bound (the
 * peak may be older than the stretch), as on Windows (the working set and its peak, which cannot
 * be reset). Without /proc elsewhere, the growth of getrusage's ru_maxrss, a lower bound (a
 * stretch that stays under an older peak shows no growth). */
typedef struct cli_rss_probe {
    uint64_t rss_before; /* resident bytes when the stretch began */
    uint64_t peak_after; /* peak resident bytes when it ended */
    uint64_t growth;     /* peak_after - rss_before, 0 if negative */
    bool exact;          /* the peak was reset at the start */
    bool valid;          /* the numbers could be read at all */
} cli_rss_probe;

void cli_rss_begin(cli_rss_probe *probe);
void cli_rss_end(cli_rss_probe *probe);

#endif
