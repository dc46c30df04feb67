"""The fed-sample arrays FT008 judges: positions fed twice, and the declared stream map.

Both are shortcuts (runs instead of samples, one gather instead of a pass per epoch),
so each is checked against the plain definition on random shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftaudit.verifier.fed import FedRuns, FedSamples, OrderDeclaration, StreamMap


def _fed(runs: list[tuple[int, int, int]], n_keys: int) -> FedSamples:
    """Samples from ``(key, start, length)`` runs, grouped by key as ``load_fed`` reads them."""
    runs = sorted(runs, key=lambda r: r[0])
    key = np.asarray([r[0] for r in runs], dtype=np.int32)
    start = np.asarray([r[1] for r in runs], dtype=np.int64)
    length = np.asarray([r[2] for r in runs], dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64)
    position = np.concatenate([np.arange(s, s + n) for s, n in zip(start, length, strict=True)])
    per_sample_key = np.repeat(key, length)
    zeros = np.zeros(position.size, dtype=np.int32)
    keys = tuple((0, k, 0) for k in range(n_keys))
    return FedSamples(
        position,
        position * 7,
        np.full(position.size, -1),
        per_sample_key,
        zeros,
        keys,
        FedRuns(start, length, first, key),
    )


@pytest.mark.parametrize("seed", range(20))
def test_fed_twice_is_every_sample_at_a_repeated_position(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_keys = 5
    runs = [
        (int(rng.integers(n_keys)), int(rng.integers(0, 60)), int(rng.integers(0, 9)))
        for _ in range(int(rng.integers(1, 12)))
    ]
    fed = _fed(runs, n_keys)
    chosen = rng.random(n_keys) < 0.6
    for keys in (None, chosen):
        selected = np.ones(len(fed), bool) if keys is None else keys[fed.key]
        counts = np.bincount(fed.position[selected], minlength=80)
        want = np.flatnonzero(selected & (counts[fed.position] >= 2))
        samples, slots = fed.fed_twice(keys)
        assert samples.tolist() == want.tolist()
        # equal slots iff equal positions
        pairs = set(zip(slots.tolist(), fed.position[samples].tolist(), strict=True))
        assert len(pairs) == len({s for s, _ in pairs}) == len({p for _, p in pairs})
    bounds = fed.key_bounds()
    for k in range(n_keys):
        assert (fed.key[bounds[k] : bounds[k + 1]] == k).all()
    assert bounds[-1] == len(fed)


def test_stream_map_locates_each_declared_epoch() -> None:
    rng = np.random.default_rng(0)
    orders = [
        OrderDeclaration(0, epoch, 10 * epoch, rng.permutation(10), 10, None) for epoch in range(4)
    ]
    # a later incarnation's declaration of epoch 1 does not replace the first one
    orders.append(OrderDeclaration(1, 1, 10, np.arange(10), 10, None))
    stream = StreamMap(orders, 10)
    positions = np.asarray([-1, 0, 9, 10, 15, 39, 40, 100])
    epochs, items = stream.locate(positions)
    for p, e, i in zip(positions.tolist(), epochs.tolist(), items.tolist(), strict=True):
        if 0 <= p < 40:
            assert (e, i) == (p // 10, int(orders[p // 10].items[p % 10]))
        else:
            assert (e, i) == (-1, -1)
