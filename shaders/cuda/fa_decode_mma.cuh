// SPDX-License-Identifier: MIT
// The split-key forward for decoding on tensor cores (f16, bf16): the same work and outputs as
// fa_decode_split (fa_decode.cuh), with the products on mma.sync instead of CUDA-core FMAs.
//
// Why: on CUDA cores each K and V element costs 4 FMAs per packed row plus conversions and
// shared-memory reads of Q; on tensor cores a warp's 16-key step is 2 D / 16 mma and D / 8
// ldmatrix, whatever the number of rows, which leaves the SM free to keep its copies in flight.
// (What made the difference on the H200 was reading K and V in whole rows, which v1 does not:
// docs/PERF.md, decoding v2.)
//
// One block per (key chunk, KV head, batch entry), all of the KV head's packed rows (queries x
// query heads of its group, heads fastest; at most 16) as the 16 rows of the A operand. Each
// warp takes every W-th step of 16 keys of the chunk through a ring of its own of
// FA_DEC_MMA_STAGES (K, V) tiles in shared memory filled by cp.async (no block barrier in the
// loop: the warps run free), each copy instruction reading whole K or V rows; for a paged
// cache, pages of a multiple of 16 keys hold whole steps, whose one table entry every lane
// reads, else lane l finds the place of key row l % 16 (entries requested 3 steps ahead).
// S = Q K^T and O += P V as in the forward (fa_forward_mma.cuh); the online softmax is the warp's
// own; the warps' partial results are merged through shared memory at the end, as in
// fa_decode_split, which also gives the chunk's output convention (O and LSE, or normalised f32 O
// and LSE that the group's last block merges: fa_dec_merge_tail, or fa_decode_merge).
#pragma once

#include <type_traits>

#include "fa_decode.cuh"
#include "fa_mask.cuh"
#include "fa_mma.cuh"

