# SPDX-License-Identifier: MIT
"""ctypes declarations of libflashattn's C API (include/flashattn.h) and the loading of the copy of
the library that the wheel carries beside this file."""

import ctypes
import glob
import os
import sys
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    c_bool,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

OK = 0
DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_I32 = 1, 2, 3, 4
DTYPE_NAMES = {DTYPE_F32: "f32", DTYPE_F16: "f16", DTYPE_BF16: "bf16"}
DTYPE_SIZES = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_BF16: 2, DTYPE_I32: 4}
BACKENDS = {"auto": 0, "cuda": 1, "vulkan": 2, "opencl": 3, "cpu": 4}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
DEVICE_KINDS = {0: "other", 1: "discrete_gpu", 2: "integrated_gpu", 3: "cpu", 4: "software"}
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
# FA_CUDA_STREAM_LEGACY, FA_CUDA_STREAM_PER_THREAD: the default streams, whose handle 0 would
# read as "no stream" in fa_context_desc.cuda.stream.
CUDA_STREAM_LEGACY = 1
CUDA_STREAM_PER_THREAD = 2

LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class CpuOptions(Structure):
    _fields_ = [("threads", c_int)]


class CudaOptions(Structure):
    _fields_ = [("stream", c_void_p)]


class ContextDesc(Structure):
    _fields_ = [
        ("backend", c_int),
        ("device", c_int),
        ("log", LOG_FN),
        ("log_user_data", c_void_p),
        ("log_level", c_int),
        ("cpu", CpuOptions),
        ("cuda", CudaOptions),
        ("cache_dir", c_char_p),
        ("cache_max_bytes", c_uint64),
        ("reserved", c_uint64 * 8),
    ]


class BufferDesc(Structure):
    _fields_ = [("size", c_size_t), ("data", c_void_p), ("reserved", c_uint64 * 4)]


class Tensor(Structure):
    """fa_tensor: logical (batch, seq, heads, head_dim); offset in bytes, strides in elements."""

    _fields_ = [
        ("buffer", c_void_p),
        ("offset", c_uint64),
        ("dtype", c_int),
        ("shape", c_int64 * 4),
        ("stride", c_int64 * 4),
    ]


class Window(Structure):
    _fields_ = [("enabled", c_bool), ("left", c_int32), ("right", c_int32)]


class _WindowWords(Union):
    _fields_ = [("window", Window), ("words", c_uint64 * 2)]


class _SoftcapWord(Union):
    _fields_ = [("softcap", c_float), ("word", c_uint64)]


class AttentionDesc(Structure):
    _anonymous_ = ("_window", "_softcap")
    _fields_ = [
        ("scale", c_float),
        ("causal", c_bool),
        ("deterministic", c_bool),
        ("num_splits", c_int32),
        ("seqlens_k", c_void_p),
        ("block_table", c_void_p),
        ("k_new", c_void_p),
        ("v_new", c_void_p),
        ("_window", _WindowWords),
        ("_softcap", _SoftcapWord),
        ("alibi_slopes", c_void_p),
        ("bias", c_void_p),
        ("cu_seqlens_q", c_void_p),
        ("cu_seqlens_k", c_void_p),
        ("max_seqlen_q", c_int64),
        ("max_seqlen_k", c_int64),
        ("q_descale", c_void_p),
        ("k_descale", c_void_p),
        ("v_descale", c_void_p),
        ("reserved", c_uint64 * 14),
    ]


class BackendInfo(Structure):
    _fields_ = [
        ("backend", c_int),
        ("name", c_char_p),
        ("built", c_bool),
        ("available", c_bool),
        ("device_count", c_int),
        ("reason", c_char * 256),
        ("reserved", c_uint64 * 8),
    ]


class DeviceInfo(Structure):
    _fields_ = [
        ("backend", c_int),
        ("index", c_int),
        ("kind", c_int),
        ("name", c_char * 128),
        ("vendor", c_char * 64),
        ("driver", c_char * 64),
        ("api_version", c_char * 32),
        ("api_major", c_int),
        ("api_minor", c_int),
        ("memory_bytes", c_uint64),
        ("max_buffer_bytes", c_uint64),
        ("compute_units", c_uint32),
        ("shared_memory_bytes", c_uint32),
        ("max_workgroup_size", c_uint32),
        ("subgroup_size_min", c_uint32),
        ("subgroup_size_max", c_uint32),
        ("f16", c_bool),
        ("bf16", c_bool),
        ("matrix_units", c_bool),
        ("kernels", c_char * 128),
        ("reserved", c_uint64 * 16),
    ]


