/* Backward, in three deterministic passes (no atomics):
 *   fa_backward_delta: Delta[b, h, i] = sum_d dO * O, one work-item per query row;
 *   fa_backward_dkdv: one work-group per (key tile of FA_BN, key/value head, batch), looping
 *     over the FA_GQA query heads that share the key/value head and over their query tiles;
 *     it recomputes P = exp2(S * scale * log2e - LSE * log2e) and dS = P * (dP - Delta), and
 *     accumulates dV += P^T dO and dK += dS^T Q on (BN x D) register tiles (FA_K_TX along D);
 *   fa_backward_dq: one work-group per (query tile of FA_BM, query head, batch), looping over
 *     key tiles and accumulating dQ += dS K on a (BM x D) register tile (FA_O_TX along D).
 * Local memory (f32): a Q and a dO tile (BM x D), a K and a V tile (BN x D), P and dS
 * (BM x BN), and LSE and Delta per query row. S and dP share one register tile layout
 * (BM x BN, FA_S_TX along keys). Rows that saw no key (LSE = -inf) get P = 0. */

#define S_TY FA_TY(FA_S_TX)
#define S_TM FA_TM(FA_BM, FA_S_TX)
#define S_TN FA_TN(FA_BN, FA_S_TX)
#define O_TY FA_TY(FA_O_TX)
#define O_TM FA_TM(FA_BM, FA_O_TX)
#define O_TN FA_TN(FA_D, FA_O_TX)
#define K_TY FA_TY(FA_K_TX)
#define K_TM FA_TM(FA_BN, FA_K_TX)
#define K_TN FA_TN(FA_D, FA_K_TX)

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

/* The (BM x BN) tile shared by both passes: P and dS = P * (dP - Delta) into ps and ds, from
 * qs, dos (query tile starting at row m0) and ks, vs (key tile starting at n0). */
inline void fa_bwd_scores(__local const float *qs, __local const float *dos,
                          __local const float *ks, __local const float *vs,
                          __local const float *lse_s, __local const float *dl_s,
                          __local float *ps, __local float *ds, int m0, int rows, int n0,
                          int keys, int diag, float scale_log2)
{
    const int lid = (int)get_local_id(0);
    const int sx = lid % FA_S_TX, sy = lid / FA_S_TX;
    float s[S_TM][S_TN], dp[S_TM][S_TN];
FA_UNROLL
    for (int i = 0; i < S_TM; i++)
FA_UNROLL
        for (int j = 0; j < S_TN; j++)
            s[i][j] = dp[i][j] = 0.0f;
    FA_DOT_TILE(s, qs, ks, S_TM, S_TN, S_TY, FA_S_TX, sy, sx)
    FA_DOT_TILE(dp, dos, vs, S_TM, S_TN, S_TY, FA_S_TX, sy, sx)
FA_UNROLL
    for (int i = 0; i < S_TM; i++) {
        const int r = sy + S_TY * i;
        const float l2 = lse_s[r];
        const float dl = dl_s[r];
FA_UNROLL
        for (int j = 0; j < S_TN; j++) {
            const int c = sx + FA_S_TX * j;
            bool visible = r < rows && c < keys && l2 != -INFINITY;
#if FA_CAUSAL
            visible = visible && n0 + c <= m0 + r + diag;
#endif
            const float p = visible ? exp2(s[i][j] * scale_log2 - l2) : 0.0f;
            ps[r * FA_LDP + c] = p;
            ds[r * FA_LDP + c] = p * (dp[i][j] - dl);
        }
    }
}

/* LSE (as log2) and Delta of query rows m0.., zero past the end. */
inline void fa_bwd_row_stats(__local float *lse_s, __local float *dl_s, __global const float *lse,
                             long l_base, long l_ss, __global const float *delta, long d_base,
                             int rows)
{
    for (int r = (int)get_local_id(0); r < FA_BM; r += FA_NT) {
        lse_s[r] = r < rows ? lse[l_base + (long)r * l_ss] * FA_LOG2E : -INFINITY;
        dl_s[r] = r < rows ? delta[d_base + r] : 0.0f;
    }
}

