// SPDX-License-Identifier: MIT
// PTX wrappers of the Hopper (sm_90a) paths: warpgroup MMA (wgmma) with shared-memory
// descriptors, mbarriers, named barriers and register reallocation between warpgroups.
// Used by the forward and backward of fa_kernels_sm90.cu alone: wgmma exists on sm_90a only.
//
// Shared tiles for wgmma use 128-byte rows (64 f16/bf16) with the 128-byte swizzle: chunk c of
// row r (16 bytes) sits at chunk c ^ (r & 7), and every tile starts on 1 KiB, which is
// fa_swz<8>. A wider row (head dim 128) is stored as column blocks of 64, each [rows][64].
#pragma once

#include "fa_common.cuh"

#include <type_traits>

// Matrix descriptor of a 128-byte-swizzled operand at shared address `addr`: `lbo` (leading
// byte offset) is the distance between 64-column blocks of an MN-major operand (unused when
// K-major), `sbo` (stride byte offset) the distance between groups of 8 rows (1 KiB here).
__device__ __forceinline__ unsigned long long fa_wgmma_desc(unsigned addr, unsigned lbo,
                                                            unsigned sbo)
{
    return (unsigned long long)((addr & 0x3ffff) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3fff) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3fff) << 32) | (1ull << 62);
}

// The descriptor of the operand `off` bytes after the one `d` describes (same strides): the start
// address field (bits 0-13: the address >> 4) grows by off >> 4, and never carries into the next
// field since shared addresses stay below 2^18. One add instead of rebuilding it from an address.
__device__ __forceinline__ unsigned long long fa_wgmma_desc_add(unsigned long long d, unsigned off)
{
    return ((d >> 32) << 32) | (unsigned)((unsigned)d + (off >> 4));
}

__device__ __forceinline__ void fa_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void fa_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are still running.
template <int N> __device__ __forceinline__ void fa_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Accumulator registers of a running wgmma must not be touched: this tells the compiler so.
template <int R> __device__ __forceinline__ void fa_wgmma_hold(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}
// Accumulators whose old values the next wgmma does not read (its first, scale-d 0): an empty
// definition, so that the compiler need not keep them alive until then (no instruction).
template <int R> __device__ __forceinline__ void fa_wgmma_fresh(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "=f"(d[i])::"memory");
}
// The same for A fragments in registers: written before the wgmma.fence that precedes their use.
template <int R, int C> __device__ __forceinline__ void fa_wgmma_hold_u(unsigned (&d)[R][C])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < C; j++)
            asm volatile("" : "+r"(d[i][j])::"memory");
}

// Makes this thread's generic-proxy writes to shared memory (stores, finished cp.async) visible
// to the async proxy that wgmma reads through.
__device__ __forceinline__ void fa_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void fa_setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void fa_setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Barrier `id` (1-15; 0 is __syncthreads) among `threads` threads, a multiple of 32.
__device__ __forceinline__ void fa_named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives at barrier `id` without waiting: the producer side of a pair with fa_named_barrier.
__device__ __forceinline__ void fa_named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void fa_mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fa_mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives and adds `bytes` to the transactions the barrier's phase waits for (the tensor copies
// below complete them).
__device__ __forceinline__ void fa_mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
// Adds `bytes` to the transactions the barrier's phase waits for, without arriving.
__device__ __forceinline__ void fa_mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
// The box at coordinates (c0, c1, c2, c3) of the tensor map at generic address `map` (a kernel
// parameter's) into shared memory at dst, completing its bytes on barrier bar; elements outside
// the tensor (negative coordinates too) land as zeros.
__device__ __forceinline__ void fa_tma_load_4d(unsigned dst, const void *map, int c0, int c1,
                                               int c2, int c3, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}
