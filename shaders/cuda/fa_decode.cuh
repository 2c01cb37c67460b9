// SPDX-License-Identifier: MIT
// The split-key forward for decoding (flash-decoding): few query rows per KV head, many keys.
// Memory-bound, so CUDA cores, not tensor cores.
//
// fa_decode_split: one block per (key chunk, KV head x chunk of FA_DEC_ROWS packed rows,
// batch). A packed row is (query i, query head h of the KV head's group), heads fastest, so
// that every K and V row the block reads serves all of its group's heads (GQA packing). Each
// warp takes every FA_DEC_WARPS-th step of 32 keys of the chunk:
// - S: lane j scores key j against the block's rows (its K row read whole, 16 bytes a load,
//   with its slices of the step's V rows requested at the same time; Q from shared memory,
//   pre-scaled into the log2 domain);
// - online softmax per row: the warp's maximum by shuffles, P into shared memory;
// - O += P V: lane j holds head-dim elements [EPL j, EPL j + EPL) of every row, V rows read
//   whole by the warp.
// The warps' partial results are merged through shared memory; with one chunk the block writes
// O and LSE, else its chunk's normalised O (f32) and LSE to the workspace, which the last block
// of its group merges (fa_dec_merge_tail), or fa_decode_merge after it.
// Per-sequence key counts (seqlens_k) end each sequence's keys, and its causal mask, at its own
// length: a chunk past it sees no key and writes O = 0, LSE = -inf. A paged cache (block_table)
// maps key n of entry b to row n % page_size of page table[b][n / page_size], clamped into
// [0, num_pages).
//
// fa_decode_merge: one warp per output row: O = sum_s w_s O_s / sum_s w_s with
// w_s = exp(LSE_s - max LSE), LSE = max + log(sum_s w_s); a row no chunk saw gets O = 0 and
// LSE = -inf.
#pragma once

#include "fa_common.cuh"

// Raw storage of BYTES bytes of a row, loaded with 4-, 8- or 16-byte loads, so that a lane can
// have many rows in flight before it converts any.
template <int BYTES> struct fa_raw {
    uint4 v[BYTES / 16];
};
template <> struct fa_raw<4> {
    unsigned v;
};
template <> struct fa_raw<8> {
    uint2 v;
};

// BYTES at p (aligned to the smaller of BYTES and 16).
template <int BYTES> __device__ __forceinline__ void fa_ld_raw(const void *p, fa_raw<BYTES> &r)
{
    if constexpr (BYTES == 4) {
        r.v = __ldg(reinterpret_cast<const unsigned *>(p));
    } else if constexpr (BYTES == 8) {
        r.v = __ldg(reinterpret_cast<const uint2 *>(p));
    } else {
#pragma unroll
        for (int i = 0; i < BYTES / 16; i++)
            r.v[i] = __ldg(reinterpret_cast<const uint4 *>(p) + i);
    }
}

// The N elements of T in r as floats.
template <typename T, int N, int BYTES>
__device__ __forceinline__ void fa_raw_floats(const fa_raw<BYTES> &r, float *out)
{
    static_assert(N * (int)sizeof(T) == BYTES, "fa_raw_floats: N elements fill the raw bytes");
    const T *t = reinterpret_cast<const T *>(&r);
#pragma unroll
    for (int j = 0; j < N; j++)
        out[j] = fa_to_float<T>(t[j]);
}

