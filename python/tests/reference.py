# SPDX-License-Identifier: MIT
"""Attention in NumPy, forward and backward, for the tests: in float64 as the reference, and in a
lower precision as the baseline of README's tolerance rule (an ordinary, non-flash
implementation in that precision: scores and sums in float32, P and dS rounded to the dtype where
they enter a product, outputs rounded to the dtype)."""

import numpy as np


def mask(sq, sk, causal=False, window=None):
    """True where query i sees key j: causal and window aligned bottom-right (README)."""
    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    seen = np.ones((sq, sk), bool)
    if causal:
        seen &= j <= i
    if window is not None:
        left, right = window
        if left >= 0:
            seen &= j >= i - left
        if right >= 0:
            seen &= j <= i + right
    return seen


def _expand_kv(x, hq):
    """(B, Hkv, S, D) -> (B, Hq, S, D): query head h reads KV head h // (Hq // Hkv)."""
    return np.repeat(x, hq // x.shape[1], axis=1)


def _fold_kv(dx, hkv):
    b, hq, s, d = dx.shape
    return dx.reshape(b, hkv, hq // hkv, s, d).sum(axis=2)


def alibi_bias(slopes, sq, sk):
    """ALiBi as an additive bias: -slope |i + Sk - Sq - j|, slopes (H,) or (B, H) ->
    (1 | B, H, Sq, Sk)."""
    slopes = np.asarray(slopes, np.float64)
    slopes = slopes[None, :] if slopes.ndim == 1 else slopes
    dist = np.abs(np.arange(sq)[:, None] + (sk - sq) - np.arange(sk)[None, :])
    return -slopes[:, :, None, None] * dist


def attention(q, k, v, dout=None, causal=False, scale=None, window=None, softcap=None,
              bias=None, compute=np.float64, dtype=None):
    """O, LSE (and dQ, dK, dV when dout is given) of (B, H, S, D) arrays, computed in `compute`
    with products' operands rounded to `dtype` (default: compute). `bias`, broadcastable to
    (B, H, Sq, Sk), is added to the (capped) scaled scores."""
    dtype = dtype or compute
    low = lambda x: x.astype(dtype).astype(compute)  # noqa: E731
    hkv = k.shape[1]
    q, k, v = (x.astype(compute) for x in (q, k, v))
    k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
    scale = compute(scale or 1.0 / np.sqrt(q.shape[-1]))
    raw = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s = softcap * np.tanh(raw / softcap) if softcap else raw
    if bias is not None:
        s = s + np.asarray(bias, np.float64).astype(compute)
    seen = mask(q.shape[2], k.shape[2], causal, window)
    s = np.where(seen, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m_safe)
    ell = e.sum(axis=-1, keepdims=True)
    lse = np.where(ell > 0, m_safe + np.log(np.where(ell > 0, ell, 1)), -np.inf)[..., 0]
    p = np.where(ell > 0, e / np.where(ell > 0, ell, 1), 0)
    o = np.einsum("bhqk,bhkd->bhqd", low(p), v)
    o = low(o)
    if dout is None:
        return o, lse
    do = dout.astype(compute)
    dv = np.einsum("bhqk,bhqd->bhkd", low(p), do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, v)
    delta = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    if softcap:
        ds = ds * (1 - np.tanh(raw / softcap) ** 2)
    dq = np.einsum("bhqk,bhkd->bhqd", low(ds), k) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", low(ds), q) * scale
    return o, lse, low(dq), low(_fold_kv(dk, hkv)), low(_fold_kv(dv, hkv))


def within(out, ref, base, factor):
    """README's rule: max |out - ref| <= factor * max |base - ref| + 1e-5. Returns (ok, err,
    bound) so a failing test can say by how much."""
    out, ref, base = (np.asarray(x, np.float64) for x in (out, ref, base))
    err = float(np.max(np.abs(out - ref))) if out.size else 0.0
    bound = factor * (float(np.max(np.abs(base - ref))) if out.size else 0.0) + 1e-5
    return err <= bound, err, bound
