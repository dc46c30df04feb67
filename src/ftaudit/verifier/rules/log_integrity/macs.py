"""Checking the MACs a keyed run's writers made (``eventlog/keys.py``).

Given the run's key, every segment must carry ``ftaudit.mac`` = HMAC(key, its digest),
and every checkpoint and ``run_finished`` record its ``mac`` = HMAC(key, the record bound
to its run, writer and sequence number). A forger without the key who edits a history and
recomputes the digests, the chain and the checkpoint records cannot make these: the
MACs of what they rewrote no longer match. Without a key, segments that carry MACs are
counted in one warning: they could not be checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ftaudit.eventlog.keys import (
    KEY_ENV,
    KEY_FILE_ENV,
    MAC_RECORD_TYPES,
    record_mac,
    same,
    segment_mac,
)
from ftaudit.eventlog.reader import SegmentInfo, segment_records
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.rules.base import Rule


@dataclass(frozen=True)
class MacProblem:
    """One missing or wrong MAC."""

    kind: str
    """``missing_mac`` or ``bad_mac``."""
    what: str
    """The segment or record, in words (it names the file)."""
    segment: SegmentInfo
    seq: int | None = None


def segment_problems(segments: tuple[SegmentInfo, ...], key: bytes) -> Iterator[MacProblem]:
    """Segments whose footer MAC is missing or does not match their digest."""
    for info in segments:
        what = f"segment {info.path} of writer {info.meta.writer}"
        if not info.meta.mac:
            yield MacProblem("missing_mac", what, info)
        elif not info.meta.digest or not same(info.meta.mac, segment_mac(key, info.meta.digest)):
            yield MacProblem("bad_mac", what, info)
        for part in info.meta.parts:  # a compacted segment keeps its originals' MACs
            held = f"the original segment at seq {part.first_seq} held by {what}"
            if not part.mac:
                yield MacProblem("missing_mac", held, info, part.first_seq)
            elif not same(part.mac, segment_mac(key, part.digest)):
                yield MacProblem("bad_mac", held, info, part.first_seq)


def record_problems(segments: tuple[SegmentInfo, ...], key: bytes) -> Iterator[MacProblem]:
    """Checkpoint and ``run_finished`` records whose MAC is missing or wrong."""
    for info in segments:
        if not MAC_RECORD_TYPES.intersection(info.meta.types):
            continue
        for record in segment_records(info, types=MAC_RECORD_TYPES):
            env, event = record.envelope, record.event
            label = (
                f"checkpoint {event.iteration} record"  # type: ignore[attr-defined]
                if event.type == "checkpoint_saved"
                else "run_finished record"
            )
            what = f"the {label} (writer {env.writer}, seq {env.seq}) in {info.path}"
            tag = event.mac  # type: ignore[attr-defined]
            if not tag:
                yield MacProblem("missing_mac", what, info, env.seq)
                continue
            want = record_mac(key, run_id=env.run_id, writer=env.writer, seq=env.seq, event=event)
            if not same(tag, want):
                yield MacProblem("bad_mac", what, info, env.seq)


def unkeyed_macs(segments: tuple[SegmentInfo, ...]) -> int:
    """How many segments carry a MAC (checked only when the key is given)."""
    return sum(1 for info in segments if info.meta.mac)


def mac_violations(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...]
) -> list[Violation]:
    """Given the key: every segment and checkpoint record carries a MAC made with it."""
    key = ctx.anchors.mac_key
    if key is None:
        count = unkeyed_macs(segments)
        if not count:
            return []
        return [
            rule.violation(
                f"{count} segment(s) carry MACs, but no key was given ({KEY_ENV}, "
                f"{KEY_FILE_ENV} or --key-file): they were not checked, so a forger who "
                "recomputed the digests would go unseen",
                kind="unchecked_mac",
                severity=Severity.WARNING,
            )
        ]
    problems = [
        *segment_problems(segments, key),
        *record_problems(segments, key),
    ]
    out = []
    for p in problems:
        if p.kind == "missing_mac":
            why = (
                "carries no MAC, but a key was given: it was written without the key, "
                "or its MAC was stripped"
            )
        else:
            why = (
                "has a MAC that does not match the key: it was rewritten (edited, "
                "re-digested, swapped or moved) by someone without the key, or the key is "
                "not the run's"
            )
        out.append(
            rule.violation(
                f"{p.what} {why}",
                kind=p.kind,
                location=Location(
                    incarnation=p.segment.meta.incarnation,
                    writer=p.segment.meta.writer,
                    segment=str(p.segment.path),
                ),
            )
        )
    return out


__all__ = ["MacProblem", "mac_violations", "record_problems", "segment_problems", "unkeyed_macs"]
