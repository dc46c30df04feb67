"""``ftaudit compact RUN_DIR``: merge each writer's small segments into few large ones.

Crash-safe and evidence-keeping (see :mod:`ftaudit.eventlog.compact`): the verifier's
verdict is the same before, after, and after a kill at any point. A keyed run needs
its key (``$FTAUDIT_HMAC_KEY``, ``$FTAUDIT_HMAC_KEY_FILE`` or ``--key-file``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import guarded, say


def compact(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    target_rows: Annotated[
        int,
        typer.Option("--target-rows", metavar="N", help="Events per merged segment, at most."),
    ] = 100_000,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            metavar="FILE",
            help="The run's HMAC key, needed when its segments carry MACs (default: "
            "$FTAUDIT_HMAC_KEY_FILE or $FTAUDIT_HMAC_KEY).",
        ),
    ] = None,
) -> None:
    """Merge each writer's small segments into few large ones, keeping the chain evidence.

    Exit codes: 0 compacted (or nothing to do), 2 unusable or damaged run, or missing key.
    """
    from ftaudit.eventlog.compact import compact_run
    from ftaudit.eventlog.keys import load_key

    key = guarded(lambda: load_key(key_file))
    stats = guarded(lambda: compact_run(run_dir, key=key, target_rows=target_rows))
    leftovers = (
        f"; {stats.leftovers_removed} left by an earlier compaction removed"
        if stats.leftovers_removed
        else ""
    )
    say(
        f"ftaudit compact: {stats.segments_before:,} segments -> {stats.segments_after:,} "
        f"({stats.merged_groups:,} merged){leftovers}"
    )
    raise typer.Exit(exit_codes.OK)
