"""``ftaudit``: the umbrella command. Each subcommand lives in its own module.

To add a command, write ``ftaudit/cli/<name>_cmd.py`` with a typer-style function whose
module imports only typer at the top (heavy imports go inside the function), and register
it below with one line. ``ftaudit --help`` must stay instant.
"""

from __future__ import annotations

import typer

from ftaudit.cli import (
    compact_cmd,
    compare_cmd,
    demo_cmd,
    export_cmd,
    manifest_cmd,
    report_cmd,
    seal_cmd,
    show_cmd,
    sql_cmd,
    synth_cmd,
    verify_app,
)
from ftaudit.cli.startup import small_pages_for_numpy
from ftaudit.cli.terminal import run_app, version_option

app = typer.Typer(
    name="ftaudit",
    help="Prove that a fault-tolerant training run trained every sample exactly once.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=version_option, is_eager=True, help="Print the version."
    ),
) -> None:
    """Prove that a fault-tolerant training run trained every sample exactly once."""


# One line per command (later: demo, show, report, compact, synth, compare).
app.command("verify")(verify_app.verify)
app.command("sql")(sql_cmd.sql)
app.command("seal")(seal_cmd.seal)
app.command("compact")(compact_cmd.compact)
app.command("demo")(demo_cmd.demo)
app.command("show")(show_cmd.show)
app.command("report")(report_cmd.report)
app.command("compare")(compare_cmd.compare)
app.command("synth")(synth_cmd.synth)
app.command("export")(export_cmd.export)
app.command("manifest")(manifest_cmd.manifest)


def main() -> None:
    """Entry point of the ``ftaudit`` script."""
    small_pages_for_numpy()
    run_app(app, "ftaudit")
