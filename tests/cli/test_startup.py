"""A command's start-up: the collector's threshold (raised while a command starts, the usual
one after) and numpy on small pages."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from ftaudit.cli.startup import (
    STARTUP_THRESHOLD,
    WORK_THRESHOLD,
    collecting_late,
    imports_made,
)


def test_the_threshold_is_raised_until_the_imports_are_made() -> None:
    usual = gc.get_threshold()
    with collecting_late():
        assert gc.get_threshold() == (STARTUP_THRESHOLD, *usual[1:])
    assert gc.get_threshold() == usual


def test_imports_made_outside_a_start_up_changes_nothing() -> None:
    usual, frozen = gc.get_threshold(), gc.get_freeze_count()
    imports_made()  # as `ftaudit verify` or a test calling the command does
    assert (gc.get_threshold(), gc.get_freeze_count()) == (usual, frozen)


def test_imports_made_freezes_once_then_collects_rarely_until_the_command_ends() -> None:
    # in a child: gc.freeze() is for the life of the process
    code = (
        "import gc\n"
        "from ftaudit.cli.startup import collecting_late, imports_made\n"
        "gc.set_threshold(500, 7, 9)\n"
        "with collecting_late():\n"
        "    imports_made()\n"
        "    frozen = gc.get_freeze_count()\n"
        f"    assert frozen > 0 and gc.get_threshold() == ({WORK_THRESHOLD}, 7, 9)\n"
        "    [object() for _ in range(10)]\n"
        "    imports_made()\n"
        "    assert gc.get_freeze_count() == frozen\n"
        "assert gc.get_threshold() == (500, 7, 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _in_child(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# numpy's own switch: _set_madvise_hugepage returns the setting it replaces
_HUGEPAGES = "from numpy._core import multiarray\nprint(multiarray._set_madvise_hugepage(False))\n"


def test_numpy_gets_small_pages_and_a_users_choice_is_kept() -> None:
    code = "from ftaudit.cli.startup import small_pages_for_numpy\nsmall_pages_for_numpy()\n"
    assert _in_child(code + _HUGEPAGES) == "False"
    if sys.platform == "linux":  # elsewhere numpy never asks for huge pages
        assert _in_child(code + _HUGEPAGES, NUMPY_MADVISE_HUGEPAGE="1") == "True"


@pytest.mark.parametrize(("module", "prog"), [("verify_cmd", "ft-verify"), ("app", "ftaudit")])
def test_both_commands_start_with_small_pages_for_numpy(module: str, prog: str) -> None:
    code = (
        "import sys\n"
        f"from ftaudit.cli.{module} import main\n"
        f"sys.argv = [{prog!r}, '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    out = _in_child(code + _HUGEPAGES)
    assert out.splitlines()[-1] == "False"
