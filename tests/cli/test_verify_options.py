"""``ft-verify``'s lean parser against typer's: the same arguments, or it leaves the line to typer.

``ftaudit.cli.verify_options.parse_plain`` must never read a command line differently
from typer: for every line it parses, typer (run on the same line, the command's work
replaced by a recorder) must hand the same :class:`VerifyArgs` to the work; every line it
refuses goes to typer, whose help and usage errors the user then sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftaudit.cli import verify_options, verify_run
from ftaudit.cli.verify_cmd import build_app
from ftaudit.cli.verify_options import OPTIONS, ReportFormat, VerifyArgs, parse_plain

PLAIN = [
    ["run"],
    ["run", "--format", "json"],
    ["--format=junit", "run"],
    ["run", "-f", "markdown", "-o", "out.md"],
    ["run", "--output=out.json", "--format", "json", "--strict"],
    ["run", "--rule", "FT004", "--rule=ft001", "--skip-rule", "witness-exactly-once"],
    ["run", "--since-step", "0"],
    ["run", "--since-step=0012"],
    ["run", "--follow", "--interval", "0.5"],
    ["run", "--follow", "--interval=.25"],
    ["run", "--interval", "2"],
    ["run", "--interval", "3."],
    ["run", "--follow", "--cpu-share", "0.01"],
    ["run", "--follow", "--cpu-share=1", "--interval", "5"],
    ["run", "--cpu-share", ".001"],
    ["run", "--data-manifest", "a.manifest", "--data-manifest=b/c.manifest"],
    ["run", "--require-finished", "--fallback-dir", "fb1", "--fallback-dir", "fb2"],
    ["run", "--manifest", "seal.json", "--key-file", "key"],
    ["run dir with spaces", "--rule", "FT008", "--strict"],
]
"""Lines the lean parser reads (every option at least once, both long forms)."""

TYPERS = [
    [],
    ["--help"],
    ["run", "--help"],
    ["--version"],
    ["run", "other"],
    ["run", "--format", "JSON"],  # typer folds the case
    ["run", "--format", "yaml"],
    ["run", "-fjson"],
    ["run", "-f=json"],
    ["run", "--format"],
    ["run", "--format", "json", "--format", "text"],
    ["run", "--strict=1"],
    ["run", "--strict", "--strict"],
    ["run", "--since-step", "-1"],
    ["run", "--since-step", "+3"],
    ["run", "--since-step", "1_0"],
    ["run", "--since-step", " 3"],
    ["run", "--since-step", "3.0"],
    ["run", "--interval", "0.001"],
    ["run", "--interval", "1e-1"],
    ["run", "--interval", "nan"],
    ["run", "--cpu-share", "0"],
    ["run", "--cpu-share", "0.0001"],
    ["run", "--cpu-share", "1.5"],
    ["run", "--cpu-share", "1e-2"],
    ["run", "--output", ""],
    ["run", "--output", "-"],
    ["", "--strict"],
    ["run", "--no-such-option"],
    ["run", "-h"],
    ["run", "--"],
    ["--", "run"],
    ["-"],
    ["run", "--rule"],
]
"""Lines the lean parser leaves to typer: help, version, errors, forms typer reads its way."""


def _typer_args(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> VerifyArgs | None:
    """What typer hands to the command's work for ``argv`` (``None``: it never got there)."""
    got: list[VerifyArgs] = []
    monkeypatch.setattr(verify_run, "execute", got.append)
    CliRunner().invoke(build_app(), argv)
    return got[0] if got else None


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_line_is_read_as_typer_reads_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = parse_plain(argv)
    assert plain is not None
    assert plain == _typer_args(argv, monkeypatch)


def test_the_plain_lines_set_every_option() -> None:
    parsed = [parse_plain(argv) for argv in PLAIN]
    default = VerifyArgs(run_dir=Path("run"))
    unset = [
        o.field
        for o in OPTIONS
        if all(getattr(p, o.field) == getattr(default, o.field) for p in parsed)
    ]
    assert not unset, unset
    assert {p.fmt for p in parsed if p is not None} == set(ReportFormat)


@pytest.mark.parametrize("argv", TYPERS, ids=lambda a: " ".join(a) or "(none)")
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert parse_plain(argv) is None


def test_a_shell_asking_for_completions_is_answered_by_typer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(verify_options.COMPLETION_ENV, "bash_complete")
    assert parse_plain(["run"]) is None


def test_typer_declares_every_option_from_the_shared_declarations() -> None:
    from typer.main import get_command

    command = get_command(build_app())
    declared = {
        p.name: (tuple(p.opts), p.help, p.metavar)
        for p in command.params
        if p.name not in ("run_dir", "version")
    }
    assert declared == {o.field: (o.decls, o.help, o.metavar) for o in OPTIONS}
