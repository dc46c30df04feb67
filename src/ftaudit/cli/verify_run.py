"""What ``ft-verify`` does once its command line is parsed: run the rules, report, exit.

Both parsers end here (typer's ``ftaudit.cli.verify_app`` and the lean
``ftaudit.cli.verify_options.parse_plain``), so the work, the report and the exit code are
one code path. The module imports no typer: the lean path never loads it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ftaudit.cli import exit_codes
from ftaudit.cli.startup import imports_made
from ftaudit.cli.terminal import DEFAULT_WIDTH, Terminal, abort, emit, guarded, say
from ftaudit.cli.verify_options import ReportFormat, VerifyArgs

if TYPE_CHECKING:
    from ftaudit.verifier.findings import Report
    from ftaudit.verifier.seal import Seal


def execute(args: VerifyArgs) -> NoReturn:
    """Verify ``args.run_dir`` as ``args`` says; exit 0 (holds), 1 (violations) or 2."""
    from ftaudit.cli.progress import progress_display
    from ftaudit.eventlog.keys import load_key
    from ftaudit.verifier import select_rules
    from ftaudit.verifier import verify as run_verify
    from ftaudit.verifier.anchors import Anchors

    imports_made()
    select, skip = args.rule or None, args.skip_rule
    key = guarded(lambda: load_key(args.key_file))
    manifest = args.manifest
    seal = guarded(lambda: _read_seal(manifest, key)) if manifest is not None else None
    rules = guarded(lambda: select_rules(select, skip))  # a bad name fails before any work
    anchors = Anchors(
        require_finished=args.require_finished,
        fallback_dirs=tuple(str(d) for d in args.fallback),
        seal=seal,
        mac_key=key,
    )
    term = Terminal.detect()
    if args.follow:
        if args.since_step is not None:
            abort("--follow and --since-step do not go together", exit_codes.UNUSABLE)
        from ftaudit.cli.follow import follow as follow_run
        from ftaudit.verifier.pacing import CpuShare

        share = args.cpu_share
        report = guarded(
            lambda: follow_run(
                args.run_dir,
                interval=args.interval,
                pacer=CpuShare(share) if share is not None else None,
                select=select,
                skip=skip,
                data_manifests=args.data_manifest,
                anchors=anchors,
            )
        )
        _finish(report, args, term)
    with progress_display(term, phases=len(rules) + 1) as progress:
        report = guarded(
            lambda: run_verify(
                args.run_dir,
                select=select,
                skip=skip,
                progress=progress,
                since_step=args.since_step,
                data_manifests=args.data_manifest,
                anchors=anchors,
            )
        )
    _finish(report, args, term)


def _finish(report: Report, args: VerifyArgs, term: Terminal) -> NoReturn:
    """Print the report (stdout or ``--output``) and exit with the verdict's code."""
    from ftaudit.verifier.render import render

    fmt, output, strict = args.fmt, args.output, args.strict
    to_terminal = output is None and fmt is ReportFormat.TEXT
    text = render(
        report,
        fmt.value,
        strict=strict,
        color=to_terminal and term.stdout_color,
        width=term.stdout_width if output is None else DEFAULT_WIDTH,
    )
    emit(text, output)
    if not to_terminal:
        from ftaudit.verifier.render.describe import summarize

        where = f"; {fmt.value} report in {output}" if output is not None else ""
        say(f"ft-verify: {summarize(report, strict=strict).headline()}{where}")
    # SystemExit, not typer.Exit: typer lets it through unchanged, and the lean path has no typer
    sys.exit(exit_codes.OK if report.passed(strict=strict) else exit_codes.VIOLATIONS)


def _read_seal(path: Path, key: bytes | None) -> Seal:
    from ftaudit.verifier.seal import read_seal

    return read_seal(path, key)