__device__ __forceinline__ float fa_warp_max(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float fa_warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Marks a seqlens_k value or block-table entry out of range for the host's next synchronize.
__device__ __forceinline__ void fa_dec_index_error(const fa_cuda_params &p)
{
    if (p.index_error)
        *(volatile int *)p.index_error = 1;
}

// Batch entry b's keys: seqlens_k[b] where the call has lengths, clamped into [0, seq_k] (the
// runtime does not read them back first: a value out of range is marked, and no read leaves the
// cache), else seq_k.
__device__ __forceinline__ int fa_dec_keys(const fa_cuda_params &p, int b)
{
    if (!p.has_seqlens_k)
        return p.seq_k;
    const int n = __ldg((const int *)p.seqlens_k.ptr + (long long)b * p.seqlens_k.stride_b);
    if (n < 0 || n > p.seq_k)
        fa_dec_index_error(p);
    return min(max(n, 0), p.seq_k);
}

// The block-table entry of key n of batch entry b (a paged cache), as stored: requested steps
// ahead of its use, and checked there (fa_dec_page), so that no warp waits for it at the request.
__device__ __forceinline__ int fa_dec_entry(const fa_cuda_params &p, int b, int n)
{
    return __ldg((const int *)p.block_table.ptr + (long long)b * p.block_table.stride_b +
                 (long long)(n / p.page_size) * p.block_table.stride_s);
}

// The page of table entry e, clamped into [0, num_pages) so that no value reads outside K and V,
// one out of range marked.
__device__ __forceinline__ long long fa_dec_page(const fa_cuda_params &p, int e)
{
    if (e < 0 || e >= p.num_pages)
        fa_dec_index_error(p);
    return min(max(e, 0), p.num_pages - 1);
}

// Element d of output row (b, query i, head h) from chunk `split`'s weighted sum `acc` of V, its
// sum of weights `sum` and their maximum mx (log2 units): with one chunk O and the LSE, else the
// chunk's normalised O and LSE (f32) for fa_decode_merge. A chunk past the sequence's end (or
// its mask) saw no key (sum = 0): O = 0 and LSE = -inf, which the merge weighs 0.
template <typename T>
__device__ __forceinline__ void fa_dec_store(const fa_cuda_params &p, int split, int b, int i,
                                             int h, int d, float mx, float sum, float acc)
{
    const float out = sum != 0.f ? acc / sum : 0.f;
    const float lse = sum != 0.f ? (mx + log2f(sum)) * FA_LN2 : -INFINITY;
    if (p.splits == 1) {
        ((T *)p.o.ptr)[fa_at(p.o, b, i, h) + d] = fa_from_float<T>(out);
        if (d == 0 && p.has_lse)
            ((float *)p.lse.ptr)[fa_at(p.lse, b, i, h)] = lse;
    } else {
        const long long row = (((long long)split * p.batch + b) * p.heads_q + h) * p.seq_q + i;
        ((float *)p.part_o)[row * p.head_dim + d] = out;
        if (d == 0)
            ((float *)p.part_lse)[row] = lse;
    }
}

// The merge inside the split kernel (p.split_done set; splits > 1), in place of fa_decode_merge's
// launch, which took 7-12 us of a 20-140 us decoding call on the H200 (docs/PERF.md). Each block
// counts itself done for its group (blockIdx.y, blockIdx.z: the same packed rows, every chunk)
// once its chunk's O and LSE are out; the last block of a group merges the group's packed rows
// [r0, r1) as fa_decode_merge does and zeroes the count for the next call. A thread takes four
// columns of a row and asks for a batch of 16 chunks' LSEs and O at once, folding batches in as
// the online softmax does. (Most of the merging block's time is spent waiting for the 32 KB of
// partial O at B=1: docs/PERF.md.) The other chunks' results are read through L2 (ld.cg,
// cp.async.cg), never from a line an earlier call left in this SM's L1. Rows are read as float4
// (head_dim is a multiple of 8: the runtime's validation). stage: where given, 16 x blockDim.x
// float4 of shared memory the block is done with, through which the chunks' O come by cp.async (on
// the H200 1-4 us sooner than into registers by ld.cg, the CUDA-core kernel's way, which has no
// such room).
template <typename T>
__device__ void fa_dec_merge_tail(const fa_cuda_params &p, int b, int hk, int r0, int r1,
                                  float4 *stage = nullptr)
{
    // The count's add releases the block's writes (ordered before it by the barrier, as
    // CUTLASS's semaphore does) and acquires the other blocks' for the last one.
    __syncthreads();
    bool last = false;
    if (threadIdx.x == 0) {
        int *done = (int *)p.split_done + (long long)blockIdx.z * gridDim.y + blockIdx.y;
        int n;
        asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n"
                     : "=r"(n)
                     : "l"(done)
                     : "memory");
        last = n == p.splits - 1;
        if (last)
            *done = 0; // every chunk has counted: ready for the next call
    }
    if (!__syncthreads_or(last))
        return;
    constexpr int NB = 16; // chunks a batch (4 and 8 measured the same on the H200)
    const int S = p.splits, C4 = p.head_dim / 4;
    const long long rows = (long long)p.batch * p.heads_q * p.seq_q; // part rows per chunk
    for (int x = threadIdx.x; x < (r1 - r0) * C4; x += blockDim.x) {
        const int pr = r0 + x / C4, i = pr / p.group, h = hk * p.group + pr % p.group;
        const long long row = ((long long)b * p.heads_q + h) * p.seq_q + i;
        const float *lse_s = (const float *)p.part_lse + row;
        const float4 *o_s = (const float4 *)p.part_o + row * C4 + x % C4;
        // O = sum_s w_s O_s / sum_s w_s, w_s = exp(LSE_s - max): the maximum so far m, rescaled
        // batch by batch as the forward's online softmax
        float m = -INFINITY, l = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int s0 = 0; s0 < S; s0 += NB) {
            float ls[NB];
            float4 os[NB];
            if (stage) {
                float4 *mine = stage + threadIdx.x;
#pragma unroll
                for (int j = 0; j < NB; j++) {
                    const int s = min(s0 + j, S - 1);
                    ls[j] = __ldcg(lse_s + s * rows);
                    fa_cp_async16(fa_smem_addr(mine + j * blockDim.x), o_s + s * rows * C4, true);
                }
                fa_cp_async_commit();
                fa_cp_async_wait<0>(); // the thread reads back its own copies alone
#pragma unroll
                for (int j = 0; j < NB; j++)
                    os[j] = mine[j * blockDim.x];
            } else {
#pragma unroll
                for (int j = 0; j < NB; j++) {
                    const int s = min(s0 + j, S - 1);
                    ls[j] = __ldcg(lse_s + s * rows);
                    os[j] = __ldcg(o_s + s * rows * C4);
                }
            }
            float m_new = m;
#pragma unroll
            for (int j = 0; j < NB; j++)
                m_new = fmaxf(m_new, ls[j]);
            // m_new = -inf: no chunk so far saw a key (weights 0); a NaN LSE gives NaN weights
            const float m_use = m_new == -INFINITY ? 0.f : m_new;
            const float scale = fa_exp2((m - m_use) * FA_LOG2E);
            l *= scale;
            acc.x *= scale;
            acc.y *= scale;
            acc.z *= scale;
            acc.w *= scale;
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (s0 + j >= S) // a repeated read past the last chunk
                    break;
                const float w = fa_exp2((ls[j] - m_use) * FA_LOG2E);
                l += w;
                acc.x += w * os[j].x;
                acc.y += w * os[j].y;
                acc.z += w * os[j].z;
                acc.w += w * os[j].w;
            }
            m = m_new;
        }
        const float inv = l != 0.f ? 1.f / l : 0.f;
        T *o = (T *)p.o.ptr + fa_at(p.o, b, i, h) + x % C4 * 4;
        o[0] = fa_from_float<T>(acc.x * inv);
        o[1] = fa_from_float<T>(acc.y * inv);
        o[2] = fa_from_float<T>(acc.z * inv);
        o[3] = fa_from_float<T>(acc.w * inv);
        if (x % C4 == 0 && p.has_lse)
            ((float *)p.lse.ptr)[fa_at(p.lse, b, i, h)] = l != 0.f ? m + logf(l) : -INFINITY;
    }
}

