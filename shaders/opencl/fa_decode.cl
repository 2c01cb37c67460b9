// SPDX-License-Identifier: MIT
/* Decoding forward (flash-decoding), the OpenCL form of shaders/vulkan/attn_decode.comp: one
 * work-group of FA_NT work-items per (key chunk, KV head, batch entry) with all the KV head's
 * packed query rows (FA_BM of them: query heads sharing the KV head x query positions, row r
 * being query r % Sq of query head hk * GQA + r / Sq), so each K and V row is read once for all.
 * OpenCL 1.2 has no subgroup operations: the row statistics go through local memory.
 *
 * Per tile of FA_BN keys (5 barriers): K and V -> local memory as stored (f16 and bf16 tiles take
 * half the bytes of f32 ones, so more work-groups share a compute unit; elements are converted
 * where they are read: V's once, K's by each of the NRP work-items scoring that key); scores
 * (work-item t: key t % BN, rows t / BN + NRP i) -> st; per row (work-items t < BM): the new
 * maximum and alpha; P = exp2(S - m) in place; then the row sums (t < BM) and
 * O = alpha O + P V (work-item t: the float4 column t % D4 of every row, keys t / D4 + NKS x),
 * the key subsets summed at the end. FA_DEC_W32 builds an experiment instead (below).
 * One chunk writes O and the LSE; several write their normalised O and LSE to the workspace
 * for fa_decode_merge. A paged cache maps key n of entry b to row n % page_size of page
 * table[b][n / page_size], clamped into [0, num_pages). */

#define D4 (FA_D / 4)
#define LDK (D4 + 1)                   /* quads per local K/V row */
#define RWP ((FA_BM + 3) / 4 * 4)      /* rows, padded */
#define NRP (FA_NT / FA_BN)            /* row parts of the score phase */
#define RPP ((RWP + NRP - 1) / NRP)    /* score rows per work-item */
#define NKS (FA_NT / D4)               /* key subsets of the P V phase */
FA_CL_FWD_OPTIONS(FA_CL_REQUIRE)
#if FA_BN < RWP
#error "the K and V tiles hold the rows' f32 O at the end: FA_BN must be at least RWP"
#endif

/* Elements i..i+3 as f32 (fa_common.cl's raw_load4: one vector load when aligned). */
inline float4 dec_load4(__global const fa_st *p, long i, bool aligned)
{
    return raw_to_f32(raw_load4(p, i, aligned));
}

/* Where key n of batch entry b starts in a K or V view (page stride sb, row stride ss). */
inline long dec_key_row(long n, long b, long sb, long ss, __global const int *table, long t_off,
                        long t_sb, long t_ss, long page_size, long num_pages)
{
    if (page_size == 0)
        return b * sb + n * ss;
    long page = table[t_off + b * t_sb + n / page_size * t_ss];
    page = page < 0 ? 0 : page >= num_pages ? num_pages - 1 : page;
    return page * sb + n % page_size * ss;
}

/* The kernels' arguments: views as (offset, batch, seq, head strides) in elements. */
#define DEC_PARAMS                                                                                 \
    __global const fa_st *q, long q_off, long q_sb, long q_ss, long q_sh,                          \
        __global const fa_st *k, long k_off, long k_sb, long k_ss, long k_sh,                      \
        __global const fa_st *v, long v_off, long v_sb, long v_ss, long v_sh, __global fa_st *o,   \
        long o_off, long o_sb, long o_ss, long o_sh, __global float *lse, long l_off, long l_sb,   \
        long l_ss, long l_sh, int has_lse, __global const int *lens, long s_off, long s_sb,        \
        long s_ss, long s_sh, int has_lens, __global const int *table, long t_off, long t_sb,      \
        long t_ss, long t_sh, long page_size, long num_pages, int seq_q, int seq_k,                \
        float scale_log2, int split_keys, __global float *ws, long ws_lse_off

/* The keys [*begin, *stop) of chunk `chunk` of a sequence (its length from lens[s_at] where
 * has_lens), and the diagonal: query i sees key j iff j <= i + diagonal. */
