// SPDX-License-Identifier: MIT
/* The CPU backend's decoding kernel (backends/cpu/cpu_decode_impl.h) in every kernel set this
 * machine runs, where the conformance matrix sees only the fastest: decode_block over blocks of
 * K and V rows that lie apart and unaligned, several KV heads, every dtype, row count and a
 * range of head dims, with and without a per-row mask, against float64. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "fa_half.h"

enum {
    KEYS = 150,
    ROWS = FA_CPU_DECODE_ROWS,
    HEADS = FA_CPU_DECODE_HEADS,
    MAX_DIM = 256,
    PAD_ROW = 24
};

typedef struct decode_case {
    const fa_cpu_kernels *set;
    fa_dtype dtype;
    int dim, heads, nq;
    bool masked; /* row i of each head sees keys [0, KEYS - (nq - 1 - i) * 40): the first none */
    int block;   /* keys per decode_block call */
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
    if (dt == FA_DTYPE_E4M3) {
        ((uint8_t *)base)[i] = fa_f32_to_e4m3(x);
        return fa_e4m3_to_f32(((uint8_t *)base)[i]);
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
    /* key j, head h's K and V rows at (j * heads + h) * ld: PAD_ROW elements between rows, so
     * that f16 rows start off 64-byte lines */
    const int64_t ld = c->dim + PAD_ROW, esize = fa_cpu_dtype_bytes(c->dtype);
    const int64_t ldo = (c->dim + FA_CPU_PAD - 1) / FA_CPU_PAD * FA_CPU_PAD;
    const int64_t elems = (int64_t)KEYS * c->heads * ld;
    const int rows = c->heads * c->nq;
    char *k = malloc((size_t)(elems * esize)), *v = malloc((size_t)(elems * esize));
    double *kf = malloc(sizeof(double) * (size_t)elems),
           *vf = malloc(sizeof(double) * (size_t)elems);
    static double qf[HEADS * ROWS][MAX_DIM];
    static float q[HEADS * ROWS * MAX_DIM], o[HEADS * ROWS * MAX_DIM];
    static float s[HEADS * ROWS * FA_CPU_TILE_K] __attribute__((aligned(64)));
    static const void *k_rows[(FA_CPU_TILE_K + FA_CPU_DECODE_AHEAD) * HEADS];
    static const void *v_rows[FA_CPU_TILE_K * HEADS];
    float m[HEADS * ROWS], l[HEADS * ROWS];
    int visible[HEADS * ROWS];
    cr_assert(k && v && kf && vf);
    uint32_t seed = (uint32_t)(c->dim * 131 + c->nq * 7 + c->heads * 3 + c->dtype);
    for (int64_t e = 0; e < elems; e++) {
        kf[e] = put(c->dtype, k, e, uniform(&seed));
        vf[e] = put(c->dtype, v, e, uniform(&seed));
    }
    for (int r = 0; r < rows; r++) {
        for (int d = 0; d < ldo; d++) {
            q[r * ldo + d] = d < c->dim ? 2.0f * uniform(&seed) : 0.0f;
            qf[r][d] = q[r * ldo + d];
            o[r * ldo + d] = 0.0f;
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }

    const float scale = 1.0f / sqrtf((float)c->dim);
    fa_cpu_decode_step st = {.dtype = c->dtype,
                             .dim = c->dim,
                             .heads = c->heads,
                             .nq = c->nq,
                             .k = k_rows,
                             .v = v_rows,
                             .q = q,
                             .ldq = ldo,
                             .scale = scale * 1.4426950408889634f,
                             .m = m,
                             .l = l,
                             .o = o,
                             .ldo = ldo,
                             .s = s,
                             .lds = rows};
    for (int k0 = 0; k0 < KEYS; k0 += c->block) {
        st.nk = KEYS - k0 < c->block ? KEYS - k0 : c->block;
        const int after = KEYS - k0 - st.nk;
        const int want = (FA_CPU_DECODE_AHEAD + c->heads - 1) / c->heads;
        st.ahead = (after < want ? after : want) * c->heads;
        for (int x = 0; x < st.nk * c->heads + st.ahead; x++)
            k_rows[x] = k + ((int64_t)k0 * c->heads + x) * ld * esize;
        for (int x = 0; x < st.nk * c->heads; x++)
            v_rows[x] = v + ((int64_t)k0 * c->heads + x) * ld * esize;
        for (int r = 0; r < rows; r++) {
            const int n = seen_by(c, r % c->nq) - k0;
            visible[r] = n < 0 ? 0 : n > st.nk ? st.nk : n;
        }
        st.visible = c->masked ? visible : NULL;
        c->set->decode_block(&st);
    }

    for (int r = 0; r < rows; r++) {
        const int n = seen_by(c, r % c->nq), h = r / c->nq;
        const char *what = c->masked ? "masked" : "unmasked";
        if (n == 0) {
            cr_assert(l[r] == 0.0f && m[r] == -INFINITY, "%s %s D=%d nq=%d row %d: no key seen",
                      c->set->name, what, c->dim, c->nq, r);
            for (int d = 0; d < c->dim; d++)
                cr_assert(o[r * ldo + d] == 0.0f);
            continue;
        }
        double t[KEYS], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < n; j++) {
            double dot = 0.0;
            for (int d = 0; d < c->dim; d++)
                dot += qf[r][d] * kf[((int64_t)j * c->heads + h) * ld + d];
            t[j] = dot * scale;
            mx = fmax(mx, t[j]);
        }
        for (int j = 0; j < n; j++)
            sum += exp(t[j] - mx);
        const double lse = mx + log(sum);
        const double got_lse = ((double)m[r] + log2((double)l[r])) * M_LN2;
        cr_assert(fabs(got_lse - lse) < 1e-5 * (1.0 + fabs(lse)),
                  "%s dtype %d %s D=%d heads %d nq=%d row %d: LSE %.8g, float64 %.8g", c->set->name,
                  c->dtype, what, c->dim, c->heads, c->nq, r, got_lse, lse);
        for (int d = 0; d < c->dim; d++) {
            double ref = 0.0;
            for (int j = 0; j < n; j++)
                ref += exp(t[j] - lse) * vf[((int64_t)j * c->heads + h) * ld + d];
            const double got = o[r * ldo + d] / l[r];
            cr_assert(fabs(got - ref) < 2e-6 + 1e-5 * fabs(ref),
                      "%s dtype %d %s D=%d heads %d nq=%d row %d, column %d: %.8g, float64 %.8g",
                      c->set->name, c->dtype, what, c->dim, c->heads, c->nq, r, d, got, ref);
        }
    }
    free(k);
    free(v);
    free(kf);
    free(vf);
}

