"""What the trainers fed, and what the data was declared to be: loaded once for FT008.

Rows of ``sample_fingerprints`` become flat arrays (one entry per fed sample); the
``data_order``, ``data_manifest`` and ``loader_state`` events become small frozen
records. Nothing here judges: :mod:`ftaudit.verifier.rules.ft008_data_identity` does.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from ftaudit.eventlog.arrays import (
    concat_ranges,
    int64_numpy,
    list_lengths,
    list_values,
    unique_sorted,
)
from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.spans import multiply_covered

UNKNOWN = -1
"""An item or epoch that nothing in the run determines."""


CHUNK = 1 << 18
"""Fed samples judged at a time: the per-sample arrays derived from the runs (positions,
attempts, cells, epochs, items) are temporaries as large as a chunk, not as the run."""


@dataclass(frozen=True)
class FedRuns:
    """The fed samples as the runs of stream positions the rows logged them in.

    Run ``r`` fed positions ``start[r] .. start[r] + length[r] - 1``, which are the fed
    samples ``first[r] .. first[r] + length[r] - 1``; ``key`` is the run's attempt (an
    index into :attr:`FedSamples.keys`) and ``cell`` the cell that fed it. A run's
    samples are contiguous, so questions about overlapping positions cost O(runs), not
    O(samples). Their fingerprints are ``stored[r] ..`` in the arrays as read.
    """

    start: np.ndarray
    length: np.ndarray
    first: np.ndarray
    key: np.ndarray
    cell: np.ndarray
    stored: np.ndarray


@dataclass(frozen=True)
class FedChunk:
    """The fed samples ``lo .. lo + len(position) - 1``, their per-sample arrays spelled out,
    and the pieces of runs they lie in (what holds for a whole run is asked per run)."""

    lo: int
    position: np.ndarray
    fingerprint: np.ndarray
    claimed_item: np.ndarray
    run_key: np.ndarray
    """The attempt (an index into :attr:`FedSamples.keys`) of each piece, in order."""
    run_count: np.ndarray
    """The samples of each piece (none empty)."""

    @property
    def rows(self) -> slice:
        return slice(self.lo, self.lo + int(self.position.size))

    def any_per_run(self, per_sample: np.ndarray) -> np.ndarray:
        """Per piece: whether ``per_sample`` (a bool per sample) holds for any of its samples."""
        if not self.run_count.size:
            return np.zeros(0, dtype=bool)
        offsets = np.concatenate(([0], np.cumsum(self.run_count)[:-1]))
        return np.logical_or.reduceat(per_sample, offsets)


@dataclass(frozen=True)
class SpelledSamples:
    """Chosen fed samples' positions, attempts (indices into :attr:`FedSamples.keys`),
    cells, fingerprints and claimed items (:meth:`FedSamples.spelled`)."""

    position: np.ndarray
    key: np.ndarray
    cell: np.ndarray
    fingerprint: np.ndarray
    claimed_item: np.ndarray


@dataclass(frozen=True)
class FedSamples:
    """Every fed sample of the run, one entry per (event, sample).

    Only what the rows cannot give back is held per sample: the fingerprint (and the
    loader's claimed item, where any loader claimed one), in the order the rows were
    read. A sample's position, attempt and cell follow from its run, so they are spelled
    out a chunk at a time (:meth:`chunks`) or for chosen samples (:meth:`position`,
    :meth:`key`, :meth:`cell`, :meth:`fingerprint`, :meth:`claimed_item`): at 34 M fed
    samples every byte per sample is 34 MB.

    Samples are numbered in logging order: by incarnation, step, attempt, writer and
    sequence number, so they are grouped by attempt in key order (a run's ``key``
    never decreases).
    """

    read_fingerprint: np.ndarray
    read_claimed_item: np.ndarray
    """The item the loader said it read (``UNKNOWN`` where it said nothing; a read-only
    broadcast of ``UNKNOWN`` when no loader said anything, which costs no memory)."""
    keys: tuple[StepKey, ...]
    runs: FedRuns

    def __len__(self) -> int:
        return int(self.read_fingerprint.size)

    def _stored(self, samples: np.ndarray) -> np.ndarray:
        run = self._run_of(samples)
        return self.runs.stored[run] + samples - self.runs.first[run]

    def fingerprint(self, samples: np.ndarray) -> np.ndarray:
        """The fingerprints ``samples`` (indices of fed samples) fed."""
        return self.read_fingerprint[self._stored(np.asarray(samples, dtype=np.int64))]

    def claimed_item(self, samples: np.ndarray) -> np.ndarray:
        return self.read_claimed_item[self._stored(np.asarray(samples, dtype=np.int64))]

    def _run_of(self, samples: np.ndarray) -> np.ndarray:
        # the last run starting at or before the sample (runs of no samples share their
        # ``first`` with the next run, which this picks)
        return np.searchsorted(self.runs.first, samples, side="right") - 1

    def position(self, samples: np.ndarray) -> np.ndarray:
        """The stream positions of ``samples`` (indices of fed samples)."""
        samples = np.asarray(samples, dtype=np.int64)
        run = self._run_of(samples)
        return self.runs.start[run] + samples - self.runs.first[run]

    def key(self, samples: np.ndarray) -> np.ndarray:
        """Per sample: the index into :attr:`keys` of the attempt that fed it."""
        return self.runs.key[self._run_of(np.asarray(samples, dtype=np.int64))]

    def cell(self, samples: np.ndarray) -> np.ndarray:
        return self.runs.cell[self._run_of(np.asarray(samples, dtype=np.int64))]

    def spelled(self, samples: np.ndarray) -> SpelledSamples:
        """Everything :meth:`position`, :meth:`key`, :meth:`cell`, :meth:`fingerprint` and
        :meth:`claimed_item` give for ``samples``, their runs found once."""
        samples = np.asarray(samples, dtype=np.int64)
        run = self._run_of(samples)
        runs = self.runs
        offset = samples - runs.first[run]
        stored = runs.stored[run] + offset
        return SpelledSamples(
            runs.start[run] + offset,
            runs.key[run],
            runs.cell[run],
            self.read_fingerprint[stored],
            self.read_claimed_item[stored],
        )

    def slices(self) -> Iterator[slice]:
        """The samples in order, :data:`CHUNK` at a time."""
        size = CHUNK  # read at each call: a test may make it tiny
        for lo in range(0, len(self), size):
            yield slice(lo, min(lo + size, len(self)))

    def chunks(self) -> Iterator[FedChunk]:
        """The samples in order, :data:`CHUNK` at a time, their per-sample arrays spelled out."""
        runs = self.runs
        # rows read in logging order, or no loader claims (a broadcast): slices, not gathers
        in_order = bool(np.array_equal(runs.stored, runs.first))
        unclaimed = self.read_claimed_item.strides == (0,)
        for rows in self.slices():
            lo, hi = rows.start, rows.stop
            r0, r1 = self._run_of(np.asarray([lo, hi - 1])).tolist()
            r = slice(r0, r1 + 1)
            first, length = runs.first[r], runs.length[r]
            a = np.maximum(first, lo)
            count = np.maximum(np.minimum(first + length, hi) - a, 0)
            if in_order:
                fingerprint, claimed = self.read_fingerprint[rows], self.read_claimed_item[rows]
            else:
                stored = concat_ranges(runs.stored[r] + a - first, count)
                fingerprint = self.read_fingerprint[stored]
                claimed = (
                    self.read_claimed_item[rows] if unclaimed else self.read_claimed_item[stored]
                )
            some = count > 0
            yield FedChunk(
                lo,
                concat_ranges(runs.start[r] + a - first, count),
                fingerprint,
                claimed,
                runs.key[r][some],
                count[some],
            )

    def key_positions(self, key: int) -> np.ndarray:
        """The distinct positions attempt ``keys[key]`` fed, ascending."""
        runs = self.runs
        a, b = np.searchsorted(runs.key, [key, key + 1], side="left").tolist()
        return unique_sorted(concat_ranges(runs.start[a:b], runs.length[a:b]))

    def fed_twice(
        self, keys: np.ndarray | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The samples at positions that two or more runs fed, with a slot per sample and
        the fingerprints they fed, about :data:`CHUNK` positions at a time.

        Yields ``(samples, slots, fingerprints)``: the samples' indices (ascending within
        a chunk, every sample of a position in the same chunk); for each, its position
        numbered densely among the positions fed twice (two samples share a slot iff they
        share a position; a chunk's slots are one contiguous range), so per-position
        questions are a scatter, not a sort; and what :meth:`fingerprint` gives for them,
        read through the runs found here. Only runs of the attempts where ``keys`` (a
        mask over :attr:`keys`) is True count, and only their samples are returned. Every
        position fed more than once lies in such a run, so a check of repeated positions
        may look at these alone.

        A chunk at a time because fresh memory is what these arrays cost: all 8 M samples
        fed twice of the largest benchmark run at once touched 67,000 new pages (0.8 s of
        system time in a process that holds the loaded run).
        """
        runs = self.runs
        chosen = np.ones(runs.key.size, dtype=bool) if keys is None else keys[runs.key]
        start, length = runs.start[chosen], runs.length[chosen]
        first, stored = runs.first[chosen], runs.stored[chosen]
        end = start + length
        twice = multiply_covered(start, end)
        if not twice:
            return
        # the spans fed twice cut into pieces of at most CHUNK positions, grouped in order
        # into chunks of CHUNK positions or a little more
        size = CHUNK  # read at each call: a test may make it tiny
        pieces = -((twice.starts - twice.ends) // size)  # per span, rounded up
        offset = concat_ranges(np.zeros(pieces.size, dtype=np.int64), pieces) * size
        piece_start = np.repeat(twice.starts, pieces) + offset
        piece_end = np.minimum(piece_start + size, np.repeat(twice.ends, pieces))
        slot_base = _exclusive_sum(piece_end - piece_start)
        group = slot_base // size
        # each run against the pieces it overlaps, once for all chunks; then the pairs
        # by chunk, each chunk's in run order (runs are in sample order and a run's
        # pieces ascend: a chunk's samples come out sorted)
        lo = np.searchsorted(piece_end, start, side="right")
        count = np.maximum(np.searchsorted(piece_start, end, side="left") - lo, 0)
        hit = np.flatnonzero(count)
        run = np.repeat(hit, count[hit])
        piece = concat_ranges(lo[hit], count[hit])
        by_chunk = np.argsort(group[piece], kind="stable")
        run, piece = run[by_chunk], piece[by_chunk]
        cuts = np.searchsorted(group[piece], np.arange(int(group[-1]) + 2)).tolist()
        for c0, c1 in itertools.pairwise(cuts):
            if c1 == c0:
                continue  # (every piece is fed twice: no chunk is empty)
            r, p = run[c0:c1], piece[c0:c1]
            a = np.maximum(start[r], piece_start[p])
            b = np.minimum(end[r], piece_end[p])
            samples = concat_ranges(first[r] + a - start[r], b - a)
            slots = concat_ranges(slot_base[p] + a - piece_start[p], b - a)
            fingerprints = self.read_fingerprint[concat_ranges(stored[r] + a - start[r], b - a)]
            yield samples, slots, fingerprints


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
    segment: str | None = None


def load_fed(ctx: RunContext) -> FedSamples:
    """Every fed sample, flattened from the Arrow columns (a Python int per fingerprint cost
    a run of 41 M fed samples gigabytes), numbered in the order of the rows and of each
    row's ids.

    The rows are read a batch at a time, as DuckDB scans them, and only their
    fingerprints (and claimed items) are kept per sample; the rows are put in logging
    order here, by their keys. The whole result as one Arrow table, DuckDB sorting it
    with its lists, and the position, attempt and cell of every sample beside it took
    gigabytes on a run of tens of millions of fed samples.
    """
    # a row whose lists do not align is left out: the event model forbids it, and a
    # damaged row cannot be judged
    sized = """WITH sized AS (
               SELECT incarnation, step, attempt, cell, writer, seq,
                      sample_indices.starts AS starts, sample_indices.lengths AS lengths,
                      fingerprints, items,
                      coalesce(list_sum(sample_indices.lengths), 0) AS n,
                      coalesce(len(items), 0) AS n_items
               FROM sample_fingerprints)"""
    kept = "WHERE coalesce(len(fingerprints), 0) = n AND n_items IN (0, n)"
    select = f"""{sized}
           SELECT incarnation, step, attempt, writer, seq, cell, starts, lengths,
                  fingerprints, items, CAST(n AS BIGINT) AS n, n_items
           FROM sized {kept}"""  # n BIGINT: a HUGEINT's Arrow cast imports pyarrow.compute
    if not ctx.session.holds("sample_fingerprints"):
        return _FedReader(0, claimed=False).done()
    batches: Iterable[pa.RecordBatch]
    if ctx.following:
        # a window's few rows, held and counted: the count's query cost a poll 2-3 ms
        batches = list(ctx.session.batches(select, label="sample fingerprints", rows=1024))
        total = sum(int(int64_numpy(b.column("n")).sum()) for b in batches)
        claims = any(int64_numpy(b.column("n_items")).any() for b in batches)
    else:
        # the totals first, so the per-sample arrays are filled in place, never regrown
        counted = ctx.session.rows(
            f"""{sized} SELECT CAST(coalesce(sum(n), 0) AS BIGINT) AS total,
                               CAST(coalesce(sum(n_items), 0) AS BIGINT) AS claims
                FROM sized {kept}""",
            label="sample fingerprint count",
        )
        total, claims = counted[0]["total"], counted[0]["claims"] > 0
        batches = ctx.session.batches(select, label="sample fingerprints", rows=1024)
    read = _FedReader(total, claimed=claims)
    if not total:
        return read.done()
    for batch in batches:
        read.add(batch)
    return read.done()


_LAST = np.iinfo(np.int64).max
"""A NULL key sorts after every value (SQL's ``NULLS LAST``)."""


class _FedReader:
    """Collects the rows of ``load_fed`` batch by batch: per-row and per-run arrays, and
    the fingerprints (and claimed items) of ``total`` samples filled in place, in the
    order read."""

    def __init__(self, total: int, *, claimed: bool) -> None:
        self.row_keys: list[np.ndarray] = []  # per batch: incarnation, step, attempt, seq
        self.writers: list[list[str | None]] = []
        self.starts: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.per_row: list[np.ndarray] = []  # runs per row
        self.cells: list[np.ndarray] = []
        self.fingerprint = np.empty(total, dtype=np.int64)
        self.claimed = np.full(total, UNKNOWN, dtype=np.int64) if claimed else None
        self.filled = 0

    def add(self, batch: pa.RecordBatch) -> None:
        columns = ("incarnation", "step", "attempt", "seq")
        self.row_keys.append(np.stack([int64_numpy(batch.column(c), null=_LAST) for c in columns]))
        self.writers.append(batch.column("writer").to_pylist())  # (to_numpy needs pandas)
        self.starts.append(list_values(batch.column("starts")))
        self.lengths.append(list_values(batch.column("lengths")))
        self.per_row.append(list_lengths(batch.column("starts")))
        self.cells.append(int64_numpy(batch.column("cell")).astype(np.int32))
        n = int64_numpy(batch.column("n"))
        at = slice(self.filled, self.filled + int(n.sum()))
        self.fingerprint[at] = list_values(batch.column("fingerprints"))
        if self.claimed is not None:
            n_items = int64_numpy(batch.column("n_items"))
            claimed = self.claimed[at]
            claimed[np.repeat(n_items > 0, n)] = list_values(batch.column("items"))
        self.filled = at.stop

    def done(self) -> FedSamples:
        claimed = (
            np.broadcast_to(np.int64(UNKNOWN), self.fingerprint.shape)
            if self.claimed is None
            else self.claimed
        )
        if not self.row_keys:
            empty = np.empty(0, dtype=np.int64)
            small = empty.astype(np.int32)
            runs = FedRuns(empty, empty, empty, small, small, empty)
            return FedSamples(self.fingerprint, claimed, (), runs)
        row_keys = np.concatenate(self.row_keys, axis=1)
        order = np.lexsort((row_keys[3], _writer_order(self.writers), *row_keys[2::-1]))
        inc, step, attempt = (np.where(k == _LAST, UNKNOWN, k) for k in row_keys[:3, order])
        changed = np.ones(inc.size, dtype=bool)
        changed[1:] = (inc[1:] != inc[:-1]) | (step[1:] != step[:-1])
        changed[1:] |= attempt[1:] != attempt[:-1]
        row_key = (np.cumsum(changed) - 1).astype(np.int32)
        firsts = (inc[changed].tolist(), step[changed].tolist(), attempt[changed].tolist())
        keys = tuple((i, s, None if a == UNKNOWN else a) for i, s, a in zip(*firsts, strict=True))
        # the runs as read, then in the rows' logging order (a row's runs keep theirs)
        lengths = np.concatenate(self.lengths)
        per_row = np.concatenate(self.per_row)
        stored = _exclusive_sum(lengths)
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        run_order = np.argsort(np.repeat(rank, per_row), kind="stable")
        lengths = lengths[run_order]
        runs = FedRuns(
            np.concatenate(self.starts)[run_order],
            lengths,
            _exclusive_sum(lengths),
            np.repeat(row_key, per_row[order]),
            np.repeat(np.concatenate(self.cells)[order], per_row[order]),
            stored[run_order],
        )
        return FedSamples(self.fingerprint, claimed, keys, runs)


def _writer_order(writers: list[list[str | None]]) -> np.ndarray:
    """Writer names as sort codes: by their UTF-8 bytes (as DuckDB orders text), NULL last."""
    names = [w for part in writers for w in part]
    # a run has tens of writers and hundreds of thousands of rows: a code per distinct
    # name, not numpy's sort of every row's string (0.12 s at 176,000 rows)
    distinct = sorted({w for w in names if w is not None})  # code point order: UTF-8's
    code: dict[str | None, int] = {w: i for i, w in enumerate(distinct)}
    code[None] = int(_LAST)
    return np.fromiter((code[w] for w in names), np.int64, len(names))


def _exclusive_sum(values: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(values)[:-1])).astype(np.int64)


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
        reads=("data_manifest",),
    )
    return [
        ManifestDeclaration(
            r["incarnation"], r["digest"], r["dataset_size"], r["algorithm"], r["path"] or ""
        )
        for r in rows
    ]


def load_loader_states(ctx: RunContext) -> list[LoaderStateRecord]:
    rows = ctx.rows(
        """SELECT incarnation, iteration, "when", position, epoch, seed, segment
           FROM loader_state ORDER BY incarnation, writer, seq""",
        label="loader states",
        needs=("loader_state",),
    )
    return [
        LoaderStateRecord(
            r["incarnation"],
            r["iteration"],
            r["when"],
            r["position"],
            r["epoch"],
            r["seed"],
            r["segment"],
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
            epochs = positions // self.dataset_size
            # one division, not two (``%`` divides again): the same for every integer
            return epochs, positions - epochs * self.dataset_size
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
