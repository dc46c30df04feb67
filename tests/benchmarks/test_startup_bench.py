"""The start-up benchmark times every command, and ``ft-verify`` on a run given with
``--run`` too, a run with violations included (exit 1 is a verdict); no timing asserted.
Its results file gains a section per sitting and keeps the earlier ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftaudit.synth import SynthConfig, synthesize
from ftaudit.verifier import verify
from tests.support.processes import run_benchmark


@pytest.mark.slow
def test_startup_bench_times_a_given_run_with_violations(tmp_path: Path) -> None:
    run = tmp_path / "run"
    synthesize(run, SynthConfig(steps=4, restarts=0, retries=0, bug="missing_sample"))
    assert not verify(run).passed()  # ft-verify exits 1 on it
    out = tmp_path / "out"
    out.mkdir()
    earlier = "## An earlier sitting\n\nits table\n"
    (out / "startup_bench.md").write_text(
        f"# ft-verify start-up (median of 10)\n\nintro\n\n{earlier}"
    )
    run_benchmark("startup_bench.py", ["--repeat", "1", "--run", str(run), "--out", str(out)])
    rows = json.loads((out / "startup_bench.json").read_text())["rows"]
    labels = [r["label"] for r in rows]
    assert labels[0] == "python -c pass"
    assert labels[-1] == "ft-verify RUN (--run)"
    assert all(r["wall_s"] > 0 and r["cpu_s"] >= 0 for r in rows)
    text = (out / "startup_bench.md").read_text()
    assert text.startswith("# ft-verify start-up (median of 10)\n\nintro\n\n## ")
    assert text.endswith(earlier) and text.count("\n## ") == 2
    assert "`ft-verify RUN (--run)`" in text
