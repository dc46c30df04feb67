from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.eventlog import EventWriter, Trainer, WriterOptions


@pytest.fixture
def writer(tmp_path: Path):
    """A trainer writer with fsync off (tests need atomic renames, not power-loss safety)."""
    w = EventWriter(
        tmp_path,
        Trainer(cell_index=1, rank_within_cell=0),
        run_id="test-run",
        incarnation=0,
        options=WriterOptions(fsync=False),
    )
    yield w
    w.close()