#define FA_BWD_ARGS                                                                               \
    __global const fa_st *q, long q_off, long q_sb, long q_ss, long q_sh,                         \
        __global const fa_st *k, long k_off, long k_sb, long k_ss, long k_sh,                     \
        __global const fa_st *v, long v_off, long v_sb, long v_ss, long v_sh,                     \
        __global const fa_st *d_o, long g_off, long g_sb, long g_ss, long g_sh,                   \
        __global const float *lse, long l_off, long l_sb, long l_ss, long l_sh,                   \
        __global const float *delta, __global fa_st *out, long x_off, long x_sb, long x_ss,       \
        long x_sh, __global fa_st *out2, long y_off, long y_sb, long y_ss, long y_sh, int seq_q,  \
        int seq_k, int heads_q, float scale_log2, float scale

/* out = dK, out2 = dV. */
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void fa_backward_dkdv(FA_BWD_ARGS)
{
    __local float qs[FA_BM * FA_LDS], dos[FA_BM * FA_LDS];
    __local float ks[FA_BN * FA_LDS], vs[FA_BN * FA_LDS];
    __local float ps[FA_BM * FA_LDP], ds[FA_BM * FA_LDP];
    __local float lse_s[FA_BM], dl_s[FA_BM];

    const int lid = (int)get_local_id(0);
    const int n0 = (int)get_group_id(0) * FA_BN;
    const long hk = (long)get_group_id(1), b = (long)get_group_id(2);
    const int keys = min(FA_BN, seq_k - n0);
    const int diag = seq_k - seq_q;

    fa_tile_load(ks, k, k_off + b * k_sb + hk * k_sh + (long)n0 * k_ss, k_ss, keys, FA_BN);
    fa_tile_load(vs, v, v_off + b * v_sb + hk * v_sh + (long)n0 * v_ss, v_ss, keys, FA_BN);

    const int kx = lid % FA_K_TX, ky = lid / FA_K_TX;
    float dk[K_TM][K_TN], dv[K_TM][K_TN];
FA_UNROLL
    for (int i = 0; i < K_TM; i++)
FA_UNROLL
        for (int j = 0; j < K_TN; j++)
            dk[i][j] = dv[i][j] = 0.0f;

    /* Causal: query rows before n0 - diag see none of these keys. */
    int m_begin = 0;
#if FA_CAUSAL
    m_begin = clamp(n0 - diag, 0, seq_q) / FA_BM * FA_BM;
#endif
    for (int g = 0; g < FA_GQA; g++) {
        const long h = hk * FA_GQA + g;
        for (int m0 = m_begin; m0 < seq_q; m0 += FA_BM) {
            const int rows = min(FA_BM, seq_q - m0);
            barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is done with qs, dos, ps, ds */
            fa_tile_load(qs, q, q_off + b * q_sb + h * q_sh + (long)m0 * q_ss, q_ss, rows, FA_BM);
            fa_tile_load(dos, d_o, g_off + b * g_sb + h * g_sh + (long)m0 * g_ss, g_ss, rows,
                         FA_BM);
            fa_bwd_row_stats(lse_s, dl_s, lse, l_off + b * l_sb + h * l_sh + (long)m0 * l_ss,
                             l_ss, delta, (b * heads_q + h) * (long)seq_q + m0, rows);
            barrier(CLK_LOCAL_MEM_FENCE);
            fa_bwd_scores(qs, dos, ks, vs, lse_s, dl_s, ps, ds, m0, rows, n0, keys, diag,
                          scale_log2);
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int r = 0; r < rows; r++) {
                float p[K_TM], dsv[K_TM], gq[K_TN], gd[K_TN];
FA_UNROLL
                for (int i = 0; i < K_TM; i++) {
                    p[i] = ps[r * FA_LDP + ky + K_TY * i];
                    dsv[i] = ds[r * FA_LDP + ky + K_TY * i];
                }
FA_UNROLL
                for (int j = 0; j < K_TN; j++) {
                    gq[j] = qs[r * FA_LDS + kx + FA_K_TX * j];
                    gd[j] = dos[r * FA_LDS + kx + FA_K_TX * j];
                }
FA_UNROLL
                for (int i = 0; i < K_TM; i++)
FA_UNROLL
                    for (int j = 0; j < K_TN; j++) {
                        dv[i][j] = fma(p[i], gd[j], dv[i][j]);
                        dk[i][j] = fma(dsv[i], gq[j], dk[i][j]);
                    }
            }
        }
    }

