"""What the trainers fed, and what the data was declared to be: loaded once for FT008.

Rows of ``sample_fingerprints`` become flat arrays (one entry per fed sample); the
``data_order``, ``data_manifest`` and ``loader_state`` events become small frozen
records. Nothing here judges: :mod:`ftaudit.verifier.rules.ft008_data_identity` does.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.verifier.context import RunContext, StepKey

UNKNOWN = -1
"""An item or epoch that nothing in the run determines."""


@dataclass(frozen=True)
class FedSamples:
    """Every fed sample of the run, one entry per (event, sample), as parallel arrays."""

    position: np.ndarray
    fingerprint: np.ndarray
    claimed_item: np.ndarray
    """The item the loader said it read (``UNKNOWN`` where it said nothing)."""
    key: np.ndarray
    """Index into :attr:`keys` of the (incarnation, step, attempt) that fed it."""
    cell: np.ndarray
    rank: np.ndarray
    keys: tuple[StepKey, ...]

    def __len__(self) -> int:
        return int(self.position.size)


@dataclass(frozen=True)
class OrderDeclaration:
    """One ``data_order`` event: epoch ``epoch`` reads ``items`` from stream position ``start``."""

    incarnation: int
    epoch: int
    start: int
    items: np.ndarray
    dataset_size: int
    seed: int | None

    @cached_property
    def digest(self) -> str:
        data = np.asarray([self.start, self.dataset_size], dtype="<i8").tobytes()
        return hashlib.sha256(data + self.items.astype("<i8").tobytes()).hexdigest()

    @property
    def end(self) -> int:
        return self.start + int(self.items.size)


@dataclass(frozen=True)
class ManifestDeclaration:
    incarnation: int
    digest: str
    dataset_size: int
    algorithm: str
    path: str


@dataclass(frozen=True)
class LoaderStateRecord:
    incarnation: int
    iteration: int
    when: str
    position: int
    epoch: int
    seed: int | None


def load_fed(ctx: RunContext) -> FedSamples:
    rows = ctx.rows(
        """SELECT incarnation, step, attempt, cell, source_rank AS rank, sample_indices,
                  fingerprints, items
           FROM sample_fingerprints ORDER BY incarnation, step, attempt, writer, seq""",
        label="sample fingerprints",
    )
    keys: dict[StepKey, int] = {}
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    for r in rows:
        positions = IntRuns.from_column(r["sample_indices"]).to_array()
        n = positions.size
        fps = np.asarray(r["fingerprints"] or [], dtype=np.int64)
        items = np.asarray(r["items"] or [], dtype=np.int64)
        if fps.size != n or items.size not in (0, n):
            continue  # the event model forbids it; a damaged row cannot be judged
        key = keys.setdefault((r["incarnation"], r["step"], r["attempt"]), len(keys))
        parts["pos"].append(positions)
        parts["fp"].append(fps)
        parts["item"].append(items if items.size else np.full(n, UNKNOWN, dtype=np.int64))
        parts["key"].append(np.full(n, key, dtype=np.int64))
        parts["cell"].append(np.full(n, r["cell"], dtype=np.int64))
        parts["rank"].append(np.full(n, r["rank"] if r["rank"] is not None else 0, np.int64))

    def cat(name: str) -> np.ndarray:
        return np.concatenate(parts[name]) if parts[name] else np.empty(0, dtype=np.int64)

    return FedSamples(
        cat("pos"), cat("fp"), cat("item"), cat("key"), cat("cell"), cat("rank"), tuple(keys)
    )


def load_orders(ctx: RunContext) -> list[OrderDeclaration]:
    rows = ctx.rows(
        """SELECT incarnation, epoch, start, items, dataset_size, seed
           FROM data_order ORDER BY incarnation, writer, seq""",
        label="data orders",
    )
    return [
        OrderDeclaration(
            r["incarnation"],
            r["epoch"],
            r["start"],
            np.asarray(r["items"] or [], dtype=np.int64),
            r["dataset_size"],
            r["seed"],
        )
        for r in rows
    ]


def load_manifests(ctx: RunContext) -> list[ManifestDeclaration]:
    rows = ctx.rows(
        """SELECT incarnation, digest, dataset_size, algorithm, path
           FROM data_manifest ORDER BY incarnation, writer, seq""",
        label="data manifests",
    )
    return [
        ManifestDeclaration(
            r["incarnation"], r["digest"], r["dataset_size"], r["algorithm"], r["path"] or ""
        )
        for r in rows
    ]


def load_loader_states(ctx: RunContext) -> list[LoaderStateRecord]:
    rows = ctx.rows(
        """SELECT incarnation, iteration, "when", position, epoch, seed
           FROM loader_state ORDER BY incarnation, writer, seq""",
        label="loader states",
    )
    return [
        LoaderStateRecord(
            r["incarnation"], r["iteration"], r["when"], r["position"], r["epoch"], r["seed"]
        )
        for r in rows
    ]


class StreamMap:
    """Stream position -> (epoch, dataset item), by the run's declared mapping.

    The reference order of an epoch is the first declaration of it (the lowest
    incarnation's): a later incarnation declaring another order is itself a finding.
    Without any ``data_order``, SPEC's default holds: with ``N`` items, position ``i``
    is item ``i mod N`` of epoch ``i // N``.
    """

    def __init__(self, orders: list[OrderDeclaration], dataset_size: int | None) -> None:
        reference: dict[int, OrderDeclaration] = {}
        for order in orders:
            reference.setdefault(order.epoch, order)
        self.reference = dict(sorted(reference.items()))
        self.dataset_size = dataset_size
        self._starts = np.asarray([o.start for o in self.reference.values()], dtype=np.int64)
        self._ends = np.asarray([o.end for o in self.reference.values()], dtype=np.int64)

    @property
    def declared(self) -> bool:
        return bool(self.reference)

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per position: its epoch and item (``UNKNOWN`` where nothing declares them)."""
        epochs = np.full(positions.size, UNKNOWN, dtype=np.int64)
        items = np.full(positions.size, UNKNOWN, dtype=np.int64)
        if not self.reference:
            if self.dataset_size:
                return positions // self.dataset_size, positions % self.dataset_size
            return epochs, items
        at = np.searchsorted(self._starts, positions, side="right") - 1
        inside = (at >= 0) & (positions < self._ends[np.maximum(at, 0)])
        orders = list(self.reference.values())
        for k in np.unique(at[inside]).tolist():
            mask = inside & (at == k)
            epochs[mask] = orders[k].epoch
            items[mask] = orders[k].items[positions[mask] - orders[k].start]
        return epochs, items

    def epoch_after(self, position: int) -> int | None:
        """The start of the first declared epoch beginning after ``position``."""
        later = self._starts[self._starts > position]
        return int(later[0]) if later.size else None