inline int dec_chunk_keys(__global const int *lens, long s_at, int has_lens, int seq_q, int seq_k,
                          int packed, long chunk, int split_keys, long *begin, long *stop)
{
    int sk = seq_k;
    if (has_lens) {
        const int n = lens[s_at];
        sk = n < 0 ? 0 : n > seq_k ? seq_k : n;
    }
    const int diag = sk - seq_q;
    *begin = min(chunk * split_keys, (long)sk);
    *stop = min((long)sk, *begin + split_keys);
    if (FA_CAUSAL) {
        int i_max = 0;
        for (int r = 0; r < FA_BM && r < packed; r++)
            i_max = max(i_max, r % seq_q);
        *stop = clamp((long)i_max + diag + 1, *begin, *stop);
    }
    return diag;
}

/* The KV head's packed query rows as f32 into qs (RWP x D4 quads, rows past them 0), by
 * work-items t, t + nt, ...; q_at is the batch entry's start. */
inline void dec_load_q(__local float4 *qs, int t, int nt, __global const fa_st *q, long q_at,
                       long q_ss, long q_sh, bool aligned, long hk, int seq_q, int packed)
{
    for (int e = t; e < RWP * D4; e += nt) {
        const int r = e / D4, c = e % D4;
        float4 x = (float4)(0.0f);
        if (r < FA_BM && r < packed) {
            const long i = r % seq_q, h = hk * FA_GQA + r / seq_q;
            x = dec_load4(q, q_at + h * q_sh + i * q_ss + 4 * c, aligned);
        }
        qs[e] = x;
    }
}

/* Quad c of an output row and, with c = 0, its LSE: to the workspace's row ws_row when the keys
 * are split, else to o (the row at o_at) and lse (at l_at; NULL: not asked for). */
inline void dec_store(float4 out, float lse_r, int c, bool split, __global float *ws, long ws_row,
                      long ws_lse_off, __global fa_st *o, long o_at, __global float *lse,
                      long l_at)
{
    if (split) {
        vstore4(out, 0, ws + ws_row * FA_D + 4 * c);
        if (c == 0)
            ws[ws_lse_off + ws_row] = lse_r;
    } else {
        fa_store(o, o_at + 4 * c, out.x);
        fa_store(o, o_at + 4 * c + 1, out.y);
        fa_store(o, o_at + 4 * c + 2, out.z);
        fa_store(o, o_at + 4 * c + 3, out.w);
        if (c == 0 && lse)
            lse[l_at] = lse_r;
    }
}

/* The tile of FA_BN keys from n0_ into kt and vt as stored (rows past the chunk 0), by
 * work-items t, t + nt_, ...: neighbouring work-items on neighbouring quads of a row. */
#define STAGE_KV(n0_, nt_)                                                                         \
    for (int e_ = t; e_ < FA_BN * D4; e_ += (nt_)) {                                               \
        const int jj_ = e_ / D4, c_ = e_ % D4;                                                     \
        const long n_ = (n0_) + jj_;                                                               \
        fa_raw4 kx_ = (fa_raw4)(0), vx_ = (fa_raw4)(0);                                            \
        if (n_ < n_stop) {                                                                         \
            const long kr_ = dec_key_row(n_, b, k_sb, k_ss, table, t_off, t_sb, t_ss, page_size,   \
                                         num_pages);                                               \
            const long vr_ = dec_key_row(n_, b, v_sb, v_ss, table, t_off, t_sb, t_ss, page_size,   \
                                         num_pages);                                               \
            kx_ = raw_load4(k, k_off + kr_ + hk * k_sh + 4 * c_, k4);                              \
            vx_ = raw_load4(v, v_off + vr_ + hk * v_sh + 4 * c_, v4);                              \
        }                                                                                          \
        kt[jj_ * LDK + c_] = kx_;                                                                  \
        vt[jj_ * LDK + c_] = vx_;                                                                  \
    }

