// SPDX-License-Identifier: MIT
#version 450
// Decoding forward (flash-decoding): few query rows against a long cache. A workgroup takes RW
// packed query rows of one KV head (the query heads that share it x the query positions, heads
// slowest: GQA packing, so each K and V row it reads serves all of them) of one batch entry, over
// one chunk of the keys (gl_WorkGroupID.x; the host chose the chunks and RW:
// backends/vulkan/vk_decode_plan.c). With one chunk it writes O and the LSE; with several, each
// writes its normalised O (f32) and LSE to the workspace, and either the last workgroup of the
// group to finish combines them (MERGE_HERE) or attn_merge.comp does, in a dispatch of its own.
//
// In the scalar form each subgroup walks its own steps of SG keys (the chunk's keys n, n + NT,
// ... from its first), with no workgroup barrier until the end (FA_DEC_MATRIX's steps run their
// products on cooperative matrices instead):
// - lane j scores key j of the step: its K row comes straight from global memory in pieces of
//   256 bytes, the first requested together with the lane's slices of the step's V rows, so that
//   a subgroup has up to 16 KiB in flight; Q (f32) from shared memory;
// - online softmax per row: the subgroup's maxima by subgroupMax, P into the subgroup's part of
//   shared memory;
// - O += P V: lane j holds head-dim quads j, j + SG, ... of every row.
// At the end the subgroups' (maximum, sum, O) are combined through shared memory.
// A key past the chunk's end (or a sequence's length) is read clamped to the last key and never
// enters P V, so no row sees a value it must not see.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

// FA_DEC_THREADS, FA_DEC_PU, FA_DEC_VR (experiments, through FA_VULKAN_SPV_DIR; the built modules
// take the defaults): invocations per workgroup (the host plans for FA_VK_DECODE_THREADS = 128 and
// dispatches the same grid), K units per piece, and at most this many V rows in flight.
#ifndef FA_DEC_THREADS
#define FA_DEC_THREADS 128
#endif
#ifndef FA_DEC_PU
#define FA_DEC_PU 16
#endif
layout(local_size_x = FA_DEC_THREADS) in; // FA_VK_DECODE_THREADS
layout(constant_id = FA_SPEC_DEC_RW) const uint RW = 4; // packed rows per workgroup: 4 or 8
// FA_DEC_FIXED_SG: the subgroup size as a compile-time constant, so that every loop that indexes
// a register array has a compile-time trip count and spirv-opt unrolls it (the build's
// attn_decode_sg32 modules): NVIDIA's driver keeps arrays it cannot resolve in local memory.
// There the loops run to compile-time bounds (RWM rows, QPLM quads) and skip what the
// specialization constants leave out; in the generic module the bounds are those constants.
#ifdef FA_DEC_FIXED_SG
const uint SG = FA_DEC_FIXED_SG;
#else
layout(constant_id = FA_SPEC_DEC_SG) const uint SG = 32; // the subgroup size (the host requires it)
#endif

// The chunks are merged by the group's last workgroup (a count per (row group, batch entry) in
// the workspace, which that workgroup resets); else by attn_merge.comp.
layout(constant_id = FA_SPEC_DEC_MERGE) const bool MERGE_HERE = false;
// The views' alignment, where the host vouches for it: without it each K and V load has an
// element-wise twin in the pipeline, which nearly tripled llvmpipe's compile time (19 s against 7
// for f16 D=128).
layout(constant_id = FA_SPEC_DEC_ALIGNED) const bool ALIGNED = false;

const uint NT = FA_DEC_THREADS, NSG = NT / SG;
// LD_UNIT: the G elements at i_ (i_ % G == 0) as 16 bytes, in one load when v8_ (every offset
// and stride of the view a multiple of 8), else in pieces; LD_UNIT_ALIGNED: one load, for
// views whose offsets and strides are multiples of G.
#ifdef DTYPE_F32
const uint G = 4u;      // elements per 16-byte unit
const uint RAW4_BYTES = 16u;
#define TENSOR_U TENSOR4
#define LD_UNIT(name_, i_, v8_, v4_) floatBitsToUint(LD_RAW4(name_, i_, v4_))
#define LD_UNIT_ALIGNED(name_, i_) floatBitsToUint(name_##_v[(i_) >> 2])
vec4 unit_quad(uvec4 x, uint k) { return uintBitsToFloat(x); }
#else
const uint G = 8u;
const uint RAW4_BYTES = 8u;
#define TENSOR_U TENSOR8
#define LD_UNIT(name_, i_, v8_, v4_) LD_RAW8(name_, i_, v8_, v4_)
#define LD_UNIT_ALIGNED(name_, i_) name_##_q[(i_) >> 3]
vec4 unit_quad(uvec4 x, uint k) { return raw4_to_f32(k == 0u ? x.xy : x.zw); }
#endif
const uint QPU = G / 4u;                 // quads per unit
const uint DU = D / G, DQ = D / 4u;      // units, quads per row
const uint PU = FA_DEC_PU;               // units per K piece (16: 256 bytes)
const uint KP = (DU + PU - 1u) / PU;     // K pieces per row
const uint QPL = (DQ + SG - 1u) / SG;    // quads per lane in P V
#ifdef FA_DEC_FIXED_SG
const uint RWM = 8u;                     // bounds of the loops over rows and quads
const uint QPLM = (64u + SG - 1u) / SG;  // (head dims up to 256)
const uint VR = SG < 16u ? SG : 16u;     // V rows in flight
#else
const uint RWM = RW, QPLM = QPL;
#ifdef FA_DEC_VR
const uint VR0 =
    256u / (QPL * RAW4_BYTES) < uint(FA_DEC_VR) ? 256u / (QPL * RAW4_BYTES) : uint(FA_DEC_VR);
