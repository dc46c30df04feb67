"""The whole-tensor digest of a row-sharded tensor does not depend on the split."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ftaudit.trainer_hooks.torch.dtensor import lane_sums

pytestmark = pytest.mark.torch


def _split_sums(t: torch.Tensor, cuts: list[int]) -> list[int]:
    """What the ranks of a row split at ``cuts`` add up in their all-reduce."""
    width = t[0].numel()
    bounds = [0, *cuts, t.shape[0]]
    total = torch.zeros(2, dtype=torch.int64)
    for lo, hi in itertools.pairwise(bounds):
        total += lane_sums(t[lo:hi], lo * width)  # wraps mod 2^64, like the all-reduce
    return total.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
def test_any_row_split_gives_the_whole_tensors_sums(dtype: torch.dtype) -> None:
    t = (torch.randn(41, 3, generator=torch.Generator().manual_seed(0)) * 1e6).to(dtype)
    whole = lane_sums(t, 0).tolist()
    for cuts in ([21], [10, 20, 30], [1], [40], [0, 41]):
        assert _split_sums(t, cuts) == whole, cuts


def test_any_changed_bit_or_moved_value_changes_the_sums() -> None:
    t = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))
    base = lane_sums(t, 0).tolist()
    zeros = torch.zeros(4)
    signed = zeros.clone()
    signed[2] = -0.0
    assert lane_sums(signed, 0).tolist() != lane_sums(zeros, 0).tolist()  # sign of zero
    swapped = t.clone()
    swapped[[0, 1]] = swapped[[1, 0]]  # same values, other rows
    assert lane_sums(swapped, 0).tolist() != base
    flipped = t.clone()
    flipped.view(torch.int32)[3, 1] ^= 1  # one bit of one value
    assert lane_sums(flipped, 0).tolist() != base


def test_a_witness_not_sharded_by_rows_is_refused_at_attach() -> None:
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("refusal_child.py"))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert "refused: witness chunk0.head is a DTensor placed as (Shard(dim=1),)" in child.stdout
    assert "only Shard(0) and Replicate()" in child.stdout