#if !FA_DEC_W32
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void
fa_decode(DEC_PARAMS)
{
    __local fa_raw4 kv[2 * FA_BN * LDK] __attribute__((aligned(16)));
    __local fa_raw4 *kt = kv, *vt = kv + FA_BN * LDK;
    __local float4 qs[RWP * D4];
    __local float st[RWP * FA_BN];
    __local float row_m[RWP], row_l[RWP], row_a[RWP];

    const int t = (int)get_local_id(0);
    const long chunk = get_group_id(0), hk = get_group_id(1), b = get_group_id(2);
    const int packed = FA_GQA * seq_q;
    long n_begin, n_stop;
    const int diag = dec_chunk_keys(lens, s_off + b * s_sb, has_lens, seq_q, seq_k, packed, chunk,
                                    split_keys, &n_begin, &n_stop);
    const bool q4 = ((q_off | q_sb | q_ss | q_sh) & 3) == 0;
    const bool k4 = ((k_off | k_sb | k_ss | k_sh) & 3) == 0;
    const bool v4 = ((v_off | v_sb | v_ss | v_sh) & 3) == 0;
    dec_load_q(qs, t, FA_NT, q, q_off + b * q_sb, q_ss, q_sh, q4, hk, seq_q, packed);
    for (int r = t; r < RWP; r += FA_NT) {
        row_m[r] = -INFINITY;
        row_l[r] = 0.0f;
    }

    const int j = t % FA_BN, p = t / FA_BN;
    const int cg = t % D4, ks = t / D4;
    float4 acc[RWP];
    for (int r = 0; r < RWP; r++)
        acc[r] = (float4)(0.0f);

    for (long n0 = n_begin; n0 < n_stop; n0 += FA_BN) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is no longer read */
        STAGE_KV(n0, FA_NT)
        barrier(CLK_LOCAL_MEM_FENCE);
        /* work-item (j, p): key j against rows p + NRP i, each a chain of FMAs over the whole
         * head dim, the order the backward's scores are recomputed in (a split of the chain
         * measured 2-4 % faster but moved the forward's LSE off the backward's scores by an ulp,
         * which large logits amplify: docs/PERF.md, fifty-first session) */
        const long n = n0 + j;
        for (int i = 0; i < RPP; i++) {
            const int r = p + i * NRP;
            if (r >= RWP)
                break;
            float s = 0.0f;
            for (int c = 0; c < D4; c++) {
                const float4 kx = raw_to_f32(kt[j * LDK + c]), qx = qs[r * D4 + c];
                s = fma(kx.w, qx.w, fma(kx.z, qx.z, fma(kx.y, qx.y, fma(kx.x, qx.x, s))));
            }
            bool visible = n < n_stop;
            if (FA_CAUSAL)
                visible = visible && n <= (long)(r % seq_q) + diag;
            st[r * FA_BN + j] = visible ? s * scale_log2 : -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < RWP) { /* m = -inf: nothing visible so far, so nothing is rescaled */
            float mx = row_m[t];
            for (int jj = 0; jj < FA_BN; jj++)
                mx = fmax(mx, st[t * FA_BN + jj]);
            row_a[t] = mx == -INFINITY ? 1.0f : exp2(row_m[t] - mx);
            row_m[t] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < RPP; i++) {
            const int r = p + i * NRP;
            if (r >= RWP)
                break;
            const float m = row_m[r];
            st[r * FA_BN + j] = exp2(st[r * FA_BN + j] - (m == -INFINITY ? 0.0f : m));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < RWP) {
            float l = row_l[t] * row_a[t];
            for (int jj = 0; jj < FA_BN; jj++)
                l += st[t * FA_BN + jj];
            row_l[t] = l;
        }
        if (ks < NKS) {
            for (int r = 0; r < RWP; r++)
                acc[r] *= row_a[r];
            for (int jj = ks; jj < FA_BN; jj += NKS) {
                const float4 vx = raw_to_f32(vt[jj * LDK + cg]);
                for (int r = 0; r < RWP; r++)
                    acc[r] += st[r * FA_BN + jj] * vx;
            }
        }
    }

    /* O: the key subsets added up, one after the other, in the tiles' memory (RWP x D4 float4
     * fit in 2 x FA_BN x LDK quads of 8 or 16 bytes since FA_BN >= RWP) */
    __local float4 *os = (__local float4 *)kv;
    for (int x = 0; x < NKS; x++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (ks == x)
            for (int r = 0; r < RWP; r++)
                os[r * D4 + cg] = x == 0 ? acc[r] : os[r * D4 + cg] + acc[r];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const bool split = get_num_groups(0) > 1;
    const long heads_q = get_num_groups(1) * FA_GQA;
    const long out_rows = get_num_groups(2) * heads_q * seq_q;
    for (int e = t; e < RWP * D4; e += FA_NT) {
        const int r = e / D4, c = e % D4;
        if (r >= FA_BM || r >= packed)
            continue;
        const float l = row_l[r], m = row_m[r];
        const float4 out = l != 0.0f ? os[r * D4 + c] / l : (float4)(0.0f);
        const float lse_r = l != 0.0f ? (m + log2(l)) * FA_LN2 : -INFINITY;
        const long i = r % seq_q, h = hk * FA_GQA + r / seq_q;
        dec_store(out, lse_r, c, split, ws, chunk * out_rows + (b * heads_q + h) * seq_q + i,
                  ws_lse_off, o, o_off + b * o_sb + h * o_sh + i * o_ss, has_lse ? lse : NULL,
                  l_off + b * l_sb + h * l_sh + i * l_ss);
    }
    (void)t_sh; /* views come as (offset, batch, seq, head strides); these are unused */
    (void)s_ss;
    (void)s_sh;
}
#else
/* Experiment (FA_OPENCL_DECODE=w32; docs/PERF.md, fifty-first session): work-groups of W32
 * work-items, one warp on NVIDIA, where a barrier costs little, so that many groups share a
 * compute unit and each walks its chunk on its own. Per step of W32 keys: K and V -> local
 * memory as stored (neighbouring work-items on neighbouring quads); work-item j scores key j
 * against every row (its K row converted once) -> pst; every work-item then reads the step's
 * scores (the same address across the group: broadcasts), keeps the rows' maxima itself and
 * writes its own key's P -> ppst, so no serial row phase and no row statistics in local memory;
 * O = alpha O + P V (each V quad converted once) and the rows' sums with work-item t owning
 * quads t + W32 u of every row, which it writes at the end as fa_decode does (the split's
 * workspace layout is the same, so fa_decode_merge combines the chunks). Four barriers a step. */
