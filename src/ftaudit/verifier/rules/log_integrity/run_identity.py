"""Whose run this is: every segment, ``run.json`` and the seal name the same run."""

from __future__ import annotations

from collections import Counter, defaultdict

from ftaudit.errors import RunFileError
from ftaudit.eventlog.reader import SegmentInfo
from ftaudit.eventlog.rundir import RUN_FILE, read_run_id
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.rules.base import Rule


def foreign_segments(rule: Rule, segments: tuple[SegmentInfo, ...]) -> list[Violation]:
    """Segments of another run than the one most segments belong to."""
    runs: dict[str, list[SegmentInfo]] = defaultdict(list)
    for info in segments:
        runs[info.meta.run_id].append(info)
    if len(runs) <= 1:
        return []
    main = max(runs, key=lambda k: len(runs[k]))
    return [
        rule.violation(
            f"segment {info.path.name} of writer {info.meta.writer} belongs to run {run_id}, "
            f"not to this run ({main}): segments of another run were mixed in",
            kind="foreign_segment",
            location=Location(writer=info.meta.writer, segment=str(info.path)),
        )
        for run_id, infos in sorted(runs.items())
        if run_id != main
        for info in infos
    ]


def run_file_problems(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...]
) -> list[Violation]:
    """``run.json`` holds a valid run id, the one the segments carry."""
    try:
        run_id = read_run_id(ctx.scan.run_dir)
    except RunFileError as exc:
        return [rule.violation(str(exc), kind="bad_run_file")]
    ids = Counter(info.meta.run_id for info in segments)
    if ids and run_id not in ids:
        theirs = ids.most_common(1)[0][0]
        return [
            rule.violation(
                f"{ctx.scan.run_dir / RUN_FILE}: names run {run_id}, but the segments "
                f"belong to run {theirs}: the file was replaced or the run copied over",
                kind="bad_run_file",
            )
        ]
    return []


def seal_mismatches(
    rule: Rule, ctx: RunContext, segments: tuple[SegmentInfo, ...]
) -> list[Violation]:
    """``--manifest``: the seal is of this run, and names every writer the run holds
    (its heads are checked with the others: a writer must reach its sealed head)."""
    seal = ctx.anchors.seal
    if seal is None:
        return []
    out = []
    run_ids = {info.meta.run_id for info in segments}
    if seal.run_id not in run_ids:
        out.append(
            rule.violation(
                f"the seal is of run {seal.run_id}, not of this run ({', '.join(sorted(run_ids))})",
                kind="seal_mismatch",
            )
        )
    firsts: dict[str, SegmentInfo] = {}
    for info in sorted(segments, key=lambda i: -i.meta.first_seq):
        firsts[info.meta.writer] = info
    for writer, info in sorted(firsts.items()):
        if writer not in seal.heads:
            out.append(
                rule.violation(
                    f"writer {writer} is not in the seal: its events were added after "
                    "the run was sealed",
                    kind="seal_mismatch",
                    location=Location(
                        incarnation=info.meta.incarnation, writer=writer, segment=str(info.path)
                    ),
                )
            )
    return out
