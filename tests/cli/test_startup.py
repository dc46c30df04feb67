"""The collector's start-up threshold: raised while a command starts, the usual one after."""

from __future__ import annotations

import gc
import subprocess
import sys

from ftaudit.cli.startup import STARTUP_THRESHOLD, collecting_late, imports_made


def test_the_threshold_is_raised_until_the_imports_are_made() -> None:
    usual = gc.get_threshold()
    with collecting_late():
        assert gc.get_threshold() == (STARTUP_THRESHOLD, *usual[1:])
    assert gc.get_threshold() == usual


def test_imports_made_outside_a_start_up_changes_nothing() -> None:
    usual, frozen = gc.get_threshold(), gc.get_freeze_count()
    imports_made()  # as `ftaudit verify` or a test calling the command does
    assert (gc.get_threshold(), gc.get_freeze_count()) == (usual, frozen)


def test_imports_made_freezes_once_and_restores_the_usual_threshold() -> None:
    # in a child: gc.freeze() is for the life of the process
    code = (
        "import gc\n"
        "from ftaudit.cli.startup import collecting_late, imports_made\n"
        "gc.set_threshold(500, 7, 9)\n"
        "with collecting_late():\n"
        "    imports_made()\n"
        "    frozen = gc.get_freeze_count()\n"
        "    assert frozen > 0 and gc.get_threshold() == (500, 7, 9), gc.get_threshold()\n"
        "    [object() for _ in range(10)]\n"
        "    imports_made()\n"
        "    assert gc.get_freeze_count() == frozen\n"
        "assert gc.get_threshold() == (500, 7, 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
