// SPDX-License-Identifier: MIT
/* Backward, in three deterministic passes (no atomics):
 *   fa_backward_delta: Delta[b, h, i] = sum_d dO * O, one work-item per query row;
 *   fa_backward_dkdv: one work-group per (key tile of FA_BN, key/value head, batch), looping
 *     over the FA_GQA query heads that share the key/value head and over their query tiles of
 *     FA_BM; it accumulates dV += P^T dO and dK += dS^T Q on (BN x D) register tiles;
 *   fa_backward_dq: one work-group per (query tile of FA_BM, query head, batch), looping over
 *     key tiles of FA_BN and accumulating dQ += dS K on a (BM x D) register tile.
 * Per (query tile, key tile) both compute S = Q K^T, then dP = dO V^T, on a (BM x BN) register
 * tile (FA_SX work-items along keys), P = exp2(S * scale * log2e - LSE * log2e) and
 * dS = P * (dP - Delta) (with FA_SOFTCAP, S softcapped and dS times 1 - tanh^2: fa_score; with
 * FA_ALIBI and FA_BIAS the biases added to S, which leave dS as it is). Rows
 * that saw no key (LSE = -inf) get P = 0; causal and a sliding window (FA_WINDOW) skip the tiles
 * no row or key of the other tile sees.
 *
 * Local memory, f32: P and dS, LSE and Delta per query row, and one staging area refilled from
 * global memory in rounds (two barriers each): S and dP read their operands in column chunks of
 * FA_DC, the dV/dK product reads Q and dO in chunks of FA_RK rows, the dQ product K in chunks
 * of FA_RQ rows. Even the tiles a work-group keeps (K and V, or Q and dO) are read again each
 * time (from L2): at D = 128, 48 KiB cannot hold them as f32 beside P and dS of 64 x 32 tiles,
 * and tiles that small keep too few products per load. Every local access is a float4. The
 * register tiles of the products over query rows (dkdv) or keys (dq) give each work-item rows
 * in groups of 4 (read as one float4 of P or dS, which are stored with that index contiguous)
 * and float4 groups of the head dim, FA_KX / FA_QX work-items along it; FA_DP is the head dim
 * padded to that tile (zero columns). Extra -D options: FA_CL_BWD_OPTIONS (fa_cl_options.h). */
FA_CL_BWD_OPTIONS(FA_CL_REQUIRE)

/* Unrolling of the reduction loops (over columns in S and dP, over rows in dV/dK and dQ): each
 * step is already 32 to 64 independent FMAs per work-item, and more unrolling buys load latency
 * with registers, which dkdv is short of. A tuning knob (FA_OPENCL_BUILD_OPTIONS=
 * -DFA_BWD_UNROLL=2). */
#ifndef FA_BWD_UNROLL
#define FA_BWD_UNROLL 1
#endif
#define FA_PRAGMA(x) _Pragma(#x)
#define FA_UNROLL_BY(n) FA_PRAGMA(unroll n)
#if FA_UNROLL_LOOPS
#define FA_UNROLL_STEPS FA_UNROLL_BY(FA_BWD_UNROLL)
#else
#define FA_UNROLL_STEPS
#endif

#define SY (FA_NT / FA_SX)
#define S_TM (FA_BM / SY)
#define S_TN (FA_BN / FA_SX)
#define KY (FA_NT / FA_KX)
#define K_TM (FA_BN / 4 / KY) /* groups of 4 keys per work-item */
#define K_TN (FA_DP / 4 / FA_KX)
#define QY (FA_NT / FA_QX)
#define Q_TM (FA_BM / 4 / QY) /* groups of 4 query rows per work-item */
#define Q_TN (FA_DP / 4 / FA_QX)

/* Row pitches in float4s, odd so that 8 consecutive rows start in different banks (the host
 * sizes local memory with the same formula). */
