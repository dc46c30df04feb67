"""The pieces both framework callbacks share, in one process (fast)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ftaudit
from ftaudit.eventlog.events import RunStatus
from ftaudit.eventlog.writer import WriterOptions
from ftaudit.trainer_hooks.torch import install_witnesses, sample_token_ids
from ftaudit.trainer_hooks.torch.checksums import object_hash
from ftaudit.trainer_hooks.torch.extra_state import rng_hashes, set_rng_states
from ftaudit.trainer_hooks.torch.extra_state import rng_states as current_rng
from ftaudit.trainer_hooks.torch.indexed_data import (
    SAMPLE_INDEX_KEY,
    IndexedDataset,
    batch_items,
)
from ftaudit.trainer_hooks.torch.step_recorder import (
    StepRecorder,
    install_for_framework,
    largest_layer_stack,
)
from ftaudit.verifier import verify


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.small = nn.ModuleList([nn.Linear(8, 8)])
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for block in self.blocks:
            h = h + block(h)
        return h.sum(-1)


def test_one_id_per_sample_marks_the_same_rows_as_one_per_token() -> None:
    grads = []
    for per_sample in (True, False):
        torch.manual_seed(0)
        model = Stack()
        witnesses = install_witnesses(model, 10, layers="blocks")
        tokens = torch.randint(0, 16, (2, 5))
        ids = torch.tensor([3, 7]) if per_sample else sample_token_ids([3, 7], 5)
        with witnesses.tokens(ids):
            model(tokens).pow(2).sum().backward()
        grads.append({n: p.grad.clone() for n, p in witnesses.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        assert torch.equal(grads[0][name], grads[1][name])
        assert grads[0][name].nonzero()[:, 0].tolist() == [3, 7]


def test_the_largest_layer_list_is_the_default_stack() -> None:
    model = Stack()
    assert largest_layer_stack(model) == "blocks"
    witnesses = install_for_framework(model, 10, None)
    assert install_for_framework(model, 10, None) is witnesses  # installed once
    assert sorted(witnesses.instances()) == ["chunk0.head", "chunk0.tail"]
    with pytest.raises(ValueError, match="no layer list"):
        largest_layer_stack(nn.Linear(2, 2))


def test_state_hashes_see_every_byte_and_ignore_key_order() -> None:
    big = np.zeros(5000)
    changed = big.copy()
    changed[4321] = 1e-300  # beyond what a repr of the array would show
    assert object_hash({"a": big, "b": 1}) == object_hash({"b": 1, "a": big.copy()})
    assert object_hash({"a": big}) != object_hash({"a": changed})
    assert object_hash([1, 2]) != object_hash((1, 2, 0))
    saved = current_rng()
    before = rng_hashes()
    torch.rand(3)
    assert rng_hashes()["rng/torch"] != before["rng/torch"]
    set_rng_states(saved)
    assert rng_hashes() == before


def test_indexed_items_travel_through_a_dataloader() -> None:
    data = IndexedDataset([{"x": torch.tensor([float(i)])} for i in range(6)])
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    seen = []
    for batch in loader:
        items = batch_items(batch)
        assert items is not None
        assert batch["x"].reshape(-1).long().tolist() == items
        seen += items
    assert sorted(seen) == list(range(6))
    assert batch_items({"x": 1}) is None
    with pytest.raises(TypeError, match=SAMPLE_INDEX_KEY):
        IndexedDataset([(1, 2)])[0]


ITEMS = torch.randint(0, 16, (12, 3), generator=torch.Generator().manual_seed(1))
"""A dataset of 12 items: item i feeds the model the tokens ITEMS[i]."""


def _train(
    recorder: StepRecorder,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    steps: range,
    items_of: list[int],
) -> None:
    """Train ``steps`` of two accumulated micro-batches of 2 items, read from ``items_of``."""
    for step in steps:
        for micro in range(2):
            first = step * 4 + micro * 2
            items = items_of[first : first + 2]
            recorder.begin_batch(step, items, ITEMS[items])
            model(ITEMS[items]).pow(2).sum().backward()
            recorder.end_batch()
        opt.step()
        opt.zero_grad()
        recorder.after_optimizer_step(step)
        recorder.end_step(step)
        metrics = {"loss": torch.tensor(1.0 / (step + 1)), "lr": 0.1, "note": "text", "on": True}
        recorder.log_metrics(step, metrics)


def _recorded_run(run: Path, resumed_reads: list[int]) -> None:
    """3 shuffled steps, a checkpoint after step 0, a crash, a resume reading ``resumed_reads``."""
    order = torch.randperm(12, generator=torch.Generator().manual_seed(0)).tolist()
    torch.manual_seed(0)
    model = Stack()
    witnesses = install_for_framework(model, 32, "blocks")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    options = WriterOptions(fsync=False)  # durability is not under test here
    recorder = StepRecorder(run, buffer_size=32, witnesses=witnesses, options=options)
    recorder.start(model, opt, resume_iteration=None, extra_hashes=rng_hashes, dataset_size=12)
    recorder.declare_order(0, order, seed=0, shuffle=True, sampler="RandomSampler")
    _train(recorder, model, opt, range(1), order)
    recorder.log_save(0, "ckpt")
    recorder.checkpoint_durable(0, "ckpt")
    saved = recorder.consumed, {k: v.clone() for k, v in model.state_dict().items()}
    saved_opt = copy.deepcopy(opt.state_dict())
    _train(recorder, model, opt, range(1, 2), order)  # then the process dies
    recorder.finish(RunStatus.FAILED)
    model.load_state_dict(saved[1])
    opt.load_state_dict(saved_opt)
    recorder.start(
        model,
        opt,
        resume_iteration=0,
        extra_hashes=rng_hashes,
        dataset_size=12,
        consumed=saved[0],
    )
    recorder.after_load(1)
    recorder.declare_order(0, order, seed=0, shuffle=True, sampler="RandomSampler")
    _train(recorder, model, opt, range(1, 3), [order[i] for i in resumed_reads])
    recorder.finish()


def test_a_shuffled_run_resumed_mid_epoch_verifies_strictly(tmp_path: Path) -> None:
    _recorded_run(tmp_path / "run", list(range(12)))  # the loader resumed at its position
    report = verify(tmp_path / "run")
    assert report.passed(strict=True), report.to_dict()
    by_code = {r.code: r for r in report.results}
    assert by_code["FT008"].checked == 12  # every committed sample's item was checked
    with ftaudit.connect(tmp_path / "run") as con:
        positions = con.execute(
            "SELECT list_sort(flatten(list(generate_series(r.s, r.s + r.l - 1)))) FROM ("
            "SELECT unnest(sample_indices.starts) AS s, unnest(sample_indices.lengths) AS l "
            "FROM witness_allocated a JOIN committed_steps c USING (incarnation, step)) r"
        ).fetchall()[0][0]
    assert positions == list(range(12))  # stream positions, though the items are shuffled
    with ftaudit.connect(tmp_path / "run") as con:
        names = con.execute("SELECT DISTINCT name FROM metrics ORDER BY name").fetchall()
    assert names == [("loss",), ("lr",)]  # a 1-element tensor is a number; text, flags are not
    with ftaudit.connect(tmp_path / "run") as con:
        digests = con.execute(
            """SELECT "when", bool_and(list_contains(map_keys(hashes), t || '@whole'))
               FROM (SELECT "when", hashes, unnest(map_keys(hashes)) AS t
                     FROM trainer_weight_checksum)
               WHERE starts_with(t, 'param/') AND NOT contains(t, '@') GROUP BY ALL ORDER BY 1"""
        ).fetchall()
    # saves and loads carry every tensor's layout-independent digest (a resume over another
    # world size or FSDP layout compares on them)
    assert digests == [("after_load", True), ("at_save", True)]


def test_a_resume_that_restarts_the_epoch_fails_ft008_naming_the_positions(
    tmp_path: Path,
) -> None:
    _recorded_run(tmp_path / "run", [*range(4), *range(4), *range(4, 8)])
    report = verify(tmp_path / "run")
    ft008 = next(r for r in report.results if r.code == "FT008")
    kinds = {v.kind for v in ft008.violations}
    assert {"wrong_item", "duplicate_content"} <= kinds, report.to_dict()
    wrong = next(v for v in ft008.violations if v.kind == "wrong_item")
    assert sorted(wrong.sample_indices) == [4, 5, 6, 7]  # the resumed step's positions
    assert "position 4 read item" in wrong.message


def test_core_imports_no_framework() -> None:
    code = (
        "import sys, ftaudit.eventlog, ftaudit.verifier, ftaudit.trainer_hooks, "
        "ftaudit.integrations, ftaudit.cli.app\n"
        "bad = [m for m in ('torch', 'transformers', 'lightning', 'pytorch_lightning') "
        "if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_portable_rng_states_load_with_weights_only(tmp_path: Path) -> None:
    from ftaudit.trainer_hooks.torch.extra_state import (
        portable_rng_states,
        restore_portable_rng_states,
    )

    saved, before = portable_rng_states(), rng_hashes()
    torch.save({"rng": saved}, tmp_path / "s.pt")
    np.random.rand(3)
    torch.rand(2)
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    restore_portable_rng_states(loaded["rng"])
    assert rng_hashes() == before


def test_a_step_outgrowing_the_ring_is_refused_with_the_buffer_to_use(tmp_path: Path) -> None:
    model = Stack()
    witnesses = install_for_framework(model, 10, "blocks")  # B - keep = 3 ids per step
    recorder = StepRecorder(
        tmp_path / "run", buffer_size=10, witnesses=witnesses, options=WriterOptions(fsync=False)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder.start(model, opt, resume_iteration=None, extra_hashes=dict, dataset_size=8)
    recorder.allocate(0, [0, 1])
    with pytest.raises(ValueError, match=r"step 0 trains 4 samples.*buffer_size >= 11"):
        recorder.allocate(0, [2, 3])  # the second micro-batch of the same step
    recorder.finish()
