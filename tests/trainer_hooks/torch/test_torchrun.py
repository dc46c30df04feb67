"""Real torchrun jobs (2 gloo processes on CPU) with a SIGKILL and a torchrun restart.

Each scenario is one torchrun launch (``--max-restarts 1``) of ``torchrun_child.py``:
incarnation 0 loses global rank 1 to a SIGKILL mid-step, torchrun restarts both
processes, incarnation 1 resumes from the latest complete checkpoint. The clean run must
verify; a stale restore on one rank must fail FT006 and a skipped batch after the resume
FT005 (both planted in one launch, told apart by where the violations point).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ftaudit
from ftaudit.eventlog import FaultInjected, RunStarted, read_records
from ftaudit.verifier import verify

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CHILD = Path(__file__).with_name("torchrun_child.py")
ROOT = Path(__file__).parents[3]
STRATEGIES = ["ddp", "fsdp", "ddp_dcp"]


def torchrun(run_dir: Path, strategy: str, bug: str) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        # workers sharing the agent's TCPStore can read the previous round's gloo
        # addresses after a restart and hang or fail to connect (pytorch#135712, #167288)
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node",
                "2",
                "--max-restarts",
                "1",
                str(CHILD),
                str(run_dir),
                strategy,
                bug,
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,  # generous: a loaded machine (load 30 seen) slows both incarnations
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"torchrun timed out: {exc.stdout!r} {exc.stderr!r}"[-6000:]) from None
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


@pytest.mark.parametrize("strategy", [*STRATEGIES, "fsdp_full"])
def test_sigkill_and_restart_verifies(tmp_path: Path, strategy: str) -> None:
    run_dir = tmp_path / "run"
    output = torchrun(run_dir, strategy, "none")
    assert "incarnation 1 restart 1 done" in output, output[-4000:]
    records = read_records(run_dir)
    kills = [r for r in records if isinstance(r.event, FaultInjected)]
    assert [(r.envelope.incarnation, r.event.step, r.event.mode) for r in kills] == [
        (0, 4, "sigkill")
    ]
    starts = {r.envelope.incarnation: r.event for r in records if isinstance(r.event, RunStarted)}
    assert starts[1].resumed_from is not None
    assert (starts[1].resumed_from.iteration, starts[1].resumed_from.incarnation) == (3, 0)
    report = verify(run_dir)
    assert report.passed(), [v.message for r in report.results for v in r.violations]
    if strategy.startswith("fsdp"):  # local shards, and whole-tensor digests at save/load
        with ftaudit.connect(run_dir) as con:
            names = con.sql(
                """SELECT "when", list_sort(list_distinct(flatten(list(map_keys(hashes)))))
                   FROM trainer_weight_checksum GROUP BY ALL"""
            ).fetchall()
        witness = "param/ftaudit_witness.chunk0.head.weight"
        for when, keys in names:
            assert f"{witness}@rows[0:20]" in keys and f"{witness}@rows[20:40]" in keys
            assert (witness in keys) == (when != "after_step"), when


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_defects_after_restart_are_caught(tmp_path: Path, strategy: str) -> None:
    """One launch, two defects told apart by where they point: global rank 1's stale
    restore (FT006, at its load in incarnation 1) and the batch of step 4 skipped (FT005)."""
    run_dir = tmp_path / "run"
    torchrun(run_dir, strategy, "stale_restore,skip_batch")
    report = verify(run_dir)
    errors = {r.code: [v for v in r.violations if v.severity == "error"] for r in report.results}
    stale = [v for v in errors["FT006"] if "loaded checkpoint 3" in v.message]
    cell, rank = {"ddp": (1, 0), "ddp_dcp": (1, 0), "fsdp": (0, 1)}[strategy]  # global rank 1
    places = {(v.location.incarnation, v.location.cell, v.location.rank) for v in stale}
    assert (1, cell, rank) in places, [v.message for v in errors["FT006"]]
    # only the stale rank's cell; within a sharded cell, only that rank's own shards differ
    # (its peers differ in the whole-tensor digests, which cover every shard)
    assert {c for _, c, _ in places} == {cell}, places
    assert all(
        ("@rows[" in v.message) == (v.location.rank == rank) for v in stale if strategy == "fsdp"
    )
    skipped = set(range(4 * 2 * 2, 5 * 2 * 2))  # step 4: 2 ranks x 2 samples
    assert any(skipped <= set(v.sample_indices) for v in errors["FT005"]), [
        v.message for v in errors["FT005"]
    ]
