"""Online verification: a live run's steps judged as they settle, final once it finished.

A long-lived :class:`OnlineVerifier` follows one run directory (``ft-verify --follow``,
or a driver or side process calling :meth:`OnlineVerifier.poll` as steps commit). Each
poll lists the run, reads the footers of the segments sealed since the last poll (a
:class:`~ftaudit.verifier.incremental.FooterCache` keeps those its window still needs),
and judges the steps that settled since, with the incremental verification of ``ft-verify
--since-step`` (:mod:`ftaudit.verifier.incremental`): the same rules, the same messages,
only the segments those steps need.

**Settled.** A writer's steps only grow, so once a writer has sealed an event at step
``S`` every event it will log at steps ``< S`` is on disk. Step ``K`` of the newest
incarnation is settled when the driver has ended it (its ``step_end`` is sealed) and
every writer that may still log about it has sealed an event at a step ``> K``: each
trainer rank the step end names (a rank whose first flush is still pending included),
and every writer that is not one trainer rank's (the driver's, an engine's). A trainer
of a cell that crashed, or that the step leaves out, is not waited for. Older
incarnations' writers are finished: what they sealed is all there is. An incarnation
that logs no step end, or whose writers do not name their rank, waits for every writer
that has sealed anything.

**Provisional, then final.** A verdict on a settled step is provisional: a later crash
may abandon the step (the resumed incarnation re-runs it, and the poll judges the re-run
again), and only the whole log shows a truncated tail. When the newest incarnation's
driver has sealed ``run_finished``, the poll runs the offline verification of the whole
run, uncached: that report is the final verdict, identical to ``ft-verify RUN_DIR``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ftaudit.eventlog.arrays import int64_scalar, string_scalar
from ftaudit.eventlog.reader import RunScan, SegmentInfo, superseded
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.rundir import ListedBefore, SegmentListing, list_segments, relisting
from ftaudit.verifier.anchors import NO_ANCHORS, Anchors
from ftaudit.verifier.engine import check_session, select_rules, verify
from ftaudit.verifier.findings import Report, Violation
from ftaudit.verifier.incremental import FooterCache, IncrementalScope, Kept, select
from ftaudit.verifier.session import Session

_RESUMED_FROM = default_registry["run_started"].column("resumed_from")
_STEP_END_CELLS = default_registry["step_end"].column("cells")
_CELL, _RANK = "source_cell", "source_rank"
_DRIVER_PREFIX = "driver."


def violation_key(v: Violation) -> tuple[object, ...]:
    """What makes two polls' reports the same finding: the rule, what broke, and where.

    Not the message: a finding about a whole incarnation (ids it re-issued) names more
    ids as more of the incarnation is judged; it is reported once, when first seen, and
    the final report has its last word.
    """
    loc = v.location
    return (
        v.code,
        v.kind,
        loc.step,
        loc.attempt,
        loc.incarnation,
        loc.cell,
        loc.rank,
        loc.instance,
        loc.writer,
    )


@dataclass(frozen=True)
class Poll:
    """What one poll judged: the steps, the violations new to this poll, the final report."""

    judged: tuple[int, int] | None
    """The first and last step this poll judged (None: no step settled since)."""
    violations: tuple[Violation, ...]
    """Violations no earlier poll reported (provisional until :attr:`final`)."""
    final: Report | None
    """The offline verification of the whole run, once its last incarnation finished."""
    segments_read: int = 0
    """How many segments this poll loaded (0 when it judged nothing)."""
    incarnation: int | None = None
    """The incarnation whose steps :attr:`judged` names (None when it judged nothing),
    but those up to :attr:`resumed_from`."""
    resumed_from: int | None = None
    """The checkpoint iteration :attr:`incarnation` resumed from (None: a fresh start): the
    steps judged up to it are of the older incarnations it continued, which ended before
    it started (the committed history says which)."""

    @property
    def finished(self) -> bool:
        return self.final is not None


@dataclass
class _Frontier:
    """What the sealed segments say about the run's progress, updated segment by segment.

    Where the newest incarnation logs step ends, step K waits for the writers its step end
    names: each trainer rank of a cell that did not crash (a rank's rows may still be
    buffered when the driver ends the step, and a rank that has sealed nothing yet is
    still one of them), and every writer that is not one trainer rank's (the driver's,
    an engine's). A trainer whose cell died, or that a step leaves out, does not hold the
    later steps back. Without step ends, K waits for every writer that sealed anything.
    """

    incarnation: int = -1
    finished: bool = False
    tops: dict[str, int] = field(default_factory=dict)
    """Each writer of the newest incarnation: the largest step it sealed (-1: none)."""
    ranks: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    """Each writer of the newest incarnation: the trainer rank ``(cell, rank)`` it logs for
    (None: not one rank's), read from its first segment (a writer's rank never changes)."""
    ends: list[tuple[int, Path]] = field(default_factory=list)
    """The newest incarnation's segments holding step ends not read yet: (top step, path)."""
    ended: dict[int, frozenset[tuple[int, int]]] = field(default_factory=dict)
    """The steps ended (from the step the follower judges next): the ranks each names."""
    logs_ends: bool = False
    """Whether the newest incarnation has sealed a step end."""
    resumed: int | None = None
    """The checkpoint iteration the newest incarnation resumed from, once its start is
    read (None: a fresh start, or not read yet): the steps up to it are older
    incarnations', which ended when it started."""

    def add(self, info: SegmentInfo, max_step: int | None) -> None:
        """Take in one newly sealed segment."""
        meta = info.meta
        if meta.incarnation < self.incarnation:
            return  # an older incarnation's writers do not hold the newest one back
        if meta.incarnation > self.incarnation:
            self.incarnation, self.finished = meta.incarnation, False
            self.tops, self.ranks, self.ends, self.ended = {}, {}, [], {}
            self.logs_ends, self.resumed = False, None
        if meta.writer.startswith(_DRIVER_PREFIX) and "run_finished" in meta.types:
            self.finished = True
        top = -1 if max_step is None else max_step
        self.tops[meta.writer] = max(self.tops.get(meta.writer, -1), top)
        if meta.writer not in self.ranks:
            try:
                self.ranks[meta.writer] = _one_rank(info)
            except FileNotFoundError:
                pass  # a roll merged it away: the writer's next segment says
        if "step_end" in meta.types:
            self.ends.append((top, info.path))
            self.logs_ends = True

    def settled(self, start: int) -> int:
        """The last settled step of the newest incarnation, for a follower that judges
        ``start`` next (-1: none)."""
        if not self.tops:
            return -1
        if not self.logs_ends or not any(self.ranks.values()):
            # no step end, or no writer that says which rank it is: every writer
            return min(self.tops.values()) - 1
        for top, path in self.ends:
            if top >= start:  # the step ends before ``start`` are judged already
                try:
                    self.ended.update(_step_ends(path, start))
                except FileNotFoundError:
                    pass  # a roll merged it: the merged segment, listed too, holds them
        self.ends = []
        self.ended = {k: ranks for k, ranks in self.ended.items() if k >= start}
        # a writer whose rank is not known yet is waited for as any other
        others = [top for writer, top in self.tops.items() if self.ranks.get(writer) is None]
        limit = min(others, default=max(self.tops.values()))
        sealed: dict[tuple[int, int], int] = {}  # each rank: the largest step sealed
        for writer, rank in self.ranks.items():
            if rank is not None:
                sealed[rank] = max(sealed.get(rank, -1), self.tops[writer])
        # a step up to the checkpoint resumed from is settled: its incarnation ended (a
        # follower that had not judged them waited for the newest one's, forever)
        step = start if self.resumed is None else max(start, self.resumed + 1)
        while step < limit and step in self.ended:
            if any(sealed.get(rank, -1) <= step for rank in self.ended[step]):
                break
            step += 1
        return step - 1


