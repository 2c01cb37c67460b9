# SPDX-License-Identifier: MIT
"""What the library needs to know of an array: where its memory is, its dtype, shape and strides.
Read from NumPy arrays directly, from any other array through DLPack (PyTorch, JAX, CuPy, ...),
and from __cuda_array_interface__; the array itself is never copied here."""

import ctypes
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint64,
    c_void_p,
)

from . import _lib

CPU = ("cpu", 0)

# DLPack's device types and dtype codes (dlpack.h)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_INT, _DL_FLOAT, _DL_BFLOAT = 0, 2, 4


class _DLDevice(Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", _DLDevice),
        ("ndim", c_int32),
        ("dtype", _DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, c_char_p]

_NUMPY_DTYPES = {
    "float32": _lib.DTYPE_F32,
    "float16": _lib.DTYPE_F16,
    "bfloat16": _lib.DTYPE_BF16,
    "int32": _lib.DTYPE_I32,
}
_TYPESTRS = {"<f4": _lib.DTYPE_F32, "<f2": _lib.DTYPE_F16, "<i4": _lib.DTYPE_I32}


class View:
    """An array's memory as the library sees it: `ptr` is the address of element (0, ..., 0),
    `strides` are in elements, `device` is ("cpu", 0) or ("cuda", ordinal). `owner` keeps the
    memory alive while the view is used."""

    __slots__ = ("ptr", "device", "dtype", "shape", "strides", "owner")

    def __init__(self, ptr, device, dtype, shape, strides, owner):
        self.ptr, self.device, self.dtype = ptr, device, dtype
        self.shape, self.strides, self.owner = tuple(shape), tuple(strides), owner

    @property
    def itemsize(self):
        return _lib.DTYPE_SIZES[self.dtype]

    def span(self):
        """(first, end): the bytes the view touches, relative to `ptr`; (0, 0) when empty."""
        if any(n == 0 for n in self.shape):
            return 0, 0
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return low * self.itemsize, (high + 1) * self.itemsize

    def dense(self):
        """True when the view covers its span exactly (every byte of it is an element)."""
        first, end = self.span()
        count = 1
        for n in self.shape:
            count *= n
        return end - first == count * self.itemsize

    def permuted(self, order):
        return View(
            self.ptr,
            self.device,
            self.dtype,
            [self.shape[i] for i in order],
            [self.strides[i] for i in order],
            self.owner,
        )


def _dtype_error(what):
    return TypeError(f"flashattn: dtype {what} is not supported (float32, float16, bfloat16; "
                     "int32 for seqlens_k and block_table)")


def _from_numpy(a):
    dtype = _NUMPY_DTYPES.get(a.dtype.name)
    if dtype is None:
        raise _dtype_error(a.dtype)
    item = a.dtype.itemsize
    if any(s % item for s in a.strides):
        raise ValueError("flashattn: array strides are not a whole number of elements")
    return View(a.ctypes.data, CPU, dtype, a.shape, [s // item for s in a.strides], a)


def _from_dlpack(x, stream):
    try:
        capsule = x.__dlpack__() if stream is None else x.__dlpack__(stream=stream)
    except TypeError:
        capsule = x.__dlpack__()
    # The capsule keeps the producer's DLManagedTensor alive (its destructor frees it while it is
    # still named "dltensor"), so it is the view's owner and is never renamed here.
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dtype = {
        (_DL_FLOAT, 32): _lib.DTYPE_F32,
        (_DL_FLOAT, 16): _lib.DTYPE_F16,
        (_DL_BFLOAT, 16): _lib.DTYPE_BF16,
        (_DL_INT, 32): _lib.DTYPE_I32,
    }.get((code, bits))
    if dtype is None or lanes != 1:
        raise _dtype_error(f"(DLPack code {code}, {bits} bits, {lanes} lanes)")
    kind = t.device.device_type
    if kind in (_DL_CPU, _DL_CUDA_HOST):
        device = CPU
    elif kind in (_DL_CUDA, _DL_CUDA_MANAGED):
        device = ("cuda", t.device.device_id)
    else:
        raise ValueError(f"flashattn: arrays on DLPack device type {kind} are not supported")
    shape = [t.shape[i] for i in range(t.ndim)]
    if t.strides:
        strides = [t.strides[i] for i in range(t.ndim)]
    else:  # NULL strides: packed row-major
        strides, step = [0] * t.ndim, 1
        for i in reversed(range(t.ndim)):
            strides[i], step = step, step * shape[i]
    ptr = (t.data or 0) + t.byte_offset
    return View(ptr, device, dtype, shape, strides, (x, capsule))


def _from_cuda_interface(x):
    info = x.__cuda_array_interface__
    dtype = _TYPESTRS.get(info["typestr"])
    if dtype is None:
        raise _dtype_error(info["typestr"])
    item = _lib.DTYPE_SIZES[dtype]
    shape = info["shape"]
    if info.get("strides"):
        strides = [s // item for s in info["strides"]]
    else:
        strides, step = [0] * len(shape), 1
        for i in reversed(range(len(shape))):
            strides[i], step = step, step * shape[i]
    # The ordinal is not in the interface: the current device's, which is where such arrays
    # are made.
    return View(info["data"][0], ("cuda", -1), dtype, shape, strides, x)


def view(x, name, ndim, stream=None):
    """The View of array `x` (argument `name`, which must have `ndim` dimensions)."""
    if isinstance(x, View):
        v = x
    elif type(x).__module__ == "numpy" and hasattr(x, "ctypes"):
        v = _from_numpy(x)
    elif hasattr(x, "__dlpack__"):
        v = _from_dlpack(x, stream)
    elif hasattr(x, "__cuda_array_interface__"):
        v = _from_cuda_interface(x)
    else:
        raise TypeError(f"flashattn: {name} is a {type(x).__name__}, not an array")
    if len(v.shape) != ndim:
        raise ValueError(f"flashattn: {name} has {len(v.shape)} dimensions, not {ndim}")
    return v


def slopes_view(v):
    """ALiBi slopes, (Hq,) or (B, Hq), as the library's (1 | B, 1, Hq, 1) view."""
    if len(v.shape) == 1:
        return View(v.ptr, v.device, v.dtype, (1, 1, v.shape[0], 1), (0, 0, v.strides[0], 1),
                    v.owner)
    return View(v.ptr, v.device, v.dtype, (v.shape[0], 1, v.shape[1], 1),
                (v.strides[0], 0, v.strides[1], 1), v.owner)


def bias_view(v):
    """An additive bias, (B | 1, Hq | 1, Sq | 1, Sk) as SDPA's attn_mask is shaped, as the
    library's (B, Sq, Hq, Sk) view (size-1 and zero-stride dimensions broadcast)."""
    return v.permuted((0, 2, 1, 3))
