"""What the rules share about one run: its history and allocations, loaded once.

Rules ask the :class:`RunContext` instead of querying the same tables again; each
property runs one query through the session on first use.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ftaudit.errors import UnusableInputError
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.reader import digest_problem
from ftaudit.eventlog.vocabulary import RankOutcome
from ftaudit.verifier.anchors import NO_ANCHORS, Anchors
from ftaudit.verifier.checksum_digests import ChecksumDigests, ChecksumPoint
from ftaudit.verifier.segment_state import SegmentFed
from ftaudit.verifier.session import Session
from ftaudit.verifier.views import KEPT_FROM

if TYPE_CHECKING:
    from ftaudit.dataset.manifest import DatasetManifest
    from ftaudit.eventlog.reader import RunScan, SegmentInfo
    from ftaudit.verifier.incremental import FooterCache, IncrementalScope

Fed = TypeVar("Fed", bound=SegmentFed)
Carried = TypeVar("Carried")

StepKey = tuple[int, int, int]
"""(incarnation, step, attempt): one attempt of a step in one incarnation."""


@dataclass(frozen=True)
class CellResult:
    """One cell's outcome in an attempt, as the driver logged it."""

    errored: bool
    ranks: tuple[RankOutcome, ...]

    @cached_property
    def all_normal(self) -> bool:
        """Every rank finished normally (kept: a run's cells share a few parsed values,
        :func:`_cell_result`, and the rules ask this of each committed cell)."""
        return (
            not self.errored
            and bool(self.ranks)
            and all(r is RankOutcome.NORMAL for r in self.ranks)
        )

    @cached_property
    def discarded(self) -> bool:
        return not self.errored and RankOutcome.DISCARDED_SHOULD_RETRY in self.ranks


def parse_cells(value: Any) -> dict[int, CellResult]:
    """A ``cells`` map column (a list of key/value pairs from Arrow) as a dict."""
    items = value.items() if isinstance(value, dict) else (value or [])
    return {
        int(k): _cell_result(bool(v.get("errored")), tuple(v.get("ranks") or ())) for k, v in items
    }


@lru_cache(maxsize=4096)
def _cell_result(errored: bool, ranks: tuple[str, ...]) -> CellResult:
    """One logged cell outcome, parsed once per distinct value: a run's cells log few
    (160,000 cell outcomes at 10,000 steps x 16 cells, nearly all ``normal``)."""
    return CellResult(errored, tuple(_outcome(r) for r in ranks))


_OUTCOMES: dict[str, RankOutcome] = {o.value: o for o in RankOutcome}
"""Each outcome by its logged value: a dict look-up, where calling the enum costs 5 µs
(a tenth of the committed history's load at 10,000 steps x 16 cells)."""


def _outcome(value: str) -> RankOutcome:
    found = _OUTCOMES.get(value)
    if found is None:
        raise UnusableInputError(f"unknown rank outcome {value!r} in a driver's cells")
    return found


@dataclass(frozen=True)
class CommittedStep:
    step: int
    attempt: int
    incarnation: int
    cells: dict[int, CellResult]

    @property
    def key(self) -> StepKey:
        return (self.incarnation, self.step, self.attempt)

    def normal_cells(self) -> list[int]:
        return sorted(c for c, r in self.cells.items() if r.all_normal)


CHECKSUM_POINTS = """
    SELECT "when", count(*) AS n, bool_or(step IS NULL OR step >= $1) AS judged,
           bool_or(coalesce(checkpoint.iteration, step) >= $1) AS saved
    FROM trainer_weight_checksum GROUP BY "when"
"""
"""Per checksum point: the rows, whether one is at no step or at a step under judgement,
and whether one names (or, saved, is at) a checkpoint iteration under judgement. A
follower asks its :class:`~ftaudit.verifier.checksum_digests.ChecksumDigests` instead,
where a checksum that came late (in a segment new to the poll,
:meth:`RunContext.judges`) counts as saved too."""


COMMITTED_CELLS = """
    SELECT step, attempt, incarnation, segment, seq, cells_key,
           CASE WHEN row_number() OVER (PARTITION BY cells_key) = 1 THEN cells END AS cells
    FROM (SELECT *, CAST(to_json(cells) AS VARCHAR) AS cells_key FROM committed_steps)
    ORDER BY step, incarnation, seq"""
"""The committed steps in step order, each with its cells' JSON (equal JSON, equal cells)
and, on one row per distinct JSON only, the cells themselves: a run's steps log few
distinct outcomes, and DuckDB's Python values of 160,000 nested cell outcomes (10,000
steps x 16 cells) cost 0.7 s of CPU, against 0.1 s for the query."""


