// SPDX-License-Identifier: MIT
// The tensor-core forward, FlashAttention-2 style, for f16 and bf16 with head dim 32, 64, 96, 128
// or 256 (other head dims run padded up to the next one, the padding loaded as zeros).
//
// One block owns BQ = 128 query rows of one (batch, head): 4 warps of 32 rows (MT = 2, the
// build's choice; 8 warps of 16 rows with Q fragments in registers is MT = 1). At head dim 256,
// BQ = 64 or 128 rows in warps of 16 (MT = 1, Q fragments re-read from shared memory): O alone
// is 128 registers a thread there. K and V stream through shared memory in tiles of
// FA_FWD_MMA_BK(D) keys (32 to 128 by head dim; fa_cuda_abi.h, shared with the host), two
// buffers deep: cp.async fetches tile n+1 while tile n is computed (Q 32 KiB + K/V 64 KiB at
// head dim 128, so two blocks fit an SM).
// Shared tiles are XOR-swizzled by 16-byte chunk (chunk ^ (row & 7); at head dims 32 and 96,
// whose rows are 4 (mod 8) chunks, chunk ^ ((row >> 1) & 3), see fa_swz) so that ldmatrix reads
// eight rows without bank conflicts. Per tile: S = Q K^T (mma.sync m16n8k16, f32 accumulate)
// one k16 step at a time (Q fragments re-read per step, K fragments by x4 ldmatrix over two
// n-tiles), scale and (only on tiles that cross the causal diagonal or the end of the keys)
// mask, online softmax in registers with exp2, then P, rounded to the input dtype, packed into
// the A operand of O += P V (V through ldmatrix.trans) while S dies. O is divided by the row sum
// at the end, staged through the warp's own rows of the Q tile, and written with 16-byte
// stores. Causal blocks are launched heaviest first and stop at their last visible key; with a
// window's left bound blocks start at the tile of their first visible key, and the tiles its
// edge crosses are masked too. A softcap replaces S by its capped scores in log2 units
// (fa_softcap_tanh) before the mask, and ALiBi by its log2-unit scores plus the term of each
// element's distance (fa_alibi), each behind a uniform branch; an additive bias (fa_bias), in the
// BIAS instantiations only (at 255 registers the others spilled with its code), is the initial
// value of S's accumulators, in raw units (not with a softcap).
#pragma once

#include "fa_mask.cuh"
#include "fa_mma.cuh"

#include <type_traits>

