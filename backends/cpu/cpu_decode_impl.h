// SPDX-License-Identifier: MIT
/* Decoding's fused kernel, part of each kernel set: included by cpu_kernels_impl.h, whose macros,
 * vector types, exp2 and f16_to_f32 it uses. No include guard on purpose.
 *
 * A block of up to FA_CPU_TILE_K keys, several KV heads and up to FA_CPU_DECODE_ROWS query rows
 * per head (a KV head's packed query heads). Three passes, all in cache but the first reads:
 * 1. scores, key by key and within a key head by head (the order K lies in: BSHD and paged
 *    caches keep a key's heads together, so the reads stream): each K row, converted to f32 in
 *    registers as it is read, dotted with its head's query rows (Q in f32 scratch), one vector
 *    accumulator per row, summed across lanes four rows at a time into S (keys x rows).
 *    Meanwhile the V row of the same key and head is requested, in the same streaming order,
 *    and the K row FA_CPU_DECODE_AHEAD rows on;
 * 2. the online-softmax step, masked and vectorized across the rows, P from the raw scores by
 *    one FMA each;
 * 3. O = alpha O + P V head by head: per CK_NV-vector slice of the head dim, the head's O
 *    slices in registers while the slice of each of its V rows (in cache by now) is converted
 *    and accumulated.
 * Reading a head's rows alone instead (a stride of heads x row through memory) measured half
 * the streaming rate here: the hardware prefetchers follow the stream, not the stride. */

/* Pass 3 takes up to CK_DECODE_NV vectors of O's columns at a time where nq rows of them and the
 * V row's fit CK_DECODE_REGS vector registers (AVX-512 has 32, AVX2 and SSE 16; a few left for
 * the rest): at head dim 64 with AVX-512 the whole row, each P broadcast feeding four FMAs. */
#define CK_DECODE_NV 4
#define CK_DECODE_REGS (CK_VW == 16 ? 28 : 14)

typedef uint16_t CK_NAME(h16) __attribute__((vector_size(CK_VW * 2), aligned(2)));
typedef uint32_t CK_NAME(u32) __attribute__((vector_size(CK_VW * 4)));
typedef int32_t CK_NAME(ivec) __attribute__((vector_size(CK_VW * 4)));

/* Elements d .. d + CK_VW - 1 of a row of dtype dt as f32. */
static inline __attribute__((always_inline)) CK_NAME(vec)
    CK_NAME(row_vec)(const fa_dtype dt, const void *row, int d)
{
    if (dt == FA_DTYPE_F32)
        return *(const CK_NAME(vec_u) *)((const float *)row + d);
    if (dt == FA_DTYPE_E4M3)
        return CK_NAME(e4m3_vec)((const uint8_t *)row + d);
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
        const bool bits16 = dt == FA_DTYPE_F16 || dt == FA_DTYPE_BF16;
        const uint16_t h = bits16 ? ((const uint16_t *)row)[d + l] : 0;
        x[l] = dt == FA_DTYPE_F32    ? ((const float *)row)[d + l]
               : dt == FA_DTYPE_E4M3 ? fa_e4m3_to_f32(((const uint8_t *)row)[d + l])
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

/* dst[i] = the sum of acc[i]'s elements, for i < n. */
static inline __attribute__((always_inline)) void
CK_NAME(hsums)(const int n, const CK_NAME(vec) * acc, float *dst)
{
    int i = 0;
#ifdef CK_SUM4
    for (; i + 4 <= n; i += 4)
        CK_SUM4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3], dst + i);
#endif
    for (; i < n; i++)
        dst[i] = CK_NAME(hsum)(acc[i]);
}

/* Requests the cache lines of `bytes` bytes from p. */
static inline void CK_NAME(prefetch)(const void *p, int64_t bytes)
{
    const uintptr_t end = (uintptr_t)p + (uintptr_t)bytes;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    for (; a + 192 < end; a += 256) { /* unrolled: a row is a few lines */
        __builtin_prefetch((const void *)a);
        __builtin_prefetch((const void *)(a + 64));
        __builtin_prefetch((const void *)(a + 128));
        __builtin_prefetch((const void *)(a + 192));
    }
    for (; a < end; a += 64)
        __builtin_prefetch((const void *)a);
}

