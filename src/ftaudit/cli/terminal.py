"""Talking to the terminal: stdout carries data, stderr carries talk, failures go via abort.

Every command writes its result (a report, query rows) with :func:`emit` and everything
else (progress, summaries, errors) to stderr; every failure ends in :func:`abort`, which
prints one line and raises ``typer.Exit``, so no traceback ever reaches a user.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn, TypeVar

from ftaudit.cli import exit_codes

if TYPE_CHECKING:
    import typer

T = TypeVar("T")

DEBUG_ENV = "FTAUDIT_DEBUG"
"""Set to 1 to see the traceback of an internal error instead of its one-line summary."""

DEFAULT_WIDTH = 100
"""Report width when stdout is not a terminal and ``COLUMNS`` is unset."""


def one_line(message: str) -> str:
    """A message squeezed to one line: DuckDB's caret context (``LINE 1: ...``) dropped."""
    lines = []
    for line in str(message).splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines) or "unknown error"


def say(message: str) -> None:
    """One line of talk on stderr."""
    print(message, file=sys.stderr, flush=True)


def abort(message: str, code: int) -> NoReturn:
    """Print ``error: MESSAGE`` as one line on stderr and exit with ``code``."""
    import typer

    from ftaudit.cli.interrupts import first_report

    if code == exit_codes.INTERRUPTED and not first_report():
        raise typer.Exit(code)
    say(f"error: {one_line(message)}")
    raise typer.Exit(code)


def guarded(action: Callable[[], T], *, ftaudit_code: int = exit_codes.UNUSABLE) -> T:
    """Run ``action``; turn an ftaudit error into ``abort(..., ftaudit_code)``.

    Anything else is a bug in ftaudit: it is reported as one line with exit code 2
    (``FTAUDIT_DEBUG=1`` shows the traceback). ``typer.Exit`` passes through untouched.
    After Ctrl-C, whatever the interrupted work raised (DuckDB's interruption, a
    ``KeyboardInterrupt``) is reported as ``interrupted``, exit 130.
    """
    from ftaudit.cli.interrupts import interrupted
    from ftaudit.errors import FtauditError

    try:
        return action()
    except KeyboardInterrupt:
        message, code = "interrupted", exit_codes.INTERRUPTED
    except Exception as exc:
        if typer_exit_code(exc) is not None:
            raise
        if interrupted():
            message, code = "interrupted", exit_codes.INTERRUPTED
        elif isinstance(exc, FtauditError):
            message, code = str(exc), ftaudit_code
        elif os.environ.get(DEBUG_ENV):
            raise
        else:
            message, code = internal_error(exc), exit_codes.UNUSABLE
    abort(message, code)


def internal_error(exc: BaseException) -> str:
    return (
        f"internal error: {type(exc).__name__}: {exc} "
        f"(set {DEBUG_ENV}=1 to see the traceback, and please report it)"
    )


def typer_exit_code(exc: BaseException) -> int | None:
    """The exit code ``exc`` carries if it is a ``typer.Exit``, else ``None``.

    Looked up without importing typer (``ft-verify``'s lean path never loads it): while
    typer is not loaded, nothing can have raised its ``Exit``.
    """
    loaded = sys.modules.get("typer")
    return exc.exit_code if loaded is not None and isinstance(exc, loaded.Exit) else None


def version_option(value: bool) -> None:
    """``--version``: print the version and exit (an eager option of every entry point)."""
    if value:
        import typer

        from ftaudit import __version__

        print(f"ftaudit {__version__}")
        raise typer.Exit(exit_codes.OK)


def run_app(app: typer.Typer, prog_name: str) -> NoReturn:
    """Run a typer app as a script (:func:`run_script`)."""
    run_script(lambda: app(prog_name=prog_name))


def run_script(command: Callable[[], object]) -> NoReturn:
    """Run ``command`` as a script: the last net under every command.

    ``command`` ends in ``SystemExit`` (typer turns ``typer.Exit`` into it, not an
    ``Exception``), so exit codes pass through; any other exception escaping a command
    (an import error in a broken install, a bug) becomes one line on stderr and exit
    code 2, never a traceback.
    """
    from ftaudit.cli.interrupts import MESSAGE, ctrl_c_stops_duckdb, first_report, interrupted

    with ctrl_c_stops_duckdb():
        try:
            command()
        except SystemExit:
            if not interrupted():
                raise
        except KeyboardInterrupt:
            pass
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            if not interrupted():
                say(f"error: {one_line(internal_error(exc))}")
                sys.exit(exit_codes.UNUSABLE)
    # Ctrl-C, wherever it landed (typer turns a KeyboardInterrupt into a silent exit 130)
    if first_report():
        say(MESSAGE)
    sys.exit(exit_codes.INTERRUPTED)


def _isatty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True)
class Terminal:
    """What this command's output streams are, looked at once: every command asks this
    object (never the streams) whether to colour, how wide to draw and whether a person
    watches stderr."""

    stdout_tty: bool
    stderr_tty: bool
    no_color: bool
    """``NO_COLOR`` is set (https://no-color.org): no colour anywhere."""
    stdout_width: int
    """The terminal's width, else ``COLUMNS``, else :data:`DEFAULT_WIDTH`."""

    @classmethod
    def detect(cls, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> Terminal:
        out = stdout if stdout is not None else sys.stdout
        err = stderr if stderr is not None else sys.stderr
        out_tty = _isatty(out)
        if out_tty:
            width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
        else:
            try:
                width = max(int(os.environ["COLUMNS"]), 40)
            except (KeyError, ValueError):
                width = DEFAULT_WIDTH
        return cls(out_tty, _isatty(err), bool(os.environ.get("NO_COLOR")), width)

    @property
    def stdout_color(self) -> bool:
        """Colour on stdout: only on a terminal, and never with ``NO_COLOR``."""
        return self.stdout_tty and not self.no_color

    @property
    def stderr_color(self) -> bool:
        return self.stderr_tty and not self.no_color

    @property
    def progress(self) -> bool:
        """Progress bars only for a person: stderr must be a terminal."""
        return self.stderr_tty


def emit(text: str, output: Path | None) -> None:
    """The command's result: to ``output`` when given, else to stdout."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        abort(f"cannot write {output}: {exc.strerror or exc}", exit_codes.UNUSABLE)
