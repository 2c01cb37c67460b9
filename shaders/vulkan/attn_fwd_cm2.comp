// SPDX-License-Identifier: MIT
#version 450
// (An experiment: no build compiles it and the host never chooses it; bench/vk_cm2.sh builds
// its modules, which stand in for a catalogue module of attn_fwd_cm.comp through
// FA_VULKAN_SPV_DIR.) The forward on VK_NV_cooperative_matrix2: O = softmax(scale Q K^T [mask])
// V and LSE with matrices the size of whole tiles, which the driver splits over the scope's
// invocations and stages itself; the online softmax runs on whole BM x BN matrices through row
// reductions (each row's value repeated along the row) and per-element functions. A workgroup
// takes the query tiles gl_WorkGroupID.x + i gl_NumWorkGroups.x of one (query head, batch), BM
// rows each, BN keys a step: the same bindings, push constants and grid as attn_fwd_cm.comp
// at a tiling of BM rows a workgroup.
//
// Compile-time: FA_FIXED_D; FA_CM2_BM, FA_CM2_BN (multiples of the device's flexible-shape
// granularities), FA_CM2_NARROW (the N granularity: the width of the LSE's staging matrix),
// FA_CM2_WG (invocations: the shape's workgroupInvocations at workgroup scope, the subgroup size
// at subgroup scope); FA_CM2_SUBGROUP for subgroup-scope matrices (lavapipe has no workgroup
// scope), else workgroup scope; FA_CM2_LATE_SUM to keep each column's share of the row sums
// through the key loop and add them up once after it (a row reduction a step fewer);
// FA_CM2_NARROW_STATS for BM x NARROW statistics (below); FA_CM2_TENSOR for tensor-addressed
// loads and stores (rows past a tensor's end read as zero and are never written), else strided
// loads and stores, which need every tile whole (seq_q a multiple of BM, each sequence's keys a
// multiple of BN: a correctness test's shapes). Plain, causal, windows, GQA, per-sequence key
// counts, softcaps, ALiBi and a bias (read an element at a time).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "fa_common.glsl"

const uint BM = FA_CM2_BM, BN = FA_CM2_BN, NARROW = FA_CM2_NARROW;
layout(local_size_x = FA_CM2_WG) in;
#ifdef FA_CM2_SUBGROUP
#define SCOPE gl_ScopeSubgroup
#else
#define SCOPE gl_ScopeWorkgroup
#endif
#define MAT_A(r_, c_) coopmat<float16_t, SCOPE, r_, c_, gl_MatrixUseA>
#define MAT_B(r_, c_) coopmat<float16_t, SCOPE, r_, c_, gl_MatrixUseB>
#define MAT_C(r_, c_) coopmat<float, SCOPE, r_, c_, gl_MatrixUseAccumulator>
#define MAT_H(r_, c_) coopmat<float16_t, SCOPE, r_, c_, gl_MatrixUseAccumulator>

TENSOR(0, q_buf)
TENSOR(1, k_buf)
TENSOR(2, v_buf)
TENSOR(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };
FA_SEQLENS_BINDING
// ALIBI: the slopes, packed (batch, query head), in the workspace (vk_attention.c)
layout(set = 0, binding = 6, std430) readonly buffer variant_block { float variant_buf[]; };
#define FA_BIAS_BINDING 7
#define FA_BIAS_VIEW(i_) variant_buf[i_]
#include "fa_bias.glsl"
FA_FWD_PARAMS_WITH(FA_VARIANT_MEMBERS)

// The row statistics (maxima, sums, factors): BM x BN matrices, or with FA_CM2_NARROW_STATS
// BM x NARROW ones (fewer registers, one more reduction a step to spread the maxima).
#ifdef FA_CM2_NARROW_STATS
#ifdef FA_CM2_LATE_SUM
#error FA_CM2_LATE_SUM keeps a share of the sums per column: it needs BM x BN statistics
#endif
#define STAT_C MAT_C(BM, NARROW)
#else
#define STAT_C MAT_C(BM, BN)
#endif

shared float lse_rows[BM * NARROW]; // the LSE, each row's value repeated NARROW times

