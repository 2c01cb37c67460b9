# SPDX-License-Identifier: MIT
"""The package without PyTorch: NumPy arrays on the CPU backend (and on the OpenCL and Vulkan
backends where they are available) against the float64 reference, with README's tolerance
rule, and the library's failures as exceptions."""

import logging
import subprocess
import sys
import zlib

import numpy as np
import pytest
import reference as ref

import flashattn


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def to_layout(x, layout):
    """A (B, H, S, D) array as the API takes it in `layout`: for "bshd", a packed (B, S, H, D)
    copy."""
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)) if layout == "bshd" else x


def from_layout(x, layout):
    return x.transpose(0, 2, 1, 3) if layout == "bshd" else x


@pytest.fixture(scope="module")
def cpu():
    with flashattn.Context("cpu") as ctx:
        yield ctx


def test_backends_and_devices():
    names = [b.name for b in flashattn.backends()]
    assert names == ["cuda", "vulkan", "opencl", "cpu"]
    cpu = [b for b in flashattn.backends() if b.name == "cpu"][0]
    assert cpu.built and cpu.available and cpu.device_count == 1 and cpu.reason == ""
    for b in flashattn.backends():
        assert b.available or b.reason  # an unavailable backend says why
    devices = flashattn.devices("cpu")
    assert len(devices) == 1 and devices[0].kind == "cpu" and devices[0].backend == "cpu"
    assert devices[0].name
    assert flashattn.version() == flashattn.__version__ and flashattn.__version__.count(".") == 2


def test_context_reports_its_device(cpu):
    assert cpu.backend == "cpu"
    assert cpu.device == flashattn.devices("cpu")[0]
    assert set(cpu.memory()) >= {"buffer_bytes", "workspace_peak_bytes"}
    assert repr(cpu) == "<flashattn.Context cpu>"


CASES = {
    # name: (B, Hq, Hkv, Sq, Sk, D, options)
    "plain": (2, 3, 3, 37, 37, 64, {}),
    "causal": (1, 4, 4, 70, 70, 32, {"causal": True}),
    "causal-sq<sk": (2, 2, 2, 5, 41, 16, {"causal": True}),
    "causal-sq>sk": (1, 2, 2, 40, 9, 8, {"causal": True}),
    "gqa": (2, 8, 2, 17, 29, 64, {}),
    "mqa-causal": (1, 4, 1, 33, 33, 128, {"causal": True}),
    "scale": (1, 2, 2, 20, 20, 24, {"scale": 0.3}),
    "window": (1, 2, 2, 50, 50, 32, {"window": (7, 3)}),
    "window-left-causal": (1, 2, 1, 45, 60, 16, {"window": (11, -1), "causal": True}),
    "softcap": (1, 2, 2, 30, 30, 40, {"softcap": 5.0, "scale": 1.0}),
}


def check(name, got, want, base, factor):
    ok, err, bound = ref.within(got, want, base, factor)
    assert ok, f"{name}: max error {err:.3g} > bound {bound:.3g}"


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", list(CASES))
def test_forward_backward_f32(cpu, case, layout):
    b, hq, hkv, sq, sk, d, opts = CASES[case]
    rng = np.random.default_rng(zlib.crc32(f"{case}-{layout}".encode()))
    q, k, v = randn(rng, (b, hq, sq, d)), randn(rng, (b, hkv, sk, d)), randn(rng, (b, hkv, sk, d))
    dout = randn(rng, (b, hq, sq, d))
    want = ref.attention(q, k, v, dout, **opts)
    base = ref.attention(q, k, v, dout, compute=np.float32, **opts)

    lq, lk, lv = (to_layout(x, layout) for x in (q, k, v))
    out, lse = cpu.forward(lq, lk, lv, layout=layout, **opts)
    assert out.dtype == np.float32 and out.shape == lq.shape
    assert lse.dtype == np.float32 and lse.shape == (b, hq, sq)
    check("O", from_layout(out, layout), want[0], base[0], 2)
    assert np.allclose(lse, want[1], rtol=1e-3, atol=1e-5)
    grads = cpu.backward(lq, lk, lv, out, to_layout(dout, layout), lse, layout=layout, **opts)
    for name, got, w, bl in zip(("dQ", "dK", "dV"), grads, want[2:], base[2:]):
        check(name, from_layout(got, layout), w, bl, 3)


