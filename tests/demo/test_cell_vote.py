"""Two cells in one process (threads, no Ray): the gradient exchange and the commit vote.

A real torchft ``LighthouseServer`` and a real torchft ``Manager`` per cell (its quorum,
``allreduce`` and ``should_commit``); the cells log into a real run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchft")

from ftaudit.demo.cell import DISCARDED, NORMAL, CellWorker
from ftaudit.demo.config import DemoConfig
from ftaudit.demo.schedule import DemoSchedule, DiscardSpec, QuorumTimeoutSpec
from ftaudit.demo.torchft_quorum import start_lighthouse
from ftaudit.trainer_hooks import DriverSession

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    # torchft 0.2.0 warns inside its quorum thread (the deprecated Logger.warn in
    # manager.py): turned into errors there, they would fail its quorum
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


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


@pytest.fixture
def lighthouse() -> Iterator[str]:
    server = start_lighthouse()
    yield server.address()
    server.shutdown()


def _cells(
    tmp_path: Path, lighthouse: str, bug: str | None
) -> tuple[DriverSession, list[CellWorker]]:
    schedule = DemoSchedule(discards=(DiscardSpec(step=0, cell=1),))
    cfg = DemoConfig(run_dir=str(tmp_path), faults_json=schedule.to_json(), bug=bug)
    session = DriverSession.start(tmp_path, buffer_size=cfg.buffer_size)
    cells = [CellWorker(cfg.to_json(), session.incarnation) for _ in range(2)]
    for c, worker in enumerate(cells):
        worker.join(c, lighthouse)
    return session, cells


def _attempt(session: DriverSession, cells: list[CellWorker], attempt: int) -> list[str]:
    """One attempt as the driver runs it: both cells join a quorum, then train."""
    quorums = _both(lambda c: c.join_quorum(0, attempt), cells)
    assert sorted(q.rank for q in quorums) == [0, 1] and {q.size for q in quorums} == {2}
    samples = list(range(16))
    info = session.allocate(0, attempt, samples)
    results = _both(
        lambda c: c.train_step(0, attempt, samples, samples, info.witness_ids, info.stale_ids),
        cells,
    )
    return [r["outcome"] for r in results]


def test_one_cells_discard_vote_makes_every_cell_discard(tmp_path: Path, lighthouse: str) -> None:
    session, cells = _cells(tmp_path, lighthouse, None)
    before = [c.hooks.hashes() for c in cells]
    assert _attempt(session, cells, 0) == [DISCARDED, DISCARDED]
    assert [c.hooks.hashes() for c in cells] == before  # nobody stepped
    assert _attempt(session, cells, 1) == [NORMAL, NORMAL]
    assert cells[0].hooks.hashes() == cells[1].hooks.hashes()  # the SUM made them equal


def test_the_commit_despite_peer_discard_bug_commits_alone(tmp_path: Path, lighthouse: str) -> None:
    """``should_commit()`` is a vote within one replica group (meta-pytorch/torchft
    ``torchft/manager.py`` at 000c1760ff5727123243c0cb3f7151360b4a6112: "different replica
    groups may return different values"), so the cell that ignores its peer's discard
    steps alone."""
    session, cells = _cells(tmp_path, lighthouse, "commit_despite_peer_discard")
    before = cells[0].hooks.hashes()
    assert _attempt(session, cells, 0) == [NORMAL, DISCARDED]
    assert cells[0].hooks.hashes() != before


def test_a_timed_out_quorum_stays_in_the_manager(tmp_path: Path, lighthouse: str) -> None:
    """Why the driver replaces a cell whose quorum failed: torchft's ``start_quorum``
    first re-raises the previous quorum's failure (meta-pytorch/torchft
    ``torchft/manager.py`` at 7eb7087885f7ffaf51148a9df3289d73b8709fbd: "wait for previous
    quorum to complete", ``self._quorum_future.result()``), so the cell cannot join again.
    Cell 1 holds its ask (the schedule's quorum timeout of cell 0), so cell 0's quorum
    cannot form: one asking cell of two heartbeating is no majority for the lighthouse."""
    schedule = DemoSchedule(quorum_timeouts=(QuorumTimeoutSpec(step=0, cell=0),))
    cfg = DemoConfig(run_dir=str(tmp_path), faults_json=schedule.to_json())
    session = DriverSession.start(tmp_path, buffer_size=cfg.buffer_size)
    cells = [CellWorker(cfg.to_json(), session.incarnation) for _ in range(2)]
    for c, worker in enumerate(cells):
        worker.join(c, lighthouse)
    with pytest.raises(TimeoutError, match="Timeout expired") as first:
        cells[0].join_quorum(0, 0)
    with pytest.raises(TimeoutError) as again:  # no new quorum: the old failure, raised again
        cells[0].join_quorum(0, 0)
    assert again.value is first.value
