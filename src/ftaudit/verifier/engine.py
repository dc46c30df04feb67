"""``verify(run_dir)``: open one session, run the selected rules, build the report."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from ftaudit.errors import (
    UnknownRuleError,
    UsageError,
)
from ftaudit.eventlog.reader import RunScan
from ftaudit.eventlog.rundir import relisting
from ftaudit.verifier.anchors import NO_ANCHORS, Anchors
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Report, RuleResult, Violation
from ftaudit.verifier.incremental import FooterCache, IncrementalScope
from ftaudit.verifier.incremental import select as select_scope
from ftaudit.verifier.rules import RULES
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.session import Session


def _lookup(key: str) -> Rule:
    wanted = key.strip().lower()
    for rule in RULES:
        if wanted in (rule.code.lower(), rule.name):
            return rule
    known = ", ".join(f"{r.code} ({r.name})" for r in RULES)
    raise UnknownRuleError(f"unknown rule {key!r}; known rules: {known}")


def select_rules(select: Sequence[str] | None = None, skip: Sequence[str] = ()) -> list[Rule]:
    """The rules to run, in registry order: ``select`` (all when None) minus ``skip``.

    Rules are named by code (``FT004``, any case) or name (``witness-exactly-once``).
    """
    chosen = {_lookup(k).code for k in select} if select is not None else {r.code for r in RULES}
    dropped = {_lookup(k).code for k in skip}
    return [r for r in RULES if r.code in chosen and r.code not in dropped]


def verify(
    run: str | os.PathLike[str] | Session,
    *,
    select: Sequence[str] | None = None,
    skip: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    since_step: int | None = None,
    data_manifests: Sequence[str | os.PathLike[str]] = (),
    anchors: Anchors = NO_ANCHORS,
) -> Report:
    """Check a run against every selected rule and return the report.

    Raises :class:`ftaudit.errors.UnusableInputError` when the run cannot be verified
    (missing, not a directory, no events, a corrupt or foreign segment, an unknown event
    type), with a one-line message naming the file; :class:`UnknownRuleError` for a bad
    rule name. A report with violations is returned, not raised.

    ``since_step=K`` verifies incrementally: only the segments that a check of steps
    ``>= K`` needs are read (see :mod:`ftaudit.verifier.incremental`), and only violations
    at those steps (or in incarnations that began there) are reported. Its verdict on
    those steps is the full verification's; its cost grows with the new events.

    ``data_manifests`` are dataset manifest files kept outside the run (FT008 finds the
    one the run names by its digest; with a run that names none, the first is used).

    ``run`` may be an opened :class:`Session` (``ftaudit show`` and ``report`` load a run
    once for the verdict and the history); the caller keeps it open and closes it.

    ``anchors`` are what the run is held to beyond its own log (``require_finished``).
    """
    rules = select_rules(select, skip)
    if isinstance(run, Session):
        if since_step:
            raise UsageError("since_step needs a run directory, not an opened session")
        return check_session(run, rules, None, progress, data_manifests, anchors)
    run_dir = run
    if progress:
        progress(f"reading {os.fspath(run_dir)}")
    scope: IncrementalScope | None = None
    if since_step is not None and since_step > 0:

        def select_and_load() -> tuple[RunScan, IncrementalScope, Session]:
            scan, scope = select_scope(run_dir, since_step)
            opened = Session.open(run_dir, scan=scan, kept=scope.kept)
            return scan, scope, opened

        scan, scope, opened = relisting(select_and_load)  # a roll removed a selected one
        if progress:
            progress(
                f"incremental from step {since_step}: {len(scan.segments)} of "
                f"{scope.total_segments} segments (events from step {scope.lookback})"
            )
    else:
        opened = Session.open(run_dir)
    with opened as session:
        report = check_session(session, rules, scope, progress, data_manifests, anchors)
    return Report(run_dir=os.fspath(run_dir), results=report.results)


def check_session(
    session: Session,
    rules: list[Rule],
    scope: IncrementalScope | None,
    progress: Callable[[str], None] | None,
    data_manifests: Sequence[str | os.PathLike[str]],
    anchors: Anchors,
    footers: FooterCache | None = None,
) -> Report:
    """Run ``rules`` over an opened session (``footers``: what a follower read before)."""
    ctx = RunContext(session, scope, data_manifests, anchors, footers)
    results = []
    for rule in rules:
        if progress:
            progress(f"{rule.code} {rule.name}")
        started = time.perf_counter()
        outcome = rule.check(ctx)
        if scope is not None:
            kept = tuple(v for v in outcome.violations if _is_new(ctx, v))
            outcome = RuleOutcome(outcome.checked, kept, outcome.note, outcome.counts)
        results.append(
            RuleResult(
                code=rule.code,
                name=rule.name,
                checked=outcome.checked,
                violations=outcome.violations,
                seconds=time.perf_counter() - started,
                note=outcome.note,
                counts=dict(outcome.counts),
            )
        )
    return Report(run_dir=os.fspath(session.run_dir), results=tuple(results))


def _is_new(ctx: RunContext, v: Violation) -> bool:
    """In an incremental verification: whether ``v`` is about the steps under judgement.

    A violation at a step before ``since`` was (or will be) reported by the check of
    that step, unless its evidence came after that check (:meth:`RunContext.judges`);
    one without a step belongs to its incarnation, new if that incarnation began at
    ``since`` or later. Log integrity findings (holes, torn files) are always reported:
    a gate must hear of them. One whose latest evidence is at a step under judgement
    (:attr:`Violation.shown_at`: a content trained again) is new too.
    """
    step, inc = v.location.step, v.location.incarnation
    if v.shown_at is not None and v.shown_at >= ctx.since:
        return True
    if step is not None:
        return ctx.judges(step, v.location.segment)
    return inc is None or v.code == "FT001" or ctx.new_incarnation(inc)