def _one_rank(info: SegmentInfo) -> tuple[int, int] | None:
    """The one ``(source_cell, source_rank)`` every row of a segment names (None: a row
    names none, or the rows name two)."""
    if not {_CELL, _RANK} <= set(info.schema.names) or not info.num_rows:
        return None
    table = pq.ParquetFile(info.path).read(columns=[_CELL, _RANK])
    pairs = set(zip(table[_CELL].to_pylist(), table[_RANK].to_pylist(), strict=True))
    if len(pairs) != 1:
        return None
    cell, rank = pairs.pop()
    return None if cell is None or rank is None else (cell, rank)


def _step_ends(path: Path, start: int) -> dict[int, frozenset[tuple[int, int]]]:
    """The step ends of a segment from step ``start`` on: each step, and the trainer ranks
    of the cells that did not crash in it (the cells its ``cells`` map names)."""
    table = _rows_of(path, "step_end", ["step", _STEP_END_CELLS])
    # a driver's roll merges 1,280 steps' ends: those judged already, made Python objects,
    # cost that poll 0.2 s
    table = table.filter(pc.greater_equal(table["step"], int64_scalar(start)))
    out: dict[int, frozenset[tuple[int, int]]] = {}
    for step, cells in zip(
        table["step"].to_pylist(), table[_STEP_END_CELLS].to_pylist(), strict=True
    ):
        if step is None:
            continue
        out[step] = frozenset(
            (cell, rank)
            for cell, outcome in cells or ()
            if not outcome["errored"]
            for rank in range(len(outcome["ranks"] or ()))
        )
    return out