#define FA_PITCH4(n) (((n) / 4 + 1) | 1)
#define LDC FA_PITCH4(FA_DC) /* column chunks of S and dP */
#define LDD FA_PITCH4(FA_DP) /* full rows of the dV/dK and dQ products */
#define LDK FA_PITCH4(FA_BN) /* P and dS of dkdv: [query][key] */
#define LDQ FA_PITCH4(FA_BM) /* dS of dq: [key][query] */
#define FA_MAX(a, b) ((a) > (b) ? (a) : (b))
#define STAGE FA_MAX((FA_BM + FA_BN) * LDC, FA_MAX(2 * FA_RK * LDD, FA_RQ * LDD))

__kernel void fa_backward_delta(__global const fa_st *o, long o_off, long o_sb, long o_ss,
                                long o_sh, __global const fa_st *d_o, long g_off, long g_sb,
                                long g_ss, long g_sh, __global float *delta, int seq_q,
                                int heads)
{
    const int i = (int)get_global_id(0);
    if (i >= seq_q)
        return;
    const long h = (long)get_global_id(1), b = (long)get_global_id(2);
    const long ob = o_off + b * o_sb + h * o_sh + (long)i * o_ss;
    const long gb = g_off + b * g_sb + h * g_sh + (long)i * g_ss;
    float sum = 0.0f;
    for (int d = 0; d < FA_D; d += 4) {
        const float4 x = fa_load4(o, ob + d) * fa_load4(d_o, gb + d);
        sum += (x.x + x.y) + (x.z + x.w);
    }
    delta[(b * heads + h) * (long)seq_q + i] = sum;
}

/* Four elements at p + i as f32. With FA_ALIGN4 the host guarantees that i is a multiple of 4
 * (offsets and strides of q, k, v and dO are), which allows one wide load instead of four. */
inline float4 fa_bwd_load4(__global const fa_st *p, long i)
{
#if FA_ALIGN4 && FA_DTYPE == FA_CL_DTYPE_F32
    return *(__global const float4 *)(p + i);
#elif FA_ALIGN4 && FA_DTYPE == FA_CL_DTYPE_F16
    return vloada_half4(0, (__global const half *)(p + i));
#elif FA_ALIGN4
    return as_float4(convert_uint4(*(__global const ushort4 *)(p + i)) << 16);
#else
    return fa_load4(p, i);
#endif
}

inline void fa_bwd_store4(__global fa_st *p, long i, float4 v)
{
#if FA_DTYPE == FA_CL_DTYPE_F32
    vstore4(v, 0, p + i);
#elif FA_DTYPE == FA_CL_DTYPE_F16
    vstore_half4_rte(v, 0, (__global half *)(p + i));
#else
    vstore4((ushort4)(fa_f32_to_bf16(v.x), fa_f32_to_bf16(v.y), fa_f32_to_bf16(v.z),
                      fa_f32_to_bf16(v.w)),
            0, p + i);
#endif
}

/* Work-item lid as (x, y) on a tx-by-ty grid. Where the grid allows, 32 consecutive work-items
 * (an NVIDIA warp) cover 8 x 4 neighbours, so that their local loads touch 8 rows or columns
 * and broadcast 4. */
inline int2 fa_grid(int lid, int tx, int ty)
{
    if (tx % 8 == 0 && ty % 4 == 0) {
        const int w = lid / 32, l = lid % 32;
        return (int2)(l % 8 + 8 * (w % (tx / 8)), l / 8 + 4 * (w / (tx / 8)));
    }
    return (int2)(lid % tx, lid / tx);
}

/* Copies rows x 4 * cols4 elements from row r, column c0 of src[base + r * stride] into dst
 * (pitch float4s per row) as f32, zero past `valid` rows and past the head dim. Consecutive
 * work-items read consecutive columns; unrolled, so that all the loads can be in flight. Where
 * cols4 divides FA_NT, a work-item keeps one column on every FA_NT / cols4-th row, so that its
 * addresses are one pointer plus multiples of the stride. */