// The box at coordinates (c0, c1, c2, c3) of the tensor map at `map` from shared memory at src
// (written by the generic proxy: fenced with fa_fence_proxy_async first), in this thread's bulk
// group; elements past the tensor's end are not written, but a box that starts before 0 stops
// the kernel with an illegal instruction (H100), so callers skip such boxes.
__device__ __forceinline__ void fa_tma_store_4d(const void *map, unsigned src, int c0, int c1,
                                                int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"
                 " [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void fa_bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// This thread's bulk groups but the last N have read their shared memory (READ) or completed.
template <int N, bool READ> __device__ __forceinline__ void fa_bulk_wait()
{
    if constexpr (READ)
        asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
    else
        asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// Waits for the phase of parity `parity` of the barrier to complete; HINT_NS > 0 with that
// suspend-time hint: the thread may sleep until the phase completes or the hint runs out, where
// each probe without one returns after a few tens of nanoseconds.
template <unsigned HINT_NS = 0>
__device__ __forceinline__ void fa_mbar_wait(unsigned bar, unsigned parity)
{
    if constexpr (HINT_NS > 0)
        asm volatile("{\n.reg .pred done;\n"
                     "FA_MBAR_WAIT_%=:\n"
                     "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1, %2;\n"
                     "@!done bra FA_MBAR_WAIT_%=;\n}\n" ::"r"(bar),
                     "r"(parity), "n"(HINT_NS)
                     : "memory");
    else
        asm volatile("{\n.reg .pred done;\n"
                     "FA_MBAR_WAIT_%=:\n"
                     "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
                     "@!done bra FA_MBAR_WAIT_%=;\n}\n" ::"r"(bar),
                     "r"(parity)
                     : "memory");
}
// One probe of the same: nonzero once the phase of parity `parity` has completed. The backward
// spins on this in C++ rather than in PTX as fa_mbar_wait does; ptxas schedules the two loops
// differently, and each kernel keeps the one it was validated with.
__device__ __forceinline__ unsigned fa_mbar_try_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done;
}

// ---- wgmma.mma_async m64nNk16, f32 accumulators (d: this thread's N / 2 of the 64 x N) ------
// Register order of d for warp w of the warpgroup, g = lane / 4, t = lane % 4 (as mma.sync's C):
// d[4 j], d[4 j + 1] = row 16 w + g, columns 8 j + 2 t, + 1; d[4 j + 2], d[4 j + 3] = row + 8.
// _ss: A (64 x 16) and B from shared memory, K-major unless TA / TB = 1 (MN-major, transposed:
// the rows run along K); `accumulate` 0 overwrites d.
// _rs: A from registers (mma.sync's A fragment layout, rows 16 w..), B MN-major unless TB = 0,
// always accumulating (or, in the form with an `accumulate` argument, as _ss).
#define FA_WG_ACC16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define FA_WG_OPS16(d)                                                                             \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15])
#define FA_WG_ACC32                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FA_WG_OPS32(d)                                                                             \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FA_WG_ACC64                                                                                \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
    "%56, %57, %58, %59, %60, %61, %62, %63}"
#define FA_WG_OPS64(d)                                                                             \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])

template <typename T, int TA, int TB>
__device__ __forceinline__ void fa_wgmma_ss_n32(float (&d)[16], unsigned long long a,
                                                unsigned long long b, int accumulate)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " FA_WG_ACC16
                     ", %16, %17, p, 1, 1, %19, %20;\n}\n"
                     : FA_WG_OPS16(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " FA_WG_ACC16
                     ", %16, %17, p, 1, 1, %19, %20;\n}\n"
                     : FA_WG_OPS16(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
}

template <typename T, int TA, int TB>
__device__ __forceinline__ void fa_wgmma_ss_n64(float (&d)[32], unsigned long long a,
                                                unsigned long long b, int accumulate)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FA_WG_ACC32
                     ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : FA_WG_OPS32(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FA_WG_ACC32
                     ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : FA_WG_OPS32(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
}
template <typename T, int TB>
__device__ __forceinline__ void fa_wgmma_rs_n64(float (&d)[32], const unsigned (&a)[4],
                                                unsigned long long b)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FA_WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : FA_WG_OPS32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FA_WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : FA_WG_OPS32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1), "n"(TB));
}
template <typename T, int TB>
__device__ __forceinline__ void fa_wgmma_rs_n64(float (&d)[32], const unsigned (&a)[4],
                                                unsigned long long b, int accumulate)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FA_WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : FA_WG_OPS32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
                       "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FA_WG_ACC32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : FA_WG_OPS32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
                       "n"(TB));
}