#else
const uint VR0 = 256u / (QPL * RAW4_BYTES);
#endif
const uint VR = VR0 < SG ? VR0 : SG; // V rows in flight (256 bytes a lane)
#endif
const uint R4 = RW / 4u, R4M = RWM / 4u;

TENSOR_U(0, q_buf)
TENSOR_U(1, k_buf)
#ifdef FA_DEC_MATRIX
TENSOR_U(2, v_buf)
#else
TENSOR4(2, v_buf)
#endif
TENSOR4(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };
FA_SEQLENS_BINDING
// The decoding workspace (vk_decode_plan.h): DONE_SLOTS counts, then the chunks' O, then their
// LSEs. coherent: the merging workgroup reads what other workgroups wrote during this dispatch.
const uint DONE_SLOTS = 4096u; // FA_VK_DECODE_DONE_SLOTS
layout(set = 0, binding = 6, std430) coherent buffer done_block { uint done[]; };
layout(set = 0, binding = 6, std430) coherent buffer ws_block { float ws[]; };
layout(set = 0, binding = 6, std430) coherent buffer ws_vblock { vec4 ws_v[]; };
layout(set = 0, binding = 7, std430) readonly buffer bt_block { int bt_buf[]; };
#ifdef FA_DEC_READ_ONLY
layout(set = 0, binding = 2, std430) readonly buffer v_ro_block { uvec4 v_ro_q[]; };
#endif

// split_keys: keys per chunk. A paged cache where page_size > 0: K and V hold num_pages pages
// (k_sb, v_sb: the page strides; k_ss, v_ss: the row strides within a page), entry b's page p at
// bt_buf[bt_off + b * bt_sb + p] (the host checked the entries its keys cover; a kernel clamps
// them anyway, so that no value reads outside K and V). 128 bytes in all.
FA_FWD_PARAMS_WITH(uint split_keys; uint bt_off; uint bt_sb; uint page_size; uint num_pages;)

#ifdef FA_DEC_MATRIX
// FA_DEC_MATRIX (the catalogue's attn_decode_cm modules, backends/vulkan/matrix_shaders.cmake:
// f16, with the head dim, the subgroup size, the device's matrix shape FA_DEC_CM_M x _N x _K
// and its probed accumulator layout, FA_CM_LAYOUT_* and FA_CM_A_FROM_C, fixed at compile time,
// as the forward's are): the products on cooperative matrices. The workgroup's query rows,
// zero-padded to CM_M, are the A matrices of S = Q K^T; each subgroup walks its own steps of SK
// keys, copying the step's K and V rows into tiles of its own with neighbouring lanes on
// neighbouring 16-byte units (the next step's copy in flight while this one multiplies: no
// workgroup barrier in the loop), and P, in registers, is the A matrix of O += P V. At the end
// each subgroup's O goes through its tiles to be combined.
#if !defined(FA_CM_LAYOUT_E) || !defined(FA_CM_A_FROM_C) || !defined(FA_DEC_FIXED_SG)
#error "FA_DEC_MATRIX needs the probed layout (FA_CM_LAYOUT_*, FA_CM_A_FROM_C) and FA_DEC_FIXED_SG"
#endif
const uint CM_M = FA_DEC_CM_M, CM_N = FA_DEC_CM_N, CM_K = FA_DEC_CM_K;
#include "fa_cm_core.glsl"
#ifdef FA_DEC_SK
const uint SK = FA_DEC_SK; // (experiments: a multiple of CM_N and CM_M)
#else
const uint SK = CM_N < CM_M ? CM_M : CM_N; // keys a step (a Q block fits a K tile)
#endif
const uint BNN = SK / CM_N, LDT = DU + 1u;  // score blocks a step; tile pitch in units
const uint DK = D / CM_K, DN = D / CM_N;    // matrices along the head dim (as K, as N)
const uint FPL = SK * DU / SG;              // units of a step's K (and of its V) a lane
const uint TILE = 2u * SK * LDT;            // a subgroup's K tile, then its V tile
shared uvec4 kvs[NSG * TILE];
shared float cm_idx[CM_M * CM_N];
#endif
#ifdef FA_DEC_STAGE_K
// FA_DEC_STAGE_K: each subgroup reads its step's K rows a piece at a time with neighbouring lanes
// on neighbouring units of a row (a load touches a row's lines, not one line per lane), stages
// them here, and each lane takes its own key's units back (units XOR-swizzled by the row, so
// neither side meets a bank conflict). The build's attn_decode_staged module (docs/PERF.md).
shared uvec4 ks[NSG * SG * PU];
#endif
shared vec4 qs[RW * DQ];      // Q (f32); at the end, the workgroup's O
#ifndef FA_DEC_MATRIX
shared vec4 ps[NT * R4];      // P: lane t's RW values at t * R4
shared uint vrow[NT];         // paged: lane t's V row offset
#endif
shared float m_sh[NSG * RW];  // the subgroups' row maxima
shared float l_sh[NSG * RW];  // and row sums
shared bool last_sh;          // this workgroup merges the chunks

