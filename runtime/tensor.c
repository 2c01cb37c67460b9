// SPDX-License-Identifier: MIT
/* Convenience constructors for the two common memory layouts and the LSE. */
#include "fa_internal.h"

fa_tensor fa_tensor_bshd(fa_buffer *buf, fa_dtype dtype, int64_t batch, int64_t seq, int64_t heads,
                         int64_t dim)
{
    return (fa_tensor){
        .buffer = buf,
        .dtype = dtype,
        .shape = {batch, seq, heads, dim},
        .stride = {seq * heads * dim, heads * dim, dim, 1},
    };
}

fa_tensor fa_tensor_bhsd(fa_buffer *buf, fa_dtype dtype, int64_t batch, int64_t seq, int64_t heads,
                         int64_t dim)
{
    return (fa_tensor){
        .buffer = buf,
        .dtype = dtype,
        .shape = {batch, seq, heads, dim},
        .stride = {heads * seq * dim, dim, seq * dim, 1},
    };
}

fa_tensor fa_tensor_lse(fa_buffer *buf, int64_t batch, int64_t heads, int64_t seq_q)
{
    return (fa_tensor){
        .buffer = buf,
        .dtype = FA_DTYPE_F32,
        .shape = {batch, seq_q, heads, 1},
        .stride = {heads * seq_q, 1, seq_q, 1},
    };
}
