// SPDX-License-Identifier: MIT
/* This machine's single-precision FMA peak, measured: the yardstick for the CPU backend's
 * "fraction of peak". */
#ifndef FA_CPU_PEAK_H
#define FA_CPU_PEAK_H

typedef struct cpu_peak {
    double gflops;   /* best of a few runs, all threads together */
    int threads;     /* OpenMP threads used (1 when the tool is built without OpenMP) */
    const char *isa; /* "avx512f", "avx2+fma" or "generic" */
} cpu_peak;

/** Runs a register-only FMA loop (several independent accumulator chains of the widest vectors
 * this CPU has) on every OpenMP thread for about `seconds` in total, and reports the rate.
 * Counts 2 FLOP per lane per FMA. */
void cpu_peak_measure(double seconds, cpu_peak *out);

/** This machine's memory read rate in GB/s, measured: every OpenMP thread folds its share of a
 * 512 MiB array (far beyond the caches) by XOR, best of a few passes; 0 when the array cannot be
 * allocated. The yardstick of the CPU backend's decoding, which reads K and V once. */
double cpu_read_bandwidth(void);

#endif