/* Pass 1: s[j * lds + r] = K row (j, head of r) . Q row r, raw. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_scores)(const int nq, const fa_dtype dt, const fa_cpu_decode_step *a)
{
    const int dim = a->dim, heads = a->heads;
    const int64_t bytes = (int64_t)dim * fa_cpu_dtype_bytes(dt);
    const int rows = a->nk * heads + a->ahead;
    for (int j = 0; j < a->nk; j++) {
        for (int h = 0; h < heads; h++) {
            const int x = j * heads + h;
            if (x + FA_CPU_DECODE_AHEAD < rows)
                CK_NAME(prefetch)(a->k[x + FA_CPU_DECODE_AHEAD], bytes);
            CK_NAME(prefetch)(a->v[x], bytes);
            const void *kx = a->k[x];
            const float *q = a->q + h * nq * a->ldq;
            CK_NAME(vec) acc[FA_CPU_DECODE_ROWS];
            for (int i = 0; i < nq; i++)
                acc[i] = (CK_NAME(vec)){0};
            int d = 0;
            for (; d + CK_VW <= dim; d += CK_VW) {
                const CK_NAME(vec) kv = CK_NAME(row_vec)(dt, kx, d);
                for (int i = 0; i < nq; i++)
                    acc[i] = CK_VFMAV(acc[i], kv, *(const CK_NAME(vec_u) *)(q + i * a->ldq + d));
            }
            if (d < dim) { /* Q's columns past dim are zero */
                const CK_NAME(vec) kv = CK_NAME(row_tail)(dt, kx, d, dim);
                for (int i = 0; i < nq; i++)
                    acc[i] = CK_VFMAV(acc[i], kv, *(const CK_NAME(vec_u) *)(q + i * a->ldq + d));
            }
            CK_NAME(hsums)(nq, acc, a->s + j * a->lds + h * nq);
        }
    }
}

/* Pass 2: the online-softmax step on the raw scores, vectorized across the rows. The maxima are
 * of the scaled scores x = scale s (the scale may be negative). P = exp2(x - m + e), with e the
 * product's rounding error (exact, by an FMA): x alone costs up to an ulp of |x| in every P
 * (1.5e-5 at 144, where scores of 1e2 lie), x - m + e an ulp of a small number near the maxima,
 * which dominate O. Where |e| >= 1 (|x| past 2^24) it is left out, as it is meaningless there.
 * Keys past a row's diagonal (visible) get P = 0. The loops run over all lds columns (whole
 * vectors, no branches, so they vectorize): the padding columns see no key and end as P = 0. */
static void CK_NAME(decode_softmax)(const fa_cpu_decode_step *a, float *alpha)
{
    const int rows = a->heads * a->nq;
    const int n = a->lds < FA_CPU_TILE_Q ? (int)a->lds : FA_CPU_TILE_Q; /* rows <= TILE_Q */
    const float c = a->scale;
    float *restrict m = a->m, *restrict l = a->l;
    float mx[FA_CPU_TILE_Q], mu[FA_CPU_TILE_Q], sum[FA_CPU_TILE_Q];
    int seen[FA_CPU_TILE_Q]; /* keys [0, seen[r]) of the block, per column */
    for (int r = 0; r < n; r++) {
        seen[r] = r >= rows ? 0 : a->visible ? a->visible[r] : a->nk;
        mx[r] = r < rows ? m[r] : -INFINITY;
        sum[r] = 0.0f;
    }
    for (int j = 0; j < a->nk; j++) {
        const float *restrict sj = a->s + j * a->lds;
        for (int r = 0; r < n; r++) {
            const float x = j < seen[r] ? sj[r] * c : -INFINITY;
            mx[r] = x > mx[r] ? x : mx[r];
        }
    }
    for (int r = 0; r < n; r++)
        mu[r] = mx[r] == -INFINITY ? 0.0f : mx[r]; /* no key seen yet: keep p = 0 */
    for (int r = 0; r < rows; r++) {
        alpha[r] = CK_NAME(exp2)(m[r] - mu[r]);
        m[r] = mx[r];
    }
    for (int j = 0; j < a->nk; j++) {
        float *restrict sj = a->s + j * a->lds;
        for (int r = 0; r < n; r++) {
            const float x = sj[r] * c, e = CK_FMAF(sj[r], c, -x);
            const float p = CK_NAME(exp2)((x - mu[r]) + (fabsf(e) < 1.0f ? e : 0.0f));
            sj[r] = j < seen[r] ? p : 0.0f;
            sum[r] += sj[r];
        }
    }
    for (int r = 0; r < rows; r++)
        l[r] = l[r] * alpha[r] + sum[r];
}

