// SPDX-License-Identifier: MIT
/* libFuzzer harness over argument validation and tensor descriptions: each input describes the
 * tensors (buffer, byte offset, dtype, shape, strides) and options of one forward or backward
 * call on the CPU backend, over four host buffers (a forward may take the unused gradient
 * tensors as its seqlens_k and block_table, whose values are then whatever the buffers hold, and
 * as the k_new and v_new of an append, which makes k and v outputs), with or without a sliding
 * window and a softcap, and, where the input is long enough for a tenth and an eleventh tensor,
 * ALiBi slopes and an additive bias, and, longer still, the prefix sums of a packed batch and
 * FP8 descale factors (dtypes up to e4m3).
 * Whatever the bytes, the library must answer with a status and never read or write outside the
 * buffers (AddressSanitizer watches), nor touch the inputs. Built and run by tools/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

enum { BUFFERS = 4, BUFFER_BYTES = 1 << 14, TENSORS = 9, TENSOR_BYTES = 1 + 2 + 1 + 4 + 8 };

static fa_context *ctx;
static fa_buffer *buffers[BUFFERS];
static unsigned char inputs[BUFFER_BYTES]; /* the buffers' first content */

static void setup(void)
{
    if (fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU, .cpu = {.threads = 1}},
                          &ctx))
        abort();
    for (size_t i = 0; i < sizeof inputs; i++)
        inputs[i] = (unsigned char)(i * 37 + 11) & 0x3f; /* small finite values in every dtype */
    for (int b = 0; b < BUFFERS; b++)
        if (fa_buffer_create(ctx, &(fa_buffer_desc){BUFFER_BYTES, inputs}, &buffers[b]))
            abort();
}

/* One tensor from TENSOR_BYTES bytes: buffer, offset, dtype, shape (small, so that valid calls
 * stay cheap; the head dim byte-sized, so that invalid ones are common), strides (signed, may be
 * zero: packed). */
static fa_tensor tensor(const uint8_t *d)
{
    fa_tensor t = {.buffer = d[0] % 5 == 4 ? NULL : buffers[d[0] % 5 % BUFFERS]};
    t.offset = (uint64_t)(d[1] | d[2] << 8);
    t.dtype = (fa_dtype)(d[3] % 6); /* FA_DTYPE_INVALID up to FA_DTYPE_E4M3 */
    t.shape[0] = d[4] % 4;
    t.shape[1] = d[5] % 24;
    t.shape[2] = d[6] % 6;
    t.shape[3] = d[7];
    for (int i = 0; i < 4; i++)
        t.stride[i] = (int16_t)(d[8 + 2 * i] | d[9 + 2 * i] << 8);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx)
        setup();
    if (size < 4 + TENSORS * TENSOR_BYTES)
        return 0;
    /* a window's bounds from -2 (invalid) up, switched on or not; a softcap off, on, negative
     * or NaN */
    static const float softcaps[4] = {0.0f, 30.0f, -1.0f, __builtin_nanf("")};
    fa_attention_desc desc = {
        .causal = data[0] & 1,
        .deterministic = data[0] & 2,
        .window = {data[0] & 4, (data[0] >> 3 & 7) - 2, (data[3] >> 6) - 2},
        .softcap = softcaps[data[0] >> 6],
    };
    uint32_t scale_bits = (uint32_t)(data[1] | data[2] << 8) << 16;
    memcpy(&desc.scale, &scale_bits, sizeof desc.scale); /* any float, NaN and inf included */
    const bool backward = data[3] & 1, with_lse = data[3] & 2;
    fa_tensor t[TENSORS];
    for (int i = 0; i < TENSORS; i++)
        t[i] = tensor(data + 4 + i * TENSOR_BYTES);
    /* A longer input: its next byte, when odd, gives the call ALiBi slopes from the tenth
     * tensor (an input: it is never written). */
    fa_tensor slopes;
    const uint8_t *extra = data + 4 + TENSORS * TENSOR_BYTES;
    if (size >= 4 + (TENSORS + 1) * TENSOR_BYTES + 1 && (extra[0] & 1)) {
        slopes = tensor(extra + 1);
        desc.alibi_slopes = &slopes;
    }
    /* Longer still: the byte after the tenth tensor, when odd, gives an additive bias from an
     * eleventh (an input too). */
    fa_tensor bias;
    const uint8_t *more = extra + 1 + TENSOR_BYTES;
    if (size >= 4 + (TENSORS + 2) * TENSOR_BYTES + 2 && (more[0] & 1)) {
        bias = tensor(more + 1);
        desc.bias = &bias;
    }
    /* Longer still: the byte after the eleventh tensor, when odd, makes the call a packed batch
     * whose prefix sums are a twelfth and (when bit 1 is set too, else NULL) a thirteenth tensor
     * (inputs too), with bounds on the lengths from its high bits. */
    fa_tensor cu_q, cu_k;
    const uint8_t *packed = more + 1 + TENSOR_BYTES;
    if (size >= 4 + (TENSORS + 4) * TENSOR_BYTES + 3 && (packed[0] & 1)) {
        cu_q = tensor(packed + 1);
        cu_k = tensor(packed + 1 + TENSOR_BYTES);
        desc.cu_seqlens_q = &cu_q;
        desc.cu_seqlens_k = packed[0] & 2 ? &cu_k : NULL;
        desc.max_seqlen_q = (packed[0] >> 2 & 7) - 1;
        desc.max_seqlen_k = (packed[0] >> 5) - 1;
    }
    /* Longer still: the byte after the thirteenth tensor gives FP8 descale factors from a
     * fourteenth (an input too): bit 0 q's, bit 1 k's, bit 2 v's. */
    fa_tensor descale;
    const uint8_t *fp8 = packed + 1 + 2 * TENSOR_BYTES;
    if (size >= 4 + (TENSORS + 5) * TENSOR_BYTES + 4 && (fp8[0] & 7)) {
        descale = tensor(fp8 + 1);
        desc.q_descale = fp8[0] & 1 ? &descale : NULL;
        desc.k_descale = fp8[0] & 2 ? &descale : NULL;
        desc.v_descale = fp8[0] & 4 ? &descale : NULL;
    }
    /* q, k, v, o, lse, then d_o, d_q, d_k, d_v. Buffer 0 as it is before the call: */
    static unsigned char before[BUFFER_BYTES], now[BUFFER_BYTES];
    if (fa_buffer_read(buffers[0], 0, before, sizeof before) != FA_OK)
        abort();
    if (backward)
        fa_attention_backward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[5], &t[4], &t[6], &t[7],
                              &t[8]);
    else {
        desc.seqlens_k = data[3] & 4 ? &t[5] : NULL;
        desc.block_table = data[3] & 8 ? &t[6] : NULL;
        desc.k_new = data[3] & 16 ? &t[7] : NULL;
        desc.v_new = data[3] & 32 ? &t[8] : NULL;
        fa_attention_forward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], with_lse ? &t[4] : NULL);
    }
    fa_context_synchronize(ctx);
    /* the call may write its outputs; where none of them is in buffer 0, it must leave buffer 0
     * as it was (inputs are never written) */
    const bool append = !backward && (data[3] & 48);
    bool output_in_0 = append && (t[1].buffer == buffers[0] || t[2].buffer == buffers[0]);
    for (int i = 3; i < TENSORS; i++)
        output_in_0 |= t[i].buffer == buffers[0] && (i == 3 || i == 4 || (backward && i >= 6));
    if (!output_in_0 && fa_buffer_read(buffers[0], 0, now, sizeof now) == FA_OK &&
        memcmp(now, before, sizeof now) != 0)
        abort();
    return 0;
}