class MemoryStats(Structure):
    _fields_ = [
        ("buffer_bytes", c_uint64),
        ("buffer_peak_bytes", c_uint64),
        ("workspace_bytes", c_uint64),
        ("workspace_peak_bytes", c_uint64),
        ("reserved", c_uint64 * 4),
    ]


# The sizes the C compiler gives these structs on 64-bit targets (the ABI is fixed for a version
# line: README, "Structs that can grow"); a mismatch means this file and the library disagree.
_SIZES = {
    ContextDesc: 120,
    BufferDesc: 48,
    Tensor: 88,
    AttentionDesc: 256,
    BackendInfo: 344,
    DeviceInfo: 608,
    MemoryStats: 64,
}

_TENSOR_P = POINTER(Tensor)
_SIGNATURES = {
    "fa_version_string": (c_char_p, []),
    "fa_status_name": (c_char_p, [c_int]),
    "fa_status_string": (c_char_p, [c_int]),
    "fa_last_create_error": (c_char_p, []),
    "fa_backend_query": (c_int, [c_int, POINTER(BackendInfo)]),
    "fa_device_query": (c_int, [c_int, c_int, POINTER(DeviceInfo)]),
    "fa_context_create": (c_int, [POINTER(ContextDesc), POINTER(c_void_p)]),
    "fa_context_destroy": (None, [c_void_p]),
    "fa_context_backend": (c_int, [c_void_p]),
    "fa_context_device": (c_int, [c_void_p, POINTER(DeviceInfo)]),
    "fa_context_synchronize": (c_int, [c_void_p]),
    "fa_context_last_error": (c_char_p, [c_void_p]),
    "fa_context_memory": (c_int, [c_void_p, POINTER(MemoryStats)]),
    "fa_buffer_create": (c_int, [c_void_p, POINTER(BufferDesc), POINTER(c_void_p)]),
    "fa_buffer_wrap_cuda": (c_int, [c_void_p, c_uint64, c_size_t, POINTER(c_void_p)]),
    "fa_buffer_wrap_host": (c_int, [c_void_p, c_void_p, c_size_t, POINTER(c_void_p)]),
    "fa_buffer_destroy": (None, [c_void_p]),
    "fa_buffer_read": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t]),
    "fa_attention_forward": (c_int, [c_void_p, POINTER(AttentionDesc)] + [_TENSOR_P] * 5),
    "fa_attention_backward": (c_int, [c_void_p, POINTER(AttentionDesc)] + [_TENSOR_P] * 9),
}


def library_path():
    """The libflashattn that `import flashattn` loads: $FLASHATTN_LIBRARY when set (a build tree's
    library, for development), else the one installed beside this file."""
    override = os.environ.get("FLASHATTN_LIBRARY")
    if override:
        return override
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.platform == "win32":
        patterns = ["flashattn.dll"]
    elif sys.platform == "darwin":
        patterns = ["libflashattn*.dylib"]
    else:
        patterns = ["libflashattn.so*"]
    for pattern in patterns:
        found = sorted(glob.glob(os.path.join(here, pattern)))
        if found:
            return found[0]
    raise ImportError(
        f"flashattn: the C library is missing from {here} (the package was not installed from a "
        "wheel built by its pyproject.toml); reinstall it, or set FLASHATTN_LIBRARY to a "
        "libflashattn built with CMake"
    )


def load():
    for struct, size in _SIZES.items():
        if ctypes.sizeof(c_void_p) == 8 and ctypes.sizeof(struct) != size:
            raise ImportError(
                f"flashattn: ctypes lays out {struct.__name__} in {ctypes.sizeof(struct)} bytes, "
                f"the C library in {size}"
            )
    lib = ctypes.CDLL(library_path())
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


lib = load()
