// SPDX-License-Identifier: MIT
// The f32 forward on tensor cores: each product as three TF32 products ("3xTF32"), for head
// dims 64, 128 and 256 (smaller ones padded with zeros), sm_80 and newer.
//
// Precision. An f32 x splits into hi, x rounded to TF32's 11 significant bits, and lo = x - hi
// (fa_tf32_split); a b = hi_a hi_b + hi_a lo_b + lo_a hi_b leaves out lo_a lo_b (2^-22 of |a b|
// at most) and what the tensor cores drop of lo (2^-23): each product is good to about 2^-21
// of its size where an f32 product is rounded to 2^-24. The sums are f32, the softmax f32 on
// CUDA cores. PyTorch's memory-efficient kernel does the same with f32 inputs. The conformance
// rule for f32 is twice the error of a plain f32 attention (README). The tensor cores'
// accumulation truncates, so nothing large is summed in it: S's main products reach S by an f32
// add per 8 dims (the cross terms, 2^-11 of S, have an accumulator of their own), and each
// tile's P V is summed apart, then added to O. Measured, O's error is then below a plain f32
// attention's (docs/PERF.md, twenty-fourth session).
//
// Tiling: one block owns BQ = 64 query rows of one (batch, head), 4 warps of 16 rows; K and V
// stream through shared memory in tiles of FA_FWD_TF32_BK(D) keys, two buffers deep (cp.async
// fetches tile n + 1 while tile n is computed; at head dim 256 on sm_90 one, so that two blocks
// fit an SM: FA_FWD_TF32_KV_BUFS). Tiles are f32, rows padded by 16 bytes (so
// ldmatrix's 8 rows and the V reads below meet no bank conflict). ldmatrix of b16 pairs hands
// out 32-bit elements too: lane (g, t) = (lane / 4, lane % 4) gets element t of row g of each
// 8 x 4 matrix, which is the m16n8k8 TF32 layout of Q (A) and K (B) fragments. P needs no
// shuffle: S's accumulator holds keys 2t and 2t + 1 of each 8-key slice, and taking them as the
// A operand's columns t and t + 4 (a permutation of the slice's keys) only asks the V fragment
// for rows 2t and 2t + 1 of the slice in the same order: two 32-bit shared loads. Masks,
// softcap, ALiBi and the online softmax are those of the f16 forward (fa_forward_mma.cuh), on
// the same accumulator layout; no additive bias (the planner sends those calls to the CUDA-core
// kernel).
#pragma once

#include "fa_mask.cuh"
#include "fa_mma.cuh"

#include <cfloat>
#include <type_traits>

__device__ __forceinline__ unsigned fa_tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// How x splits (FA_TF32_SPLIT, for measurements): 3 (default) hi = x rounded to 11 significant
// bits (TF32's) by adding half of the last kept bit to x's bits and clearing the 13 below (an
// IADD and a LOP3, a carry into the exponent rounding up to the next power of two), lo = x - hi
// exact, of which the tensor cores keep 11 bits (their TF32 operands ignore the low 13 bits of
// each word): x is kept to about 2^-23, with three instructions. 1: Veltkamp's split on the FMA
// pipe, hi = c - (c - x) with c = 8193 x, the same hi and lo with four. 0: hi = cvt.rna.tf32,
// lo = x - hi. 2: the tensor cores truncate x itself, lo = x - that (one LOP3, one FADD), to
// about 2^-20. Values beyond 2^100 (the rounding would carry into an infinity near 2^128,
// Veltkamp's c overflows past 2^115), infinities and NaNs take the careful split
// (fa_needs_care4).
#ifndef FA_TF32_SPLIT
#define FA_TF32_SPLIT 3
#endif

