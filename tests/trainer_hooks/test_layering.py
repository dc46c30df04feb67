"""The driver side of the hooks must not pull torch into a process."""

from __future__ import annotations

import subprocess
import sys


def test_trainer_hooks_core_imports_no_torch() -> None:
    code = (
        "import sys, ftaudit.trainer_hooks, ftaudit.eventlog\n"
        "bad = [m for m in ('torch', 'ray', 'megatron') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
