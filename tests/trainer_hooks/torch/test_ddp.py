"""Two real processes under torch.distributed (gloo) DDP: witness rows show the global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ftaudit.eventlog import ChecksumWhen, TrainerWeightChecksum, WitnessSnapshot, read_records
from ftaudit.trainer_hooks import DriverSession

pytestmark = pytest.mark.torch
CHILD = Path(__file__).with_name("ddp_child.py")
ROOT = Path(__file__).parents[3]


def test_two_rank_ddp_rows_are_equal_and_global(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    driver = DriverSession.start(run_dir, buffer_size=40)
    driver.allocate(0, 0, range(4))  # an earlier allocation, so ids do not start at 0
    info = driver.allocate(0, 1, range(4, 12))
    allocation = {"buffer_size": 40, "witness_ids": info.witness_ids, "stale_ids": info.stale_ids}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                str(run_dir),
                str(rank),
                str(tmp_path / "store"),  # a file rendezvous: no port to race for
                json.dumps(allocation),
                str(tmp_path / f"rows{rank}.pt"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    driver.finish()

    rows = [torch.load(tmp_path / f"rows{r}.pt", weights_only=True) for r in range(2)]
    assert rows[0].keys() == {"chunk0.head", "chunk0.tail"}
    for instance in rows[0]:
        assert torch.equal(rows[0][instance], rows[1][instance]), instance  # bitwise
        nonzero = torch.nonzero(rows[0][instance].reshape(-1)).reshape(-1).tolist()
        assert nonzero == info.witness_ids == list(range(4, 12))  # both halves of the batch

    records = read_records(run_dir)
    snaps = [r for r in records if isinstance(r.event, WitnessSnapshot)]
    assert sorted((r.envelope.source_rank, r.event.instance) for r in snaps) == [
        (0, "chunk0.head"),
        (0, "chunk0.tail"),
        (1, "chunk0.head"),
        (1, "chunk0.tail"),
    ]
    assert {tuple(r.event.nonzero_ids.to_list()) for r in snaps} == {tuple(range(4, 12))}
    sums = [r.event for r in records if isinstance(r.event, TrainerWeightChecksum)]
    assert [s.when for s in sums] == [ChecksumWhen.AFTER_STEP] * 2
    assert sums[0].hashes == sums[1].hashes  # DDP keeps the ranks bitwise in step
    assert all(not k.startswith("param/module.") for k in sums[0].hashes)