#define W32 32
#define UQ ((D4 + W32 - 1) / W32) /* quads of O's columns a work-item owns */
#if FA_BN != W32
#error "FA_DEC_W32 takes steps of FA_BN = 32 keys"
#endif

__kernel __attribute__((reqd_work_group_size(W32, 1, 1))) void
fa_decode(DEC_PARAMS)
{
    __local fa_raw4 kt[W32 * LDK], vt[W32 * LDK];
    __local float4 qs[RWP * D4];
    __local float pst[RWP * W32], ppst[RWP * W32]; /* the step's scores, then its P */

    const int t = (int)get_local_id(0);
    const long chunk = get_group_id(0), hk = get_group_id(1), b = get_group_id(2);
    const int packed = FA_GQA * seq_q;
    long n_begin, n_stop;
    const int diag = dec_chunk_keys(lens, s_off + b * s_sb, has_lens, seq_q, seq_k, packed, chunk,
                                    split_keys, &n_begin, &n_stop);
    const bool q4 = ((q_off | q_sb | q_ss | q_sh) & 3) == 0;
    const bool k4 = ((k_off | k_sb | k_ss | k_sh) & 3) == 0;
    const bool v4 = ((v_off | v_sb | v_ss | v_sh) & 3) == 0;
    dec_load_q(qs, t, W32, q, q_off + b * q_sb, q_ss, q_sh, q4, hk, seq_q, packed);
    float m[RWP], l[RWP];
    float4 acc[RWP][UQ];
    for (int r = 0; r < RWP; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int u = 0; u < UQ; u++)
            acc[r][u] = (float4)(0.0f);
    }

    for (long n0 = n_begin; n0 < n_stop; n0 += W32) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous step is no longer read */
        STAGE_KV(n0, W32)
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[RWP];
        for (int r = 0; r < RWP; r++)
            s[r] = 0.0f;
        for (int c = 0; c < D4; c++) {
            const float4 kx = raw_to_f32(kt[t * LDK + c]);
            for (int r = 0; r < RWP; r++) {
                const float4 qx = qs[r * D4 + c];
                s[r] = fma(kx.w, qx.w, fma(kx.z, qx.z, fma(kx.y, qx.y, fma(kx.x, qx.x, s[r]))));
            }
        }
        const long n = n0 + t;
        for (int r = 0; r < RWP; r++) {
            bool visible = n < n_stop;
            if (FA_CAUSAL)
                visible = visible && n <= (long)(r % seq_q) + diag;
            s[r] = visible ? s[r] * scale_log2 : -INFINITY;
            pst[r * W32 + t] = s[r];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* every work-item: the rows' new maxima from the step's scores (broadcast reads), then
         * P of its own key into ppst */
        float alpha[RWP];
        for (int r = 0; r < RWP; r++) {
            float mx = m[r];
            for (int jj = 0; jj < W32; jj++)
                mx = fmax(mx, pst[r * W32 + jj]);
            /* m = -inf: nothing visible so far, so nothing is rescaled */
            alpha[r] = mx == -INFINITY ? 1.0f : exp2(m[r] - mx);
            m[r] = mx;
            ppst[r * W32 + t] = exp2(s[r] - (mx == -INFINITY ? 0.0f : mx));
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float sum[RWP];
        for (int r = 0; r < RWP; r++) {
            sum[r] = 0.0f;
            for (int u = 0; u < UQ; u++)
                acc[r][u] *= alpha[r];
        }
        for (int jj = 0; jj < W32; jj++) {
            float4 vx[UQ];
            for (int u = 0; u < UQ; u++) {
                const int c = t + W32 * u;
                vx[u] = c < D4 ? raw_to_f32(vt[jj * LDK + c]) : (float4)(0.0f);
            }
            for (int r = 0; r < RWP; r++) {
                const float pj = ppst[r * W32 + jj];
                sum[r] += pj;
                for (int u = 0; u < UQ; u++)
                    acc[r][u] += pj * vx[u];
            }
        }
        for (int r = 0; r < RWP; r++)
            l[r] = l[r] * alpha[r] + sum[r];
    }

    const bool split = get_num_groups(0) > 1;
    const long heads_q = get_num_groups(1) * FA_GQA;
    const long out_rows = get_num_groups(2) * heads_q * seq_q;
    for (int r = 0; r < FA_BM && r < packed; r++) {
        const float lse_r = l[r] != 0.0f ? (m[r] + log2(l[r])) * FA_LN2 : -INFINITY;
        const long i = r % seq_q, h = hk * FA_GQA + r / seq_q;
        for (int u = 0; u < UQ; u++) {
            const int c = t + W32 * u;
            if (c >= D4)
                continue;
            const float4 out = l[r] != 0.0f ? acc[r][u] / l[r] : (float4)(0.0f);
            dec_store(out, lse_r, c, split, ws, chunk * out_rows + (b * heads_q + h) * seq_q + i,
                      ws_lse_off, o, o_off + b * o_sb + h * o_sh + i * o_ss,
                      has_lse ? lse : NULL, l_off + b * l_sb + h * l_sh + i * l_ss);
        }
    }
    (void)t_sh;
    (void)s_ss;
    (void)s_sh;
}
#endif