template <typename T, int TA, int TB>
__device__ __forceinline__ void fa_wgmma_ss_n128(float (&d)[64], unsigned long long a,
                                                 unsigned long long b, int accumulate)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FA_WG_ACC64
                     ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : FA_WG_OPS64(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FA_WG_ACC64
                     ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : FA_WG_OPS64(d)
                     : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
}
template <typename T, int TB>
__device__ __forceinline__ void fa_wgmma_rs_n128(float (&d)[64], const unsigned (&a)[4],
                                                 unsigned long long b)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FA_WG_ACC64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : FA_WG_OPS64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1), "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FA_WG_ACC64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : FA_WG_OPS64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1), "n"(TB));
}
template <typename T, int TB>
__device__ __forceinline__ void fa_wgmma_rs_n128(float (&d)[64], const unsigned (&a)[4],
                                                 unsigned long long b, int accumulate)
{
    if constexpr (std::is_same<T, __half>::value)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FA_WG_ACC64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : FA_WG_OPS64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
                       "n"(TB));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FA_WG_ACC64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : FA_WG_OPS64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
                       "n"(TB));
}

template <typename T, int N, int TA = 0, int TB = 0>
__device__ __forceinline__ void fa_wgmma_ss(float (&d)[N / 2], unsigned long long a,
                                            unsigned long long b, int accumulate)
{
    static_assert(N == 32 || N == 64 || N == 128, "wgmma shapes wrapped here");
    if constexpr (N == 32)
        fa_wgmma_ss_n32<T, TA, TB>(d, a, b, accumulate);
    else if constexpr (N == 64)
        fa_wgmma_ss_n64<T, TA, TB>(d, a, b, accumulate);
    else
        fa_wgmma_ss_n128<T, TA, TB>(d, a, b, accumulate);
}
template <typename T, int N, int TB = 1>
__device__ __forceinline__ void fa_wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4],
                                            unsigned long long b)
{
    static_assert(N == 64 || N == 128, "wgmma shapes wrapped here");
    if constexpr (N == 64)
        fa_wgmma_rs_n64<T, TB>(d, a, b);
    else
        fa_wgmma_rs_n128<T, TB>(d, a, b);
}
// The same with the accumulate predicate from a register, as _ss (0 overwrites d): the
// backward's form, which ptxas schedules differently from the immediate even for a constant 1.
template <typename T, int N, int TB = 1>
__device__ __forceinline__ void fa_wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4],
                                            unsigned long long b, int accumulate)
{
    static_assert(N == 64 || N == 128, "wgmma shapes wrapped here");
    if constexpr (N == 64)
        fa_wgmma_rs_n64<T, TB>(d, a, b, accumulate);
    else
        fa_wgmma_rs_n128<T, TB>(d, a, b, accumulate);
}

// ---- FP8: e4m3 operands, wgmma.mma_async m64nNk32 with f32 accumulators ---------------------
// An e4m3 element as the kernels see it: its byte (OCP E4M3, CUDA's __nv_fp8_e4m3).
struct fa_e4m3 {
    unsigned char bits;
};
template <typename T> constexpr bool fa_is_e4m3 = std::is_same<T, fa_e4m3>::value;

// lo and hi rounded to e4m3 (nearest even, saturating at +-448) in the low and high byte of 16
// bits.
__device__ __forceinline__ unsigned fa_e4m3x2(float lo, float hi)
{
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// 8-bit operands have no transposed form: A and B are both K-major (k32 = 32 bytes a row per
// instruction, the same bytes as k16 of f16), A from shared memory (_ss) or registers (_rs: four
// registers of four bytes, rows g and g + 8 of the warp's 16, keys 4 t.. and 16 + 4 t.., as
// mma.sync's m16n8k32 A fragment).
__device__ __forceinline__ void fa_wgmma_ss_e4m3_n128(float (&d)[64], unsigned long long a,
                                                      unsigned long long b, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FA_WG_ACC64
                 ", %64, %65, p, 1, 1;\n}\n"
                 : FA_WG_OPS64(d)
                 : "l"(a), "l"(b), "r"(accumulate));
}
__device__ __forceinline__ void fa_wgmma_rs_e4m3_n128(float (&d)[64], const unsigned (&a)[4],
                                                      unsigned long long b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FA_WG_ACC64
                 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : FA_WG_OPS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}
