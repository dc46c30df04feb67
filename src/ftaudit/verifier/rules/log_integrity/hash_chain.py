"""The hash chain: each segment matches its digest and follows its predecessor, and the
log still ends, with the same digest, at every head a record vouched for."""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable

from ftaudit.eventlog.reader import SegmentInfo, digest_problem
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.heads import RecordedHead
from ftaudit.verifier.rules.base import Rule


def chain_breaks(
    rule: Rule,
    segments: tuple[SegmentInfo, ...],
    heads: list[RecordedHead],
    digest_of: Callable[[SegmentInfo], str | None] = digest_problem,
) -> list[Violation]:
    """Each segment matches its digest and follows its predecessor; checkpoints agree.

    ``digest_of`` says why a segment does not match its digest (a follower's caches it)."""
    if not any(info.meta.digest for info in segments):
        stripped = _stripped_digests(rule, segments, heads)
        return stripped or [
            rule.violation(
                "no segment of this run carries a content digest (written by an ftaudit "
                "older than the hash chain): edits to the log cannot be detected",
                kind="no_digest",
                severity=Severity.WARNING,
            )
        ]
    by_writer: dict[str, list[SegmentInfo]] = defaultdict(list)
    for info in segments:
        by_writer[info.meta.writer].append(info)
    out = []
    for writer, infos in sorted(by_writer.items()):
        infos.sort(key=lambda i: i.meta.first_seq)
        previous: SegmentInfo | None = None
        for info in infos:
            problem = digest_of(info)
            want = previous.meta.head_digest if previous else ""
            contiguous = info.meta.first_seq == (previous.meta.last_seq + 1 if previous else 0)
            broken = info.meta.prev_digest != want and contiguous  # holes are reported already
            prior, previous = previous, info
            if not (problem or broken or info.meta.parts):
                continue  # the usual case: no location built (a window holds 1,000s)
            where = Location(
                incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
            )
            if problem:
                out.append(
                    rule.violation(
                        f"segment {info.path.name} of writer {writer} was altered after it "
                        f"was sealed: {problem} (an event edited, removed, inserted or "
                        "reordered, or the file damaged)",
                        kind="altered_segment",
                        location=where,
                    )
                )
            out += _parts_chain(rule, info, where)
            if broken:
                before = f"{prior.path.name}" if prior else "nothing (its first)"
                out.append(
                    rule.violation(
                        f"hash chain broken in writer {writer}: segment {info.path.name} "
                        f"does not follow {before}; a segment was replaced, removed, "
                        "reordered or inserted",
                        kind="broken_chain",
                        location=where,
                    )
                )
    out += _heads_match(rule, heads, segments, by_writer)
    return out


def _parts_chain(rule: Rule, info: SegmentInfo, where: Location) -> list[Violation]:
    """A compacted segment's originals still form the chain they formed on disk."""
    out = []
    want = info.meta.prev_digest
    for part in info.meta.parts:
        if part.prev_digest != want:
            out.append(
                rule.violation(
                    f"hash chain broken inside compacted segment {info.path.name} of writer "
                    f"{info.meta.writer}: the original segment at seq {part.first_seq} does "
                    "not follow the one before it",
                    kind="broken_chain",
                    location=where,
                )
            )
        want = part.digest
    return out


