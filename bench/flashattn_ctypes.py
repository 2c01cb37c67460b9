#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small ctypes binding of libflashattn (include/flashattn.h), for bench/compare_torch.py.

The structs below mirror the header field by field (x86-64 / aarch64 LP64 layout, which ctypes
reproduces from the same field types): fa_context_desc 40 bytes, fa_tensor 88, fa_attention_desc
8, fa_device_info 480. `python3 bench/flashattn_ctypes.py --selftest [--lib PATH]` proves the
layouts on the CPU backend: it compares the tensors the library's own fa_tensor_* helpers return
with ours, and runs a small forward and backward against a pure-Python float64 reference.
"""
import ctypes
import ctypes.util
import math
import os
import sys
from ctypes import (POINTER, Structure, byref, c_bool, c_char, c_char_p, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

# enums of flashattn.h (C enums are int-sized)
BACKENDS = {"auto": 0, "cuda": 1, "vulkan": 2, "opencl": 3, "cpu": 4}
DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_I32 = 1, 2, 3, 4
DTYPE_SIZES = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_BF16: 2}
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
OK, ERROR_UNSUPPORTED = 0, -20

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class CpuOptions(Structure):
    _fields_ = [("threads", c_int)]


class CudaOptions(Structure):
    _fields_ = [("stream", c_void_p)]


class ContextDesc(Structure):
    _fields_ = [("backend", c_int), ("device", c_int), ("log", LOG_FN),
                ("log_user_data", c_void_p), ("log_level", c_int), ("cpu", CpuOptions),
                ("cuda", CudaOptions), ("cache_dir", c_char_p), ("cache_max_bytes", c_uint64),
                ("reserved", c_uint64 * 8)]


class BufferDesc(Structure):
    _fields_ = [("size", c_size_t), ("data", c_void_p), ("reserved", c_uint64 * 4)]


class Tensor(Structure):
    """fa_tensor: logical (batch, seq, heads, head_dim); offset in bytes, strides in elements."""
    _fields_ = [("buffer", c_void_p), ("offset", c_uint64), ("dtype", c_int),
                ("shape", c_int64 * 4), ("stride", c_int64 * 4)]


class Window(Structure):
    """fa_window: a sliding window, bounds of -1 meaning none (flashattn.h)."""
    _fields_ = [("enabled", c_bool), ("left", c_int32), ("right", c_int32)]


class _WindowWords(ctypes.Union):
    _fields_ = [("window", Window), ("words", c_uint64 * 2)]


class _SoftcapWord(ctypes.Union):
    _fields_ = [("softcap", c_float), ("word", c_uint64)]


class AttentionDesc(Structure):
    _anonymous_ = ("_window", "_softcap")
    _fields_ = [("scale", c_float), ("causal", c_bool), ("deterministic", c_bool),
                ("num_splits", c_int32), ("seqlens_k", c_void_p), ("block_table", c_void_p),
                ("k_new", c_void_p), ("v_new", c_void_p), ("_window", _WindowWords),
                ("_softcap", _SoftcapWord), ("alibi_slopes", c_void_p), ("reserved", c_uint64 * 22)]


class DeviceInfo(Structure):
    _fields_ = [("backend", c_int), ("index", c_int), ("kind", c_int), ("name", c_char * 128),
                ("vendor", c_char * 64), ("driver", c_char * 64), ("api_version", c_char * 32),
                ("api_major", c_int), ("api_minor", c_int), ("memory_bytes", c_uint64),
                ("max_buffer_bytes", c_uint64), ("compute_units", c_uint32),
                ("shared_memory_bytes", c_uint32), ("max_workgroup_size", c_uint32),
                ("subgroup_size_min", c_uint32), ("subgroup_size_max", c_uint32),
                ("f16", c_bool), ("bf16", c_bool), ("matrix_units", c_bool),
                ("kernels", c_char * 128), ("reserved", c_uint64 * 16)]


STRUCT_SIZES = {ContextDesc: 120, BufferDesc: 48, Tensor: 88, AttentionDesc: 256, DeviceInfo: 608}


class FaError(RuntimeError):
    def __init__(self, status, name, what, detail):
        super().__init__(f"{what}: {name}: {detail}" if detail else f"{what}: {name}")
        self.status, self.name = status, name


def find_library(path=None):
    """`path`, else build/ of this checkout or of the working directory, else LD_LIBRARY_PATH,
    else the system's search (ctypes.util.find_library)."""
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.path.join(here, "..", "build"), "build"]
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for d in dirs:
        candidate = os.path.join(d, "libflashattn.so")
        if os.path.exists(candidate):
            return os.path.abspath(candidate)
    found = ctypes.util.find_library("flashattn")
    if not found:
        raise FileNotFoundError("libflashattn.so not found: build it (cmake --build build) or "
                                "pass --lib PATH")
    return found


