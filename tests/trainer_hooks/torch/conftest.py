"""Torch tests: skipped where torch is not installed (the core-only CI gate)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("torch") is None else []


@pytest.fixture
def deterministic() -> Iterator[None]:
    """Deterministic kernels for the test, restoring the previous setting after it."""
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