/* The chunks' results combined exactly: one work-group per output row (query i, query head h,
 * batch b); w_c = exp(LSE_c - max), O = sum w_c O_c / sum w_c, LSE = max + log(sum w_c). */
__kernel __attribute__((reqd_work_group_size(FA_NT, 1, 1))) void
fa_decode_merge(__global const float *ws, long ws_lse_off, int chunks, __global fa_st *o,
                long o_off, long o_sb, long o_ss, long o_sh, __global float *lse, long l_off,
                long l_sb, long l_ss, long l_sh, int has_lse, int seq_q)
{
    __local float w[256]; /* FA_MAX_SPLITS */
    __local float red[FA_NT];
    const int t = (int)get_local_id(0);
    const long i = get_group_id(0), h = get_group_id(1), b = get_group_id(2);
    const long heads_q = get_num_groups(1);
    const long rows = get_num_groups(2) * heads_q * seq_q;
    const long row = (b * heads_q + h) * seq_q + i;
    float m = -INFINITY;
    for (int c = t; c < chunks; c += FA_NT)
        m = fmax(m, ws[ws_lse_off + c * rows + row]);
    red[t] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    m = -INFINITY;
    for (int x = 0; x < FA_NT; x++)
        m = fmax(m, red[x]);
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int c = t; c < chunks; c += FA_NT) {
        const float l = ws[ws_lse_off + c * rows + row];
        w[c] = l == -INFINITY ? 0.0f : exp(l - m);
        sum += w[c];
    }
    red[t] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    sum = 0.0f;
    for (int x = 0; x < FA_NT; x++)
        sum += red[x];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int d = t; d < FA_D; d += FA_NT) {
        float a = 0.0f;
        for (int c = 0; c < chunks; c++)
            if (w[c] != 0.0f)
                a += w[c] * ws[(c * rows + row) * FA_D + d];
        fa_store(o, o_off + b * o_sb + h * o_sh + i * o_ss + d, a * inv);
    }
    if (t == 0 && has_lse)
        lse[l_off + b * l_sb + h * l_sh + i * l_ss] = sum > 0.0f ? m + log(sum) : -INFINITY;
}
