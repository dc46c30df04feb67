"""The real torchft 0.2.0 Manager, a real LighthouseServer, two replica groups (cells).

Written against torchft 0.2.0 as installed (``torchft/manager.py``: ``should_commit``,
``current_step``, ``register_state_dict_fn``, the ``torchft_quorums`` /
``torchft_commits`` records; ``torchft/optim.py``: ``OptimizerWrapper``;
``torchft/ddp.py``: ``DistributedDataParallel``), following the shape of its own
``manager_integ_test.py``: each replica group runs in a thread with its own TCPStore,
``ProcessGroupGloo`` and Manager, and a failed group is restarted with a new Manager
that heals from its peer. The driver (witness ids, the attempt of each step, the step
ends under torchft's "any group committed" policy) runs in the test process.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torchft import Manager, ProcessGroupGloo
from torchft._torchft import LighthouseServer
from torchft.ddp import DistributedDataParallel
from torchft.optim import OptimizerWrapper

from ftaudit.eventlog import (
    CellOutcome,
    CellReconfigured,
    TorchftCommit,
    TorchftQuorum,
    read_records,
)
from ftaudit.trainer_hooks import DriverSession, WitnessInfo, errored
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids
from ftaudit.trainer_hooks.torchft import TorchftHooks, any_committed
from ftaudit.verifier import verify
from tests.support.torch_models import VOCAB, lm_loss, make_model

pytestmark = [
    pytest.mark.torch,
    pytest.mark.slow,
    # torchft 0.2.0 warns inside its quorum thread (the deprecated Logger.warn in
    # manager.py; torch.frombuffer on a read-only buffer in its HTTP checkpoint transport):
    # turned into errors there, they would fail its quorum and its heals
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]
CELLS, BATCH, SEQ, B, STEPS = 2, 2, 6, 40, 5
FAIL_STEP = 2  # cell 1's first life dies here, after its gradients were exchanged
INIT_LOCK = threading.Lock()


class InjectedFailure(Exception):
    """A replica group crashing mid-step (torchft's own tests inject failures this way)."""


@dataclass
class Driver:
    """The job's driver: one allocation per attempt, step ends under torchft's policy."""

    session: DriverSession
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_attempt: dict[int, int] = field(default_factory=dict)
    allocations: dict[tuple[int, int], WitnessInfo] = field(default_factory=dict)
    reports: dict[tuple[int, int], dict[int, CellOutcome]] = field(default_factory=dict)

    def ids(self, step: int, cell: int) -> tuple[int, list[int], list[int]]:
        """(attempt, this cell's witness ids, stale ids) of the open attempt of ``step``."""
        with self.lock:
            attempt = self.open_attempt.setdefault(step, 0)
            info = self.allocations.get((step, attempt))
            if info is None:
                samples = range(step * CELLS * BATCH, (step + 1) * CELLS * BATCH)
                info = self.session.allocate(step, attempt, samples)
                self.allocations[(step, attempt)] = info
            return attempt, info.witness_ids[cell * BATCH : (cell + 1) * BATCH], info.stale_ids

    def report(self, step: int, attempt: int, cell: int, outcome: CellOutcome) -> None:
        with self.lock:
            cells = self.reports.setdefault((step, attempt), {})
            cells[cell] = outcome
            if len(cells) < CELLS:
                return
            accepted = any_committed(cells)
            self.session.record_attempt_end(step, attempt, cells, accepted=accepted)
            if accepted:
                self.session.record_step_end(step, attempt, cells)
            else:
                self.open_attempt[step] = attempt + 1


def sample_tokens(first: int) -> torch.Tensor:
    return torch.stack(
        [
            torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            for i in range(first, first + BATCH)
        ]
    )


def replica(
    run_dir: Path,
    driver: Driver,
    lighthouse: str,
    cell: int,
    fail: bool,
    heal_optimizer: bool,
) -> None:
    """One life of replica group ``cell`` (world size 1): train until STEPS are committed."""
    store = dist.TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
    with INIT_LOCK:  # the seed is the process's: one group at a time
        model = make_model(seed=0, layers=1)
        install_witnesses(model, B, layers="layers")
    inner = torch.optim.Adam(model.parameters(), lr=1e-2)

    def load_state_dict(state: dict[str, object]) -> None:
        model.load_state_dict(state["model"])
        if heal_optimizer:  # without it (the defect) a healed group keeps a fresh optimizer
            inner.load_state_dict(state["optim"])

    manager = Manager(
        pg=ProcessGroupGloo(),
        load_state_dict=load_state_dict,
        state_dict=lambda: {"model": model.state_dict(), "optim": inner.state_dict()},
        min_replica_size=CELLS,
        use_async_quorum=False,  # heal before the forward: the group trains its own batch
        init_sync=False,  # every group starts from the same seed: no heal at step 0
        replica_id=str(cell),
        store_addr="localhost",
        store_port=store.port,
        rank=0,
        world_size=1,
        lighthouse_addr=lighthouse,
    )
    hooks = TrainerHooks.attach(
        run_dir, driver.session.incarnation, cell=cell, rank=0, model=model, optimizer=inner
    )
    ft = TorchftHooks.attach(manager, hooks, replica_id=str(cell))
    ddp = DistributedDataParallel(manager, model)
    optimizer = OptimizerWrapper(manager, inner)
    step, attempt = -1, 0
    try:
        while True:
            optimizer.zero_grad()  # start_quorum: a new group heals here
            step = manager.current_step()
            if step >= STEPS:
                break
            ft.check_step(step)
            attempt, ids, stale = driver.ids(step, cell)
            first = step * CELLS * BATCH + cell * BATCH
            toks = sample_tokens(first)
            with hooks.step(step, attempt):
                with hooks.batch(sample_token_ids(ids, SEQ)):
                    lm_loss(ddp(toks), toks).backward()  # gradients exchanged
                if fail and step == FAIL_STEP:
                    raise InjectedFailure(f"cell {cell} dies in step {step}")
                outcome = ft.optimizer_step(optimizer, stale, checksum=True)
            driver.report(step, attempt, cell, CellOutcome(ranks=[outcome]))
    except InjectedFailure:
        driver.report(step, attempt, cell, errored())
        raise
    finally:
        ft.close()
        hooks.close()
        manager.shutdown(wait=False)


def run_job(run_dir: Path, *, heal_optimizer: bool = True) -> None:
    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=CELLS)
    session = DriverSession.start(
        run_dir, buffer_size=B, dataset_size=10_000, deterministic_order=True
    )
    driver = Driver(session)

    def group(cell: int) -> None:
        for life in range(2):  # a failed group is restarted once (a new process would be)
            try:
                replica(
                    run_dir,
                    driver,
                    lighthouse.address(),
                    cell,
                    cell == 1 and life == 0,
                    heal_optimizer,
                )
                return
            except InjectedFailure:
                continue

    try:
        with ThreadPoolExecutor(max_workers=CELLS) as pool:
            for future in [pool.submit(group, c) for c in range(CELLS)]:
                future.result(timeout=600)
    finally:
        lighthouse.shutdown()
    session.finish()


def _events(run_dir: Path, kind: type) -> list:
    return [r for r in read_records(run_dir) if isinstance(r.event, kind)]


def test_a_group_crash_and_heal_verifies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_job(run_dir)
    report = verify(run_dir)
    assert report.passed(), [v.message for r in report.results for v in r.violations]
    heals = [r.event for r in _events(run_dir, CellReconfigured) if r.event.healed_cells]
    assert [(h.healed_cells, h.heal_source) for h in heals] == [([1], 0)]
    commits = _events(run_dir, TorchftCommit)
    assert {(r.event.replica_id, r.event.commit_result) for r in commits} >= {("0", True)}
    assert _events(run_dir, TorchftQuorum)  # torchft's quorum records, as events


def test_a_healed_group_without_the_optimizer_state_is_caught(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_job(run_dir, heal_optimizer=False)
    report = verify(run_dir)
    messages = [v.message for r in report.results if r.code == "FT006" for v in r.violations]
    assert any("was healed from cell 0" in m for m in messages), messages
