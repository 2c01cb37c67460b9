// The tensor-core forward, FlashAttention-2 style, for f16 and bf16 with head dim 64 or 128
// (smaller head dims run padded up to the next one, the padding loaded as zeros).
//
// One block owns 128 query rows of one (batch, head): 4 warps of 32 rows (MT = 2, the build's
// choice; 8 warps of 16 rows with Q fragments in registers is MT = 1). K and V stream through
// shared memory in tiles of 64 keys (32 at head dim 128), two buffers deep: cp.async fetches
// tile n+1 while tile n is computed.
// Shared tiles are XOR-swizzled by 16-byte chunk (chunk ^ (row & 7)) so that ldmatrix reads
// eight rows without bank conflicts. Per tile: S = Q K^T (mma.sync m16n8k16, f32 accumulate),
// scale and (only on tiles that cross the causal diagonal or the end of the keys) mask, online
// softmax in registers with exp2, then P, rounded to the input dtype, is fed straight from the
// S accumulators as the A operand of O += P V (V through ldmatrix.trans). O is divided by the
// row sum at the end, staged through the warp's own rows of the Q tile, and written with
// 16-byte stores. Causal blocks are launched heaviest first and stop at their last visible key.
#pragma once

#include "fa_common.cuh"

#define FA_FWD_BQ 128
// keys per tile: 64, or 32 where 32-row warps at head dim 128 would not fit in 255 registers
#define FA_FWD_BK(D, MT) ((MT) > 1 && (D) > 64 ? 32 : 64)

// Byte offset of 16-byte chunk `ch` of row `row` in a swizzled tile with CH chunks per row.
template <int CH> __device__ __forceinline__ unsigned fa_swz(int row, int ch)
{
    return (unsigned)((row * CH + (ch ^ (row & 7))) * 16);
}

// MT = 16-row m-tiles per warp. MT = 1: 8 warps, Q fragments held in registers. MT = 2: 4 warps
// of 32 rows, Q fragments re-read from shared memory, every K/V fragment feeding two mma (half
// the shared-memory traffic per FLOP).
template <typename T, int D, int MT>
__device__ __forceinline__ void fa_fwd_mma(const fa_cuda_params &p)
{
    constexpr int BQ = FA_FWD_BQ, BK = FA_FWD_BK(D, MT), NT = BQ / (16 * MT) * 32, CH = D / 8;
    constexpr int WR = 16 * MT; // rows per warp
    constexpr unsigned TILE_BYTES = BK * D * 2;
    extern __shared__ __align__(128) unsigned char fa_fwd_smem[];
    const unsigned sQ = fa_smem_addr(fa_fwd_smem);
    const unsigned sK = sQ + BQ * D * 2;
    const unsigned sV = sK + 2 * TILE_BYTES;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int qt = p.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * BQ, h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
    const T *Qg = (const T *)p.q.ptr + fa_at(p.q, b, 0, h);
    const T *Kg = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const T *Vg = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);

    int kend = p.seq_k;
    if (p.causal) {
        long long end = (long long)min(q0 + BQ, p.seq_q) - 1 + p.causal_offset + 1;
        kend = (int)max(0LL, min((long long)kend, end));
    }
    const int ntiles = (kend + BK - 1) / BK;

    for (int c = tid; c < BQ * CH; c += NT) {
        const int row = c / CH, ch = c % CH, gr = q0 + row;
        const bool ok = gr < p.seq_q && ch * 8 < p.head_dim;
        fa_cp_async16(sQ + fa_swz<CH>(row, ch), ok ? Qg + gr * p.q.stride_s + ch * 8 : Qg, ok);
    }
    auto load_kv = [&](int tile, int buf) {
        const int k0 = tile * BK;
        for (int c = tid; c < BK * CH; c += NT) {
            const int row = c / CH, ch = c % CH, gr = k0 + row;
            const bool ok = gr < p.seq_k && ch * 8 < p.head_dim;
            const unsigned off = buf * TILE_BYTES + fa_swz<CH>(row, ch);
            fa_cp_async16(sK + off, ok ? Kg + gr * p.k.stride_s + ch * 8 : Kg, ok);
            fa_cp_async16(sV + off, ok ? Vg + gr * p.v.stride_s + ch * 8 : Vg, ok);
        }
    };
    if (ntiles > 0)
        load_kv(0, 0);
    fa_cp_async_commit();
    fa_cp_async_wait<0>();
    __syncthreads();

    const int arow = warp * WR + (lane & 7) + ((lane >> 3) & 1) * 8; // ldmatrix row of A
    unsigned qf[MT == 1 ? D / 16 : 1][4];
    if (MT == 1) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            fa_ldmatrix_x4(sQ + fa_swz<CH>(arow, kk * 2 + (lane >> 4)), qf[kk][0], qf[kk][1],
                           qf[kk][2], qf[kk][3]);
    }

    float o[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
    const int row_lo = q0 + warp * WR + (lane >> 2); // rows row_lo + 16 mt + 8 r
    const int t2 = (lane & 3) * 2;

    for (int it = 0; it < ntiles; it++) {
        const int buf = it & 1;
        if (it + 1 < ntiles) {
            load_kv(it + 1, buf ^ 1);
            fa_cp_async_commit();
            fa_cp_async_wait<1>();
        } else {
            fa_cp_async_wait<0>();
        }
        __syncthreads();
        const unsigned kb = sK + buf * TILE_BYTES, vb = sV + buf * TILE_BYTES;

        float s[MT][BK / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
                s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
        for (int k2 = 0; k2 < D / 32; k2++) {
            unsigned a[MT][2][4];
            if (MT > 1) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h2 = 0; h2 < 2; h2++)
                        fa_ldmatrix_x4(
                            sQ + fa_swz<CH>(arow + 16 * mt, (2 * k2 + h2) * 2 + (lane >> 4)),
                            a[mt][h2][0], a[mt][h2][1], a[mt][h2][2], a[mt][h2][3]);
            }
#pragma unroll
            for (int n = 0; n < BK / 8; n++) {
                unsigned b0, b1, b2, b3;
                fa_ldmatrix_x4(kb + fa_swz<CH>(n * 8 + (lane & 7), k2 * 4 + (lane >> 3)), b0, b1,
                               b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fa_mma16816<T>(s[mt][n],
                                   MT == 1 ? qf[(2 * k2) % (MT == 1 ? D / 16 : 1)] : a[mt][0], b0,
                                   b1);
                    fa_mma16816<T>(s[mt][n],
                                   MT == 1 ? qf[(2 * k2 + 1) % (MT == 1 ? D / 16 : 1)] : a[mt][1],
                                   b2, b3);
                }
            }
        }

        const int k0 = it * BK;
        const bool mask =
            k0 + BK > p.seq_k || (p.causal && k0 + BK - 1 > q0 + warp * WR + p.causal_offset);
        // Scores in log2 units: exp2(s * scale_log2 - m) is one FFMA and one MUFU per element.
        // The running max is taken of s * scale_log2, via the max (or, for a negative scale,
        // the min) of the raw scores; masked scores become -inf once scaled.
        const float c = p.scale_log2;
        const float masked = c > 0.f ? -INFINITY : INFINITY;
        if (mask) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = k0 + n * 8 + t2 + (e & 1);
                        const int row = row_lo + 16 * mt + (e >> 1) * 8;
                        if (key >= p.seq_k || (p.causal && key > row + p.causal_offset))
                            s[mt][n][e] = masked;
                    }
        }