// The kernel's body for one way of finding K and V rows (FA_DEC_CONTIGUOUS, FA_DEC_PAGED_ROWS,
// FA_DEC_PAGED_STEPS), each compiled apart so that the contiguous copies carry no paged code (a
// branch on the paging in the copy loop cost the one-block-an-SM rows 3-4 % on the H200).
enum { FA_DEC_CONTIGUOUS, FA_DEC_PAGED_ROWS, FA_DEC_PAGED_STEPS };
template <typename T, int D, int PAGING>
__device__ __forceinline__ void fa_decode_mma_body(const fa_cuda_params &p)
{
    constexpr int CH = D / 8, KW = FA_DEC_MMA_KEYS, NST = FA_DEC_MMA_STAGES;
    constexpr unsigned TILE = KW * CH * 16; // one stage's K (or V) tile, bytes
    static_assert(KW == 16, "a step is one k16 slice of P V");
    constexpr bool QREG = D <= 128;
    extern __shared__ __align__(1024) unsigned char fa_dec_mma_smem[];
    const unsigned sQ = fa_smem_addr(fa_dec_mma_smem);
    const int W = (int)(blockDim.x >> 5);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // per warp: NST stages of (K tile, V tile); after every ring, the warps' m and l
    const unsigned ring = sQ + 16 * CH * 16 + warp * NST * 2 * TILE;
    float *sm_m = (float *)(fa_dec_mma_smem + 16 * CH * 16 + W * NST * 2 * TILE);
    float *sm_l = sm_m + FA_DEC_MMA_MAX_WARPS * 16;

    const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
    const int rows = p.group * p.seq_q; // packed rows of the KV head, at most 16

    // Q rows (packed row r = query r / group, head hk group + r % group), zeros past the rows
    for (int c = threadIdx.x; c < 16 * CH; c += blockDim.x) {
        const int r = c / CH, ch = c % CH;
        const bool ok = r < rows && ch * 8 < p.head_dim;
        const T *src = (const T *)p.q.ptr;
        if (ok)
            src += fa_at(p.q, b, r / p.group, hk * p.group + r % p.group) + ch * 8;
        fa_cp_async16(sQ + fa_swz<CH>(r, ch), src, ok);
    }
    fa_cp_async_commit();

    // This chunk's keys of the sequence, from the first key any row sees to the last (the
    // mask's bounds, fa_cuda_abi.h, are offsets from the capacity's seq_k - seq_q: shifted to the
    // sequence's own length); rows g and g + 8 are this lane's, each with its bounds [first, last].
    const int seq_k = fa_dec_keys(p, b), shift = seq_k - p.seq_k;
    int k0 = split * p.split_keys;
    int k1 = min(seq_k, k0 + p.split_keys);
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    int first[2], last[2], diag[2]; // diag: the key at ALiBi's distance 0 (fa_cuda_abi.h)
    float slope[2];                 // ALiBi's, of the row's query head
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int pr = g + 8 * r, i = pr / p.group;
        last[r] = pr >= rows ? -1 : p.causal ? i + shift + p.causal_offset : 0x7fffffff;
        first[r] = p.has_left ? i + shift + p.left_offset : 0;
        diag[r] = i + seq_k - p.seq_q;
        slope[r] = fa_alibi_slope(p, b, hk * p.group + pr % p.group);
    }
    if (p.causal)
        k1 = min(k1, (rows - 1) / p.group + shift + p.causal_offset + 1);
    if (p.has_left && k1 > k0 && shift + p.left_offset > k0) // no row sees the first steps
        k0 += (min(shift + p.left_offset, k1) - k0) / KW * KW;
    // The warp's steps: every W-th step of 16 keys of the chunk, from its own (W contiguous
    // runs of steps, one a warp, measured no faster on the H200)
    const int nsteps = k1 > k0 + warp * KW ? (k1 - k0 - warp * KW + W * KW - 1) / (W * KW) : 0;

    // Copies of step s: chunk l % CH of rows l / CH + i RPI, so that each copy instruction reads
    // whole rows (coalesced: a 16-row-per-instruction form measured no faster than the CUDA-core
    // kernel). Paged: lane l (l < 16) finds key row l's place, which the others read by shuffle.
    constexpr int RPI = 32 / CH; // rows per copy instruction
    static_assert(32 % CH == 0 && KW % RPI == 0, "whole rows per copy instruction");
    const int lch = lane % CH, lrow = lane / CH;
    const T *kb = (const T *)p.k.ptr, *vb = (const T *)p.v.ptr;
    constexpr bool paged = PAGING != FA_DEC_CONTIGUOUS;
    if constexpr (paged) {
        kb += (long long)hk * p.k.stride_h;
        vb += (long long)hk * p.v.stride_h;
    } else {
        kb += fa_at(p.k, b, 0, hk);
        vb += fa_at(p.v, b, 0, hk);
    }
    kb += lch * 8;
    vb += lch * 8;
    const bool has_ch = lch * 8 < p.head_dim;
    // Pages of a multiple of 16 keys: a step lies in one page, whose entry (its first key's)
    // every lane reads and places its rows from; else lane l reads key row l % 16's.
    constexpr bool page_steps = PAGING == FA_DEC_PAGED_STEPS;
    const int lkey = page_steps ? 0 : lane & 15; // the key of the step whose entry the lane reads
    // paged: the table entries of the next NST steps to issue, requested NST steps ahead (one
    // step ahead left a table read's latency in front of each block's first copies, and of every
    // copy where a step is short)
    int entry[NST];
#pragma unroll
    for (int j = 0; j < NST; j++) {
        const int key = k0 + (warp + j * W) * KW + lkey;
        entry[j] = paged && j < nsteps && key < k1 ? fa_dec_entry(p, b, key) : 0;
    }
    auto issue = [&](int s) {
        if (s < nsteps) {
            const int n0 = k0 + (warp + s * W) * KW;
            long long ko = 0, vo = 0; // paged: key row lkey's offsets
            if constexpr (paged) {
                const int key = n0 + lkey;
                if (key < k1) {
                    const long long page = fa_dec_page(p, entry[0]);
                    const long long row = key % p.page_size;
                    ko = page * p.k.stride_b + row * p.k.stride_s;
                    vo = page * p.v.stride_b + row * p.v.stride_s;
                }
#pragma unroll
                for (int j = 0; j + 1 < NST; j++)
                    entry[j] = entry[j + 1];
                const int ahead = key + NST * W * KW;
                entry[NST - 1] = s + NST < nsteps && ahead < k1 ? fa_dec_entry(p, b, ahead) : 0;
            }
            const unsigned st = ring + (s % NST) * 2 * TILE;
#pragma unroll
            for (int i = 0; i < KW / RPI; i++) {
                const int row = lrow + i * RPI, key = n0 + row;
                long long kr, vr;
                if constexpr (page_steps) {
                    kr = ko + row * p.k.stride_s;
                    vr = vo + row * p.v.stride_s;
                } else if constexpr (paged) {
                    kr = __shfl_sync(0xffffffffu, ko, row);
                    vr = __shfl_sync(0xffffffffu, vo, row);
                } else {
                    kr = (long long)key * p.k.stride_s;
                    vr = (long long)key * p.v.stride_s;
                }
                const bool in = key < k1 && has_ch;
                const unsigned dst = st + fa_swz<CH>(row, lch);
                fa_cp_async16(dst, in ? kb + kr : kb, in);
                fa_cp_async16(dst + TILE, in ? vb + vr : vb, in);
            }
        }
        fa_cp_async_commit(); // empty past the last step: the wait counts stay uniform
    };