@pytest.mark.parametrize("variant", ["alibi-h", "alibi-bh", "bias-full", "bias-bcast-mask"])
def test_alibi_and_bias(cpu, variant):
    """ALiBi slopes and an additive bias (SDPA's attn_mask shapes, broadcast, -inf entries),
    forward and backward, against the float64 reference with the bias added to the scores."""
    rng = np.random.default_rng(zlib.crc32(variant.encode()))
    b, hq, hkv, sq, sk, d = 2, 4, 2, 19, 33, 32
    q, k, v = randn(rng, (b, hq, sq, d)), randn(rng, (b, hkv, sk, d)), randn(rng, (b, hkv, sk, d))
    dout = randn(rng, (b, hq, sq, d))
    opts, full = {}, None
    if variant.startswith("alibi"):
        slopes = rng.uniform(0.05, 0.5, (hq,) if variant == "alibi-h" else (b, hq))
        slopes = slopes.astype(np.float32)
        opts["alibi_slopes"], full = slopes, ref.alibi_bias(slopes, sq, sk)
    elif variant == "bias-full":
        opts["bias"] = full = randn(rng, (b, hq, sq, sk))
    else:  # one (B, 1, 1, Sk) row per sequence, broadcast over heads and queries, keys hidden
        row = randn(rng, (b, 1, 1, sk))
        row[:, :, :, ::5] = -np.inf
        opts["bias"] = full = row
    want = ref.attention(q, k, v, dout, causal=True, bias=full)
    base = ref.attention(q, k, v, dout, causal=True, bias=full, compute=np.float32)
    out, lse = cpu.forward(q, k, v, causal=True, **opts)
    check("O", out, want[0], base[0], 2)
    assert np.allclose(lse, want[1], rtol=1e-3, atol=1e-5)
    grads = cpu.backward(q, k, v, out, dout, lse, causal=True, **opts)
    for name, got, w, bl in zip(("dQ", "dK", "dV"), grads, want[2:], base[2:]):
        check(name, got, w, bl, 3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision(cpu, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="NumPy has no bfloat16 without it")
        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(np.float16)
    rng = np.random.default_rng(7)
    shape = (2, 4, 45, 64)
    q, k, v, dout = (randn(rng, shape).astype(dt) for _ in range(4))
    want = ref.attention(q, k, v, dout, causal=True)
    base = ref.attention(q, k, v, dout, causal=True, compute=np.float32, dtype=dt)
    out, lse = cpu.forward(q, k, v, causal=True)
    assert out.dtype == dt
    check("O", out, want[0], base[0], 2)
    assert np.allclose(lse, want[1], rtol=1e-3, atol=1e-5)
    for name, got, w, bl in zip(("dQ", "dK", "dV"),
                                cpu.backward(q, k, v, out, dout, lse, causal=True),
                                want[2:], base[2:]):
        check(name, got, w, bl, 3)


def test_packed_qkv_and_outputs_into_views(cpu):
    """Strided views in place: Q, K, V interleaved in one (B, S, 3, H, D) array, and the outputs
    written into the middle of larger arrays whose other elements stay untouched."""
    rng = np.random.default_rng(11)
    b, s, h, d = 2, 19, 3, 32
    qkv = randn(rng, (b, s, 3, h, d))
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    assert not q.flags.c_contiguous
    big = np.full((b, s, 2 * h, d), 7.0, np.float32)
    out = big[:, :, 1::2]
    lse_big = np.full((b, h, s, 3), 7.0, np.float32)
    lse = lse_big[..., 1]
    got, got_lse = cpu.forward(q, k, v, layout="bshd", causal=True, out=out, lse=lse)
    assert got is out and got_lse is lse
    want = ref.attention(*(x.transpose(0, 2, 1, 3) for x in (q, k, v)), causal=True)
    assert np.max(np.abs(out.transpose(0, 2, 1, 3) - want[0])) < 1e-5
    assert np.allclose(lse, want[1], rtol=1e-5, atol=1e-5)
    assert np.all(big[:, :, 0::2] == 7.0) and np.all(lse_big[..., 0::2] == 7.0)


class DLPackOnly:
    """An array that offers DLPack and nothing else, as JAX's or CuPy's host arrays do."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_arrays(cpu):
    rng = np.random.default_rng(5)
    q, k, v = (randn(rng, (1, 2, 13, 16)) for _ in range(3))
    want = ref.attention(q, k, v)
    k_strided = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    out = np.zeros_like(q)
    lse = np.zeros((1, 2, 13), np.float32)
    cpu.forward(DLPackOnly(q), DLPackOnly(k_strided), DLPackOnly(v), out=DLPackOnly(out),
                lse=DLPackOnly(lse))
    assert np.max(np.abs(out - want[0])) < 1e-5
    assert np.allclose(lse, want[1], rtol=1e-5, atol=1e-5)


def test_fully_masked_rows_and_empty_calls(cpu):
    rng = np.random.default_rng(3)
    q, k, v = (randn(rng, (1, 2, 6, 8)) for _ in range(3))
    out, lse = cpu.forward(q, k, v, window=(0, 0), causal=False)  # each row sees its key alone
    assert np.allclose(out, v, atol=1e-6)
    q0 = randn(rng, (1, 2, 0, 8))
    out, lse = cpu.forward(q0, k, v)
    assert out.shape == (1, 2, 0, 8) and lse.shape == (1, 2, 0)


# ---- failures ---------------------------------------------------------------------------------


def test_library_errors_are_exceptions_with_its_message(cpu):
    rng = np.random.default_rng(1)
    q = randn(rng, (2, 4, 16, 64))
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        cpu.forward(q, randn(rng, (2, 4, 16, 32)), randn(rng, (2, 4, 16, 32)))
    assert e.value.name == "ERROR_SHAPE_MISMATCH" and e.value.status == -3
    assert "head_dim" in str(e.value) and e.value.call == "fa_attention_forward"
    assert isinstance(e.value, ValueError)  # what Python code expects of a bad argument
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        cpu.forward(q, randn(rng, (2, 3, 16, 64)), randn(rng, (2, 3, 16, 64)))
    assert e.value.name == "ERROR_INVALID_GQA"
    with pytest.raises(flashattn.UnsupportedError) as e:
        x = randn(rng, (1, 1, 4, 12))
        cpu.forward(x, x, x)
    assert e.value.name == "ERROR_UNSUPPORTED_HEAD_DIM" and e.value.detail
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        cpu.forward(q, q, q, softcap=-1.0)
    assert "softcap" in str(e.value)
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        cpu.forward(q, q, q, window=(-3, 0))
    assert e.value.name == "ERROR_INVALID_ARGUMENT"
    # the context stays usable after failures
    out, _ = cpu.forward(q, q, q)
    assert np.isfinite(out).all()


def test_argument_errors_in_python(cpu):
    rng = np.random.default_rng(2)
    q = randn(rng, (1, 2, 8, 16))
    with pytest.raises(TypeError, match="float64"):
        cpu.forward(q.astype(np.float64), q, q)
    with pytest.raises(ValueError, match="dimensions"):
        cpu.forward(q[0], q, q)
    with pytest.raises(ValueError, match="layout"):
        cpu.forward(q, q, q, layout="sbhd")
    with pytest.raises(ValueError, match="lse has shape"):
        cpu.forward(q, q, q, lse=np.zeros((1, 8, 2), np.float32))
    readonly = np.zeros_like(q)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cpu.forward(q, q, q, out=readonly)
    with pytest.raises(ValueError, match="scale"):
        cpu.forward(q, q, q, scale=0.0)
    with pytest.raises(TypeError, match="not an array"):
        cpu.forward([[1.0]], q, q)


def test_context_errors():
    with pytest.raises(ValueError, match="backend must be"):
        flashattn.Context("tpu")
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        flashattn.Context("cpu", device=3)
    assert e.value.name == "ERROR_INVALID_DEVICE" and e.value.call == "fa_context_create"
    missing = [b for b in flashattn.backends() if not b.available]
    if not missing:
        pytest.skip("every backend is available on this machine")
    with pytest.raises(flashattn.BackendUnavailableError) as e:
        flashattn.Context(missing[0].name)
    assert e.value.detail  # the library's reason
    ctx = flashattn.Context("cpu")
    ctx.close()
    with pytest.raises(ValueError, match="closed"):
        ctx.forward(np.zeros((1, 1, 1, 8), np.float32), *[np.zeros((1, 1, 1, 8), np.float32)] * 2)


def test_log_messages_reach_python_logging(caplog):
    rng = np.random.default_rng(4)
    x = randn(rng, (1, 1, 4, 12))
    with caplog.at_level(logging.DEBUG, logger="flashattn"):
        with flashattn.Context("cpu", log_level="debug") as ctx:
            with pytest.raises(flashattn.UnsupportedError):
                ctx.forward(x, x, x)
    assert any(r.name == "flashattn" for r in caplog.records)


def test_imports_without_torch():
    """`import flashattn` must not need PyTorch; flashattn.torch says it does."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "import flashattn; flashattn.devices()\n"
            "try:\n    import flashattn.torch\nexcept ImportError:\n    print('no torch')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "no torch"


# ---- the GPU-API backends, through copies --------------------------------------------------------


def _available(name):
    return any(b.name == name and b.available for b in flashattn.backends())


@pytest.mark.parametrize("backend", ["opencl", "vulkan"])
def test_other_backends_through_copies(backend):
    if not _available(backend):
        reason = [b.reason for b in flashattn.backends() if b.name == backend][0]
        pytest.skip(f"{backend} unavailable: {reason}")
    rng = np.random.default_rng(9)
    b, hq, hkv, s, d = 1, 4, 2, 40, 32
    q, k, v, dout = (randn(rng, (b, h, s, d)) for h in (hq, hkv, hkv, hq))
    want = ref.attention(q, k, v, dout, causal=True)
    base = ref.attention(q, k, v, dout, causal=True, compute=np.float32)
    with flashattn.Context(backend) as ctx:
        out, lse = ctx.forward(q, k, v, causal=True)
        grads = ctx.backward(q, k, v, out, dout, lse, causal=True)
    check("O", out, want[0], base[0], 2)
    for name, got, w, bl in zip(("dQ", "dK", "dV"), grads, want[2:], base[2:]):
        check(name, got, w, bl, 3)


# ---- KV caches (forward only) -------------------------------------------------------------------


def _reference_cache(q, k, v, lens, causal):
    """Per sequence: the attention of its queries to the first lens[b] keys of (B, H, Sk, D)
    caches, its causal mask aligned on that length."""
    outs, lses = [], []
    for b, n in enumerate(lens):
        o, lse = ref.attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], causal=causal)
        outs.append(o)
        lses.append(lse)
    return np.concatenate(outs), np.concatenate(lses)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_seqlens_k_decoding(cpu, layout):
    rng = np.random.default_rng(21)
    b, hq, hkv, sk, d = 3, 8, 2, 50, 64
    q = randn(rng, (b, hq, 1, d))
    k, v = randn(rng, (b, hkv, sk, d)), randn(rng, (b, hkv, sk, d))
    lens = np.array([50, 1, 23], np.int32)
    out, lse = cpu.forward(*(to_layout(x, layout) for x in (q, k, v)), seqlens_k=lens,
                           causal=True, layout=layout, num_splits=3)
    want = _reference_cache(q, k, v, lens, causal=True)
    assert np.max(np.abs(from_layout(out, layout) - want[0])) < 1e-5
    assert np.allclose(lse, want[1], rtol=1e-5, atol=1e-5)
    with pytest.raises(flashattn.InvalidArgumentError) as e:
        cpu.forward(q, k, v, seqlens_k=np.array([51, 1, 1], np.int32))
    assert e.value.name == "ERROR_OUT_OF_BOUNDS"


