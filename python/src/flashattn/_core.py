# SPDX-License-Identifier: MIT
"""Backends, devices and contexts: the C API's objects as Python ones."""

import logging
import math
import threading
from ctypes import addressof, byref, c_void_p
from dataclasses import dataclass

from . import _arrays, _lib
from ._errors import error
from ._lib import lib

_log = logging.getLogger("flashattn")
_PY_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}
_BSHD = (0, 1, 2, 3)
_BHSD = (0, 2, 1, 3)  # (batch, heads, seq, dim) arrays seen in the logical (B, S, H, D) order


def version():
    """The C library's version, "MAJOR.MINOR.PATCH"."""
    return lib.fa_version_string().decode()


@dataclass(frozen=True)
class Backend:
    """One backend on this machine: whether it is built into the library and available, and why
    not (`reason`)."""

    name: str
    built: bool
    available: bool
    device_count: int
    reason: str


@dataclass(frozen=True)
class Device:
    """One device of one backend (fa_device_info); `kernels` says which kernel family serves it."""

    backend: str
    index: int
    kind: str
    name: str
    vendor: str
    driver: str
    api_version: str
    memory_bytes: int
    compute_units: int
    f16: bool
    bf16: bool
    matrix_units: bool
    kernels: str


def _device(info):
    text = lambda b: b.decode(errors="replace")  # noqa: E731
    return Device(
        _lib.BACKEND_NAMES.get(info.backend, str(info.backend)),
        info.index,
        _lib.DEVICE_KINDS.get(info.kind, "other"),
        text(info.name),
        text(info.vendor),
        text(info.driver),
        text(info.api_version),
        info.memory_bytes,
        info.compute_units,
        info.f16,
        info.bf16,
        info.matrix_units,
        text(info.kernels),
    )


def backends():
    """Every backend, built or not, available or not with the reason (`flashattn devices`)."""
    out = []
    for name, value in _lib.BACKENDS.items():
        if name == "auto":
            continue
        info = _lib.BackendInfo()
        status = lib.fa_backend_query(value, byref(info))
        if status != _lib.OK:
            raise error(status, "fa_backend_query")
        out.append(
            Backend(name, info.built, info.available, info.device_count, info.reason.decode())
        )
    return out


def devices(backend=None):
    """The devices of every available backend, or of the one named."""
    out = []
    for b in backends():
        if (backend is not None and b.name != backend) or not b.available:
            continue
        for index in range(b.device_count):
            info = _lib.DeviceInfo()
            status = lib.fa_device_query(_lib.BACKENDS[b.name], index, byref(info))
            if status != _lib.OK:
                raise error(status, "fa_device_query")
            out.append(_device(info))
    return out


def _layout_order(layout):
    if layout == "bshd":
        return _BSHD
    if layout == "bhsd":
        return _BHSD
    raise ValueError(f"flashattn: layout must be 'bhsd' or 'bshd', not {layout!r}")


def attention_desc(causal=False, scale=None, window=None, softcap=None, deterministic=False,
                   num_splits=0):
    """The fa_attention_desc of the keyword arguments that forward, backward and the PyTorch op
    share: `scale` None means 1/sqrt(head_dim); `window` None, or (left, right) keys before and
    after each row's diagonal, -1 meaning no bound; `softcap` None or 0 means off."""
    desc = _lib.AttentionDesc(causal=bool(causal), deterministic=bool(deterministic),
                              num_splits=int(num_splits))
    if scale is not None:
        if scale == 0 or not math.isfinite(scale):
            raise ValueError(f"flashattn: scale must be finite and non-zero, not {scale}")
        desc.scale = scale
    if window is not None:
        left, right = window
        desc.window.enabled = True
        desc.window.left, desc.window.right = int(left), int(right)
    if softcap:
        desc.softcap = softcap
    return desc


