// SPDX-License-Identifier: MIT
/* The FMA peak loop: see cpu_peak.h. Each kernel keeps CHAINS independent accumulators
 * acc = acc * b + c in registers, more than FMA latency x FMA ports, so the loop is bound by FMA
 * throughput alone; b < 1 keeps the values finite and away from denormals. */
#include "cpu_peak.h"

#include <stdint.h>
#include <stdlib.h>

#include "cli_timer.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_PEAK_X86 1
#endif

#define CHAINS 12
/* Spelled out rather than looped so that the accumulators live in registers, not on the stack. */
#define FOR_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#if defined(CPU_PEAK_X86)
/* 12 zmm chains: 16 lanes each, 32 registers, FMA latency 4 x 2 ports = 8 needed. */
__attribute__((target("avx512f"))) static float fma_avx512(int64_t iters)
{
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
#define INIT(j) __m512 acc##j = _mm512_set1_ps((float)j);
#define STEP(j) acc##j = _mm512_fmadd_ps(acc##j, b, c);
#define SUM(j) sum = _mm512_add_ps(sum, acc##j);
    FOR_CHAINS(INIT)
    for (int64_t i = 0; i < iters; i++) {
        FOR_CHAINS(STEP)
    }
    __m512 sum = _mm512_setzero_ps();
    FOR_CHAINS(SUM)
    return _mm512_reduce_add_ps(sum);
#undef INIT
#undef STEP
#undef SUM
}

/* 12 ymm chains: 8 lanes each, 16 registers. */
__attribute__((target("avx2,fma"))) static float fma_avx2(int64_t iters)
{
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
#define INIT(j) __m256 acc##j = _mm256_set1_ps((float)j);
#define STEP(j) acc##j = _mm256_fmadd_ps(acc##j, b, c);
#define SUM(j) sum = _mm256_add_ps(sum, acc##j);
    FOR_CHAINS(INIT)
    for (int64_t i = 0; i < iters; i++) {
        FOR_CHAINS(STEP)
    }
    __m256 sum = _mm256_setzero_ps();
    FOR_CHAINS(SUM)
#undef INIT
#undef STEP
#undef SUM
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    float r = 0.0f;
    for (int j = 0; j < 8; j++)
        r += lanes[j];
    return r;
}
#endif

/* Portable fallback: GCC/Clang vector extension of 4 floats (a multiply and an add where the
 * compiler does not contract them; 2 FLOP per lane either way). */
typedef float cpu_peak_v4 __attribute__((vector_size(16)));

static float fma_generic(int64_t iters)
{
    const cpu_peak_v4 b = {0.999999f, 0.999999f, 0.999999f, 0.999999f};
    const cpu_peak_v4 c = {1e-6f, 1e-6f, 1e-6f, 1e-6f};
#define INIT(j) cpu_peak_v4 acc##j = {(float)j, (float)j, (float)j, (float)j};
#define STEP(j) acc##j = acc##j * b + c;
#define SUM(j) sum += acc##j;
    FOR_CHAINS(INIT)
    for (int64_t i = 0; i < iters; i++) {
        FOR_CHAINS(STEP)
    }
    cpu_peak_v4 sum = {0.0f, 0.0f, 0.0f, 0.0f};
    FOR_CHAINS(SUM)
#undef INIT
#undef STEP
#undef SUM
    return sum[0] + sum[1] + sum[2] + sum[3];
}

typedef float (*fma_kernel)(int64_t iters);

/* The widest vector set this machine runs, for both probes. */
typedef enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512 } isa_level;

static isa_level machine_isa(void)
{
#if defined(CPU_PEAK_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return ISA_AVX2;
#endif
    return ISA_GENERIC;
}

static fma_kernel pick_kernel(int *lanes, const char **isa)
{
    switch (machine_isa()) {
#if defined(CPU_PEAK_X86)
    case ISA_AVX512:
        *lanes = 16;
        *isa = "avx512f";
        return fma_avx512;
    case ISA_AVX2:
        *lanes = 8;
        *isa = "avx2+fma";
        return fma_avx2;
#endif
    default:
        *lanes = 4;
        *isa = "generic";
        return fma_generic;
    }
}

/* Runs `iters` on every thread; returns wall seconds. `sink` keeps the results alive. */
static double run_all_threads(fma_kernel kernel, int64_t iters, int *threads, volatile float *sink)
{
    float total = 0.0f;
    int used = 1;
    double t0 = cli_now();
#if defined(_OPENMP)
#pragma omp parallel reduction(+ : total)
    {
        total += kernel(iters);
#pragma omp single
        used = omp_get_num_threads();
    }
#else
    total = kernel(iters);
#endif
    double t = cli_now() - t0;
    *sink = total;
    *threads = used;
    return t;
}

