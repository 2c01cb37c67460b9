// SPDX-License-Identifier: MIT
/* Forward: one work-group per (query tile of FA_BM rows, query head, batch).
 *
 * Local memory (f32): the query tile qs (BM x D) for the group's life; one key/value tile kv
 * (BN x D) that holds K, then V; P transposed, pt (BN x BM, key-major, so that a work-item's
 * rows of one key are one vector load); red, S_TX partial values per query row (row maxima
 * during a tile, partial row sums at the end); alpha per row.
 *
 * Two register tiles, both with contiguous rows per work-item:
 *   S (BM x BN): work-item (sy, sx) owns rows sy*S_TM.. and keys sx + S_TX*j. It keeps the
 *     running max and its own partial row sum of its keys: only the tile's row maximum is
 *     exchanged (through red), the sums are added once at the end.
 *   O (BM x D): work-item (oy, ox) owns rows oy*O_TM.. and the float4 column groups
 *     ox + O_TX*g (g < O_TG, within D), so each key of P V costs ceil(O_TM/4) + O_TG vector
 *     loads.
 * Per key tile: K (fetched earlier) to kv, fetch V -> S = Q K^T, mask, scale (log2 domain), row
 * max partials -> barrier -> V to kv, fetch the next K; new max, P = exp2(S - m) into pt,
 * alpha -> barrier -> O = alpha O + P V. Causal and a sliding window (FA_WINDOW): key tiles no
 * row of the tile sees are never visited; FA_SOFTCAP: each score goes through fa_score; FA_ALIBI:
 * the bias of the head's slope (fa_alibi) is added to it; FA_BIAS: the additive bias (fa_bias) as
 * well.
 *
 * The local tiles are declared as float4 arrays: NVIDIA's OpenCL compiler splits vload4 from a
 * __local float pointer into four scalar loads, but keeps float4 element accesses whole. */
FA_CL_FWD_OPTIONS(FA_CL_REQUIRE)

#define S_TY (FA_NT / FA_S_TX)
#define S_TM (FA_BM / S_TY)
#define S_TN (FA_BN / FA_S_TX)
#define O_TY (FA_NT / FA_O_TX)
#define O_TM (FA_BM / O_TY)
#define O_TG ((FA_D / 4 + FA_O_TX - 1) / FA_O_TX)
/* whether every work-item's last column group lies inside D (else it is skipped) */
#define O_FULL ((FA_D / 4) % FA_O_TX == 0)
#define O_HAS(g) (O_FULL || ox + FA_O_TX * (g) < FA_D / 4)
#define LDPT (FA_BM + 4)

#define LDS4 (FA_LDS / 4)

/* The O_TM probabilities of key c for rows r0.. (contiguous in pt). */
#if O_TM >= 4
#define FA_P_LOAD(p, c, r0)                                                                        \
    FA_UNROLL for (int i4_ = 0; i4_ < O_TM; i4_ += 4)                                              \
        vstore4(pt4[((c) * LDPT + (r0) + i4_) / 4], 0, p + i4_);
#else
#define FA_P_LOAD(p, c, r0)                                                                        \
    FA_UNROLL for (int i_ = 0; i_ < O_TM; i_++) p[i_] = pt[(c) * LDPT + (r0) + i_];
#endif

/* Tiles travel global -> registers -> local: a tile's loads are issued one phase before it is
 * stored to local memory, so their latency hides behind the products in between. In registers
 * they keep their storage format (raw bits for f16/bf16: fa_common.cl). */

/* Vectors of a BN x D tile per work-item. */
#define KE ((FA_BN * (FA_D / 4) + FA_NT - 1) / FA_NT)

/* Issues the loads of rows [0, valid) of a BN x D tile (row r at src[base + r * stride]) into
 * reg; rows past `valid` are zero. */
inline void tile_fetch(fa_raw4 *reg, __global const fa_st *src, long base, long stride, int valid)
{
    const bool aligned = ((base | stride) & 3) == 0;
FA_UNROLL
    for (int k = 0; k < KE; k++) {
        const int e = (int)get_local_id(0) + FA_NT * k;
        const int r = e / (FA_D / 4), c4 = e - r * (FA_D / 4);
        reg[k] = (fa_raw4)(0);
        if (e < FA_BN * (FA_D / 4) && r < valid)
            reg[k] = raw_load4(src, base + (long)r * stride + 4 * c4, aligned);
    }
}

inline void tile_store(__local float4 *dst, const fa_raw4 *reg)
{
FA_UNROLL
    for (int k = 0; k < KE; k++) {
        const int e = (int)get_local_id(0) + FA_NT * k;
        const int r = e / (FA_D / 4), c4 = e - r * (FA_D / 4);
        if (e < FA_BN * (FA_D / 4))
            dst[r * LDS4 + c4] = raw_to_f32(reg[k]);
    }
}

