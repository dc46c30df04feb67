"""What the trainers fed, and what the data was declared to be: loaded once for FT008.

Rows of ``sample_fingerprints`` become flat arrays (one entry per fed sample); the
``data_order``, ``data_manifest`` and ``loader_state`` events become small frozen
records. Nothing here judges: :mod:`ftaudit.verifier.rules.ft008_data_identity` does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow.compute as pc

from ftaudit.eventlog.arrays import int64_numpy
from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.spans import multiply_covered

UNKNOWN = -1
"""An item or epoch that nothing in the run determines."""


@dataclass(frozen=True)
class FedRuns:
    """The fed samples as the runs of stream positions the rows logged them in.

    Run ``r`` fed positions ``start[r] .. start[r] + length[r] - 1``, which are the fed
    samples ``first[r] .. first[r] + length[r] - 1``; ``key`` is the run's attempt (an
    index into :attr:`FedSamples.keys`). A run's samples are contiguous in the flat
    arrays, so questions about overlapping positions cost O(runs), not O(samples).
    """

    start: np.ndarray
    length: np.ndarray
    first: np.ndarray
    key: np.ndarray


@dataclass(frozen=True)
class FedSamples:
    """Every fed sample of the run, one entry per (event, sample), as parallel arrays.

    Samples are grouped by attempt in key order (``key`` never decreases): the rows are
    read ordered by incarnation, step and attempt. ``key`` and ``cell`` are int32: at
    41 M fed samples every byte per sample is 41 MB.
    """

    position: np.ndarray
    fingerprint: np.ndarray
    claimed_item: np.ndarray
    """The item the loader said it read (``UNKNOWN`` where it said nothing; a read-only
    broadcast of ``UNKNOWN`` when no loader said anything, which costs no memory)."""
    key: np.ndarray
    """Index into :attr:`keys` of the (incarnation, step, attempt) that fed it."""
    cell: np.ndarray
    keys: tuple[StepKey, ...]
    runs: FedRuns

    def __len__(self) -> int:
        return int(self.position.size)

    def key_bounds(self) -> np.ndarray:
        """``bounds[k] .. bounds[k + 1]``: the samples of attempt ``keys[k]``."""
        return np.searchsorted(self.key, np.arange(len(self.keys) + 1), side="left")

    def fed_twice(self, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The samples at positions that two or more runs fed, and a slot per sample.

        Returns ``(samples, slots)``: the samples' indices (ascending) and, for each, its
        position numbered densely among the positions fed twice (two samples share a
        slot iff they share a position), so per-position questions are a scatter into
        ``slots.max() + 1`` cells, not a sort. Only runs of the attempts where ``keys``
        (a mask over :attr:`keys`) is True count, and only their samples are returned.
        Every position fed more than once lies in such a run, so a check of repeated
        positions may look at these alone.
        """
        runs = self.runs
        chosen = np.ones(runs.key.size, dtype=bool) if keys is None else keys[runs.key]
        start, length, first = runs.start[chosen], runs.length[chosen], runs.first[chosen]
        end = start + length
        twice = multiply_covered(start, end)
        if not twice:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        # each run against the spans fed twice that it overlaps
        lo = np.searchsorted(twice.ends, start, side="right")
        count = np.maximum(np.searchsorted(twice.starts, end, side="left") - lo, 0)
        run = np.repeat(np.arange(start.size), count)
        span = lo[run] + np.arange(run.size) - np.repeat(np.cumsum(count) - count, count)
        a = np.maximum(start[run], twice.starts[span])
        b = np.minimum(end[run], twice.ends[span])
        slot_base = np.concatenate(([0], np.cumsum(twice.ends - twice.starts)[:-1]))
        # runs are in sample order and a run's pieces ascend: the samples come out sorted
        samples = _expand(first[run] + a - start[run], b - a)
        slots = _expand(slot_base[span] + a - twice.starts[span], b - a)
        return samples, slots