def load(path=None):
    """Loads libflashattn and declares the signatures used here."""
    for struct, size in STRUCT_SIZES.items():  # LP64 sizes, as the C compiler lays them out
        assert ctypes.sizeof(struct) == size, (struct.__name__, ctypes.sizeof(struct))
    lib = ctypes.CDLL(find_library(path))
    sig = {
        "fa_version_string": (c_char_p, []),
        "fa_status_name": (c_char_p, [c_int]),
        "fa_last_create_error": (c_char_p, []),
        "fa_context_create": (c_int, [POINTER(ContextDesc), POINTER(c_void_p)]),
        "fa_context_destroy": (None, [c_void_p]),
        "fa_context_device": (c_int, [c_void_p, POINTER(DeviceInfo)]),
        "fa_context_synchronize": (c_int, [c_void_p]),
        "fa_context_last_error": (c_char_p, [c_void_p]),
        "fa_buffer_create": (c_int, [c_void_p, POINTER(BufferDesc), POINTER(c_void_p)]),
        "fa_buffer_wrap_cuda": (c_int, [c_void_p, c_uint64, c_size_t, POINTER(c_void_p)]),
        "fa_buffer_destroy": (None, [c_void_p]),
        "fa_buffer_write": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t]),
        "fa_buffer_read": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t]),
        "fa_tensor_bshd": (Tensor, [c_void_p, c_int, c_int64, c_int64, c_int64, c_int64]),
        "fa_tensor_bhsd": (Tensor, [c_void_p, c_int, c_int64, c_int64, c_int64, c_int64]),
        "fa_tensor_lse": (Tensor, [c_void_p, c_int64, c_int64, c_int64]),
        "fa_convert": (c_int, [c_int, c_void_p, c_int, c_void_p, c_size_t]),
        "fa_attention_forward": (c_int, [c_void_p, POINTER(AttentionDesc)] + [POINTER(Tensor)] * 5),
        "fa_attention_backward": (c_int,
                                  [c_void_p, POINTER(AttentionDesc)] + [POINTER(Tensor)] * 9),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def version(lib):
    return lib.fa_version_string().decode()


def tensor(buffer, dtype, shape, stride=(0, 0, 0, 0), offset=0):
    """An fa_tensor over `buffer`; shape and stride in the logical (B, S, H, D) order."""
    return Tensor(buffer.handle if isinstance(buffer, Buffer) else buffer, offset, dtype,
                  (c_int64 * 4)(*shape), (c_int64 * 4)(*stride))


def lse_tensor(buffer, batch, heads, seq_q):
    """The packed (B, H, Sq) f32 LSE, written with explicit strides in (B, Sq, H, 1) order."""
    return tensor(buffer, DTYPE_F32, (batch, seq_q, heads, 1), (heads * seq_q, 1, seq_q, 1))


class Buffer:
    def __init__(self, ctx, handle, size):
        self.ctx, self.handle, self.size = ctx, handle, size

    def write(self, data, offset=0):
        raw = (c_char * len(data)).from_buffer_copy(data)
        self.ctx.check(self.ctx.lib.fa_buffer_write(self.handle, offset, raw, len(data)),
                       "fa_buffer_write")

    def read(self, size=None, offset=0):
        size = self.size - offset if size is None else size
        raw = (c_char * size)()
        self.ctx.check(self.ctx.lib.fa_buffer_read(self.handle, offset, raw, size),
                       "fa_buffer_read")
        return bytes(raw)

    def destroy(self):
        if self.handle:
            self.ctx.lib.fa_buffer_destroy(self.handle)
            self.handle = None


CUDA_STREAM_LEGACY = 1  # FA_CUDA_STREAM_LEGACY


