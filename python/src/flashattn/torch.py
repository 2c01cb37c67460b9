# SPDX-License-Identifier: MIT
"""flashattn as a PyTorch operator: attention(q, k, v, ...) with autograd and torch.compile.

    from flashattn.torch import attention
    out = attention(q, k, v, causal=True)   # q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D), as SDPA

The operators flashattn::forward and flashattn::backward are registered with
torch.library.custom_op, with fake (meta) implementations, so torch.compile traces through them,
and the forward's autograd formula calls the library's backward with the saved LSE. CPU tensors
run on the CPU backend (copied into its buffers and back, as the C API cannot yet wrap host
memory); CUDA tensors on the CUDA backend in place, on PyTorch's current stream, the default
(legacy) stream included."""

import threading
from typing import Optional, Tuple

import torch

from . import _arrays, _core, _lib

__all__ = ["attention", "attention_varlen", "attention_with_kvcache"]

_DTYPES = {torch.float32: _lib.DTYPE_F32, torch.float16: _lib.DTYPE_F16,
           torch.bfloat16: _lib.DTYPE_BF16, torch.int32: _lib.DTYPE_I32}
_contexts = {}
_contexts_lock = threading.Lock()


def _context(t):
    """The context for tensors on t's device: one CPU context, and one CUDA context per device
    and stream (the stream is fixed when a context is created)."""
    if t.device.type == "cpu":
        key = ("cpu",)
    elif t.device.type == "cuda":
        stream = torch.cuda.current_stream(t.device).cuda_stream
        key = ("cuda", t.device.index, stream)
    else:
        raise ValueError(f"flashattn: tensors on {t.device} are not supported (cpu, cuda)")
    with _contexts_lock:
        ctx = _contexts.get(key)
        if ctx is None:
            if key[0] == "cpu":
                ctx = _core.Context("cpu")
            else:  # a stream handle of 0, the legacy default stream, is mapped by Context
                ctx = _core.Context("cuda", key[1], cuda_stream=key[2])
            _contexts[key] = ctx
    return ctx


def _usable(t):
    """t itself where the library can read it (last stride 1, no broadcast), else a copy."""
    if t.stride(-1) != 1 or any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
        return t.contiguous()
    return t


def _device(t):
    return ("cpu", 0) if t.device.type == "cpu" else ("cuda", t.device.index)


def _view(t, bhsd):
    device = _device(t)
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:
        raise TypeError(f"flashattn: dtype {t.dtype} is not supported (float32, float16, "
                        "bfloat16)")
    v = _arrays.View(t.data_ptr(), device, dtype, t.shape, t.stride(), t)
    return v.permuted((0, 2, 1, 3)) if bhsd else v


def _lse_view(t):
    b, h, s = t.shape
    st = t.stride()
    # (B, H, Sq) seen as the library's (B, Sq, H, 1)
    return _arrays.View(t.data_ptr(), _device(t), _lib.DTYPE_F32, (b, s, h, 1),
                        (st[0], st[2], st[1], 1), t)


def _variants(alibi_slopes, bias, cu_seqlens_q=None, cu_seqlens_k=None):
    """(desc field, view) of the ALiBi slopes ((Hq,) or (B, Hq) float32), the additive bias
    ((B | 1, Hq | 1, Sq | 1, Sk), as SDPA's attn_mask) and the prefix sums of a packed batch
    (int32 (B + 1,)), where given."""
    extra = []
    for field, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if t is not None:
            extra.append((field, _view(t.contiguous().view(t.shape[0], 1, 1, 1), False)))
    if alibi_slopes is not None:
        t = _usable(alibi_slopes)
        v = _arrays.View(t.data_ptr(), _device(t), _DTYPES.get(t.dtype), t.shape, t.stride(), t)
        extra.append(("alibi_slopes", _arrays.slopes_view(v)))
    if bias is not None:
        extra.append(("bias", _arrays.bias_view(_view(_usable(bias), False))))
    return extra


def _run(ctx, forward, desc, inputs, outputs, extra=()):
    with ctx._lock, _core._Call(ctx) as call:
        tensors = [call.tensor(v) for v in inputs] + [call.tensor(v, True) for v in outputs]
        call.attach(desc, extra)
        fn = _lib.lib.fa_attention_forward if forward else _lib.lib.fa_attention_backward
        name = "fa_attention_forward" if forward else "fa_attention_backward"
        ctx._check(fn(ctx._handle, _core.byref(desc), *(_core.byref(t) for t in tensors)), name)
        call.finish()


