"""FT001 log-integrity."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.reader import SegmentInfo
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.rules.base import Outcome, Rule

SNAPSHOT_SEQS = """
    SELECT writer, max(last_seq) AS last_seq, min(iteration) AS iteration,
           arg_min(incarnation, iteration) AS incarnation
    FROM checkpoint_snapshots WHERE last_seq >= 0 GROUP BY writer"""

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


class LogIntegrity(Rule):
    """Every writer's sequence is complete, and every resume point is a saved checkpoint.

    Per writer, the sealed segments' sequence numbers run 0, 1, 2, ... without a hole
    (a segment deleted or never written) or an overlap (duplicated events). A temp file
    left by a flush that a crash cut short, or a writer whose log ends before the
    sequence number a checkpoint recorded as durable, is a truncated tail. Every
    incarnation logged its start, and every resumed incarnation names a checkpoint that
    the log marks complete. (Unreadable or foreign segments stop verification earlier,
    as unusable input.)

    Fails::

        events/driver.i0.../000000000000.parquet   seq 0..9
        events/driver.i0.../000000000020.parquet   seq 20..29    (10..19 deleted)
        -> FT001: hole in writer driver.i0...: events 10..19 are missing

    Passes::

        000000000000.parquet seq 0..9, 000000000010.parquet seq 10..19, ...
    """

    code = "FT001"
    name = "log-integrity"

    def check(self, ctx: RunContext) -> Outcome:
        segments = ctx.scan.segments
        violations = [
            *self._sequences(segments),
            *self._torn(ctx.scan.torn),
            *self._tails(ctx, segments),
            *self._run_ids(segments),
            *self._resumes(ctx),
        ]
        return Outcome(len(segments), tuple(violations))

    def _sequences(self, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        by_writer: dict[str, list[SegmentInfo]] = defaultdict(list)
        for info in segments:
            by_writer[info.meta.writer].append(info)
        out = []
        for writer, infos in sorted(by_writer.items()):
            infos.sort(key=lambda i: i.meta.first_seq)
            expected = 0
            previous: SegmentInfo | None = None
            for info in infos:
                first, last = info.meta.first_seq, info.meta.last_seq
                where = Location(
                    incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                )
                if first > expected:
                    after = f" after {previous.path.name}" if previous else " at its start"
                    out.append(
                        self.violation(
                            f"hole in writer {writer}: events {expected}..{first - 1} are "
                            f"missing{after} (a segment was deleted or never written)",
                            location=where,
                            ids=list(range(expected, min(first, expected + 200))),
                            id_count=first - expected,
                        )
                    )
                elif first < expected:
                    out.append(
                        self.violation(
                            f"duplicate events in writer {writer}: {info.path.name} holds "
                            f"seq {first}..{last}, but {first}..{expected - 1} were already in "
                            f"{previous.path.name if previous else 'an earlier segment'}",
                            location=where,
                        )
                    )
                expected = max(expected, last + 1)
                previous = info
        return out

    def _torn(self, torn: tuple[Path, ...]) -> list[Violation]:
        out = []
        for path in torn:
            try:
                rows = pq.read_metadata(path).num_rows
                state = f"complete ({rows} events) but never renamed: recoverable"
            except (OSError, pa.ArrowException):
                state = "partially written: its events were lost"
            out.append(
                self.violation(
                    f"truncated tail: writer {path.parent.name} crashed while flushing; "
                    f"temp file {path.name} is {state}",
                    location=Location(writer=path.parent.name, segment=str(path)),
                    severity=Severity.WARNING,
                )
            )
        return out

    def _tails(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        last: dict[str, int] = {}
        for info in segments:
            last[info.meta.writer] = max(last.get(info.meta.writer, -1), info.meta.last_seq)
        out = []
        for r in ctx.rows(SNAPSHOT_SEQS, label="FT001 snapshots"):
            have = last.get(r["writer"], -1)
            if r["last_seq"] > have:
                out.append(
                    self.violation(
                        f"truncated tail: writer {r['writer']} ends at seq {have}, but "
                        f"checkpoint {r['iteration']} recorded it durable up to "
                        f"{r['last_seq']}: events {have + 1}..{r['last_seq']} are missing",
                        location=Location(incarnation=r["incarnation"], writer=r["writer"]),
                    )
                )
        return out

    def _run_ids(self, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        runs: dict[str, list[SegmentInfo]] = defaultdict(list)
        for info in segments:
            runs[info.meta.run_id].append(info)
        if len(runs) <= 1:
            return []
        main = max(runs, key=lambda k: len(runs[k]))
        return [
            self.violation(
                f"segment {info.path.name} of writer {info.meta.writer} belongs to run {run_id}, "
                f"not to this run ({main}): segments of another run were mixed in",
                location=Location(writer=info.meta.writer, segment=str(info.path)),
            )
            for run_id, infos in sorted(runs.items())
            if run_id != main
            for info in infos
        ]

    def _resumes(self, ctx: RunContext) -> list[Violation]:
        out = []
        for r in ctx.rows(RESUMES, label="FT001 resumes"):
            inc = r["incarnation"]
            where = Location(incarnation=inc)
            if r["starts"] > 1:
                out.append(
                    self.violation(f"incarnation {inc} logged {r['starts']} starts", location=where)
                )
            if r["resumed_iteration"] is None:
                continue
            ref = f"checkpoint {r['resumed_iteration']} of incarnation {r['resumed_incarnation']}"
            if r["resumed_incarnation"] >= inc:
                out.append(
                    self.violation(
                        f"incarnation {inc} claims to resume from {ref}, which is not earlier",
                        location=where,
                    )
                )
            elif not r["saved"]:
                out.append(
                    self.violation(
                        f"incarnation {inc} resumed from {ref}, but the log never recorded that "
                        "checkpoint as completely saved: the weights it loaded are unaccounted for",
                        location=where,
                    )
                )
        for r in ctx.rows(UNSTARTED, label="FT001 unstarted"):
            out.append(
                self.violation(
                    f"incarnation {r['incarnation']} wrote {r['events']} events (e.g. writer "
                    f"{r['writer']}) but never logged run_started: its resume point is unknown",
                    location=Location(incarnation=r["incarnation"], writer=r["writer"]),
                )
            )
        return out
