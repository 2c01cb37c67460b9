/* Forward: one work-group per (query tile of FA_BM rows, query head, batch).
 *
 * Local memory (f32): the query tile qs (BM x D) for the whole group's life, one key/value tile
 * kv (BN x D) that holds K then V, the scores/probabilities ps (BM x BN) and per-row m, l and
 * rescale factor. Per key tile: load K -> S = Q K^T on a register tile (BM x BN, FA_S_TX
 * work-items along keys) -> masked scaled scores to ps -> one work-item per row updates the
 * online softmax (log2 domain) while the others load V over K -> O += P V on a register tile
 * (BM x D, FA_O_TX work-items along the head dim). O and LSE are written once at the end.
 * Causal: key tiles past the tile's last visible key are never visited. */

#define S_TY FA_TY(FA_S_TX)
#define S_TM FA_TM(FA_BM, FA_S_TX)
#define S_TN FA_TN(FA_BN, FA_S_TX)
#define O_TY FA_TY(FA_O_TX)
#define O_TM FA_TM(FA_BM, FA_O_TX)
#define O_TN FA_TN(FA_D, FA_O_TX)

__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void
fa_forward(__global const fa_st *q, long q_off, long q_sb, long q_ss, long q_sh,
           __global const fa_st *k, long k_off, long k_sb, long k_ss, long k_sh,
           __global const fa_st *v, long v_off, long v_sb, long v_ss, long v_sh,
           __global fa_st *o, long o_off, long o_sb, long o_ss, long o_sh,
           __global float *lse, long l_off, long l_sb, long l_ss, long l_sh, int has_lse,
           int seq_q, int seq_k, float scale_log2)
{
    __local float qs[FA_BM * FA_LDS];
    __local float kv[FA_BN * FA_LDS];
    __local float ps[FA_BM * FA_LDP];
    __local float m_s[FA_BM], l_s[FA_BM], a_s[FA_BM];

    const int lid = (int)get_local_id(0);
    const int q0 = (int)get_group_id(0) * FA_BM;
    const long h = (long)get_group_id(1), b = (long)get_group_id(2);
    const long hk = h / FA_GQA;
    const int rows = min(FA_BM, seq_q - q0);
    const int diag = seq_k - seq_q; /* query i sees key j iff j <= i + diag */

    const long kbase = k_off + b * k_sb + hk * k_sh;
    const long vbase = v_off + b * v_sb + hk * v_sh;
    fa_tile_load(qs, q, q_off + b * q_sb + h * q_sh + (long)q0 * q_ss, q_ss, rows, FA_BM);
    for (int r = lid; r < FA_BM; r += FA_NT) {
        m_s[r] = -INFINITY;
        l_s[r] = 0.0f;
    }

    int n_end = seq_k;
#if FA_CAUSAL
    n_end = clamp(q0 + rows + diag, 0, seq_k);
#endif

    const int sx = lid % FA_S_TX, sy = lid / FA_S_TX;
    const int ox = lid % FA_O_TX, oy = lid / FA_O_TX;
    float acc[O_TM][O_TN];
FA_UNROLL
    for (int i = 0; i < O_TM; i++)
FA_UNROLL
        for (int j = 0; j < O_TN; j++)
            acc[i][j] = 0.0f;

    for (int n0 = 0; n0 < n_end; n0 += FA_BN) {
        const int keys = min(FA_BN, seq_k - n0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's P V is done with kv and ps */
        fa_tile_load(kv, k, kbase + (long)n0 * k_ss, k_ss, keys, FA_BN);
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[S_TM][S_TN];
FA_UNROLL
        for (int i = 0; i < S_TM; i++)
FA_UNROLL
            for (int j = 0; j < S_TN; j++)
                s[i][j] = 0.0f;
        FA_DOT_TILE(s, qs, kv, S_TM, S_TN, S_TY, FA_S_TX, sy, sx)
FA_UNROLL
        for (int i = 0; i < S_TM; i++) {
            const int r = sy + S_TY * i;
FA_UNROLL
            for (int j = 0; j < S_TN; j++) {
                const int c = sx + FA_S_TX * j;
                bool visible = c < keys;
#if FA_CAUSAL
                visible = visible && n0 + c <= q0 + r + diag;
#endif
                ps[r * FA_LDP + c] = visible ? s[i][j] * scale_log2 : -INFINITY;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* K is no longer needed: kv takes V */

        fa_tile_load(kv, v, vbase + (long)n0 * v_ss, v_ss, keys, FA_BN);
        for (int r = lid; r < FA_BM; r += FA_NT) {
            __local float *row = ps + r * FA_LDP;
            const float m_old = m_s[r];
            float m_new = m_old;
            for (int c = 0; c < FA_BN; c++)
                m_new = fmax(m_new, row[c]);
            float sum = 0.0f, alpha = 1.0f;
            if (m_new == -INFINITY) { /* nothing visible yet: P = 0, keep m = -inf */
                for (int c = 0; c < FA_BN; c++)
                    row[c] = 0.0f;
            } else {
                alpha = exp2(m_old - m_new);
                for (int c = 0; c < FA_BN; c++) {
                    const float p = exp2(row[c] - m_new);
                    row[c] = p;
                    sum += p;
                }
            }
            m_s[r] = m_new;
            l_s[r] = l_s[r] * alpha + sum;
            a_s[r] = alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

FA_UNROLL
        for (int i = 0; i < O_TM; i++) {
            const float alpha = a_s[oy + O_TY * i];
FA_UNROLL
            for (int j = 0; j < O_TN; j++)
                acc[i][j] *= alpha;
        }
        FA_OUTER_TILE(acc, ps, kv, O_TM, O_TN, O_TY, FA_O_TX, oy, ox, keys)
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* A row with no visible key has l = 0: O = 0 and LSE = -inf, never NaN. */
    const long obase = o_off + b * o_sb + h * o_sh;
FA_UNROLL
    for (int i = 0; i < O_TM; i++) {
        const int r = oy + O_TY * i;
        if (r < rows) {
            const float l = l_s[r];
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const long row = obase + (long)(q0 + r) * o_ss;
FA_UNROLL
            for (int j = 0; j < O_TN; j++)
                fa_store(o, row + ox + FA_O_TX * j, acc[i][j] * inv);
        }
    }
    if (has_lse)
        for (int r = lid; r < rows; r += FA_NT) {
            const float l = l_s[r];
            lse[l_off + b * l_sb + h * l_sh + (long)(q0 + r) * l_ss] =
                l > 0.0f ? (m_s[r] + log2(l)) * FA_LN2 : -INFINITY;
        }
}
