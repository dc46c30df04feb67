"""The rules benchmark times opening and every rule, for each version and round, each
version in a process of its own; no timing asserted."""

from __future__ import annotations

import json
from pathlib import Path

from ftaudit.synth import SynthConfig, synthesize
from ftaudit.verifier.rules import RULES
from tests.support.processes import ROOT, run_benchmark


def test_rules_bench_times_every_rule_of_both_versions(tmp_path: Path) -> None:
    run = tmp_path / "run"
    synthesize(run, SynthConfig(steps=4, restarts=1, retries=1))
    out = tmp_path / "rounds.json"
    done = run_benchmark(
        "rules_bench.py",
        [str(run), "--rounds", "1", "--baseline", str(ROOT / "src"), "--json", str(out)],
    )
    rounds = json.loads(out.read_text())
    assert [(r["round"], r["version"]) for r in rounds] == [(1, "baseline"), (1, "current")]
    for r in rounds:
        assert list(r["rules"]) == [rule.code for rule in RULES]
        assert r["open_s"] > 0 and all(s >= 0 for s in r["rules"].values())
    assert "all rules, current / baseline (medians):" in done.stdout
