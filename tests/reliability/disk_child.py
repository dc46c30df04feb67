"""A training loop whose disk fills up or turns read-only mid-run (run as ``python -m``).

``python -m tests.reliability.disk_child RUN_DIR --outage full|readonly|fsize ...``

Steps 0..S-1 each log ``--per-step`` metrics from a trainer writer, then flush (as a
trainer does at the end of a step); a checkpoint every 5 steps. From step ``--break-at``
to ``--heal-at`` the disk is unusable, made so for real by this process:

- ``full``: a filler file is written into the (size-limited tmpfs) run directory until the
  kernel answers ENOSPC, and deleted at ``--heal-at``;
- ``readonly``: the tmpfs is remounted read-only (EROFS), then read-write again; without
  the right to mount, the writer folders are made read-only (EACCES for a non-root user);
- ``fsize``: ``RLIMIT_FSIZE`` is lowered below a segment's size (EFBIG: SIGXFSZ ignored),
  then raised again.

Prints one JSON line on stdout: steps done, events logged, the writer's counters, and the
error that a fail-closed writer raised (then the loop stops, as training would).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import resource
import signal
import subprocess
from pathlib import Path

from ftaudit.errors import WriterError
from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions


def _fill(root: Path) -> Path:
    filler = root / "filler.bin"
    chunk = b"\0" * (1 << 16)
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


def _readonly(root: Path, on: bool) -> None:
    if os.geteuid() == 0:
        flag = "ro" if on else "rw"
        subprocess.run(["mount", "-o", f"remount,{flag}", str(root)], check=True)
    else:
        for folder in [root / "events", *(root / "events").iterdir()]:
            folder.chmod(0o555 if on else 0o755)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--outage", choices=["full", "readonly", "fsize"], required=True)
    parser.add_argument("--mount", type=Path, help="the tmpfs holding the run (full, readonly)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--per-step", type=int, default=200)
    parser.add_argument("--break-at", type=int, default=10)
    parser.add_argument("--heal-at", type=int, default=20)
    parser.add_argument("--max-buffered", type=int, default=1_000_000)
    parser.add_argument("--fail-closed", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(format="%(levelname)s %(message)s")  # warnings to stderr
    if args.outage == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    options = WriterOptions(
        fsync=True,
        flush_rows=1 << 30,
        flush_interval_s=3600,
        max_buffered=args.max_buffered,
        fail_closed=args.fail_closed,
    )
    run = RunLog.start(args.run_dir, buffer_size=8, options=options)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    logged = 0
    filler: Path | None = None
    error = None
    step = 0
    try:
        for step in range(args.steps):
            if step == args.break_at:
                if args.outage == "full":
                    filler = _fill(args.mount)
                elif args.outage == "readonly":
                    _readonly(args.mount, True)
                else:
                    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
                    resource.setrlimit(resource.RLIMIT_FSIZE, (512, hard))
            if step == args.heal_at:
                if filler is not None:
                    filler.unlink()
                elif args.outage == "readonly":
                    _readonly(args.mount, False)
                else:
                    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
                    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
            for i in range(args.per_step):
                values = {"i": float(i), "pad": 1e-9 * i}
                if i % 2:  # as field values (the hooks' way) and as objects, one sequence
                    trainer.log_fields(Metric, values, step=step, attempt=0)
                else:
                    trainer.log(Metric(step=step, attempt=0, values=values))
                logged += 1
            trainer.flush()
            if step % 5 == 4:
                run.record_checkpoint(step)
        step = args.steps
        run.finish()
    except WriterError as exc:
        error = str(exc)
    stats = trainer.stats
    print(
        json.dumps(
            {
                "steps_done": step,
                "logged": logged,
                "write_errors": stats.write_errors,
                "events_dropped": stats.events_dropped,
                "segments_written": stats.segments_written,
                "last_durable_seq": trainer.last_durable_seq,
                "writer": trainer.writer_id,
                "error": error,
            }
        )
    )


if __name__ == "__main__":
    main()
