"""The generator is core code: it imports neither torch nor the trainer hooks."""

from __future__ import annotations

import subprocess
import sys


def test_synth_imports_no_torch_and_no_hooks() -> None:
    code = (
        "import sys, ftaudit.synth, ftaudit.cli.synth_cmd, ftaudit.verifier.window\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')\n"
        "             or m.startswith('ftaudit.trainer_hooks'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
