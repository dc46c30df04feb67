"""``ftaudit demo [RUN_DIR]``: a real fault-tolerant training on Ray, then its verification.

Needs the ``ray`` extra (torch, Ray, torchft). Progress goes to stderr, the verifier's
report to stdout, and the exit code is the verifier's: 0 verified, 1 violations, 2 the
demo or the verification could not run.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import Terminal, abort, emit, guarded, say

DEMO_NEEDS = ("ray", "torch", "torchft")
"""What the ``ray`` extra installs and the demo's processes import."""


def _missing_modules(names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` this interpreter cannot import (found without importing)."""
    import importlib.util

    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


class ObjectiveChoice(StrEnum):
    RL = "rl"
    LM = "lm"


def demo(
    run_dir: Annotated[
        Path | None,
        typer.Argument(help="Where to write the run (default: a new temporary directory)."),
    ] = None,
    cells: Annotated[int, typer.Option(min=1, help="Cells (data-parallel replicas).")] = 2,
    steps: Annotated[int, typer.Option(min=1, help="Training steps.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the data, the rewards and the model.")] = 0,
    faults: Annotated[
        str | None,
        typer.Option(
            help="Fault schedule as JSON text or a file: "
            '{"faults": [...], "discards": [...], "quorum_timeouts": [...]}.'
        ),
    ] = None,
    no_faults: Annotated[bool, typer.Option("--no-faults", help="Inject no fault.")] = False,
    bug: Annotated[
        str | None, typer.Option(help="Train with one defect of the bug matrix (--list-bugs).")
    ] = None,
    list_bugs: Annotated[
        bool, typer.Option("--list-bugs", help="Print the bug names, one a line, and exit.")
    ] = False,
    objective: Annotated[
        ObjectiveChoice, typer.Option(help="rl: GRPO-like; lm: next-token prediction.")
    ] = ObjectiveChoice.RL,
) -> None:
    """Train a tiny model on Ray with faults and restarts, then verify it exactly-once.

    Exit codes: the verifier's (0 verified, 1 violations, 2 could not run or verify);
    4 without the ray extra (torch, Ray, torchft).
    """
    from ftaudit.demo.bugs import BUGS, get_bug

    if list_bugs:
        emit("".join(f"{b.name}\n" for b in BUGS), None)
        raise typer.Exit(exit_codes.OK)
    if faults is not None and no_faults:
        abort("--faults and --no-faults exclude each other", exit_codes.UNUSABLE)
    missing = _missing_modules(DEMO_NEEDS)
    if missing:  # before anything is created: a core install leaves nothing behind
        abort(
            f"the demo needs {', '.join(missing)}: install ftaudit[ray] "
            "(pip install 'ftaudit[ray]')",
            exit_codes.MISSING_EXTRA,
        )
    try:
        get_bug(bug)
    except ValueError as exc:
        abort(str(exc), exit_codes.UNUSABLE)

    from ftaudit.demo.config import DemoConfig
    from ftaudit.demo.run import new_run_dir, run_demo
    from ftaudit.demo.schedule import DemoSchedule, default_schedule

    if no_faults:
        schedule = DemoSchedule()
    elif faults is None:
        schedule = default_schedule(cells)
    else:
        text = faults if faults.lstrip().startswith(("{", "[")) else _read(Path(faults))
        schedule = guarded(lambda: _parse(DemoSchedule, text))
    cfg = DemoConfig(
        run_dir=str(run_dir if run_dir is not None else new_run_dir()),
        cells=cells,
        steps=steps,
        seed=seed,
        objective=objective.value,
        faults_json=schedule.to_json(),
        bug=bug,
    )
    from ftaudit.eventlog.rundir import is_run

    if run_dir is not None and is_run(run_dir):
        abort(f"{run_dir} already holds a run; give a new directory", exit_codes.UNUSABLE)

    from ftaudit.verifier.render import render
    from ftaudit.verifier.render.describe import summarize

    report = guarded(lambda: run_demo(cfg))
    term = Terminal.detect()
    emit(
        render(report, "text", color=term.stdout_color, width=term.stdout_width),
        None,
    )
    say(f"ftaudit demo: {summarize(report, strict=False).headline()}; run directory {cfg.run_dir}")
    raise typer.Exit(exit_codes.OK if report.passed() else exit_codes.VIOLATIONS)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        abort(f"cannot read the fault schedule {path}: {exc.strerror or exc}", exit_codes.UNUSABLE)


def _parse(schedule_type: type, text: str) -> object:
    from ftaudit.errors import FtauditError

    try:
        return schedule_type.parse(text)  # type: ignore[attr-defined]
    except ValueError as exc:  # pydantic's ValidationError and JSON errors are ValueErrors
        raise FtauditError(f"bad fault schedule: {exc}") from None
