"""``ftaudit show RUN_DIR``: the run's history and each rule's result, in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import color_enabled, emit, guarded, output_width


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
    from ftaudit.verifier.render.picture import collect
    from ftaudit.verifier.render.show import render_show

    report = guarded(lambda: verify(run_dir))
    picture = guarded(lambda: collect(run_dir))
    emit(
        render_show(
            picture, report, color=color_enabled(sys.stdout), width=output_width(sys.stdout)
        ),
        None,
    )
    raise typer.Exit(exit_codes.OK if report.passed() else exit_codes.VIOLATIONS)
