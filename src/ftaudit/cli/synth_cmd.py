"""``ftaudit synth RUN_DIR``: write a large synthetic run, valid or with one planted bug.

The run goes through the public event API (one writer per simulated process), so the
command is also the writer's load test. Talk (what was written, how fast) goes to
stderr; nothing is written to stdout except the bug list of ``--list-bugs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import abort, emit, guarded, say

if TYPE_CHECKING:
    from ftaudit.synth import SynthResult


def synth(
    run_dir: Annotated[
        Path | None,
        typer.Argument(metavar="RUN_DIR", help="A new directory to write the run into."),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Committed training steps.")] = 100,
    cells: Annotated[int, typer.Option(min=1, help="Cells (data-parallel replicas).")] = 2,
    ranks: Annotated[int, typer.Option(min=1, help="Trainer ranks per cell.")] = 1,
    buffer_size: Annotated[
        int, typer.Option("--buffer-size", "-B", min=1, help="Witness ring size B.")
    ] = 65_536,
    samples_per_step: Annotated[
        int, typer.Option(min=1, help="Samples (witness ids) per step; at most B - 0.7 B.")
    ] = 1_024,
    restarts: Annotated[
        int, typer.Option(min=0, help="Crashes, each followed by a resume from a checkpoint.")
    ] = 0,
    retries: Annotated[
        int, typer.Option(min=0, help="Steps whose first attempt a cell discards.")
    ] = 0,
    bug: Annotated[str | None, typer.Option(help="Plant one defect (see --list-bugs).")] = None,
    bug_step: Annotated[
        int | None, typer.Option(min=0, help="The step the bug strikes (default: near the end).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the retried steps and discarding cells.")] = 0,
    checkpoint_every: Annotated[
        int | None, typer.Option(min=1, help="Steps between checkpoints (default steps // 10).")
    ] = None,
    flush_every: Annotated[
        int, typer.Option(min=1, help="Every writer seals a segment after this many steps.")
    ] = 50,
    roll_segments: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Writers roll this many small segments into one (0: never; default: the "
            "writer's, WriterOptions.roll_segments).",
        ),
    ] = None,
    fsync: Annotated[
        bool, typer.Option("--fsync/--no-fsync", help="Fsync every segment (slower).")
    ] = False,
    fingerprints: Annotated[
        bool,
        typer.Option(
            "--fingerprints/--no-fingerprints",
            help="Log what each cell fed and keep the dataset's manifest (FT008 checks them).",
        ),
    ] = True,
    manifest: Annotated[
        bool,
        typer.Option(
            "--manifest/--no-manifest",
            help="Keep and declare the dataset's manifest with the fingerprints (without it, "
            "FT008 checks that contents agree and do not repeat, not that they are the items).",
        ),
    ] = True,
    dataset_size: Annotated[
        int | None,
        typer.Option(
            min=1, help="Items of the synthetic dataset (default: min(steps x samples, 65,536))."
        ),
    ] = None,
    list_bugs: Annotated[
        bool, typer.Option("--list-bugs", help="Print the bug names and the rule catching each.")
    ] = False,
) -> None:
    """Write a synthetic fault-tolerant run: restarts, retries, snapshots, checksums.

    Without --bug the run verifies clean by construction. Exit codes: 0 written,
    2 bad options or the directory already holds a run.
    """
    from ftaudit.synth import BUGS, SynthConfig, synthesize

    if list_bugs:
        emit("".join(f"{b.name}\t{b.rule}\t{b.description}\n" for b in BUGS), None)
        raise typer.Exit(exit_codes.OK)
    if run_dir is None:
        abort("missing argument RUN_DIR", exit_codes.UNUSABLE)
    config = SynthConfig(
        steps=steps,
        cells=cells,
        ranks=ranks,
        buffer_size=buffer_size,
        samples_per_step=samples_per_step,
        restarts=restarts,
        retries=retries,
        bug=bug,
        bug_step=bug_step,
        seed=seed,
        checkpoint_every=checkpoint_every,
        flush_every=flush_every,
        **({} if roll_segments is None else {"roll_segments": roll_segments}),
        fsync=fsync,
        fingerprints=fingerprints,
        manifest=manifest,
        dataset_size=dataset_size,
    )

    def write() -> SynthResult:
        try:
            return synthesize(run_dir, config)
        except ValueError as exc:
            abort(str(exc), exit_codes.UNUSABLE)

    result = guarded(write)
    planted = ""
    if result.bug is not None:
        planted = f"; bug {result.bug.name} at step {result.bug_step} (expect {result.bug.rule})"
    say(
        f"ftaudit synth: {result.events:,} events, {result.incarnations} incarnation(s) in "
        f"{run_dir} ({result.seconds:.1f} s, {result.events_per_second:,.0f} events/s){planted}"
    )
    raise typer.Exit(exit_codes.OK)
