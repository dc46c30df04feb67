"""``verify(run_dir)``: open one session, run the selected rules, build the report."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from ftaudit.errors import FtauditError
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Report, RuleResult
from ftaudit.verifier.rules import RULES
from ftaudit.verifier.rules.base import Rule
from ftaudit.verifier.session import Session


class UnknownRuleError(FtauditError, ValueError):
    """``select`` or ``skip`` named a rule that does not exist."""


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
    run_dir: str | os.PathLike[str],
    *,
    select: Sequence[str] | None = None,
    skip: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Check a run against every selected rule and return the report.

    Raises :class:`ftaudit.errors.UnusableInputError` when the run cannot be verified
    (missing, not a directory, no events, a corrupt or foreign segment, an unknown event
    type), with a one-line message naming the file; :class:`UnknownRuleError` for a bad
    rule name. A report with violations is returned, not raised.
    """
    rules = select_rules(select, skip)
    if progress:
        progress(f"reading {os.fspath(run_dir)}")
    with Session.open(run_dir) as session:
        ctx = RunContext(session)
        results = []
        for rule in rules:
            if progress:
                progress(f"{rule.code} {rule.name}")
            started = time.perf_counter()
            outcome = rule.check(ctx)
            results.append(
                RuleResult(
                    code=rule.code,
                    name=rule.name,
                    checked=outcome.checked,
                    violations=outcome.violations,
                    seconds=time.perf_counter() - started,
                )
            )
    return Report(run_dir=os.fspath(run_dir), results=tuple(results))
