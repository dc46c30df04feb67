"""Incarnations: each logged one start, and each resume point is an earlier saved checkpoint."""

from __future__ import annotations

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.rules.base import Rule

SAVED = """
    SELECT DISTINCT iteration, incarnation FROM checkpoints
    WHERE complete AND list_contains($1, [iteration, incarnation])"""
"""Which of the resume points ``$1`` (``[iteration, incarnation]`` pairs) were completely
saved: asked only of the resumes under judgement (none in most of a follower's polls)."""

UNSTARTED = """
    SELECT incarnation, min(writer) AS writer, count(*) AS events FROM events
    WHERE incarnation NOT IN (SELECT incarnation FROM incarnations)
    GROUP BY incarnation ORDER BY incarnation"""


def resume_problems(rule: Rule, ctx: RunContext) -> list[Violation]:
    """Duplicate starts, resume points that are not earlier or were never saved, and
    incarnations that wrote events without a start."""
    out = []
    # incremental: an older resume was checked when it happened
    judged = [
        i
        for i in ctx.incarnations.values()
        if i.resumed_iteration is not None and ctx.new_incarnation(i.incarnation)
    ]
    points = [[i.resumed_iteration, i.resumed_incarnation] for i in judged]
    found = ctx.rows(SAVED, [points], label="FT001 resumes") if points else []
    saved = {(r["iteration"], r["incarnation"]) for r in found}
    for i in ctx.incarnations.values():
        inc = i.incarnation
        where = Location(incarnation=inc)
        if i.starts > 1:
            out.append(
                rule.violation(
                    f"incarnation {inc} logged {i.starts} starts",
                    kind="duplicate_start",
                    location=where,
                )
            )
        if i not in judged:
            continue
        ref = f"checkpoint {i.resumed_iteration} of incarnation {i.resumed_incarnation}"
        if i.resumed_incarnation >= inc:  # type: ignore[operator]
            out.append(
                rule.violation(
                    f"incarnation {inc} claims to resume from {ref}, which is not earlier",
                    kind="bad_resume_point",
                    location=where,
                )
            )
        elif (i.resumed_iteration, i.resumed_incarnation) not in saved:
            out.append(
                rule.violation(
                    f"incarnation {inc} resumed from {ref}, but the log never recorded that "
                    "checkpoint as completely saved: the weights it loaded are unaccounted for",
                    kind="unsaved_checkpoint",
                    location=where,
                )
            )
    if ctx.following and ctx.session.incarnations_loaded() <= ctx.incarnations.keys():
        return out  # every loaded row's incarnation logged a start: UNSTARTED finds none
    for r in ctx.rows(UNSTARTED, label="FT001 unstarted"):
        out.append(
            rule.violation(
                f"incarnation {r['incarnation']} wrote {r['events']} events (e.g. writer "
                f"{r['writer']}) but never logged run_started: its resume point is unknown",
                kind="unstarted_incarnation",
                location=Location(incarnation=r["incarnation"], writer=r["writer"]),
            )
        )
    return out
