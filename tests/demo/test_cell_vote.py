"""Two cells in one process (threads, no Ray): the gradient exchange and the commit vote.

A real torchft ``ProcessGroupGloo`` over a real TCP store; the cells log into a real run.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchft")

from torch.distributed import TCPStore

from ftaudit.demo.cell import DISCARDED, NORMAL, CellWorker
from ftaudit.demo.config import DemoConfig
from ftaudit.demo.schedule import DemoSchedule, DiscardSpec
from ftaudit.trainer_hooks import DriverSession

pytestmark = [pytest.mark.slow, pytest.mark.torch]


def _both(fn: Any, cells: list[CellWorker]) -> list[Any]:
    """Call ``fn(cell)`` for both cells at once (collectives need both)."""
    out: list[Any] = [None, None]

    def run(i: int) -> None:
        out[i] = fn(cells[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a cell never returned"
    return out


def _cells(tmp_path: Path, bug: str | None) -> tuple[DriverSession, list[CellWorker]]:
    schedule = DemoSchedule(discards=(DiscardSpec(step=0, cell=1),))
    cfg = DemoConfig(run_dir=str(tmp_path), faults_json=schedule.to_json(), bug=bug)
    session = DriverSession.start(tmp_path, buffer_size=cfg.buffer_size)
    cells = [CellWorker(cfg.to_json(), session.incarnation) for _ in range(2)]
    for c, worker in enumerate(cells):
        worker.join(c)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    _both(lambda c: c.configure(f"127.0.0.1:{store.port}", 1, c.cell, 2), cells)
    return session, cells


def _attempt(session: DriverSession, cells: list[CellWorker], attempt: int) -> list[str]:
    samples = list(range(16))
    info = session.allocate(0, attempt, samples)
    results = _both(
        lambda c: c.train_step(0, attempt, samples, samples, info.witness_ids, info.stale_ids),
        cells,
    )
    return [r["outcome"] for r in results]


def test_one_cells_discard_vote_makes_every_cell_discard(tmp_path: Path) -> None:
    session, cells = _cells(tmp_path, None)
    before = [c.hooks.hashes() for c in cells]
    assert _attempt(session, cells, 0) == [DISCARDED, DISCARDED]
    assert [c.hooks.hashes() for c in cells] == before  # nobody stepped
    assert _attempt(session, cells, 1) == [NORMAL, NORMAL]
    assert cells[0].hooks.hashes() == cells[1].hooks.hashes()  # the SUM made them equal


def test_the_commit_despite_peer_discard_bug_commits_alone(tmp_path: Path) -> None:
    session, cells = _cells(tmp_path, "commit_despite_peer_discard")
    before = cells[0].hooks.hashes()
    assert _attempt(session, cells, 0) == [NORMAL, DISCARDED]
    assert cells[0].hooks.hashes() != before