// MT = 16-row m-tiles per warp. MT = 1: BQ / 16 warps, Q fragments held in registers up to head
// dim 128 (at 256 they would take 64 registers beside O's 128, so re-read there). MT = 2: BQ / 32
// warps of 32 rows, Q fragments re-read from shared memory, every K/V fragment feeding two mma
// (half the shared-memory traffic per FLOP). BQ: query rows per block.
template <typename T, int D, int MT, int BQ, bool BIAS>
__device__ __forceinline__ void fa_fwd_mma(const fa_cuda_params &p)
{
    constexpr int BK = FA_FWD_MMA_BK(D), NT = BQ / (16 * MT) * 32;
    constexpr int CH = D / 8;
    constexpr int WR = 16 * MT; // rows per warp
    constexpr bool QREG = MT == 1 && D <= 128;
    constexpr unsigned TILE_BYTES = BK * D * 2;
    extern __shared__ __align__(1024) unsigned char fa_fwd_smem[];
    const unsigned sQ = fa_smem_addr(fa_fwd_smem);
    const unsigned sK = sQ + BQ * D * 2;
    const unsigned sV = sK + 2 * TILE_BYTES;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int qt = p.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * BQ, h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
    const T *Qg = (const T *)p.q.ptr + fa_at(p.q, b, 0, h);
    const T *Kg = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const T *Vg = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);

    const int kend = fa_key_end(p, q0, BQ);
    const int ntiles = (kend + BK - 1) / BK;
    const int t0 = fa_key_begin(p, q0) / BK; // the first tile any row of the block sees
    // Tiles from `nlead` to before `nfull` hold no key past the end of the keys nor, for any row
    // of this warp, past the right bound (the causal diagonal) or before the left bound: only
    // the others are masked.
    int nfull = p.seq_k / BK, nlead = 0;
    if (p.causal) {
        const long long vis = (long long)q0 + warp * WR + p.causal_offset + 1; // keys row 0 sees
        nfull = (int)min((long long)nfull, max(0LL, vis) / BK);
    }
    if (p.has_left) { // the first key the warp's last row sees
        const long long first = (long long)q0 + warp * WR + WR - 1 + p.left_offset;
        nlead = (int)((max(0LL, first) + BK - 1) / BK);
    }

    // Tile loads: thread t copies 16-byte chunk t % CH of rows t / CH + i RS, RS = NT / CH, when
    // that is a whole multiple of 8 (every row it copies then has the same swizzle); otherwise
    // (head dims 96, 256) chunks t + i NT of the tile in row-major order, each swizzled alone.
    constexpr bool ROWS8 = NT % CH == 0 && (NT / CH) % 8 == 0;
    constexpr int RS = ROWS8 ? NT / CH : 8;
    static_assert((BQ * CH) % NT == 0 && (BK * CH) % NT == 0, "whole chunks per thread");
    if constexpr (ROWS8) {
        const int lrow = tid / CH, lch = tid % CH;
        const unsigned l_off = fa_swz<CH>(lrow, lch);
#pragma unroll
        for (int i = 0; i < BQ / RS; i++) {
            const int gr = q0 + lrow + i * RS;
            const bool ok = lch * 8 < p.head_dim && gr < p.seq_q;
            fa_cp_async16(sQ + l_off + i * RS * CH * 16, ok ? Qg + gr * p.q.stride_s + lch * 8 : Qg,
                          ok);
        }
    } else {
#pragma unroll
        for (int i = 0; i < BQ * CH / NT; i++) {
            const int c = tid + i * NT, lrow = c / CH, lch = c % CH, gr = q0 + lrow;
            const bool ok = lch * 8 < p.head_dim && gr < p.seq_q;
            fa_cp_async16(sQ + fa_swz<CH>(lrow, lch), ok ? Qg + gr * p.q.stride_s + lch * 8 : Qg,
                          ok);
        }
    }
    auto load_kv = [&](int tile, int buf) {
        if constexpr (ROWS8) {
            const int lrow = tid / CH, lch = tid % CH;
            const unsigned off = buf * TILE_BYTES + fa_swz<CH>(lrow, lch);
#pragma unroll
            for (int i = 0; i < BK / RS; i++) {
                const int gr = tile * BK + lrow + i * RS;
                const bool ok = lch * 8 < p.head_dim && gr < p.seq_k;
                fa_cp_async16(sK + off + i * RS * CH * 16,
                              ok ? Kg + gr * p.k.stride_s + lch * 8 : Kg, ok);
                fa_cp_async16(sV + off + i * RS * CH * 16,
                              ok ? Vg + gr * p.v.stride_s + lch * 8 : Vg, ok);
            }
        } else {
#pragma unroll
            for (int i = 0; i < BK * CH / NT; i++) {
                const int c = tid + i * NT, lrow = c / CH, lch = c % CH, gr = tile * BK + lrow;
                const unsigned off = buf * TILE_BYTES + fa_swz<CH>(lrow, lch);
                const bool ok = lch * 8 < p.head_dim && gr < p.seq_k;
                fa_cp_async16(sK + off, ok ? Kg + gr * p.k.stride_s + lch * 8 : Kg, ok);
                fa_cp_async16(sV + off, ok ? Vg + gr * p.v.stride_s + lch * 8 : Vg, ok);
            }
        }
    };
    if (t0 < ntiles)
        load_kv(t0, t0 & 1);
    fa_cp_async_commit();
    fa_cp_async_wait<0>();
    __syncthreads();

    // Per-lane parts of the ldmatrix addresses. Lane l addresses row (l & 7) + 8 ((l >> 3) & 1)
    // and chunk 2 kk + (l >> 4) of a 16 x 16 block of Q (A), K (B of two n-tiles) or V (B
    // through .trans); every such row has row & 7 == l & 7, so the swizzled chunk is the lane's
    // chunk XOR 2 kk: one LOP3 per k-step on a row base that stays in a register.
    const int r7 = lane & 7;
    const unsigned lane_row = (unsigned)((r7 + ((lane >> 3) & 1) * 8) * CH * 16);
    const unsigned lane_x = (unsigned)(((lane >> 4) ^ (CH % 8 == 0 ? r7 : (r7 >> 1) & 3)) << 4);
    // XORed into the address itself: the tiles start 1 KiB-aligned, so 2 kk only meets
    // lane_x's bits. The row base, the lane's chunk and the buffer then fit in one register.
    const unsigned lane_off = lane_row + lane_x;
    const unsigned q_lane = sQ + warp * WR * CH * 16 + lane_off;
    unsigned qf[QREG ? D / 16 : 1][4];
    if (QREG) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            fa_ldmatrix_x4(fa_kstep<CH>(q_lane, kk), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
    }

    float o[MT][D / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    // m: the max of each row in log2 units, allowed to lag the true running max by up to
    // FA_FWD_RESCALE_SLACK (see there); l: this thread's part of the row sum, relative to m.
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
    const int row_lo = q0 + warp * WR + (lane >> 2); // rows row_lo + 16 mt + 8 r
    const float slope = fa_alibi_slope(p, b, h);
    const int t2 = (lane & 3) * 2;

    for (int it = t0; it < ntiles; it++) {
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

        // S = Q K^T, one k16 step at a time: the step's Q fragments (MT x4 ldmatrix) are read
        // once and meet every K fragment pair of the step (one x4 ldmatrix per two n-tiles).
        float s[MT][BK / 8][4];
        const int k0 = it * BK;
        const bool cap = p.softcap != 0.f;
        // A bias: S starts as the bias in raw units, bias log2(e) / scale_log2 (-inf stays -inf,
        // or +inf for a negative scale), scaled with the product below: its loads land in S's own
        // registers (loaded after the product, they took 64 more and spilled). Never with a
        // softcap, which comes before the bias: the planner sends those calls to other kernels.
        if (BIAS && p.bias_dtype) {
            const float to_raw = 1.f / p.scale; // log2(e) / scale_log2
            const int keys = p.seq_k - k0 - t2; // 8 n + c < keys: a key (else masked below)
            const int tid_o = fa_tid_opaque();  // (not hoisted: see there)
            const int brow = q0 + (tid_o >> 5) * WR + ((tid_o & 31) >> 2); // row_lo
            fa_bias_tiles(p, [&](auto dt) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const void *row = fa_bias_ptr(p, b, brow + 16 * mt + 8 * r, h, k0 + t2);
#pragma unroll
                        for (int n = 0; n < BK / 8; n++)
#pragma unroll
                            for (int c = 0; c < 2; c++)
                                s[mt][n][2 * r + c] =
                                    8 * n + c < keys
                                        ? fa_bias_at<decltype(dt)::value>(p, row, 8 * n + c, to_raw)
                                        : 0.f;
                    }
            });
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
                    s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
        }
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (QREG) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        a[mt][i] = qf[kk % (QREG ? D / 16 : 1)][i];
                } else {
                    fa_ldmatrix_x4(fa_kstep<CH>(q_lane, kk) + mt * 16 * CH * 16, a[mt][0], a[mt][1],
                                   a[mt][2], a[mt][3]);
                }
            }
            const unsigned kaddr = fa_kstep<CH>(kb + lane_off, kk);
