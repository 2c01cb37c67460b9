// SPDX-License-Identifier: MIT
/* The CPU backend's decoding kernel (backends/cpu/cpu_decode_impl.h) in every kernel set this
 * machine runs, where the conformance matrix sees only the fastest: decode_block over blocks of
 * K and V rows that lie apart and unaligned, every dtype, row count and a range of head dims,
 * with and without a per-row mask, against float64. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "fa_half.h"

enum { KEYS = 150, ROWS = FA_CPU_DECODE_ROWS, MAX_DIM = 256, PAD_ROW = 24 };

typedef struct decode_case {
    const fa_cpu_kernels *set;
    fa_dtype dtype;
    int dim, nq;
    bool masked; /* row i sees keys [0, KEYS - (nq - 1 - i) * 40): the first rows none */
} decode_case;

static float uniform(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* Stores x as element i of a dtype array and returns the value stored, as f32. */
static float put(fa_dtype dt, void *base, int64_t i, float x)
{
    if (dt == FA_DTYPE_F32) {
        ((float *)base)[i] = x;
        return x;
    }
    const uint16_t h = dt == FA_DTYPE_F16 ? fa_f32_to_f16(x) : fa_f32_to_bf16(x);
    ((uint16_t *)base)[i] = h;
    return dt == FA_DTYPE_F16 ? fa_f16_to_f32(h) : fa_bf16_to_f32(h);
}

static int seen_by(const decode_case *c, int i)
{
    const int n = c->masked ? KEYS - (c->nq - 1 - i) * 40 : KEYS;
    return n < 0 ? 0 : n;
}

static void run_case(const decode_case *c)
{
    /* K and V rows PAD_ROW elements apart (f16 rows then start off 64-byte lines) */
    const int64_t ld = c->dim + PAD_ROW, esize = c->dtype == FA_DTYPE_F32 ? 4 : 2;
    const int64_t ldo = (c->dim + FA_CPU_PAD - 1) / FA_CPU_PAD * FA_CPU_PAD;
    char *k = malloc((size_t)(KEYS * ld * esize)), *v = malloc((size_t)(KEYS * ld * esize));
    static double kf[KEYS][MAX_DIM], vf[KEYS][MAX_DIM], qf[ROWS][MAX_DIM];
    static float q[ROWS * MAX_DIM], o[ROWS * MAX_DIM];
    float m[ROWS], l[ROWS];
    cr_assert(k && v);
    uint32_t seed = (uint32_t)(c->dim * 131 + c->nq * 7 + c->dtype);
    for (int j = 0; j < KEYS; j++)
        for (int d = 0; d < c->dim; d++) {
            kf[j][d] = put(c->dtype, k, j * ld + d, uniform(&seed));
            vf[j][d] = put(c->dtype, v, j * ld + d, uniform(&seed));
        }
    for (int i = 0; i < c->nq; i++) {
        for (int d = 0; d < ldo; d++) {
            q[i * ldo + d] = d < c->dim ? 2.0f * uniform(&seed) : 0.0f;
            qf[i][d] = q[i * ldo + d];
            o[i * ldo + d] = 0.0f;
        }
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }

    const float scale = 1.0f / sqrtf((float)c->dim);
    const void *k_rows[FA_CPU_TILE_K + FA_CPU_DECODE_AHEAD], *v_rows[FA_CPU_TILE_K];
    int visible[ROWS];
    fa_cpu_decode_step st = {.dtype = c->dtype,
                             .dim = c->dim,
                             .nq = c->nq,
                             .k = k_rows,
                             .v = v_rows,
                             .q = q,
                             .ldq = ldo,
                             .scale = scale * 1.4426950408889634f,
                             .m = m,
                             .l = l,
                             .o = o,
                             .ldo = ldo};
    for (int k0 = 0; k0 < KEYS; k0 += FA_CPU_TILE_K) {
        st.nk = KEYS - k0 < FA_CPU_TILE_K ? KEYS - k0 : FA_CPU_TILE_K;
        const int after = KEYS - k0 - st.nk;
        st.ahead = after < FA_CPU_DECODE_AHEAD ? after : FA_CPU_DECODE_AHEAD;
        for (int j = 0; j < st.nk + st.ahead; j++)
            k_rows[j] = k + (k0 + j) * ld * esize;
        for (int j = 0; j < st.nk; j++)
            v_rows[j] = v + (k0 + j) * ld * esize;
        for (int i = 0; i < c->nq; i++) {
            const int n = seen_by(c, i) - k0;
            visible[i] = n < 0 ? 0 : n > st.nk ? st.nk : n;
        }
        st.visible = c->masked ? visible : NULL;
        c->set->decode_block(&st);
    }

    for (int i = 0; i < c->nq; i++) {
        const int n = seen_by(c, i);
        const char *what = c->masked ? "masked" : "unmasked";
        if (n == 0) {
            cr_assert(l[i] == 0.0f && m[i] == -INFINITY, "%s %s D=%d nq=%d row %d: no key seen",
                      c->set->name, what, c->dim, c->nq, i);
            for (int d = 0; d < c->dim; d++)
                cr_assert(o[i * ldo + d] == 0.0f);
            continue;
        }
        double t[KEYS], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < n; j++) {
            double dot = 0.0;
            for (int d = 0; d < c->dim; d++)
                dot += qf[i][d] * kf[j][d];
            t[j] = dot * scale;
            mx = fmax(mx, t[j]);
        }
        for (int j = 0; j < n; j++)
            sum += exp(t[j] - mx);
        const double lse = mx + log(sum);
        const double got_lse = ((double)m[i] + log2((double)l[i])) * M_LN2;
        cr_assert(fabs(got_lse - lse) < 1e-5 * (1.0 + fabs(lse)),
                  "%s dtype %d %s D=%d nq=%d row %d: LSE %.8g, float64 %.8g", c->set->name,
                  c->dtype, what, c->dim, c->nq, i, got_lse, lse);
        for (int d = 0; d < c->dim; d++) {
            double ref = 0.0;
            for (int j = 0; j < n; j++)
                ref += exp(t[j] - lse) * vf[j][d];
            const double got = o[i * ldo + d] / l[i];
            cr_assert(fabs(got - ref) < 2e-6 + 1e-5 * fabs(ref),
                      "%s dtype %d %s D=%d nq=%d row %d, column %d: %.8g, float64 %.8g",
                      c->set->name, c->dtype, what, c->dim, c->nq, i, d, got, ref);
        }
    }
    free(k);
    free(v);
}

Test(cpu_kernels, decode_block_matches_float64_in_every_kernel_set)
{
    const fa_cpu_kernels *sets[8];
    const int n_sets = fa_cpu_kernels_available(sets, 8);
    static const int dims[] = {8, 40, 64, 128, 136, 256};
    static const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    cr_assert(n_sets >= 1 && sets[0] == fa_cpu_kernels_select());
    cr_assert_str_eq(sets[n_sets - 1]->name, "generic");
    for (int s = 0; s < n_sets; s++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (int nq = 1; nq <= ROWS; nq++)
                    for (int masked = 0; masked < 2; masked++) {
                        const decode_case c = {sets[s], dtypes[t], dims[d], nq, masked != 0};
                        run_case(&c);
                    }
}
