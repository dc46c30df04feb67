"""FT001 log-integrity: the log is whole, untouched and this run's.

The checks live in :mod:`ftaudit.verifier.rules.log_integrity`, one module per kind of
evidence; this module states the invariant, declares the kinds and runs them in order.
"""

from __future__ import annotations

from typing import ClassVar

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.heads import recorded_heads
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.rules.log_integrity.endings import lost_events, unfinished
from ftaudit.verifier.rules.log_integrity.hash_chain import chain_breaks
from ftaudit.verifier.rules.log_integrity.macs import mac_violations
from ftaudit.verifier.rules.log_integrity.resumes import resume_problems
from ftaudit.verifier.rules.log_integrity.run_identity import (
    foreign_segments,
    run_file_problems,
    seal_mismatches,
)
from ftaudit.verifier.rules.log_integrity.sequences import (
    sequence_gaps,
    torn_flushes,
    truncated_tails,
)


class LogIntegrity(Rule):
    """Every writer's sequence is complete, and every resume point is a saved checkpoint.

    Per writer, the sealed segments' sequence numbers run 0, 1, 2, ... without a hole
    (a segment deleted or never written) or an overlap (duplicated events). A temp file
    left by a flush that a crash cut short, or a writer whose log ends before the
    sequence number a checkpoint recorded as durable, is a truncated tail. Every
    incarnation logged its start, and every resumed incarnation names a checkpoint that
    the log marks complete. (Unreadable or foreign segments stop verification earlier,
    as unusable input.)

    Tamper evidence: every segment's footer holds the SHA-256 of the file (its own digest
    zeroed) and the digest of the writer's previous segment, and each checkpoint records the
    digest at the sequence number it snapshots. A segment whose bytes no longer match its
    digest, a segment that does not follow its predecessor, or a chain head that differs from
    the checkpoint's means an event was edited, removed, reordered or inserted.

    Fails::

        events/driver.i0.../000000000000.parquet   seq 0..9
        events/driver.i0.../000000000020.parquet   seq 20..29    (10..19 deleted)
        -> FT001: hole in writer driver.i0...: events 10..19 are missing

    Passes::

        000000000000.parquet seq 0..9, 000000000010.parquet seq 10..19, ...
    """

    code = "FT001"
    name = "log-integrity"
    kinds: ClassVar[dict[str, str]] = {
        "hole": "a gap in a writer's sequence numbers: events were lost",
        "duplicate_events": "a writer's sequence numbers repeat across segments",
        "no_digest": "no segment carries a content digest: edits cannot be detected",
        "altered_segment": "a sealed segment does not match its own digest",
        "stripped_digest": "segments a checkpoint's chain head covers have no digest",
        "broken_chain": "a segment does not follow its predecessor in the hash chain",
        "rewritten_after_checkpoint": "a writer's log differs from what a checkpoint vouched",
        "torn_segment": "a temp file left by a writer that crashed while flushing",
        "truncated_tail": "a writer's log ends before what a checkpoint recorded as durable",
        "foreign_segment": "a segment of another run is mixed in",
        "unfinished": "--require-finished: the last incarnation logged no run_finished",
        "unvouched_tail": "--require-finished: a writer's events past every recorded head",
        "seal_mismatch": "--manifest: the seal is of another run, or misses a writer",
        "missing_mac": "a key was given, but a segment or checkpoint record carries no MAC",
        "bad_mac": "a segment's or checkpoint record's MAC does not match the key: forged",
        "unchecked_mac": "segments carry MACs, but no key was given to check them",
        "events_lost": "a writer's last-chance record reports events it could never write",
        "bad_run_file": "run.json is missing, invalid, or names another run than the segments",
        "duplicate_start": "an incarnation logged more than one start",
        "bad_resume_point": "an incarnation resumes from a checkpoint that is not earlier",
        "unsaved_checkpoint": "an incarnation resumed from a checkpoint never completely saved",
        "unstarted_incarnation": "an incarnation wrote events but never logged its start",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        segments = ctx.scan.segments
        heads = recorded_heads(ctx)
        violations = [
            *sequence_gaps(self, ctx, segments),
            *chain_breaks(self, segments, heads, ctx.digest_problem),
            *torn_flushes(self, ctx.scan.torn),
            *truncated_tails(self, ctx, segments, heads),
            *foreign_segments(self, segments),
            *run_file_problems(self, ctx, segments),
            *(unfinished(self, ctx, segments, heads) if ctx.anchors.require_finished else ()),
            *seal_mismatches(self, ctx, segments),
            *mac_violations(self, ctx, segments),
            *lost_events(self, ctx, segments),
            *resume_problems(self, ctx),
        ]
        return RuleOutcome(len(segments), tuple(violations))
