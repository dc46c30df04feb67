"""Fingerprints are stable: they cover dtype and shape, not device or byte order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ftaudit.dataset import fingerprint, fingerprint_rows

pytestmark = pytest.mark.torch

ROW = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int64)


def test_known_value_never_changes() -> None:
    """A pinned digest: changing the canonical bytes would orphan every stored manifest."""
    assert fingerprint(np.arange(4, dtype=np.int64)) == fingerprint([0, 1, 2, 3])
    assert fingerprint(np.arange(12).reshape(3, 4)[0]) == 7221754692184280180


def test_dtype_is_part_of_the_content() -> None:
    assert fingerprint(ROW) != fingerprint(ROW.astype(np.int32))
    assert fingerprint(ROW.astype(np.float32)) != fingerprint(ROW.astype(np.float64))
    assert fingerprint([1, 2]) == fingerprint(np.array([1, 2], dtype=np.int64))  # ints: int64


def test_shape_is_part_of_the_content() -> None:
    assert fingerprint(ROW) != fingerprint(ROW.reshape(2, 4))
    assert fingerprint(ROW.reshape(2, 4)) != fingerprint(ROW.reshape(4, 2))
    assert fingerprint(np.int64(3)) != fingerprint(np.array([3]))


def test_byte_order_and_layout_are_not() -> None:
    assert fingerprint(ROW.astype(">i8")) == fingerprint(ROW)
    wide = np.stack([ROW, ROW])
    assert fingerprint(wide[:, ::2]) == fingerprint(np.ascontiguousarray(wide[:, ::2]))


def test_torch_tensors_digest_like_their_numpy_twins() -> None:
    tensor = torch.from_numpy(ROW.copy())
    assert fingerprint(tensor) == fingerprint(ROW)
    assert fingerprint(tensor.to(torch.int32)) == fingerprint(ROW.astype(np.int32))
    assert fingerprint(tensor.float().requires_grad_()) == fingerprint(ROW.astype(np.float32))


def test_bfloat16_digests_its_bits_under_its_own_name() -> None:
    x = torch.tensor([1.0, -2.5, 3.0], dtype=torch.bfloat16)
    assert fingerprint(x) == fingerprint(x.clone())
    assert fingerprint(x) != fingerprint(x.view(torch.int16))  # same bits, other dtype
    assert fingerprint(x) != fingerprint(x.float())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_is_not_part_of_the_content() -> None:
    tensor = torch.from_numpy(ROW.copy())
    assert fingerprint(tensor.cuda()) == fingerprint(tensor)


def test_rows_match_items() -> None:
    batch = np.stack([ROW, ROW[::-1], ROW + 1])
    assert fingerprint_rows(batch).tolist() == [fingerprint(r) for r in batch]
    assert fingerprint_rows(torch.from_numpy(batch)).tolist() == [fingerprint(r) for r in batch]
    assert fingerprint_rows(np.empty((0, 8), dtype=np.int64)).size == 0


def test_bytes_and_text() -> None:
    assert fingerprint(b"abc") == fingerprint(bytearray(b"abc"))
    assert fingerprint("abc") != fingerprint(b"abc")


def test_refuses_what_it_cannot_canonicalize() -> None:
    with pytest.raises(TypeError, match="choose a field"):
        fingerprint({"input_ids": [1, 2]})
    with pytest.raises(TypeError, match="ragged"):
        fingerprint([[1, 2], [3]])
    with pytest.raises(ValueError, match="first"):
        fingerprint_rows(np.int64(3))
