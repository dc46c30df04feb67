"""``ft-verify RUN_DIR``: run the rules, print a report, exit 0/1/2 (the script's entry point).

A gate runs ``ft-verify`` after every step, so this module imports no typer: a plain
command line (``ftaudit.cli.verify_options.parse_plain``) goes straight to the work
(``ftaudit.cli.verify_run``); any other (``--help``, ``--version``, a usage error, a form
the lean parser leaves alone) is typer's (``ftaudit.cli.verify_app``), as it always was.
"""

from __future__ import annotations

import errno
import sys
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

from ftaudit.cli import exit_codes
from ftaudit.cli.startup import collecting_late, small_pages_for_numpy
from ftaudit.cli.terminal import run_app, run_script, typer_exit_code
from ftaudit.cli.verify_options import ReportFormat, VerifyArgs, parse_plain

if TYPE_CHECKING:
    import typer

__all__ = ["ReportFormat", "build_app", "main"]

PROG = "ft-verify"


def build_app() -> typer.Typer:
    """``ft-verify`` as a one-command typer app (``ftaudit.cli.verify_app``)."""
    from ftaudit.cli.verify_app import build_app as build

    return build()


def main() -> None:
    """Entry point of the ``ft-verify`` script."""
    small_pages_for_numpy()
    with collecting_late():
        args = parse_plain(sys.argv[1:])
        if args is None:
            run_app(build_app(), PROG)
        run_script(lambda: _invoke(args))


def _invoke(args: VerifyArgs) -> NoReturn:
    """Run the command as typer's standalone mode does: ``typer.Exit`` (``abort``) and
    Ctrl-C become exit codes (Ctrl-C 130), a closed stdout (``| head``) exit 1."""
    from ftaudit.cli.verify_run import execute

    try:
        execute(args)
    except KeyboardInterrupt:
        sys.exit(exit_codes.INTERRUPTED)
    except Exception as exc:
        code = typer_exit_code(exc)
        if code is not None:
            sys.exit(code)
        if not isinstance(exc, OSError) or exc.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper  # what typer does on EPIPE

        sys.stdout = cast(TextIO, PacifyFlushWrapper(sys.stdout))
        sys.stderr = cast(TextIO, PacifyFlushWrapper(sys.stderr))
        sys.exit(1)