// x = hi + lo, both TF32 operands. SAFE (tiles holding an infinity, a NaN or a value beyond
// 2^100, which are rare): hi is x truncated toward zero (an infinity or a NaN as it is), so that
// lo = x - hi, truncated again, has x's sign; lo of a non-finite x is 0, not x - x = NaN, and lo
// of a nonzero x that TF32 holds exactly is the smallest normal float with x's sign, not 0. So a
// cross term lo * inf is the infinity that x * inf is, not 0 * inf = NaN nor an infinity of the
// other sign against hi * inf (the small lo itself, 2^-126 of the product, is lost in any sum).
template <bool SAFE>
__device__ __forceinline__ void fa_tf32_split(float x, unsigned &hi, unsigned &lo)
{
    if (SAFE) {
        const unsigned xb = __float_as_uint(x);
        const bool finite = (xb & 0x7f800000u) != 0x7f800000u;
        // a NaN made canonical (its payload might lie in the bits the tensor cores ignore)
        hi = finite ? xb & 0xffffe000u : (xb << 1) > 0xff000000u ? 0x7fffffffu : xb;
        const unsigned lb = __float_as_uint(x - __uint_as_float(hi)) & 0xffffe000u;
        lo = !finite ? 0u : (lb << 1) || !(xb << 1) ? lb : (xb & 0x80000000u) | 0x00800000u;
    } else if (FA_TF32_SPLIT == 1) {
        const float c = __fmul_rn(x, 8193.f);
        const float h = __fsub_rn(c, __fsub_rn(c, x));
        hi = __float_as_uint(h);
        lo = __float_as_uint(__fsub_rn(x, h));
    } else if (FA_TF32_SPLIT == 3) {
        hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
        lo = __float_as_uint(__fsub_rn(x, __uint_as_float(hi)));
    } else if (FA_TF32_SPLIT == 2) {
        hi = __float_as_uint(x);
        lo = __float_as_uint(__fsub_rn(x, __uint_as_float(hi & 0xffffe000u)));
    } else {
        hi = fa_tf32(x);
        lo = __float_as_uint(__fsub_rn(x, __uint_as_float(hi)));
    }
}

// Whether any of the 4 floats of a 16-byte shared chunk asks for the careful split: an
// infinity, a NaN or a magnitude beyond 2^100.
__device__ __forceinline__ bool fa_needs_care4(const unsigned char *chunk)
{
    const float4 v = *(const float4 *)chunk;
    return !(fabsf(v.x) <= 0x1p100f && fabsf(v.y) <= 0x1p100f && fabsf(v.z) <= 0x1p100f &&
             fabsf(v.w) <= 0x1p100f);
}

