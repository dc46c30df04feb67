"""The progress display of ``ft-verify``: on stderr, and only when stderr is a terminal.

A pipe or a CI log gets no progress at all (no carriage-return spam); a person at a
terminal sees which rule runs and how far the verifier is. The bar is transient: it is
erased when verification ends, so the report that follows stands alone.

The bar is drawn when a phase starts, not by a timer thread: what a person sees does
not depend on how fast the machine is, and every phase name reaches the terminal even
when verification takes less than one refresh interval.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ftaudit.cli.terminal import Terminal

Progress = Callable[[str], None]
"""The verifier's callback: ``progress(what)`` is called as each phase (reading, a rule) starts."""


@contextmanager
def progress_display(terminal: Terminal, phases: int) -> Iterator[Progress | None]:
    """Yield a callback drawing a bar of ``phases`` steps on stderr, or None when no person
    watches stderr (:attr:`Terminal.progress`).

    Each call starts the next phase, so the bar shows how many phases have finished.
    """
    if not terminal.progress:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Bar

    console = Console(file=sys.stderr, no_color=not terminal.stderr_color)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Bar(*columns, console=console, transient=True, auto_refresh=False) as bar:
        task = bar.add_task("verifying", total=max(phases, 1))
        started = 0

        def update(what: str) -> None:
            nonlocal started
            bar.update(task, completed=min(started, phases), description=what, refresh=True)
            started += 1

        yield update