def test_paged_cache_with_append(cpu):
    """k_new and v_new are written into a paged cache through the block table, then attended."""
    rng = np.random.default_rng(22)
    b, hq, hkv, d, page, pages_per_seq, s_new = 2, 4, 2, 32, 7, 4, 3
    num_pages = b * pages_per_seq + 2
    k_pages = randn(rng, (num_pages, hkv, page, d))
    v_pages = randn(rng, (num_pages, hkv, page, d))
    table = rng.permutation(num_pages)[: b * pages_per_seq].reshape(b, pages_per_seq)
    table = table.astype(np.int32)
    lens = np.array([5, 17], np.int32)
    q = randn(rng, (b, hq, s_new, d))
    k_new, v_new = randn(rng, (b, hkv, s_new, d)), randn(rng, (b, hkv, s_new, d))

    def contiguous(pages):  # each sequence's cache as (B, Hkv, capacity, D)
        return np.concatenate([pages[table[:, i]] for i in range(pages_per_seq)], axis=2)

    k_want, v_want = contiguous(k_pages), contiguous(v_pages)
    for i in range(b):
        k_want[i, :, lens[i]:lens[i] + s_new] = k_new[i]
        v_want[i, :, lens[i]:lens[i] + s_new] = v_new[i]
    untouched = np.setdiff1d(np.arange(num_pages), table)
    k_spare = k_pages[untouched].copy()

    out, _ = cpu.forward(q, k_pages, v_pages, seqlens_k=lens, block_table=table, k_new=k_new,
                         v_new=v_new, causal=True)
    assert np.array_equal(contiguous(k_pages), k_want)  # the rows went in, bit for bit
    assert np.array_equal(contiguous(v_pages), v_want)
    assert np.array_equal(k_pages[untouched], k_spare)
    want, _ = _reference_cache(q, k_want, v_want, lens + s_new, causal=True)
    assert np.max(np.abs(out - want)) < 1e-5
    with pytest.raises(ValueError, match="together"):
        cpu.forward(q, k_pages, v_pages, seqlens_k=lens, block_table=table, k_new=k_new)
