"""The worker facade with the driver facade: a loop, a checkpoint, a crash and a resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ftaudit.eventlog import (
    CheckpointRef,
    CheckpointSaved,
    ChecksumWhen,
    IntRuns,
    Metric,
    SampleAdvantageSummary,
    TrainerWeightChecksum,
    WitnessSnapshot,
    connect,
    read_records,
)
from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import (
    TrainerHooks,
    advantage_summary,
    install_witnesses,
)
from tests.support.torch_models import lm_backward, make_model, tokens

pytestmark = pytest.mark.torch
B, BATCH, SEQ = 40, 4, 6  # one step may allocate B - floor(0.7 B) = 12 ids


def _worker(run_dir: Path, incarnation: int, seed: int) -> TrainerHooks:
    model = make_model(seed=seed)
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return TrainerHooks.attach(
        run_dir, incarnation, cell=0, rank=0, model=model, optimizer=optimizer
    )


def _train(driver: DriverSession, hooks: TrainerHooks, step: int) -> dict[str, IntRuns]:
    samples = list(range(step * BATCH, (step + 1) * BATCH))
    info = driver.allocate(step, 0, samples)
    toks = tokens(BATCH, SEQ, seed=step)
    with hooks.step(step, 0):
        lm_backward(hooks, info.witness_ids, toks)
        hooks.optimizer.step()
        snapshot = hooks.after_optimizer_step(info.stale_ids, checksum=True)
        hooks.log_metrics({"loss": float("nan") if step == 0 else 1.5})
        hooks.log_sample_advantages(
            info.witness_ids, [SEQ] * BATCH, [False] * BATCH, pure_advantage_loss=True
        )
    driver.end_attempt(step, 0, {0: ranks("normal")})
    return snapshot


def test_checkpoint_round_trip_and_resume(tmp_path: Path) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt" / "iter1.pt"
    driver = DriverSession.start(run_dir, buffer_size=B)
    hooks = _worker(run_dir, driver.incarnation, seed=0)
    assert _train(driver, hooks, 0)["chunk0.head"] == IntRuns(starts=[0], lengths=[4])
    assert _train(driver, hooks, 1)["chunk0.tail"] == IntRuns(starts=[0], lengths=[8])
    with hooks.step(1, 0):
        hooks.save_checkpoint(ckpt, iteration=1, extra={"consumed": 8})
    driver.record_checkpoint(1, path=str(ckpt))
    saved_model = {k: v.clone() for k, v in hooks.model.state_dict().items()}
    saved_hashes = hooks.hashes(ChecksumWhen.AT_SAVE)  # with the whole-tensor digests
    _train(driver, hooks, 2)
    _train(driver, hooks, 3)  # steps 2 and 3 are abandoned: the job "dies" here
    hooks.flush()
    driver.flush()

    resumed = DriverSession.start(run_dir, buffer_size=B, resume_from=1)
    assert resumed.allocator.counter == 16  # past the abandoned ids 8..15
    hooks = _worker(run_dir, resumed.incarnation, seed=123)  # fresh weights, then load
    ref = resumed.resume_from
    assert ref == CheckpointRef(iteration=1, incarnation=0)
    loaded = hooks.load_checkpoint(ckpt, checkpoint=ref, resume_stale_ids=resumed.resume_stale_ids)
    assert loaded == {"iteration": 1, "extra": {"consumed": 8}}
    state = hooks.model.state_dict()
    for key, value in saved_model.items():
        if "witness" not in key:
            assert torch.equal(state[key], value), key
    witness_rows = state["ftaudit_witness.chunk0.head.weight"]
    assert torch.equal(witness_rows[:16], saved_model["ftaudit_witness.chunk0.head.weight"][:16])
    assert not witness_rows[16:].any()  # the resume stale slots were zeroed

    snapshot = _train(resumed, hooks, 2)
    assert snapshot["chunk0.head"] == IntRuns(starts=[0, 16], lengths=[8, 4])
    hooks.close()
    resumed.finish()

    records = read_records(run_dir)
    sums = [r.event for r in records if isinstance(r.event, TrainerWeightChecksum)]
    at_save = [s for s in sums if s.when is ChecksumWhen.AT_SAVE]
    after_load = [s for s in sums if s.when is ChecksumWhen.AFTER_LOAD]
    assert [s.checkpoint for s in at_save] == [ref]
    assert [s.checkpoint for s in after_load] == [ref]
    assert at_save[0].hashes == after_load[0].hashes == saved_hashes
    assert len([s for s in sums if s.when is ChecksumWhen.AFTER_STEP]) == 5
    rank_marks = [
        r for r in records if isinstance(r.event, CheckpointSaved) and not r.event.complete
    ]
    assert [(r.envelope.source_kind, r.event.iteration) for r in rank_marks] == [("trainer", 1)]
    assert sum(isinstance(r.event, SampleAdvantageSummary) for r in records) == 5

    with connect(run_dir) as con:
        rows = con.execute(
            """
            SELECT incarnation, step, source_cell, source_rank, cell, instance
            FROM witness_snapshot ORDER BY incarnation, step, instance
            """
        ).fetchall()
        nan = con.execute("SELECT isnan(value) FROM metrics WHERE step = 0").fetchone()
    assert len(rows) == 10
    assert rows[-2:] == [(1, 2, 0, 0, 0, "chunk0.head"), (1, 2, 0, 0, 0, "chunk0.tail")]
    assert nan == (True,)
    assert any(isinstance(r.event, Metric) for r in records)
    assert all(
        r.envelope.source_kind == "trainer" for r in records if isinstance(r.event, WitnessSnapshot)
    )


def test_hooks_need_a_step(tmp_path: Path) -> None:
    driver = DriverSession.start(tmp_path, buffer_size=B)
    hooks = _worker(tmp_path, driver.incarnation, seed=0)
    with pytest.raises(RuntimeError, match=r"inside hooks.step"):
        hooks.after_optimizer_step([])
    hooks.close()
    driver.finish()


def test_advantage_summary_counts_loss_tokens_and_all_zero_samples(tmp_path: Path) -> None:
    advantages = torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 2.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 0]])
    assert advantage_summary(advantages, mask) == ([2, 2, 2], [True, False, True])
    assert advantage_summary(advantages) == ([3, 3, 3], [True, False, False])

    driver = DriverSession.start(tmp_path, buffer_size=B)
    hooks = _worker(tmp_path, driver.incarnation, seed=0)
    with hooks.step(0, 0):
        hooks.log_advantages(torch.tensor([4, 5, 6]), advantages, mask, pure_advantage_loss=True)
    hooks.close()
    driver.finish()
    (summary,) = [
        r.event for r in read_records(tmp_path) if isinstance(r.event, SampleAdvantageSummary)
    ]
    assert (summary.witness_ids, summary.token_counts) == ([4, 5, 6], [2, 2, 2])
    assert (summary.all_zero, summary.cell, summary.step) == ([True, False, True], 0, 0)
