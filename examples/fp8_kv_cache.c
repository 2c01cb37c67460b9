// SPDX-License-Identifier: MIT
/* An FP8 decoding step: an f32 KV cache quantized to e4m3 per KV head (scale = the head's largest
 * magnitude / 448, the factor passed back as k_descale and v_descale), the query per tensor
 * likewise, and one query token attended on the CPU backend (the backend with an FP8 forward so
 * far) with o in f32. Checked twice: against the same attention computed here in double from the
 * dequantized values (what the library must match: its arithmetic is exact up to f32 sums), and,
 * for information, against the attention of the unquantized f32 values (what FP8 storage costs).
 * Exit status 0 when the first check passes. */
#include <flashattn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 2, SQ = 1, HQ = 8, HKV = 2, SK = 777, D = 64 };

#define CHECK(call)                                                                                \
    do {                                                                                           \
        fa_status st_ = (call);                                                                    \
        if (st_ != FA_OK) {                                                                        \
            fprintf(stderr, "%s: %s\n", #call, fa_status_name(st_));                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static float uniform(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* Quantizes n values of x (heads rows of `dim` each per position, positions of `count` rows) to
 * e4m3 in q8, one scale per head (max |x| / 448) into scale[b * heads + h], and writes the
 * dequantized values back into x. */
static void quantize(float *x, uint8_t *q8, int batch, int rows, int heads, int dim, float *scale)
{
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            float amax = 0.0f;
            for (int r = 0; r < rows; r++)
                for (int d = 0; d < dim; d++)
                    amax = fmaxf(amax, fabsf(x[((b * rows + r) * heads + h) * dim + d]));
            const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
            scale[b * heads + h] = s;
            for (int r = 0; r < rows; r++) {
                float *row = x + ((b * rows + r) * heads + h) * dim;
                uint8_t *out = q8 + ((b * rows + r) * heads + h) * dim;
                for (int d = 0; d < dim; d++)
                    row[d] /= s;
                CHECK(fa_convert(FA_DTYPE_E4M3, out, FA_DTYPE_F32, row, (size_t)dim));
                CHECK(fa_convert(FA_DTYPE_F32, row, FA_DTYPE_E4M3, out, (size_t)dim));
                for (int d = 0; d < dim; d++)
                    row[d] *= s;
            }
        }
}

/* O of query head h of batch entry b, in double, from q, k, v (f32, packed BSHD). */
static void attend64(const float *q, const float *k, const float *v, int b, int h, double *o)
{
    const int hk = h / (HQ / HKV);
    double s[SK], m = -INFINITY, sum = 0.0;
    for (int j = 0; j < SK; j++) {
        double dot = 0.0;
        for (int d = 0; d < D; d++)
            dot += (double)q[(b * HQ + h) * D + d] * k[((b * SK + j) * HKV + hk) * D + d];
        s[j] = dot / sqrt((double)D);
        m = fmax(m, s[j]);
    }
    for (int d = 0; d < D; d++)
        o[d] = 0.0;
    for (int j = 0; j < SK; j++) {
        const double p = exp(s[j] - m);
        sum += p;
        for (int d = 0; d < D; d++)
            o[d] += p * v[((b * SK + j) * HKV + hk) * D + d];
    }
    for (int d = 0; d < D; d++)
        o[d] /= sum;
}

int main(void)
{
    const size_t nq = (size_t)B * SQ * HQ * D, nk = (size_t)B * SK * HKV * D;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    float *q32 = malloc(nq * sizeof *q), *k32 = malloc(nk * sizeof *k),
          *v32 = malloc(nk * sizeof *v);
    uint8_t *q8 = malloc(nq), *k8 = malloc(nk), *v8 = malloc(nk);
    float *o = malloc(nq * sizeof *o);
    if (!q || !k || !v || !q32 || !k32 || !v32 || !q8 || !k8 || !v8 || !o)
        return 1;
    uint32_t seed = 12345;
    for (size_t i = 0; i < nq; i++)
        q[i] = q32[i] = 2.0f * uniform(&seed);
    for (size_t i = 0; i < nk; i++) {
        k[i] = k32[i] = 2.0f * uniform(&seed);
        v[i] = v32[i] = uniform(&seed) + (float)(i / D % HKV); /* heads of different ranges */
    }
    float q_scale, k_scale[B * HKV], v_scale[B * HKV];
    quantize(q, q8, 1, B * SQ * HQ, 1, D, &q_scale); /* one scale for the whole query */
    quantize(k, k8, B, SK, HKV, D, k_scale);
    quantize(v, v8, B, SK, HKV, D, v_scale);

    fa_context *ctx;
    CHECK(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx));
    fa_buffer *bq, *bk, *bv, *bo, *bqs, *bks, *bvs;
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = nq, .data = q8}, &bq));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = nk, .data = k8}, &bk));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = nk, .data = v8}, &bv));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = nq * sizeof(float)}, &bo));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof q_scale, .data = &q_scale}, &bqs));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof k_scale, .data = k_scale}, &bks));
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof v_scale, .data = v_scale}, &bvs));
    const fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_E4M3, B, SQ, HQ, D);
    const fa_tensor tk = fa_tensor_bshd(bk, FA_DTYPE_E4M3, B, SK, HKV, D);
    const fa_tensor tv = fa_tensor_bshd(bv, FA_DTYPE_E4M3, B, SK, HKV, D);
    const fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F32, B, SQ, HQ, D);
    const fa_tensor tqs = fa_tensor_bshd(bqs, FA_DTYPE_F32, 1, 1, 1, 1); /* per tensor */
    const fa_tensor tks = fa_tensor_bshd(bks, FA_DTYPE_F32, B, 1, HKV, 1);
    const fa_tensor tvs = fa_tensor_bshd(bvs, FA_DTYPE_F32, B, 1, HKV, 1);
    const fa_attention_desc desc = {.q_descale = &tqs, .k_descale = &tks, .v_descale = &tvs};
    fa_status st = fa_attention_forward(ctx, &desc, &tq, &tk, &tv, &to, NULL);
    if (st != FA_OK) {
        fprintf(stderr, "fa_attention_forward: %s: %s\n", fa_status_name(st),
                fa_context_last_error(ctx));
        return 1;
    }
    CHECK(fa_buffer_read(bo, 0, o, nq * sizeof *o));

    double exact = 0.0, storage = 0.0, ref[D], ref32[D];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++) {
            attend64(q, k, v, b, h, ref);         /* the dequantized values */
            attend64(q32, k32, v32, b, h, ref32); /* the values before quantization */
            for (int d = 0; d < D; d++) {
                exact = fmax(exact, fabs(o[(b * HQ + h) * D + d] - ref[d]));
                storage = fmax(storage, fabs(ref[d] - ref32[d]));
            }
        }
    printf("FP8 decoding step, B=%d Hq=%d Hkv=%d Sk=%d D=%d on the CPU backend:\n", B, HQ, HKV, SK,
           D);
    printf("  max |O - O(dequantized inputs, float64)| = %.3g\n", exact);
    printf("  max |O(dequantized) - O(f32 inputs)|      = %.3g (what e4m3 storage costs)\n",
           storage);
    fa_context_destroy(ctx);
    free(q), free(k), free(v), free(q32), free(k32), free(v32), free(q8), free(k8), free(v8);
    free(o);
    return exact <= 1e-5 ? 0 : 1;
}