// c += a b, A 16 x 8 (row), B 8 x 8 (col), TF32 in, f32 accumulate.
__device__ __forceinline__ void fa_mma1688_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                                unsigned b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A fragment (4 f32) split into its hi and lo TF32 parts.
template <bool SAFE>
__device__ __forceinline__ void fa_tf32_split4(const float (&x)[4], unsigned (&hi)[4],
                                               unsigned (&lo)[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        fa_tf32_split<SAFE>(x[i], hi[i], lo[i]);
}

// Whether S's main products (hi hi) reach S's accumulators by an f32 add per 8 dims, rounded to
// nearest, rather than through the tensor cores' accumulation, which truncates: at scores of
// 1e4 the truncations of a step each moved S by about 2^-23 of 1e4 (docs/PERF.md).
#ifndef FA_TF32_S_STEP_SUM
#define FA_TF32_S_STEP_SUM 1
#endif

// The head dims up to which each tile's P V is summed apart from O (all, by default; above it O
// takes the products in place, a few percent faster, its error growing with the key count: for
// measurements). Its branch, although not taken by default, is kept in the code: ptxas then
// allocates head dim 256's registers without spilling, and without it spilled 804 bytes.
#ifndef FA_TF32_TILE_SUM_MAX
#define FA_TF32_TILE_SUM_MAX 256
#endif

template <int D> __device__ __forceinline__ void fa_fwd_tf32(const fa_cuda_params &p)
{
    constexpr int BQ = FA_FWD_TF32_BQ, BK = FA_FWD_TF32_BK(D), NT = FA_FWD_TF32_THREADS;
    constexpr int CH = D / 4;          // 16-byte chunks per row
    constexpr int RB = (D + 4) * 4;    // bytes per shared row (16 bytes of padding)
    constexpr unsigned TILE = BK * RB; // one K or V tile
    constexpr int BUFS = FA_FWD_TF32_KV_BUFS(D, FA_FWD_TF32_SM90);
    extern __shared__ __align__(16) unsigned char fa_tf32_smem[];
    const unsigned sQ = fa_smem_addr(fa_tf32_smem);
    const unsigned sK = sQ + BQ * RB;
    const unsigned sV = sK + BUFS * TILE;
    unsigned char *const q_smem = fa_tf32_smem;
    unsigned char *const k_smem = fa_tf32_smem + BQ * RB;
    unsigned char *const v_smem = k_smem + BUFS * TILE;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int qt = p.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * BQ, h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
    const float *Qg = (const float *)p.q.ptr + fa_at(p.q, b, 0, h);
    const float *Kg = (const float *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const float *Vg = (const float *)p.v.ptr + fa_at(p.v, b, 0, hk);

    const int kend = fa_key_end(p, q0, BQ);
    const int ntiles = (kend + BK - 1) / BK;
    const int t0 = fa_key_begin(p, q0) / BK;
    // Tiles from nlead to before nfull need no mask for any row of this warp (fa_forward_mma.cuh).
    int nfull = p.seq_k / BK, nlead = 0;
    if (p.causal) {
        const long long vis = (long long)q0 + warp * 16 + p.causal_offset + 1;
        nfull = (int)min((long long)nfull, max(0LL, vis) / BK);
    }
    if (p.has_left) {
        const long long first = (long long)q0 + warp * 16 + 15 + p.left_offset;
        nlead = (int)((max(0LL, first) + BK - 1) / BK);
    }

    // Loads: 16-byte chunks c = tid + i NT of the tile in row-major order; chunks past the head
    // dim or the last row are zero-filled. Each thread later reads its own chunks back to tell
    // whether the tile holds a value that is not finite (the careful split, above).
    static_assert((BQ * CH) % NT == 0 && (BK * CH) % NT == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < BQ * CH / NT; i++) {
        const int c = tid + i * NT, row = c / CH, ch = c % CH, gr = q0 + row;
        const bool ok = ch * 4 < p.head_dim && gr < p.seq_q;
        fa_cp_async16(sQ + row * RB + ch * 16, ok ? Qg + gr * p.q.stride_s + ch * 4 : Qg, ok);
    }
    auto load_kv = [&](int tile, int buf) {
#pragma unroll
        for (int i = 0; i < BK * CH / NT; i++) {
            const int c = tid + i * NT, row = c / CH, ch = c % CH, gr = tile * BK + row;
            const unsigned off = buf * TILE + row * RB + ch * 16;
            const bool ok = ch * 4 < p.head_dim && gr < p.seq_k;
            fa_cp_async16(sK + off, ok ? Kg + gr * p.k.stride_s + ch * 4 : Kg, ok);
            fa_cp_async16(sV + off, ok ? Vg + gr * p.v.stride_s + ch * 4 : Vg, ok);
        }
    };
    auto kv_needs_care = [&](int buf) {
        bool bad = false;
#pragma unroll
        for (int i = 0; i < BK * CH / NT; i++) {
            const int c = tid + i * NT;
            const unsigned off = buf * TILE + (c / CH) * RB + (c % CH) * 16;
            bad |= fa_needs_care4(k_smem + off) || fa_needs_care4(v_smem + off);
        }
        return bad;
    };
    if (t0 < ntiles)
        load_kv(t0, BUFS == 1 ? 0 : t0 & 1);
    fa_cp_async_commit();
    fa_cp_async_wait<0>();
    bool q_bad = false;
#pragma unroll
    for (int i = 0; i < BQ * CH / NT; i++) {
        const int c = tid + i * NT;
        q_bad |= fa_needs_care4(q_smem + (c / CH) * RB + (c % CH) * 16);
    }
    q_bad = __syncthreads_or(q_bad) != 0;

    // ldmatrix addresses. Q (A, 16 x 8): matrices rows 0-7 | 8-15 x dims 0-3 | 4-7, lane l
    // addressing row (l & 7) + 8 ((l >> 3) & 1), dims 4 (l >> 4). K (B of two 8-key n-tiles):
    // matrices keys 0-7 x dims 0-3 | 4-7, then keys 8-15: key (l & 7) + 8 (l >> 4), dims
    // 4 ((l >> 3) & 1).
    const unsigned q_lane =
        sQ + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * RB + (lane >> 4) * 16;
    const unsigned k_lane = ((lane & 7) + (lane >> 4) * 8) * RB + ((lane >> 3) & 1) * 16;
    const int g = lane >> 2, t = lane & 3, t2 = 2 * t;
    // V (B, 8 keys x 8 dims, keys in S's order): rows 2t and 2t + 1 of the slice, dim g.
    const int v_lane = t2 * RB + g * 4;

    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const int row_lo = q0 + warp * 16 + g; // rows row_lo + 8 r
    const float slope = fa_alibi_slope(p, b, h);

    // One tile: S = Q K^T, the online softmax, O += P V; SAFE: the careful split throughout.
    auto tile = [&](int it, int buf, auto safe) {
        constexpr bool SAFE = decltype(safe)::value;
        const unsigned kb = sK + buf * TILE;
        const unsigned char *vb = v_smem + buf * TILE + v_lane;

        // S = Q K^T, 8 dims at a time: the step's Q fragment and every K fragment, split once.
        // The cross terms go to their own accumulators (sx), so that S's (s) take one rounding
        // per step, not three; they meet once at the end.
        float s[BK / 8][4], sx[BK / 8][4];
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = sx[n][e] = 0.f;
#pragma unroll 4 // (unrolled whole, the step sums below spilled)
        for (int kk = 0; kk < D / 8; kk++) {
            unsigned qr[4], qh[4], ql[4];
            fa_ldmatrix_x4(q_lane + kk * 32, qr[0], qr[1], qr[2], qr[3]);
            const float qa[4] = {__uint_as_float(qr[0]), __uint_as_float(qr[1]),
                                 __uint_as_float(qr[2]), __uint_as_float(qr[3])};
            fa_tf32_split4<SAFE>(qa, qh, ql);
            unsigned kh[BK / 8][2], kl[BK / 8][2];
#pragma unroll
            for (int j = 0; j < BK / 16; j++) {
                unsigned r[4];
                fa_ldmatrix_x4(kb + k_lane + j * 16 * RB + kk * 32, r[0], r[1], r[2], r[3]);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    fa_tf32_split<SAFE>(__uint_as_float(r[e]), kh[2 * j + e / 2][e & 1],
                                        kl[2 * j + e / 2][e & 1]);
            }
#pragma unroll
            for (int n = 0; n < BK / 8; n++) {
                fa_mma1688_tf32(sx[n], ql, kh[n][0], kh[n][1]);
                fa_mma1688_tf32(sx[n], qh, kl[n][0], kl[n][1]);
                if (FA_TF32_S_STEP_SUM) {
                    float hh[4] = {0.f, 0.f, 0.f, 0.f};
                    fa_mma1688_tf32(hh, qh, kh[n][0], kh[n][1]);
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[n][e] += hh[e];
                } else {
                    fa_mma1688_tf32(s[n], qh, kh[n][0], kh[n][1]);
                }
            }
        }
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] += sx[n][e];

        const int k0 = it * BK;
        const bool mask = it >= nfull || it < nlead;
        const bool cap = p.softcap != 0.f;
        // Scores in log2 units, as in fa_forward_mma.cuh: c = scale_log2 unless a softcap or
        // ALiBi made S log2-unit scores already.
        const float c = cap || p.has_alibi ? 1.f : p.scale_log2;
        const float masked = c > 0.f ? -INFINITY : INFINITY;
        if (cap) {
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[n][e] = p.softcap_log2 * fa_softcap_tanh(s[n][e], p.softcap_k);
        }
        if (p.has_alibi) {
            const float sc = cap ? 1.f : p.scale_log2;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float d = (float)(row_lo + 8 * r + (p.seq_k - p.seq_q) - k0 - t2);
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        s[n][2 * r + e] =
                            fa_alibi(s[n][2 * r + e] * sc, slope, d - (float)(8 * n + e));
            }
        }
        if (mask) { // per row: the visible keys [beg, end) relative to the thread's key k0 + t2
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = row_lo + 8 * r, kt = k0 + t2;
                const int end = (p.causal ? min(p.seq_k, row + p.causal_offset + 1) : p.seq_k) - kt;
                const int beg = p.has_left ? row + p.left_offset - kt : 0;
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (n * 8 + e >= end || n * 8 + e < beg)
                            s[n][2 * r + e] = masked;
            }
        }

        float tm[2];
        bool grow = false;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = s[0][2 * r];
            if (c > 0.f) {
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
                    mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            } else {
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
                    mx = fminf(mx, fminf(s[n][2 * r], s[n][2 * r + 1]));
                mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            }
            tm[r] = mx * c;
            grow |= tm[r] > m[r] + FA_FWD_RESCALE_SLACK;
        }
        if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float m_new = fmaxf(m[r], tm[r]);
                const float alpha = fa_exp2(m[r] - (m_new == -INFINITY ? 0.f : m_new));
                m[r] = m_new;
                l[r] *= alpha;