Test(cpu_kernels, decode_block_matches_float64_in_every_kernel_set)
{
    const fa_cpu_kernels *sets[8];
    const int n_sets = fa_cpu_kernels_available(sets, 8);
    static const int dims[] = {8, 40, 64, 128, 136, 256};
    static const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16, FA_DTYPE_E4M3};
    cr_assert(n_sets >= 1 && sets[0] == fa_cpu_kernels_select());
    cr_assert_str_eq(sets[n_sets - 1]->name, "generic");
    for (int s = 0; s < n_sets; s++)
        for (size_t t = 0; t < 4; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (int nq = 1; nq <= ROWS; nq++)
                    for (int masked = 0; masked < 2; masked++) {
                        /* one KV head in 64-key blocks, three in 16-key blocks */
                        const decode_case one = {sets[s], dtypes[t],   dims[d],      1,
                                                 nq,      masked != 0, FA_CPU_TILE_K};
                        const decode_case three = {sets[s], dtypes[t],   dims[d], 3,
                                                   nq,      masked != 0, 16};
                        run_case(&one);
                        run_case(&three);
                    }
    /* the most rows a block takes */
    for (int s = 0; s < n_sets; s++) {
        const decode_case most = {sets[s], FA_DTYPE_F16, 128, HEADS, ROWS, true, FA_CPU_TILE_K};
        run_case(&most);
    }
}

/* load_row of every kernel set converts all 256 e4m3 values exactly (the vector path and the
 * tail alike), and scales them. */
Test(cpu_kernels, load_row_converts_every_e4m3_value)
{
    const fa_cpu_kernels *sets[8];
    const int n_sets = fa_cpu_kernels_available(sets, 8);
    uint8_t all[256 + 3];
    for (int x = 0; x < 259; x++)
        all[x] = (uint8_t)(x * 5 % 256); /* every value, out of order; 3 more for a tail */
    float got[259];
    for (int s = 0; s < n_sets; s++)
        for (int shift = 0; shift < 2; shift++) { /* aligned and one byte off */
            const float scale = shift ? 0.75f : 1.0f;
            sets[s]->load_row(FA_DTYPE_E4M3, all + shift, 259 - shift, scale, got);
            for (int x = 0; x < 259 - shift; x++) {
                const float want = fa_e4m3_to_f32(all[x + shift]) * scale;
                if (isnan(want))
                    cr_assert(isnan(got[x]), "%s: 0x%02x", sets[s]->name, all[x + shift]);
                else
                    cr_assert(got[x] == want && signbit(got[x]) == signbit(want),
                              "%s: 0x%02x -> %a, expected %a", sets[s]->name, all[x + shift],
                              (double)got[x], (double)want);
            }
        }
}
