"""How the run ended: ``--require-finished``'s checks, and events writers report lost."""

from __future__ import annotations

from pathlib import Path

from ftaudit.eventlog.fallback import fallback_dir, read_last_chance
from ftaudit.eventlog.reader import SegmentInfo
from ftaudit.eventlog.rundir import claimed_incarnations
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.heads import RecordedHead
from ftaudit.verifier.rules.base import Rule

FINISHED = "SELECT incarnation, writer, seq FROM run_finished"


def unfinished(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
) -> list[Violation]:
    """``--require-finished``: the last incarnation ended with ``run_finished``, and
    writers whose events go past every record that vouches for them are named."""
    claimed = claimed_incarnations(ctx.scan.run_dir)
    logged = {info.meta.incarnation for info in segments}
    last = max(claimed | logged)
    ends_of = ctx.rows(FINISHED, label="FT001 finished")
    finished = {r["incarnation"] for r in ends_of}
    out = []
    if last not in finished:
        why = (
            "it wrote no events at all (they were deleted, or it died at once)"
            if last not in logged
            else "it crashed, is still running, or its end was deleted"
        )
        out.append(
            rule.violation(
                f"the run did not finish: its last incarnation {last} logged no "
                f"run_finished ({why})",
                kind="unfinished",
                location=Location(incarnation=last),
            )
        )
    vouched: dict[str, int] = {}
    for h in heads:
        vouched[h.writer] = max(vouched.get(h.writer, -1), h.last_seq)
    for r in ends_of:  # a run_finished is the record: it vouches for its writer up to itself
        vouched[r["writer"]] = max(vouched.get(r["writer"], -1), r["seq"])
    ends: dict[str, SegmentInfo] = {}
    for info in sorted(segments, key=lambda i: i.meta.last_seq):
        ends[info.meta.writer] = info  # the last one wins: each writer's final segment
    for writer, info in sorted(ends.items()):
        upto = vouched.get(writer, -1)
        if info.meta.last_seq > upto:
            out.append(
                rule.violation(
                    f"writer {writer}: events {upto + 1}..{info.meta.last_seq} come after "
                    "every checkpoint and run_finished that recorded its head: a "
                    "truncation there would go unseen (seal the run to anchor it)",
                    kind="unvouched_tail",
                    location=Location(
                        incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                    ),
                    severity=Severity.WARNING,
                )
            )
    return out


def lost_events(rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
    """Writers that left a last-chance record: events they could never write."""
    folders = [fallback_dir(), *(Path(d) for d in ctx.anchors.fallback_dirs)]
    out = []
    for run_id in sorted({info.meta.run_id for info in segments}):
        for path, r in read_last_chance(folders, run_id):
            out.append(
                rule.violation(
                    f"writer {r.writer} lost {r.lost} of its {r.logged} events "
                    f"({r.dropped} dropped, {r.unflushed} never written after "
                    f"{r.write_errors} failed flushes; sealed up to seq {r.durable_seq}), "
                    f"as its last-chance record {path} says: the disk failed for good",
                    kind="events_lost",
                    location=Location(writer=r.writer, segment=str(path)),
                )
            )
    return out
