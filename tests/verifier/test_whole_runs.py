"""Whole runs (several incarnations, retries, restarts) against a golden expected report.

Regenerate the golden files after a deliberate change with
``FTAUDIT_UPDATE_GOLDEN=1 pytest tests/verifier/test_whole_runs.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ftaudit.eventlog import ChecksumWhen
from ftaudit.verifier import Report, verify
from tests.support.builder import DISCARDED, ERRORED, HEAD, NORMAL, TAIL, RunBuilder

GOLDEN = Path(__file__).parent / "golden"


def _samples(step: int, per_step: int = 4, offset: int = 0) -> list[int]:
    return list(range(offset + step * per_step, offset + (step + 1) * per_step))


AT_SAVE = ChecksumWhen.AT_SAVE


def three_incarnations(b: RunBuilder) -> None:
    """Crash, resume from the newest checkpoint, crash, resume from an OLDER checkpoint.

    Incarnation 0 trains steps 0..4 (checkpoints 1 and 3), with a retried attempt and an
    errored cell; incarnation 1 resumes from 3, trains 4..6 (checkpoint 5) and dies;
    incarnation 2 resumes from checkpoint 1 of incarnation 0 and finishes steps 2..7.
    Everything after checkpoint 1 in incarnations 0 and 1 is abandoned.
    """
    both = {0: NORMAL, 1: NORMAL}
    kw: dict[str, Any] = {"instances": (HEAD, TAIL)}
    run = b.start(deterministic_order=True, dataset_size=64)
    for step in range(5):
        if step == 2:
            run.train(step, _samples(step), attempt=0, cells={0: NORMAL, 1: DISCARDED}, **kw)
            run.train(step, _samples(step), attempt=1, cells={0: NORMAL, 1: ERRORED}, **kw)
            continue
        run.train(step, _samples(step), cells=both, zero_advantage=_samples(step)[:1], **kw)
        for cell in (0, 1):
            run.checksum(step, cell, {"w": f"w{step}", "m": f"m{step}"})
        if step in (1, 3):
            for cell in (0, 1):  # what each rank held at the save (FT010 compares loads)
                run.checksum(step, cell, {"w": f"w{step}", "m": f"m{step}"}, when=AT_SAVE)
            run.checkpoint(step)
    run.log.close()
    second = b.start(resume_from=3, deterministic_order=True, dataset_size=64)
    for step in range(4, 7):
        second.train(step, _samples(step), cells=both, **kw)
        if step == 5:
            second.checkpoint(5)
    second.log.close()
    third = b.start(resume_from=1, deterministic_order=True, dataset_size=64)
    third.checksum(1, 0, {"w": "w1", "m": "m1"}, when=ChecksumWhen.AFTER_LOAD)
    # the builder's restore evidence is a state_adopted event; this one is a real load
    for step in range(2, 8):
        third.train(step, _samples(step), cells=both, **kw)
        third.engines(step, {0: {"w": f"e{step}"}, 1: {"w": f"e{step}"}})
    third.finish()


def broken_restart(b: RunBuilder) -> None:
    """A restart gone wrong: the allocator resumed from the checkpoint's counter (not the
    highest logged), the witness was not rolled back, and the replay shuffled samples."""
    run = b.start()
    for step in range(4):
        run.train(step, _samples(step, 3))
        if step == 1:
            run.checkpoint(1)
    leaked = set(run.weights[0])
    run.log.close()
    again = b.start(resume_from=1, resume_counter=9)
    again.weights[0] |= leaked
    again.train(2, _samples(2, 3))
    again.train(3, [20, 21, 22])
    again.finish()


RUNS: dict[str, tuple[Callable[[RunBuilder], None], int, int]] = {
    "three_incarnations": (three_incarnations, 100, 2),
    "broken_restart": (broken_restart, 20, 1),
}


def summarize(report: Report) -> dict[str, Any]:
    """The report without what changes from run to run (paths, writer ids, timings)."""

    def clean(text: str) -> str:
        return re.sub(r"\.p\d+\.[0-9a-f]{8}", ".p*", text)

    return {
        r.code: {
            "checked": r.checked,
            "violations": [
                {
                    "severity": v.severity.value,
                    "location": {
                        k: clean(str(x)) if k == "writer" else x
                        for k, x in v.location.to_dict().items()
                        if k != "segment"
                    },
                    "kind": v.kind,
                    "ids": list(v.ids),
                    "sample_indices": list(v.sample_indices),
                    "message": clean(v.message),
                }
                for v in r.violations
            ],
        }
        for r in report.results
    }


@pytest.mark.parametrize("name", sorted(RUNS))
def test_whole_run(name: str, tmp_path: Path) -> None:
    build, B, cells = RUNS[name]
    builder = RunBuilder(tmp_path / name, B=B, cells=cells)
    try:
        build(builder)
    finally:
        builder.close()
    got = summarize(verify(builder.root))
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("FTAUDIT_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())