/* The query tile, loaded once. */
inline void q_tile_load(__local float4 *dst, __global const fa_st *src, long base, long stride,
                        int valid)
{
    const bool aligned = ((base | stride) & 3) == 0;
    for (int e = (int)get_local_id(0); e < FA_BM * (FA_D / 4); e += FA_NT) {
        const int r = e / (FA_D / 4), c4 = e - r * (FA_D / 4);
        float4 x = (float4)(0.0f);
        if (r < valid)
            x = raw_to_f32(raw_load4(src, base + (long)r * stride + 4 * c4, aligned));
        dst[r * LDS4 + c4] = x;
    }
}

__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void
fa_forward(__global const fa_st *q, long q_off, long q_sb, long q_ss, long q_sh,
           __global const fa_st *k, long k_off, long k_sb, long k_ss, long k_sh,
           __global const fa_st *v, long v_off, long v_sb, long v_ss, long v_sh,
           __global fa_st *o, long o_off, long o_sb, long o_ss, long o_sh,
           __global float *lse, long l_off, long l_sb, long l_ss, long l_sh, int has_lse,
           __global const int *sl, long sl_off, long sl_sb, long sl_ss, long sl_sh, int has_sl,
           int seq_q, int seq_cap, float score_mul, float cap_log2, int win_left, int win_right,
           __global const float *al, long al_off, long al_sb, long al_ss, long al_sh,
           __global const fa_bias_t *bi, long bi_off, long bi_sb, long bi_ss, long bi_sh)
{
    __local float4 qs4[FA_BM * LDS4];
    __local float4 kv4[FA_BN * LDS4];
    __local float4 pt4[FA_BN * LDPT / 4];
    __local float *pt = (__local float *)pt4;
    __local float red[FA_S_TX * FA_BM];
    __local float a_s[FA_BM], m_s[FA_BM];

    const int lid = (int)get_local_id(0);
    const int q0 = (int)get_group_id(0) * FA_BM;
    const long h = (long)get_group_id(1), b = (long)get_group_id(2);
    const long hk = h / FA_GQA;
    /* Batch entry b's keys: its seqlens_k value where given (clamped, so that whatever the
     * buffer holds no read passes the cache; the host checked the values), else all of them. */
    const int seq_k = has_sl ? clamp(sl[sl_off + b * sl_sb], 0, seq_cap) : seq_cap;
    const int rows = min(FA_BM, seq_q - q0);
    const int diag = seq_k - seq_q; /* query i sees key j iff j <= i + diag */
    const float slope2 = fa_alibi_slope(al, al_off + b * al_sb + h * al_sh);
    (void)al_ss;
    const long bi_row = bi_off + b * bi_sb + h * bi_sh + (long)q0 * bi_ss; /* bias (b, q0, h, 0) */

    const long kbase = k_off + b * k_sb + hk * k_sh;
    const long vbase = v_off + b * v_sb + hk * v_sh;
    q_tile_load(qs4, q, q_off + b * q_sb + h * q_sh + (long)q0 * q_ss, q_ss, rows);

    /* the keys the tile's rows see: from the first row's window start to the last row's end */
    const int left = FA_LEFT(win_left), right = FA_RIGHT(win_right);
    const int n_begin = fa_keys_begin(q0 + diag, left);
    const int n_end = fa_keys_end(q0 + rows - 1 + diag, right, seq_k);

    const int sx = lid % FA_S_TX, sy = lid / FA_S_TX, sr = sy * S_TM;
    const int ox = lid % FA_O_TX, oy = lid / FA_O_TX, orow = oy * O_TM;
    float m_run[S_TM], l_part[S_TM];
    float4 acc[O_TM][O_TG];
FA_UNROLL
    for (int i = 0; i < S_TM; i++) {
        m_run[i] = -INFINITY;
        l_part[i] = 0.0f;
    }
FA_UNROLL
    for (int i = 0; i < O_TM; i++)
FA_UNROLL
        for (int g = 0; g < O_TG; g++)
            acc[i][g] = (float4)(0.0f);

    fa_raw4 reg[KE];
    if (n_begin < n_end)
        tile_fetch(reg, k, kbase + (long)n_begin * k_ss, k_ss, min(FA_BN, seq_k - n_begin));
    for (int n0 = n_begin; n0 < n_end; n0 += FA_BN) {
        const int keys = min(FA_BN, seq_k - n0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's P V is done with kv and pt */
        tile_store(kv4, reg);
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_fetch(reg, v, vbase + (long)n0 * v_ss, v_ss, keys);

        float s[S_TM][S_TN];
FA_UNROLL
        for (int i = 0; i < S_TM; i++)
FA_UNROLL
            for (int j = 0; j < S_TN; j++)
                s[i][j] = 0.0f;
        for (int d = 0; d < FA_D; d += 4) {
            float4 a[S_TM], bk[S_TN];
FA_UNROLL
            for (int i = 0; i < S_TM; i++)
                a[i] = qs4[(sr + i) * LDS4 + d / 4];
FA_UNROLL
            for (int j = 0; j < S_TN; j++)
                bk[j] = kv4[(sx + FA_S_TX * j) * LDS4 + d / 4];
FA_UNROLL
            for (int i = 0; i < S_TM; i++)
FA_UNROLL
                for (int j = 0; j < S_TN; j++) {
                    s[i][j] = fma(a[i].x, bk[j].x, s[i][j]);
                    s[i][j] = fma(a[i].y, bk[j].y, s[i][j]);
                    s[i][j] = fma(a[i].z, bk[j].z, s[i][j]);
                    s[i][j] = fma(a[i].w, bk[j].w, s[i][j]);
                }
        }
FA_UNROLL
        for (int i = 0; i < S_TM; i++) {
            float mx = -INFINITY;
FA_UNROLL
            for (int j = 0; j < S_TN; j++) {
                const int c = sx + FA_S_TX * j;
                const bool visible = c < keys && fa_sees(n0 + c, q0 + sr + i + diag, left, right);
                float slope;
                float x = fa_score(s[i][j], score_mul, cap_log2, &slope) +
                          fa_alibi(slope2, n0 + c, q0 + sr + i + diag);
                if (FA_BIAS && c < keys && sr + i < rows) /* inside the bias's (query, key) */
                    x += fa_bias(bi, bi_row + (long)(sr + i) * bi_ss + n0 + c);
                s[i][j] = visible ? x : -INFINITY;
                mx = fmax(mx, s[i][j]);
            }
            red[sx * FA_BM + sr + i] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* row maxima posted; every S is done with K */

        tile_store(kv4, reg);
        if (n0 + FA_BN < n_end)
            tile_fetch(reg, k, kbase + (long)(n0 + FA_BN) * k_ss, k_ss,
                       min(FA_BN, seq_k - n0 - FA_BN));
FA_UNROLL
        for (int i = 0; i < S_TM; i++) {
            float m_new = m_run[i];
            for (int x = 0; x < FA_S_TX; x++)
                m_new = fmax(m_new, red[x * FA_BM + sr + i]);
            /* m_new = -inf: no finite score so far, so nothing is rescaled and P = exp2(s):
             * 0 for a masked score, NaN for a NaN one (fmax skipped it) */
            const bool none = m_new == -INFINITY;
            const float alpha = none ? 1.0f : exp2(m_run[i] - m_new);
            const float m_use = none ? 0.0f : m_new;
            float sum = 0.0f;
FA_UNROLL
            for (int j = 0; j < S_TN; j++) {
                const float p = exp2(s[i][j] - m_use);
                pt[(sx + FA_S_TX * j) * LDPT + sr + i] = p;
                sum += p;
            }
            l_part[i] = l_part[i] * alpha + sum;
            m_run[i] = m_new;
            if (sx == 0)
                a_s[sr + i] = alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* P, alpha and V in place */

FA_UNROLL
        for (int i = 0; i < O_TM; i++) {
            const float alpha = a_s[orow + i];
FA_UNROLL
            for (int g = 0; g < O_TG; g++)
                acc[i][g] *= alpha;
        }
        for (int c = 0; c < FA_BN; c++) {
            float p[O_TM];
            float4 vv[O_TG];
            FA_P_LOAD(p, c, orow)
FA_UNROLL
            for (int g = 0; g < O_TG; g++)
                vv[g] = O_HAS(g) ? kv4[c * LDS4 + ox + FA_O_TX * g] : (float4)(0.0f);
FA_UNROLL
            for (int i = 0; i < O_TM; i++)
FA_UNROLL
                for (int g = 0; g < O_TG; g++)
                    acc[i][g] = fma((float4)(p[i]), vv[g], acc[i][g]);
        }
    }

    /* The row sums: each S work-item holds the part over its keys. */
    barrier(CLK_LOCAL_MEM_FENCE);
FA_UNROLL
    for (int i = 0; i < S_TM; i++) {
        red[sx * FA_BM + sr + i] = l_part[i];
        if (sx == 0)
            m_s[sr + i] = m_run[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* A row with no visible key has l = 0: O = 0 and LSE = -inf, never NaN. */
    const long obase = o_off + b * o_sb + h * o_sh;
FA_UNROLL
    for (int i = 0; i < O_TM; i++) {
        const int r = orow + i;
        if (r < rows) {
            float l = 0.0f;
            for (int x = 0; x < FA_S_TX; x++)
                l += red[x * FA_BM + r];
            const float inv = l != 0.0f ? 1.0f / l : 0.0f;
            const long row = obase + (long)(q0 + r) * o_ss;
FA_UNROLL
            for (int g = 0; g < O_TG; g++) {
                if (!O_HAS(g))
                    continue;
                const int col = 4 * (ox + FA_O_TX * g);
                const float4 x = acc[i][g] * inv;
                fa_store(o, row + col, x.x);
                fa_store(o, row + col + 1, x.y);
                fa_store(o, row + col + 2, x.z);
                fa_store(o, row + col + 3, x.w);
            }
            if (has_lse && ox == 0)
                lse[l_off + b * l_sb + h * l_sh + (long)(q0 + r) * l_ss] =
                    l != 0.0f ? (m_s[r] + log2(l)) * FA_LN2 : -INFINITY;
        }
    }
}