inline void fa_bwd_stage(__local float4 *dst, int pitch, __global const fa_st *src, long base,
                         long stride, int valid, int rows, int c0, int cols4)
{
    const int lid = (int)get_local_id(0);
    if (FA_NT % cols4 == 0) {
        const int step = FA_NT / cols4, r = lid / cols4, c = lid % cols4;
        __global const fa_st *p = src + base + (long)r * stride + c0 + 4 * c;
        const bool inside = c0 + 4 * c < FA_D;
FA_UNROLL
        for (int k = 0; k < (rows + step - 1) / step; k++) {
            float4 v = (float4)(0.0f);
            if (inside && r + step * k < valid)
                v = fa_bwd_load4(p, (long)(step * k) * stride);
            if (rows % step == 0 || r + step * k < rows)
                dst[(r + step * k) * pitch + c] = v;
        }
        return;
    }
FA_UNROLL
    for (int e0 = 0; e0 < rows * cols4; e0 += FA_NT) {
        const int e = e0 + lid;
        const int r = e / cols4, c = e - r * cols4;
        if (e < rows * cols4) {
            float4 v = (float4)(0.0f);
            if (r < valid && c0 + 4 * c < FA_D)
                v = fa_bwd_load4(src, base + (long)r * stride + c0 + 4 * c);
            dst[r * pitch + c] = v;
        }
    }
}

/* x = A B^T over the head dim, A the tile's BM query-side rows at a[a_base + r * a_ss] (a_rows
 * of them valid), B its BN key-side rows: the S and dP products, through the stage. */
inline void fa_bwd_dot(float x[S_TM][S_TN], __local float4 *stage, __global const fa_st *a,
                       long a_base, long a_ss, int a_rows, __global const fa_st *b, long b_base,
                       long b_ss, int b_rows, int2 s)
{
    __local float4 *as = stage, *bs = stage + FA_BM * LDC;
FA_UNROLL
    for (int i = 0; i < S_TM; i++)
FA_UNROLL
        for (int j = 0; j < S_TN; j++)
            x[i][j] = 0.0f;
    for (int c0 = 0; c0 < FA_D; c0 += FA_DC) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the stage's previous readers are done */
        fa_bwd_stage(as, LDC, a, a_base, a_ss, a_rows, FA_BM, c0, FA_DC / 4);
        fa_bwd_stage(bs, LDC, b, b_base, b_ss, b_rows, FA_BN, c0, FA_DC / 4);
        barrier(CLK_LOCAL_MEM_FENCE);
FA_UNROLL_STEPS
        for (int c = 0; c < FA_DC / 4; c++) {
            float4 av[S_TM], bv[S_TN];
FA_UNROLL
            for (int i = 0; i < S_TM; i++)
                av[i] = as[(s.y + SY * i) * LDC + c];
FA_UNROLL
            for (int j = 0; j < S_TN; j++)
                bv[j] = bs[(s.x + FA_SX * j) * LDC + c];
FA_UNROLL
            for (int i = 0; i < S_TM; i++)
FA_UNROLL
                for (int j = 0; j < S_TN; j++) {
                    x[i][j] = fma(av[i].x, bv[j].x, x[i][j]);
                    x[i][j] = fma(av[i].y, bv[j].y, x[i][j]);
                    x[i][j] = fma(av[i].z, bv[j].z, x[i][j]);
                    x[i][j] = fma(av[i].w, bv[j].w, x[i][j]);
                }
        }
    }
}

/* What fa_bwd_p needs besides the tile: the raw score's multiplier and the softcap (fa_score),
 * and the mask's bounds (FA_LEFT, FA_RIGHT). */
typedef struct fa_bwd_variant {
    float score_mul, cap_log2;
    int left, right;
    float slope2; /* the head's ALiBi slope in log2 units (fa_alibi_slope) */
    long bias_at; /* the additive bias's element (b, m0, h, n0) (FA_BIAS) */
    long bias_ss; /* its query stride */
} fa_bwd_variant;

/* P from S (in x) into p[r * rs + c * cs] for query row r and key c of the tile: zero where
 * the key is past `keys`, the row past `rows` or without keys, or outside the row's mask (key
 * c - r against the diagonal lim = m0 + diag - n0); with FA_SOFTCAP the softcap's 1 - tanh^2
 * into sd. */
