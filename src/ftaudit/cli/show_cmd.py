"""``ftaudit show RUN_DIR``: the run's history and each rule's result, in the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import Terminal, emit, guarded


def show(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
) -> None:
    """Summarize a run: incarnations, steps, retries, faults, heals, checkpoints, rules.

    Exit codes: 0 all rules hold, 1 violations, 2 could not read the run.
    """
    from ftaudit.verifier import verify
    from ftaudit.verifier.history import collect
    from ftaudit.verifier.render.show import render_show
    from ftaudit.verifier.session import Session

    term = Terminal.detect()
    with guarded(lambda: Session.open(run_dir)) as session:  # the run is loaded once
        report = guarded(lambda: verify(session))
        history = guarded(lambda: collect(session))
    emit(render_show(history, report, color=term.stdout_color, width=term.stdout_width), None)
    raise typer.Exit(exit_codes.OK if report.passed() else exit_codes.VIOLATIONS)
