"""The installed scripts, run as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or {**os.environ, "NO_COLOR": "1"},
        check=False,
    )


def test_ft_verify_script_smoke(good_run: Path, tmp_path: Path) -> None:
    ok = _run(BIN / "ft-verify", good_run)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "verified: all" in ok.stdout
    missing = _run(BIN / "ft-verify", tmp_path / "missing")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert missing.stderr == f"error: {tmp_path / 'missing'}: no such run directory\n"


def test_ftaudit_help_lists_the_commands() -> None:
    result = _run(BIN / "ftaudit", "--help")
    assert result.returncode == 0, result.stderr
    assert "verify" in result.stdout and "sql" in result.stdout


HEAVY = (
    "ftaudit.verifier",
    "ftaudit.eventlog",
    "ftaudit.synth",
    "ftaudit.demo",
    "rich",
    "pydantic",
    "pyarrow",
    "duckdb",
    "numpy",
    "pandas",
    "torch",
    "ray",
)
"""What building the CLI (``--help``, and ``ft-verify`` before it parses) must not load."""


def test_building_the_cli_imports_no_verifier_and_no_rich() -> None:
    # --help must stay instant, and ft-verify pays for what a command needs only: command
    # modules keep heavy imports inside their bodies
    code = (
        "import sys\n"
        "from typer.main import get_command\n"
        "from ftaudit.cli.app import app\n"
        "from ftaudit.cli.verify_cmd import build_app\n"
        "get_command(app)\n"
        "get_command(build_app())\n"
        f"heavy = [m for m in {HEAVY!r} "
        "if any(k == m or k.startswith(m + '.') for k in sys.modules)]\n"
        "print(heavy)\n"
    )
    result = _run(sys.executable, "-c", code)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def _drain(fd: int, into: bytearray) -> None:
    """Read a pseudo-terminal until its other end closes (EIO), so the child never blocks."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            return
        if not chunk:
            return
        into += chunk


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_progress_only_on_a_terminal_stderr(good_run: Path) -> None:
    from ftaudit.verifier import select_rules

    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    talk = bytearray()
    reader = threading.Thread(target=_drain, args=(master, talk), daemon=True)
    reader.start()
    try:
        result = subprocess.run(
            [str(BIN / "ft-verify"), str(good_run)],
            stdout=subprocess.PIPE,
            stderr=slave,
            env=env,
            timeout=300,
            check=False,
        )
    finally:
        os.close(slave)
    reader.join(timeout=60)
    os.close(master)
    assert result.returncode == 0, result.stdout
    # the bar is drawn as each phase starts (no timer): every phase reaches the terminal,
    # however loaded the machine and however fast the verification
    assert b"reading" in talk, bytes(talk)
    for rule in select_rules(None, ()):
        assert rule.code.encode() in talk, (rule.code, bytes(talk))
    assert b"\x1b" not in result.stdout  # stdout is a pipe: the report stays plain
