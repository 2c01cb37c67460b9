# SPDX-License-Identifier: MIT
"""flashattn.torch.attention on CPU tensors against F.scaled_dot_product_attention in float64,
with README's tolerance rule (the baseline is SDPA itself in the tensors' dtype), forward and
backward, under autograd and torch.compile. Skipped, with the reason, where PyTorch is missing."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
F = torch.nn.functional

import flashattn  # noqa: E402
import reference  # noqa: E402
from flashattn.torch import attention, attention_varlen, attention_with_kvcache  # noqa: E402,E501

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_step.py")


def mask(sq, sk, causal, window):
    """The visible (query, key) pairs, from the NumPy reference's rule (README)."""
    return torch.from_numpy(reference.mask(sq, sk, causal, window))


def sdpa(q, k, v, causal=False, scale=None, window=None, softcap=None):
    """SDPA on (B, H, S, D) tensors with flashattn's semantics: the mask aligned bottom-right
    (SDPA's is_causal aligns top-left), GQA, and softcap through an explicit score path."""
    sq, sk = q.shape[2], k.shape[2]
    if softcap:
        k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
        s = q @ k.transpose(-1, -2) * (scale or q.shape[-1] ** -0.5)
        s = softcap * torch.tanh(s / softcap)
        s = s.masked_fill(~mask(sq, sk, causal, window), float("-inf"))
        return torch.softmax(s, dim=-1) @ v
    m = mask(sq, sk, causal, window) if (causal or window) else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale,
                                          enable_gqa=k.shape[1] != q.shape[1])


def rule(got, ref, base, factor):
    err = (got.double() - ref).abs().max().item()
    bound = factor * (base.double() - ref).abs().max().item() + 1e-5
    assert err <= bound, f"max error {err:.3g} > bound {bound:.3g}"


CASES = {
    "plain": (2, 4, 4, 33, 33, 64, {}),
    "causal": (1, 4, 4, 70, 70, 32, {"causal": True}),
    "causal-sq<sk": (2, 2, 2, 7, 40, 16, {"causal": True}),
    "gqa": (2, 8, 2, 17, 29, 64, {}),
    "scale": (1, 2, 2, 20, 20, 24, {"scale": 0.3}),
    "window": (1, 2, 1, 50, 50, 32, {"window": (7, 3)}),
    "softcap": (1, 2, 2, 30, 30, 40, {"softcap": 5.0, "scale": 1.0}),
}


def inputs(case, dtype=torch.float32, seed=0):
    b, hq, hkv, sq, sk, d, opts = CASES[case]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, sq, d, generator=g)
    k, v = (torch.randn(b, hkv, sk, d, generator=g) for _ in range(2))
    dout = torch.randn(b, hq, sq, d, generator=g)
    return [x.to(dtype) for x in (q, k, v, dout)], opts


def grads(fn, tensors, dout):
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out = fn(*leaves)
    out.backward(dout)
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_sdpa_f32(case, layout):
    (q, k, v, dout), opts = inputs(case)
    ref = grads(lambda *t: sdpa(*t, **opts), [x.double() for x in (q, k, v)], dout.double())
    base = grads(lambda *t: sdpa(*t, **opts), (q, k, v), dout)
    if layout == "bshd":  # the same data in (B, S, H, D) tensors
        t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
        got = grads(lambda *a: attention(*a, layout="bshd", **opts).transpose(1, 2),
                    [t(x) for x in (q, k, v)], dout)
        got = got[:1] + [g.transpose(1, 2) for g in got[1:]]
    else:
        got = grads(lambda *a: attention(*a, **opts), (q, k, v), dout)
    for name, g, r, b, factor in zip(("O", "dQ", "dK", "dV"), got, ref, base, (2, 3, 3, 3)):
        assert g.dtype == torch.float32, name
        rule(g, r, b, factor)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    (q, k, v, dout), _ = inputs("causal", dtype, seed=3)
    ref = grads(lambda *t: sdpa(*t, causal=True), [x.double() for x in (q, k, v)], dout.double())
    base = grads(lambda *t: sdpa(*t, causal=True), (q, k, v), dout)
    got = grads(lambda *t: attention(*t, causal=True), (q, k, v), dout)
    for g, r, b, factor in zip(got, ref, base, (2, 3, 3, 3)):
        assert g.dtype == dtype
        rule(g, r, b, factor)


