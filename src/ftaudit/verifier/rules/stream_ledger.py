"""How far the committed stream had read at each step: FT008's check of a saved loader.

A loader state saved with checkpoint ``c`` must read next from where the committed
stream stood after step ``c``: one past the largest sample position that a committed
step up to ``c`` consumed. Offline that is one pass over every allocation. An
incremental window holds the allocations from ``T`` on only, so ``ft-verify
--since-step`` checks a saved loader only where the window holds every driver whole.

A follower of a live run has seen every allocation while it was in its window: its
:class:`StreamLedger` keeps, per committed step, the largest position, and folds the
steps its window has left into one running maximum. The fold cannot be undone: where a
window moves back into it (a resume from a checkpoint older than ``T``), or a follower
attaches after step 0, the fold before the window is read from the drivers' log once
(:func:`_fold_from_log`), as a resume rebuilds any follower state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ftaudit.verifier.context import Allocation, RunContext

StreamHigh = Callable[[int, int], int | None]
"""``high(incarnation, c)``: the largest position the committed steps up to ``c`` consumed,
where the checkpoint ``incarnation`` saved at ``c`` has all of them in the committed
history (None: it has not, or this verification cannot tell)."""


def committed_high(ctx: RunContext) -> StreamHigh | None:
    """How far the committed stream had read, for this verification: from the loaded
    allocations where they are all of them, from the follower's ledger where it has one
    (None: neither; the saved loaders are checked by a full verification)."""
    ledger = None
    if ctx.following:  # fed every poll, the ones that need it not included
        ledger = ctx.carried(StreamLedger)
        lookback = ctx.scope.lookback if ctx.scope is not None else 0
        if ledger.behind(lookback):
            ledger.refold(lookback, _fold_from_log(ctx, lookback))
        ledger.take(lookback, _committed(ctx))
    if ctx.drivers_complete():
        return _from_allocations(ctx)
    return ledger.high if ledger is not None and ledger.whole else None


def _committed(ctx: RunContext) -> list[Allocation]:
    return [a for a in ctx.allocations if a.key in ctx.committed_keys and a.num_ids]


def _fold_from_log(ctx: RunContext, upto: int) -> int | None:
    """The largest position the committed steps before ``upto`` consumed, from every
    driver segment the follower listed (its whole committed history; the trainers' rows
    are not read). None: those steps consumed none."""
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
        before = [a for a in _committed(RunContext(session)) if a.step < upto]
    finally:
        session.close()
    return max((_largest(a) for a in before), default=None)


def _largest(a: Allocation) -> int:
    """The largest sample position of an allocation, from its runs (-1: none)."""
    runs = a.sample_indices
    return max((s + n - 1 for s, n in zip(runs.starts, runs.lengths, strict=True)), default=-1)


def _from_allocations(ctx: RunContext) -> StreamHigh:
    committed: list[Allocation] | None = None  # read at the first saved loader, if any

    def high(incarnation: int, iteration: int) -> int | None:
        nonlocal committed
        if committed is None:
            committed = _committed(ctx)
        upto = [a for a in committed if a.step <= iteration]
        if not upto or any(a.step == iteration and a.incarnation != incarnation for a in upto):
            return None  # that checkpoint's steps are not all in the committed history
        return max(_largest(a) for a in upto)

    return high


@dataclass
class StreamLedger:
    """A follower's committed stream, step by step from ``T`` on, folded before it."""

    steps: dict[int, tuple[int, frozenset[int]]] = field(default_factory=dict)
    """Each committed step from :attr:`folded_upto` on: its largest position, and the
    incarnations that committed it (two where a step was committed twice)."""
    folded_upto: int = 0
    folded_max: int | None = None
    """The largest position of the committed steps before :attr:`folded_upto`."""
    whole: bool = True
    """Whether the ledger holds every committed step since step 0."""
    started: bool = False

    def behind(self, lookback: int) -> bool:
        """Whether a window from ``lookback`` needs steps the ledger never held (a late
        attach) or folded (a resume from before the fold)."""
        return lookback < self.folded_upto or (not self.started and lookback > 0)

    def refold(self, lookback: int, folded_max: int | None) -> None:
        """Start again from the fold of the committed steps before ``lookback``, read
        from the log (:func:`_fold_from_log`)."""
        self.steps, self.folded_upto, self.folded_max = {}, lookback, folded_max
        self.whole = self.started = True

    def take(self, lookback: int, committed: list[Allocation]) -> None:
        """Take in a poll's window: its committed allocations, every one of steps
        ``>= lookback`` (the window is the truth there: a resume may have rolled back
        steps the ledger held)."""
        if not self.started:
            self.started, self.whole = True, lookback == 0
        if lookback < self.folded_upto:
            self.whole = False
        if not self.whole:
            return
        for step, (largest, _) in self.steps.items():
            if step < lookback:  # left the window: only its maximum is needed any more
                self.folded_max = max(largest, -1 if self.folded_max is None else self.folded_max)
        self.steps = {}
        for a in committed:
            if a.step < lookback:
                continue
            largest, incarnations = self.steps.get(a.step, (-1, frozenset()))
            self.steps[a.step] = (max(largest, _largest(a)), incarnations | {a.incarnation})
        self.folded_upto = max(self.folded_upto, lookback)

    def high(self, incarnation: int, iteration: int) -> int | None:
        if iteration < self.folded_upto:
            return None  # folded together with later steps
        at = self.steps.get(iteration)
        if at is not None and at[1] != {incarnation}:
            return None  # that checkpoint's steps are not all in the committed history
        found = [largest for step, (largest, _) in self.steps.items() if step <= iteration]
        if self.folded_max is not None:
            found.append(self.folded_max)
        return max(found, default=None)
