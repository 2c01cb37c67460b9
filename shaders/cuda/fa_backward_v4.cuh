// SPDX-License-Identifier: MIT
// Backward v4, the default (atomic-dQ) backward for f16 and bf16 at head dim 32, 64, 96 and 128
// (the head dim padded up to the next with zeros), and at 256 for head dims 129-256: one
// kernel produces dK, dV and (through an f32 accumulator and red.global.add) dQ, with
// FlashAttention-2's tiling. Where its shared memory does not fit, the deterministic kernels
// (fa_backward_mma.cuh) or the general ones serve the call.
//
// A block of 8 warps owns BN = 128 keys (head dim 256: 64) of one (batch, KV head); K and V stay
// in shared memory. It walks the query tiles of BM = 64 rows (or, at head dim 64 with
// FA_CUDA_BWD4_QTILE_D64=128, 128 rows; at head dim 256 where 64 do not fit, 32) from the first
// that sees its keys, for every query head of the group; Q, dO, LSE and
// Delta of tile n+1 arrive by cp.async while tile n is computed. Per tile, with the BM x BN
// (query x key) block cut in a different way for each product so that every fragment read from
// shared memory feeds 2-8 mma:
//   1. S = Q K^T and dP = dO V^T; warp w owns rows 16 MS (w % WS).. and keys KW (w / WS)..
//      (WS x 8/WS warps of 16 MS rows x KW keys: 2 x 4 of 32 x 32, 4 x 2 of 32 x 64; at head
//      dim 256 2 x 4 of 32 x 16 (BM = 64) or of 16 x 16 (BM = 32); accumulators in registers).
//   2. P = exp2(S * scale * log2e - LSE * log2e) (0 where masked), dS = P (dP - Delta), both
//      rounded to the input dtype and written to swizzled BM x BN shared tiles sP, sdS.
//   -- barrier --
//   3. dQ += dS K: warp w owns rows 32 (w % WR).. and dims D WR/8 (w / WR).. (WR = BM / 32);
//      A = dS (ldmatrix), B = the resident K (ldmatrix.trans); added with red.global.add into
//      the f32 (batch, heads_q, seq_q, head_dim) accumulator (zeroed by the host;
//      fa_bwd_dq_convert writes dQ = scale * accumulator).
//   4. dV += P^T dO and dK += dS^T Q: warp w owns keys 32 (w % KWN).. and dims DW (w / KWN)..
//      (KWN = BN / 32 warps along the keys: 4 x 2 of 32 x D/2, at head dim 256 2 x 4 of 32 x 64)
//      over the BM rows; A = P^T, dS^T (ldmatrix.trans of sP, sdS), B = dO, Q
//      (ldmatrix.trans); dK and dV live in registers for the whole block (head dim 256: 64 keys
//      x 256 x 2 / 256 threads = 128 f32 a thread).
//   -- the next tile's barrier (after which its cp.async is issued into the buffer just read) --
// Two barriers per tile. Causal or windowed: only tiles with visible pairs are visited, and only
// warps whose part of S crosses the diagonal, a window's edge (or the end of the keys) mask. A
// softcap caps S in step 2 (fa_softcap_tanh) and multiplies dS by 1 - tanh^2; ALiBi adds its term
// to the (capped) log2-unit S there, in a branch of its own (dS unchanged); an additive bias (the
// BIAS instantiations) is S's initial value, in raw units (fa_fwd_mma's; not with a softcap: the
// planner sends those calls to other kernels). Non-causal blocks start at different query tiles
// (rotated by the block index) so that their dQ atomics spread over the accumulator instead of
// hitting the same rows at the same time. BM = 128 at head dim 64 doubles the dK/dV (and dQ) work
// per S/dP tile and halves the barriers per FLOP; S/dP per warp are then 32 x 64 (each A fragment
// feeds 8 mma, not 4), 255 registers, 162 KiB of shared memory. Head dim 256 with 64 keys: K, V 64
// KiB, Q and dO 2 x 2 x 32 KiB (BM = 64: 209 KiB, sm_90) or 2 x 2 x 16 KiB (BM = 32: 137 KiB,
// sm_80).
//
// mma.sync m16n8k16 fragments (g = lane / 4, t = lane % 4), as every comment below uses them:
//   A (16 x 16, row-major): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
//     a3 = A[g+8][2t+8..] (lower column in the low half).
//   B (16 x 8, k x n): b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g].
//   C (16 x 8): c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1].
// ldmatrix.x4: lanes 8i..8i+7 give the row addresses of 8 x 8 matrix i, which lands in register
// i: without .trans lane l gets M_i[l / 4][2 (l % 4), +1]; with .trans M_i[2 (l % 4), +1][l / 4].
// So for a tile X stored [row][col] (rows of 16-byte chunks, swizzled by fa_swz):
//   A = X rows r0.., cols c0..: no trans, lane address row r0 + l % 8 + 8 ((l / 8) % 2),
//     col c0 + 8 (l / 16) -> matrices (r, c), (r+8, c), (r, c+8), (r+8, c+8) = a0..a3.
//   A = X^T (A[m][k] = X[k0 + k][m0 + m]): trans, row k0 + l % 8 + 8 (l / 16),
//     col m0 + 8 ((l / 8) % 2) -> matrices (k, m), (k, m+8), (k+8, m), (k+8, m+8) = a0..a3.
//   B = X^T (B[k][n] = X[n0 + n][k0 + k], e.g. K in S = Q K^T): no trans, row n0 + l % 8 +
//     8 (l / 16), col k0 + 8 ((l / 8) % 2) -> b0, b1 of n-tile n0, then b0, b1 of n0 + 8.
//   B = X (B[k][n] = X[k0 + k][n0 + n], e.g. dO in dV = P^T dO): trans, row k0 + l % 8 +
//     8 ((l / 8) % 2), col n0 + 8 (l / 16) -> b0, b1 of n-tile n0, then b0, b1 of n0 + 8.
#pragma once