def test_lse_and_strided_views():
    """BHSD views of BSHD memory (a transposed projection) are used in place; the output keeps
    their strides; the LSE matches logsumexp and takes no gradient."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 21, 3, 4, 32, generator=g)  # (B, S, 3, H, D)
    q, k, v = (x[:, :, i].transpose(1, 2) for i in range(3))
    out, lse = attention(q, k, v, return_lse=True)
    assert out.stride() == torch.empty_like(q).stride()
    s = (q.double() @ k.double().transpose(-1, -2)) * 32 ** -0.5
    assert torch.allclose(lse.double(), torch.logsumexp(s, dim=-1), rtol=1e-5, atol=1e-5)
    assert not lse.requires_grad and lse.shape == (2, 4, 21) and lse.dtype == torch.float32
    torch.testing.assert_close(out.double(), sdpa(q.double(), k.double(), v.double()),
                               rtol=0, atol=1e-5)


def test_broadcast_gradient():
    """out.sum() hands backward an expanded gradient (stride 0), which is copied, not misread."""
    (q, k, v, _), _ = inputs("plain")
    got = grads(lambda *t: attention(*t, causal=True).sum(), (q, k, v), torch.tensor(1.0))
    ref = grads(lambda *t: sdpa(*t, causal=True).sum(), [x.double() for x in (q, k, v)],
                torch.tensor(1.0, dtype=torch.float64))
    for g, r in zip(got[1:], ref[1:]):
        torch.testing.assert_close(g.double(), r, rtol=0, atol=1e-4)


def test_errors():
    (q, k, v, _), _ = inputs("plain")
    with pytest.raises(flashattn.InvalidArgumentError, match="ERROR_SHAPE_MISMATCH"):
        attention(q, k[..., :32], v[..., :32])
    with pytest.raises(TypeError, match="float64"):
        attention(q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match="layout"):
        attention(q, k, v, layout="sbhd")
    with pytest.raises(ValueError, match="dimensions"):
        attention(q[0], k, v)
    with pytest.raises(ValueError, match="window"):
        attention(q, k, v, window=(-5, 0))


@pytest.mark.parametrize("variant", ["alibi", "bias", "bias-bcast"])
def test_alibi_and_bias_match_sdpa_attn_mask(variant):
    """ALiBi slopes and a bias against SDPA with the same scores as a float attn_mask, forward
    and backward (the mask takes no gradient)."""
    (q, k, v, dout), _ = inputs("gqa", seed=5)
    b, hq, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    g = torch.Generator().manual_seed(6)
    if variant == "alibi":
        slopes = torch.rand(b, hq, generator=g) * 0.4 + 0.05
        dist = (torch.arange(sq)[:, None] + (sk - sq) - torch.arange(sk)[None, :]).abs()
        mask, opts = -slopes[:, :, None, None] * dist, {"alibi_slopes": slopes}
    elif variant == "bias":
        mask = torch.randn(b, hq, sq, sk, generator=g)
        opts = {"bias": mask}
    else:  # one row per sequence, broadcast over heads and queries, some keys hidden
        mask = torch.randn(b, 1, 1, sk, generator=g)
        mask[..., ::4] = float("-inf")
        opts = {"bias": mask}
    def sdpa_masked(q, k, v):
        m = mask.to(q.dtype)
        kk, vv = (x.repeat_interleave(hq // x.shape[1], dim=1) for x in (k, v))
        return F.scaled_dot_product_attention(q, kk, vv, attn_mask=m)

    ref = grads(sdpa_masked, [x.double() for x in (q, k, v)], dout.double())
    base = grads(sdpa_masked, (q, k, v), dout)
    got = grads(lambda *t: attention(*t, **opts), (q, k, v), dout)
    for name, gt, r, bl, factor in zip(("O", "dQ", "dK", "dV"), got, ref, base, (2, 3, 3, 3)):
        rule(gt, r, bl, factor)


@pytest.mark.parametrize("opts", [{"causal": True}, {"window": (4, 2)},
                                  {"causal": True, "softcap": 8.0}], ids=str)
def test_varlen_matches_each_sequence(opts):
    """A packed batch of sequences of different lengths (one empty) against SDPA on each
    sequence alone in float64, forward and backward, GQA; the LSE per (head, token)."""
    lens_q, lens_k = [5, 0, 12, 7], [9, 3, 12, 10]  # every query row sees a key
    hq, hkv, d = 4, 2, 32
    g = torch.Generator().manual_seed(11)
    q = torch.randn(sum(lens_q), hq, d, generator=g)
    k, v = (torch.randn(sum(lens_k), hkv, d, generator=g) for _ in range(2))
    dout = torch.randn(sum(lens_q), hq, d, generator=g)
    cu = lambda lens: torch.tensor([0] + list(torch.tensor(lens).cumsum(0)),  # noqa: E731
                                   dtype=torch.int32)
    cu_q, cu_k = cu(lens_q), cu(lens_k)

    def per_sequence(q, k, v):
        outs = []
        for b in range(len(lens_q)):
            qs = q[cu_q[b]:cu_q[b + 1]].transpose(0, 1)[None]
            ks, vs = (x[cu_k[b]:cu_k[b + 1]].transpose(0, 1)[None] for x in (k, v))
            if qs.shape[2] == 0:
                outs.append(q[cu_q[b]:cu_q[b + 1]] * 0)
                continue
            outs.append(sdpa(qs, ks, vs, **opts)[0].transpose(0, 1))
        return torch.cat(outs)

    ref = grads(per_sequence, [x.double() for x in (q, k, v)], dout.double())
    base = grads(per_sequence, (q, k, v), dout)
    got = grads(lambda *t: attention_varlen(*t, cu_q, cu_k, max(lens_q), max(lens_k), **opts),
                (q, k, v), dout)
    for name, gt, r, bl, factor in zip(("O", "dQ", "dK", "dV"), got, ref, base, (2, 3, 3, 3)):
        assert gt.shape == r.shape, name
        rule(gt, r, bl, factor)
    _, lse = attention_varlen(q, k, v, cu_q, cu_k, return_lse=True, **opts)
    assert lse.shape == (hq, sum(lens_q))


def test_opcheck():
    """torch.library.opcheck: schema, fake (meta) implementation and autograd registration agree
    with the real operator."""
    (q, k, v, dout), _ = inputs("gqa")
    for t in (q, k, v):
        t.requires_grad_()
    b, hq, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    slopes = torch.rand(hq) * 0.3
    bias = torch.randn(1, hq, sq, sk)
    for variant in ((None, None), (slopes, None), (None, bias)):
        variant = variant + (None, None, 0, 0)  # no packed batch
        torch.library.opcheck(torch.ops.flashattn.forward.default,
                              (q, k, v, True, 0.0, -2, -2, 0.0, True, False) + variant)
        out, lse = torch.ops.flashattn.forward(q, k, v, True, 0.0, -2, -2, 0.0, True, False,
                                               *variant)
        torch.library.opcheck(torch.ops.flashattn.backward.default,
                              (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse, True,
                               0.0, -2, -2, 0.0, True, False) + variant)
    g = torch.Generator().manual_seed(9)
    k_cache, v_cache = (torch.randn(2, 2, 16, 64, generator=g) for _ in range(2))
    k_new, v_new = (torch.randn(2, 2, 1, 64, generator=g) for _ in range(2))
    lens = torch.tensor([4, 15], dtype=torch.int32)
    torch.library.opcheck(torch.ops.flashattn.forward_kvcache.default,
                          (q.detach()[:, :, :1], k_cache, v_cache, k_new, v_new, lens, None,
                           True, 0.0, -2, -2, 0.0, True, 0))


def test_torch_compile():
    (q, k, v, dout), _ = inputs("window")

    def f(q, k, v):
        return attention(q * 2, k, v, causal=True, window=(7, -1)) * 0.5

    try:
        compiled = torch.compile(f, fullgraph=True)
        got = grads(compiled, (q, k, v), dout)
    except Exception as e:  # inductor needs a C++ compiler; the traced graph is what we test
        if "compiler" not in str(e).lower():
            raise
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
        got = grads(compiled, (q, k, v), dout)
    want = grads(f, (q, k, v), dout)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_example_trains():
    run = subprocess.run([sys.executable, EXAMPLE, "--steps", "20"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "largest gradient difference" in run.stdout and "step  19" in run.stdout


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_decoding_step(paged):
    """One decoding step: two new rows per sequence appended in place, then attended causally
    over the cache's first seqlens_k + 2 keys, against SDPA per sequence."""
    g = torch.Generator().manual_seed(8)
    b, hq, hkv, d, cap, s_new = 2, 8, 2, 64, 24, 2
    lens = torch.tensor([3, 19], dtype=torch.int32)
    k_seq, v_seq = (torch.randn(b, hkv, cap, d, generator=g) for _ in range(2))
    q = torch.randn(b, hq, s_new, d, generator=g)
    k_new, v_new = (torch.randn(b, hkv, s_new, d, generator=g) for _ in range(2))
    if paged:  # pages of 8 keys in a shuffled table, two spare pages
        page = 8
        table = (torch.randperm(b * cap // page + 2, generator=g)[: b * cap // page]
                 .view(b, cap // page).to(torch.int32))
        k_cache, v_cache = (torch.randn(table.numel() + 2, hkv, page, d, generator=g)
                            for _ in range(2))
        for i in range(b):
            for j in range(cap // page):
                k_cache[table[i, j]] = k_seq[i, :, j * page:(j + 1) * page]
                v_cache[table[i, j]] = v_seq[i, :, j * page:(j + 1) * page]
    else:
        table, k_cache, v_cache = None, k_seq.clone(), v_seq.clone()
    out = attention_with_kvcache(q, k_cache, v_cache, k_new, v_new, seqlens_k=lens,
                                 block_table=table, causal=True)
    for i in range(b):
        n = int(lens[i])
        k_seq[i, :, n:n + s_new], v_seq[i, :, n:n + s_new] = k_new[i], v_new[i]
        want = sdpa(q[i:i + 1].double(), k_seq[i:i + 1, :, :n + s_new].double(),
                    v_seq[i:i + 1, :, :n + s_new].double(), causal=True)
        torch.testing.assert_close(out[i:i + 1].double(), want, rtol=0, atol=1e-5)
    if paged:
        got_k = torch.cat([k_cache[table[:, j].long()] for j in range(cap // page)], dim=2)
    else:
        got_k = k_cache
    assert torch.equal(got_k, k_seq)  # the new rows are in the cache, nothing else changed
