"""The verifier must run on a CI gate that has no torch installed."""

from __future__ import annotations

import subprocess
import sys


def test_eventlog_dataset_and_verifier_do_not_import_torch() -> None:
    code = (
        "import sys, ftaudit.eventlog, ftaudit.dataset, ftaudit.verifier; "
        "import ftaudit.verifier.rules_doc; "
        "assert 'torch' not in sys.modules, 'torch was imported'; "
        "assert not any(m.startswith('ftaudit.trainer_hooks') for m in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
