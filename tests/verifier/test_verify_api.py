"""verify(): unusable input is an error naming the file; rule selection; the history views."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ftaudit
from ftaudit.errors import CorruptSegmentError, UnknownEventTypeError, UnusableInputError
from ftaudit.eventlog import Driver, Event, EventRegistry, EventWriter
from ftaudit.eventlog.events import BUILTIN_EVENTS
from ftaudit.verifier import UnknownRuleError, verify
from ftaudit.verifier.rules import RULES
from tests.support.builder import OPTIONS, RunBuilder
from tests.verifier.rules.recipes import restart_ok


@pytest.fixture
def clean_run(tmp_path: Path) -> Path:
    builder = RunBuilder(tmp_path / "run")
    try:
        restart_ok(builder)
    finally:
        builder.close()
    return builder.root


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UnusableInputError) as exc:
        verify(tmp_path / "nope")
    assert "no such run directory" in _one_line(exc)


def test_not_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(UnusableInputError) as exc:
        verify(path)
    assert "not a directory" in _one_line(exc)


def test_no_events(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    with pytest.raises(UnusableInputError) as exc:
        verify(tmp_path)
    assert "no event segments" in _one_line(exc)


def test_truncated_segment(clean_run: Path) -> None:
    segment = next((clean_run / "events").glob("driver*/*.parquet"))
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptSegmentError) as exc:
        verify(clean_run)
    assert segment.name in _one_line(exc)


def test_foreign_parquet(clean_run: Path) -> None:
    folder = next((clean_run / "events").glob("driver*"))
    pq.write_table(pa.table({"x": [1, 2]}), folder / "000000099999.parquet")
    with pytest.raises(CorruptSegmentError) as exc:
        verify(clean_run)
    assert "foreign Parquet" in _one_line(exc)


class Mystery(Event):
    type: Literal["mystery_event"] = "mystery_event"
    value: int = 0


def test_unknown_event_type(clean_run: Path) -> None:
    registry = EventRegistry((*BUILTIN_EVENTS, Mystery))
    writer = EventWriter(
        clean_run, Driver(), run_id="x", incarnation=0, options=OPTIONS, registry=registry
    )
    writer.log(Mystery(value=3))
    writer.close()
    with pytest.raises(UnknownEventTypeError) as exc:
        verify(clean_run)
    assert "'mystery_event' is not registered" in _one_line(exc)


def test_clean_run_passes_every_rule(clean_run: Path) -> None:
    steps: list[str] = []
    report = verify(clean_run, progress=steps.append)
    assert report.passed(strict=True), report.to_dict()
    assert [r.code for r in report.results] == [r.code for r in RULES]
    assert all(r.checked > 0 for r in report.results if r.code in {"FT001", "FT002", "FT004"})
    assert any(s.startswith("FT004") for s in steps)


def test_select_and_skip(clean_run: Path) -> None:
    report = verify(clean_run, select=["ft004", "log-integrity"], skip=["FT001"])
    assert [r.code for r in report.results] == ["FT004"]
    with pytest.raises(UnknownRuleError, match="unknown rule 'FT999'"):
        verify(clean_run, select=["FT999"])


def test_history_views(clean_run: Path) -> None:
    with ftaudit.connect(clean_run) as con:
        committed = con.sql(
            "SELECT step, incarnation FROM committed_steps ORDER BY step"
        ).fetchall()
        assert committed == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]
        statuses = con.sql(
            "SELECT incarnation, step, status FROM timeline WHERE step = 2 ORDER BY incarnation"
        ).fetchall()
        assert statuses == [(0, 2, "rolled_back"), (1, 2, "committed")]
        lineage = con.sql("SELECT incarnation, after_step, up_to_step FROM lineage ORDER BY 1")
        assert lineage.fetchall() == [(0, None, 1), (1, 1, None)]
        abandoned = con.sql("SELECT DISTINCT incarnation, step FROM abandoned_events").fetchall()
        assert abandoned == [(0, 2)]


def test_history_views_in_sandbox(clean_run: Path) -> None:
    with ftaudit.connect(clean_run, sandbox=True) as con:
        assert con.sql("SELECT count(*) FROM committed_steps").fetchall() == [(5,)]