#pragma unroll
            for (int j = 0; j < BK / 16; j++) {
                // matrices: keys 0-7 | 8-15 of the pair (n-tiles 2 j, 2 j + 1) x chunk 0 | 1
                unsigned b00, b10, b01, b11;
                fa_ldmatrix_x4(kaddr + j * 16 * CH * 16, b00, b10, b01, b11);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fa_mma16816<T>(s[mt][2 * j], a[mt], b00, b01);
                    fa_mma16816<T>(s[mt][2 * j + 1], a[mt], b10, b11);
                }
            }
        }

        const bool mask = it >= nfull || it < nlead;
        // Scores in log2 units: exp2(s * scale_log2 - m) is one FFMA and one MUFU per element.
        // The running max is taken of s * scale_log2, via the max (or, for a negative scale,
        // the min) of the raw scores; masked scores become -inf once scaled. A softcap, ALiBi or
        // a bias makes S the (capped, biased) scores in log2 units, which then take c = 1.
        const float c = cap || p.has_alibi || (BIAS && p.bias_dtype) ? 1.f : p.scale_log2;
        const float masked = c > 0.f ? -INFINITY : INFINITY;
        if (cap) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[mt][n][e] = p.softcap_log2 * fa_softcap_tanh(s[mt][n][e], p.softcap_k);
        }
        // ALiBi (slope 0 without it; a bias is in S already): element (mt, n, 2 r + c) is row
        // row_lo + 16 mt + 8 r's score for key k0 + t2 + 8 n + c
        if (p.has_alibi || (BIAS && p.bias_dtype)) {
            const float sc = cap ? 1.f : p.scale_log2;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    // the row's distance from the thread's first key k0 + t2
                    const float d =
                        (float)(row_lo + 16 * mt + 8 * r + (p.seq_k - p.seq_q) - k0 - t2);
#pragma unroll
                    for (int n = 0; n < BK / 8; n++)
#pragma unroll
                        for (int c = 0; c < 2; c++)
                            s[mt][n][2 * r + c] =
                                fa_alibi(s[mt][n][2 * r + c] * sc, slope, d - (float)(8 * n + c));
                }
        }
        if (mask) { // per row: the visible keys [beg, end) relative to the thread's key k0 + t2
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = row_lo + 16 * mt + 8 * r, kt = k0 + t2;
                    const int end =
                        (p.causal ? min(p.seq_k, row + p.causal_offset + 1) : p.seq_k) - kt;
                    const int beg = p.has_left ? row + p.left_offset - kt : 0;
#pragma unroll
                    for (int n = 0; n < BK / 8; n++)
#pragma unroll
                        for (int c = 0; c < 2; c++)
                            if (n * 8 + c >= end || n * 8 + c < beg)
                                s[mt][n][2 * r + c] = masked;
                }
        }

        float tm[MT][2]; // the tile's row maxima, scaled
        bool grow = false;
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
                tm[mt][r] = mx * c;
                grow |= tm[mt][r] > m[mt][r] + FA_FWD_RESCALE_SLACK;
            }
        // Rescale O and l only when some row of the warp needs a new max (warp-uniform branch);
        // otherwise every alpha would be exactly 1 (or the max may lag, see the slack).
        if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const float m_new = fmaxf(m[mt][r], tm[mt][r]);
                    const float alpha = fa_exp2(m[mt][r] - (m_new == -INFINITY ? 0.f : m_new));
                    m[mt][r] = m_new;
                    l[mt][r] *= alpha;
