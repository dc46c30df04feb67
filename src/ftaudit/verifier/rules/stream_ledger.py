"""The committed stream a follower's windows left behind: FT005's duplicates across the
window's edge, and FT008's check of a saved loader.

An incremental window holds the allocations from ``T`` on only. Two checks need the
committed steps before it:

- FT005: a sample trained again long after its first training (a loader whose cursor
  jumped back, a shard read twice) duplicates a sample of a step the window no longer
  holds;
- FT008: a loader state saved with checkpoint ``c`` must read next from one past the
  largest position a committed step up to ``c`` consumed.

A follower of a live run has seen every allocation while it was in its window: its
:class:`StreamLedger` keeps the committed steps' sample spans (:class:`TrainedSpans`),
those of the window as the last poll saw them, and folds the steps the window has left.
A resume re-runs steps from its checkpoint on, and its window holds them again: the
ledger drops them from the fold. A follower attached after step 0 reads the fold from the
drivers' log once (:func:`_fold_from_log`). A ``ft-verify --since-step`` has no ledger:
it checks a saved loader only where its window holds every driver whole, and a duplicate
within its window only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ftaudit.verifier.context import Allocation, RunContext
from ftaudit.verifier.spans import Spans

StreamHigh = Callable[[int, int], int | None]
"""``high(incarnation, c)``: the largest position the committed steps up to ``c`` consumed,
where the checkpoint ``incarnation`` saved at ``c`` has all of them in the committed
history (None: it has not, or this verification cannot tell)."""

_CHUNKS = 32
"""Folded chunks kept apart before they are joined (a fold per poll, a join per 32)."""


@dataclass(frozen=True)
class TrainedSpans:
    """Committed allocations' sample spans, one row per run of consecutive samples."""

    start: np.ndarray
    end: np.ndarray
    step: np.ndarray
    attempt: np.ndarray
    incarnation: np.ndarray

    @staticmethod
    def of(allocations: Sequence[Allocation]) -> TrainedSpans:
        """The spans of ``allocations``, in their order."""
        runs = [a.sample_indices for a in allocations]
        counts = [len(r.starts) for r in runs]
        start = np.fromiter((s for r in runs for s in r.starts), np.int64, sum(counts))
        length = np.fromiter((n for r in runs for n in r.lengths), np.int64, sum(counts))

        def each(values: list[int]) -> np.ndarray:
            return np.repeat(np.asarray(values, dtype=np.int64), counts)

        return TrainedSpans(
            start,
            start + length,
            each([a.step for a in allocations]),
            each([a.attempt for a in allocations]),
            each([a.incarnation for a in allocations]),
        )

    @staticmethod
    def joined(parts: Sequence[TrainedSpans]) -> TrainedSpans:
        if len(parts) == 1:
            return parts[0]
        return TrainedSpans(
            *(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(TrainedSpans))
        )

    def take(self, rows: np.ndarray) -> TrainedSpans:
        """The rows ``rows`` (indices or a mask)."""
        return TrainedSpans(*(getattr(self, f.name)[rows] for f in fields(self)))

    def __len__(self) -> int:
        return int(self.start.size)

    def covered(self) -> Spans:
        """The samples these rows trained."""
        return Spans.of(self.start, self.end)

    def overlapping(self, spans: Spans) -> TrainedSpans:
        """The rows that trained a sample of ``spans``."""
        hit = np.zeros(len(self), dtype=bool)
        for lo, hi in zip(spans.starts.tolist(), spans.ends.tolist(), strict=True):
            hit |= (self.start < hi) & (self.end > lo)
        return self.take(hit)


NO_SPANS = TrainedSpans(*(np.empty(0, dtype=np.int64) for _ in fields(TrainedSpans)))


def committed_spans(ctx: RunContext) -> TrainedSpans:
    """The loaded committed allocations' spans, in logging order."""
    keys = ctx.committed_keys
    return TrainedSpans.of([a for a in ctx.allocations if a.key in keys and a.num_ids])


def stream_ledger(ctx: RunContext) -> StreamLedger | None:
    """A follower's ledger, synced with this poll's window (None: not a follower)."""
    if not ctx.following:
        return None
    ledger = ctx.carried(StreamLedger)
    lookback = ctx.scope.lookback if ctx.scope is not None else 0
    if ledger.behind(lookback):
        ledger.refold(lookback, _fold_from_log(ctx, lookback))
    ledger.take(lookback, committed_spans(ctx))
    return ledger


def committed_high(ctx: RunContext) -> StreamHigh | None:
    """How far the committed stream had read, for this verification: from the loaded
    allocations where they are all of them, from the follower's ledger where it has one
    (None: neither; the saved loaders are checked by a full verification)."""
    ledger = stream_ledger(ctx)
    if ctx.drivers_complete():
        return _high_of(committed_spans(ctx))
    return ledger.high if ledger is not None else None