#pragma unroll
                for (int n = 0; n < D / 8; n++) {
                    o[n][2 * r] *= alpha;
                    o[n][2 * r + 1] *= alpha;
                }
            }
        }

        // P = exp2(S - m) in f32, in place of S; each 8-key slice then is the A fragment
        // {P[g][2t], P[g + 8][2t], P[g][2t + 1], P[g + 8][2t + 1]} of O += P V.
        bool any_p = false;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float mu = m[r] == -INFINITY ? 0.f : m[r];
            float sum = 0.f;
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    s[n][2 * r + e] = fa_exp2(__fmul_rn(s[n][2 * r + e], c) - mu);
                    sum += s[n][2 * r + e];
                }
            l[r] += sum;
            any_p |= sum != 0.f;
        }
        // Skipped where P is zero for every row of the warp (a causal tile past its diagonal).
        if (__any_sync(0xffffffffu, any_p) && D <= FA_TF32_TILE_SUM_MAX) {
            // The tile's P V summed apart, per 8 columns, then added to O in f32: the tensor
            // cores' truncating accumulation then sees a tile's sum, not O itself, and O's
            // error no longer grows with the key count.
            unsigned ph[BK / 8][4], pl[BK / 8][4];
#pragma unroll
            for (int j = 0; j < BK / 8; j++) {
                const float pa[4] = {s[j][0], s[j][2], s[j][1], s[j][3]};
                fa_tf32_split4<SAFE>(pa, ph[j], pl[j]);
            }
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                float pv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int j = 0; j < BK / 8; j++) {
                    const unsigned char *vj = vb + j * 8 * RB + n * 32;
                    unsigned vh0, vl0, vh1, vl1;
                    fa_tf32_split<SAFE>(*(const float *)vj, vh0, vl0);
                    fa_tf32_split<SAFE>(*(const float *)(vj + RB), vh1, vl1);
                    fa_mma1688_tf32(pv, pl[j], vh0, vh1);
                    fa_mma1688_tf32(pv, ph[j], vl0, vl1);
                    fa_mma1688_tf32(pv, ph[j], vh0, vh1);
                }