class Context:
    """One fa_context. Raises FaError with the library's sentence on any failure."""

    def __init__(self, lib, backend="auto", device=0, cuda_stream=None, log_level=None,
                 cpu_threads=0):
        self.lib, self.handle = lib, c_void_p()
        # A stream handle of 0 (PyTorch's default stream) is the legacy default stream, which
        # the C struct takes as FA_CUDA_STREAM_LEGACY (1): NULL there means "none given".
        if cuda_stream == 0:
            cuda_stream = CUDA_STREAM_LEGACY
        desc = ContextDesc(backend=BACKENDS[backend], device=device,
                           cpu=CpuOptions(threads=cpu_threads),
                           cuda=CudaOptions(stream=cuda_stream))
        if log_level is not None:  # keep the callback alive as long as the context
            names = ("error", "warning", "info", "debug")
            self._log = LOG_FN(lambda _u, level, msg: print(
                f"flashattn {names[level] if 0 <= level < 4 else level}: "
                f"{msg.decode(errors='replace')}", file=sys.stderr))
            desc.log, desc.log_level = self._log, log_level
        st = lib.fa_context_create(byref(desc), byref(self.handle))
        if st != OK:
            raise FaError(st, self.status_name(st), "fa_context_create",
                          lib.fa_last_create_error().decode(errors="replace"))

    def status_name(self, st):
        return self.lib.fa_status_name(st).decode()

    def check(self, st, what):
        if st != OK:
            detail = self.lib.fa_context_last_error(self.handle).decode(errors="replace")
            raise FaError(st, self.status_name(st), what, detail)

    def device(self):
        info = DeviceInfo()
        self.check(self.lib.fa_context_device(self.handle, byref(info)), "fa_context_device")
        return info

    def buffer(self, size, data=None):
        handle = c_void_p()
        desc = BufferDesc(size, ctypes.cast(ctypes.c_char_p(data), c_void_p) if data else None)
        self.check(self.lib.fa_buffer_create(self.handle, byref(desc), byref(handle)),
                   "fa_buffer_create")
        return Buffer(self, handle, size)

    def wrap_cuda(self, device_pointer, size):
        handle = c_void_p()
        self.check(self.lib.fa_buffer_wrap_cuda(self.handle, device_pointer, size, byref(handle)),
                   "fa_buffer_wrap_cuda")
        return Buffer(self, handle, size)

    def forward(self, desc, q, k, v, o, lse=None):
        self.check(self.lib.fa_attention_forward(
            self.handle, byref(desc), byref(q), byref(k), byref(v), byref(o),
            byref(lse) if lse is not None else None), "fa_attention_forward")

    def backward(self, desc, q, k, v, o, d_o, lse, d_q, d_k, d_v):
        self.check(self.lib.fa_attention_backward(
            self.handle, byref(desc), *(byref(t) for t in (q, k, v, o, d_o, lse, d_q, d_k, d_v))),
            "fa_attention_backward")

    def synchronize(self):
        self.check(self.lib.fa_context_synchronize(self.handle), "fa_context_synchronize")

    def close(self):
        if self.handle:
            self.lib.fa_context_destroy(self.handle)
            self.handle = c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- CPU self-test ------------------------------------------------------------------------------

def _reference(q, k, v, do, B, S, H, D, causal):
    """Float64 attention forward and backward on packed BSHD lists (Sq == Sk == S)."""
    at = lambda b, s, h: ((b * S + s) * H + h) * D  # noqa: E731
    scale = 1.0 / math.sqrt(D)
    o, dq, dk, dv = ([0.0] * len(q) for _ in range(4))
    lse = [0.0] * (B * H * S)
    for b in range(B):
        for h in range(H):
            P = []
            for i in range(S):
                keys = range(i + 1) if causal else range(S)
                s = [scale * sum(q[at(b, i, h) + d] * k[at(b, j, h) + d] for d in range(D))
                     for j in keys]
                m = max(s)
                lse_i = m + math.log(sum(math.exp(x - m) for x in s))
                lse[(b * H + h) * S + i] = lse_i
                P.append([math.exp(x - lse_i) for x in s] + [0.0] * (S - len(s)))
                for d in range(D):
                    o[at(b, i, h) + d] = sum(P[i][j] * v[at(b, j, h) + d] for j in range(S))
            for i in range(S):
                dp = [sum(do[at(b, i, h) + d] * v[at(b, j, h) + d] for d in range(D))
                      for j in range(S)]
                delta = sum(do[at(b, i, h) + d] * o[at(b, i, h) + d] for d in range(D))
                ds = [P[i][j] * (dp[j] - delta) for j in range(S)]
                for j in range(S):
                    for d in range(D):
                        dq[at(b, i, h) + d] += scale * ds[j] * k[at(b, j, h) + d]
                        dk[at(b, j, h) + d] += scale * ds[j] * q[at(b, i, h) + d]
                        dv[at(b, j, h) + d] += P[i][j] * do[at(b, i, h) + d]
    return o, lse, dq, dk, dv


