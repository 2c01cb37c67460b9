# SPDX-License-Identifier: MIT
"""flashattn: exact FlashAttention (forward and backward) on CUDA, Vulkan, OpenCL and the CPU,
through the C library bundled with this package.

    import flashattn
    flashattn.devices()                       # what this machine has
    ctx = flashattn.Context(backend="cpu")
    out, lse = ctx.forward(q, k, v, causal=True)        # NumPy or any DLPack arrays
    dq, dk, dv = ctx.backward(q, k, v, out, dout, lse, causal=True)

`import flashattn.torch` adds the PyTorch operator, flashattn.torch.attention. This module needs
neither PyTorch nor NumPy to import (NumPy, to allocate outputs for host arrays)."""

from ._core import Backend, Context, Device, backends, devices, version
from ._errors import (
    BackendUnavailableError,
    DeviceError,
    Error,
    InvalidArgumentError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._lib import library_path

__version__ = version()

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "Context",
    "Device",
    "DeviceError",
    "Error",
    "InvalidArgumentError",
    "OutOfMemoryError",
    "UnsupportedError",
    "backends",
    "devices",
    "library_path",
    "version",
]
