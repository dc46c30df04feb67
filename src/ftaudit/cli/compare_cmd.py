"""``ftaudit compare BASELINE_RUN TARGET_RUN``: the committed metrics of two runs must agree.

The gate for "faults do not change training": run once without faults (the baseline)
and once with them (the target), same seed; every committed metric must match within
tolerance. Exit codes: 0 equivalent, 1 differences, 2 a run could not be read or nothing
was compared.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import DEFAULT_WIDTH, Terminal, abort, emit, guarded, say

if TYPE_CHECKING:
    from ftaudit.verifier.compare import Comparison

MAX_SHOWN = 20
"""How many differences the text report lists (JSON lists them all)."""


class CompareFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class ReduceChoice(StrEnum):
    """Mirrors ``ftaudit.verifier.compare.Reduce``, kept light here."""

    MEAN = "mean"
    SUM = "sum"


def compare(
    baseline: Annotated[
        Path, typer.Argument(metavar="BASELINE_RUN", help="The reference run (e.g. no faults).")
    ],
    target: Annotated[
        Path, typer.Argument(metavar="TARGET_RUN", help="The run to check (e.g. with faults).")
    ],
    rtol: Annotated[
        float, typer.Option("--rtol", min=0.0, help="Relative tolerance: |t-b| <= atol+rtol*|b|.")
    ] = 1e-5,
    atol: Annotated[float, typer.Option("--atol", min=0.0, help="Absolute tolerance.")] = 1e-8,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            metavar="GLOB",
            help="Compare only metrics matching GLOB (e.g. 'loss', 'eval/*'); repeatable.",
        ),
    ] = None,
    reduce: Annotated[
        ReduceChoice,
        typer.Option(
            "--reduce",
            case_sensitive=False,
            help="How values of several writers (cells, ranks) at one step become one.",
        ),
    ] = ReduceChoice.MEAN,
    fmt: Annotated[
        CompareFormat, typer.Option("--format", "-f", case_sensitive=False, help="Output format.")
    ] = CompareFormat.TEXT,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write the result to FILE."),
    ] = None,
) -> None:
    """Check that TARGET_RUN's committed metrics match BASELINE_RUN's within tolerance.

    Only the committed history counts (retried and rolled-back attempts are ignored).
    NaN on one side only, and a step or metric logged on one side only, are differences.
    Exit codes: 0 equivalent, 1 differences, 2 unreadable run or nothing to compare.
    """
    from ftaudit.verifier.compare import Reduce, compare_runs

    comparison = guarded(
        lambda: compare_runs(
            baseline,
            target,
            rtol=rtol,
            atol=atol,
            metrics=tuple(metrics or ()),
            reduce=Reduce(reduce.value),
        )
    )
    if not comparison.metrics:
        which = f" matching {', '.join(metrics)}" if metrics else ""
        abort(
            f"nothing to compare: neither run logged a committed metric{which}",
            exit_codes.UNUSABLE,
        )
    if fmt is CompareFormat.JSON:
        import json

        text = json.dumps(comparison.to_dict(), indent=2) + "\n"
    else:
        term, to_stdout = Terminal.detect(), output is None
        text = render_comparison(
            comparison,
            color=to_stdout and term.stdout_color,
            width=term.stdout_width if to_stdout else DEFAULT_WIDTH,
        )
    emit(text, output)
    if output is not None or fmt is not CompareFormat.TEXT:
        say(f"ftaudit compare: {comparison.headline()}")
    raise typer.Exit(exit_codes.OK if comparison.passed else exit_codes.VIOLATIONS)


def render_comparison(comparison: Comparison, *, color: bool, width: int) -> str:
    """The comparison for a person: one row per metric, the first differences, the verdict."""

    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ftaudit.console import string_console

    console, out = string_console(color=color, width=width)
    console.print(Text("ftaudit compare", style="bold"))
    console.print(Text(f"  baseline {comparison.baseline}"), soft_wrap=True)
    console.print(Text(f"  target   {comparison.target}"), soft_wrap=True)
    console.print(
        Text(f"  committed history only; {comparison.reduce.value} over writers per step")
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("metric")
    for header in ("steps", "differences", "max abs diff", "max rel diff"):
        table.add_column(header, justify="right", no_wrap=True)
    for m in comparison.metrics:
        table.add_row(
            m.name,
            str(m.steps),
            Text(str(m.differences), style="red" if m.differences else "green"),
            f"{m.max_abs_diff:.3g}",
            f"{m.max_rel_diff:.3g}",
        )
    console.print(table)
    diffs = comparison.differences
    if diffs:
        console.print()
        title = "Differences" if len(diffs) <= MAX_SHOWN else f"Differences (first {MAX_SHOWN})"
        console.print(Text(f"{title} of {len(diffs)}", style="bold"))
        for d in diffs[:MAX_SHOWN]:
            console.print(Text(f"  {d.message}"), soft_wrap=True)
        if len(diffs) > MAX_SHOWN:
            console.print(Text(f"  ... and {len(diffs) - MAX_SHOWN} more"))
    console.print()
    console.print(
        Text(comparison.headline(), style="bold green" if comparison.passed else "bold red"),
        soft_wrap=True,
    )
    return out.getvalue()
