"""``--version`` on both entry points, as installed scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit import __version__

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("script", ["ftaudit", "ft-verify"])
def test_version(script: str) -> None:
    done = subprocess.run(
        [str(BIN / script), "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ftaudit {__version__}\n"
