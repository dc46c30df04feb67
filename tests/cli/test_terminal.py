"""The talk helpers: one-line errors, exit codes that survive, colour rules."""

from __future__ import annotations

import io

import pytest
import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import Terminal, abort, guarded, one_line
from ftaudit.errors import CorruptSegmentError, UnusableInputError


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_line_drops_duckdb_caret_context() -> None:
    message = 'Parser Error: syntax error at or near "SELEC"\n\nLINE 1: SELEC *\n        ^'
    assert one_line(message) == 'Parser Error: syntax error at or near "SELEC"'


def test_abort_prints_one_line_and_exits_with_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exc:
        abort("first\nsecond", exit_codes.UNUSABLE)
    assert exc.value.exit_code == 2
    assert capsys.readouterr().err == "error: first second\n"


def test_guarded_maps_ftaudit_errors_and_lets_exit_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def corrupt() -> None:
        raise CorruptSegmentError("/r/events/w/0.parquet", "truncated")

    with pytest.raises(typer.Exit) as exc:
        guarded(corrupt)
    assert exc.value.exit_code == exit_codes.UNUSABLE
    assert capsys.readouterr().err == "error: /r/events/w/0.parquet: truncated\n"

    def exits() -> None:
        raise typer.Exit(7)

    with pytest.raises(typer.Exit) as passed:
        guarded(exits)
    assert passed.value.exit_code == 7


def test_guarded_turns_bugs_into_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FTAUDIT_DEBUG", raising=False)

    def bug() -> None:
        raise KeyError("oops")

    with pytest.raises(typer.Exit) as exc:
        guarded(bug)
    assert exc.value.exit_code == exit_codes.UNUSABLE
    err = capsys.readouterr().err
    assert err.startswith("error: internal error: KeyError: 'oops'") and err.count("\n") == 1


def test_guarded_reraises_bugs_in_debug_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FTAUDIT_DEBUG", "1")

    def bug() -> None:
        raise UnusableInputError("x") from KeyError("never seen")

    with pytest.raises(typer.Exit):  # ftaudit errors are not bugs: still one line
        guarded(bug)

    def real_bug() -> None:
        raise KeyError("oops")

    with pytest.raises(KeyError):
        guarded(real_bug)


def test_color_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty, pipe = _Tty(), io.StringIO()
    assert Terminal.detect(stdout=tty, stderr=pipe).stdout_color is True
    both = Terminal.detect(stdout=pipe, stderr=tty)
    assert (both.stdout_color, both.stderr_color, both.progress) == (False, True, True)
    monkeypatch.setenv("COLUMNS", "77")
    assert Terminal.detect(stdout=pipe, stderr=pipe).stdout_width == 77
    monkeypatch.setenv("NO_COLOR", "1")
    term = Terminal.detect(stdout=tty, stderr=tty)
    assert (term.stdout_color, term.stderr_color, term.progress) == (False, False, True)