#include "fa_mask.cuh"
#include "fa_mma.cuh"

// 4-byte global -> shared copy (through L1); zero-fills when !valid.
__device__ __forceinline__ void fa_cp_async4(unsigned dst, const void *src, bool valid)
{
    int bytes = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

// acc[mt][n] (MT m-tiles of 16 rows x 8 NT columns) += A B^T over K16 steps of 16: A = rows
// r0.. of tile `a` (CA chunks a row), B^T = rows n0.. (8 NT of them) of tile `b` (CB chunks a row).
template <typename T, int MT, int NT, int K16, int CA, int CB>
__device__ __forceinline__ void fa_bwd4_abt(float (&acc)[MT][NT][4], unsigned a, int r0, unsigned b,
                                            int n0, int lane)
{
    const int arow = r0 + (lane & 7) + ((lane >> 3) & 1) * 8, acol = lane >> 4;
    const int brow = n0 + (lane & 7) + (lane >> 4) * 8, bcol = (lane >> 3) & 1;
#pragma unroll
    for (int ks = 0; ks < K16; ks++) {
        unsigned af[MT][4], bf[NT / 2][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            fa_ldmatrix_x4(a + fa_swz<CA>(arow + 16 * mt, 2 * ks + acol), af[mt][0], af[mt][1],
                           af[mt][2], af[mt][3]);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) // keys n0 + 16 np.. : b0, b1 of n-tiles 2 np, 2 np + 1
            fa_ldmatrix_x4(b + fa_swz<CB>(brow + 16 * np, 2 * ks + bcol), bf[np][0], bf[np][1],
                           bf[np][2], bf[np][3]);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                fa_mma16816<T>(acc[mt][2 * np], af[mt], bf[np][0], bf[np][1]);
                fa_mma16816<T>(acc[mt][2 * np + 1], af[mt], bf[np][2], bf[np][3]);
            }
    }
}

