"""A live run for followers to watch: ``python -m tests.support.live_writer RUN_DIR GATE [BUG]``
(from the repository root).

Writes a synth run step by step in this process (real writers, real flushes). After the
step ``PAUSE_AFTER`` it waits for the file ``GATE`` to exist, so a test can look at the
half-written run for as long as it needs (no timing: the test creates ``GATE`` when it
has seen what it waited for), then finishes the run (``run_finished``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from ftaudit.synth import synthesize
from tests.support.synth_runs import small_synth

SHAPE = small_synth(24, retries=1, seed=3)
PAUSE_AFTER = 12
"""Steps 0..10 are sealed by then (the flush after step 11), so 0..10 can settle."""
GATE_TIMEOUT_S = 600.0


def main() -> None:
    run_dir, gate = Path(sys.argv[1]), Path(sys.argv[2])
    bug = sys.argv[3] if len(sys.argv) > 3 else None

    def after_step(step: int) -> None:
        if step != PAUSE_AFTER:
            return
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not gate.exists():
            if time.monotonic() > deadline:
                sys.exit(f"live_writer: {gate} never appeared")
            time.sleep(0.05)

    config = dataclasses.replace(SHAPE, bug=bug, bug_step=3 if bug else None)
    synthesize(run_dir, config, after_step=after_step)


if __name__ == "__main__":
    main()
