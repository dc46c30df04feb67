"""FT001 log-integrity."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import ClassVar

import pyarrow.parquet as pq

from ftaudit.errors import RunFileError
from ftaudit.eventlog.fallback import fallback_dir, read_last_chance
from ftaudit.eventlog.keys import KEY_ENV, KEY_FILE_ENV
from ftaudit.eventlog.reader import UNREADABLE, SegmentInfo
from ftaudit.eventlog.rundir import RUN_FILE, claimed_incarnations, read_run_id
from ftaudit.eventlog.segment import file_digest
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.heads import RecordedHead, recorded_heads
from ftaudit.verifier.macs import record_problems, segment_problems, unkeyed_macs
from ftaudit.verifier.rules.base import Rule, RuleOutcome

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


FINISHED = "SELECT incarnation, writer, seq FROM run_finished"


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
            *self._sequences(ctx, segments),
            *self._chains(segments, heads),
            *self._torn(ctx.scan.torn),
            *self._tails(ctx, segments, heads),
            *self._run_ids(segments),
            *self._run_file(ctx, segments),
            *(self._finished(ctx, segments, heads) if ctx.anchors.require_finished else ()),
            *self._sealed(ctx, segments),
            *self._macs(ctx, segments),
            *self._lost(ctx, segments),
            *self._resumes(ctx),
        ]
        return RuleOutcome(len(segments), tuple(violations))

    def _sequences(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        window = ctx.scope
        by_writer: dict[str, list[SegmentInfo]] = defaultdict(list)
        for info in segments:
            if window is None or str(info.path) not in window.head_only:
                by_writer[info.meta.writer].append(info)
        out = []
        for writer, infos in sorted(by_writer.items()):
            infos.sort(key=lambda i: i.meta.first_seq)
            # incremental: the writer's earlier segments were checked before
            expected = window.first_seq.get(writer, 0) if window is not None else 0
            previous: SegmentInfo | None = None
            for info in infos:
                first, last = info.meta.first_seq, info.meta.last_seq
                where = Location(
                    incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                )
                if first > expected:
                    after = f" after {previous.path.name}" if previous else " at its start"
                    why = "a segment was deleted or never written"
                    linked = info.meta.prev_digest == (
                        previous.meta.head_digest if previous else ""
                    )
                    if info.meta.dropped == first - expected and linked:
                        why = (
                            f"the writer dropped them: it could not write for too long "
                            f"(disk full or unwritable) and {info.meta.dropped} events "
                            "overflowed its buffer"
                        )
                    out.append(
                        self.violation(
                            f"hole in writer {writer}: events {expected}..{first - 1} are "
                            f"missing{after} ({why})",
                            kind="hole",
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
                            kind="duplicate_events",
                            location=where,
                        )
                    )
                expected = max(expected, last + 1)
                previous = info
        return out

    def _chains(
        self, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
    ) -> list[Violation]:
        """Each segment matches its digest and follows its predecessor; checkpoints agree."""
        if not any(info.meta.digest for info in segments):
            stripped = self._stripped(segments, heads)
            return stripped or [
                self.violation(
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
                where = Location(
                    incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                )
                problem = _digest_problem(info)
                if problem:
                    out.append(
                        self.violation(
                            f"segment {info.path.name} of writer {writer} was altered after it "
                            f"was sealed: {problem} (an event edited, removed, inserted or "
                            "reordered, or the file damaged)",
                            kind="altered_segment",
                            location=where,
                        )
                    )
                out += self._parts_chain(info, where)
                want = previous.meta.head_digest if previous else ""
                contiguous = info.meta.first_seq == (previous.meta.last_seq + 1 if previous else 0)
                if info.meta.prev_digest != want and contiguous:  # holes are reported already
                    before = f"{previous.path.name}" if previous else "nothing (its first)"
                    out.append(
                        self.violation(
                            f"hash chain broken in writer {writer}: segment {info.path.name} "
                            f"does not follow {before}; a segment was replaced, removed, "
                            "reordered or inserted",
                            kind="broken_chain",
                            location=where,
                        )
                    )
                previous = info
        out += self._heads_match(heads, segments, by_writer)
        return out

    def _parts_chain(self, info: SegmentInfo, where: Location) -> list[Violation]:
        """A compacted segment's originals still form the chain they formed on disk."""
        out = []
        want = info.meta.prev_digest
        for part in info.meta.parts:
            if part.prev_digest != want:
                out.append(
                    self.violation(
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
        self,
        heads: list[RecordedHead],
        segments: tuple[SegmentInfo, ...],
        by_writer: dict[str, list[SegmentInfo]],
    ) -> list[Violation]:
        """The log still holds, with the same digest, every head a record vouched for."""
        ends: dict[tuple[str, int], tuple[SegmentInfo, str]] = {}
        for info in segments:
            for part in info.meta.parts:  # the originals a compacted segment holds
                ends[(info.meta.writer, part.last_seq)] = (info, part.digest)
            ends[(info.meta.writer, info.meta.last_seq)] = (info, info.meta.head_digest)
        out = []
        seen: set[tuple[str, int, str]] = set()
        for h in heads:
            if not h.digest or (h.writer, h.last_seq, h.digest) in seen:
                continue
            seen.add((h.writer, h.last_seq, h.digest))
            end = ends.get((h.writer, h.last_seq))
            where = Location(incarnation=h.incarnation, writer=h.writer)
            if end is None:
                # a seq inside a segment: re-cut; beyond them all: a truncated tail (_tails)
                inside = any(
                    i.meta.first_seq <= h.last_seq < i.meta.last_seq
                    for i in by_writer.get(h.writer, ())
                )
                if inside:
                    out.append(
                        self.violation(
                            f"writer {h.writer} has no segment ending at seq {h.last_seq}, "
                            f"where {h.record} recorded its chain head: its segments were "
                            "rewritten after that record",
                            kind="rewritten_after_checkpoint",
                            location=where,
                        )
                    )
            elif end[1] != h.digest:
                info, now = end
                out.append(
                    self.violation(
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

    def _stripped(
        self, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
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
                    self.violation(
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

    def _torn(self, torn: tuple[Path, ...]) -> list[Violation]:
        out = []
        for path in torn:
            try:
                rows = pq.read_metadata(path).num_rows
                state = f"complete ({rows} events) but never renamed: recoverable"
            except UNREADABLE:
                state = "partially written: its events were lost"
            out.append(
                self.violation(
                    f"truncated tail: writer {path.parent.name} crashed while flushing; "
                    f"temp file {path.name} is {state}",
                    kind="torn_segment",
                    location=Location(writer=path.parent.name, segment=str(path)),
                    severity=Severity.WARNING,
                )
            )
        return out

    def _tails(
        self, ctx: RunContext, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
    ) -> list[Violation]:
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
                    self.violation(
                        f"truncated tail: writer {writer} {gone}recorded it durable up to "
                        f"{h.last_seq}: events {have + 1}..{h.last_seq} are missing",
                        kind="truncated_tail",
                        location=Location(incarnation=h.incarnation, writer=writer),
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
                kind="foreign_segment",
                location=Location(writer=info.meta.writer, segment=str(info.path)),
            )
            for run_id, infos in sorted(runs.items())
            if run_id != main
            for info in infos
        ]

    def _finished(
        self, ctx: RunContext, segments: tuple[SegmentInfo, ...], heads: list[RecordedHead]
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
                self.violation(
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
                    self.violation(
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

    def _lost(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        """Writers that left a last-chance record: events they could never write."""
        folders = [fallback_dir(), *(Path(d) for d in ctx.anchors.fallback_dirs)]
        out = []
        for run_id in sorted({info.meta.run_id for info in segments}):
            for path, r in read_last_chance(folders, run_id):
                out.append(
                    self.violation(
                        f"writer {r.writer} lost {r.lost} of its {r.logged} events "
                        f"({r.dropped} dropped, {r.unflushed} never written after "
                        f"{r.write_errors} failed flushes; sealed up to seq {r.durable_seq}), "
                        f"as its last-chance record {path} says: the disk failed for good",
                        kind="events_lost",
                        location=Location(writer=r.writer, segment=str(path)),
                    )
                )
        return out

    def _sealed(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        """``--manifest``: the seal is of this run, and names every writer the run holds
        (its heads are checked with the others: a writer must reach its sealed head)."""
        seal = ctx.anchors.seal
        if seal is None:
            return []
        out = []
        run_ids = {info.meta.run_id for info in segments}
        if seal.run_id not in run_ids:
            out.append(
                self.violation(
                    f"the seal is of run {seal.run_id}, not of this run "
                    f"({', '.join(sorted(run_ids))})",
                    kind="seal_mismatch",
                )
            )
        firsts: dict[str, SegmentInfo] = {}
        for info in sorted(segments, key=lambda i: -i.meta.first_seq):
            firsts[info.meta.writer] = info
        for writer, info in sorted(firsts.items()):
            if writer not in seal.heads:
                out.append(
                    self.violation(
                        f"writer {writer} is not in the seal: its events were added after "
                        "the run was sealed",
                        kind="seal_mismatch",
                        location=Location(
                            incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                        ),
                    )
                )
        return out

    def _macs(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        """Given the key: every segment and checkpoint record carries a MAC made with it."""
        key = ctx.anchors.mac_key
        if key is None:
            count = unkeyed_macs(segments)
            if not count:
                return []
            return [
                self.violation(
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
                self.violation(
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

    def _run_file(self, ctx: RunContext, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
        """``run.json`` holds a valid run id, the one the segments carry."""
        try:
            run_id = read_run_id(ctx.scan.run_dir)
        except RunFileError as exc:
            return [self.violation(str(exc), kind="bad_run_file")]
        ids = Counter(info.meta.run_id for info in segments)
        if ids and run_id not in ids:
            theirs = ids.most_common(1)[0][0]
            return [
                self.violation(
                    f"{ctx.scan.run_dir / RUN_FILE}: names run {run_id}, but the segments "
                    f"belong to run {theirs}: the file was replaced or the run copied over",
                    kind="bad_run_file",
                )
            ]
        return []

    def _resumes(self, ctx: RunContext) -> list[Violation]:
        out = []
        for r in ctx.rows(RESUMES, label="FT001 resumes"):
            inc = r["incarnation"]
            where = Location(incarnation=inc)
            if r["starts"] > 1:
                out.append(
                    self.violation(
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
                    self.violation(
                        f"incarnation {inc} claims to resume from {ref}, which is not earlier",
                        kind="bad_resume_point",
                        location=where,
                    )
                )
            elif not r["saved"]:
                out.append(
                    self.violation(
                        f"incarnation {inc} resumed from {ref}, but the log never recorded that "
                        "checkpoint as completely saved: the weights it loaded are unaccounted for",
                        kind="unsaved_checkpoint",
                        location=where,
                    )
                )
        for r in ctx.rows(UNSTARTED, label="FT001 unstarted"):
            out.append(
                self.violation(
                    f"incarnation {r['incarnation']} wrote {r['events']} events (e.g. writer "
                    f"{r['writer']}) but never logged run_started: its resume point is unknown",
                    kind="unstarted_incarnation",
                    location=Location(incarnation=r["incarnation"], writer=r["writer"]),
                )
            )
        return out


def _digest_problem(info: SegmentInfo) -> str | None:
    """Why a segment's bytes do not match its recorded digest; None when they do."""
    if not info.meta.digest:
        return "its footer has no content digest, unlike the rest of the run"
    try:
        data = info.path.read_bytes()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    actual = file_digest(data)
    if actual is None:
        return "its digest cannot be found in its footer"
    if actual != info.meta.digest:
        return f"its bytes hash to {actual[:12]}..., its footer says {info.meta.digest[:12]}..."
    return None