def selftest(lib_path=None):
    import array
    import random

    lib = load(lib_path)
    print(f"flashattn {version(lib)} from {find_library(lib_path)}")
    B, S, H, D = 2, 9, 2, 8
    n = B * S * H * D
    rng = random.Random(1)
    data = [array.array("f", (rng.uniform(-1, 1) for _ in range(n))) for _ in range(4)]
    q, k, v, do = (list(a) for a in data)  # exact f32 values, as the library sees them
    failures = []
    with Context(lib, "cpu", log_level=LOG_WARN, cpu_threads=1) as ctx:
        print(f"device: {ctx.device().name.decode()}")
        bufs = [ctx.buffer(4 * n, a.tobytes()) for a in data[:3]]
        bufs.append(ctx.buffer(4 * n))
        bufs[3].write(data[3].tobytes())  # dO through fa_buffer_write
        bo, bdq, bdk, bdv = (ctx.buffer(4 * n) for _ in range(4))
        blse = ctx.buffer(4 * B * H * S)
        bshd = (B, S, H, D)
        packed = (S * H * D, H * D, D, 1)
        tq, tk, tv, tdo, to, tdq, tdk, tdv = (tensor(b, DTYPE_F32, bshd, packed) for b in
                                              (*bufs, bo, bdq, bdk, bdv))
        tlse = lse_tensor(blse, B, H, S)

        def same(a, b):
            return (a.buffer == b.buffer and a.offset == b.offset and a.dtype == b.dtype and
                    list(a.shape) == list(b.shape) and list(a.stride) == list(b.stride))

        # the library's own helpers, returned by value, must equal the structs built here
        if not same(lib.fa_tensor_bshd(bo.handle, DTYPE_F32, *bshd), to):
            failures.append("fa_tensor_bshd differs from the Python fa_tensor")
        if not same(lib.fa_tensor_lse(blse.handle, B, H, S), tlse):
            failures.append("fa_tensor_lse differs from the Python LSE tensor")
        try:  # the library logs this failure too, through the callback
            ctx.wrap_cuda(1 << 20, 64)
            failures.append("fa_buffer_wrap_cuda succeeded on the CPU backend")
        except FaError as e:
            print(f"wrap_cuda on cpu, as expected: {e}")
            if e.status != ERROR_UNSUPPORTED:
                failures.append(f"fa_buffer_wrap_cuda gave {e.name}, not ERROR_UNSUPPORTED")

        for causal in (False, True):
            desc = AttentionDesc(causal=causal)
            ctx.forward(desc, tq, tk, tv, to, tlse)
            ctx.backward(desc, tq, tk, tv, to, tdo, tlse, tdq, tdk, tdv)
            ctx.synchronize()
            ref = _reference(q, k, v, do, B, S, H, D, causal)
            for name, buf, want in zip(("O", "LSE", "dQ", "dK", "dV"),
                                       (bo, blse, bdq, bdk, bdv), ref):
                got = array.array("f", buf.read())
                err = max(abs(a - b) for a, b in zip(got, want))
                ok = err <= 1e-5
                print(f"  causal={int(causal)} {name:3s} max abs err {err:.2e} "
                      f"{'ok' if ok else 'FAIL'}")
                if not ok:
                    failures.append(f"{name} (causal={causal}) off by {err:.3g}")
    for f in failures:
        print(f"FAIL: {f}")
    print("selftest", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="ctypes binding of libflashattn")
    ap.add_argument("--selftest", action="store_true", help="check the binding on the CPU")
    ap.add_argument("--lib", help="path of libflashattn.so")
    args = ap.parse_args()
    if not args.selftest:
        ap.print_help()
        sys.exit(0)
    sys.exit(selftest(args.lib))
