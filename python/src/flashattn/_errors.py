# SPDX-License-Identifier: MIT
"""The library's status codes as Python exceptions, one class per group of ten (status.h)."""

from ._lib import lib


class Error(RuntimeError):
    """A failed libflashattn call: `status` is the fa_status value, `name` its name
    ("ERROR_SHAPE_MISMATCH"), `detail` the library's sentence saying which argument and which
    limit (fa_context_last_error)."""

    def __init__(self, status, call, detail=""):
        self.status = status
        self.name = lib.fa_status_name(status).decode()
        self.call = call
        self.detail = detail
        text = f"{call}: {self.name}"
        super().__init__(f"{text}: {detail}" if detail else text)


class InvalidArgumentError(Error, ValueError):
    """-1 to -19: shapes, dtypes, strides, bounds, GQA ratio, device index, backend name."""


class UnsupportedError(Error):
    """-20 to -29: the backend or device cannot run this call (head dim, dtype, option)."""


class BackendUnavailableError(Error):
    """-30 to -39: the backend is not built, its driver is missing, or it has no device."""


class OutOfMemoryError(Error, MemoryError):
    """-40 to -49: host or device memory ran out."""


class DeviceError(Error):
    """-50 to -59: a driver error, a lost device or context, a kernel that did not build."""


_GROUPS = {
    0: InvalidArgumentError,
    1: InvalidArgumentError,
    2: UnsupportedError,
    3: BackendUnavailableError,
    4: OutOfMemoryError,
    5: DeviceError,
}


def error(status, call, detail=""):
    """The exception for a failed status (negative)."""
    return _GROUPS.get((-status) // 10, Error)(status, call, detail)