// acc[mt][n] (2 m-tiles of 16 rows x 8 NT columns) += X^T Y over K16 steps of 16 rows:
// A = X^T, X = the tile `x` (CX chunks a row) at columns m0.. (the 32 output rows);
// B = Y, the tile `y` (CY chunks a row) at columns n0.. (the 8 NT output columns).
template <typename T, int NT, int K16, int CX, int CY>
__device__ __forceinline__ void fa_bwd4_atb(float (&acc)[2][NT][4], unsigned x, int m0, unsigned y,
                                            int n0, int lane)
{
    const int xrow = (lane & 7) + (lane >> 4) * 8, xcol = m0 / 8 + ((lane >> 3) & 1);
    const int yrow = (lane & 7) + ((lane >> 3) & 1) * 8, ycol = n0 / 8 + (lane >> 4);
#pragma unroll
    for (int ks = 0; ks < K16; ks++) {
        unsigned af[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
            fa_ldmatrix_x4_trans(x + fa_swz<CX>(16 * ks + xrow, xcol + 2 * mt), af[mt][0],
                                 af[mt][1], af[mt][2], af[mt][3]);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            unsigned b0, b1, b2, b3;
            fa_ldmatrix_x4_trans(y + fa_swz<CY>(16 * ks + yrow, ycol + 2 * np), b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                fa_mma16816<T>(acc[mt][2 * np], af[mt], b0, b1);
                fa_mma16816<T>(acc[mt][2 * np + 1], af[mt], b2, b3);
            }
        }
    }
}

// cp.async of rows [r0, r0 + ROWS) of a (rows x head_dim) view into a swizzled tile (zeros past
// n or head_dim). Thread `tid` always copies chunk tid % CH of rows tid / CH + k 256 / CH: with
// 256 / CH a multiple of 8 the swizzle is the same for every k, so one address serves them all.
// Otherwise (head dim 96) chunks tid + k 256 of the tile in row-major order, each swizzled alone.
template <int D, int ROWS>
__device__ __forceinline__ void fa_bwd4_load(unsigned dst, const void *src_v, long long stride,
                                             int r0, int n, int head_dim, int tid)
{
    constexpr int CH = D / 8, RPI = FA_BWD_THREADS / CH;
    const unsigned short *src = (const unsigned short *)src_v;
    if constexpr (FA_BWD_THREADS % CH != 0 || RPI % 8 != 0) {
        static_assert(ROWS * CH % FA_BWD_THREADS == 0, "whole chunks per thread");
#pragma unroll 1
        for (int c = tid; c < ROWS * CH; c += FA_BWD_THREADS) {
            const int row = c / CH, ch = c % CH, r = r0 + row;
            const bool ok = ch * 8 < head_dim && r < n;
            fa_cp_async16(dst + fa_swz<CH>(row, ch), ok ? src + r * stride + ch * 8 : src, ok);
        }
    } else {
        static_assert(ROWS % RPI == 0, "rows per pass");
        const int ch = tid % CH, row = tid / CH;
        const bool ch_ok = ch * 8 < head_dim;
        const unsigned short *s = src + (r0 + row) * stride + ch * 8;
        unsigned d = dst + fa_swz<CH>(row, ch);
        // not unrolled: inside the main loop, unrolled copies keep their row offsets in registers
#pragma unroll 1
        for (int r = r0 + row; r < r0 + ROWS; r += RPI) {
            const bool ok = ch_ok && r < n;
            fa_cp_async16(d, ok ? s : src, ok);
            s += RPI * stride;
            d += RPI * CH * 16;
        }
    }
}

// threadIdx.x, read so that the compiler cannot hoist what derives from it out of the tile loop:
// lane offsets hoisted from every stage would stay in registers across the whole loop.
__device__ __forceinline__ int fa_bwd4_tid()
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

