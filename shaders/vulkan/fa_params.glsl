// SPDX-License-Identifier: MIT
// The push constants of the forward (FA_FWD_PARAMS) and of the backward's dK/dV and dQ passes
// (FA_BWD_PARAMS), shared by the scalar and the cooperative-matrix shaders; the host fills them
// in backends/vulkan/vk_attention.c. Offsets and strides in elements: every index of a valid call
// is below 2^32 because a bound buffer never exceeds maxStorageBufferRange (the host rejects
// anything larger).
#define FA_NO_MEMBERS
#define FA_FWD_PARAMS FA_FWD_PARAMS_WITH(FA_NO_MEMBERS)
// The same, with a kernel's own members after the common ones.
#define FA_FWD_PARAMS_WITH(extra_)                                                             \
    layout(push_constant) uniform Params {                                                     \
        uint q_off, q_sb, q_ss, q_sh;                                                          \
        uint k_off, k_sb, k_ss, k_sh;                                                          \
        uint v_off, v_sb, v_ss, v_sh;                                                          \
        uint o_off, o_sb, o_ss, o_sh;                                                          \
        uint lse_off, lse_sb, lse_ss, lse_sh;                                                  \
        uint seq_q, seq_k, has_lse;                                                            \
        float scale_log2; /* scale * log2(e) */                                                \
        uint sl_off, sl_sb, has_sl; /* seqlens_k (binding 5), when has_sl */                   \
        extra_                                                                                 \
    } pc;

// Batch entry b_'s keys: its seqlens_k value where given (clamped, so that whatever the buffer
// holds no read passes the cache; the host checked the values), else all of them.
#define FA_SEQ_K_OF(b_)                                                                        \
    (pc.has_sl != 0u ? uint(clamp(sl_buf[pc.sl_off + (b_) * pc.sl_sb], 0, int(pc.seq_k)))     \
                     : pc.seq_k)
#define FA_SEQLENS_BINDING                                                                     \
    layout(set = 0, binding = 5, std430) readonly buffer sl_block { int sl_buf[]; };

// The members the forwards (after FA_FWD_PARAMS's) and the backward passes end with
// (backends/vulkan/vk_attention.c, fa_vk_variant_push): the multiplier of the raw score q.k,
// scale log2(e) or with SOFTCAP 2 log2(e) scale / softcap, then softcap log2(e); the window's
// bounds (WINDOW), causal folded in, -1 for none (fa_attention_call.window).
#define FA_VARIANT_MEMBERS                                                                     \
    float score_mul;                                                                           \
    float cap_log2;                                                                            \
    int win_left, win_right;

// g0 is dK or dQ, g1 dV (unused by dQ); Delta at ws[delta_off + row], the LSE (log2) at ws[row].
// 128 bytes, the most a device must take.
#define FA_BWD_PARAMS                                                                          \
    layout(push_constant) uniform Params {                                                     \
        uint q_off, q_sb, q_ss, q_sh;                                                          \
        uint k_off, k_sb, k_ss, k_sh;                                                          \
        uint v_off, v_sb, v_ss, v_sh;                                                          \
        uint do_off, do_sb, do_ss, do_sh;                                                      \
        uint g0_off, g0_sb, g0_ss, g0_sh;                                                      \
        uint g1_off, g1_sb, g1_ss, g1_sh;                                                      \
        uint seq_q, seq_k, delta_off;                                                          \
        float scale;                                                                           \
        FA_VARIANT_MEMBERS                                                                     \
    } pc;
