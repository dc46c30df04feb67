"""Each writer's sequence numbers: holes, overlaps, torn flushes and truncated tails."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ftaudit.eventlog.reader import SegmentInfo, torn_rows
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.heads import RecordedHead
from ftaudit.verifier.rules.base import Rule


def sequence_gaps(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...]
) -> list[Violation]:
    """Per writer, the segments' sequence numbers run on without a hole or an overlap."""
    window = ctx.scope
    by_writer: dict[str, list[SegmentInfo]] = defaultdict(list)
    heads = window.head_only if window is not None else frozenset()
    for info in segments:
        if str(info.path) not in heads:
            by_writer[info.meta.writer].append(info)
    out = []
    for writer, infos in sorted(by_writer.items()):
        infos.sort(key=lambda i: i.meta.first_seq)
        # incremental: the writer's earlier segments were checked before
        expected = window.first_seq.get(writer, 0) if window is not None else 0
        previous: SegmentInfo | None = None
        for info in infos:
            first, last = info.meta.first_seq, info.meta.last_seq
            if first > expected:
                after = f" after {previous.path.name}" if previous else " at its start"
                why = "a segment was deleted or never written"
                linked = info.meta.prev_digest == (previous.meta.head_digest if previous else "")
                if info.meta.dropped == first - expected and linked:
                    why = (
                        f"the writer dropped them: it could not write for too long "
                        f"(disk full or unwritable) and {info.meta.dropped} events "
                        "overflowed its buffer"
                    )
                out.append(
                    rule.violation(
                        f"hole in writer {writer}: events {expected}..{first - 1} are "
                        f"missing{after} ({why})",
                        kind="hole",
                        ids=list(range(expected, min(first, expected + 200))),
                        id_count=first - expected,
                        location=_at(writer, info),
                    )
                )
            elif first < expected:
                out.append(
                    rule.violation(
                        f"duplicate events in writer {writer}: {info.path.name} holds "
                        f"seq {first}..{last}, but {first}..{expected - 1} were already in "
                        f"{previous.path.name if previous else 'an earlier segment'}",
                        kind="duplicate_events",
                        location=_at(writer, info),
                    )
                )
            expected = max(expected, last + 1)
            previous = info
    return out


def _at(writer: str, info: SegmentInfo) -> Location:
    """Where a finding about ``info`` points (made only for a finding: a window checks
    hundreds of segments at every poll)."""
    return Location(incarnation=info.meta.incarnation, writer=writer, segment=str(info.path))


def torn_flushes(rule: Rule, torn: tuple[Path, ...]) -> list[Violation]:
    """Temp files of flushes a crash cut short: a warning each (recoverable or lost)."""
    out = []
    for path in torn:
        rows = torn_rows(path)
        state = (
            "partially written: its events were lost"
            if rows is None
            else f"complete ({rows} events) but never renamed: recoverable"
        )
        out.append(
            rule.violation(
                f"truncated tail: writer {path.parent.name} crashed while flushing; "
                f"temp file {path.name} is {state}",
                kind="torn_segment",
                location=Location(writer=path.parent.name, segment=str(path)),
                severity=Severity.WARNING,
            )
        )
    return out


def truncated_tails(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
) -> list[Violation]:
    """Every writer's log reaches the highest head a record vouched for."""
    last: dict[str, int] = dict(ctx.scope.last_seq) if ctx.scope is not None else {}
    for info in segments:
        last[info.meta.writer] = max(last.get(info.meta.writer, -1), info.meta.last_seq)
    highest: dict[str, RecordedHead] = {}
    for h in heads:
        if h.writer not in highest or h.last_seq > highest[h.writer].last_seq:
            highest[h.writer] = h
    out = []
    for writer, h in sorted(highest.items()):
        have = last.get(writer, -1)
        if h.last_seq > have:
            gone = (
                f"has no segment at all (its whole log was deleted), but {h.record} "
                if have < 0
                else f"ends at seq {have}, but {h.record} "
            )
            out.append(
                rule.violation(
                    f"truncated tail: writer {writer} {gone}recorded it durable up to "
                    f"{h.last_seq}: events {have + 1}..{h.last_seq} are missing",
                    kind="truncated_tail",
                    location=Location(incarnation=h.incarnation, writer=writer),
                )
            )
    return out