def _heads_match(
    rule: Rule,
    heads: list[RecordedHead],
    segments: tuple[SegmentInfo, ...],
    by_writer: dict[str, list[SegmentInfo]],
) -> list[Violation]:
    """The log still holds, with the same digest, every head a record vouched for."""
    # only the ends a head names: a late online window holds each writer's first merged
    # segment, and a dict of all their originals' ends (7,360) cost every poll 15 ms
    named = {(h.writer, h.last_seq) for h in heads if h.digest}
    ends: dict[tuple[str, int], tuple[SegmentInfo, str]] = {}
    for info in segments:
        writer = info.meta.writer
        for part in info.meta.parts:  # the originals a compacted segment holds
            if (writer, part.last_seq) in named:
                ends[(writer, part.last_seq)] = (info, part.digest)
        ends[(writer, info.meta.last_seq)] = (info, info.meta.head_digest)
    inside = inside_a_segment(
        {w: [(i.meta.first_seq, i.meta.last_seq) for i in infos] for w, infos in by_writer.items()}
    )
    out = []
    seen: set[tuple[str, int, str]] = set()
    for h in heads:
        if not h.digest or (h.writer, h.last_seq, h.digest) in seen:
            continue
        seen.add((h.writer, h.last_seq, h.digest))
        end = ends.get((h.writer, h.last_seq))
        if end is None:
            # a seq inside a segment: re-cut; beyond them all: a truncated tail (sequences.py)
            if inside(h.writer, h.last_seq):
                out.append(
                    rule.violation(
                        f"writer {h.writer} has no segment ending at seq {h.last_seq}, "
                        f"where {h.record} recorded its chain head: its segments were "
                        "rewritten after that record",
                        kind="rewritten_after_checkpoint",
                        location=Location(incarnation=h.incarnation, writer=h.writer),
                    )
                )
        elif end[1] != h.digest:
            info, now = end
            out.append(
                rule.violation(
                    f"writer {h.writer}'s events up to seq {h.last_seq} differ from what "
                    f"{h.record} recorded (chain head {h.digest[:12]}..., now "
                    f"{now[:12] or 'none'}...): the log was rewritten "
                    "after that record",
                    kind="rewritten_after_checkpoint",
                    location=Location(
                        incarnation=h.incarnation, writer=h.writer, segment=str(info.path)
                    ),
                )
            )
    return out


def inside_a_segment(ranges: dict[str, list[tuple[int, int]]]) -> Callable[[str, int], bool]:
    """Whether a writer's sequence number lies inside one of its segments, before its last
    (``first_seq <= seq < last_seq``); ``ranges``: each writer's segments as
    ``(first_seq, last_seq)``. Found by a search, not by a look through all the writer's
    segments for every head that ends none: a whole run holds hundreds of segments a
    writer and a head for every writer at each of its checkpoints."""
    firsts: dict[str, list[int]] = {}
    reach: dict[str, list[int]] = {}  # the farthest last_seq of the segments so far
    for writer, spans in ranges.items():
        ordered = sorted(spans)
        firsts[writer] = [a for a, _ in ordered]
        reach[writer] = list(itertools.accumulate((b for _, b in ordered), max))

    def test(writer: str, seq: int) -> bool:
        k = bisect.bisect_right(firsts.get(writer, ()), seq) - 1
        return k >= 0 and reach[writer][k] > seq

    return test


def _stripped_digests(
    rule: Rule, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
) -> list[Violation]:
    """Segments without a digest that a checkpoint's chain head covers: a downgrade.

    Chain heads are only recorded by writers that seal digests, so a run whose
    checkpoints carry them had a digest on every segment up to each head; segments
    without one there had their digests stripped, which would let any edit pass.
    """
    covered: dict[str, RecordedHead] = {}  # writer -> its highest head with a digest
    for h in heads:
        best = covered.get(h.writer)
        if h.digest and (best is None or h.last_seq > best.last_seq):
            covered[h.writer] = h
    out = []
    for writer, head in sorted(covered.items()):
        seq = head.last_seq
        bare = [i for i in segments if i.meta.writer == writer and i.meta.first_seq <= seq]
        if bare:
            first = min(bare, key=lambda i: i.meta.first_seq)
            out.append(
                rule.violation(
                    f"writer {writer}: {len(bare)} segment(s) up to seq {seq} carry no "
                    f"content digest, yet {head.record} recorded their chain "
                    "head: the digests were stripped (a downgrade), so edits to these "
                    "events cannot be ruled out",
                    kind="stripped_digest",
                    location=Location(
                        incarnation=first.meta.incarnation,
                        writer=writer,
                        segment=str(first.path),
                    ),
                )
            )
    return out
