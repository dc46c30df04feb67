"""Crash torture of the event writer: kill a training-like process at random points, check.

Shared by the CI-sized test (``tests/reliability/test_crash_torture.py``) and the long run
(``benchmarks/torture/crash_torture.py``). Every trial is one incarnation of one run
directory, killed (SIGKILL from outside, ``os._exit`` from a profile hook, a real SIGSEGV)
by :mod:`tests.reliability.crash_child`. After each trial, from the files alone:

- every sealed segment of the trial reads back, footer and rows, with the right contents;
- each writer's sequence is a prefix ``0..m`` without holes;
- nothing the process was told is durable is missing (``m`` >= its last acknowledged flush,
  and every checkpoint snapshot's sequence numbers are on disk);
- the loss is exactly the unflushed tail: for the explicitly flushed writer ``m`` is either its
  last acknowledged flush or the flush in flight at the death, never anything else;
- a temp file left behind is that in-flight flush (named by ``m + 1``), and when complete it
  holds exactly the in-flight events.

At the end FT001 runs over the whole directory: it must report one truncated-tail warning
per temp file, and nothing else (no hole, no duplicate, no lost snapshot).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.rundir import EVENTS_DIR, SegmentFile, covered, segment_range
from ftaudit.eventlog.segment import SegmentMeta
from tests.reliability.crash_child import (
    BACKGROUND,
    DRIVER,
    EXIT_CODE,
    EXPLICIT,
    train_until_killed,
)

MODES = ("sigkill", "exit", "segv")
EXPECTED_STATUS = {"sigkill": -signal.SIGKILL, "exit": EXIT_CODE, "segv": -signal.SIGSEGV}
MAX_DELAY_S = 0.3
"""SIGKILL and SIGSEGV land uniformly in the first this-many seconds of a trial."""
MAX_CALLS = 300_000
"""``exit`` lands uniformly at one of the first this-many calls or returns (about 0.3 s)."""


class TortureFailure(AssertionError):
    """A trial broke a guarantee; the message names the trial, the writer and the files."""


@dataclass
class TortureStats:
    """What the torture did and saw."""

    trials: int = 0
    deaths: Counter[str] = field(default_factory=Counter)
    segments: int = 0
    events_sealed: int = 0
    checkpoints: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    """Where the deaths landed: in ``RunLog.start``, before the first flush, in a flush of the
    explicitly flushed writer, or between its flushes."""
    died_in_flush: int = 0
    """Trials where the explicitly flushed writer died with a flush in flight."""
    in_flight_sealed: int = 0
    """... of which the in-flight segment was renamed before the death (kept)."""
    temp_complete: int = 0
    temp_partial: int = 0
    ft001_truncated_tail: int = 0
    ft001_other: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        deaths = ", ".join(f"{m} {self.deaths[m]}" for m in MODES)
        return (
            f"{self.trials} trials ({deaths}) in {self.seconds:.0f} s: "
            f"{self.segments} sealed segments, {self.events_sealed} events read back, "
            f"{self.checkpoints} checkpoints; deaths: {dict(self.phases)}; "
            f"{self.died_in_flush} deaths with a flush in flight ({self.in_flight_sealed} "
            "already renamed); temp files left: "
            f"{self.temp_complete} complete, {self.temp_partial} partial; FT001: "
            f"{self.ft001_truncated_tail} truncated-tail warnings, {self.ft001_other} other"
        )


def forkserver_context() -> multiprocessing.context.BaseContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.reliability.crash_child"])
    return ctx


@dataclass
class _Writer:
    acked: int = -1  # last D line
    intent: int = -1  # last B line
    snapshot: int = -1  # highest seq a checkpoint snapshot recorded


def _parse_progress(path: Path) -> tuple[dict[str, _Writer], dict[str, str]]:
    writers = {DRIVER: _Writer(), EXPLICIT: _Writer(), BACKGROUND: _Writer()}
    names: dict[str, str] = {}  # role -> writer id
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines()
    if text and not text.endswith("\n"):
        lines = lines[:-1]  # a line cut by the death is not a promise
    for line in lines:
        kind, *rest = line.split()
        if kind == "D":
            writers[rest[0]].acked = max(writers[rest[0]].acked, int(rest[1]))
        elif kind == "B":
            writers[rest[0]].intent = int(rest[1])
        elif kind == "W":
            names[rest[0]] = rest[1]
        elif kind == "C":
            for pair in rest[1:]:
                writer_id, seq = pair.split("=")
                role = DRIVER if writer_id.startswith("driver.") else EXPLICIT
                writers[role].snapshot = max(writers[role].snapshot, int(seq))
    return writers, names


def _role(folder: str) -> str:
    if folder.startswith("driver."):
        return DRIVER
    return EXPLICIT if folder.startswith("trainer-actor-c0-") else BACKGROUND


def _check_rows(table: pa.Table, role: str, where: str) -> None:
    """The contents each writer logged: trainers metric i == seq; the driver its events."""
    seqs = table.column("seq").to_pylist()
    types = table.column("type").to_pylist()
    if role == DRIVER:
        for seq, kind in zip(seqs, types, strict=True):
            want = "run_started" if seq == 0 else "checkpoint_saved"
            if kind != want:
                raise TortureFailure(f"{where}: driver seq {seq} is {kind}, not {want}")
        return
    values = table.column("metric.values").to_pylist()
    steps = table.column("step").to_pylist()
    for seq, step, value in zip(seqs, steps, values, strict=True):
        if dict(value) != {"i": float(seq)} or step != seq:
            raise TortureFailure(f"{where}: seq {seq} holds step {step}, values {value}")


def check_trial(run_dir: Path, folders: list[Path], progress: Path, stats: TortureStats) -> None:
    """Check one killed trial's writer folders against what the process acknowledged."""
    writers, names = _parse_progress(progress)
    explicit = writers[EXPLICIT]
    if not names:
        stats.phases["in RunLog.start"] += 1
    elif explicit.intent < 0:
        stats.phases["before the first flush"] += 1
    elif explicit.intent > explicit.acked:
        stats.phases["inside a flush"] += 1
    else:
        stats.phases["between flushes"] += 1
    for folder in folders:
        role = _role(folder.name)
        if role in names and names[role] != folder.name:
            raise TortureFailure(f"{folder}: unexpected writer (progress says {names[role]})")
        want = writers[role]
        seqs: list[int] = []
        temps = [p for p in folder.iterdir() if p.name.startswith(".")]
        sealed = {p: segment_range(p.name) for p in folder.iterdir() if p not in temps}
        if None in sealed.values():
            raise TortureFailure(f"{folder}: a file that is not named as a segment")
        # a roll's originals stay until the next roll: redundant copies the listing skips
        held = covered([SegmentFile(p, folder.name, *r) for p, r in sealed.items() if r])
        for path in sorted(sealed.keys() - held):
            table = pq.read_table(path)
            meta = SegmentMeta.from_metadata(table.schema.metadata)
            first, last = sealed[path] or (-1, None)
            named = (first, meta.last_seq if last is None else last)
            if named != (meta.first_seq, meta.last_seq) or meta.writer != folder.name:
                raise TortureFailure(f"{path}: name and footer disagree")
            if table.num_rows != meta.last_seq - meta.first_seq + 1:
                raise TortureFailure(f"{path}: {table.num_rows} rows for {meta}")
            _check_rows(table, role, str(path))
            seqs.extend(table.column("seq").to_pylist())
            stats.segments += 1
        stats.events_sealed += len(seqs)
        seqs.sort()
        if seqs != list(range(len(seqs))):
            raise TortureFailure(f"{folder}: sequence is not a prefix without holes")
        m = len(seqs) - 1
        if m < want.acked or m < want.snapshot:
            raise TortureFailure(
                f"{folder}: sealed data lost: ends at {m}, acknowledged {want.acked}, "
                f"snapshot {want.snapshot}"
            )
        if role != BACKGROUND:
            in_flight = want.intent > want.acked
            allowed = {want.acked, want.intent} if in_flight else {want.acked}
            if role == DRIVER and not names:  # died inside RunLog.start: run_started or not
                allowed = {-1, 0}
            if m not in allowed:
                raise TortureFailure(
                    f"{folder}: ends at seq {m}; expected one of {sorted(allowed)} "
                    f"(acknowledged {want.acked}, flush in flight up to {want.intent})"
                )
            if role == EXPLICIT and in_flight:
                stats.died_in_flush += 1
                stats.in_flight_sealed += m == want.intent
        for temp in temps:
            if not temp.name.startswith(f".{m + 1:012d}.parquet."):
                raise TortureFailure(f"{temp}: a temp file that is not the flush after seq {m}")
            try:
                table = pq.read_table(temp)
            except (OSError, pa.ArrowException):
                stats.temp_partial += 1
                continue
            stats.temp_complete += 1
            _check_rows(table, role, str(temp))
            if role == EXPLICIT and table.num_rows != want.intent - m:
                raise TortureFailure(f"{temp}: holds {table.num_rows} rows, not the in-flight ones")


