"""``run.json`` is validated where a run starts and where it is verified.

With ``{"run_id": 123}`` every flush used to fail silently (fail-open) and ``ft-verify``
later exited 0: now ``RunLog.start`` and ``RunLog.attach`` raise naming the file, and
FT001 fails a run whose ``run.json`` is missing, invalid or names another run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftaudit.errors import RunFileError, UnusableInputError
from ftaudit.eventlog import RunLog
from tests.support.cli import Invoke, check_exit

BAD = {
    "number": '{"run_id": 123}',
    "null": '{"run_id": null}',
    "empty": '{"run_id": ""}',
    "missing-key": '{"id": "abc"}',
    "list": '["abc"]',
    "not-json": "run_id = abc",
    "path-like": '{"run_id": "../../etc"}',
    "empty-file": "",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_start_refuses_a_bad_run_file(tmp_path: Path, case: str) -> None:
    (tmp_path / "run.json").write_text(BAD[case])
    with pytest.raises(RunFileError, match=r"run\.json: ") as caught:
        RunLog.start(tmp_path, buffer_size=8)
    assert isinstance(caught.value, UnusableInputError)
    assert not (tmp_path / "events").exists()  # nothing was written under a bad id


def test_attach_refuses_a_bad_run_file(tmp_path: Path) -> None:
    RunLog.start(tmp_path, buffer_size=8).close()
    (tmp_path / "run.json").write_text(BAD["number"])
    with pytest.raises(RunFileError, match="must be a string"):
        RunLog.attach(tmp_path, 0)


def test_concurrent_starters_agree_on_one_id(tmp_path: Path) -> None:
    ids = {RunLog.start(tmp_path, buffer_size=8).run_id for _ in range(3)}
    assert len(ids) == 1
    assert json.loads((tmp_path / "run.json").read_text()) == {"run_id": ids.pop()}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("content", [BAD["number"], None, '{"run_id": "another-run"}'])
def test_verify_fails_a_bad_or_missing_run_file(
    ftaudit: Invoke, good_run: Path, tmp_path: Path, content: str | None
) -> None:
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    if content is None:
        (run / "run.json").unlink()
    else:
        (run / "run.json").write_text(content)
    result = ftaudit("verify", run, "--format", "json")
    check_exit(result, 1)
    [bad] = [v for r in json.loads(result.stdout)["results"] for v in r["violations"]]
    assert (bad["code"], bad["kind"]) == ("FT001", "bad_run_file")
    assert "run.json" in bad["message"]