// The output row (batch entry b, query head, query) of packed row pr of KV head hk, as the
// chunks' partial O and LSE are laid out in the workspace.
uint out_row_of(uint b, uint hk, uint pr, uint heads_q)
{
    return (b * heads_q + hk * GQA + pr / pc.seq_q) * pc.seq_q + pr % pc.seq_q;
}

// Whether a view's offset and strides (or'd together: bits) are multiples of mask + 1 elements.
bool view_fits(uint bits, uint mask) { return ALIGNED || (bits & mask) == 0u; }

// Writes quad dq of O's packed row pr (batch entry b, KV head hk), and its LSE with the first.
void store_out(uint b, uint hk, uint pr, uint dq, vec4 out_v, float lse)
{
    const bool o4 = view_fits(pc.o_off | pc.o_sb | pc.o_ss | pc.o_sh, 3u);
    const uint i = pr % pc.seq_q, h = hk * GQA + pr / pc.seq_q;
    ST4(o_buf, pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss + 4u * dq, out_v, o4)
    if (dq == 0u && pc.has_lse != 0u)
        lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_ss] = lse;
}

void main()
{
    const float NEG_INF = neg_inf();
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID, t = sg * SG + lane;
    const uint packed = GQA * pc.seq_q, row_chunks = (packed + RW - 1u) / RW;
    const uint chunk = gl_WorkGroupID.x, b = gl_WorkGroupID.z;
    const uint hk = gl_WorkGroupID.y / row_chunks, r0 = gl_WorkGroupID.y % row_chunks * RW;
    const uint seq_k = FA_SEQ_K_OF(b);
    const int diag = int(seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const uint n_begin = min(chunk * pc.split_keys, seq_k);
    uint n_stop = min(seq_k, n_begin + pc.split_keys);
    if (CAUSAL) { // no key past the last visible one of the workgroup's last query
        uint i_max = 0u;
        for (uint r = r0; r < min(r0 + RW, packed); r++)
            i_max = max(i_max, r % pc.seq_q);
        n_stop = uint(clamp(int(i_max) + diag + 1, int(n_begin), int(n_stop)));
    }

    const uint q_bits = pc.q_off | pc.q_sb | pc.q_ss | pc.q_sh;
    const uint k_bits = pc.k_off | pc.k_sb | pc.k_ss | pc.k_sh;
    const bool q8 = view_fits(q_bits, 7u), q4 = view_fits(q_bits, 3u);
    const bool k8 = view_fits(k_bits, 7u), k4 = view_fits(k_bits, 3u);
    const bool k_units = view_fits(k_bits, G - 1u);
    const bool v4 = view_fits(pc.v_off | pc.v_sb | pc.v_ss | pc.v_sh, 3u);
    const bool paged = pc.page_size != 0u;
    const uint k_base = pc.k_off + (paged ? 0u : b * pc.k_sb) + hk * pc.k_sh;
    const uint v_base = pc.v_off + (paged ? 0u : b * pc.v_sb) + hk * pc.v_sh;
#ifdef FA_DEC_READ_ONLY
    // FA_DEC_READ_ONLY=n (timing only, 16-bit dtypes, contiguous caches with 16-byte rows: no
    // attention, O and the LSE left as they were): the chunk's K rows then its V rows read once,
    // neighbouring lanes on neighbouring 16-byte units, n loads in flight a lane, no barrier and
    // no shared memory: the rate at which this grid reads the cache through the driver.
    {
        const uint units = (n_stop - n_begin) * DU, NR = FA_DEC_READ_ONLY;
        uint acc = 0u;
        for (uint pass = 0u; pass < 2u; pass++) {
            const uint base = pass == 0u ? k_base : v_base, ss = pass == 0u ? pc.k_ss : pc.v_ss;
            for (uint e0 = t; e0 < units; e0 += NR * NT) {
                uvec4 x[NR];
                [[unroll]] for (uint i = 0u; i < NR; i++) {
                    const uint e = min(e0 + i * NT, units - 1u), n = n_begin + e / DU;
                    const uint at = (base + n * ss + e % DU * G) >> 3;
                    x[i] = pass == 0u ? k_buf_q[at] : v_ro_q[at];
                }
                [[unroll]] for (uint i = 0u; i < NR; i++)
                    acc ^= x[i].x ^ x[i].y ^ x[i].z ^ x[i].w;
            }
        }
        if (acc == 0x9e3779b9u && pc.has_lse != 0u) // (so that the loads are kept)
            lse_buf[pc.lse_off] = uintBitsToFloat(acc);
        return;
    }
#endif

#ifndef FA_DEC_MATRIX
    // Q rows -> shared (f32); packed row pr is query pr % Sq of query head hk * GQA + pr / Sq.
    for (uint e = t; e < RW * DU; e += NT) {
        const uint r = e / DU, u = e - r * DU, pr = r0 + r;
        uvec4 x = uvec4(0);
        if (pr < packed) {
            const uint i = pr % pc.seq_q, h = hk * GQA + pr / pc.seq_q;
            x = LD_UNIT(q_buf, pc.q_off + b * pc.q_sb + h * pc.q_sh + i * pc.q_ss + u * G, q8, q4);
        }
        [[unroll]] for (uint k = 0u; k < QPU; k++)
            qs[r * DQ + u * QPU + k] = unit_quad(x, k);
    }
    barrier();
#endif

// Where key n_ of this sequence lies in K and V, from k_base and v_base.
#define KEY_PAGE(n_)                                                                           \
    min(uint(max(bt_buf[pc.bt_off + b * pc.bt_sb + (n_) / pc.page_size], 0)), pc.num_pages - 1u)
#define KEY_ROW(n_, sb_, ss_)                                                                  \
    (paged ? KEY_PAGE(n_) * (sb_) + (n_) % pc.page_size * (ss_) : (n_) * (ss_))
// The lane's slices of V rows j0_ .. j0_ + VR - 1 of the step at n0_ into vr (quads past the
// head dim zero), with one load each where aligned_ (the view's offsets and strides multiples of
// 4), else element by element.
#define LOAD_V_AS(j0_, n0_, aligned_)                                                          \
    [[unroll]] for (uint j_ = 0u; j_ < VR; j_++) {                                             \
        const uint jj_ = (j0_) + j_;                                                           \
        const uint row_ = paged ? vrow[sg * SG + jj_] : min((n0_) + jj_, n_stop - 1u) * pc.v_ss; \
        [[unroll]] for (uint q_ = 0u; q_ < QPLM; q_++) {                                       \
            const uint c_ = lane + SG * q_;                                                    \
            RAW4 x_ = RAW4(0);                                                                 \
            if (jj_ < SG && q_ < QPL && c_ < DQ)                                               \
                x_ = LD_RAW4(v_buf, v_base + row_ + 4u * c_, aligned_);                        \
            vr[j_ * QPLM + q_] = x_;                                                           \
        }                                                                                      \
    }
#define LOAD_V(j0_, n0_)                                                                       \
    if (v4) {                                                                                  \
        LOAD_V_AS(j0_, n0_, true)                                                              \
    } else {                                                                                   \
        LOAD_V_AS(j0_, n0_, false)                                                             \
    }
// Units [c_ PU, (c_ + 1) PU) of the lane's K row into kr, one load each where k_units.
#define LOAD_K(c_)                                                                             \
    if (k_units) {                                                                             \
        [[unroll]] for (uint u_ = 0u; u_ < PU; u_++)                                           \
            if ((c_) * PU + u_ < DU)                                                           \
                kr[u_] = LD_UNIT_ALIGNED(k_buf, k_row + ((c_) * PU + u_) * G);                 \
    } else {                                                                                   \
        [[unroll]] for (uint u_ = 0u; u_ < PU; u_++)                                           \
            if ((c_) * PU + u_ < DU)                                                           \
                kr[u_] = LD_UNIT(k_buf, k_row + ((c_) * PU + u_) * G, k8, k4);                 \
    }

#ifdef FA_DEC_STAGE_K
// Piece c_ of the step at n0_ (the subgroup's SG keys, UPR units of each): unit e = lane + SG i
// of the piece is unit e % UPR of key e / UPR.
const uint UPR = DU < PU ? DU : PU;
#define LOAD_K_TILE(c_, n0_)                                                                   \
    [[unroll]] for (uint i_ = 0u; i_ < PU; i_++) {                                             \
        const uint e_ = lane + SG * i_, u_ = (c_) * PU + e_ % UPR;                             \
        const uint kk_ = min((n0_) + e_ / UPR, n_stop - 1u);                                   \
        const uint at_ = k_base + KEY_ROW(kk_, pc.k_sb, pc.k_ss) + u_ * G;                     \
        if (i_ < UPR && u_ < DU)                                                               \
            kr[i_] = k_units ? LD_UNIT_ALIGNED(k_buf, at_) : LD_UNIT(k_buf, at_, k8, k4);      \
    }
// kr -> the subgroup's staging rows, then each lane's own row back into kr.
#define STAGE_K()                                                                              \
    {                                                                                          \
        [[unroll]] for (uint i_ = 0u; i_ < PU; i_++) {                                         \
            const uint e_ = lane + SG * i_, j_ = e_ / UPR;                                     \
            if (i_ < UPR)                                                                      \
                ks[(sg * SG + j_) * PU + ((e_ % UPR) ^ (j_ & 7u))] = kr[i_];                   \
        }                                                                                      \
        subgroupMemoryBarrierShared();                                                         \
        subgroupBarrier();                                                                     \
        [[unroll]] for (uint u_ = 0u; u_ < PU; u_++)                                           \
            if (u_ < UPR)                                                                      \
                kr[u_] = ks[(sg * SG + lane) * PU + (u_ ^ (lane & 7u))];                       \
        subgroupMemoryBarrierShared();                                                         \
        subgroupBarrier();                                                                     \
    }
#endif

#ifdef FA_DEC_MATRIX
    const bool v8 = view_fits(pc.v_off | pc.v_sb | pc.v_ss | pc.v_sh, 7u);
    const uint tile = sg * TILE;
    // The workgroup's Q rows as A matrices (rows past RW or the packed rows zero), through the
    // subgroup's K tile; packed row pr is query pr % Sq of query head hk * GQA + pr / Sq.
    for (uint e = lane; e < CM_M * DU; e += SG) {
        const uint r = e / DU, u = e - r * DU, pr = r0 + r;
        uvec4 x = uvec4(0);
        if (r < RW && pr < packed) {
            const uint i = pr % pc.seq_q, h = hk * GQA + pr / pc.seq_q;
            x = LD_UNIT(q_buf, pc.q_off + b * pc.q_sb + h * pc.q_sh + i * pc.q_ss + u * G, q8, q4);
        }
        kvs[tile + r * LDT + u] = x;
    }
    CM_IDX_INIT(cm_idx)
    barrier();
    MAT_A qa[DK];
    [[unroll]] for (uint d = 0u; d < DK; d++)
        coopMatLoad(qa[d], kvs, tile + d * (CM_K / 8u), LDT, ROW_MAJOR);
    MAT_C ix;
    CM_IDX_LOAD(ix, cm_idx);
    subgroup_sync(); // Q is read before the first step (or O) overwrites the tile
    uint col[CE]; // each element's column, and its row's last visible key
    int lim[CE];
    [[unroll]] for (uint e = 0u; e < CE; e++) {
        const uint v = uint(ix[e]);
        col[e] = v % CM_N;
        lim[e] = int((r0 + v / CM_N) % pc.seq_q) + diag;
    }
    MAT_C o[DN];
    [[unroll]] for (uint d = 0u; d < DN; d++)
        o[d] = MAT_C(0.0);
    float m[NSLOT], l[NSLOT]; // per row slot; l the lane's part of the row's sum
    [[unroll]] for (uint k = 0u; k < NSLOT; k++) {
        m[k] = NEG_INF;
        l[k] = 0.0;
    }

// The step at n0_'s K and V rows into kx_ and vx_: unit e = lane + SG i is unit e % DU of key
// e / DU (keys past the chunk's end read as its last).
#define LOAD_KV(kx_, vx_, n0_)                                                                 \
    [[unroll]] for (uint i_ = 0u; i_ < FPL; i_++) {                                            \
        const uint e_ = lane + SG * i_, j_ = e_ / DU, u_ = e_ - j_ * DU;                       \
        const uint kk_ = min((n0_) + j_, n_stop - 1u);                                         \
        const uint ka_ = k_base + KEY_ROW(kk_, pc.k_sb, pc.k_ss) + u_ * G;                     \
        const uint va_ = v_base + KEY_ROW(kk_, pc.v_sb, pc.v_ss) + u_ * G;                     \
        kx_[i_] = LD_UNIT(k_buf, ka_, k8, k4);                                                 \
        vx_[i_] = LD_UNIT(v_buf, va_, v8, v4);                                                 \
    }

    // Every subgroup takes the same number of steps (see the scalar form below).
    const uint steps = (n_stop - n_begin + NSG * SK - 1u) / (NSG * SK);
    uvec4 kx[FPL];
    uvec4 vx[FPL];
    if (steps > 0u)
        LOAD_KV(kx, vx, n_begin + sg * SK)
    for (uint step = 0u; step < steps; step++) {
        const uint n0 = n_begin + (step * NSG + sg) * SK;
        // The tiles; V rows past the chunk's end zero, so that they add nothing to O.
        [[unroll]] for (uint i = 0u; i < FPL; i++) {
            const uint e = lane + SG * i, j = e / DU, u = e - j * DU;
            kvs[tile + j * LDT + u] = kx[i];
            kvs[tile + (SK + j) * LDT + u] = n0 + j < n_stop ? vx[i] : uvec4(0);
        }
        subgroup_sync();
        if (step + 1u < steps)
            LOAD_KV(kx, vx, n0 + NSG * SK)
        if (n0 < n_stop) { // the same for every lane
            MAT_C s[BNN];
            [[unroll]] for (uint j = 0u; j < BNN; j++)
                s[j] = MAT_C(0.0);
            [[unroll]] for (uint d = 0u; d < DK; d++)
                [[unroll]] for (uint j = 0u; j < BNN; j++) {
                    MAT_B kb;
                    coopMatLoad(kb, kvs, tile + j * CM_N * LDT + d * (CM_K / 8u), LDT, COL_MAJOR);
                    s[j] = coopMatMulAdd(qa[d], kb, s[j]);
                }
            float mx[NSLOT];
            [[unroll]] for (uint k = 0u; k < NSLOT; k++)
                mx[k] = NEG_INF;
            [[unroll]] for (uint j = 0u; j < BNN; j++)
                [[unroll]] for (uint e = 0u; e < CE; e++) {
                    const uint key = n0 + j * CM_N + col[e];
                    const bool visible = key < n_stop && (!CAUSAL || int(key) <= lim[e]);
                    const float x = visible ? s[j][e] * pc.scale_log2 : NEG_INF;
                    s[j][e] = x;
                    mx[slot_of(e)] = max(mx[slot_of(e)], x);
                }
            float alpha[NSLOT], mu[NSLOT];
            [[unroll]] for (uint k = 0u; k < NSLOT; k++) {
                const float m_new = max(m[k], group_max(mx[k]));
                // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled
                const bool none = m_new == NEG_INF;
                alpha[k] = none ? 1.0 : exp2(m[k] - m_new);
                mu[k] = none ? 0.0 : m_new;
                m[k] = m_new;
                l[k] *= alpha[k];
            }
            [[unroll]] for (uint j = 0u; j < BNN; j++)
                [[unroll]] for (uint e = 0u; e < CE; e++) {
                    const float p = exp2(s[j][e] - mu[slot_of(e)]);
                    s[j][e] = p;
                    l[slot_of(e)] += p;
                }
            [[unroll]] for (uint d = 0u; d < DN; d++)
                [[unroll]] for (uint e = 0u; e < CE; e++)
                    o[d][e] *= alpha[slot_of(e)];
            [[unroll]] for (uint j = 0u; j < BNN; j++) { // CM_K = CM_N: P's block j is A
                MAT_A pa;
                ACC_TO_A(pa, s[j])
                [[unroll]] for (uint d = 0u; d < DN; d++) {
                    MAT_B vb;
                    coopMatLoad(vb, kvs, tile + (SK + j * CM_K) * LDT + d * (CM_N / 8u), LDT,
                                ROW_MAJOR);
                    o[d] = coopMatMulAdd(pa, vb, o[d]);
                }
            }
        }
        subgroup_sync(); // the tiles are read before the next step rewrites them
    }

    // Each subgroup's row maxima and sums, and its O (f32, rows of D) in its tiles; then the
    // workgroup's O, each subgroup's scaled to the rows' largest maxima, into qs.
    [[unroll]] for (uint k = 0u; k < NSLOT; k++)
        l[k] = group_sum(l[k]);
    [[unroll]] for (uint e = 0u; e < CE; e++) {
        const uint r = uint(ix[e]) / CM_N;
        if (r < RW) { // lanes of a row write the same values
            m_sh[sg * RW + r] = m[slot_of(e)];
            l_sh[sg * RW + r] = l[slot_of(e)];
        }
    }
    [[unroll]] for (uint d = 0u; d < DN; d++)
        coopMatStore(o[d], kvs, tile + d * (CM_N / 4u), DQ, ROW_MAJOR);
    barrier();
    for (uint e = t; e < RW * DQ; e += NT) {
        const uint r = e / DQ, dq = e - r * DQ;
        float mx = NEG_INF;
        [[unroll]] for (uint x = 0u; x < NSG; x++)
            mx = max(mx, m_sh[x * RW + r]);
        vec4 acc = vec4(0.0);
        [[unroll]] for (uint x = 0u; x < NSG; x++)
            if (m_sh[x * RW + r] != NEG_INF) // a subgroup that saw no key adds nothing
                acc += exp2(m_sh[x * RW + r] - mx) * uintBitsToFloat(kvs[x * TILE + r * DQ + dq]);
        qs[e] = acc;
    }
    barrier();
#else
    int lim[RWM]; // each row's last visible key
    float m[RWM], l[RWM];
    vec4 o[RWM * QPLM];
    [[unroll]] for (uint r = 0u; r < RWM; r++) {
        lim[r] = int((r0 + r) % pc.seq_q) + diag;
        m[r] = NEG_INF;
        l[r] = 0.0;
        [[unroll]] for (uint q = 0u; q < QPLM; q++)
            o[r * QPLM + q] = vec4(0.0);
    }

    // Every subgroup takes the same number of steps, those past the chunk's end idle (live
    // false), so that the subgroup barriers below are met by the whole workgroup as often: they
    // need only the subgroup, but Mesa 26's llvmpipe holds a subgroup that met one more than the
    // others, and never runs the rest of it (its O and LSE went unwritten).
    const uint steps = (n_stop - n_begin + NT - 1u) / NT;
    for (uint step = 0u; step < steps; step++) {
        const uint n0 = n_begin + step * NT + sg * SG;
        const bool live = n0 < n_stop; // the same for every lane
        const uint key = n0 + lane, kn = min(key, n_stop - 1u);
        const uint k_row = k_base + KEY_ROW(kn, pc.k_sb, pc.k_ss);
        if (paged) {
            vrow[t] = KEY_ROW(kn, pc.v_sb, pc.v_ss);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
        }
        // The first K piece and the first V rows are requested before any is used.
        uvec4 kr[PU];
        RAW4 vr[VR * QPLM];
#ifdef FA_DEC_STAGE_K
        // Every subgroup scores every step, past its chunk's end too (all keys invisible): the
        // staging's subgroup barriers must be met as often by each (see above).
        if (live)
            LOAD_V(0u, n0)
        LOAD_K_TILE(0u, n0)
        STAGE_K()
        {
#else
        if (live) {
            LOAD_K(0u)
            LOAD_V(0u, n0)
#endif

            float s[RWM];
            [[unroll]] for (uint r = 0u; r < RWM; r++)
                s[r] = 0.0;
            [[dont_unroll]] for (uint c = 0u; c < KP; c++) {
                if (c > 0u) {
#ifdef FA_DEC_STAGE_K
                    LOAD_K_TILE(c, n0)
                    STAGE_K()
#else
                    LOAD_K(c)
#endif
                }
#ifdef FA_DEC_FLOOR
                // FA_DEC_FLOOR (timing only, wrong results; 16-bit dtypes): every K and V word
                // loaded is used, no product computed
                [[unroll]] for (uint u = 0u; u < PU; u++)
                    if (c * PU + u < DU)
                        s[0] += float((kr[u].x ^ kr[u].y ^ kr[u].z ^ kr[u].w) & 1u);
                if (false)
#endif
                [[unroll]] for (uint u = 0u; u < PU; u++)
                    [[unroll]] for (uint k = 0u; k < QPU; k++) {
                        const vec4 kf = unit_quad(kr[u], k);
                        [[unroll]] for (uint r = 0u; r < RWM; r++) { // one rounding per term
                            if (r < RW && c * PU + u < DU) {
                                const vec4 q = qs[r * DQ + (c * PU + u) * QPU + k];
                                s[r] = fma(kf.w, q.w,
                                           fma(kf.z, q.z, fma(kf.y, q.y, fma(kf.x, q.x, s[r]))));
                            }
                        }
                    }
            }

            float pv[RWM];
            [[unroll]] for (uint r = 0u; r < RWM; r++) {
                pv[r] = 0.0;
                if (r < RW) {
                    const bool visible = key < n_stop && (!CAUSAL || int(key) <= lim[r]);
                    const float x = visible ? s[r] * pc.scale_log2 : NEG_INF;
                    const float m_new = max(m[r], subgroupMax(x));
                    // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled; a NaN
                    // score stays NaN (P = exp2(NaN)).
                    const bool none = m_new == NEG_INF;
                    const float alpha = none ? 1.0 : exp2(m[r] - m_new);
                    pv[r] = exp2(x - (none ? 0.0 : m_new));
                    l[r] = l[r] * alpha + pv[r];
                    m[r] = m_new;
                    [[unroll]] for (uint q = 0u; q < QPLM; q++)
                        if (q < QPL)
                            o[r * QPLM + q] *= alpha;
                }
            }
            [[unroll]] for (uint i = 0u; i < R4M; i++)
                if (i < R4)
                    ps[t * R4 + i] =
                        vec4(pv[4u * i], pv[4u * i + 1u], pv[4u * i + 2u], pv[4u * i + 3u]);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        if (live) {
            const uint keys = min(SG, n_stop - n0);
            [[unroll]] for (uint j0 = 0u; j0 < SG; j0 += VR) {
                if (j0 > 0u)
                    LOAD_V(j0, n0)
                [[unroll]] for (uint j = 0u; j < VR; j++) {
                    const uint jj = j0 + j;
                    if (jj < SG && jj < keys) { // the same for every lane
                        [[unroll]] for (uint i = 0u; i < R4M; i++) {
                            const vec4 p = ps[(sg * SG + jj) * R4 + (i < R4 ? i : 0u)];
                            [[unroll]] for (uint q = 0u; q < QPLM; q++) {
#ifdef FA_DEC_FLOOR
                                const RAW4 w = vr[j * QPLM + q];
                                const vec4 vf = vec4(float((w.x ^ w.y) & 1u));
#else
                                const vec4 vf = raw4_to_f32(vr[j * QPLM + q]);
#endif
                                if (i < R4 && q < QPL) {
                                    o[(4u * i) * QPLM + q] += p.x * vf;
                                    o[(4u * i + 1u) * QPLM + q] += p.y * vf;
                                    o[(4u * i + 2u) * QPLM + q] += p.z * vf;
                                    o[(4u * i + 3u) * QPLM + q] += p.w * vf;
                                }
                            }
                        }
                    }
                }
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier(); // P and the V rows' offsets are read before the next step rewrites them
    }

    // The subgroups' maxima and sums; then their O, each scaled to the workgroup's maxima, added
    // one subgroup after the other into qs (Q is no longer read).
    [[unroll]] for (uint r = 0u; r < RWM; r++) {
        if (r < RW) {
            const float lr = subgroupAdd(l[r]);
            if (subgroupElect()) {
                m_sh[sg * RW + r] = m[r];
                l_sh[sg * RW + r] = lr;
            }
        }
    }
    barrier();
    float f[RWM]; // exp2(m - the row's largest maximum); 0 where no subgroup saw a key
    [[unroll]] for (uint r = 0u; r < RWM; r++) {
        float mx = NEG_INF;
        [[unroll]] for (uint x = 0u; x < NSG; x++)
            if (r < RW)
                mx = max(mx, m_sh[x * RW + r]);
        f[r] = mx == NEG_INF ? 0.0 : exp2(m[r] - mx);
    }
    for (uint x = 0u; x < NSG; x++) {
        if (sg == x)
            [[unroll]] for (uint r = 0u; r < RWM; r++)
                [[unroll]] for (uint q = 0u; q < QPLM; q++) {
                    const uint c = lane + SG * q;
                    if (r < RW && q < QPL && c < DQ)
                        qs[r * DQ + c] =
                            (x == 0u ? vec4(0.0) : qs[r * DQ + c]) + f[r] * o[r * QPLM + q];
                }
        barrier();
    }

#endif

    const bool split = gl_NumWorkGroups.x > 1u;
    const uint heads_q = gl_NumWorkGroups.y / row_chunks * GQA;
    const uint out_rows = gl_NumWorkGroups.z * heads_q * pc.seq_q;
    // The chunks' O (as vec4s from ws_o), then their LSEs at a multiple of 64 floats.
    const uint ws_o = DONE_SLOTS / 4u;
    const uint ws_lse_off = DONE_SLOTS + (gl_NumWorkGroups.x * out_rows * D + 63u) / 64u * 64u;
    for (uint e = t; e < RW * DQ; e += NT) {
        const uint r = e / DQ, dq = e - r * DQ, pr = r0 + r;
        if (pr >= packed)
            continue;
        float mx = NEG_INF, sum = 0.0;
        for (uint x = 0u; x < NSG; x++)
            mx = max(mx, m_sh[x * RW + r]);
        if (mx != NEG_INF)
            for (uint x = 0u; x < NSG; x++)
                sum += exp2(m_sh[x * RW + r] - mx) * l_sh[x * RW + r];
        const vec4 out_v = sum != 0.0 ? qs[e] / sum : vec4(0.0); // no visible key: O = 0
        const float lse = sum != 0.0 ? (mx + log2(sum)) * LN2 : NEG_INF;
        if (split) {
            const uint row = chunk * out_rows + out_row_of(b, hk, pr, heads_q);
            ws_v[ws_o + row * DQ + dq] = out_v;
            if (dq == 0u)
                ws[ws_lse_off + row] = lse;
        } else {
            store_out(b, hk, pr, dq, out_v, lse);
        }
    }
    if (!split || !MERGE_HERE)
        return;

    // The merge: every workgroup's partial O and LSE made visible, then one count; the workgroup
    // that counts the last chunk reads every chunk back and leaves the count at 0 for the next call.
    memoryBarrierBuffer();
    barrier();
    const uint slot = gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y;
    const uint chunks = gl_NumWorkGroups.x;
    if (t == 0u)
        last_sh = atomicAdd(done[slot], 1u) == chunks - 1u;
    barrier();
    if (!last_sh)
        return;
    memoryBarrierBuffer();
    if (t == 0u)
        done[slot] = 0u;
    // Per row, by subgroup r % NSG: the largest chunk LSE (m_sh[r]) and the sum of the weights
    // exp(LSE_c - m) (l_sh[r]); chunks without a visible key (LSE = -inf) weigh 0.
    for (uint r = sg; r < RW; r += NSG) {
        const uint pr = r0 + r;
        float mx = NEG_INF, sum = 0.0;
        if (pr < packed) {
            const uint row = out_row_of(b, hk, pr, heads_q);
            for (uint c = lane; c < chunks; c += SG)
                mx = max(mx, ws[ws_lse_off + c * out_rows + row]);
            mx = subgroupMax(mx);
            for (uint c = lane; c < chunks; c += SG) {
                const float lse = ws[ws_lse_off + c * out_rows + row];
                sum += lse == NEG_INF ? 0.0 : exp(lse - mx);
            }
            sum = subgroupAdd(sum);
        }
        if (subgroupElect()) {
            m_sh[r] = mx;
            l_sh[r] = sum;
        }
    }
    barrier();
    // Invocation t sums quads t, t + NT, ... of the rows over every chunk, four chunks' loads
    // in flight at a time (no register arrays: NVIDIA's compiler would put them in local memory
    // for the whole shader).
    for (uint e = t; e < RW * DQ; e += NT) {
        const uint r = e / DQ, dq = e - r * DQ, pr = r0 + r;
        if (pr >= packed)
            continue;
        const uint row = out_row_of(b, hk, pr, heads_q);
        const float mx = m_sh[r], sum = l_sh[r];
        vec4 acc = vec4(0.0);
        for (uint c = 0u; c < chunks; c += 4u) {
            const uint c1 = min(c + 1u, chunks - 1u), c2 = min(c + 2u, chunks - 1u);
            const uint c3 = min(c + 3u, chunks - 1u);
            const float l0 = ws[ws_lse_off + c * out_rows + row];
            const float l1 = ws[ws_lse_off + c1 * out_rows + row];
            const float l2 = ws[ws_lse_off + c2 * out_rows + row];
            const float l3 = ws[ws_lse_off + c3 * out_rows + row];
            const vec4 x0 = ws_v[ws_o + (c * out_rows + row) * DQ + dq];
            const vec4 x1 = ws_v[ws_o + (c1 * out_rows + row) * DQ + dq];
            const vec4 x2 = ws_v[ws_o + (c2 * out_rows + row) * DQ + dq];
            const vec4 x3 = ws_v[ws_o + (c3 * out_rows + row) * DQ + dq];
            // chunks without a visible key (LSE = -inf) and the repeats past the last weigh 0
            acc += (l0 == NEG_INF ? 0.0 : exp(l0 - mx)) * x0;
            acc += (c + 1u >= chunks || l1 == NEG_INF ? 0.0 : exp(l1 - mx)) * x1;
            acc += (c + 2u >= chunks || l2 == NEG_INF ? 0.0 : exp(l2 - mx)) * x2;
            acc += (c + 3u >= chunks || l3 == NEG_INF ? 0.0 : exp(l3 - mx)) * x3;
        }
        // no chunk saw a key: O = 0, LSE = -inf
        store_out(b, hk, pr, dq, sum != 0.0 ? acc / sum : vec4(0.0),
                  sum != 0.0 ? mx + log(sum) : NEG_INF);
    }
}