void cpu_peak_measure(double seconds, cpu_peak *out)
{
    int lanes = 4;
    fma_kernel kernel = pick_kernel(&lanes, &out->isa);
    volatile float sink = 0.0f;
    int threads = 1;

    /* Many short runs rather than one long one, the best kept: a run that no other process
     * interrupted is the one that shows what the cores can do. */
    const int runs = 10;
    const double per_run = seconds / runs;
    int64_t iters = 1 << 12;
    double t = run_all_threads(kernel, iters, &threads, &sink);
    while (t < 0.25 * per_run && iters < ((int64_t)1 << 40)) {
        iters *= 2;
        t = run_all_threads(kernel, iters, &threads, &sink);
    }
    if (t > 0 && t < per_run)
        iters = (int64_t)((double)iters * per_run / t) + 1;

    double best = 0.0;
    for (int rep = 0; rep < runs; rep++) {
        t = run_all_threads(kernel, iters, &threads, &sink);
        double flops = 2.0 * (double)lanes * CHAINS * (double)iters * (double)threads;
        if (t > 0 && flops / t > best)
            best = flops / t;
    }
    out->gflops = best * 1e-9;
    out->threads = threads;
}

/* The read probe's kernels: XOR-fold n 64-bit words (n a multiple of 16) with the widest loads the
 * machine has, as the decoding kernels read K and V with theirs; XOR leaves the loads independent
 * of one another (a float sum must keep its order and was bound by its adds). */
typedef uint64_t (*read_kernel)(const uint64_t *a, size_t n);

#if defined(CPU_PEAK_X86)
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t *a, size_t n)
{
    __m512i x0 = _mm512_setzero_si512(), x1 = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 16) {
        x0 = _mm512_xor_si512(x0, _mm512_loadu_si512(a + i));
        x1 = _mm512_xor_si512(x1, _mm512_loadu_si512(a + i + 8));
    }
    uint64_t lanes[8];
    _mm512_storeu_si512(lanes, _mm512_xor_si512(x0, x1));
    return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ lanes[4] ^ lanes[5] ^ lanes[6] ^ lanes[7];
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *a, size_t n)
{
    __m256i x0 = _mm256_setzero_si256(), x1 = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 8) {
        x0 = _mm256_xor_si256(x0, _mm256_loadu_si256((const __m256i *)(a + i)));
        x1 = _mm256_xor_si256(x1, _mm256_loadu_si256((const __m256i *)(a + i + 4)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_xor_si256(x0, x1));
    return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
}
#endif

static uint64_t read_generic(const uint64_t *a, size_t n)
{
    uint64_t x[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (size_t j = 0; j < 8; j++)
            x[j] ^= a[i + j];
    return x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7];
}

static read_kernel pick_read_kernel(void)
{
    switch (machine_isa()) {
#if defined(CPU_PEAK_X86)
    case ISA_AVX512:
        return read_avx512;
    case ISA_AVX2:
        return read_avx2;
#endif
    default:
        return read_generic;
    }
}

/* The calling thread's share [lo, hi) of n words, in whole 16-word groups (n a multiple of 16). */
static void thread_share(size_t n, size_t *lo, size_t *hi)
{
#if defined(_OPENMP)
    const size_t threads = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
#else
    const size_t threads = 1, t = 0;
#endif
    const size_t per = (n / 16 + threads - 1) / threads * 16;
    *lo = per * t < n ? per * t : n;
    *hi = *lo + per < n ? *lo + per : n;
}

double cpu_read_bandwidth(void)
{
    const size_t n = ((size_t)512 << 20) / sizeof(uint64_t);
    uint64_t *a = malloc(n * sizeof(uint64_t));
    if (!a)
        return 0.0;
#if defined(_OPENMP)
#pragma omp parallel
#endif
    { /* first touch by the thread that reads the words later */
        size_t lo, hi;
        thread_share(n, &lo, &hi);
        for (size_t i = lo; i < hi; i++)
            a[i] = i * 0x9E3779B97F4A7C15u;
    }
    const read_kernel kernel = pick_read_kernel();
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 5; pass++) {
        uint64_t total = 0;
        const double t0 = cli_now();
#if defined(_OPENMP)
#pragma omp parallel reduction(^ : total)
#endif
        {
            size_t lo, hi;
            thread_share(n, &lo, &hi);
            total ^= kernel(a + lo, hi - lo);
        }
        const double t = cli_now() - t0;
        sink = total;
        if (t > 0 && (double)(n * sizeof(uint64_t)) / t > best)
            best = (double)(n * sizeof(uint64_t)) / t;
    }
    (void)sink;
    free(a);
    return best * 1e-9;
}
