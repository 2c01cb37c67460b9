// SPDX-License-Identifier: MIT
/* Decoding's fused kernel, part of each kernel set: included by cpu_kernels_impl.h, whose macros,
 * vector types, exp2 and f16_to_f32 it uses. No include guard on purpose.
 *
 * A block of up to FA_CPU_TILE_K keys and up to FA_CPU_DECODE_ROWS query rows (a KV head's
 * packed query heads). Three passes, all in L1 but the K and V rows:
 * 1. scores: each K row, converted to f32 in registers as it is read, dotted with every query
 *    row (Q in f32 scratch), one vector accumulator per row, summed across lanes per key;
 * 2. an online-softmax step per row over the block's scores (vectorized across keys);
 * 3. O = alpha O + P V: per CK_NV-vector slice of the head dim, the rows' O slices in
 *    registers while every V row's slice of the block is converted and accumulated.
 * While it scores key j it requests K row j + FA_CPU_DECODE_AHEAD (the next block's once past
 * this one) and V row j, so that the V pass and the next block find their rows in cache: a KV
 * head's rows lie between the other heads', a stride the hardware prefetcher does not follow. */

typedef uint16_t CK_NAME(h16) __attribute__((vector_size(CK_VW * 2), aligned(2)));
typedef uint32_t CK_NAME(u32) __attribute__((vector_size(CK_VW * 4)));

/* Elements d .. d + CK_VW - 1 of a row of dtype dt as f32. */
static inline __attribute__((always_inline)) CK_NAME(vec)
    CK_NAME(row_vec)(const fa_dtype dt, const void *row, int d)
{
    if (dt == FA_DTYPE_F32)
        return *(const CK_NAME(vec_u) *)((const float *)row + d);
    const uint16_t *h = (const uint16_t *)row + d;
    if (dt == FA_DTYPE_BF16)
        return (CK_NAME(vec))(__builtin_convertvector(*(const CK_NAME(h16) *)h, CK_NAME(u32))
                              << 16);
#ifdef CK_F16_LOAD
    return (CK_NAME(vec))CK_F16_LOAD(h);
#else
    CK_NAME(vec) x;
    for (int l = 0; l < CK_VW; l++)
        x[l] = CK_NAME(f16_to_f32)(h[l]);
    return x;
#endif
}

/* Elements d .. dim - 1 (fewer than CK_VW) as f32, the rest of the vector 0. */
static inline CK_NAME(vec) CK_NAME(row_tail)(const fa_dtype dt, const void *row, int d, int dim)
{
    CK_NAME(vec) x = {0};
    for (int l = 0; d + l < dim; l++) {
        const uint16_t h = dt == FA_DTYPE_F32 ? 0 : ((const uint16_t *)row)[d + l];
        x[l] = dt == FA_DTYPE_F32    ? ((const float *)row)[d + l]
               : dt == FA_DTYPE_BF16 ? fa_bits_f32((uint32_t)h << 16)
                                     : CK_NAME(f16_to_f32)(h);
    }
    return x;
}

static inline float CK_NAME(hsum)(CK_NAME(vec) v)
{
#ifdef CK_HSUM
    return CK_HSUM(v);
#else
    float t = 0.0f;
    for (int l = 0; l < CK_VW; l++)
        t += v[l];
    return t;
#endif
}

/* Requests the cache lines of `bytes` bytes from p. */
static inline void CK_NAME(prefetch)(const void *p, int64_t bytes)
{
    const uintptr_t end = (uintptr_t)p + (uintptr_t)bytes;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64)
        __builtin_prefetch((const void *)a);
}

/* Pass 1: s[i * FA_CPU_TILE_K + j] = K row j . Q row i, raw. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_scores)(const int nq, const fa_dtype dt, const fa_cpu_decode_step *a, float *s)
{
    const int dim = a->dim;
    const int64_t bytes = (int64_t)dim * (dt == FA_DTYPE_F32 ? 4 : 2);
    const int rows = a->nk + a->ahead;
    for (int j = 0; j < a->nk; j++) {
        if (j + FA_CPU_DECODE_AHEAD < rows)
            CK_NAME(prefetch)(a->k[j + FA_CPU_DECODE_AHEAD], bytes);
        CK_NAME(prefetch)(a->v[j], bytes);
        const void *kj = a->k[j];
        CK_NAME(vec) acc[FA_CPU_DECODE_ROWS];
        for (int i = 0; i < nq; i++)
            acc[i] = (CK_NAME(vec)){0};
        int d = 0;
        for (; d + CK_VW <= dim; d += CK_VW) {
            const CK_NAME(vec) kv = CK_NAME(row_vec)(dt, kj, d);
            for (int i = 0; i < nq; i++)
                acc[i] = CK_VFMAV(acc[i], kv, *(const CK_NAME(vec_u) *)(a->q + i * a->ldq + d));
        }
        if (d < dim) { /* Q's columns past dim are zero */
            const CK_NAME(vec) kv = CK_NAME(row_tail)(dt, kj, d, dim);
            for (int i = 0; i < nq; i++)
                acc[i] = CK_VFMAV(acc[i], kv, *(const CK_NAME(vec_u) *)(a->q + i * a->ldq + d));
        }
        for (int i = 0; i < nq; i++)
            s[i * FA_CPU_TILE_K + j] = CK_NAME(hsum)(acc[i]);
    }
}