#pragma unroll
    for (int s = 0; s < NST - 1; s++)
        issue(s);
    fa_cp_async_wait<NST - 1>(); // Q (the oldest group) has landed
    __syncthreads();

    // ldmatrix lane addresses as in fa_fwd_mma: row (l & 7) + 8 ((l >> 3) & 1), chunk l >> 4
    const int r7 = lane & 7;
    const unsigned lane_row = (unsigned)((r7 + ((lane >> 3) & 1) * 8) * CH * 16);
    const unsigned lane_x = (unsigned)(((lane >> 4) ^ (CH % 8 == 0 ? r7 : (r7 >> 1) & 3)) << 4);
    const unsigned lane_off = lane_row + lane_x;
    unsigned qf[QREG ? D / 16 : 1][4];
    if (QREG) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            fa_ldmatrix_x4(fa_kstep<CH>(sQ + lane_off, kk), qf[kk][0], qf[kk][1], qf[kk][2],
                           qf[kk][3]);
    }

    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float c = p.scale_log2;

    for (int s = 0; s < nsteps; s++) {
        __syncwarp(); // the stage about to be refilled was read by every lane (step s - 1)
        issue(s + NST - 1);
        fa_cp_async_wait<NST - 1>();
        __syncwarp(); // every lane's copies of step s visible to the warp
        const unsigned kst = ring + (s % NST) * 2 * TILE, vst = kst + TILE;
        const int n0 = k0 + (warp + s * W) * KW;

        // S = Q K^T: two n-tiles of 8 keys
        float sc[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            unsigned a[4];
            if (QREG) {
#pragma unroll
                for (int i = 0; i < 4; i++)
                    a[i] = qf[kk % (QREG ? D / 16 : 1)][i];
            } else {
                fa_ldmatrix_x4(fa_kstep<CH>(sQ + lane_off, kk), a[0], a[1], a[2], a[3]);
            }
            unsigned b00, b10, b01, b11;
            fa_ldmatrix_x4(fa_kstep<CH>(kst + lane_off, kk), b00, b10, b01, b11);
            fa_mma16816<T>(sc[0], a, b00, b01);
            fa_mma16816<T>(sc[1], a, b10, b11);
        }

        // Scores in log2 units (softcapped: cap tanh(scale q.k / cap)), -inf where a row does not
        // see the key (past the chunk or the sequence, outside the row's window, a padding row).
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = n0 + n * 8 + t2 + (e & 1);
                const float x = p.softcap != 0.f
                                    ? p.softcap_log2 * fa_softcap_tanh(sc[n][e], p.softcap_k)
                                    : sc[n][e] * c;
                const bool sees = key < k1 && key <= last[e >> 1] && key >= first[e >> 1];
                sc[n][e] = sees ? x : -INFINITY;
            }
        if (p.has_alibi) // ALiBi's term (-inf stays -inf)
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sc[n][e] = fa_alibi(sc[n][e], slope[e >> 1],
                                        (float)(diag[e >> 1] - (n0 + n * 8 + t2 + (e & 1))));
        float pr[2][4];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx =
                fmaxf(fmaxf(sc[0][2 * r], sc[0][2 * r + 1]), fmaxf(sc[1][2 * r], sc[1][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[r], mx);
            // m_new = -inf: no key seen yet by this row, so P = 0 and nothing to rescale
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = fa_exp2(m[r] - m_use);
            m[r] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    pr[n][2 * r + e] = fa_exp2(sc[n][2 * r + e] - m_use);
                    sum += pr[n][2 * r + e];
                }
            l[r] = l[r] * alpha + sum;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[n][2 * r] *= alpha;
                o[n][2 * r + 1] *= alpha;
            }
        }

        // O += P V. bf16 keeps 8 bits of P: with only a few keys per row (short sequences, the
        // first rows of a causal step) one rounding would show in O, so P also goes in as the
        // remainder P - bf16(P), a second product (the tensor cores have room to spare here).
        const unsigned ph[4] = {fa_pack2<T>(pr[0][0], pr[0][1]), fa_pack2<T>(pr[0][2], pr[0][3]),
                                fa_pack2<T>(pr[1][0], pr[1][1]), fa_pack2<T>(pr[1][2], pr[1][3])};
        constexpr bool LO = std::is_same<T, __nv_bfloat16>::value;
        unsigned pl[4];
        if (LO) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int n = i >> 1, e = (i & 1) * 2;
                pl[i] = fa_pack2<T>(pr[n][e] - __uint_as_float(ph[i] << 16),
                                    pr[n][e + 1] - __uint_as_float(ph[i] & 0xffff0000u));
            }
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            unsigned b0, b1, b2, b3;
            fa_ldmatrix_x4_trans(fa_kstep<CH>(vst + lane_off, dp), b0, b1, b2, b3);
            fa_mma16816<T>(o[2 * dp], ph, b0, b1);
            fa_mma16816<T>(o[2 * dp + 1], ph, b2, b3);
            if (LO) {
                fa_mma16816<T>(o[2 * dp], pl, b0, b1);
                fa_mma16816<T>(o[2 * dp + 1], pl, b2, b3);
            }
        }
    }
    fa_cp_async_wait<0>(); // the empty groups past the last step
    __syncwarp();

    // The warp's m, l and unnormalised O (f32, 16 x D, in its own ring) to shared memory.
    float *so = (float *)(fa_dec_mma_smem + 16 * CH * 16 + warp * NST * 2 * TILE);
    static_assert(16 * D * 4 <= NST * 2 * TILE, "the warp's O fits its ring");
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if ((lane & 3) == 0) {
            sm_m[warp * 16 + g + 8 * r] = m[r];
            sm_l[warp * 16 + g + 8 * r] = l[r];
        }
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *(float2 *)&so[(g + 8 * r) * D + n * 8 + t2] =
                make_float2(o[n][2 * r], o[n][2 * r + 1]);
    }
    __syncthreads();

    // Merge the warps, as fa_decode_split does, and store the block's rows.
    for (int x = threadIdx.x; x < rows * D; x += blockDim.x) {
        const int r = x / D, d = x % D;
        if (d >= p.head_dim)
            continue;
        float mx = -INFINITY;
        for (int w = 0; w < W; w++)
            mx = fmaxf(mx, sm_m[w * 16 + r]);
        // mx = -inf: no warp saw a key (weights 0) or a NaN score (weights NaN)
        const float m_use = mx == -INFINITY ? 0.f : mx;
        float sum = 0.f, acc = 0.f;
        for (int w = 0; w < W; w++) {
            const float f = fa_exp2(sm_m[w * 16 + r] - m_use);
            const float *ow = (const float *)(fa_dec_mma_smem + 16 * CH * 16 + w * NST * 2 * TILE);
            sum += f * sm_l[w * 16 + r];
            acc += f * ow[r * D + d];
        }
        fa_dec_store<T>(p, split, b, r / p.group, hk * p.group + r % p.group, d, mx, sum, acc);
    }
    static_assert(NST * 2 * TILE >= 16 * 32 * 16, "a warp's ring stages the merge's O");
    if (p.split_done) // the rings as the merge's stage: every warp's O was read above
        fa_dec_merge_tail<T>(p, b, hk, 0, rows, (float4 *)(fa_dec_mma_smem + 16 * CH * 16));
}

template <typename T, int D> __device__ void fa_decode_mma(const fa_cuda_params &p)
{
    if (p.page_size <= 0)
        fa_decode_mma_body<T, D, FA_DEC_CONTIGUOUS>(p);
    else if (p.page_size % FA_DEC_MMA_KEYS == 0)
        fa_decode_mma_body<T, D, FA_DEC_PAGED_STEPS>(p);
    else
        fa_decode_mma_body<T, D, FA_DEC_PAGED_ROWS>(p);
}