@dataclass(frozen=True)
class Incarnation:
    incarnation: int
    resumed_iteration: int | None
    resumed_incarnation: int | None
    buffer_size: int | None
    dataset_size: int | None
    deterministic_order: bool | None
    starts: int


@dataclass(frozen=True)
class Allocation:
    """One logged allocation: counter positions ``[start, counter_after)``."""

    index: int
    incarnation: int
    step: int
    attempt: int
    num_ids: int
    counter_after: int
    witness_ids: IntRuns
    sample_indices: IntRuns
    stale_ids: IntRuns
    seq: int
    writer: str
    segment: str

    @property
    def start(self) -> int:
        return self.counter_after - self.num_ids

    @property
    def key(self) -> StepKey:
        return (self.incarnation, self.step, self.attempt)

    def samples_at(self, positions: np.ndarray) -> np.ndarray:
        """The sample index trained by each counter position (all inside this allocation)."""
        return runs_at(self.sample_indices, positions - self.start)


ALLOCATED_COLUMNS = (
    "incarnation",
    "step",
    "attempt",
    "num_ids",
    "counter_after",
    "witness_ids",
    "sample_indices",
    "stale_ids",
    "seq",
    "writer",
)
"""The columns of each logged allocation row (``witness_allocated``)."""


_RunsKey = tuple[tuple[int, ...] | None, tuple[int, ...] | None] | None


def _runs_key(value: Any) -> _RunsKey:
    """An id-set column's value, hashable (a null, and null parts, kept apart)."""
    if value is None:
        return None
    starts, lengths = value["starts"], value["lengths"]
    return (
        None if starts is None else tuple(starts),
        None if lengths is None else tuple(lengths),
    )


@dataclass(frozen=True)
class _Allocated:
    """One logged allocation row, its id sets parsed."""

    content: tuple[Any, ...]
    """What makes two rows the same allocation logged twice: every logged field."""
    seq: int
    writer: str
    segment: str
    runs: tuple[IntRuns, IntRuns, IntRuns]


class AllocationLog(SegmentFed):
    """The logged allocations (see :class:`~ftaudit.verifier.segment_state.SegmentFed`)."""

    event_type = "witness_allocated"

    def __init__(self) -> None:
        super().__init__()
        self._by_segment: dict[str, list[_Allocated]] = {}

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        rows = self.fed_rows(ctx, ALLOCATED_COLUMNS, segments, label="allocations")
        for r in rows:
            ids = (r["witness_ids"], r["sample_indices"], r["stale_ids"])
            content = (
                r["incarnation"],
                r["step"],
                r["attempt"],
                r["num_ids"],
                r["counter_after"],
                *(_runs_key(v) for v in ids),
            )
            runs = tuple(IntRuns.from_column(v) for v in ids)
            logged = _Allocated(content, r["seq"], r["writer"], r["segment"], runs)  # type: ignore[arg-type]
            self._by_segment.setdefault(r["segment"], []).append(logged)

    def drop(self, segment: str) -> None:
        self._by_segment.pop(segment, None)

    def trim(self, segment: str, seq: int) -> bool:
        rows = self._by_segment.get(segment)
        if rows is not None:  # a driver's allocations: one or two a step
            self._by_segment[segment] = [a for a in rows if a.seq >= seq]
        return True

    def allocations(self) -> list[Allocation]:
        """The allocations, each logged one once (its first sequence number, writer and
        segment), by incarnation, then writer and sequence number."""
        merged: dict[tuple[Any, ...], list[Any]] = {}
        for rows in self._by_segment.values():
            for a in rows:
                found = merged.get(a.content)
                if found is None:
                    merged[a.content] = [a.seq, a.writer, a.segment, a.runs]
                else:
                    found[0] = min(found[0], a.seq)
                    found[1] = min(found[1], a.writer)
                    found[2] = min(found[2], a.segment)
        order = sorted(
            merged.items(), key=lambda kv: (_last(kv[0][0]), _last(kv[1][1]), _last(kv[1][0]))
        )
        return [
            Allocation(
                index=i,
                incarnation=content[0],
                step=content[1],
                attempt=content[2],
                num_ids=content[3],
                counter_after=content[4],
                witness_ids=runs[0],
                sample_indices=runs[1],
                stale_ids=runs[2],
                seq=seq,
                writer=writer,
                segment=segment,
            )
            for i, (content, (seq, writer, segment, runs)) in enumerate(order)
        ]


def _last(value: Any) -> tuple[bool, Any]:
    """A sort key placing None last, as DuckDB orders NULLs."""
    return (value is None, value)