inline void fa_bwd_p(float x[S_TM][S_TN], float sd[S_TM][S_TN], __local float *p, int rs, int cs,
                     __local const float *lse_s, int2 s, int rows, int keys, int lim,
                     fa_bwd_variant var, __global const fa_bias_t *bias)
{
FA_UNROLL
    for (int i = 0; i < S_TM; i++) {
        const int r = s.y + SY * i;
        const float l2 = lse_s[r];
FA_UNROLL
        for (int j = 0; j < S_TN; j++) {
            const int c = s.x + FA_SX * j;
            const bool visible = r < rows && c < keys && l2 != -INFINITY &&
                                 fa_sees(c - r, lim, var.left, var.right);
            float sc = fa_score(x[i][j], var.score_mul, var.cap_log2, &sd[i][j]) +
                       fa_alibi(var.slope2, c - r, lim);
            if (FA_BIAS && visible)
                sc += fa_bias(bias, var.bias_at + (long)r * var.bias_ss + c);
            p[r * rs + c * cs] = visible ? exp2(sc - l2) : 0.0f;
        }
    }
}

/* dS = P * (dP - Delta) (with FA_SOFTCAP times sd) into ds, from dP (in x) and this work-item's
 * own entries of p. */
inline void fa_bwd_ds(float x[S_TM][S_TN], float sd[S_TM][S_TN], __local const float *p,
                      __local float *ds, int rs, int cs, __local const float *dl_s, int2 s)
{
FA_UNROLL
    for (int i = 0; i < S_TM; i++) {
        const int r = s.y + SY * i;
        const float dl = dl_s[r];
FA_UNROLL
        for (int j = 0; j < S_TN; j++) {
            const int at = r * rs + (s.x + FA_SX * j) * cs;
#if FA_SOFTCAP
            ds[at] = p[at] * (x[i][j] - dl) * sd[i][j];
#else
            ds[at] = p[at] * (x[i][j] - dl);
#endif
        }
    }
}

/* Keeps the row strides of q, k, v and dO in local memory, read back inside the tile loops:
 * there they are loop-variant to the compiler (barriers may write local memory), which would
 * otherwise hoist every row offset of every staged load and hold them all in registers. */
