"""``ft-verify`` (also ``ftaudit verify``) as typer declares it: ``--help``, usage errors.

Every option is built from its declaration in ``ftaudit.cli.verify_options`` (the lean
parser reads the same ones); the work is ``ftaudit.cli.verify_run.execute``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import verify_options as opts
from ftaudit.cli.terminal import version_option
from ftaudit.cli.verify_options import ReportFormat, VerifyArgs


def _option(option: opts.Option, **extra: object) -> typer.models.OptionInfo:
    """``option`` as typer declares it (its names, metavar, help and bounds)."""
    if option.minimum is not None:
        extra["min"] = option.minimum
    if option.maximum is not None:
        extra["max"] = option.maximum
    if option.metavar is not None:
        extra["metavar"] = option.metavar
    return typer.Option(*option.decls, help=option.help, **extra)  # type: ignore[arg-type]


def verify(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help=opts.RUN_DIR_HELP)],
    fmt: Annotated[ReportFormat, _option(opts.FORMAT, case_sensitive=False)] = ReportFormat.TEXT,
    output: Annotated[Path | None, _option(opts.OUTPUT)] = None,
    rule: Annotated[list[str] | None, _option(opts.RULE)] = None,
    skip_rule: Annotated[list[str] | None, _option(opts.SKIP_RULE)] = None,
    strict: Annotated[bool, _option(opts.STRICT)] = False,
    since_step: Annotated[int | None, _option(opts.SINCE_STEP)] = None,
    follow: Annotated[bool, _option(opts.FOLLOW)] = False,
    interval: Annotated[float, _option(opts.INTERVAL)] = opts.DEFAULT_INTERVAL,
    cpu_share: Annotated[float | None, _option(opts.CPU_SHARE)] = None,
    data_manifest: Annotated[list[Path] | None, _option(opts.DATA_MANIFEST)] = None,
    require_finished: Annotated[bool, _option(opts.REQUIRE_FINISHED)] = False,
    fallback: Annotated[list[Path] | None, _option(opts.FALLBACK_DIR)] = None,
    manifest: Annotated[Path | None, _option(opts.MANIFEST)] = None,
    key_file: Annotated[Path | None, _option(opts.KEY_FILE)] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=version_option, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Verify that a run trained every sample exactly once.

    Exit codes: 0 all rules hold, 1 violations, 2 could not verify (unusable input).
    """
    from ftaudit.cli.verify_run import execute

    execute(
        VerifyArgs(
            run_dir=run_dir,
            fmt=fmt,
            output=output,
            rule=tuple(rule or ()),
            skip_rule=tuple(skip_rule or ()),
            strict=strict,
            since_step=since_step,
            follow=follow,
            interval=interval,
            cpu_share=cpu_share,
            data_manifest=tuple(data_manifest or ()),
            require_finished=require_finished,
            fallback=tuple(fallback or ()),
            manifest=manifest,
            key_file=key_file,
        )
    )


def build_app() -> typer.Typer:
    """``ft-verify`` as a one-command typer app."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(name="ft-verify")(verify)
    return app