def _desc(causal, scale, window_left, window_right, softcap, deterministic=False):
    window = None if window_left == -2 else (window_left, window_right)
    return _core.attention_desc(causal, scale if scale else None, window, softcap,
                                deterministic)


@torch.library.custom_op("flashattn::forward", mutates_args=())
def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
             window_left: int, window_right: int, softcap: float, bhsd: bool,
             deterministic: bool, alibi_slopes: Optional[torch.Tensor],
             bias: Optional[torch.Tensor], cu_seqlens_q: Optional[torch.Tensor],
             cu_seqlens_k: Optional[torch.Tensor], max_seqlen_q: int,
             max_seqlen_k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    q, k, v = _usable(q), _usable(k), _usable(v)
    out = torch.empty_like(q)
    b, sq, h = (q.shape[0], q.shape[2], q.shape[1]) if bhsd else q.shape[:3]
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    desc = _desc(causal, scale, window_left, window_right, softcap)
    desc.max_seqlen_q, desc.max_seqlen_k = max_seqlen_q, max_seqlen_k
    _run(_context(q), True, desc, [_view(t, bhsd) for t in (q, k, v)],
         [_view(out, bhsd), _lse_view(lse)],
         _variants(alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k))
    return out, lse


@_forward.register_fake
def _forward_fake(q, k, v, causal, scale, window_left, window_right, softcap, bhsd,
                  deterministic, alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                  max_seqlen_k):
    b, sq, h = (q.shape[0], q.shape[2], q.shape[1]) if bhsd else q.shape[:3]
    # the strides the real implementation gives: those of q as it uses it
    return torch.empty_like(_usable(q)), q.new_empty((b, h, sq), dtype=torch.float32)