/* Pass 3 for head h on the nv vectors of O's columns from d0: O = alpha O + P V. With `tail`
 * the last vector reaches past dim (AVX-512 at head dims 16 n + 8): V's elements there are 0. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_pv)(const int nq, const int nv, const bool tail, const fa_dtype dt,
                   const fa_cpu_decode_step *a, int h, const float *alpha, int d0)
{
    const float *p = a->s + h * nq;
    float *o = a->o + h * nq * a->ldo + d0;
    const void *const *vh = a->v + h;
    const int heads = a->heads;
    alpha += h * nq;
    CK_NAME(vec) acc[FA_CPU_DECODE_ROWS][CK_DECODE_NV];
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++)
            acc[i][v] = alpha[i] * *(const CK_NAME(vec_u) *)(o + i * a->ldo + v * CK_VW);
    for (int j = 0; j < a->nk; j++) {
        const void *vx = vh[j * heads];
        CK_NAME(vec) vv[CK_DECODE_NV];
        for (int v = 0; v < nv; v++)
            vv[v] = tail && v == nv - 1 ? CK_NAME(row_tail)(dt, vx, d0 + v * CK_VW, a->dim)
                                        : CK_NAME(row_vec)(dt, vx, d0 + v * CK_VW);
        for (int i = 0; i < nq; i++) {
            const float pij = p[j * a->lds + i];
            for (int v = 0; v < nv; v++)
                acc[i][v] = CK_VFMA(acc[i][v], pij, vv[v]);
        }
    }
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++)
            *(CK_NAME(vec_u) *)(o + i * a->ldo + v * CK_VW) = acc[i][v];
}

/* The three passes for a constant row count and dtype, so the accumulators are registers. */
static inline __attribute__((always_inline)) void
CK_NAME(decode_rows)(const int nq, const fa_dtype dt, const fa_cpu_decode_step *a)
{
    float alpha[FA_CPU_TILE_Q];
    CK_NAME(decode_scores)(nq, dt, a);
    CK_NAME(decode_softmax)(a, alpha);
    /* O's columns padded to FA_CPU_PAD: whole vectors, CK_DECODE_NV at a time where the rows'
     * accumulators and the V row fit the registers (each P broadcast feeding that many FMAs),
     * else CK_NV, then what is left */
    const int padded = (a->dim + FA_CPU_PAD - 1) / FA_CPU_PAD * FA_CPU_PAD;
    const bool wide = (nq + 1) * CK_DECODE_NV <= CK_DECODE_REGS;
    for (int h = 0; h < a->heads; h++) {
        int d0 = 0;
        for (; wide && d0 + CK_DECODE_NV * CK_VW <= a->dim; d0 += CK_DECODE_NV * CK_VW)
            CK_NAME(decode_pv)(nq, CK_DECODE_NV, false, dt, a, h, alpha, d0);
        for (; d0 + CK_NV * CK_VW <= a->dim; d0 += CK_NV * CK_VW)
            CK_NAME(decode_pv)(nq, CK_NV, false, dt, a, h, alpha, d0);
        for (; d0 + CK_VW <= a->dim; d0 += CK_VW)
            CK_NAME(decode_pv)(nq, 1, false, dt, a, h, alpha, d0);
        if (d0 < padded)
            CK_NAME(decode_pv)(nq, 1, true, dt, a, h, alpha, d0);
    }
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
    } else if (a->dtype == FA_DTYPE_E4M3) {
        CK_DECODE_DTYPE(FA_DTYPE_E4M3)
    } else {
        CK_DECODE_DTYPE(FA_DTYPE_BF16)
    }
#undef CK_DECODE_DTYPE
#undef CK_DECODE_CASE
}
#undef CK_DECODE_NV
#undef CK_DECODE_REGS