def runs_at(runs: IntRuns, offsets: np.ndarray) -> np.ndarray:
    """The values at ``offsets`` of the sequence ``runs`` stands for, without expanding it."""
    if not runs.starts:
        return np.empty(0, dtype=np.int64)
    lengths = np.asarray(runs.lengths, dtype=np.int64)
    firsts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    run = np.searchsorted(firsts, offsets, side="right") - 1
    return np.asarray(runs.starts, dtype=np.int64)[run] + (offsets - firsts[run])


class RunContext:
    """The run as the rules see it: history, incarnations, allocations.

    With an :class:`~ftaudit.verifier.incremental.IncrementalScope` (``ft-verify
    --since-step K``) only the segments a check of steps ``>= K`` needs were loaded; rules
    then judge only those steps and do not mistake the unloaded past for missing events.
    """

    def __init__(
        self,
        session: Session,
        scope: IncrementalScope | None = None,
        data_manifests: Sequence[str | os.PathLike[str]] = (),
        anchors: Anchors = NO_ANCHORS,
        footers: FooterCache | None = None,
    ) -> None:
        self.session = session
        self.scope = scope
        self.footers = footers
        """What a follower of a live run already read of its sealed segments (None: all
        is read afresh, as a full verification does)."""
        self.data_manifests = tuple(data_manifests)
        """Dataset manifest files kept outside the run (``ft-verify --data-manifest``)."""
        self.anchors = anchors
        """What the run is held to beyond its own log (``--require-finished``)."""

    @property
    def following(self) -> bool:
        """Whether this is a poll of a follower of a live run (its rule states are kept)."""
        return self.footers is not None

    def kept(self, make: type[Fed]) -> Fed:
        """The rule state ``make`` synced with the loaded rows: built afresh, or, for a
        follower of a live run, the one kept since its last poll, fed only the new segments."""
        kept = self.footers.states if self.footers is not None else {}
        state = kept.get(make)
        if state is None:
            state = kept[make] = make()
        state.sync(self)
        return state

    def carried(self, make: type[Carried]) -> Carried:
        """What a rule carries from one of a follower's polls to the next (a fresh one in a
        full verification): a root cause found at an earlier poll, whose evidence a later
        window no longer holds, still explains the consequences that window shows."""
        kept = self.footers.states if self.footers is not None else {}
        state = kept.get(make)
        if state is None:
            state = kept[make] = make()
        return state

    def dataset_manifest(self, digest: str | None) -> DatasetManifest | None:
        """The dataset manifest of ``digest``, in the run or among :attr:`data_manifests`
        (None where neither holds it); with no ``digest``, the first of
        :attr:`data_manifests`. Raises ``ManifestError`` naming a damaged file.

        A follower reads each once: a manifest is named by its content's digest, and a file
        whose content does not hash to it is never taken for it (the final verification
        reads the files again)."""
        from ftaudit.dataset.manifest import find_manifest, read_manifest

        key = ("digest", digest) if digest is not None else ("file", str(self.data_manifests[0]))
        memo = self.footers.manifests if self.footers is not None else {}
        if key not in memo:
            if digest is None:
                memo[key] = read_manifest(self.data_manifests[0])
            else:
                memo[key] = find_manifest(self.session.run_dir, digest, self.data_manifests)
        return memo[key]

    @property
    def since(self) -> int:
        """The first step under judgement (0 for a full verification)."""
        return self.scope.since if self.scope is not None else 0

    def judges(self, step: int, segment: str | None) -> bool:
        """Whether evidence about ``step`` held in ``segment`` is under judgement: a step
        from :attr:`since` on, or, for a follower, evidence sealed after its step was
        judged (``segment`` is new to this poll: an asynchronous checkpoint save lands
        after its step; a step is judged only once its ranks sealed past it, so a new
        segment holds an earlier step's rows only where they came late)."""
        if step >= self.since:
            return True
        return self.following and segment is not None and segment in self.session.added_segments

    def writer_complete(self, writer: str) -> bool:
        """Whether every event of ``writer`` was loaded (always, in a full verification)."""
        return self.scope is None or self.scope.complete(writer)

    def incarnation_complete(self, incarnation: int) -> bool:
        """Whether every event of the incarnation's driver was loaded."""
        if self.scope is None:
            return True
        drivers = self._drivers(incarnation)
        return bool(drivers) and all(self.scope.complete(w) for w in drivers)

    def drivers_complete(self) -> bool:
        """Whether every event of every driver was loaded (every allocation)."""
        return self.scope is None or all(self.scope.complete(w) for w in self._drivers())

    def _drivers(self, incarnation: int | None = None) -> set[str]:
        """The loaded driver writers (of ``incarnation``; None: of every one)."""
        return {
            s.meta.writer
            for s in self.scan.segments
            if s.meta.writer.startswith("driver.")
            and (incarnation is None or s.meta.incarnation == incarnation)
        }

    def new_incarnation(self, incarnation: int) -> bool:
        """Whether the incarnation began at a step under judgement."""
        inc = self.incarnations.get(incarnation)
        if inc is None:
            return True
        first = 0 if inc.resumed_iteration is None else inc.resumed_iteration + 1
        return first >= self.since

    def rerun_after(self, incarnation: int, step: int) -> bool:
        """Whether an incarnation after ``incarnation`` resumed from a checkpoint before
        ``step``: it ran the step again, so ``incarnation``'s run of it is no longer in the
        committed history (what a follower carried about it no longer holds)."""
        return any(
            later.incarnation > incarnation
            and later.resumed_iteration is not None
            and later.resumed_iteration < step
            for later in self.incarnations.values()
        )

    @property
    def scan(self) -> RunScan:
        return self.session.scan

    def digest_problem(self, info: SegmentInfo) -> str | None:
        """Why the segment's bytes do not match its digest (None: they do); a follower's
        sealed segments are hashed once, not at every poll."""
        if self.footers is not None:
            return self.footers.digest_problem(info)
        return digest_problem(info)

    def rows(
        self,
        sql: str,
        params: list[Any] | tuple[Any, ...] = (),
        *,
        label: str = "",
        needs: Collection[str] = (),
        reads: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The rows of ``sql`` (see :meth:`Session.rows` for ``needs`` and ``reads``)."""
        return self.session.rows(sql, params, label=label, needs=needs, reads=reads)

    def count(self, sql: str, *, label: str) -> int:
        """A rule's ``checked`` count: the ``n`` of ``sql``'s one row. A follower's poll
        keeps only the violations of its report (:mod:`ftaudit.verifier.online`), so it
        does not ask (0): FT009's and FT011's counts were a query each at every poll."""
        if self.following:
            return 0
        return int(self.rows(sql, label=label)[0]["n"])

    @cached_property
    def incarnations(self) -> dict[int, Incarnation]:
        rows = self.rows(
            """SELECT incarnation, resumed_iteration AS ri, resumed_incarnation AS rinc,
                      buffer_size AS b, dataset_size AS n, deterministic_order AS det, starts
               FROM incarnations ORDER BY incarnation""",
            label="incarnations",
            reads=KEPT_FROM["incarnations"],
        )
        return {
            r["incarnation"]: Incarnation(
                r["incarnation"],
                r["ri"],
                r["rinc"],
                r["b"],
                r["n"],
                r["det"],
                r["starts"],
            )
            for r in rows
        }

    @cached_property
    def final(self) -> Incarnation | None:
        return self.incarnations[max(self.incarnations)] if self.incarnations else None

    @cached_property
    def buffer_size(self) -> int | None:
        """The ring size: the final incarnation's (FT003 checks that all agree)."""
        sizes = [i.buffer_size for i in self.incarnations.values() if i.buffer_size]
        return sizes[-1] if sizes else None

    @cached_property
    def dataset_size(self) -> int | None:
        sizes = [i.dataset_size for i in self.incarnations.values() if i.dataset_size]
        return sizes[-1] if sizes else None

    @cached_property
    def deterministic_order(self) -> bool | None:
        """What the incarnations declared; the latest declaration wins."""
        declared = [
            i.deterministic_order
            for i in self.incarnations.values()
            if i.deterministic_order is not None
        ]
        return declared[-1] if declared else None

    @cached_property
    def checksum_points(self) -> dict[str, ChecksumPoint]:
        """Per checksum point (``when``) of the loaded ``trainer_weight_checksum`` rows,
        how many there are and whether one is under judgement: a rule skips a comparison
        none of whose findings would be reported (a query costs a follower's poll
        milliseconds however few rows it finds)."""
        if self.following:  # from the checksums kept since the last poll: no query
            return self.kept(ChecksumDigests).points_of(self.since, self.session.added_segments)
        needs = ["trainer_weight_checksum"]
        rows = self.rows(CHECKSUM_POINTS, [self.since], label="checksum points", needs=needs)
        return {r["when"]: ChecksumPoint(r["n"], bool(r["judged"]), bool(r["saved"])) for r in rows}

    def checksums_judged(self, when: str) -> bool:
        """Whether a ``when`` checksum is at a step under judgement (or at none)."""
        point = self.checksum_points.get(when)
        return point is not None and point.judged

    @cached_property
    def committed(self) -> list[CommittedStep]:
        """The committed steps in step order; a follower parses each step's cells once
        (:attr:`FooterCache.parsed <ftaudit.verifier.incremental.FooterCache.parsed>`), and
        asks DuckDB for those of the segments sealed since its last poll only."""
        parsed = self.footers.parsed if self.footers is not None else None
        if not parsed:  # nothing parsed before: the cells come with the steps
            rows = self.rows(COMMITTED_CELLS, label="committed steps")
            logged = {r["cells_key"]: r["cells"] for r in rows if r["cells"] is not None}
            distinct: dict[str | None, dict[int, CellResult]] = {}
            for r in rows:  # parsed in step order: the first bad value is the one named
                key = r["cells_key"]
                if key not in distinct:
                    distinct[key] = parse_cells(logged.get(key))
                r["cells"] = distinct[key]
                if parsed is not None:
                    parsed.setdefault(r["segment"], {})[r["seq"]] = r["cells"]
        else:
            rows = self.rows(
                "SELECT step, attempt, incarnation, segment, seq FROM committed_steps "
                "ORDER BY step, incarnation, seq",
                label="committed steps",
            )
            new = sorted(
                {r["segment"] for r in rows if r["seq"] not in parsed.get(r["segment"], {})}
            )
            cells = self.session.added_rows("step_end", ("seq", "cells"), new) if new else []
            if cells is None:  # not all of them added by the last move: asked of DuckDB
                cells = self.rows(
                    "SELECT segment, seq, cells FROM step_end WHERE list_contains($1, segment)",
                    [new],
                    label="committed steps: new cells",
                )
            for r in cells:
                parsed.setdefault(r["segment"], {})[r["seq"]] = parse_cells(r["cells"])
            for r in rows:
                r["cells"] = parsed[r["segment"]][r["seq"]]
        return [CommittedStep(r["step"], r["attempt"], r["incarnation"], r["cells"]) for r in rows]

    @cached_property
    def committed_keys(self) -> set[StepKey]:
        return {s.key for s in self.committed}

    @cached_property
    def allocations(self) -> list[Allocation]:
        """Every logged allocation, duplicates (the same allocation logged twice) merged,
        in the order the allocator made them: by incarnation, then sequence number
        (:class:`AllocationLog`: a follower parses each allocation once)."""
        return self.kept(AllocationLog).allocations()

    def describe_key(self, key: StepKey, default: str = "unknown") -> str:
        """``step 5 attempt 1 of incarnation 0 (retried)``: where a key sits in the history
        (``default``: the status of one the loaded history does not hold)."""
        inc, step, attempt = key
        status = self.status_of(key, default)
        return f"step {step} attempt {attempt} of incarnation {inc} ({status})"

    @cached_property
    def _statuses(self) -> dict[StepKey, str]:
        rows = self.rows(
            "SELECT incarnation, step, attempt, status FROM timeline", label="timeline"
        )
        return {(r["incarnation"], r["step"], r["attempt"]): r["status"] for r in rows}

    def status_of(self, key: StepKey, default: str = "unknown") -> str:
        return self._statuses.get(key, default)

    def describe_samples(
        self, samples: np.ndarray, limit: int = 12, *, total: int | None = None
    ) -> str:
        """Sample indices in words, as runs; with a dataset size, the epoch and items of each.

        ``total`` is how many samples there are when ``samples`` is a cut list, so "N more"
        counts every sample not shown, not only those of the cut list.
        """
        values = [int(s) for s in np.asarray(samples).reshape(-1)]
        runs: list[list[int]] = []
        n = self.dataset_size
        for s in values:
            last = runs[-1] if runs else None
            if last and s == last[1] + 1 and (not n or s // n == last[0] // n):
                last[1] = s
            else:
                runs.append([s, s])
        shown_runs = runs[:limit]
        parts = [self._run_text(a, b) for a, b in shown_runs]
        shown = sum(b - a + 1 for a, b in shown_runs)
        rest = (total if total is not None else len(values)) - shown
        more = f", ... {rest} more" if rest > 0 else ""
        return f"[{', '.join(parts)}{more}]"

    def _run_text(self, first: int, last: int) -> str:
        text = str(first) if first == last else f"{first}..{last}"
        n = self.dataset_size
        if not n:
            return text
        items = str(first % n) if first == last else f"{first % n}..{last % n}"
        word = "item" if first == last else "items"
        return f"{text} (epoch {first // n} {word} {items})"