class _Call:
    """The buffers of one call: arrays in the backend's memory (CUDA arrays on CUDA, host arrays
    on the CPU) are wrapped in place, the others are copied into buffers of the context and, for
    outputs, read back after the call."""

    def __init__(self, ctx):
        self.ctx, self.buffers, self.readback, self.kept = ctx, [], [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for handle in self.buffers:
            lib.fa_buffer_destroy(handle)

    def _buffer(self, size, data):
        handle = c_void_p()
        desc = _lib.BufferDesc(size=size, data=data)
        self.ctx._check(lib.fa_buffer_create(self.ctx._handle, byref(desc), byref(handle)),
                        "fa_buffer_create")
        self.buffers.append(handle)
        return handle

    def tensor(self, v, output=False, inout=False):
        """The fa_tensor of View `v`, which must be in logical (B, S, H, D) order; `output`: the
        call writes it, `inout`: the call reads and writes it."""
        output = output or inout
        flags = getattr(v.owner, "flags", None)
        if output and flags is not None and not flags.writeable:
            raise ValueError("flashattn: an output array is read-only")
        first, end = v.span()
        size = end - first
        if v.device[0] == "cuda":
            if self.ctx.backend != "cuda":
                raise ValueError(
                    f"flashattn: a CUDA array cannot be used by a context on the {self.ctx.backend}"
                    " backend (copy it to the host, or use a CUDA context)")
            handle = c_void_p()
            self.ctx._check(lib.fa_buffer_wrap_cuda(self.ctx._handle, v.ptr + first,
                                                    max(size, 1), byref(handle)),
                            "fa_buffer_wrap_cuda")
            self.buffers.append(handle)
        elif size == 0:
            handle = self._buffer(16, None)
        elif self.ctx.backend == "cpu" and (v.ptr + first) % 4 == 0:
            # the CPU backend reads and writes host memory where it lies
            handle = c_void_p()
            self.ctx._check(lib.fa_buffer_wrap_host(self.ctx._handle, v.ptr + first, size,
                                                    byref(handle)),
                            "fa_buffer_wrap_host")
            self.buffers.append(handle)
        else:
            # Inputs are copied in; so are outputs with gaps, so that reading the whole span
            # back leaves the bytes between their elements as they were.
            copy_in = not output or inout or not v.dense()
            handle = self._buffer(size, v.ptr + first if copy_in else None)
            if output:
                self.readback.append((handle, v.ptr + first, size))
        return _lib.Tensor(handle, -first, v.dtype, v.shape, v.strides)

    def attach(self, desc, extra):
        """Points desc's optional tensor fields at the fa_tensors of `extra`, (field, View)
        pairs; they stay alive with the call."""
        for field, v in extra:
            self.kept.append(self.tensor(v))
            setattr(desc, field, addressof(self.kept[-1]))

    def finish(self):
        for handle, address, size in self.readback:
            self.ctx._check(lib.fa_buffer_read(handle, 0, address, size), "fa_buffer_read")


class Context:
    """One device of one backend (an fa_context). `backend` is "auto" (the library's choice:
    CUDA, a Vulkan GPU, an OpenCL GPU, else the CPU; FA_BACKEND and FA_DEVICE override it),
    "cuda", "vulkan", "opencl" or "cpu". `cuda_stream` (CUDA): the stream handle to issue work
    on, 0 meaning the legacy default stream (PyTorch's default); None: the context's own.
    `log_level` ("error", "warn", "info", "debug"): the library's messages at or below it go to
    the logger "flashattn". Failures raise flashattn.Error subclasses carrying the library's
    sentence. A context is used by one thread at a time; this object serialises its calls.

    forward and backward take 4-D arrays with DLPack (NumPy, PyTorch, JAX, CuPy, ...) in
    `layout` "bhsd" (batch, heads, seq, dim: PyTorch SDPA's) or "bshd" (FlashAttention's), any
    strides whose last is 1. Memory: CUDA arrays on a CUDA context and host arrays on a CPU
    context are used in place (fa_buffer_wrap_cuda, fa_buffer_wrap_host); otherwise host arrays
    are copied into the context's buffers and the outputs copied back."""

    def __init__(self, backend="auto", device=0, *, cuda_stream=None, cpu_threads=0,
                 log_level=None, cache_dir=None):
        if backend not in _lib.BACKENDS:
            raise ValueError(f"flashattn: backend must be one of {', '.join(_lib.BACKENDS)}, "
                             f"not {backend!r}")
        self._handle = c_void_p()
        self._lock = threading.RLock()
        desc = _lib.ContextDesc(backend=_lib.BACKENDS[backend], device=device)
        desc.cpu.threads = cpu_threads
        if cuda_stream is not None:
            desc.cuda.stream = cuda_stream if cuda_stream else _lib.CUDA_STREAM_LEGACY
        self._cuda_stream = cuda_stream
        if cache_dir is not None:
            self._cache_dir = cache_dir.encode()
            desc.cache_dir = self._cache_dir
        if log_level is not None:
            desc.log_level = _lib.LOG_LEVELS[log_level]
            # kept on the object: the library calls it as long as the context lives
            self._log_fn = _lib.LOG_FN(
                lambda _user, level, msg: _log.log(_PY_LEVELS.get(level, logging.DEBUG),
                                                   msg.decode(errors="replace")))
            desc.log = self._log_fn
        status = lib.fa_context_create(byref(desc), byref(self._handle))
        if status != _lib.OK:
            raise error(status, "fa_context_create", lib.fa_last_create_error().decode())
        self.backend = _lib.BACKEND_NAMES[lib.fa_context_backend(self._handle)]

    def _check(self, status, call):
        if status != _lib.OK:
            raise error(status, call, lib.fa_context_last_error(self._handle).decode())

    def _live(self):
        if not self._handle:
            raise ValueError("flashattn: the context is closed")

    @property
    def device(self):
        """The Device the context runs on."""
        self._live()
        info = _lib.DeviceInfo()
        self._check(lib.fa_context_device(self._handle, byref(info)), "fa_context_device")
        return _device(info)

    def memory(self):
        """Memory the context holds: a dict of fa_memory_stats' fields, in bytes."""
        self._live()
        stats = _lib.MemoryStats()
        self._check(lib.fa_context_memory(self._handle, byref(stats)), "fa_context_memory")
        return {name: getattr(stats, name) for name, _ in stats._fields_ if name != "reserved"}

    def synchronize(self):
        """Waits for the work issued on the context."""
        self._live()
        with self._lock:
            self._check(lib.fa_context_synchronize(self._handle), "fa_context_synchronize")

    def close(self):
        """Waits for pending work and frees the context (also at garbage collection)."""
        if self._handle:
            lib.fa_context_destroy(self._handle)
            self._handle = c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()

    def __repr__(self):
        return f"<flashattn.Context {self.backend}>" if self._handle else "<flashattn.Context>"

    # ---- attention ------------------------------------------------------------------------

    def _stream(self):
        # what DLPack producers are told: the stream the work will run on (1: legacy default)
        if self.backend != "cuda" or self._cuda_stream is None:
            return None
        return self._cuda_stream or _lib.CUDA_STREAM_LEGACY

    def _views(self, arrays, layout):
        order = _layout_order(layout)
        out = []
        for name, x in arrays:
            v = _arrays.view(x, name, 4, self._stream())
            out.append(v.permuted(order))
        return out

    def _lse_view(self, x, shape):
        v = _arrays.view(x, "lse", 3, self._stream())
        if v.dtype != _lib.DTYPE_F32:
            raise TypeError("flashattn: lse must be float32")
        if v.shape != shape:
            raise ValueError(f"flashattn: lse has shape {v.shape}, not (batch, heads, seq_q) = "
                             f"{shape}")
        # (B, H, Sq) seen as the library's (B, Sq, H, 1)
        return _arrays.View(v.ptr, v.device, v.dtype, (shape[0], shape[2], shape[1], 1),
                            (v.strides[0], v.strides[2], v.strides[1], 1), v.owner)

    @staticmethod
    def _new(like, shape, order, dtype=None):
        """A new NumPy array for an output when the caller passed none (host inputs only)."""
        import numpy

        if like.device[0] != "cpu":
            raise ValueError("flashattn: outputs for device arrays are not allocated here: "
                             "pass out=, lse= (forward) or dq=, dk=, dv= (backward)")
        if dtype is None:
            names = {_lib.DTYPE_F32: "float32", _lib.DTYPE_F16: "float16"}
            if like.dtype in names:
                dtype = numpy.dtype(names[like.dtype])
            else:
                try:
                    import ml_dtypes
                except ImportError:
                    raise TypeError("flashattn: bfloat16 outputs need ml_dtypes installed, or "
                                    "arrays passed as out=") from None
                dtype = numpy.dtype(ml_dtypes.bfloat16)
        if order is _BHSD:
            b, s, h, d = shape
            return numpy.empty((b, h, s, d), dtype)
        return numpy.empty(shape, dtype)

    def _index_view(self, x, name, ndim):
        """seqlens_k (B,) or block_table (B, max_pages), int32, as the library's 4-D views."""
        v = _arrays.view(x, name, ndim, self._stream())
        shape, strides = list(v.shape) + [1] * (4 - ndim), list(v.strides) + [1] * (4 - ndim)
        return _arrays.View(v.ptr, v.device, v.dtype, shape, strides, v.owner)

    def _variant_views(self, alibi_slopes, bias):
        """(desc field, view) of the ALiBi slopes and the additive bias, where given."""
        extra = []
        if alibi_slopes is not None:
            v = _arrays.view(alibi_slopes, "alibi_slopes", getattr(alibi_slopes, "ndim", 1),
                             self._stream())
            if len(v.shape) not in (1, 2):
                raise ValueError("flashattn: alibi_slopes is (Hq,) or (B, Hq)")
            extra.append(("alibi_slopes", _arrays.slopes_view(v)))
        if bias is not None:
            extra.append(("bias", _arrays.bias_view(_arrays.view(bias, "bias", 4,
                                                                 self._stream()))))
        return extra

    def forward(self, q, k, v, *, causal=False, scale=None, window=None, softcap=None,
                alibi_slopes=None, bias=None, layout="bhsd", num_splits=0, seqlens_k=None,
                block_table=None, k_new=None, v_new=None, out=None, lse=None):
        """O = softmax(scale Q K^T) V and the row log-sum-exp, LSE, shaped (batch, heads, seq_q)
        float32. q: (B, Hq, Sq, D) in layout "bhsd", k and v: (B, Hkv, Sk, D) with Hq a
        multiple of Hkv (GQA). `causal` aligns bottom-right when Sq != Sk; `window` (left,
        right) is a sliding window (-1: no bound); `softcap` caps the scores (Gemma 2);
        `alibi_slopes`, float32 (Hq,) or (B, Hq), adds -slope |i + Sk - Sq - j| (ALiBi); `bias`,
        (B | 1, Hq | 1, Sq | 1, Sk) float32/16 or bfloat16 as SDPA's attn_mask (size-1 and
        zero-stride dimensions broadcast, -inf hides a key), is added to the scaled scores.

        A KV cache (forward only; README's fa_attention_desc): `seqlens_k`, int32 (B,), the
        keys each sequence attends to in a cache of Sk; `block_table`, int32 (B, max_pages),
        with k and v as pages, (num_pages, Hkv, page_size, D) in layout "bhsd"; `k_new` and
        `v_new`, (B, Hkv, S_new, D), rows appended to the cache at seqlens_k[b] before the
        attention (k and v are then written; seqlens_k is left to the caller to advance).
        `num_splits` asks for that many key chunks on the split-key (decoding) path.

        Returns (out, lse): the arrays passed, or new NumPy arrays for host inputs."""
        self._live()
        order = _layout_order(layout)
        vq, vk, vv = self._views((("q", q), ("k", k), ("v", v)), layout)
        b, sq, h, _ = vq.shape
        if out is None:
            out = self._new(vq, vq.shape, order)
        if lse is None:
            import numpy

            lse = self._new(vq, (b, h, sq), _BSHD, numpy.dtype("float32"))
        (vo,) = self._views((("out", out),), layout)
        vlse = self._lse_view(lse, (b, h, sq))
        if (k_new is None) != (v_new is None):
            raise ValueError("flashattn: k_new and v_new go together")
        extra = self._variant_views(alibi_slopes, bias)  # (desc field, view) of the options
        if seqlens_k is not None:
            extra.append(("seqlens_k", self._index_view(seqlens_k, "seqlens_k", 1)))
        if block_table is not None:
            extra.append(("block_table", self._index_view(block_table, "block_table", 2)))
        if k_new is not None:
            extra += zip(("k_new", "v_new"), self._views((("k_new", k_new), ("v_new", v_new)),
                                                          layout))
        desc = attention_desc(causal, scale, window, softcap, num_splits=num_splits)
        with self._lock, _Call(self) as call:
            appends = k_new is not None  # k and v are written too
            tensors = [call.tensor(vq), call.tensor(vk, inout=appends),
                       call.tensor(vv, inout=appends)]
            tensors += [call.tensor(vo, output=True), call.tensor(vlse, output=True)]
            call.attach(desc, extra)
            self._check(lib.fa_attention_forward(self._handle, byref(desc),
                                                 *(byref(t) for t in tensors)),
                        "fa_attention_forward")
            call.finish()
        return out, lse

    def backward(self, q, k, v, out, dout, lse, *, causal=False, scale=None, window=None,
                 softcap=None, alibi_slopes=None, bias=None, layout="bhsd", deterministic=False,
                 dq=None, dk=None, dv=None):
        """dQ, dK, dV of the forward with the same options, from its `out` and `lse` and the
        gradient `dout` of out (the bias takes no gradient). Returns (dq, dk, dv): the arrays
        passed, or new NumPy arrays."""
        self._live()
        order = _layout_order(layout)
        vq, vk, vv, vo, vdo = self._views(
            (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)), layout)
        b, sq, h, _ = vq.shape
        vlse = self._lse_view(lse, (b, h, sq))
        dq = self._new(vq, vq.shape, order) if dq is None else dq
        dk = self._new(vk, vk.shape, order) if dk is None else dk
        dv = self._new(vv, vv.shape, order) if dv is None else dv
        vdq, vdk, vdv = self._views((("dq", dq), ("dk", dk), ("dv", dv)), layout)
        desc = attention_desc(causal, scale, window, softcap, deterministic)
        extra = self._variant_views(alibi_slopes, bias)
        with self._lock, _Call(self) as call:
            tensors = [call.tensor(x) for x in (vq, vk, vv, vo, vdo, vlse)]
            tensors += [call.tensor(x, output=True) for x in (vdq, vdk, vdv)]
            call.attach(desc, extra)
            self._check(lib.fa_attention_backward(self._handle, byref(desc),
                                                  *(byref(t) for t in tensors)),
                        "fa_attention_backward")
            call.finish()
        return dq, dk, dv
