"""Start-up: verifying a run imports only what reading and checking it needs.

``ft-verify`` pays its imports on every call (a gate runs it after every step), so the
verify path must not import the writer side of the event log (writer, run-directory
writer, resume index), the trainer hooks, torch, Ray, Megatron, rich (the plain text report
is written without it), ``pyarrow.compute`` (30 ms to import; ``--since-step`` uses it),
the event models (``events.py``, ``record.py``, ``identity.py``: the verifier reads the
types' generated layouts, ``eventlog/builtin_layouts.py``) or pandas (which pyarrow's
``to_numpy``, ``pa.array``, ``pa.repeat`` and ``pq.read_table`` load on first use: half a
second; see ``ftaudit.eventlog.arrays``), and must build no
pydantic validator: the rows' shape is checked in SQL on load, so no event is validated
again (building the validators, and pydantic's plugin scan of every installed package
that the first one triggers, cost about 0.1 s). Its speed is measured in
``benchmarks/startup_bench.py``; these tests assert import facts only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit.synth.generate import SynthConfig, synthesize

NOT_ON_THE_VERIFY_PATH = (
    "ftaudit.eventlog.writer",
    "ftaudit.eventlog.run",
    "ftaudit.eventlog.resume",
    "ftaudit.trainer_hooks",
    "torch",
    "ray",
    "megatron",
    "pandas",
    "rich",
    "numpy.ma",  # np.unique imports it (10 ms): ftaudit.eventlog.arrays.unique_sorted
    "typer",  # its import and per-option adapters: ft-verify parses a plain line itself
    "pydantic",  # 40-50 ms to import: IntRuns is a plain class, the models are not imported
    # the event models: the verifier reads the generated layouts (eventlog/builtin_layouts.py)
    "ftaudit.eventlog.events",
    "ftaudit.eventlog.record",
    "ftaudit.eventlog.identity",
    "ftaudit.eventlog.arrow_schema",
    "ftaudit.eventlog.describe",
    "ftaudit.eventlog.segment_table",
)

NOT_ON_THE_PLAIN_PATH = (
    *NOT_ON_THE_VERIFY_PATH,
    "pyarrow.compute",  # 30 ms to import; --since-step's selection still uses it
    "ftaudit.eventlog.batch",  # the writer's buffers (eventlog.segment names them only)
    "ftaudit.eventlog.context",
    "ftaudit.dataset.build",
)
"""What ``ft-verify RUN_DIR`` (no ``--since-step``) must not load either."""

NO_VALIDATOR_BUILT = (
    "from ftaudit.eventlog import default_registry\n"
    "from ftaudit.eventlog.record import Envelope, Record\n"
    "models = [Envelope, Record, *(t.model for t in default_registry)]\n"
    "built = [m.__name__ for m in models if m.__pydantic_complete__]\n"
    "assert not built, f'pydantic validators built on the verify path: {built}'\n"
)
"""Asserts that no model of the event log has built its validator (``defer_build``)."""


def _python(code: str) -> None:
    """Run ``code`` in a fresh interpreter (its imports are the ones counted); it must pass."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = SynthConfig(steps=6, restarts=1, retries=1, buffer_size=4_096, samples_per_step=64)
    return synthesize(tmp_path_factory.mktemp("startup") / "run", config).run_dir


def test_verifying_a_run_imports_no_writer_side_and_no_renderer(small_run: Path) -> None:
    code = (
        "import sys\n"
        "from ftaudit.verifier import verify\n"
        f"for since in (None, 4):\n"
        f"    report = verify({str(small_run)!r}, since_step=since)\n"
        "    assert report.passed(strict=False), f'the clean run did not verify ({since})'\n"
        f"heavy = [m for m in {NOT_ON_THE_VERIFY_PATH!r} "
        "if any(k == m or k.startswith(m + '.') for k in sys.modules)]\n"
        "assert not heavy, f'imported on the verify path: {heavy}'\n"
        f"{NO_VALIDATOR_BUILT}"
    )
    _python(code)


def test_a_window_cut_inside_a_merged_segment_imports_no_pandas(tmp_path: Path) -> None:
    """Where a window begins inside a writer's merged segment, its steps are read to cut
    it (``--since-step``, and a follower at every roll it sees), and a follower's new rows
    of it are cut in Arrow: not through pyarrow's ``to_numpy`` or a Python int in a compute
    call, each of which imported pandas (0.33 s of a follower's poll at a roll)."""
    config = SynthConfig(
        steps=40, buffer_size=256, samples_per_step=64, flush_every=1, roll_segments=4
    )
    run = synthesize(tmp_path / "run", config).run_dir
    code = (
        "import sys\n"
        "from ftaudit.verifier import verify\n"
        "from ftaudit.verifier.incremental import HEAD_ONLY, WHOLE, select\n"
        f"_, scope = select({str(run)!r}, 30)\n"
        "cut = [k for k in scope.kept.values() if k not in (WHOLE, HEAD_ONLY)]\n"
        "assert cut, 'no merged segment was cut: the test misses its path'\n"
        f"assert verify({str(run)!r}, since_step=30).passed(strict=False)\n"
        "assert 'pandas' not in sys.modules, 'cutting a merged segment imported pandas'\n"
    )
    _python(code)
    # a follower's window moved onto a merged segment it keeps in part (a writer's
    # roll): its new rows are cut in Arrow
    code = (
        "import sys\n"
        "from ftaudit.eventlog.reader import RunScan\n"
        "from ftaudit.verifier.incremental import HEAD_ONLY, WHOLE, select\n"
        "from ftaudit.verifier.session import Session\n"
        f"scan, scope = select({str(run)!r}, 30)\n"
        "cut = {p for p, k in scope.kept.items() if k not in (WHOLE, HEAD_ONLY)}\n"
        "before = tuple(i for i in scan.segments if str(i.path) not in cut)\n"
        "kept = {p: k for p, k in scope.kept.items() if p not in cut}\n"
        "with Session.open(scan.run_dir, scan=RunScan(scan.run_dir, before, ()), kept=kept) as s:\n"
        "    assert s.move(scan, kept=scope.kept), 'the window was opened again, not moved'\n"
        "assert 'pandas' not in sys.modules, 'moving onto a merged segment imported pandas'\n"
    )
    _python(code)


