# SPDX-License-Identifier: MIT
"""flashattn.torch.attention on CUDA tensors (the CUDA backend, tensors wrapped in place):
against SDPA in float64 with README's tolerance rule, forward and backward, on PyTorch's default
(legacy) stream with no synchronisation after the producing kernels, on a side stream, under
torch.compile, and with no memory allocated beyond the outputs. Skipped without a CUDA GPU."""

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
F = torch.nn.functional

from flashattn.torch import attention  # noqa: E402


def rule(got, ref, base, factor, name):
    err = (got.double() - ref).abs().max().item()
    bound = factor * (base.double() - ref).abs().max().item() + 1e-5
    assert err <= bound, f"{name}: max error {err:.3g} > bound {bound:.3g}"


def make(b=2, hq=8, hkv=2, s=300, d=128, dtype=torch.float16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, hq, s, d, device="cuda", dtype=dtype, generator=g)
    k, v = (torch.randn(b, hkv, s, d, device="cuda", dtype=dtype, generator=g) for _ in range(2))
    dout = torch.randn(b, hq, s, d, device="cuda", dtype=dtype, generator=g)
    return q, k, v, dout


def grads(fn, tensors, dout):
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out = fn(*leaves)
    out.backward(dout)
    return [out.detach()] + [t.grad for t in leaves]


def sdpa(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                          enable_gqa=k.shape[1] != q.shape[1])


def check_against_sdpa(causal, got, q, k, v, dout):
    ref = grads(lambda *t: sdpa(*t, causal), [x.double() for x in (q, k, v)], dout.double())
    base = grads(lambda *t: sdpa(*t, causal), (q, k, v), dout)
    for name, g, r, b, factor in zip(("O", "dQ", "dK", "dV"), got, ref, base, (2, 3, 3, 3)):
        assert g.dtype == q.dtype and g.device.type == "cuda", name
        assert torch.isfinite(g).all(), name
        rule(g, r, b, factor, name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_default_stream(dtype, causal):
    """Inputs written by kernels still queued on the legacy stream: the library's work must be
    ordered after them (stream handle 0 maps to FA_CUDA_STREAM_LEGACY)."""
    q, k, v, dout = make(dtype=dtype, seed=1)
    torch.cuda.synchronize()
    big = torch.randn(4096, 4096, device="cuda", dtype=torch.float32)
    for _ in range(4):  # keep the stream busy so an unordered call would read early
        big = big @ big * 1e-3
    q2, k2, v2 = q * 2 + 0 * big[0, 0].to(dtype), k * 1, v * 1
    got = grads(lambda *t: attention(*t, causal=causal), (q2, k2, v2), dout)
    check_against_sdpa(causal, got, q2, k2, v2, dout)


def test_side_stream():
    q, k, v, dout = make(seed=2)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = grads(lambda *t: attention(*t, causal=True), (q * 1, k, v), dout)
    torch.cuda.current_stream().wait_stream(side)
    check_against_sdpa(True, got, q, k, v, dout)


def test_torch_compile():
    """A compiled block around the op: the op's output is the eager one bit for bit (Inductor
    treats it as opaque); the fused reduction after it only up to float rounding (Inductor sums
    in its own order), and its gradient flows."""
    q, k, v, dout = make(seed=3)

    def block(q, k, v):
        o = attention(q * 1.0, k, v, causal=True)
        return o, o.float().sum(dim=-1)

    compiled = torch.compile(block, fullgraph=True)
    o_eager, s_eager = block(q, k, v)
    qg = q.detach().clone().requires_grad_()
    o, s = compiled(qg, k, v)
    torch.testing.assert_close(o, o_eager, rtol=0, atol=0)
    torch.testing.assert_close(s, s_eager, rtol=1e-6, atol=1e-5)
    s.sum().backward()
    assert qg.grad is not None and torch.isfinite(qg.grad).all()


def test_no_copies():
    """The forward allocates its output and LSE and nothing else on the device."""
    q, k, v, _ = make(b=4, hq=16, hkv=16, s=2048, seed=4)
    attention(q, k, v)  # first call: context and library set-up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = attention(q, k, v)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    lse_bytes = q.shape[0] * q.shape[1] * q.shape[2] * 4
    assert peak <= out.numel() * out.element_size() + lse_bytes + (1 << 20), peak
