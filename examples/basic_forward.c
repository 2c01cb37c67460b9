// SPDX-License-Identifier: MIT
/* The smallest complete use of flashattn: a causal f32 attention forward on the automatically
 * chosen backend, checked against a direct computation of the first query row. */
#include <flashattn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, S = 256, H = 4, D = 64 };

static int fail(const char *what, fa_status st, const fa_context *ctx)
{
    fprintf(stderr, "%s: %s: %s\n", what, fa_status_name(st),
            ctx ? fa_context_last_error(ctx) : fa_last_create_error());
    return 1;
}

int main(void)
{
    const size_t n = (size_t)B * S * H * D;
    float *host_q = malloc(n * 4), *host_k = malloc(n * 4), *host_v = malloc(n * 4);
    float *host_o = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        host_q[i] = sinf((float)i * 0.37f);
        host_k[i] = cosf((float)i * 0.11f);
        host_v[i] = sinf((float)i * 0.05f + 1.0f);
    }

    fa_context *ctx = NULL;
    fa_status st = fa_context_create(&(fa_context_desc){0}, &ctx);
    if (st != FA_OK)
        return fail("fa_context_create", st, NULL);
    fa_device_info dev;
    fa_context_device(ctx, &dev);
    printf("backend %s, device %s%s%s\n", fa_backend_name(fa_context_backend(ctx)), dev.name,
           dev.kernels[0] ? "; kernels: " : "", dev.kernels);

    fa_buffer *bq, *bk, *bv, *bo, *blse;
    if ((st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4, .data = host_q}, &bq)) ||
        (st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4, .data = host_k}, &bk)) ||
        (st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4, .data = host_v}, &bv)) ||
        (st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4}, &bo)) ||
        (st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = (size_t)B * H * S * 4}, &blse)))
        return fail("fa_buffer_create", st, ctx);

    const fa_tensor q = fa_tensor_bshd(bq, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor k = fa_tensor_bshd(bk, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor v = fa_tensor_bshd(bv, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor o = fa_tensor_bshd(bo, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor lse = fa_tensor_lse(blse, B, H, S);
    st = fa_attention_forward(ctx, &(fa_attention_desc){.causal = true}, &q, &k, &v, &o, &lse);
    if (st != FA_OK)
        return fail("fa_attention_forward", st, ctx);
    if ((st = fa_buffer_read(bo, 0, host_o, n * 4)) != FA_OK)
        return fail("fa_buffer_read", st, ctx);

    /* Causal query 0 sees only key 0, so its output row is V's row 0, head by head. */
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int d = 0; d < D; d++)
            worst = fmax(worst, fabs(host_o[h * D + d] - host_v[h * D + d]));
    printf("row 0 max error %.3g\n", worst);

    fa_context_destroy(ctx);
    free(host_q), free(host_k), free(host_v), free(host_o);
    return worst < 1e-6 ? 0 : 1;
}