FA_UNROLL
    for (int i = 0; i < K_TM; i++) {
        const int c = ky + K_TY * i;
        if (c < keys) {
            const long kr = x_off + b * x_sb + hk * x_sh + (long)(n0 + c) * x_ss;
            const long vr = y_off + b * y_sb + hk * y_sh + (long)(n0 + c) * y_ss;
FA_UNROLL
            for (int j = 0; j < K_TN; j++) {
                fa_store(out, kr + kx + FA_K_TX * j, dk[i][j] * scale);
                fa_store(out2, vr + kx + FA_K_TX * j, dv[i][j]);
            }
        }
    }
}

/* out = dQ; out2 is unused. */
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void fa_backward_dq(FA_BWD_ARGS)
{
    __local float qs[FA_BM * FA_LDS], dos[FA_BM * FA_LDS];
    __local float ks[FA_BN * FA_LDS], vs[FA_BN * FA_LDS];
    __local float ds[FA_BM * FA_LDP]; /* P is not needed here: it is written, then dS over it */
    __local float lse_s[FA_BM], dl_s[FA_BM];
    (void)out2, (void)y_off, (void)y_sb, (void)y_ss, (void)y_sh;

    const int lid = (int)get_local_id(0);
    const int m0 = (int)get_group_id(0) * FA_BM;
    const long h = (long)get_group_id(1), b = (long)get_group_id(2);
    const long hk = h / FA_GQA;
    const int rows = min(FA_BM, seq_q - m0);
    const int diag = seq_k - seq_q;

    fa_tile_load(qs, q, q_off + b * q_sb + h * q_sh + (long)m0 * q_ss, q_ss, rows, FA_BM);
    fa_tile_load(dos, d_o, g_off + b * g_sb + h * g_sh + (long)m0 * g_ss, g_ss, rows, FA_BM);
    fa_bwd_row_stats(lse_s, dl_s, lse, l_off + b * l_sb + h * l_sh + (long)m0 * l_ss, l_ss,
                     delta, (b * heads_q + h) * (long)seq_q + m0, rows);

    int n_end = seq_k;
#if FA_CAUSAL
    n_end = clamp(m0 + rows + diag, 0, seq_k);
#endif
    const int ox = lid % FA_O_TX, oy = lid / FA_O_TX;
    float acc[O_TM][O_TN];
FA_UNROLL
    for (int i = 0; i < O_TM; i++)
FA_UNROLL
        for (int j = 0; j < O_TN; j++)
            acc[i][j] = 0.0f;

    const long kbase = k_off + b * k_sb + hk * k_sh, vbase = v_off + b * v_sb + hk * v_sh;
    for (int n0 = 0; n0 < n_end; n0 += FA_BN) {
        const int keys = min(FA_BN, seq_k - n0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is done with ks, vs, ds */
        fa_tile_load(ks, k, kbase + (long)n0 * k_ss, k_ss, keys, FA_BN);
        fa_tile_load(vs, v, vbase + (long)n0 * v_ss, v_ss, keys, FA_BN);
        barrier(CLK_LOCAL_MEM_FENCE);
        fa_bwd_scores(qs, dos, ks, vs, lse_s, dl_s, ds, ds, m0, rows, n0, keys, diag,
                      scale_log2);
        barrier(CLK_LOCAL_MEM_FENCE);
        FA_OUTER_TILE(acc, ds, ks, O_TM, O_TN, O_TY, FA_O_TX, oy, ox, keys)
    }

    const long qb = x_off + b * x_sb + h * x_sh;
FA_UNROLL
    for (int i = 0; i < O_TM; i++) {
        const int r = oy + O_TY * i;
        if (r < rows) {
            const long row = qb + (long)(m0 + r) * x_ss;
FA_UNROLL
            for (int j = 0; j < O_TN; j++)
                fa_store(out, row + ox + FA_O_TX * j, acc[i][j] * scale);
        }
    }
}