def _expand(firsts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(f, f + n) for f, n in zip(firsts, lengths))`` in one numpy pass."""
    total = int(lengths.sum())
    offsets = np.repeat(firsts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)


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
    """Every fed sample, flattened from the Arrow columns (a Python int per fingerprint cost
    a run of 41 M fed samples gigabytes), in the order of the rows and of each row's ids."""
    # a row whose lists do not align is left out: the event model forbids it, and a
    # damaged row cannot be judged
    table = ctx.session.query(
        """WITH sized AS (
               SELECT incarnation, step, attempt, cell, writer, seq,
                      sample_indices.starts AS starts, sample_indices.lengths AS lengths,
                      fingerprints, items,
                      coalesce(list_sum(sample_indices.lengths), 0) AS n,
                      coalesce(len(items), 0) AS n_items
               FROM sample_fingerprints)
           SELECT incarnation, step, attempt, cell, starts, lengths, fingerprints,
                  items, n, n_items
           FROM sized
           WHERE coalesce(len(fingerprints), 0) = n AND n_items IN (0, n)
           ORDER BY incarnation, step, attempt, writer, seq""",
        label="sample fingerprints",
    )
    if not table.num_rows:
        empty = np.empty(0, dtype=np.int64)
        small = empty.astype(np.int32)
        runs = FedRuns(empty, empty, empty, small)
        return FedSamples(empty, empty, empty, small, small, (), runs)
    n, n_items = int64_numpy(table.column("n")), int64_numpy(table.column("n_items"))
    inc, step, attempt = (
        int64_numpy(table.column(c), null=UNKNOWN) for c in ("incarnation", "step", "attempt")
    )
    changed = np.ones(inc.size, dtype=bool)
    changed[1:] = (inc[1:] != inc[:-1]) | (step[1:] != step[:-1]) | (attempt[1:] != attempt[:-1])
    row_key = np.cumsum(changed) - 1
    keys = tuple(
        (i, s, None if a == UNKNOWN else a)
        for i, s, a in zip(
            inc[changed].tolist(), step[changed].tolist(), attempt[changed].tolist(), strict=True
        )
    )
    starts = int64_numpy(pc.list_flatten(table.column("starts")))
    lengths = int64_numpy(pc.list_flatten(table.column("lengths")))
    run_first = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    position = _expand(starts, lengths)
    total = position.size
    per_row = int64_numpy(pc.list_value_length(table.column("starts")), null=0)
    runs = FedRuns(starts, lengths, run_first, np.repeat(row_key, per_row).astype(np.int32))
    claimed = np.broadcast_to(np.int64(UNKNOWN), (total,))
    if n_items.any():
        claimed = np.full(total, UNKNOWN, dtype=np.int64)
        claimed[np.repeat(n_items > 0, n)] = int64_numpy(pc.list_flatten(table.column("items")))
    fingerprint = int64_numpy(pc.list_flatten(table.column("fingerprints")))
    cell = int64_numpy(table.column("cell")).astype(np.int32)
    del table  # its Arrow buffers are as large as the arrays: free them before repeating
    return FedSamples(
        position,
        fingerprint,
        claimed,
        np.repeat(row_key.astype(np.int32), n),
        np.repeat(cell, n),
        keys,
        runs,
    )


def load_orders(ctx: RunContext) -> list[OrderDeclaration]:
    rows = ctx.rows(
        """SELECT incarnation, epoch, start, items, dataset_size, seed
           FROM data_order ORDER BY incarnation, writer, seq""",
        label="data orders",
        needs=("data_order",),
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
        needs=("data_manifest",),
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
        needs=("loader_state",),
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
        self._epochs = np.asarray(list(self.reference), dtype=np.int64)
        sizes = [o.items.size for o in self.reference.values()]
        self._offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        self._items = np.concatenate(
            [o.items for o in self.reference.values()] or [np.empty(0, np.int64)]
        ).astype(np.int64)

    @property
    def declared(self) -> bool:
        return bool(self.reference)

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per position: its epoch and item (``UNKNOWN`` where nothing declares them)."""
        if not self.reference and self.dataset_size:
            return positions // self.dataset_size, positions % self.dataset_size
        epochs = np.full(positions.size, UNKNOWN, dtype=np.int64)
        items = np.full(positions.size, UNKNOWN, dtype=np.int64)
        if not self.reference:
            return epochs, items
        at = np.searchsorted(self._starts, positions, side="right") - 1
        inside = (at >= 0) & (positions < self._ends[np.maximum(at, 0)])
        # one gather from every epoch's items laid end to end, not one pass per epoch
        # (a long run declares hundreds of epochs)
        at = at[inside]
        epochs[inside] = self._epochs[at]
        items[inside] = self._items[self._offsets[at] + positions[inside] - self._starts[at]]
        return epochs, items

    def epoch_after(self, position: int) -> int | None:
        """The start of the first declared epoch beginning after ``position``."""
        later = self._starts[self._starts > position]
        return int(later[0]) if later.size else None
