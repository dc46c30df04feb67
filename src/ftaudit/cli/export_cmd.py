"""``ftaudit export RUN_DIR --tensorboard DIR --csv FILE``: committed metrics out.

Only the committed history's metrics are written (see :mod:`ftaudit.export`): a step
that was retried, or run again after a restart, appears once, with the values of the
attempt that counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import abort, emit, guarded, say


def export(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            "--tensorboard", metavar="DIR", help="Write a TensorBoard event file into DIR."
        ),
    ] = None,
    csv: Annotated[
        Path | None,
        typer.Option("--csv", metavar="FILE", help="Write the metrics as CSV ('-': stdout)."),
    ] = None,
) -> None:
    """Export the metrics of the committed history (abandoned attempts left out).

    Exit codes: 0 written, 2 unusable run directory or unwritable output.
    """
    from ftaudit.export import committed_metrics, write_csv, write_tensorboard

    if tensorboard is None and csv is None:
        abort("nothing to export: give --tensorboard DIR and/or --csv FILE", exit_codes.UNUSABLE)
    metrics = guarded(lambda: committed_metrics(run_dir))
    if tensorboard is not None:
        try:
            path = write_tensorboard(metrics, tensorboard)
        except OSError as exc:
            abort(f"cannot write {tensorboard}: {exc.strerror or exc}", exit_codes.UNUSABLE)
        say(f"ftaudit export: {len(metrics)} committed values to {path}")
    if csv is not None:
        emit(write_csv(metrics), None if str(csv) == "-" else csv)
        if str(csv) != "-":
            say(f"ftaudit export: {len(metrics)} committed values to {csv}")
    raise typer.Exit(exit_codes.OK)
