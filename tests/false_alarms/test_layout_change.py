"""Real torchrun jobs (gloo, CPU) resumed with another parallel layout, each launch the next
incarnation of one run directory, every checkpoint a DCP directory resharded by the next:

    incarnation 0: DDP on 2 processes (2 cells)        steps 0-1, checkpoint 1
    incarnation 1: DDP on 1 process (1 cell)           steps 2-3, checkpoint 3   world 2 -> 1
    incarnation 2: FSDP on 2 processes (1 cell, 2 ranks) steps 4-5, checkpoint 5 DDP -> FSDP
    incarnation 3: DDP on 2 processes (2 cells)        steps 6-7                 FSDP -> DDP

So the replica count shrinks and grows, a cell gains ranks that saved nothing, and local
shards meet plain tensors both ways. The correct run must verify with nothing to report
(``--strict``); its twin plants real defects of the same shape in the first three
launches (``layout_child.py``) and each must be reported by its rule, where it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ftaudit
from ftaudit.verifier import verify
from ftaudit.verifier.findings import Violation
from tests.support.torchrun import torchrun

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CHILD = Path(__file__).with_name("layout_child.py")
LAUNCHES = [(2, "ddp", 1), (1, "ddp", 3), (2, "fsdp", 5), (2, "ddp", 7)]
"""(processes, strategy, last step) of each incarnation."""


def run_chain(run_dir: Path, launches: list[tuple[int, str, int]], bugs: str) -> None:
    for nproc, strategy, last in launches:
        output = torchrun(CHILD, str(run_dir), strategy, str(last), bugs, nproc=nproc)
        assert output.count(" done") == nproc, output[-3000:]


def test_resumes_with_other_layouts_verify_clean(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_chain(run_dir, LAUNCHES, "none")
    report = verify(run_dir)
    found = [f"{r.code}: {v.message}" for r in report.results for v in r.violations]
    assert not found, "\n".join(found)  # no error and no warning: --strict passes
    checked = {r.code: r.checked for r in report.results}
    assert all(checked[c] > 0 for c in ("FT004", "FT005", "FT006", "FT009", "FT010")), checked
    assert all(checked[c] > 0 for c in ("FT011", "FT012")), checked
    with ftaudit.connect(run_dir) as con:
        loads = con.sql(
            """SELECT incarnation, cell, rank,
                      list_contains(map_keys(hashes), 'param/head.weight@whole'),
                      list_contains(map_keys(hashes), 'param/head.weight')
               FROM trainer_weight_checksum WHERE "when" = 'after_load' ORDER BY ALL"""
        ).fetchall()
    # each incarnation really ran its layout, and every load logged the whole-tensor
    # digest that compares across it; FSDP holds local shards, not the plain tensor
    assert loads == [
        (1, 0, 0, True, True),
        (2, 0, 0, True, False),
        (2, 0, 1, True, False),
        (3, 0, 0, True, True),
        (3, 1, 0, True, True),
    ], loads


def _where(v: Violation) -> tuple[int | None, int | None]:
    return (v.location.incarnation, v.location.cell)


def test_defects_of_the_same_shape_are_caught(tmp_path: Path) -> None:
    """Incarnation 1 (one process) never loads and replays the stream; in incarnation 2
    (FSDP over two) global rank 1 loads its rows from checkpoint 1, not 3."""
    run_dir = tmp_path / "run"
    run_chain(run_dir, LAUNCHES[:3], "unrestored,replay,stale_shard")
    report = verify(run_dir)
    errors = {r.code: [v for v in r.violations if v.severity == "error"] for r in report.results}
    shown = "\n".join(f"{c}: {v.message}" for c, vs in errors.items() for v in vs)

    unrestored = [v for v in errors["FT009"] if v.kind == "unrestored_rank"]
    assert [(*_where(v), v.location.rank) for v in unrestored] == [(1, 0, 0)], shown

    # the replayed stream: steps 2-3 train samples 4..7 again, and 8..15 never train
    duplicated = {i for v in errors["FT005"] if "replay" in v.kind or "dup" in v.kind
                  for i in v.sample_indices}  # fmt: skip
    skipped = {i for v in errors["FT005"] if "skip" in v.kind for i in v.sample_indices}
    assert duplicated == set(range(4, 8)) and set(range(8, 16)) <= skipped, shown

    stale = [v for v in errors["FT006"] if v.kind == "restore_mismatch"]
    assert {_where(v) for v in stale} == {(2, 0)}, shown
    assert all("another parallel layout (2 rank(s), saved by 1)" in v.message for v in stale)
    assert all("@whole" in v.message for v in stale), shown
