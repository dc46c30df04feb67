"""FT008 beyond the cases: its note in every report, incremental verification, and the
same verdict whatever the chunk of samples judged at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ftaudit.synth import synthesize
from ftaudit.verifier import fed as fed_module
from ftaudit.verifier import verify
from ftaudit.verifier.fed import FedChunk, FedSamples
from ftaudit.verifier.render import render
from tests.support.synth_runs import small_synth
from tests.verifier.rules.ft008_cases import CASES


def _build(tmp_path: Path, name: str) -> Path:
    """The run of FT008's case ``name``."""
    (case,) = [c for c in CASES if c.name == name]
    return case.write(tmp_path / "run")


def test_the_note_says_what_was_checked(tmp_path: Path) -> None:
    report = verify(_build(tmp_path, "shuffled"), select=["FT008"])
    (result,) = report.results
    assert result.checked == 6 and result.note.startswith("checked against dataset manifest")
    assert result.to_dict()["note"] == result.note
    assert f"FT008 note: {result.note}" in render(report, "text")


def test_incremental_keeps_the_declarations_and_says_what_it_left_out(tmp_path: Path) -> None:
    """The window of ``--since-step`` holds the declarations from before it (the order an
    epoch is read in carries no step): the changed order is found incrementally too."""
    run = _build(tmp_path, "order_changed_at_resume")
    full = verify(run, select=["FT008"])
    (result,) = verify(run, select=["FT008"], since_step=1).results
    assert "incremental verification" in result.note
    assert {v.kind for v in result.violations} == {"order_changed"}
    assert [v.to_dict() for v in result.violations] == [
        v.to_dict() for r in full.results for v in r.violations if v.kind == "order_changed"
    ]


def test_judging_in_tiny_chunks_gives_the_verdict_of_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FT008 spells out per-sample arrays a chunk of samples at a time (a run of tens of
    millions of fed samples took gigabytes at once): chunk boundaries anywhere, even
    inside every run of positions, change no violation, message or order."""
    runs = [c.write(tmp_path / c.name) for c in CASES if c.name in _PER_SAMPLE]
    whole = [_ft008(run) for run in runs]
    monkeypatch.setattr(fed_module, "CHUNK", 1)
    seen: list[int] = []
    real = FedSamples.chunks

    def recorded(fed: FedSamples) -> Iterator[FedChunk]:
        for c in real(fed):
            seen.append(c.position.size)
            yield c

    monkeypatch.setattr(FedSamples, "chunks", recorded)
    assert [_ft008(run) for run in runs] == whole
    assert seen and max(seen) == 1


def test_a_synth_run_with_heals_and_repeats_verifies_alike_in_tiny_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retried steps, a crash and a sample fed twice: fed-twice positions, duplicates and
    coverage across chunk boundaries."""
    config = small_synth(
        16, ranks=2, samples_per_step=32, restarts=1, retries=2, bug="sample_twice"
    )
    run = synthesize(tmp_path / "run", config).run_dir
    whole = _ft008(run)
    monkeypatch.setattr(fed_module, "CHUNK", 5)
    assert _ft008(run) == whole
    assert "duplicate_content" in {v["kind"] for v in whole["violations"]}


_PER_SAMPLE = {
    "peer_shard",  # wrong content
    "peer_shard_without_manifest",  # a content twice in an epoch, by hash
    "overlapping_shards",  # a content twice in an epoch, by two cells
    "cells_disagree",  # one position, two contents
    "missing_fingerprint",  # coverage
    "claim_against_order",  # the loader's own claims
}
"""The cases whose findings come from the per-sample pass (not from declarations)."""


def _ft008(run: Path) -> dict:
    """FT008's result as the JSON report gives it, less its time."""
    (result,) = verify(run, select=["FT008"]).results
    return {k: v for k, v in result.to_dict().items() if k != "seconds"}