def run_torture(
    run_dir: Path,
    trials: int,
    *,
    seed: int,
    modes: tuple[str, ...] = MODES,
    on_trial: Callable[[int, TortureStats], None] | None = None,
) -> TortureStats:
    """Run ``trials`` killed incarnations in ``run_dir``, check each, then FT001 over all."""
    rng = random.Random(seed)
    ctx = forkserver_context()
    stats = TortureStats()
    started = time.perf_counter()
    events = run_dir / EVENTS_DIR
    work = run_dir.parent / f"{run_dir.name}-progress"
    work.mkdir(parents=True, exist_ok=True)
    for trial in range(trials):
        mode = modes[trial % len(modes)]
        param = rng.uniform(0, MAX_DELAY_S) if mode != "exit" else rng.randint(1, MAX_CALLS)
        anchor = "start" if rng.random() < 0.3 else "loop"
        before = set(events.iterdir()) if events.exists() else set()
        progress = work / f"{trial:05d}"
        proc = ctx.Process(
            target=train_until_killed,
            args=(str(run_dir), str(progress), rng.getrandbits(32), mode, param, anchor),
        )
        proc.start()
        if mode == "sigkill":
            deadline = time.monotonic() + 60
            ready = "S" if anchor == "start" else "W trainer-c1"
            while time.monotonic() < deadline and proc.is_alive():
                if progress.exists() and ready in progress.read_text():
                    break
                time.sleep(0.001)
            time.sleep(param)
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # died already: the status check below says how
                pass
        proc.join(timeout=120)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
            raise TortureFailure(f"trial {trial} ({mode} at {param} from {anchor}) never died")
        if proc.exitcode != EXPECTED_STATUS[mode]:
            raise TortureFailure(
                f"trial {trial} ({mode} at {param} from {anchor}): exit status {proc.exitcode}, "
                f"expected {EXPECTED_STATUS[mode]}"
            )
        stats.deaths[mode] += 1
        stats.trials += 1
        new = sorted(set(events.iterdir()) - before) if events.exists() else []
        try:
            check_trial(run_dir, new, progress, stats)
        except TortureFailure as exc:
            where = f"trial {trial} ({mode} at {param} from {anchor})"
            raise TortureFailure(f"{where}: {exc}") from None
        stats.checkpoints += sum(1 for line in progress.read_text().splitlines() if line[:1] == "C")
        if on_trial:
            on_trial(trial, stats)
    check_ft001(run_dir, stats)
    stats.seconds = time.perf_counter() - started
    return stats


def check_ft001(run_dir: Path, stats: TortureStats) -> None:
    """FT001 reports each temp file as a truncated tail (a warning), and nothing else."""
    # imported here, not at the top: a forkserver child re-imports the main module's imports
    from ftaudit.verifier import Severity, verify

    temps = sorted(p for p in (run_dir / EVENTS_DIR).glob("*/.*.tmp"))
    report = verify(run_dir, select=["FT001"])
    (result,) = report.results
    for v in result.violations:
        if v.severity is Severity.WARNING and v.message.startswith("truncated tail"):
            stats.ft001_truncated_tail += 1
        else:
            stats.ft001_other += 1
            raise TortureFailure(f"FT001 reported more than truncated tails: {v.message}")
    reported = sorted(Path(v.location.segment or "") for v in result.violations)
    if reported != temps:
        raise TortureFailure(
            f"FT001 reported {len(reported)} truncated tails for {len(temps)} temp files"
        )
