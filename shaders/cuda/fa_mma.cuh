// SPDX-License-Identifier: MIT
// Shared by the tensor-core (mma.sync) kernels: the ldmatrix and mma.sync wrappers, the XOR
// swizzle of shared tiles and its k-step addressing, and the warp-level tile loads, stores and
// products built on them.
#pragma once

#include "fa_common.cuh"

__device__ __forceinline__ void fa_ldmatrix_x4(unsigned addr, unsigned &r0, unsigned &r1,
                                               unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void fa_ldmatrix_x4_trans(unsigned addr, unsigned &r0, unsigned &r1,
                                                     unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// Two matrices: lanes 0-15 give the row addresses (those of lanes 16-31 are not read).
__device__ __forceinline__ void fa_ldmatrix_x2_trans(unsigned addr, unsigned &r0, unsigned &r1)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr));
}

// D += A (16x16, row) * B (16x8, col), f32 accumulate.
template <typename T>
__device__ __forceinline__ void fa_mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1);
template <>
__device__ __forceinline__ void fa_mma16816<__half>(float (&c)[4], const unsigned (&a)[4],
                                                    unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void fa_mma16816<__nv_bfloat16>(float (&c)[4], const unsigned (&a)[4],
                                                           unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk `ch` of row `row` in a swizzled tile with CH chunks per row
// (CH a multiple of 4). Rows of a multiple of 8 chunks (128 bytes) swizzle within groups of 8
// chunks by row & 7; rows of 4 (mod 8) chunks (head dims 32, 96) within groups of 4 by
// (row >> 1) & 3: two consecutive rows then cover the 8 bank groups, so the 8 rows of one
// ldmatrix matrix still meet no bank conflict.
template <int CH> __device__ __forceinline__ unsigned fa_swz(int row, int ch)
{
    static_assert(CH % 4 == 0, "rows of a multiple of 4 chunks (head dim a multiple of 32)");
    if constexpr (CH % 8 == 0)
        return (unsigned)((row * CH + (ch ^ (row & 7))) * 16);
    else
        return (unsigned)((row * CH + (ch ^ ((row >> 1) & 3))) * 16);
}

// The address of k16 step `kk` (chunks 2 kk, 2 kk + 1) from a lane's step-0 ldmatrix address
// `a` (row base + swizzled chunk; rows start on 64 bytes, tiles on 1 KiB). With 8-chunk
// swizzle groups the step's chunk bits only meet the swizzle by XOR; with 4-chunk groups the
// low bit of kk does, and the rest adds whole groups (64 bytes).
template <int CH> __device__ __forceinline__ unsigned fa_kstep(unsigned a, int kk)
{
    if constexpr (CH % 8 == 0)
        return a ^ (kk << 5);
    else
        return (a ^ ((kk & 1) << 5)) + (kk >> 1) * 64;
}

// A operand (16 rows x 16 cols at column step kk) of rows r0.. of a swizzled tile.
template <int CH>
__device__ __forceinline__ void fa_load_a(unsigned base, int r0, int kk, int lane, unsigned (&a)[4])
{
    const int row = r0 + (lane & 7) + ((lane >> 3) & 1) * 8;
    fa_ldmatrix_x4(base + fa_swz<CH>(row, kk * 2 + (lane >> 4)), a[0], a[1], a[2], a[3]);
}

// acc[n] += A(16 x D, rows r0.. of tile `a`) * B^T where B is `nrows` rows of tile `b`.
template <typename T, int D, int N>
__device__ __forceinline__ void fa_mma_abt(float (&acc)[N][4], unsigned a_base, int r0,
                                           unsigned b_base, int lane)
{
    constexpr int CH = D / 8;
#pragma unroll
    for (int k2 = 0; k2 < D / 32; k2++) {
        unsigned a0[4], a1[4];
        fa_load_a<CH>(a_base, r0, 2 * k2, lane, a0);
        fa_load_a<CH>(a_base, r0, 2 * k2 + 1, lane, a1);
#pragma unroll
        for (int n = 0; n < N; n++) {
            unsigned b0, b1, b2, b3;
            fa_ldmatrix_x4(b_base + fa_swz<CH>(n * 8 + (lane & 7), k2 * 4 + (lane >> 3)), b0, b1,
                           b2, b3);
            fa_mma16816<T>(acc[n], a0, b0, b1);
            fa_mma16816<T>(acc[n], a1, b2, b3);
        }
    }
}

// acc (16 x D) += P (16 x 16*K2, in C-fragment registers) * B, B = rows of tile `b` (trans).
template <typename T, int D, int N>
__device__ __forceinline__ void fa_mma_pb(float (&acc)[D / 8][4], const float (&pf)[N][4],
                                          unsigned b_base, int lane)
{
    constexpr int CH = D / 8;
#pragma unroll
    for (int k2 = 0; k2 < N / 2; k2++) {
        const unsigned a[4] = {fa_pack2<T>(pf[2 * k2][0], pf[2 * k2][1]),
                               fa_pack2<T>(pf[2 * k2][2], pf[2 * k2][3]),
                               fa_pack2<T>(pf[2 * k2 + 1][0], pf[2 * k2 + 1][1]),
                               fa_pack2<T>(pf[2 * k2 + 1][2], pf[2 * k2 + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            unsigned b0, b1, b2, b3;
            const int row = k2 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            fa_ldmatrix_x4_trans(b_base + fa_swz<CH>(row, dp * 2 + (lane >> 4)), b0, b1, b2, b3);
            fa_mma16816<T>(acc[2 * dp], a, b0, b1);
            fa_mma16816<T>(acc[2 * dp + 1], a, b2, b3);
        }
    }
}

// cp.async of rows [r0, r0 + rows) (zeros past n or past head_dim) into a swizzled tile.
template <int D, int ROWS>
__device__ __forceinline__ void fa_load_rows(unsigned dst, const void *src_v, long long stride,
                                             int r0, int n, int head_dim)
{
    constexpr int CH = D / 8;
    const unsigned short *src = (const unsigned short *)src_v;
    for (int c = threadIdx.x; c < ROWS * CH; c += FA_BWD_THREADS) {
        const int row = c / CH, ch = c % CH, gr = r0 + row;
        const bool ok = gr < n && ch * 8 < head_dim;
        fa_cp_async16(dst + fa_swz<CH>(row, ch), ok ? src + gr * stride + ch * 8 : src, ok);
    }
}

// Writes this warp's 16 rows x D accumulators, scaled, through its own rows of a swizzled tile.
template <typename T, int D>
__device__ __forceinline__ void
fa_store_rows(unsigned char *tile, int r0, const float (&acc)[D / 8][4], float scale, T *dst,
              long long stride, int g0, int n, int head_dim, int lane)
{
    constexpr int CH = D / 8;
    const int srow = r0 + (lane >> 2), t2 = (lane & 3) * 2;
#pragma unroll
    for (int c = 0; c < D / 8; c++) {
        *(unsigned *)(tile + fa_swz<CH>(srow, c) + t2 * 2) =
            fa_pack2<T>(acc[c][0] * scale, acc[c][1] * scale);
        *(unsigned *)(tile + fa_swz<CH>(srow + 8, c) + t2 * 2) =
            fa_pack2<T>(acc[c][2] * scale, acc[c][3] * scale);
    }
    __syncwarp();
#pragma unroll
    for (int c = lane; c < 16 * CH; c += 32) {
        const int row = c / CH, ch = c % CH, gr = g0 + row;
        if (gr < n && ch * 8 < head_dim)
            *(uint4 *)(dst + gr * stride + ch * 8) =
                *(const uint4 *)(tile + fa_swz<CH>(r0 + row, ch));
    }
}

// *dst += (a, b): one 8-byte reduction on sm_90, two 4-byte ones before.
__device__ __forceinline__ void fa_red_add2(float *dst, float a, float b)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(dst, a);
    atomicAdd(dst + 1, b);
#endif
}
