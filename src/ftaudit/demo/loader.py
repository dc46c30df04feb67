"""The demo's data loader: prompt groups shuffled per epoch, one step's items at a time.

Like a ``RandomSampler`` with its own generator, each epoch draws a permutation of the
prompt groups from a generator that keeps running across epochs, so the order of epoch
``e`` depends on the generator's state, not on ``e`` alone: a resume must restore that
state. Like a ``DataLoader`` with prefetching, the loader has already read the next
step's items when it hands out the current step's. Its state (``state_dict``) is the
position of the next batch it will hand out and the generator's state at the start of
the current epoch.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

import numpy as np

from ftaudit.eventlog.events import DataOrder


class DemoLoader:
    """Stream positions ``position, position + 1, ...`` and the items they read."""

    def __init__(self, size: int, group: int, batch: int, seed: int | None) -> None:
        if size % group:
            raise ValueError(f"{size} items do not form whole groups of {group}")
        self.size, self.group, self.batch, self.seed = size, group, batch, seed
        self.rng = np.random.default_rng(seed)  # None: fresh entropy (unreproducible)
        self.epoch = -1
        self._orders: dict[int, np.ndarray] = {}
        self._epoch_state: dict[int, dict[str, Any]] = {}
        self.position = 0
        """The stream position of the next batch handed out."""
        self.fetched = 0
        """The stream position of the next batch to read (ahead by what was prefetched)."""
        self._ready: deque[np.ndarray] = deque()

    def order(self, epoch: int) -> np.ndarray:
        """The items of every position of ``epoch``, drawing epochs up to it if needed."""
        while self.epoch < epoch:
            self._epoch_state[self.epoch + 1] = copy.deepcopy(self.rng.bit_generator.state)
            groups = self.rng.permutation(self.size // self.group)
            items = (groups[:, None] * self.group + np.arange(self.group)).reshape(-1)
            self.epoch += 1
            self._orders[self.epoch] = items
        if epoch not in self._orders:
            raise ValueError(f"epoch {epoch} was drawn before this loader's state begins")
        return self._orders[epoch]

    def data_order(self, epoch: int) -> DataOrder:
        """The ``data_order`` event declaring ``epoch``'s order to the run."""
        return DataOrder(
            epoch=epoch,
            start=epoch * self.size,
            items=self.order(epoch).tolist(),
            dataset_size=self.size,
            seed=self.seed,
            shuffle=True,
            sampler=type(self).__name__,
        )

    def _read(self, first: int) -> np.ndarray:
        positions = np.arange(first, first + self.batch, dtype=np.int64)
        out = np.empty(self.batch, dtype=np.int64)
        for e in np.unique(positions // self.size).tolist():
            mask = positions // self.size == e
            out[mask] = self.order(e)[positions[mask] % self.size]
        return out

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, items) of the next batch; the batch after it is read ahead."""
        while len(self._ready) < 2:
            self._ready.append(self._read(self.fetched))
            self.fetched += self.batch
        items = self._ready.popleft()
        positions = np.arange(self.position, self.position + self.batch, dtype=np.int64)
        self.position += self.batch
        return positions, items

    def state_dict(self) -> dict[str, Any]:
        """Where the next batch starts, and the generator as it was when its epoch began."""
        epoch = self.position // self.size
        self.order(epoch)
        return {"position": self.position, "epoch": epoch, "rng": self._epoch_state[epoch]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        self.epoch = int(state["epoch"]) - 1
        self._orders.clear()
        self.order(int(state["epoch"]))
        self.seek(int(state["position"]))

    def seek(self, position: int) -> None:
        """Hand out from ``position`` next (drops what was read ahead)."""
        self.position = self.fetched = position
        self._ready.clear()