// The combiners of the row reductions, and the per-element functions (row, column, element,
// then the extra operands: a matrix operand gives its element at the same place).
float max_of(const in float a, const in float b) { return max(a, b); }
float sum_of(const in float a, const in float b) { return a + b; }
float first_of(const in float a, const in float b) { return a; } // spreads a row's value
// The score of row r, key c of a step whose first `keys` keys exist; lim0 is row 0's diagonal
// relative to the step's first key.
float masked(const in uint r, const in uint c, const in float s, const in uint keys,
             const in int lim0, const in int left, const in int right)
{
    return c < keys && fa_sees(int(c), lim0 + int(r), left, right) ? s : neg_inf();
}
// SOFTCAP: the raw score capped and scaled into the log2 domain (fa_score).
float capped(const in uint r, const in uint c, const in float raw)
{
    float unused;
    return fa_score(raw, pc.score_mul, pc.cap_log2, unused);
}
// ALIBI: the score less slope2 times the distance between row r's diagonal and key c.
float alibi_added(const in uint r, const in uint c, const in float s, const in float slope2,
                  const in int lim0)
{
    return s - slope2 * abs(float(lim0 + int(r) - int(c)));
}
// BIAS: the score plus the bias of row r, key c (read one element at a time, any dtype and
// view); at_x is the step's first element, at_y the query stride (fa_bias_at).
float bias_added(const in uint r, const in uint c, const in float s, const in uint at_x,
                 const in uint at_y, const in uint rows, const in uint keys)
{
    return s + fa_bias(uvec2(at_x, at_y), r, c, r < rows && c < keys);
}
float max_elem(const in uint r, const in uint c, const in float a, const in float b)
{
    return max(a, b);
}
// P = exp2(s - m); where m is -inf (no key seen yet), s is too and P = 0.
float exp_from(const in uint r, const in uint c, const in float s, const in float m)
{
    return exp2(s - (m == neg_inf() ? 0.0 : m));
}
// The rescale factor exp2(m_old - m_new): 1 while no key has been seen.
float rescale_of(const in uint r, const in uint c, const in float m_old, const in float m_new)
{
    return m_new == neg_inf() ? 1.0 : exp2(m_old - m_new);
}
float inverse_of(const in uint r, const in uint c, const in float l)
{
    return l != 0.0 ? 1.0 / l : 0.0; // a row that saw no key: O = 0
}
float lse_of(const in uint r, const in uint c, const in float m, const in float l)
{
    return l != 0.0 ? (m + log2(l)) * LN2 : neg_inf();
}