@dataclass
class OnlineVerifier:
    """Follows one run: :meth:`poll` judges the steps settled since the previous poll."""

    run_dir: Path
    select: Sequence[str] | None = None
    skip: Sequence[str] = ()
    data_manifests: Sequence[str | os.PathLike[str]] = ()
    anchors: Anchors = NO_ANCHORS
    since_step: int = 0
    """The first step to judge, as ``ft-verify --since-step``: a follower attached to a long
    run late (its first poll loads the window that step needs from the log)."""
    judged_through: int = -1
    """The last step judged so far (-1: none)."""
    violations: list[Violation] = field(default_factory=list)
    """Every violation reported so far, provisional ones included, in order of discovery."""
    final: Report | None = None
    _cache: FooterCache = field(default_factory=FooterCache)
    _listed: ListedBefore = field(default_factory=ListedBefore)
    """The segment files of the last listing (the next one reuses them)."""
    _seen: set[tuple[object, ...]] = field(default_factory=set)
    _taken: set[Path] = field(default_factory=set)
    """The listed segments the frontier has taken in."""
    _taken_from: SegmentListing | None = None
    """The last listing whose every segment the frontier took in: a listing grown from it
    adds only its new segments (:meth:`SegmentListing.added_since`)."""
    _progress: _Frontier = field(default_factory=_Frontier)
    _session: Session | None = None
    """The window of the run the last poll judged, kept loaded for the next poll."""
    _incarnation: int = -1
    _started: bool = False
    """Whether the newest incarnation's start was read (where it resumed from)."""
    _next: int = 0
    """The first step not judged yet (a resumed incarnation moves it back)."""

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self._next = max(self._next, self.since_step)
        select_rules(self.select, self.skip)  # a bad rule name fails before the run exists

    def poll(self) -> Poll:
        """Judge what settled since the last poll; raises ``UnusableInputError`` as
        ``ft-verify`` does (a corrupt segment, a foreign file).

        A segment that a writer's roll removed between this poll's listing and its reading
        makes the poll list the run again (:func:`~ftaudit.eventlog.rundir.relisting`):
        the merged segment holding it is read instead.
        """
        if self.final is not None:
            return Poll(None, (), self.final)
        return relisting(self._poll)

    def _poll(self) -> Poll:
        listing = list_segments(self.run_dir, allow_empty=True, before=self._listed)
        self._cache.keep(listing)
        if not listing.writers:
            return Poll(None, (), None)
        self._take_in(listing)
        frontier = self._progress
        if frontier.finished:
            self.close()
            self.final = verify(
                self.run_dir,
                select=self.select,
                skip=self.skip,
                data_manifests=self.data_manifests,
                anchors=self.anchors,
            )
            fresh = self._fresh(v for r in self.final.results for v in r.violations)
            return Poll(None, fresh, self.final)
        if frontier.incarnation != self._incarnation:
            self._incarnation, self._started = frontier.incarnation, False
        if not self._started:  # until its start is sealed: its trainers' may come first
            self._started, resumed = _start_of(listing, self._cache, frontier.incarnation)
            if resumed is not None:
                # a resumed incarnation re-runs the steps after its checkpoint: judge them
                # again; the ones up to it, not judged yet, are settled
                self._next = max(self.since_step, min(self._next, resumed + 1))
                frontier.resumed = resumed
        start = self._next
        settled = frontier.settled(start)
        if settled < start:
            return Poll(None, (), None)
        report, loaded = self._judge(listing, start)
        wanted = (v for r in report.results for v in r.violations if _settled(v, settled))
        fresh = self._fresh(wanted)
        self._next = settled + 1
        self.judged_through = max(self.judged_through, settled)
        return Poll((start, settled), fresh, None, loaded, frontier.incarnation, frontier.resumed)

    def _take_in(self, listing: SegmentListing) -> None:
        """Add the listed segments the frontier has not taken in yet to it."""
        taken = self._taken
        before = self._taken_from
        added = listing.added_since(before) if before is not None else None
        for listed in listing.files if added is None else added:
            if listed.path not in taken:
                info = self._cache.info(listed)  # may raise: vanished, the poll lists again
                self._progress.add(info, self._cache.max_step(info.path))
                taken.add(listed.path)  # only once taken in, or a re-listed poll skips it
        if added is None:  # some went (a roll's originals): forget them
            taken.intersection_update(f.path for f in listing.files)
        self._taken_from = listing

    @property
    def segments_seen(self) -> int:
        """How many segments the follower keeps something of: at most those the last poll
        listed (the originals a roll removed are forgotten)."""
        return len(self._cache.paths)

    def passed(self, *, strict: bool = False) -> bool:
        """The final verdict once finished; until then, whether no violation was found."""
        if self.final is not None:
            return self.final.passed(strict=strict)
        bad = ("error", "warning") if strict else ("error",)
        return not any(v.severity.value in bad for v in self.violations)

    def _judge(self, listing: SegmentListing, start: int) -> tuple[Report, int]:
        """The incremental verification of steps ``>= start`` (the whole log at 0).

        A live writer's temp file is a flush in progress, not a torn one: the listing
        judged here leaves them out (the final verification sees what is left of them).
        Anchors (``--require-finished``, a seal) hold the finished run, not a live one.
        """
        rules = select_rules(self.select, self.skip)
        live = SegmentListing(listing.run_dir, listing.writers, ())
        window: IncrementalScope | None = None
        kept: Mapping[str, Kept] = {}
        if start <= 0:  # nothing judged yet: every segment is needed
            infos = tuple(self._cache.info(f) for f in live.files)
            skip = superseded(infos)  # a compaction cut short: read its events once
            scan = RunScan(live.run_dir, tuple(i for i in infos if i.path not in skip), ())
        else:
            scan, window = select(self.run_dir, start, listing=live, cache=self._cache)
            kept = window.kept
        session, read = self._window(scan, kept)
        self._cache.drop_footers()  # the new segments are decoded: a footer is 100 KB
        self._cache.read_whole = True  # from now on a poll lists its new segments only
        report = check_session(
            session, rules, window, None, self.data_manifests, NO_ANCHORS, self._cache
        )
        self._cache.release()  # the footers of segments before the window
        return report, read

    def _window(self, scan: RunScan, kept: Mapping[str, Kept]) -> tuple[Session, int]:
        """The session holding ``scan``'s rows, and how many segments this poll read.

        The session of the previous poll is moved along (the segments that left the
        window dropped, only the new ones read, the columns they bring added); a new one
        is opened on the first poll, and where :meth:`Session.move` cannot move it.
        """
        old = self._session
        if old is not None:
            loaded = {i.path for i in old.scan.segments}
            read = sum(1 for i in scan.segments if i.path not in loaded)
            try:
                footers = self._cache.footers  # read when the segments were listed
                if old.move(scan, kept=kept, footers=footers):
                    return old, read
            except BaseException:
                self.close()  # half moved: the next poll opens a new session
                raise
            self.close()
        self._session = Session.open(self.run_dir, scan=scan, kept=kept)
        return self._session, len(scan.segments)

    def close(self) -> None:
        """Free the loaded window (a later poll loads it again)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _fresh(self, found: Iterable[Violation]) -> tuple[Violation, ...]:
        """The violations no earlier poll reported (one poll may report a key twice)."""
        out = tuple(v for v in found if violation_key(v) not in self._seen)
        self._seen.update(violation_key(v) for v in out)
        self.violations.extend(out)
        return out


def _settled(v: Violation, settled: int) -> bool:
    """Whether ``v``'s evidence is all of settled steps (up to ``settled``)."""
    step = v.shown_at if v.shown_at is not None else v.location.step
    return step is None or step <= settled


def _start_of(
    listing: SegmentListing, cache: FooterCache, incarnation: int
) -> tuple[bool, int | None]:
    """Whether the incarnation's start is sealed, and the checkpoint iteration it resumed
    from (None: a fresh start, or its start not sealed yet)."""
    started = False
    for writer, files in listing.writers.items():
        if not writer.startswith(_DRIVER_PREFIX):
            continue
        for listed in files:
            info = cache.info(listed)
            if info.meta.incarnation != incarnation:
                break  # a writer is one process of one incarnation: an older one's
            if "run_started" not in info.meta.types:
                continue
            started = True
            if _RESUMED_FROM not in info.schema.names:
                continue
            table = _rows_of(info.path, "run_started", [_RESUMED_FROM])
            for ref in table[_RESUMED_FROM].to_pylist():
                if ref is not None:
                    return True, int(ref["iteration"])
    return started, None


def _rows_of(path: Path, event_type: str, columns: list[str]) -> pa.Table:
    """The ``columns`` of a segment's ``event_type`` rows."""
    table = pq.ParquetFile(path).read(columns=["type", *columns])
    return table.filter(pc.equal(table["type"], string_scalar(event_type)))
