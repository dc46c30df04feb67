"""The hooks fingerprint what the model receives; SamplerStream maps a sampler's stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from ftaudit.dataset import build_manifest
from ftaudit.eventlog import DataOrder, LoaderState, SampleFingerprints, read_records
from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import SamplerStream, TrainerHooks, install_witnesses
from ftaudit.verifier import verify
from tests.support.torch_models import VOCAB, make_model

pytestmark = pytest.mark.torch


def test_log_fingerprints_matches_the_manifest_and_verifies(tmp_path: Path) -> None:
    data = torch.randint(0, VOCAB, (20, 6), generator=torch.Generator().manual_seed(3))
    driver = DriverSession.start(tmp_path, buffer_size=40, dataset_size=len(data))
    driver.declare_manifest(build_manifest(data))
    model = make_model()
    install_witnesses(model, 40, layers="layers")
    hooks = TrainerHooks.attach(
        tmp_path, 0, cell=0, rank=0, model=model, optimizer=torch.optim.Adam(model.parameters())
    )
    driver.allocate(0, 0, [4, 5, 6])
    with hooks.step(0, 0):
        fps = hooks.log_fingerprints(torch.tensor([4, 5, 6]), data[4:7], items=[4, 5, 6])
        ragged = hooks.log_fingerprints([4], [data[4, :3]])
    with pytest.raises(RuntimeError, match=r"inside hooks\.step"):
        hooks.log_fingerprints([0], data[:1])
    hooks.close()
    driver.end_attempt(0, 0, {0: ranks("normal")})
    driver.finish()
    manifest = build_manifest(data)
    assert fps.tolist() == manifest.fingerprints[4:7].tolist()
    assert ragged[0] != fps[0]  # three tokens are another content than six
    (event, _) = [
        r.event for r in read_records(tmp_path) if isinstance(r.event, SampleFingerprints)
    ]
    assert event.sample_indices.to_list() == [4, 5, 6] and event.items == [4, 5, 6]
    assert (tmp_path / "manifests" / f"{manifest.digest}.parquet").is_file()
    report = verify(tmp_path, select=["FT008"])
    # the ragged second feeding of position 4 is not item 4: FT008 names it
    (violation,) = report.results[0].violations
    assert violation.kind == "wrong_content" and violation.sample_indices == (4,)


@pytest.mark.parametrize(("size", "world", "batch"), [(24, 2, 3), (10, 3, 2), (7, 2, 1)])
def test_sampler_stream_positions_are_what_each_rank_reads(
    size: int, world: int, batch: int
) -> None:
    dataset = list(range(100, 100 + size))
    samplers = [
        DistributedSampler(dataset, num_replicas=world, rank=r, shuffle=True, seed=9)
        for r in range(world)
    ]
    streams = [SamplerStream(s, batch_size=batch) for s in samplers]
    for epoch in (0, 3):
        order = streams[0].epoch_order(epoch)
        assert len(order) == streams[0].epoch_length == samplers[0].total_size
        for r, sampler in enumerate(samplers):
            sampler.set_epoch(epoch)
            mine = list(sampler)
            for b in range(streams[r].batches_per_epoch):
                positions = streams[r].batch_positions(epoch, b)
                assert positions.min() >= epoch * streams[r].epoch_length
                assert (
                    order[positions - epoch * len(order)].tolist()
                    == mine[b * batch : (b + 1) * batch]
                )
                step = streams[r].step_positions(epoch, b)
                assert set(positions) <= set(step.tolist()) and len(step) == batch * world
    assert streams[0].locate(streams[0].batches_per_epoch + 1) == (1, 1)


def test_sampler_stream_events() -> None:
    sampler = DistributedSampler(list(range(8)), num_replicas=2, rank=1, shuffle=True, seed=4)
    stream = SamplerStream(sampler, batch_size=2)
    order = stream.data_order(2)
    assert isinstance(order, DataOrder)
    assert (order.epoch, order.start, order.dataset_size, order.seed) == (2, 16, 8, 4)
    assert sorted(order.items) == list(range(8)) and order.shuffle
    sampler.set_epoch(1)
    state = stream.loader_state(iteration=3, when="saved", next_step=4, loader_state={"k": 1})
    assert isinstance(state, LoaderState)
    assert (state.position, state.epoch, state.seed, state.state_json) == (16, 1, 4, '{"k": 1}')
    assert np.array_equal(stream.step_positions(2, 0), np.arange(16, 20))