@torch.library.custom_op("flashattn::backward", mutates_args=())
def _backward(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              out: torch.Tensor, lse: torch.Tensor, causal: bool, scale: float,
              window_left: int, window_right: int, softcap: float, bhsd: bool,
              deterministic: bool, alibi_slopes: Optional[torch.Tensor],
              bias: Optional[torch.Tensor], cu_seqlens_q: Optional[torch.Tensor],
              cu_seqlens_k: Optional[torch.Tensor], max_seqlen_q: int,
              max_seqlen_k: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dout, q, k, v, out = (_usable(t) for t in (dout, q, k, v, out))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    desc = _desc(causal, scale, window_left, window_right, softcap, deterministic)
    desc.max_seqlen_q, desc.max_seqlen_k = max_seqlen_q, max_seqlen_k
    _run(_context(q), False, desc,
         [_view(t, bhsd) for t in (q, k, v, out, dout)] + [_lse_view(lse)],
         [_view(t, bhsd) for t in (dq, dk, dv)],
         _variants(alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k))
    return dq, dk, dv


@_backward.register_fake
def _backward_fake(dout, q, k, v, out, lse, causal, scale, window_left, window_right, softcap,
                   bhsd, deterministic, alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k,
                   max_seqlen_q, max_seqlen_k):
    return tuple(torch.empty_like(_usable(t)) for t in (q, k, v))


def _setup_context(ctx, inputs, output):
    (q, k, v, causal, scale, window_left, window_right, softcap, bhsd, deterministic,
     alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, alibi_slopes, bias, cu_seqlens_q, cu_seqlens_k)
    ctx.options = (causal, scale, window_left, window_right, softcap, bhsd, deterministic)
    ctx.max_seqlens = (max_seqlen_q, max_seqlen_k)
    ctx.mark_non_differentiable(lse)


def _autograd_backward(ctx, dout, _dlse):
    q, k, v, out, lse, alibi_slopes, bias, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = _backward(dout, q, k, v, out, lse, *ctx.options, alibi_slopes, bias, cu_q, cu_k,
                           *ctx.max_seqlens)
    # the options, the slopes, the bias and the prefix sums take no gradient
    return (dq, dk, dv) + (None,) * 13


torch.library.register_autograd("flashattn::forward", _autograd_backward,
                                setup_context=_setup_context)


def attention(q, k, v, causal=False, scale=None, *, window=None, softcap=None,
              alibi_slopes=None, bias=None, layout="bhsd", deterministic=False,
              return_lse=False):
    """Exact attention, softmax(scale Q K^T) V, forward and backward through flashattn.

    q: (B, Hq, Sq, D), k and v: (B, Hkv, Sk, D) for layout "bhsd" (as
    F.scaled_dot_product_attention), or (B, S, H, D) for layout "bshd" (FlashAttention's; e.g.
    views of one packed QKV tensor); any strides whose last is 1 (others are copied). Hq must
    be a multiple of Hkv (GQA/MQA: query head h reads KV head h // (Hq // Hkv)). float32,
    float16 or bfloat16; D a multiple of 8 up to 256. `scale` None: 1/sqrt(D). `causal`:
    aligned bottom-right when Sq != Sk, as FlashAttention. `window` (left, right): query i sees
    keys i - left to i + right (aligned like causal; -1: no bound). `softcap` (e.g. 50.0):
    scores become softcap * tanh(s / softcap). `alibi_slopes` float32 (Hq,) or (B, Hq): ALiBi,
    -slope |i + Sk - Sq - j| added to the scaled scores. `bias` (B | 1, Hq | 1, Sq | 1, Sk),
    float32/16 or bfloat16, as SDPA's attn_mask: added to the scaled scores (-inf hides a key;
    size-1 dimensions broadcast); it takes no gradient. `deterministic`: bitwise-repeatable gradients
    (CUDA; the other backends are anyway). Returns out (like q), and with return_lse also the
    row log-sum-exp (B, Hq, Sq) float32, which takes no gradient."""
    if layout not in ("bhsd", "bshd"):
        raise ValueError(f"flashattn: layout must be 'bhsd' or 'bshd', not {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"flashattn: {name} has {t.dim()} dimensions, not 4")
        if t.device != q.device:
            raise ValueError(f"flashattn: {name} is on {t.device}, q on {q.device}")
    if scale is not None and scale == 0:
        raise ValueError("flashattn: scale must be non-zero (None: 1/sqrt(head_dim))")
    if window is None:
        left, right = -2, -2  # no window
    else:
        left, right = (int(x) for x in window)
        if left < -1 or right < -1:
            raise ValueError(f"flashattn: window bounds must be -1 or more, not {window}")
    out, lse = _forward(q, k, v, bool(causal), float(scale or 0.0), left, right,
                        float(softcap or 0.0), layout == "bhsd", bool(deterministic),
                        alibi_slopes, bias, None, None, 0, 0)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=0, max_seqlen_k=0,
                     causal=False, scale=None, *, window=None, softcap=None, alibi_slopes=None,
                     deterministic=False, return_lse=False):
    """attention over a packed batch of sequences of different lengths (FlashAttention's varlen
    call): q (total_q, Hq, D), k and v (total_k, Hkv, D); cu_seqlens_q and cu_seqlens_k, int32
    (B + 1,), the prefix sums of the sequences' lengths (sequence b is rows cu_seqlens[b] to
    cu_seqlens[b + 1] - 1); max_seqlen_q/k 0 or bounds on the lengths. Every option applies per
    sequence (causal and window aligned bottom-right on that sequence; alibi_slopes (Hq,) or
    (B, Hq)). Returns out (total_q, Hq, D), and with return_lse the LSE (Hq, total_q). Every
    backend takes it: CUDA's tensor-core kernels the whole batch in one launch (README says which
    head dims), elsewhere one call per sequence (the library's runtime loops over them)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(f"flashattn: {name} is packed (total, heads, dim), not {t.dim()}-D")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if t.dim() != 1 or t.dtype != torch.int32:
            raise ValueError(f"flashattn: {name} is int32 (B + 1,), not {t.dtype} {tuple(t.shape)}")
    if window is None:
        left, right = -2, -2
    else:
        left, right = (int(x) for x in window)
    out, lse = _forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), bool(causal),
                        float(scale or 0.0), left, right, float(softcap or 0.0), False,
                        bool(deterministic), alibi_slopes, None, cu_seqlens_q, cu_seqlens_k,
                        int(max_seqlen_q), int(max_seqlen_k))
    return (out[0], lse[0]) if return_lse else out[0]


@torch.library.custom_op("flashattn::forward_kvcache", mutates_args=("k_cache", "v_cache"))
def _forward_kvcache(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     k_new: Optional[torch.Tensor], v_new: Optional[torch.Tensor],
                     seqlens_k: Optional[torch.Tensor], block_table: Optional[torch.Tensor],
                     causal: bool, scale: float, window_left: int, window_right: int,
                     softcap: float, bhsd: bool,
                     num_splits: int) -> Tuple[torch.Tensor, torch.Tensor]:
    q = _usable(q)
    out = torch.empty_like(q)
    b, sq, h = (q.shape[0], q.shape[2], q.shape[1]) if bhsd else q.shape[:3]
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    desc = _desc(causal, scale, window_left, window_right, softcap)
    desc.num_splits = num_splits
    ctx = _context(q)
    extra = []
    for field, t in (("seqlens_k", seqlens_k), ("block_table", block_table)):
        if t is not None:
            v = _view(t.contiguous().view(t.shape[0], -1, 1, 1), False)
            extra.append((field, v))
    if k_new is not None:
        extra += [("k_new", _view(_usable(k_new), bhsd)), ("v_new", _view(_usable(v_new), bhsd))]
    with ctx._lock, _core._Call(ctx) as call:
        appends = k_new is not None
        tensors = [call.tensor(_view(q, bhsd)),
                   call.tensor(_view(k_cache, bhsd), inout=appends),
                   call.tensor(_view(v_cache, bhsd), inout=appends),
                   call.tensor(_view(out, bhsd), True), call.tensor(_lse_view(lse), True)]
        call.attach(desc, extra)
        ctx._check(_lib.lib.fa_attention_forward(ctx._handle, _core.byref(desc),
                                                 *(_core.byref(t) for t in tensors)),
                   "fa_attention_forward")
        call.finish()
    return out, lse


@_forward_kvcache.register_fake
def _forward_kvcache_fake(q, k_cache, v_cache, k_new, v_new, seqlens_k, block_table, causal,
                          scale, window_left, window_right, softcap, bhsd, num_splits):
    b, sq, h = (q.shape[0], q.shape[2], q.shape[1]) if bhsd else q.shape[:3]
    return torch.empty_like(_usable(q)), q.new_empty((b, h, sq), dtype=torch.float32)


def attention_with_kvcache(q, k_cache, v_cache, k_new=None, v_new=None, seqlens_k=None,
                           block_table=None, causal=False, scale=None, *, window=None,
                           softcap=None, layout="bhsd", num_splits=0, return_lse=False):
    """Attention against a KV cache, forward only (inference), as FlashAttention's
    flash_attn_with_kvcache: `seqlens_k` (int32, (B,)) the keys each sequence holds in caches
    of capacity Sk, (B, Hkv, Sk, D) in layout "bhsd"; with `block_table` (int32, (B,
    max_pages)) the caches are pages, (num_pages, Hkv, page_size, D); `k_new` and `v_new`
    (B, Hkv, S_new, D) are first written into the caches at seqlens_k[b] (in place; seqlens_k
    is left to the caller to advance), and the attention then covers seqlens_k[b] + S_new keys,
    the causal mask aligned on that length. Other arguments as attention(). The caches must be
    usable in place (last stride 1). A seqlens_k or block_table value out of range raises
    InvalidArgumentError (ERROR_OUT_OF_BOUNDS) from the call, except on CUDA without k_new:
    there the kernels clamp it (no read leaves the caches, the output is undefined) and the
    library's context reports it at its next synchronize instead (so that no call waits for
    the GPU to read them back)."""
    if layout not in ("bhsd", "bshd"):
        raise ValueError(f"flashattn: layout must be 'bhsd' or 'bshd', not {layout!r}")
    if (k_new is None) != (v_new is None):
        raise ValueError("flashattn: k_new and v_new go together")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise ValueError(f"flashattn: {name} must have a last stride of 1 (it is written)")
    left, right = (-2, -2) if window is None else (int(window[0]), int(window[1]))
    out, lse = _forward_kvcache(q, k_cache, v_cache, k_new, v_new, seqlens_k, block_table,
                                bool(causal), float(scale or 0.0), left, right,
                                float(softcap or 0.0), layout == "bhsd", int(num_splits))
    return (out, lse) if return_lse else out