def _fold_from_log(ctx: RunContext, upto: int) -> TrainedSpans:
    """The spans of the committed steps before ``upto``, from every driver segment the
    follower listed (its whole committed history; the trainers' rows are not read)."""
    from ftaudit.eventlog.reader import RunScan, superseded
    from ftaudit.verifier.session import Session

    footers = ctx.footers
    assert footers is not None and footers.listing is not None
    infos = tuple(
        footers.info(f)
        for writer, files in footers.listing.writers.items()
        if writer.startswith("driver.")
        for f in files
    )
    skip = superseded(infos)
    ordered = sorted(
        (i for i in infos if i.path not in skip), key=lambda i: (i.meta.writer, i.meta.first_seq)
    )
    session = Session.open(
        ctx.session.run_dir, scan=RunScan(ctx.session.run_dir, tuple(ordered), ())
    )
    try:
        spans = committed_spans(RunContext(session))
    finally:
        session.close()
    return spans.take(spans.step < upto)


def _reach(spans: TrainedSpans, incarnation: int, iteration: int) -> int | None:
    """The largest position the rows of steps up to ``iteration`` trained (-1: none);
    None where a row of ``iteration`` is another incarnation's (that checkpoint's steps
    are not all in the committed history)."""
    if np.any(spans.incarnation[spans.step == iteration] != incarnation):
        return None
    upto = spans.step <= iteration
    return int(spans.end[upto].max()) - 1 if upto.any() else -1


def _high_of(spans: TrainedSpans) -> StreamHigh:
    def high(incarnation: int, iteration: int) -> int | None:
        reach = _reach(spans, incarnation, iteration)
        return None if reach is None or reach < 0 else reach

    return high


@dataclass
class StreamLedger:
    """A follower's committed stream: the window's spans as its last poll saw them, and
    the fold of the steps before :attr:`folded_upto`."""

    window: TrainedSpans = NO_SPANS
    """The committed spans of the steps from :attr:`folded_upto` on."""
    folded: list[TrainedSpans] = field(default_factory=list)
    """The committed spans of the steps before :attr:`folded_upto`, in chunks."""
    covered: Spans = field(default_factory=Spans.empty)
    """The samples :attr:`folded` trained (a lookup that misses it reads no chunk)."""
    folded_upto: int = 0
    started: bool = False

    def behind(self, lookback: int) -> bool:
        """Whether a window from ``lookback`` needs steps the ledger never held (a
        follower attached late)."""
        return not self.started and lookback > 0

    def refold(self, lookback: int, before: TrainedSpans) -> None:
        """Start again from ``before``, the committed spans of the steps before
        ``lookback`` read from the log (:func:`_fold_from_log`)."""
        self.window, self.folded, self.covered = NO_SPANS, [before], before.covered()
        self.folded_upto, self.started = lookback, True

    def take(self, lookback: int, committed: TrainedSpans) -> None:
        """Take in a poll's window: its committed spans, every one of steps ``>= lookback``
        (the window is the truth there: a resume may have rolled back steps the ledger
        held)."""
        self.started = True
        if lookback < self.folded_upto:  # a resume moved the window back into the fold
            rows = self.all_folded()
            kept = rows.take(rows.step < lookback)
            self.folded, self.covered = [kept], kept.covered()
        else:
            left = self.window.take(self.window.step < lookback)
            if len(left):
                self.folded.append(left)
                self.covered = self.covered | left.covered()
            if len(self.folded) > _CHUNKS:
                self.all_folded()
        self.window = committed.take(committed.step >= lookback)
        self.folded_upto = lookback

    def all_folded(self) -> TrainedSpans:
        """The folded rows, in one chunk from now on."""
        if len(self.folded) > 1:
            self.folded = [TrainedSpans.joined(self.folded)]
        return self.folded[0] if self.folded else NO_SPANS

    def trained_before(self, spans: Spans) -> TrainedSpans:
        """The folded rows that trained a sample of ``spans``."""
        hit = spans & self.covered
        return self.all_folded().overlapping(hit) if hit else NO_SPANS

    def high(self, incarnation: int, iteration: int) -> int | None:
        """:data:`StreamHigh` of the committed history the ledger holds."""
        if iteration < self.folded_upto:
            reach = _reach(self.all_folded(), incarnation, iteration)
        else:  # every folded step is before ``iteration``: their largest position counts
            reach = _reach(self.window, incarnation, iteration)
            if reach is not None and self.covered:
                reach = max(reach, int(self.covered.ends[-1]) - 1)
        return None if reach is None or reach < 0 else reach
