"""The one way ftaudit renders rich output into a string (the CLI and the verifier's renderers)."""

from __future__ import annotations

import io

from rich.console import Console


def string_console(*, color: bool, width: int) -> tuple[Console, io.StringIO]:
    """A console that writes into the returned buffer: fixed width, colour only when asked,
    no markup, highlighting or emoji guessing (run data must print as it is)."""
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
    )
    return console, out