#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = s[mt][0][2 * r];
                if (c > 0.f) {
#pragma unroll
                    for (int n = 0; n < BK / 8; n++)
                        mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                } else {
#pragma unroll
                    for (int n = 0; n < BK / 8; n++)
                        mx = fminf(mx, fminf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
                    mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                }
                const float m_new = fmaxf(m[mt][r], mx * c);
                const float m_use = m_new == -INFINITY ? 0.f : m_new;
                const float alpha = fa_exp2(m[mt][r] - m_use);
                m[mt][r] = m_new;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < BK / 8; n++) {
                    s[mt][n][2 * r] = fa_exp2(fmaf(s[mt][n][2 * r], c, -m_use));
                    s[mt][n][2 * r + 1] = fa_exp2(fmaf(s[mt][n][2 * r + 1], c, -m_use));
                    sum += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
                }
                l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
                for (int n = 0; n < D / 8; n++) {
                    o[mt][n][2 * r] *= alpha;
                    o[mt][n][2 * r + 1] *= alpha;
                }
            }

#pragma unroll
        for (int k2 = 0; k2 < BK / 16; k2++) {
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = fa_pack2<T>(s[mt][2 * k2][0], s[mt][2 * k2][1]);
                a[mt][1] = fa_pack2<T>(s[mt][2 * k2][2], s[mt][2 * k2][3]);
                a[mt][2] = fa_pack2<T>(s[mt][2 * k2 + 1][0], s[mt][2 * k2 + 1][1]);
                a[mt][3] = fa_pack2<T>(s[mt][2 * k2 + 1][2], s[mt][2 * k2 + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                unsigned b0, b1, b2, b3;
                const int row = k2 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                fa_ldmatrix_x4_trans(vb + fa_swz<CH>(row, dp * 2 + (lane >> 4)), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fa_mma16816<T>(o[mt][2 * dp], a[mt], b0, b1);
                    fa_mma16816<T>(o[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }
        __syncthreads();
    }

    // Stage O in this warp's own rows of the Q tile (only this warp ever read them).
    T *Og = (T *)p.o.ptr + fa_at(p.o, b, 0, h);
    float *L = (float *)p.lse.ptr + fa_at(p.lse, b, 0, h);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
            l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
            inv[r] = l[mt][r] > 0.f ? 1.f / l[mt][r] : 0.f;
        }
        const int srow = warp * WR + 16 * mt + (lane >> 2);
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            *(unsigned *)(fa_fwd_smem + fa_swz<CH>(srow, n) + t2 * 2) =
                fa_pack2<T>(o[mt][n][0] * inv[0], o[mt][n][1] * inv[0]);
            *(unsigned *)(fa_fwd_smem + fa_swz<CH>(srow + 8, n) + t2 * 2) =
                fa_pack2<T>(o[mt][n][2] * inv[1], o[mt][n][3] * inv[1]);
        }
        if (p.has_lse && (lane & 3) == 0) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int gr = row_lo + 16 * mt + r * 8;
                if (gr < p.seq_q)
                    L[gr * p.lse.stride_s] =
                        l[mt][r] > 0.f ? (m[mt][r] + log2f(l[mt][r])) * FA_LN2 : -INFINITY;
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int c = lane; c < WR * CH; c += 32) {
        const int row = c / CH, ch = c % CH, gr = q0 + warp * WR + row;
        if (gr < p.seq_q && ch * 8 < p.head_dim)
            *(uint4 *)(Og + gr * p.o.stride_s + ch * 8) =
                *(const uint4 *)(fa_fwd_smem + fa_swz<CH>(warp * WR + row, ch));
    }
}
