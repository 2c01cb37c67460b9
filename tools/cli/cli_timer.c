// SPDX-License-Identifier: MIT
/* Timing and resident-memory probes: see cli_timer.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli_timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1.0;
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    return load;
}

/* A "Vm...:   1234 kB" line of /proc/self/status, in bytes; false where there is none. */
static bool read_proc_status_kb(const char *key, uint64_t *bytes)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return false;
    char line[256];
    size_t key_len = strlen(key);
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
            unsigned long long kb = strtoull(line + key_len + 1, NULL, 10);
            *bytes = (uint64_t)kb * 1024u;
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok;
}

static uint64_t rusage_peak_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
#if defined(__APPLE__)
    return (uint64_t)ru.ru_maxrss; /* bytes on macOS */
#else
    return (uint64_t)ru.ru_maxrss * 1024u; /* kilobytes on Linux and the BSDs */
#endif
}

void cli_rss_begin(cli_rss_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    uint64_t rss = 0;
    if (read_proc_status_kb("VmRSS", &rss)) {
        probe->exact = reset_peak();
        /* Read again after the reset: the reset sets the peak to the size at that moment. */
        read_proc_status_kb("VmRSS", &rss);
        probe->rss_before = rss;
        probe->valid = true;
    } else {
        /* No /proc: ru_maxrss is all there is; its growth is exact only when the process is at
         * its peak now. */
        probe->rss_before = rusage_peak_bytes();
        probe->valid = probe->rss_before != 0;
    }
}

void cli_rss_end(cli_rss_probe *probe)
{
    if (!probe->valid)
        return;
    uint64_t peak = 0;
    if (!read_proc_status_kb("VmHWM", &peak))
        peak = rusage_peak_bytes();
    probe->peak_after = peak;
    probe->growth = peak > probe->rss_before ? peak - probe->rss_before : 0;
}