#pragma unroll
                for (int e = 0; e < 4; e++)
                    o[n][e] += pv[e];
            }
        } else if (__any_sync(0xffffffffu, any_p)) { // O summed in place
#pragma unroll
            for (int j = 0; j < BK / 8; j++) {
                const float pa[4] = {s[j][0], s[j][2], s[j][1], s[j][3]};
                unsigned ph[4], pl[4];
                fa_tf32_split4<SAFE>(pa, ph, pl);
                const unsigned char *vj = vb + j * 8 * RB;
#pragma unroll
                for (int n = 0; n < D / 8; n++) {
                    unsigned vh0, vl0, vh1, vl1;
                    fa_tf32_split<SAFE>(*(const float *)(vj + n * 32), vh0, vl0);
                    fa_tf32_split<SAFE>(*(const float *)(vj + RB + n * 32), vh1, vl1);
                    fa_mma1688_tf32(o[n], pl, vh0, vh1);
                    fa_mma1688_tf32(o[n], ph, vl0, vl1);
                    fa_mma1688_tf32(o[n], ph, vh0, vh1);
                }
            }
        }
    };

    for (int it = t0; it < ntiles; it++) {
        const int buf = BUFS == 1 ? 0 : it & 1;
        if (BUFS == 1) { // the tile's copies, after the previous tile's last barrier
            if (it > t0) {
                load_kv(it, 0);
                fa_cp_async_commit();
                fa_cp_async_wait<0>();
            }
        } else if (it + 1 < ntiles) {
            load_kv(it + 1, buf ^ 1);
            fa_cp_async_commit();
            fa_cp_async_wait<1>();
        } else {
            fa_cp_async_wait<0>();
        }
        // the barrier after the tile's copies, which also tells whether any of them is not finite
        if (__syncthreads_or(kv_needs_care(buf)) || q_bad)
            tile(it, buf, std::true_type{});
        else
            tile(it, buf, std::false_type{});
        __syncthreads();
    }

    float *Og = (float *)p.o.ptr + fa_at(p.o, b, 0, h);
    float *L = (float *)p.lse.ptr + fa_at(p.lse, b, 0, h);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const float inv = l[r] != 0.f ? 1.f / l[r] : 0.f;
        const int gr = row_lo + 8 * r;
        if (gr >= p.seq_q)
            continue;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            if (n * 8 + t2 < p.head_dim)
                *(float2 *)(Og + gr * p.o.stride_s + n * 8 + t2) =
                    make_float2(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
        if (p.has_lse && t == 0)
            L[gr * p.lse.stride_s] = l[r] != 0.f ? (m[r] + log2f(l[r])) * FA_LN2 : -INFINITY;
    }
}
