"""The demo's loader: a stateful shuffle over prompt groups, read ahead, restorable."""

from __future__ import annotations

import numpy as np
import pytest

from ftaudit.dataset import build_manifest, fingerprint
from ftaudit.demo.config import DataConfig
from ftaudit.demo.data import Dataset
from ftaudit.demo.loader import DemoLoader


def _take(loader: DemoLoader, n: int) -> list[tuple[list[int], list[int]]]:
    return [tuple(a.tolist() for a in loader.next_batch()) for _ in range(n)]  # type: ignore[misc]


def test_each_epoch_is_a_permutation_of_whole_groups() -> None:
    loader = DemoLoader(40, 4, 8, seed=0)
    for epoch in (0, 1):
        order = loader.order(epoch)
        assert sorted(order.tolist()) == list(range(40))
        assert (order.reshape(-1, 4) // 4 == order.reshape(-1, 4)[:, :1] // 4).all()
    assert not np.array_equal(loader.order(0), loader.order(1))


def test_a_restored_loader_continues_exactly_across_epochs() -> None:
    first = DemoLoader(40, 4, 8, seed=0)
    _take(first, 4)
    state = first.state_dict()
    assert state["position"] == 32 and first.fetched == 40  # one batch read ahead
    resumed = DemoLoader(40, 4, 8, seed=0)
    resumed.load_state_dict(state)
    assert _take(resumed, 4) == _take(first, 4)  # into epoch 1 and on


def test_an_unseeded_generator_is_another_order() -> None:
    assert not np.array_equal(
        DemoLoader(400, 4, 8, None).order(0), DemoLoader(400, 4, 8, 0).order(0)
    )


def test_data_order_declares_the_epoch() -> None:
    event = DemoLoader(40, 4, 8, seed=3).data_order(1)
    assert (event.epoch, event.start, event.dataset_size, event.seed) == (1, 40, 40, 3)


def test_the_dataset_is_map_style_and_batches_stack_its_items() -> None:
    ds = Dataset(DataConfig(corpus_tokens=2000), vocab_size=24, seed=0, objective="rl")
    items = np.array([8, 9, 10, 11, 0, 1, 2, 3])
    batch = ds.batch(np.arange(8), np.arange(8), items=items)
    assert [fingerprint(row) for row in batch.tokens] == [fingerprint(ds[int(i)]) for i in items]
    assert build_manifest(ds).size == len(ds) == ds.size
    with pytest.raises(IndexError):
        ds[len(ds)]