void main()
{
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint seq_k = FA_SEQ_K_OF(b);
    const int diag = int(seq_k) - int(pc.seq_q); // query i's diagonal is key i + diag
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh;
    const uint k_base = pc.k_off + b * pc.k_sb + (h / GQA) * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + (h / GQA) * pc.v_sh;
    const uint o_base = pc.o_off + b * pc.o_sb + h * pc.o_sh;
    const uint lse_base = pc.lse_off + b * pc.lse_sb + h * pc.lse_sh;
    const uint q_tiles = (pc.seq_q + BM - 1u) / BM;
    const float slope2 = ALIBI ? variant_buf[b * gl_NumWorkGroups.y + h] * LOG2E : 0.0;
    const uvec2 bias_at = fa_bias_at(gl_NumWorkGroups.z * gl_NumWorkGroups.y, b, h, 0u, 0u);
#ifdef FA_CM2_TENSOR
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lq =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lk = lq, lv = lq, lo = lq;
    lq = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lq, pc.seq_q, D), pc.q_ss, 1);
    lk = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lk, seq_k, D), pc.k_ss, 1);
    lv = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lv, seq_k, D), pc.v_ss, 1);
    lo = setTensorLayoutStrideNV(setTensorLayoutDimensionNV(lo, pc.seq_q, D), pc.o_ss, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
#endif

    for (uint qt = gl_WorkGroupID.x; qt < q_tiles; qt += gl_NumWorkGroups.x) {
        const uint q0 = qt * BM, rows = min(BM, pc.seq_q - q0);
        const uint n_begin = fa_keys_begin(int(q0) + diag, left);
        const uint n_end = fa_keys_end(int(q0 + rows) - 1 + diag, right, seq_k);
        MAT_A(BM, D) q;
#ifdef FA_CM2_TENSOR
        coopMatLoadTensorNV(q, q_buf, q_base, sliceTensorLayoutNV(lq, q0, BM, 0, D));
#else
        coopMatLoad(q, q_buf, q_base + q0 * pc.q_ss, pc.q_ss, gl_CooperativeMatrixLayoutRowMajor);
#endif
        MAT_C(BM, D) o = MAT_C(BM, D)(0.0);
        STAT_C m = STAT_C(neg_inf()); // running row maxima (log2 domain)
        STAT_C l = STAT_C(0.0);       // running row sums
        for (uint n0 = n_begin; n0 < n_end; n0 += BN) {
            const uint keys = min(BN, seq_k - n0);
            MAT_B(D, BN) kt;
            MAT_B(BN, D) v;
#ifdef FA_CM2_TENSOR
            coopMatLoadTensorNV(kt, k_buf, k_base, sliceTensorLayoutNV(lk, n0, BN, 0, D),
                                transposed);
            coopMatLoadTensorNV(v, v_buf, v_base, sliceTensorLayoutNV(lv, n0, BN, 0, D));
#else
            coopMatLoad(kt, k_buf, k_base + n0 * pc.k_ss, pc.k_ss,
                        gl_CooperativeMatrixLayoutColumnMajor);
            coopMatLoad(v, v_buf, v_base + n0 * pc.v_ss, pc.v_ss,
                        gl_CooperativeMatrixLayoutRowMajor);
#endif
            MAT_C(BM, BN) s = MAT_C(BM, BN)(0.0);
            s = coopMatMulAdd(q, kt, s);
            const int lim0 = int(q0) + diag - int(n0);
            if (SOFTCAP)
                coopMatPerElementNV(s, s, capped);
            else
                s = s * pc.scale_log2;
            if (ALIBI)
                coopMatPerElementNV(s, s, alibi_added, slope2, lim0);
            if (BIAS != 0u)
                coopMatPerElementNV(s, s, bias_added, bias_at.x + q0 * bias_at.y + n0, bias_at.y,
                                    rows, keys);
            // The mask only where the step ends past the keys or crosses a row's bounds.
            if (keys < BN || (right >= 0 && int(n0 + BN) - 1 > int(q0) + diag + right) ||
                (left >= 0 && int(n0) < int(q0 + rows) - 1 + diag - left))
                coopMatPerElementNV(s, s, masked, keys, lim0, left, right);
            STAT_C row_max, m_new, alpha;
            coopMatReduceNV(row_max, s, gl_CooperativeMatrixReduceRowNV, max_of);
            coopMatPerElementNV(m_new, row_max, max_elem, m);
            coopMatPerElementNV(alpha, m, rescale_of, m_new);
            MAT_C(BM, BN) p;
#ifdef FA_CM2_NARROW_STATS
            MAT_C(BM, BN) m_wide; // the maxima spread over the step's columns
            coopMatReduceNV(m_wide, m_new, gl_CooperativeMatrixReduceRowNV, first_of);
            coopMatPerElementNV(p, s, exp_from, m_wide);
#else
            coopMatPerElementNV(p, s, exp_from, m_new);
#endif
#ifdef FA_CM2_LATE_SUM
            l = l * alpha + p; // each column's share of the row sums, added up after the loop
#else
            STAT_C row_sum;
            coopMatReduceNV(row_sum, p, gl_CooperativeMatrixReduceRowNV, sum_of);
            l = l * alpha + row_sum;
#endif
            m = m_new;
            MAT_C(BM, D) alpha_d; // alpha's rows spread over O's columns
            coopMatReduceNV(alpha_d, alpha, gl_CooperativeMatrixReduceRowNV, first_of);
            o = o * alpha_d;
            o = coopMatMulAdd(MAT_A(BM, BN)(p), v, o);
        }

#ifdef FA_CM2_LATE_SUM
        coopMatReduceNV(l, l, gl_CooperativeMatrixReduceRowNV, sum_of);
#endif
        STAT_C inv;
        MAT_C(BM, D) inv_d;
        coopMatPerElementNV(inv, l, inverse_of);
        coopMatReduceNV(inv_d, inv, gl_CooperativeMatrixReduceRowNV, first_of);
        o = o * inv_d;
        const MAT_H(BM, D) o16 = MAT_H(BM, D)(o);
#ifdef FA_CM2_TENSOR
        coopMatStoreTensorNV(o16, o_buf, o_base, sliceTensorLayoutNV(lo, q0, BM, 0, D));
#else
        coopMatStore(o16, o_buf, o_base + q0 * pc.o_ss, pc.o_ss,
                     gl_CooperativeMatrixLayoutRowMajor);
#endif
        if (pc.has_lse != 0u) {
            STAT_C lse;
            MAT_C(BM, NARROW) lse_n;
            coopMatPerElementNV(lse, m, lse_of, l);
            coopMatReduceNV(lse_n, lse, gl_CooperativeMatrixReduceRowNV, first_of);
            coopMatStore(lse_n, lse_rows, 0, NARROW, gl_CooperativeMatrixLayoutRowMajor);
            barrier();
            for (uint r = gl_LocalInvocationID.x; r < rows; r += gl_WorkGroupSize.x)
                lse_buf[lse_base + (q0 + r) * pc.lse_ss] = lse_rows[r * NARROW];
            barrier();
        }
    }
}
