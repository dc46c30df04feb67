"""ftaudit export: committed metrics only, read back with TensorBoard's own event reader."""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ftaudit.cli.app import app
from ftaudit.eventlog.context import step_context
from ftaudit.eventlog.events import Metric
from ftaudit.export import committed_metrics, write_tensorboard
from ftaudit.export.tfrecord import crc32c
from tests.support.builder import NORMAL, RunBuilder

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def _log(writer, step: int, attempt: int, **values: float) -> None:  # type: ignore[no-untyped-def]
    with step_context(step, attempt):
        writer.log(Metric(values=values))


@pytest.fixture
def rewound_run(tmp_path: Path) -> Path:
    """Steps 0-3 then a crash; a resume from checkpoint 1 runs 2-4; step 3 retries once."""
    b = RunBuilder(tmp_path / "run")
    first = b.start()
    for step in range(4):
        first.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        _log(first.trainer(0), step, 0, loss=float(step), lr=0.1)
        if step == 1:
            first.checkpoint(1)
    first.log.close()  # crashed: steps 2 and 3 of incarnation 0 are abandoned
    again = b.start(resume_from=1)
    for step in range(2, 5):
        if step == 3:
            again.train(step, [9, 10, 11], cells={0: NORMAL}, attempt=0)
        _log(again.trainer(0), step, 0, loss=100.0 + step, lr=0.1)
        if step == 2:
            _log(again.driver, step, 0, loss=float("nan"))  # a second source of "loss"
        if step != 3:
            again.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
    _log(again.trainer(0), 4, 0, spike=float("inf"))
    again.finish()
    b.close()
    return b.root


def test_crc32c_known_answer() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_only_the_committed_history_is_exported(rewound_run: Path) -> None:
    metrics = committed_metrics(rewound_run)
    losses = {(m.step, m.tag): m.value for m in metrics if m.name == "loss"}
    # steps 0-1 from incarnation 0; 2-4 from the resume; the abandoned 2-3 never appear
    assert {k: v for k, v in losses.items() if not math.isnan(v)} == {
        (0, "loss/trainer.c0.r0"): 0.0,
        (1, "loss/trainer.c0.r0"): 1.0,
        (2, "loss/trainer.c0.r0"): 102.0,
        (3, "loss/trainer.c0.r0"): 103.0,
        (4, "loss/trainer.c0.r0"): 104.0,
    }
    assert [k for k, v in losses.items() if math.isnan(v)] == [(2, "loss/driver")]
    assert {m.incarnation for m in metrics if m.step >= 2} == {1}
    spike = [m for m in metrics if m.name == "spike"]
    assert [(m.tag, m.value) for m in spike] == [("spike", math.inf)]


def test_tensorboard_reads_back_what_was_written(rewound_run: Path, tmp_path: Path) -> None:
    metrics = committed_metrics(rewound_run)
    path = write_tensorboard(metrics, tmp_path / "tb")
    assert path.parent == tmp_path / "tb"
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = sorted({m.tag for m in metrics})
    assert sorted(acc.Tags()["scalars"]) == tags
    for tag in tags:
        want = [(m.step, np.float32(m.value)) for m in metrics if m.tag == tag]
        got = [(e.step, np.float32(e.value)) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == [s for s, _ in want], tag
        for (_, g), (_, w) in zip(got, want, strict=True):
            assert g == w or (np.isnan(g) and np.isnan(w)), tag
    walls = [e.wall_time for e in acc.Scalars("lr")]
    assert walls == [m.wall_time for m in metrics if m.tag == "lr"]


def test_cli_writes_csv_and_tensorboard(rewound_run: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["export", str(rewound_run), "--tensorboard", str(tmp_path / "tb"), "--csv", "-"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["step"] for r in rows if r["name"] == "lr"] == ["0", "1", "2", "3", "4"]
    assert {r["incarnation"] for r in rows if r["step"] in ("2", "3", "4")} == {"1"}
    assert any(r["value"] == "inf" for r in rows)
    assert len(list((tmp_path / "tb").iterdir())) == 1


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["export", "{missing}", "--csv", "-"], "no such run directory"),
        (["export", "{run}"], "nothing to export"),
    ],
)
def test_cli_bad_input_exits_2(
    rewound_run: Path, tmp_path: Path, args: list[str], text: str
) -> None:
    argv = [a.format(missing=tmp_path / "nope", run=rewound_run) for a in args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert text in result.output


def test_export_needs_no_torch(rewound_run: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ftaudit.export import committed_metrics, write_tensorboard, write_csv\n"
        f"m = committed_metrics({str(rewound_run)!r})\n"
        f"write_tensorboard(m, {str(tmp_path / 'tb')!r}); write_csv(m)\n"
        "bad = [x for x in ('torch', 'tensorboard', 'tensorflow') if x in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