inline void fa_bwd_strides(__local long *ss, long q_ss, long k_ss, long v_ss, long g_ss)
{
    if (get_local_id(0) == 0) {
        ss[0] = q_ss;
        ss[1] = k_ss;
        ss[2] = v_ss;
        ss[3] = g_ss;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* LSE (as log2) and Delta of query rows m0.., zero past the end. */
inline void fa_bwd_row_stats(__local float *lse_s, __local float *dl_s, __global const float *lse,
                             long l_base, long l_ss, __global const float *delta, long d_base,
                             int rows)
{
    for (int r = (int)get_local_id(0); r < FA_BM; r += FA_NT) {
        /* log2 units; NaN from FA_LSE_LIMIT on (flashattn.h: the f32 LSE no longer resolves P) */
        const float v = r < rows ? lse[l_base + (long)r * l_ss] : -INFINITY;
        lse_s[r] = fabs(v) < FA_LSE_LIMIT || v == -INFINITY ? v * FA_LOG2E : NAN;
        dl_s[r] = r < rows ? delta[d_base + r] : 0.0f;
    }
}

/* ACC[4 i + e][j] += W[i].e * Y[j]: one step of a product whose work-item rows come in groups
 * of 4 (W) and whose columns are float4 groups of the head dim (Y). */
#define FA_RANK1(ACC, W, Y, TM_, TN_)                                                              \
    FA_UNROLL for (int i_ = 0; i_ < TM_; i_++)                                                     \
        FA_UNROLL for (int j_ = 0; j_ < TN_; j_++) {                                               \
            ACC[4 * i_][j_] = fma((float4)(W[i_].x), Y[j_], ACC[4 * i_][j_]);                      \
            ACC[4 * i_ + 1][j_] = fma((float4)(W[i_].y), Y[j_], ACC[4 * i_ + 1][j_]);              \
            ACC[4 * i_ + 2][j_] = fma((float4)(W[i_].z), Y[j_], ACC[4 * i_ + 2][j_]);              \
            ACC[4 * i_ + 3][j_] = fma((float4)(W[i_].w), Y[j_], ACC[4 * i_ + 3][j_]);              \
        }

#define FA_BWD_ARGS                                                                               \
    __global const fa_st *q, long q_off, long q_sb, long q_ss, long q_sh,                         \
        __global const fa_st *k, long k_off, long k_sb, long k_ss, long k_sh,                     \
        __global const fa_st *v, long v_off, long v_sb, long v_ss, long v_sh,                     \
        __global const fa_st *d_o, long g_off, long g_sb, long g_ss, long g_sh,                   \
        __global const float *lse, long l_off, long l_sb, long l_ss, long l_sh,                   \
        __global const float *delta, __global fa_st *out, long x_off, long x_sb, long x_ss,       \
        long x_sh, __global fa_st *out2, long y_off, long y_sb, long y_ss, long y_sh, int seq_q,  \
        int seq_k, int heads_q, float score_mul, float scale, float cap_log2, int win_left,       \
        int win_right, __global const float *al, long al_off, long al_sb, long al_ss, long al_sh, \
        __global const fa_bias_t *bi, long bi_off, long bi_sb, long bi_ss, long bi_sh

/* out = dK, out2 = dV. */
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void fa_backward_dkdv(FA_BWD_ARGS)
{
    __local float4 stage[STAGE];
    __local float4 ps[FA_BM * LDK], ds[FA_BM * LDK];
    __local float lse_s[FA_BM], dl_s[FA_BM];
    __local float *pf = (__local float *)ps, *dsf = (__local float *)ds;

    const int lid = (int)get_local_id(0);
    const int n0 = (int)get_group_id(0) * FA_BN;
    const long hk = (long)get_group_id(1), b = (long)get_group_id(2);
    const int keys = min(FA_BN, seq_k - n0);
    const int diag = seq_k - seq_q;
    const long kb = k_off + b * k_sb + hk * k_sh + (long)n0 * k_ss;
    const long vb = v_off + b * v_sb + hk * v_sh + (long)n0 * v_ss;
    const int2 s = fa_grid(lid, FA_SX, SY), o = fa_grid(lid, FA_KX, KY);
    __local long ss[4];
    fa_bwd_strides(ss, q_ss, k_ss, v_ss, g_ss);

    float4 dk[4 * K_TM][K_TN], dv[4 * K_TM][K_TN];
FA_UNROLL
    for (int i = 0; i < 4 * K_TM; i++)
FA_UNROLL
        for (int j = 0; j < K_TN; j++)
            dk[i][j] = dv[i][j] = (float4)(0.0f);

    /* The query rows that see these keys: from n0 - diag - right (causal: right = 0) to
     * n0 + keys - 1 - diag + left where those bounds are set. One flat loop over the query tiles
     * of the FA_GQA heads (fewer values for the compiler to keep than two nested). */
    fa_bwd_variant var = {score_mul,          cap_log2, FA_LEFT(win_left), FA_RIGHT(win_right),
                          0.0f,               0,        bi_ss};
    (void)al_ss;
    const int m_begin = var.right < 0 ? 0 : clamp(n0 - diag - var.right, 0, seq_q) / FA_BM * FA_BM;
    const int m_end = var.left < 0 ? seq_q : clamp(n0 + keys - diag + var.left, 0, seq_q);
    const int tiles = m_end > m_begin ? (m_end - m_begin + FA_BM - 1) / FA_BM : 0;
    for (int t = 0; t < FA_GQA * tiles; t++) {
        const long h = hk * FA_GQA + t / tiles;
        const int m0 = m_begin + t % tiles * FA_BM;
        const int rows = min(FA_BM, seq_q - m0);
        var.slope2 = fa_alibi_slope(al, al_off + b * al_sb + h * al_sh);
        var.bias_at = bi_off + b * bi_sb + h * bi_sh + (long)m0 * bi_ss + n0;
        const long qb = q_off + b * q_sb + h * q_sh + (long)m0 * q_ss;
        const long gb = g_off + b * g_sb + h * g_sh + (long)m0 * g_ss;
        /* the previous tile read these before the barriers of its dV/dK rounds */
        fa_bwd_row_stats(lse_s, dl_s, lse, l_off + b * l_sb + h * l_sh + (long)m0 * l_ss, l_ss,
                         delta, (b * heads_q + h) * (long)seq_q + m0, rows);
        float x[S_TM][S_TN], sd[S_TM][S_TN];
        fa_bwd_dot(x, stage, q, qb, ss[0], rows, k, kb, ss[1], keys, s);
        fa_bwd_p(x, sd, pf, 4 * LDK, 1, lse_s, s, rows, keys, m0 + diag - n0, var, bi);
        fa_bwd_dot(x, stage, d_o, gb, ss[3], rows, v, vb, ss[2], keys, s);
        fa_bwd_ds(x, sd, pf, dsf, 4 * LDK, 1, dl_s, s);

        for (int r0 = 0; r0 < rows; r0 += FA_RK) {
            __local float4 *qs = stage, *dos = stage + FA_RK * LDD;
            barrier(CLK_LOCAL_MEM_FENCE); /* P, dS written; the stage's readers done */
            fa_bwd_stage(qs, LDD, q, qb + (long)r0 * ss[0], ss[0], rows - r0, FA_RK, 0,
                         FA_DP / 4);
            fa_bwd_stage(dos, LDD, d_o, gb + (long)r0 * ss[3], ss[3], rows - r0, FA_RK, 0,
                         FA_DP / 4);
            barrier(CLK_LOCAL_MEM_FENCE);
FA_UNROLL_STEPS
            for (int r = 0; r < FA_RK; r++) {
                float4 pv[K_TM], sv[K_TM], qv[K_TN], gv[K_TN];
FA_UNROLL
                for (int i = 0; i < K_TM; i++) {
                    pv[i] = ps[(r0 + r) * LDK + o.y + KY * i];
                    sv[i] = ds[(r0 + r) * LDK + o.y + KY * i];
                }
FA_UNROLL
                for (int j = 0; j < K_TN; j++) {
                    qv[j] = qs[r * LDD + o.x + FA_KX * j];
                    gv[j] = dos[r * LDD + o.x + FA_KX * j];
                }
                FA_RANK1(dv, pv, gv, K_TM, K_TN)
                FA_RANK1(dk, sv, qv, K_TM, K_TN)
            }
        }
    }

FA_UNROLL
    for (int i = 0; i < 4 * K_TM; i++) {
        const int c = 4 * (o.y + KY * (i / 4)) + i % 4;
        if (c < keys) {
            const long kr = x_off + b * x_sb + hk * x_sh + (long)(n0 + c) * x_ss;
            const long vr = y_off + b * y_sb + hk * y_sh + (long)(n0 + c) * y_ss;
FA_UNROLL
            for (int j = 0; j < K_TN; j++) {
                const int d = 4 * (o.x + FA_KX * j);
                if (d < FA_D) {
                    fa_bwd_store4(out, kr + d, dk[i][j] * scale);
                    fa_bwd_store4(out2, vr + d, dv[i][j]);
                }
            }
        }
    }
}

/* out = dQ; out2 is unused. */
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void fa_backward_dq(FA_BWD_ARGS)
{
    __local float4 stage[STAGE];
    __local float4 ds[FA_BN * LDQ]; /* P, then dS over it */
    __local float lse_s[FA_BM], dl_s[FA_BM];
    __local float *dsf = (__local float *)ds;
    (void)out2, (void)y_off, (void)y_sb, (void)y_ss, (void)y_sh;

    const int lid = (int)get_local_id(0);
    const int m0 = (int)get_group_id(0) * FA_BM;
    const long h = (long)get_group_id(1), b = (long)get_group_id(2);
    const long hk = h / FA_GQA;
    const int rows = min(FA_BM, seq_q - m0);
    const int diag = seq_k - seq_q;
    const long qb = q_off + b * q_sb + h * q_sh + (long)m0 * q_ss;
    const long gb = g_off + b * g_sb + h * g_sh + (long)m0 * g_ss;
    const int2 s = fa_grid(lid, FA_SX, SY), o = fa_grid(lid, FA_QX, QY);
    __local long ss[4];
    fa_bwd_strides(ss, q_ss, k_ss, v_ss, g_ss);

    fa_bwd_row_stats(lse_s, dl_s, lse, l_off + b * l_sb + h * l_sh + (long)m0 * l_ss, l_ss,
                     delta, (b * heads_q + h) * (long)seq_q + m0, rows);

    /* the keys the tile's rows see (all of them without a mask) */
    fa_bwd_variant var = {score_mul,
                          cap_log2,
                          FA_LEFT(win_left),
                          FA_RIGHT(win_right),
                          fa_alibi_slope(al, al_off + b * al_sb + h * al_sh),
                          0,
                          bi_ss};
    (void)al_ss;
    const int n_begin = fa_keys_begin(m0 + diag, var.left);
    const int n_end = fa_keys_end(m0 + rows - 1 + diag, var.right, seq_k);
    float4 acc[4 * Q_TM][Q_TN];
FA_UNROLL
    for (int i = 0; i < 4 * Q_TM; i++)
FA_UNROLL
        for (int j = 0; j < Q_TN; j++)
            acc[i][j] = (float4)(0.0f);

    for (int n0 = n_begin; n0 < n_end; n0 += FA_BN) {
        const int keys = min(FA_BN, seq_k - n0);
        const long kb = k_off + b * k_sb + hk * k_sh + (long)n0 * k_ss;
        const long vb = v_off + b * v_sb + hk * v_sh + (long)n0 * v_ss;
        float x[S_TM][S_TN], sd[S_TM][S_TN];
        var.bias_at = bi_off + b * bi_sb + h * bi_sh + (long)m0 * bi_ss + n0;
        fa_bwd_dot(x, stage, q, qb, ss[0], rows, k, kb, ss[1], keys, s);
        fa_bwd_p(x, sd, dsf, 1, 4 * LDQ, lse_s, s, rows, keys, m0 + diag - n0, var, bi);
        fa_bwd_dot(x, stage, d_o, gb, ss[3], rows, v, vb, ss[2], keys, s);
        fa_bwd_ds(x, sd, dsf, dsf, 1, 4 * LDQ, dl_s, s);

        for (int c0 = 0; c0 < keys; c0 += FA_RQ) {
            barrier(CLK_LOCAL_MEM_FENCE); /* dS written; the stage's readers done */
            fa_bwd_stage(stage, LDD, k, kb + (long)c0 * ss[1], ss[1], keys - c0, FA_RQ, 0,
                         FA_DP / 4);
            barrier(CLK_LOCAL_MEM_FENCE);
FA_UNROLL_STEPS
            for (int c = 0; c < FA_RQ; c++) {
                float4 wv[Q_TM], kv[Q_TN];
FA_UNROLL
                for (int i = 0; i < Q_TM; i++)
                    wv[i] = ds[(c0 + c) * LDQ + o.y + QY * i];
FA_UNROLL
                for (int j = 0; j < Q_TN; j++)
                    kv[j] = stage[c * LDD + o.x + FA_QX * j];
                FA_RANK1(acc, wv, kv, Q_TM, Q_TN)
            }
        }
    }

    const long xb = x_off + b * x_sb + h * x_sh;
FA_UNROLL
    for (int i = 0; i < 4 * Q_TM; i++) {
        const int r = 4 * (o.y + QY * (i / 4)) + i % 4;
        if (r < rows) {
            const long row = xb + (long)(m0 + r) * x_ss;
FA_UNROLL
            for (int j = 0; j < Q_TN; j++) {
                const int d = 4 * (o.x + FA_QX * j);
                if (d < FA_D)
                    fa_bwd_store4(out, row + d, acc[i][j] * scale);
            }
        }
    }
}
