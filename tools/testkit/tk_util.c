// SPDX-License-Identifier: MIT
/* Element access, rounding, deterministic random numbers, and the conversion of a problem's
 * inputs to double and float that the reference and the baseline read. */
#include "tk_internal.h"

#include "fa_half.h"
#include "fa_platform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64's state moves by this constant a draw, so the state k draws on is known (the fill
 * below jumps to each chunk's). */
#define SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull

uint64_t fa_testkit_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += SPLITMIX64_GAMMA);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fa_testkit_rand_below(uint64_t *state, uint64_t n)
{
    if (n == 0)
        return 0;
    return fa_testkit_splitmix64(state) % n;
}

/* Uniform in (0, 1], 53 bits. */
static double rand_unit(uint64_t *state)
{
    return ((double)(fa_testkit_splitmix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* The fill runs in chunks of pairs on OpenMP's threads, each from the state its first draw
 * would see, and so writes what one sequential pass would. */
#define FILL_CHUNK_PAIRS ((size_t)1 << 16)

void fa_testkit_fill_random(void *dst, fa_dtype dtype, size_t n, uint64_t seed)
{
    const uint64_t start = seed ^ 0x5851f42d4c957f2dull;
    const size_t pairs = (n + 1) / 2;
    const long long chunks = (long long)((pairs + FILL_CHUNK_PAIRS - 1) / FILL_CHUNK_PAIRS);
    int any_nonzero = 0;
#pragma omp parallel for schedule(static) reduction(| : any_nonzero) if (chunks > 1)
    for (long long c = 0; c < chunks; c++) {
        const size_t first = (size_t)c * FILL_CHUNK_PAIRS;
        const size_t last = first + FILL_CHUNK_PAIRS < pairs ? first + FILL_CHUNK_PAIRS : pairs;
        uint64_t state = start + (uint64_t)(2 * first) * SPLITMIX64_GAMMA; /* two draws a pair */
        for (size_t pair = first; pair < last; pair++) {
            /* Box-Muller: two N(0,1) values, clipped to +-4 so no tail dominates an error max. */
            const double r = sqrt(-2.0 * log(rand_unit(&state)));
            const double a = 6.283185307179586 * rand_unit(&state);
            const double x[2] = {r * cos(a), r * sin(a)};
            for (size_t k = 0; k < 2 && 2 * pair + k < n; k++) {
                const size_t i = 2 * pair + k;
                const double y = x[k] > 4.0 ? 4.0 : (x[k] < -4.0 ? -4.0 : x[k]);
                fa_testkit_store(dst, dtype, i, y);
                if (!any_nonzero)
                    any_nonzero = fa_testkit_load(dst, dtype, i) != 0.0;
            }
        }
    }
    if (n > 0 && !any_nonzero)
        fa_testkit_store(dst, dtype, 0, 1.0);
}

double fa_testkit_load(const void *base, fa_dtype dtype, size_t i)
{
    switch (dtype) {
    case FA_DTYPE_F32:
        return ((const float *)base)[i];
    case FA_DTYPE_F16:
        return fa_f16_to_f32(((const uint16_t *)base)[i]);
    case FA_DTYPE_BF16:
        return fa_bf16_to_f32(((const uint16_t *)base)[i]);
    case FA_DTYPE_E4M3:
        return fa_e4m3_to_f32(((const uint8_t *)base)[i]);
    default:
        return NAN;
    }
}

void fa_testkit_store(void *base, fa_dtype dtype, size_t i, double x)
{
    switch (dtype) {
    case FA_DTYPE_F32:
        ((float *)base)[i] = (float)x;
        break;
    case FA_DTYPE_F16:
        /* via float: double -> float -> f16 may double-round, harmless for test data */
        ((uint16_t *)base)[i] = fa_f32_to_f16((float)x);
        break;
    case FA_DTYPE_BF16:
        ((uint16_t *)base)[i] = fa_f32_to_bf16((float)x);
        break;
    case FA_DTYPE_E4M3:
        ((uint8_t *)base)[i] = fa_f32_to_e4m3((float)x);
        break;
    default:
        break;
    }
}

float tk_round_f(fa_dtype dtype, float x)
{
    switch (dtype) {
    case FA_DTYPE_F16:
        return fa_f16_to_f32(fa_f32_to_f16(x));
    case FA_DTYPE_BF16:
        return fa_bf16_to_f32(fa_f32_to_bf16(x));
    case FA_DTYPE_E4M3:
        return fa_e4m3_to_f32(fa_f32_to_e4m3(x));
    default:
        return x;
    }
}

double fa_testkit_round(fa_dtype dtype, double x)
{
    return tk_round_f(dtype, (float)x);
}

fa_dtype fa_ref_o_dtype(const fa_ref_problem *p)
{
    return p->o_dtype != FA_DTYPE_INVALID ? p->o_dtype : p->dtype;
}

double fa_ref_scale(const fa_ref_problem *p)
{
    return p->scale != 0.0f ? (double)p->scale : 1.0 / sqrt((double)p->head_dim);
}

int64_t fa_ref_last_key(const fa_ref_problem *p, int64_t i)
{
    const int64_t diag = i + p->seq_k - p->seq_q;
    int64_t last = p->causal ? diag : p->seq_k - 1;
    if (p->window.enabled && p->window.right >= 0 && diag + p->window.right < last)
        last = diag + p->window.right;
    return last;
}

int64_t fa_ref_first_key(const fa_ref_problem *p, int64_t i)
{
    const int64_t diag = i + p->seq_k - p->seq_q;
    if (!p->window.enabled || p->window.left < 0 || diag - p->window.left <= 0)
        return 0;
    return diag - p->window.left;
}

/* Four independent sums: faster than one chain, and the order an unrolled kernel would use. */
double tk_dot64(const double *a, const double *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

float tk_dot32_serial(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

float tk_dot32(const float *a, const float *b, int64_t n)
{
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    for (; i < n; i++)
        s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static bool convert(const void *src, fa_dtype dtype, int64_t n, double **d, float **f)
{
    size_t count = n > 0 ? (size_t)n : 1;
    *d = malloc(count * sizeof **d);
    *f = malloc(count * sizeof **f);
    if (!*d || !*f)
        return false;
    for (int64_t i = 0; i < n; i++) {
        double x = fa_testkit_load(src, dtype, (size_t)i);
        (*d)[i] = x;
        (*f)[i] = (float)x;
    }
    return true;
}

bool tk_data_init(tk_data *t, const fa_ref_problem *p, const void *q, const void *k, const void *v,
                  const void *d_o)
{
    memset(t, 0, sizeof *t);
    t->p = *p;
    t->B = p->batch;
    t->Sq = p->seq_q;
    t->Sk = p->seq_k;
    t->Hq = p->heads_q;
    t->Hkv = p->heads_kv;
    t->D = p->head_dim;
    t->group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 1;
    t->scale = fa_ref_scale(p);
    t->scale_f = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim);
    int64_t nq = t->B * t->Sq * t->Hq * t->D, nk = t->B * t->Sk * t->Hkv * t->D;
    bool ok = convert(q, p->dtype, nq, &t->q, &t->qf) && convert(k, p->dtype, nk, &t->k, &t->kf) &&
              convert(v, p->dtype, nk, &t->v, &t->vf);
    if (ok && d_o)
        ok = convert(d_o, p->dtype, nq, &t->d_o, &t->d_of);
    if (!ok) {
        tk_data_free(t);
        return false;
    }
    /* FP8 descale factors: q by its KV head's, k and v by theirs (exact in double) */
    double *in64[3] = {t->q, t->k, t->v};
    float *in32[3] = {t->qf, t->kf, t->vf};
    for (int x = 0; x < 3; x++) {
        if (!p->descale[x])
            continue;
        const int64_t s = x ? t->Sk : t->Sq, h = x ? t->Hkv : t->Hq, per_kv = x ? 1 : t->group;
        for (int64_t i = 0; i < t->B * s * h * t->D; i++) {
            const int64_t b = i / (s * h * t->D), hk = i / t->D % h / per_kv;
            in64[x][i] *= (double)p->descale[x][b * t->Hkv + hk];
            in32[x][i] = (float)in64[x][i];
        }
    }
    return true;
}

void tk_data_free(tk_data *t)
{
    free(t->q);
    free(t->k);
    free(t->v);
    free(t->d_o);
    free(t->qf);
    free(t->kf);
    free(t->vf);
    free(t->d_of);
    memset(t, 0, sizeof *t);
}

bool tk_non_finite_mismatch(double out, double ref)
{
    if (isfinite(out) && isfinite(ref))
        return false;
    return isnan(ref) ? !isnan(out) : out != ref;
}

double tk_max_abs_err(const double *out, const double *ref, int64_t n, bool *non_finite)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i]) || !isfinite(out[i])) {
            if (tk_non_finite_mismatch(out[i], ref[i])) {
                *non_finite |= !isfinite(out[i]);
                m = INFINITY;
            }
            continue;
        }
        double e = fabs(out[i] - ref[i]);
        if (e > m)
            m = e;
    }
    return m;
}

double tk_max_abs_err_finite(const double *base, const double *ref, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(base[i]) && isfinite(ref[i]) && fabs(base[i] - ref[i]) > m)
            m = fabs(base[i] - ref[i]);
    return m;
}

double tk_max_lse_err(const double *out, const double *ref, int64_t n, bool *non_finite)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i])) { /* -inf (no key) or NaN (a row that saw a NaN score) */
            if (tk_non_finite_mismatch(out[i], ref[i])) {
                m = INFINITY;
                if (!isfinite(out[i]))
                    *non_finite = true;
            }
            continue;
        }
        if (!isfinite(out[i])) {
            *non_finite = true;
            m = INFINITY;
            continue;
        }
        double e = fabs(out[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
        if (e > m)
            m = e;
    }
    return m;
}

double tk_now(void)
{
    return fa_clock_seconds();
}
