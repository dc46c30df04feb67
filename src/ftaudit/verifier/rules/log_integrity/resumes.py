"""Incarnations: each logged one start, and each resume point is an earlier saved checkpoint."""

from __future__ import annotations

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.rules.base import Rule

RESUMES = """
    SELECT i.incarnation, i.resumed_iteration, i.resumed_incarnation, i.starts,
           c.iteration IS NOT NULL AS saved
    FROM incarnations i
    LEFT JOIN (SELECT DISTINCT iteration, incarnation FROM checkpoints WHERE complete) c
      ON c.iteration = i.resumed_iteration AND c.incarnation = i.resumed_incarnation
    ORDER BY i.incarnation"""

UNSTARTED = """
    SELECT incarnation, min(writer) AS writer, count(*) AS events FROM events
    WHERE incarnation NOT IN (SELECT incarnation FROM incarnations)
    GROUP BY incarnation ORDER BY incarnation"""


def resume_problems(rule: Rule, ctx: RunContext) -> list[Violation]:
    """Duplicate starts, resume points that are not earlier or were never saved, and
    incarnations that wrote events without a start."""
    out = []
    for r in ctx.rows(RESUMES, label="FT001 resumes"):
        inc = r["incarnation"]
        where = Location(incarnation=inc)
        if r["starts"] > 1:
            out.append(
                rule.violation(
                    f"incarnation {inc} logged {r['starts']} starts",
                    kind="duplicate_start",
                    location=where,
                )
            )
        if r["resumed_iteration"] is None or not ctx.new_incarnation(inc):
            continue  # incremental: an older resume was checked when it happened
        ref = f"checkpoint {r['resumed_iteration']} of incarnation {r['resumed_incarnation']}"
        if r["resumed_incarnation"] >= inc:
            out.append(
                rule.violation(
                    f"incarnation {inc} claims to resume from {ref}, which is not earlier",
                    kind="bad_resume_point",
                    location=where,
                )
            )
        elif not r["saved"]:
            out.append(
                rule.violation(
                    f"incarnation {inc} resumed from {ref}, but the log never recorded that "
                    "checkpoint as completely saved: the weights it loaded are unaccounted for",
                    kind="unsaved_checkpoint",
                    location=where,
                )
            )
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
