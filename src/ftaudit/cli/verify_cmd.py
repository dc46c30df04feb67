"""``ft-verify RUN_DIR`` (also ``ftaudit verify``): run the rules, print a report, exit 0/1/2."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.startup import collecting_late, imports_made
from ftaudit.cli.terminal import (
    DEFAULT_WIDTH,
    Terminal,
    abort,
    emit,
    guarded,
    run_app,
    say,
    version_option,
)

if TYPE_CHECKING:
    from ftaudit.verifier.findings import Report
    from ftaudit.verifier.seal import Seal


class ReportFormat(StrEnum):
    """The report formats (mirrors ``ftaudit.verifier.render.FORMATS``, kept light here)."""

    TEXT = "text"
    JSON = "json"
    JUNIT = "junit"
    MARKDOWN = "markdown"


def verify(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    fmt: Annotated[
        ReportFormat,
        typer.Option("--format", "-f", help="Report format.", case_sensitive=False),
    ] = ReportFormat.TEXT,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout."
        ),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            metavar="CODE_OR_NAME",
            help="Run only this rule (code or name, e.g. FT004); repeatable.",
        ),
    ] = None,
    skip_rule: Annotated[
        list[str] | None,
        typer.Option(
            "--skip-rule",
            metavar="CODE_OR_NAME",
            help="Do not run this rule (code or name); repeatable.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Warnings fail too (exit 1), not only errors.")
    ] = False,
    since_step: Annotated[
        int | None,
        typer.Option(
            "--since-step",
            metavar="K",
            min=0,
            help="Incremental: check only steps >= K (earlier ones were checked before); "
            "reads only the segments those steps need.",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Follow a live run: judge its steps as they settle (provisional, on "
            "stderr) and print the final report once it finished; the run directory may "
            "not exist yet. Ctrl-C stops it (exit 130).",
        ),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            metavar="SECONDS",
            min=0.01,
            help="With --follow: how long to wait between two looks at the run.",
        ),
    ] = 1.0,
    data_manifest: Annotated[
        list[Path] | None,
        typer.Option(
            "--data-manifest",
            metavar="FILE",
            help="A dataset manifest kept outside the run (found by the digest the run "
            "names; FT008); repeatable.",
        ),
    ] = None,
    require_finished: Annotated[
        bool,
        typer.Option(
            "--require-finished",
            help="Fail a run whose last incarnation logged no run_finished (crashed, still "
            "running, or its end deleted); name writers no record vouches for.",
        ),
    ] = False,
    fallback: Annotated[
        list[Path] | None,
        typer.Option(
            "--fallback-dir",
            metavar="DIR",
            help="Also read writers' last-chance records (lost events) from DIR; repeatable "
            "(always read: $FTAUDIT_FALLBACK_DIR, else <temp dir>/ftaudit-fallback).",
        ),
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            metavar="SEAL",
            help="A seal from 'ftaudit seal', kept outside the run: every writer must still "
            "reach its sealed head, and no writer may be added.",
        ),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            metavar="FILE",
            help="The run's HMAC key: segments and checkpoint records must carry MACs made "
            "with it, and a signed seal is checked with it (default: $FTAUDIT_HMAC_KEY_FILE "
            "or $FTAUDIT_HMAC_KEY).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_option, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Verify that a run trained every sample exactly once.

    Exit codes: 0 all rules hold, 1 violations, 2 could not verify (unusable input).
    """
    from ftaudit.cli.progress import progress_display
    from ftaudit.eventlog.keys import load_key
    from ftaudit.verifier import select_rules
    from ftaudit.verifier import verify as run_verify
    from ftaudit.verifier.anchors import Anchors

    imports_made()
    select, skip = rule or None, tuple(skip_rule or ())
    key = guarded(lambda: load_key(key_file))
    seal = guarded(lambda: _read_seal(manifest, key)) if manifest is not None else None
    rules = guarded(lambda: select_rules(select, skip))  # a bad name fails before any work
    anchors = Anchors(
        require_finished=require_finished,
        fallback_dirs=tuple(str(d) for d in fallback or ()),
        seal=seal,
        mac_key=key,
    )
    term = Terminal.detect()
    if follow:
        if since_step is not None:
            abort("--follow and --since-step do not go together", exit_codes.UNUSABLE)
        from ftaudit.cli.follow import follow as follow_run

        report = guarded(
            lambda: follow_run(
                run_dir,
                interval=interval,
                select=select,
                skip=skip,
                data_manifests=tuple(data_manifest or ()),
                anchors=anchors,
            )
        )
        _finish(report, fmt, output, strict, term)
    with progress_display(term, phases=len(rules) + 1) as progress:
        report = guarded(
            lambda: run_verify(
                run_dir,
                select=select,
                skip=skip,
                progress=progress,
                since_step=since_step,
                data_manifests=tuple(data_manifest or ()),
                anchors=anchors,
            )
        )
    _finish(report, fmt, output, strict, term)


def _finish(
    report: Report, fmt: ReportFormat, output: Path | None, strict: bool, term: Terminal
) -> NoReturn:
    """Print the report (stdout or ``output``) and exit with the verdict's code."""
    from ftaudit.verifier.render import render

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
    raise typer.Exit(exit_codes.OK if report.passed(strict=strict) else exit_codes.VIOLATIONS)


def _read_seal(path: Path, key: bytes | None) -> Seal:
    from ftaudit.verifier.seal import read_seal

    return read_seal(path, key)


def build_app() -> typer.Typer:
    """``ft-verify`` as a one-command typer app."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(name="ft-verify")(verify)
    return app


def main() -> None:
    """Entry point of the ``ft-verify`` script."""
    with collecting_late():
        run_app(build_app(), "ft-verify")
