"""``ftaudit report RUN_DIR -o report.html``: the run as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import emit, guarded, say


def report(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="FILE", help="Where to write the HTML page."),
    ] = Path("report.html"),
) -> None:
    """Write an HTML report: timeline, witness coverage, metric curves, findings.

    The page is one file with no external resources; it opens without network.
    Exit codes (after writing the page): 0 all rules hold, 1 violations, 2 could not read
    the run or write the page.
    """
    from ftaudit.cli.progress import progress_display
    from ftaudit.cli.terminal import Terminal
    from ftaudit.verifier import select_rules, verify
    from ftaudit.verifier.history import collect
    from ftaudit.verifier.render.describe import summarize
    from ftaudit.verifier.render.html import render_html
    from ftaudit.verifier.session import Session

    # phases: reading, each rule, the history, the page
    phases = len(select_rules()) + 3
    with progress_display(Terminal.detect(), phases=phases) as progress:
        if progress:
            progress(f"reading {run_dir}")
        with guarded(lambda: Session.open(run_dir)) as session:  # the run is loaded once
            result = guarded(lambda: verify(session, progress=progress))
            if progress:
                progress("history")
            history = guarded(lambda: collect(session))
        if progress:
            progress("page")
        page = render_html(history, result)
    emit(page, output)
    say(f"ftaudit report: {summarize(result, strict=False).headline()}; page in {output}")
    raise typer.Exit(exit_codes.OK if result.passed() else exit_codes.VIOLATIONS)