/* Pass 2: scales and masks row i's scores, updates m[i] and l[i], replaces the scores by
 * P = exp2(s - m) (0 for masked keys and past nk) and sets alpha[i], the old O's factor. As
 * softmax_cols: a NaN score never becomes the max, and while the max is -inf P stays 0. */
static void CK_NAME(decode_softmax)(const fa_cpu_decode_step *a, float *s, float *alpha)
{
    for (int i = 0; i < a->nq; i++) {
        float *si = s + i * FA_CPU_TILE_K;
        const int seen = a->visible ? a->visible[i] : a->nk;
        float mx = a->m[i];
        for (int j = 0; j < FA_CPU_TILE_K; j++) {
            const float x = j < seen ? si[j] * a->scale : -INFINITY;
            si[j] = x;
            mx = x > mx ? x : mx;
        }
        const float m_use = mx == -INFINITY ? 0.0f : mx;
        alpha[i] = CK_NAME(exp2)(a->m[i] - m_use);
        a->m[i] = mx;
        for (int j = 0; j < FA_CPU_TILE_K; j++)
            si[j] = CK_NAME(exp2)(si[j] - m_use);
        CK_NAME(vec) sum = {0};
        for (int j = 0; j < FA_CPU_TILE_K; j += CK_VW)
            sum += *(const CK_NAME(vec) *)(si + j);
        a->l[i] = a->l[i] * alpha[i] + CK_NAME(hsum)(sum);
    }
}

/* Pass 3 on the nv vectors of O's columns from d0: O = alpha O + P V. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_pv)(const int nq, const int nv, const fa_dtype dt, const fa_cpu_decode_step *a,
                   const float *p, const float *alpha, int d0)
{
    CK_NAME(vec) acc[FA_CPU_DECODE_ROWS][CK_NV];
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++)
            acc[i][v] = alpha[i] * *(const CK_NAME(vec_u) *)(a->o + i * a->ldo + d0 + v * CK_VW);
    const bool whole = d0 + nv * CK_VW <= a->dim;
    for (int j = 0; j < a->nk; j++) {
        CK_NAME(vec) vv[CK_NV];
        for (int v = 0; v < nv; v++) {
            const int d = d0 + v * CK_VW;
            vv[v] = whole || d + CK_VW <= a->dim ? CK_NAME(row_vec)(dt, a->v[j], d)
                                                 : CK_NAME(row_tail)(dt, a->v[j], d, a->dim);
        }
        for (int i = 0; i < nq; i++) {
            const float pij = p[i * FA_CPU_TILE_K + j];
            for (int v = 0; v < nv; v++)
                acc[i][v] = CK_VFMA(acc[i][v], pij, vv[v]);
        }
    }
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++)
            *(CK_NAME(vec_u) *)(a->o + i * a->ldo + d0 + v * CK_VW) = acc[i][v];
}

/* The three passes for a constant row count and dtype, so the accumulators are registers. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_rows)(const int nq, const fa_dtype dt, const fa_cpu_decode_step *a)
{
    float s[FA_CPU_DECODE_ROWS * FA_CPU_TILE_K] __attribute__((aligned(64)));
    float alpha[FA_CPU_DECODE_ROWS];
    CK_NAME(decode_scores)(nq, dt, a, s);
    CK_NAME(decode_softmax)(a, s, alpha);
    /* O's columns padded to FA_CPU_PAD: whole vectors, CK_NV at a time, then what is left */
    const int padded = (a->dim + FA_CPU_PAD - 1) / FA_CPU_PAD * FA_CPU_PAD;
    int d0 = 0;
    for (; d0 + CK_NV * CK_VW <= padded; d0 += CK_NV * CK_VW)
        CK_NAME(decode_pv)(nq, CK_NV, dt, a, s, alpha, d0);
    for (; d0 < padded; d0 += CK_VW)
        CK_NAME(decode_pv)(nq, 1, dt, a, s, alpha, d0);
}

static void CK_NAME(decode_block)(const fa_cpu_decode_step *a)
{
#define CK_DECODE_CASE(dt, r)                                                                      \
    case r:                                                                                        \
        CK_NAME(decode_rows)(r, dt, a);                                                            \
        break;
#define CK_DECODE_DTYPE(dt)                                                                        \
    switch (a->nq) {                                                                               \
        CK_DECODE_CASE(dt, 1)                                                                      \
        CK_DECODE_CASE(dt, 2)                                                                      \
        CK_DECODE_CASE(dt, 3)                                                                      \
        CK_DECODE_CASE(dt, 4)                                                                      \
        CK_DECODE_CASE(dt, 5)                                                                      \
        CK_DECODE_CASE(dt, 6)                                                                      \
        CK_DECODE_CASE(dt, 7)                                                                      \
        CK_DECODE_CASE(dt, 8)                                                                      \
    }
    if (a->dtype == FA_DTYPE_F32) {
        CK_DECODE_DTYPE(FA_DTYPE_F32)
    } else if (a->dtype == FA_DTYPE_F16) {
        CK_DECODE_DTYPE(FA_DTYPE_F16)
    } else {
        CK_DECODE_DTYPE(FA_DTYPE_BF16)
    }
#undef CK_DECODE_DTYPE
#undef CK_DECODE_CASE
}
