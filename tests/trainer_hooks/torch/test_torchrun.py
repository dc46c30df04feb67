"""Real torchrun jobs (gloo processes on CPU) with a SIGKILL and a torchrun restart.

Each job of ``torchrun_child.py`` loses global rank 1 to a SIGKILL mid-step in
incarnation 0; torchrun restarts every process and incarnation 1 resumes from the latest
complete checkpoint. The clean run must verify; a stale restore on one rank must fail
FT006 and a skipped batch after the resume FT005 (both planted in one job, told apart by
where the violations point). The 2-process strategies run one launch per job; HSDP (4
processes) runs its clean job and its defect twin in one launch, one restart each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ftaudit
from ftaudit.eventlog import FaultInjected, RunStarted, read_records
from ftaudit.verifier import verify
from tests.support.torchrun import finished_after_restart
from tests.support.torchrun import torchrun as launch

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CHILD = Path(__file__).with_name("torchrun_child.py")
STRATEGIES = ["ddp", "fsdp", "ddp_dcp"]


def torchrun(strategy: str, *jobs: tuple[Path, str], procs: int = 2) -> str:
    """One launch running ``jobs`` (run directory, bugs) in turn, one restart per job."""
    args = (arg for run_dir, bugs in jobs for arg in (str(run_dir), bugs))
    return launch(CHILD, strategy, *args, nproc=procs, restarts=len(jobs))


@pytest.mark.parametrize("strategy", [*STRATEGIES, "fsdp_full"])
def test_sigkill_and_restart_verifies(tmp_path: Path, strategy: str) -> None:
    run_dir = tmp_path / "run"
    output = torchrun(strategy, (run_dir, "none"))
    assert finished_after_restart(output, "run", 1), output[-4000:]
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
            assert (f"{witness}@whole" in keys) == (when != "after_step"), when
            assert witness not in keys  # no rank holds the whole witness


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_defects_after_restart_are_caught(tmp_path: Path, strategy: str) -> None:
    """One launch, two defects told apart by where they point: global rank 1's stale
    restore (FT006, at its load in incarnation 1) and the batch of step 4 skipped (FT005)."""
    run_dir = tmp_path / "run"
    torchrun(strategy, (run_dir, "stale_restore,skip_batch"))
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


def test_hsdp_four_processes(tmp_path: Path) -> None:
    """HSDP: 4 processes, ``fully_shard`` on a (2 replicas x 2 shards) mesh, in one launch:
    the clean job (killed once, restarted) verifies ``--strict``; its defect twin (the
    last global rank, replica 1's shard 1, loads a stale checkpoint after the restart,
    and the resumed stream skips a batch) fails FT006 at exactly that cell and rank, and
    FT005. Global rank g is replica g // 2, shard g % 2 (``init_device_mesh``'s order)."""
    clean, bad = tmp_path / "clean", tmp_path / "bad"
    output = torchrun("hsdp", (clean, "none"), (bad, "stale_restore,skip_batch"), procs=4)
    assert finished_after_restart(output, "clean", 1), output[-4000:]
    assert finished_after_restart(output, "bad", 2), output[-4000:]
    for run_dir in (clean, bad):
        records = read_records(run_dir)
        starts = [r for r in records if isinstance(r.event, RunStarted)]
        assert [json.loads(s.event.config_json)["strategy"] for s in starts] == ["hsdp", "hsdp"]
        trainers = [r.envelope for r in records if r.envelope.source_cell is not None]
        places = {(e.source_cell, e.source_rank) for e in trainers}
        assert places == {(0, 0), (0, 1), (1, 0), (1, 1)}, places  # CellMap.hsdp
        kills = [r for r in records if isinstance(r.event, FaultInjected)]  # global rank 1
        where = [
            (r.envelope.incarnation, r.envelope.source_cell, r.envelope.source_rank) for r in kills
        ]
        assert where == [(0, 0, 1)]
    report = verify(clean)
    assert report.passed(strict=True), [v.message for r in report.results for v in r.violations]

    report = verify(bad)
    errors = {r.code: [v for v in r.violations if v.severity == "error"] for r in report.results}
    stale = [v for v in errors["FT006"] if "loaded checkpoint 3" in v.message]
    places = {(v.location.incarnation, v.location.cell, v.location.rank) for v in stale}
    # the stale shard itself; its shard peer only in the whole-tensor digests (which
    # cover both shards); replica 0 is never blamed
    assert (1, 1, 1) in places and {c for _, c, _ in places} == {1}, places
    assert all(("@rows[" in v.message) == (v.location.rank == 1) for v in stale)
    replicas = [v for v in errors["FT006"] if "does not match rank" in v.message]
    assert replicas and {v.location.cell for v in replicas} == {1}, [v.message for v in replicas]
    skipped = set(range(4 * 4 * 2, 5 * 4 * 2))  # step 4: 4 ranks x 2 samples
    assert any(skipped <= set(v.sample_indices) for v in errors["FT005"]), [
        v.message for v in errors["FT005"]
    ]
