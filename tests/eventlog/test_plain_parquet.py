"""The README's plain-Parquet snippet (DuckDB and pandas, no ftaudit) works as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ftaudit.eventlog import read_records

README = Path(__file__).resolve().parents[2] / "README.md"
MARK = "<!-- plain-parquet:"


def _snippet() -> str:
    text = README.read_text()
    after = text[text.index(MARK) :]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def test_the_readme_snippet_reads_every_event(
    good_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    os.symlink(good_run, tmp_path / "runs" / "exp1")  # the README's path, unchanged
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(_snippet(), str(README), "exec"), scope)
    df = scope["df"]
    records = read_records(good_run)
    assert len(df) == len(records)
    assert set(df["type"]) == {r.event.type for r in records}