// The split kernel's shared memory, declared once by fa_decode_split for both of its bodies.
template <int DMAX> struct fa_dec_smem {
    float q[FA_DEC_ROWS][DMAX];               // Q * scale * log2(e)
    float p[FA_DEC_WARPS][32][FA_DEC_ROWS];   // P of the warp's current 32 keys
    float o[FA_DEC_WARPS][FA_DEC_ROWS][DMAX]; // the warps' partial O
    long long vrow[FA_DEC_WARPS][32];         // paged: where the V row of each of those keys lies
    float m[FA_DEC_WARPS][FA_DEC_ROWS], l[FA_DEC_WARPS][FA_DEC_ROWS];
};

// EPL head-dim elements per lane: head dims up to 32 EPL (EPL = 2, 4 or 8). Each step of 32
// keys issues the lane's K row and its slices of up to VR V rows before using any of them, so
// that a warp has up to 16 KiB in flight. PAGED: K and V rows through the block table, each
// lane finding its own key's row (its table entry requested a step ahead) and the warp's V rows
// shared through sm.vrow; else the contiguous rows of batch entry b.
template <typename T, int EPL, bool PAGED>
__device__ __forceinline__ void fa_decode_split_keys(const fa_cuda_params &p,
                                                     fa_dec_smem<32 * EPL> &sm)
{
    constexpr int R = FA_DEC_ROWS, W = FA_DEC_WARPS, DMAX = 32 * EPL;
    static_assert(R == 4, "P is read as one float4 per key");
    constexpr int KB = 256; // K bytes per piece: 16 loads
    constexpr int KPIECES = (DMAX * (int)sizeof(T) + KB - 1) / KB;
    constexpr int KE = KB / (int)sizeof(T);     // K elements per piece
    constexpr int EU = 16 / (int)sizeof(T);     // elements per 16-byte load
    constexpr int VB = EPL * (int)sizeof(T);    // V bytes per lane and row
    constexpr int VR = VB <= 8 ? 32 : 256 / VB; // V rows in flight (64 registers)

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int split = blockIdx.x, b = blockIdx.z;
    const int rows = p.group * p.seq_q; // packed rows of one KV head
    const int row_chunks = (rows + R - 1) / R;
    const int hk = blockIdx.y / row_chunks, r0 = blockIdx.y % row_chunks * R;
    const int D = p.head_dim;

    for (int x = threadIdx.x; x < R * DMAX; x += W * 32) {
        const int r = x / DMAX, d = x % DMAX, pr = r0 + r;
        float q = 0.f;
        if (pr < rows && d < D) {
            const int i = pr / p.group, h = hk * p.group + pr % p.group;
            q = fa_to_float<T>(((const T *)p.q.ptr)[fa_at(p.q, b, i, h) + d]) * p.scale_log2;
        }
        sm.q[r][d] = q;
    }

    // This chunk's keys of the sequence; each row's last visible key (-1: a row past the end
    // sees none), the causal mask aligned on the sequence's own length.
    const int seq_k = fa_dec_keys(p, b);
    const int k0 = split * p.split_keys;
    int k1 = min(seq_k, k0 + p.split_keys);
    int last[R];
    int last_max = -1;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int pr = r0 + r;
        last[r] = pr >= rows ? -1 : p.causal ? pr / p.group + seq_k - p.seq_q : k1 - 1;
        last_max = max(last_max, last[r]);
    }
    k1 = min(k1, last_max + 1);
    __syncthreads();

    float m[R], l[R], o[R][EPL];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int e = 0; e < EPL; e++)
            o[r][e] = 0.f;
    }
    const int d0 = lane * EPL;
    const bool has_d = d0 < D;
    // paged: K and V index pages by their batch stride, so b is in the table, not the base
    const T *kb =
        (const T *)p.k.ptr + (PAGED ? (long long)hk * p.k.stride_h : fa_at(p.k, b, 0, hk));
    const T *vb =
        (const T *)p.v.ptr + (PAGED ? (long long)hk * p.v.stride_h : fa_at(p.v, b, 0, hk)) + d0;
    int entry = 0; // paged: the table entry of the lane's key of the warp's next step
    if (PAGED && k0 + warp * 32 + lane < k1)
        entry = fa_dec_entry(p, b, k0 + warp * 32 + lane);

    for (int n0 = k0 + warp * 32; n0 < k1; n0 += W * 32) {
        const int key = n0 + lane, nk = min(32, k1 - n0);
        const T *kr, *vr = vb;
        if constexpr (PAGED) {
            const long long page = fa_dec_page(p, entry), row = key % p.page_size;
            if (key + W * 32 < k1)
                entry = fa_dec_entry(p, b, key + W * 32);
            kr = kb + page * p.k.stride_b + row * p.k.stride_s;
            sm.vrow[warp][lane] = page * p.v.stride_b + row * p.v.stride_s;
            __syncwarp();
        } else {
            kr = kb + (long long)key * p.k.stride_s;
            vr = vb + (long long)n0 * p.v.stride_s;
        }
        // V row j of this step (j < nk)
        auto vrow = [&](int j) -> const T * {
            if constexpr (PAGED)
                return vb + sm.vrow[warp][j];
            else
                return vr + (long long)j * p.v.stride_s;
        };
        // Everything of the first K piece and V batch is requested before any is used.
        fa_raw<KB> kraw;
        fa_raw<VB> vraw[VR];
        if (key < k1)
            fa_ld_raw<KB>(kr, kraw);
#pragma unroll
        for (int j = 0; j < VR; j++)
            if (has_d && j < nk)
                fa_ld_raw<VB>(vrow(j), vraw[j]);

        float s[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            s[r] = 0.f;
#pragma unroll
        for (int c = 0; c < KPIECES; c++) {
            if (c > 0 && key < k1 && c * KE < D)
                fa_ld_raw<KB>(kr + c * KE, kraw);
            if (key < k1 && c * KE < D) {
#pragma unroll
                for (int u = 0; u < KB / 16; u++) {
                    const int d = c * KE + u * EU;
                    if (d < D) {
                        float kf[EU];
                        fa_raw_floats<T, EU, 16>(*reinterpret_cast<const fa_raw<16> *>(&kraw.v[u]),
                                                 kf);
#pragma unroll
                        for (int r = 0; r < R; r++)
#pragma unroll
                            for (int f = 0; f < EU; f += 4) {
                                const float4 qv =
                                    *reinterpret_cast<const float4 *>(&sm.q[r][d + f]);
                                s[r] += qv.x * kf[f] + qv.y * kf[f + 1] + qv.z * kf[f + 2] +
                                        qv.w * kf[f + 3];
                            }
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float x = key < k1 && key <= last[r] ? s[r] : -INFINITY;
            const float m_new = fmaxf(m[r], fa_warp_max(x));
            // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled.
            const float alpha = m_new == -INFINITY ? 1.f : fa_exp2(m[r] - m_new);
            // a NaN score is NaN here even before any key was seen (fmaxf skipped it)
            const float pv = fa_exp2(x - (m_new == -INFINITY ? 0.f : m_new));
            l[r] = l[r] * alpha + pv;
            m[r] = m_new;
#pragma unroll
            for (int e = 0; e < EPL; e++)
                o[r][e] *= alpha;
            sm.p[warp][lane][r] = pv;
        }
        __syncwarp();
        if (has_d) {
#pragma unroll
            for (int j0 = 0; j0 < 32; j0 += VR) {
                if (j0 > 0)
#pragma unroll
                    for (int j = 0; j < VR; j++)
                        if (j0 + j < nk)
                            fa_ld_raw<VB>(vrow(j0 + j), vraw[j]);
#pragma unroll
                for (int j = 0; j < VR; j++) {
                    if (j0 + j < nk) {
                        float vf[EPL];
                        fa_raw_floats<T, EPL, VB>(vraw[j], vf);
                        const float4 pj = *reinterpret_cast<const float4 *>(&sm.p[warp][j0 + j][0]);
                        const float pr[R] = {pj.x, pj.y, pj.z, pj.w};
#pragma unroll
                        for (int r = 0; r < R; r++)
#pragma unroll
                            for (int e = 0; e < EPL; e++)
                                o[r][e] += pr[r] * vf[e];
                    }
                }
            }
        }
        __syncwarp(); // P (and the V rows' places) read before the next step rewrites them
    }

    // Merge the warps.
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float lr = fa_warp_sum(l[r]);
        if (lane == 0) {
            sm.m[warp][r] = m[r];
            sm.l[warp][r] = lr;
        }
        if (has_d)
#pragma unroll
            for (int e = 0; e < EPL; e++)
                sm.o[warp][r][d0 + e] = o[r][e];
    }
    __syncthreads();
    for (int x = threadIdx.x; x < R * DMAX; x += W * 32) {
        const int r = x / DMAX, d = x % DMAX, pr = r0 + r;
        if (pr >= rows || d >= D)
            continue;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; w++)
            mx = fmaxf(mx, sm.m[w][r]);
        // mx = -inf: no warp saw a key (weights 0) or a NaN score (weights NaN)
        const float m_use = mx == -INFINITY ? 0.f : mx;
        float sum = 0.f, acc = 0.f;
#pragma unroll
        for (int w = 0; w < W; w++) {
            const float f = fa_exp2(sm.m[w][r] - m_use);
            sum += f * sm.l[w][r];
            acc += f * sm.o[w][r][d];
        }
        fa_dec_store<T>(p, split, b, pr / p.group, hk * p.group + pr % p.group, d, mx, sum, acc);
    }
    if (p.split_done)
        fa_dec_merge_tail<T>(p, b, hk, r0, min(r0 + R, rows));
}

// The split kernel: the paged body only where the call has a block table, so that the
// contiguous one keeps its plain row arithmetic.
template <typename T, int EPL> __device__ void fa_decode_split(const fa_cuda_params &p)
{
    __shared__ __align__(16) fa_dec_smem<32 * EPL> sm;
    if (p.page_size > 0)
        fa_decode_split_keys<T, EPL, true>(p, sm);
    else
        fa_decode_split_keys<T, EPL, false>(p, sm);
}

// One warp per (batch, query head, query) row; FA_DEC_WARPS rows per block.
template <typename T> __device__ void fa_decode_merge(const fa_cuda_params &p)
{
    constexpr int W = FA_DEC_WARPS;
    __shared__ float w_s[W][FA_DEC_MAX_SPLITS]; // each chunk's weight exp(LSE_s - max)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long rows = (long long)p.batch * p.heads_q * p.seq_q;
    const long long row = (long long)blockIdx.x * W + warp;
    if (row >= rows)
        return;
    const int i = (int)(row % p.seq_q), h = (int)(row / p.seq_q % p.heads_q);
    const int b = (int)(row / p.seq_q / p.heads_q);
    const float *lse = (const float *)p.part_lse;
    const float *part = (const float *)p.part_o;
    float mx = -INFINITY;
    for (int s = lane; s < p.splits; s += 32)
        mx = fmaxf(mx, lse[s * rows + row]);
    mx = fa_warp_max(mx);
    float sum = 0.f;
    for (int s = lane; s < p.splits; s += 32) {
        const float w = fa_exp2((lse[s * rows + row] - (mx == -INFINITY ? 0.f : mx)) * FA_LOG2E);
        w_s[warp][s] = w;
        sum += w;
    }
    sum = fa_warp_sum(sum);
    __syncwarp();
    for (int d = lane; d < p.head_dim; d += 32) {
        float acc = 0.f;
        for (int s = 0; s < p.splits; s++)
            acc += w_s[warp][s] * part[(s * rows + row) * p.head_dim + d];
        ((T *)p.o.ptr)[fa_at(p.o, b, i, h) + d] = fa_from_float<T>(sum != 0.f ? acc / sum : 0.f);
    }
    if (lane == 0 && p.has_lse)
        ((float *)p.lse.ptr)[fa_at(p.lse, b, i, h)] = sum != 0.f ? mx + logf(sum) : -INFINITY;
}