def test_ft_verify_imports_no_framework_and_builds_no_validator(small_run: Path) -> None:
    # the real entry point (its parser, the terminal, the text and JSON reports), as a gate
    # calls it
    code = (
        "import sys\n"
        "from ftaudit.cli.verify_cmd import main\n"
        "import gc\n"
        "usual = gc.get_threshold()\n"
        "for fmt in ('text', 'json'):\n"
        f"    sys.argv = ['ft-verify', {str(small_run)!r}, '--format', fmt]\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 0, f'the clean run did not verify (exit {exit.code})'\n"
        f"heavy = [m for m in {NOT_ON_THE_PLAIN_PATH!r} "
        "if any(k == m or k.startswith(m + '.') for k in sys.modules)]\n"
        "assert not heavy, f'imported by ft-verify: {heavy}'\n"
        # the start-up's objects were frozen once the imports were made (ftaudit.cli.startup)
        "assert gc.get_freeze_count() > 0 and gc.get_threshold() == usual\n"
        f"{NO_VALIDATOR_BUILT}"
    )
    _python(code)


def test_the_package_names_load_on_first_use() -> None:
    code = (
        "import sys, ftaudit.eventlog as el\n"
        "assert 'ftaudit.eventlog.writer' not in sys.modules\n"
        "from ftaudit.eventlog import EventWriter, RunLog, connect, default_registry\n"
        "from ftaudit.eventlog.writer import EventWriter as W\n"
        "assert EventWriter is W and callable(connect) and 'run_started' in default_registry\n"
        "assert set(el.__all__) <= set(dir(el))\n"
        "missing = [n for n in el.__all__ if getattr(el, n, None) is None]\n"
        "assert not missing, missing\n"
    )
    _python(code)


def test_duckdb_draws_no_progress_bar_on_stdout() -> None:
    # ft-verify writes JSON and JUnit reports on stdout: a slow query must not add to them
    from ftaudit.eventlog.connections import open_memory

    con = open_memory()
    try:
        (enabled,) = con.execute("SELECT current_setting('enable_progress_bar')").fetchone()
    finally:
        con.close()
    assert enabled is False


def test_a_small_run_is_verified_on_one_duckdb_thread(small_run: Path) -> None:
    # its queries plan longer than they run: a second thread only adds hand-offs
    from ftaudit.verifier.session import Session

    with Session.open(small_run) as session:
        (threads,) = session.con.execute("SELECT current_setting('threads')").fetchone()
    assert threads == 1


def _sealed_copy(run: Path, into: Path) -> None:
    """Hard links of the sealed files ``run`` holds now (a flush's temp files left out)."""
    for path in run.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            (into / path.relative_to(run)).parent.mkdir(parents=True, exist_ok=True)
            os.link(path, into / path.relative_to(run))


def test_a_follower_imports_no_pandas_over_a_run_with_rolls(tmp_path: Path) -> None:
    """A follower polled after every step of a run whose writers roll: an event type
    whose rows all left the window is held as an empty table, which pyarrow's
    ``Schema.empty_table`` made through pandas (0.15-0.18 s of one poll, and pandas' memory
    for the rest of the follower's life). The run is written here (the writer's
    conversions import pandas) and its states replayed to a follower in a process of its
    own, one after another."""
    config = SynthConfig(
        steps=40, buffer_size=256, samples_per_step=64, flush_every=1, roll_segments=4, restarts=1
    )
    states: list[Path] = []

    def after_step(step: int) -> None:
        states.append(tmp_path / f"state{len(states):03d}")  # a resume re-runs steps
        _sealed_copy(tmp_path / "run", states[-1])

    synthesize(tmp_path / "run", config, after_step=after_step)
    code = (
        "import shutil, sys\n"
        "from pathlib import Path\n"
        "from ftaudit.verifier.online import OnlineVerifier\n"
        f"live = Path({str(tmp_path / 'live')!r})\n"
        "online = OnlineVerifier(live)\n"
        "judged = []\n"
        f"for state in {[str(p) for p in states]!r}:\n"
        "    shutil.rmtree(live, ignore_errors=True)\n"
        "    shutil.copytree(state, live, copy_function=shutil.copy2)\n"
        "    judged.append(online.poll().judged)\n"
        "assert sum(j is not None for j in judged) > 20, judged\n"
        "assert 'pandas' not in sys.modules, 'a follower imported pandas'\n"
    )
    _python(code)