// log2 of a warp count 1, 2 or 4 (tid is signed: shifts, not divisions)
__host__ __device__ constexpr int fa_bwd4_log2(int n)
{
    return n == 4 ? 2 : n == 2 ? 1 : 0;
}

// BM: query rows per tile (FA_BWD4_QTILE, FA_BWD4_QTILE_WIDE at head dim 64,
// FA_BWD4_QTILE_D256 or FA_BWD4_QTILE_D256_NARROW at 256); BN: keys per block (FA_BWD4_KEYS, or
// FA_BWD4_KEYS_D256 at 256).
template <typename T, int D, int BM, int BN, bool BIAS>
__device__ __forceinline__ void fa_bwd_v4(const fa_cuda_params &p)
{
    constexpr int CH = D / 8, PCH = BN / 8;
    constexpr int MS = BM >= 64 ? 2 : 1;   // 16-row m-tiles per warp in S and dP
    constexpr int WS = BM / (16 * MS);     // warps along the query rows in S and dP: 2 or 4
    constexpr int WSS = fa_bwd4_log2(WS);  // log2 WS
    constexpr int KW = BN * WS / 8;        // keys per warp in S and dP: 16, 32 or 64
    constexpr int MT = 2;                  // 16-row m-tiles per warp in dQ (32 rows)
    constexpr int WR = BM / 32;            // warps along the query rows in dQ: 1, 2 or 4
    constexpr int WRS = fa_bwd4_log2(WR);  // log2 WR
    constexpr int DQ = D * WR / 8;         // dQ columns per warp
    constexpr int KWN = BN / 32;           // warps along the keys in dK and dV: 2 or 4
    constexpr int KWS = fa_bwd4_log2(KWN); // log2 KWN
    constexpr int DW = D * KWN / 8;        // dK/dV columns per warp
    constexpr unsigned KV_BYTES = BN * D * 2, Q_BYTES = BM * D * 2, P_BYTES = BM * BN * 2;
    static_assert(FA_BWD_THREADS == 256 && (BM == 32 || BM == 64 || BM == 128) &&
                      (BN == 64 || BN == 128) && WS * 16 * MS == BM && KW % 16 == 0 &&
                      DQ % 8 == 0 && DW % 16 == 0,
                  "8 warps: WS x (8 / WS), WR x (8 / WR) and KWN x (8 / KWN) layouts");
    static_assert(FA_BWD4_SMEM_KQ(D, BN, BM) == 2 * KV_BYTES + 4 * Q_BYTES + 2 * P_BYTES + 16 * BM,
                  "the host's shared memory size (fa_cuda_abi.h)");
    extern __shared__ __align__(128) unsigned char fa_bwd4_smem[];
    unsigned char *pK = fa_bwd4_smem, *pV = pK + KV_BYTES;
    unsigned char *pP = pV + KV_BYTES + 4 * Q_BYTES, *pS = pP + P_BYTES; // P, dS: [query][key]
    const float *sL = (const float *)(pS + P_BYTES), *sD = sL + 2 * BM;  // [buffer][row]
    const unsigned sK = fa_smem_addr(pK), sV = sK + KV_BYTES;
    const unsigned sQ = sV + KV_BYTES, sG = sQ + 2 * Q_BYTES; // Q, dO: [buffer][row][dim]
    const unsigned sP = fa_smem_addr(pP), sdS = sP + P_BYTES;
    const unsigned sLa = fa_smem_addr(sL), sDa = fa_smem_addr(sD);

    int kx = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
    if (BIAS && p.bias_dtype)
        fa_bias_order(p, blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z), gridDim.x,
                      gridDim.y, gridDim.z, kx, hk, b);
    const int j0 = kx * BN;
    {
        const int tid = threadIdx.x;
        fa_bwd4_load<D, BN>(sK, (const T *)p.k.ptr + fa_at(p.k, b, 0, hk), p.k.stride_s, j0,
                            p.seq_k, p.head_dim, tid);
        fa_bwd4_load<D, BN>(sV, (const T *)p.v.ptr + fa_at(p.v, b, 0, hk), p.v.stride_s, j0,
                            p.seq_k, p.head_dim, tid);
    }

    // query tiles: from the first that sees key j0 to the last that sees the block's last key,
    // for each head of the group
    const fa_query_tiles<BM> tiles(p, j0, BN, kx);
    const int total = tiles.total;
    auto tile_of = [&](int it, int &hq, int &i0) { tiles.tile(p, hk, it, hq, i0); };
    auto load_tile = [&](int it, int buf) {
        const int tid = fa_bwd4_tid();
        int hq, i0;
        tile_of(it, hq, i0);
        fa_bwd4_load<D, BM>(sQ + buf * Q_BYTES, (const T *)p.q.ptr + fa_at(p.q, b, 0, hq),
                            p.q.stride_s, i0, p.seq_q, p.head_dim, tid);
        fa_bwd4_load<D, BM>(sG + buf * Q_BYTES, (const T *)p.d_o.ptr + fa_at(p.d_o, b, 0, hq),
                            p.d_o.stride_s, i0, p.seq_q, p.head_dim, tid);
        const float *lse = (const float *)p.lse.ptr, *delta = (const float *)p.delta;
        const int i = i0 + (tid & (BM - 1));
        const bool ok = i < p.seq_q;
        if (tid < BM)
            fa_cp_async4(sLa + (buf * BM + tid) * 4, ok ? lse + fa_at(p.lse, b, i, hq) : lse, ok);
        else if (tid < 2 * BM)
            fa_cp_async4(sDa + (buf * BM + tid - BM) * 4,
                         ok ? delta + ((long long)b * p.heads_q + hq) * p.seq_q + i : delta, ok);
    };
    if (total > 0)
        load_tile(0, 0);
    fa_cp_async_commit();

    // dK, dV: warp w owns keys 32 (w % KWN).. and dims DW (w / KWN).. (4 x 2 or 2 x 4)
    float dk[2][DW / 8][4], dv[2][DW / 8][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int c = 0; c < DW / 8; c++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                dk[mt][c][e] = dv[mt][c][e] = 0.f;

    for (int it = 0; it < total; it++) {
        const int buf = it & 1;
        int hq, i0;
        tile_of(it, hq, i0);
        fa_cp_async_wait<0>();
        __syncthreads(); // tile `it` is in; every warp is done with tile it - 1
        if (it + 1 < total)
            load_tile(it + 1, buf ^ 1);
        fa_cp_async_commit();
        const unsigned qb = sQ + buf * Q_BYTES, gb = sG + buf * Q_BYTES;

        // 1. S = Q K^T, dP = dO V^T: warp w owns rows wm = 16 MS (w % WS).., keys
        // wn = KW (w / WS)..
        {
            const int tid = fa_bwd4_tid(), warp = tid >> 5, lane = tid & 31;
            const int g = lane >> 2, t2 = (lane & 3) * 2;
            const int wm = (warp & (WS - 1)) * 16 * MS, wn = (warp >> WSS) * KW;
            float s[MS][KW / 8][4], dp[MS][KW / 8][4];
#pragma unroll
            for (int mt = 0; mt < MS; mt++)
#pragma unroll
                for (int n = 0; n < KW / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[mt][n][e] = dp[mt][n][e] = 0.f;
            if (BIAS &&
                p.bias_dtype) { // S from the bias in raw units (fa_fwd_mma), keys as in step 2
                const float to_raw = 1.f / p.scale;
                const int kt = j0 + wn + t2, keys = p.seq_k - kt;
                fa_bias_tiles(p, [&](auto dt) {
#pragma unroll
                    for (int mt = 0; mt < MS; mt++)
#pragma unroll
                        for (int r = 0; r < 2; r++) {
                            const void *row =
                                fa_bias_ptr(p, b, i0 + wm + 16 * mt + g + 8 * r, hq, kt);
#pragma unroll
                            for (int n = 0; n < KW / 8; n++)
#pragma unroll
                                for (int c = 0; c < 2; c++)
                                    if (8 * n + c < keys)
                                        s[mt][n][2 * r + c] = fa_bias_at<decltype(dt)::value>(
                                            p, row, 8 * n + c, to_raw);
                        }
                });
            }
            fa_bwd4_abt<T, MS, KW / 8, D / 16, CH, CH>(s, qb, wm, sK, wn, lane);
            fa_bwd4_abt<T, MS, KW / 8, D / 16, CH, CH>(dp, gb, wm, sV, wn, lane);

            // 2. P and dS of rows wm + 16 mt + g + 8 r, keys j0 + wn + 8 n + t2 + 0/1
            float l2[MS][2], dl[MS][2];
#pragma unroll
            for (int mt = 0; mt < MS; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = wm + 16 * mt + g + 8 * r;
                    const float lse = sL[buf * BM + row];
                    // rows past seq_q and rows that see no key (LSE = -inf) get P = 0
                    l2[mt][r] =
                        i0 + row < p.seq_q && lse != -INFINITY ? fa_lse_log2(lse) : INFINITY;
                    dl[mt][r] = sD[buf * BM + row];
                }
            const int kw = j0 + wn; // this warp's first key
            const bool mask = kw + KW > p.seq_k ||
                              (p.causal && kw + KW - 1 > i0 + wm + p.causal_offset) ||
                              (p.has_left && kw < i0 + wm + 16 * MS - 1 + p.left_offset);
            // ALiBi: first S in log2 units (capped where there is a softcap) and dP - Delta (times
            // the cap's derivative 1 - tanh^2), in place, then P with the term of row i0 + wm +
            // 16 mt + g + 8 r's distance from key kw + 8 n + t2 + c, and dS
            if (p.has_alibi) {
                if (p.softcap != 0.f) {
#pragma unroll
                    for (int mt = 0; mt < MS; mt++)
#pragma unroll
                        for (int n = 0; n < KW / 8; n++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                const float t = fa_softcap_tanh(s[mt][n][e], p.softcap_k);
                                s[mt][n][e] = p.softcap_log2 * t;
                                dp[mt][n][e] = (dp[mt][n][e] - dl[mt][e >> 1]) * (1.f - t * t);
                            }
                } else {
#pragma unroll
                    for (int mt = 0; mt < MS; mt++)
#pragma unroll
                        for (int n = 0; n < KW / 8; n++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                s[mt][n][e] *= p.scale_log2;
                                dp[mt][n][e] -= dl[mt][e >> 1];
                            }
                }
                const float slope = fa_alibi_slope(p, b, hq);
                const float d0 = (float)(i0 + wm + g + (p.seq_k - p.seq_q) - kw - t2);
#pragma unroll
                for (int mt = 0; mt < MS; mt++)
#pragma unroll
                    for (int n = 0; n < KW / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const float d = d0 + (float)(16 * mt + 8 * (e >> 1) - 8 * n - (e & 1));
                            const float pr =
                                fa_exp2(fa_alibi(s[mt][n][e], slope, d) - l2[mt][e >> 1]);
                            s[mt][n][e] = pr;
                            dp[mt][n][e] *= pr;
                        }
            } else if (p.softcap != 0.f) { // S capped, dS times the cap's derivative 1 - tanh^2
#pragma unroll
                for (int mt = 0; mt < MS; mt++)
#pragma unroll
                    for (int n = 0; n < KW / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const float t = fa_softcap_tanh(s[mt][n][e], p.softcap_k);
                            const float pr = fa_exp2(p.softcap_log2 * t - l2[mt][e >> 1]);
                            s[mt][n][e] = pr;
                            dp[mt][n][e] = pr * (dp[mt][n][e] - dl[mt][e >> 1]) * (1.f - t * t);
                        }
            } else {
#pragma unroll
                for (int mt = 0; mt < MS; mt++)
#pragma unroll
                    for (int n = 0; n < KW / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const float pr = fa_exp2(s[mt][n][e] * p.scale_log2 - l2[mt][e >> 1]);
                            s[mt][n][e] = pr;
                            dp[mt][n][e] = pr * (dp[mt][n][e] - dl[mt][e >> 1]);
                        }
            }
            // warp-uniform: P (which may be inf there) and dS := 0 outside each row's keys
            if (mask) {
#pragma unroll
                for (int mt = 0; mt < MS; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int row = i0 + wm + 16 * mt + g + 8 * r;
                        int end = p.seq_k; // first key this row does not see
                        if (p.causal)
                            end = min(end, row + p.causal_offset + 1);
                        const int beg = p.has_left ? row + p.left_offset : 0; // first it sees
#pragma unroll
                        for (int n = 0; n < KW / 8; n++)
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                const int key = kw + 8 * n + t2 + c;
                                if (key >= end || key < beg)
                                    s[mt][n][2 * r + c] = dp[mt][n][2 * r + c] = 0.f;
                            }
                    }
            }
            // C fragments to the [query][key] tiles: 4-byte stores, conflict-free (8 rows x
            // 4 threads hit chunk c ^ (row & 7) of 8 rows 2 BN bytes apart)
#pragma unroll
            for (int mt = 0; mt < MS; mt++)
#pragma unroll
                for (int n = 0; n < KW / 8; n++) {
                    const int row = wm + 16 * mt + g, ch = wn / 8 + n;
                    *(unsigned *)(pP + fa_swz<PCH>(row, ch) + t2 * 2) =
                        fa_pack2<T>(s[mt][n][0], s[mt][n][1]);
                    *(unsigned *)(pP + fa_swz<PCH>(row + 8, ch) + t2 * 2) =
                        fa_pack2<T>(s[mt][n][2], s[mt][n][3]);
                    *(unsigned *)(pS + fa_swz<PCH>(row, ch) + t2 * 2) =
                        fa_pack2<T>(dp[mt][n][0], dp[mt][n][1]);
                    *(unsigned *)(pS + fa_swz<PCH>(row + 8, ch) + t2 * 2) =
                        fa_pack2<T>(dp[mt][n][2], dp[mt][n][3]);
                }
        }
        __syncthreads(); // sP, sdS complete

        // 3. dQ (rows wm = 32 (w % WR).., dims wq = DQ (w / WR)..) += dS K over the BN keys,
        // then into the accumulator
        {
            const int tid = fa_bwd4_tid(), warp = tid >> 5, lane = tid & 31;
            const int g = lane >> 2, t2 = (lane & 3) * 2;
            const int wm = (warp & (WR - 1)) * 32, wq = (warp >> WRS) * DQ;
            float dq[MT][DQ / 8][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < DQ / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        dq[mt][n][e] = 0.f;
            const int arow = wm + (lane & 7) + ((lane >> 3) & 1) * 8, acol = lane >> 4;
            const int brow = (lane & 7) + ((lane >> 3) & 1) * 8, bcol = wq / 8 + (lane >> 4);
#pragma unroll
            for (int ks = 0; ks < BN / 16; ks++) {
                unsigned af[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) // A = dS rows wm + 16 mt.., keys 16 ks..
                    fa_ldmatrix_x4(sdS + fa_swz<PCH>(arow + 16 * mt, 2 * ks + acol), af[mt][0],
                                   af[mt][1], af[mt][2], af[mt][3]);
#pragma unroll
                for (int np = 0; np < DQ / 16; np++) { // B = K rows 16 ks.., dims wq + 16 np..
                    unsigned b0, b1, b2, b3;
                    fa_ldmatrix_x4_trans(sK + fa_swz<CH>(16 * ks + brow, bcol + 2 * np), b0, b1, b2,
                                         b3);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        fa_mma16816<T>(dq[mt][2 * np], af[mt], b0, b1);
                        fa_mma16816<T>(dq[mt][2 * np + 1], af[mt], b2, b3);
                    }
                }
                if constexpr (DQ % 16 != 0) { // an odd last n-tile (head dims 32, 96): lanes
                    // 0-15 address its two matrices (lane >> 4 = 0 there)
                    unsigned b0, b1;
                    fa_ldmatrix_x2_trans(sK + fa_swz<CH>(16 * ks + brow, bcol + 2 * (DQ / 16)), b0,
                                         b1);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
                        fa_mma16816<T>(dq[mt][DQ / 8 - 1], af[mt], b0, b1);
                }
            }
            float *dst =
                (float *)p.dq_accum + (((long long)b * p.heads_q + hq) * p.seq_q + i0) * p.head_dim;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = wm + 16 * mt + g + 8 * r;
                    if (i0 + row >= p.seq_q)
                        continue;
#pragma unroll
                    for (int n = 0; n < DQ / 8; n++)
                        if (wq + 8 * n < p.head_dim)
                            fa_red_add2(dst + row * p.head_dim + wq + 8 * n + t2, dq[mt][n][2 * r],
                                        dq[mt][n][2 * r + 1]);
                }
        }

        // 4. dV += P^T dO, dK += dS^T Q: keys kn = 32 (w % KWN).. x dims kd = DW (w / KWN)..
        {
            const int tid = fa_bwd4_tid(), warp = tid >> 5, lane = tid & 31;
            const int kn = (warp & (KWN - 1)) * 32, kd = (warp >> KWS) * DW;
            fa_bwd4_atb<T, DW / 8, BM / 16, PCH, CH>(dv, sP, kn, gb, kd, lane);
            fa_bwd4_atb<T, DW / 8, BM / 16, PCH, CH>(dk, sdS, kn, qb, kd, lane);
        }
    }
    fa_cp_async_wait<0>();
    __syncthreads(); // every warp is done with K and V: stage dK, dV there

    // C fragments (rows kn + 16 mt + g (+8), dims kd + 8 c + t2) -> the K and V tiles
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    const int kn = (warp & (KWN - 1)) * 32, kd = (warp >> KWS) * DW;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int c = 0; c < DW / 8; c++) {
            const int row = kn + 16 * mt + g, ch = kd / 8 + c;
            *(unsigned *)(pK + fa_swz<CH>(row, ch) + t2 * 2) =
                fa_pack2<T>(dk[mt][c][0] * p.scale, dk[mt][c][1] * p.scale);
            *(unsigned *)(pK + fa_swz<CH>(row + 8, ch) + t2 * 2) =
                fa_pack2<T>(dk[mt][c][2] * p.scale, dk[mt][c][3] * p.scale);
            *(unsigned *)(pV + fa_swz<CH>(row, ch) + t2 * 2) =
                fa_pack2<T>(dv[mt][c][0], dv[mt][c][1]);
            *(unsigned *)(pV + fa_swz<CH>(row + 8, ch) + t2 * 2) =
                fa_pack2<T>(dv[mt][c][2], dv[mt][c][3]);
        }
    __syncthreads();
    T *dK = (T *)p.d_k.ptr + fa_at(p.d_k, b, 0, hk), *dV = (T *)p.d_v.ptr + fa_at(p.d_v, b, 0, hk);
    for (int c = tid; c < BN * CH; c += FA_BWD_THREADS) {
        const int row = c / CH, ch = c % CH, j = j0 + row;
        if (j < p.seq_k && ch * 8 < p.head_dim) {
            *(uint4 *)(dK + (long long)j * p.d_k.stride_s + ch * 8) =
                *(const uint4 *)(pK + fa_swz<CH>(row, ch));
            *(uint4 *)(dV + (long long)j * p.d_v.stride_s + ch * 8) =
                *(const uint4 *)(pV + fa_swz<CH>(row, ch));
        }
    }
}