#pragma unroll
                    for (int n = 0; n < D / 8; n++) {
                        o[mt][n][2 * r] *= alpha;
                        o[mt][n][2 * r + 1] *= alpha;
                    }
                }
        }

        float m_use[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                m_use[mt][r] = m[mt][r] == -INFINITY ? 0.f : m[mt][r];
        // bf16 keeps 8 bits of P. On the masked tiles, which hold every key of the rows that see
        // only a few (the first rows under a causal mask), one rounding of P would show in O and,
        // through Delta = rowsum(dO O), be amplified in the backward's dQ; there P also goes in as
        // the remainder lo = P - bf16(P), a second product after the first in each 16-key slice.
        // Elsewhere the roundings of 64 or more terms average out, as in FlashAttention-2. f16
        // (11 bits) is unchanged.
        if (std::is_same<T, __nv_bfloat16>::value && mask) {
            // skipped where no row of the warp sees a key of the tile
            const bool sees = k0 < p.seq_k &&
                              (!p.causal || k0 <= row_lo + 16 * (MT - 1) + 8 + p.causal_offset) &&
                              (!p.has_left || k0 + BK - 1 >= row_lo + p.left_offset);
            float sum[MT][2] = {};
            if (__any_sync(0xffffffffu, sees)) {
                // The whole tile's P, rounded (hi) and remainder (lo): two registers for two
                // scores, so S dies as they are made and the PV product holds O, hi, lo (BK
                // registers per m-tile) and the B fragments, as in the unmasked path.
                unsigned ph[MT][BK / 16][4], pl[MT][BK / 16][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int n = 0; n < BK / 8; n++)
#pragma unroll
                        for (int r = 0; r < 2; r++) {
                            const float p0 = fa_exp2(__fmul_rn(s[mt][n][2 * r], c) - m_use[mt][r]);
                            const float p1 =
                                fa_exp2(__fmul_rn(s[mt][n][2 * r + 1], c) - m_use[mt][r]);
                            sum[mt][r] += p0 + p1;
                            const unsigned hi = fa_pack2<T>(p0, p1); // p0 in the low half
                            ph[mt][n / 2][(n & 1) * 2 + r] = hi;
                            pl[mt][n / 2][(n & 1) * 2 + r] =
                                fa_pack2<T>(p0 - __uint_as_float(hi << 16),
                                            p1 - __uint_as_float(hi & 0xffff0000u));
                        }
                // The same vote again, always true here: like the unmasked path's any_p branch it
                // keeps ptxas from starting the V loads and the mma among the exponentials, which
                // spilled at head dims 64-128 (sm_80-89) and 128 (sm_90). Not at head dim 32,
                // where it would raise the registers from 160 to 194-201 (two blocks an SM, not 3).
                if (D == 32 || __any_sync(0xffffffffu, sees)) {
#pragma unroll
                    for (int k2 = 0; k2 < BK / 16; k2++) {
                        const unsigned vaddr = vb + lane_off + k2 * 16 * CH * 16;
#pragma unroll
                        for (int dp = 0; dp < D / 16; dp++) {
                            unsigned b0, b1, b2, b3;
                            fa_ldmatrix_x4_trans(fa_kstep<CH>(vaddr, dp), b0, b1, b2, b3);
#pragma unroll
                            for (int mt = 0; mt < MT; mt++) {
                                fa_mma16816<T>(o[mt][2 * dp], ph[mt][k2], b0, b1);
                                fa_mma16816<T>(o[mt][2 * dp + 1], ph[mt][k2], b2, b3);
                                fa_mma16816<T>(o[mt][2 * dp], pl[mt][k2], b0, b1);
                                fa_mma16816<T>(o[mt][2 * dp + 1], pl[mt][k2], b2, b3);
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    l[mt][r] += sum[mt][r];
        } else {
            // P = exp2(S - m), summed in f32 and rounded to T into the A fragments of O += P V;
            // S dies here, so the PV product holds O, P (BK / 2 registers per m-tile) and the B
            // fragments.
            unsigned pf[MT][BK / 16][4];
            float sum[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    sum[mt][r] = 0.f;
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const float p0 = fa_exp2(__fmul_rn(s[mt][n][2 * r], c) - m_use[mt][r]);
                        const float p1 = fa_exp2(__fmul_rn(s[mt][n][2 * r + 1], c) - m_use[mt][r]);
                        sum[mt][r] += p0 + p1;
                        pf[mt][n / 2][(n & 1) * 2 + r] = fa_pack2<T>(p0, p1);
                    }
            bool any_p = false;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    l[mt][r] += sum[mt][r];
                    any_p |= sum[mt][r] != 0.f;
                }

            // O += P V, skipped where P is zero for every row of the warp (a causal tile past all
            // its rows' diagonal). The branch also keeps ptxas from starting the V loads and the
            // mma among the exponentials above, which would need more than 255 registers.
            if (__any_sync(0xffffffffu, any_p)) {
#pragma unroll
                for (int k2 = 0; k2 < BK / 16; k2++) {
                    const unsigned vaddr = vb + lane_off + k2 * 16 * CH * 16;
#pragma unroll
                    for (int dp = 0; dp < D / 16; dp++) {
                        unsigned b0, b1, b2, b3;
                        fa_ldmatrix_x4_trans(fa_kstep<CH>(vaddr, dp), b0, b1, b2, b3);
#pragma unroll
                        for (int mt = 0; mt < MT; mt++) {
                            fa_mma16816<T>(o[mt][2 * dp], pf[mt][k2], b0, b1);
                            fa_mma16816<T>(o[mt][2 * dp + 1], pf[mt][k2], b2, b3);
                        }
                    }
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
            inv[r] = l[mt][r] != 0.f ? 1.f / l[mt][r] : 0.f;
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
                        l[mt][r] != 0.f ? (m[mt][r] + log2f(l[mt][r])) * FA_LN2 : -INFINITY;
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
