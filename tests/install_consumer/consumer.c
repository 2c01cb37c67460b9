// SPDX-License-Identifier: MIT
/* Links against an installed flashattn and runs one tiny attention on the CPU backend. */
#include <flashattn.h>
#include <stdio.h>

int main(void)
{
    fa_context *ctx = NULL;
    if (fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx) != FA_OK)
        return 1;
    float data[8 * 3] = {0.5f, 1.0f};
    fa_buffer *b[4];
    for (int i = 0; i < 4; i++)
        if (fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof data, .data = data}, &b[i]))
            return 1;
    fa_tensor q = fa_tensor_bshd(b[0], FA_DTYPE_F32, 1, 3, 1, 8);
    fa_tensor k = fa_tensor_bshd(b[1], FA_DTYPE_F32, 1, 3, 1, 8);
    fa_tensor v = fa_tensor_bshd(b[2], FA_DTYPE_F32, 1, 3, 1, 8);
    fa_tensor o = fa_tensor_bshd(b[3], FA_DTYPE_F32, 1, 3, 1, 8);
    fa_status st = fa_attention_forward(ctx, NULL, &q, &k, &v, &o, NULL);
    printf("flashattn %s: %s\n", fa_version_string(), fa_status_name(st));
    fa_context_destroy(ctx);
    return st == FA_OK ? 0 : 1;
}
