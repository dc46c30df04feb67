"""Content fingerprints: a stable 64-bit digest of one sample's canonical bytes.

Canonical bytes of a value: the tag ``ftaudit-fp1``, the dtype name, the shape (each
dimension as a little-endian int64), then the C-contiguous data in little-endian byte
order. The digest is BLAKE2b with an 8-byte output, read as a little-endian signed
int64 (so it fits an Arrow ``int64`` column).

What this makes equal and different:

- **dtype** is part of the digest: ``int64`` token ids and the same ids as ``int32``
  differ. Python lists become numpy arrays first (ints are ``int64``, floats
  ``float64``), so ``[1, 2, 3]`` equals ``np.array([1, 2, 3])`` and an ``int64`` torch
  tensor of the same values.
- **shape** is part of the digest: a ``[2, 3]`` tensor differs from its ``[6]`` view.
- **device** is not: a CUDA tensor is copied to the host first and digests like its CPU
  copy. **Endianness** is not: big-endian arrays are byte-swapped first.
- ``bfloat16`` and ``float8`` tensors (no numpy dtype) digest their raw bits under
  their torch dtype name. ``bytes`` digest as dtype ``bytes``, ``str`` as UTF-8 under
  dtype ``str``.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import numpy as np

ALGORITHM = "blake2b-64/ftaudit-fp1"
"""The fingerprint algorithm's name, recorded in manifests and events."""

_TAG = b"ftaudit-fp1\0"
_RAW_DTYPES = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
"""Torch dtypes without a numpy twin: digested as these bit patterns under their own name."""


def _header(dtype: str, shape: tuple[int, ...]) -> bytes:
    return _TAG + dtype.encode() + b"\0" + np.asarray(shape, dtype="<i8").tobytes()


def _from_torch(value: Any) -> tuple[str, np.ndarray]:
    """A torch tensor on the host as numpy, without importing torch (it is loaded already)."""
    torch = sys.modules["torch"]
    tensor = value.detach().cpu()
    name = str(tensor.dtype).removeprefix("torch.")
    raw = _RAW_DTYPES.get(name)
    if raw is not None:
        return name, tensor.contiguous().view(getattr(torch, raw)).numpy()
    return name, tensor.contiguous().numpy()


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def canonical_array(value: Any) -> tuple[str, np.ndarray]:
    """The dtype name and a little-endian, C-contiguous array holding ``value``'s data.

    Accepts numpy arrays and scalars, torch tensors (any device), ``bytes``, ``str`` and
    (nested) lists of numbers. Anything else (a dict from a Hugging Face dataset, say)
    is refused with a ``TypeError``: pick the field that the model receives.
    """
    if _is_torch_tensor(value):
        name, arr = _from_torch(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        name, arr = "bytes", np.frombuffer(bytes(value), dtype=np.uint8)
    elif isinstance(value, str):
        name, arr = "str", np.frombuffer(value.encode(), dtype=np.uint8)
    elif isinstance(value, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        try:
            arr = np.asarray(value)
        except ValueError:
            arr = np.empty(0, dtype=object)
        if arr.dtype == object:
            raise TypeError("cannot fingerprint a ragged or mixed sequence; pass an array")
        name = arr.dtype.name
    else:
        raise TypeError(
            f"cannot fingerprint a {type(value).__name__}: pass the array, tensor or bytes "
            "the model receives (for dict items, choose a field)"
        )
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return name, np.ascontiguousarray(arr).reshape(arr.shape)  # keeps a 0-d value 0-d


def _digest(header: bytes, data: np.ndarray) -> int:
    h = hashlib.blake2b(header, digest_size=8)
    h.update(memoryview(data).cast("B"))
    return int.from_bytes(h.digest(), "little", signed=True)


def fingerprint(value: Any) -> int:
    """The fingerprint of one sample (see the module docstring for what it covers)."""
    name, arr = canonical_array(value)
    return _digest(_header(name, arr.shape), arr.reshape(-1) if arr.ndim == 0 else arr)


def fingerprint_rows(value: Any) -> np.ndarray:
    """One fingerprint per row (first dimension) of a batch, as an int64 array.

    Row ``k`` digests exactly like ``fingerprint(value[k])``: a batch of token ids and
    the dataset items it was stacked from agree.
    """
    name, arr = canonical_array(value)
    if arr.ndim == 0:
        raise ValueError("a batch needs a first (sample) dimension")
    base = hashlib.blake2b(_header(name, arr.shape[1:]), digest_size=8)
    out = np.empty(arr.shape[0], dtype=np.int64)
    flat = arr.reshape(arr.shape[0], -1) if arr.size else arr.reshape(arr.shape[0], 0)
    for k in range(arr.shape[0]):
        h = base.copy()
        h.update(memoryview(flat[k]).cast("B"))
        out[k] = int.from_bytes(h.digest(), "little", signed=True)
    return out
