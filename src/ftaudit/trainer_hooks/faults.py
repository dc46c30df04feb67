"""Fault injection for FT end-to-end tests: kill, exit, crash or hang a process on schedule.

A schedule names where faults fire: (incarnation, step, attempt, target, cell, rank, at).
Every injection is logged as ``FaultInjected`` and flushed BEFORE it fires, so the log
always says why a process vanished. Defaults make a fault fire once: only in incarnation
0 and attempt 0, so the retry and the restarted job run through.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ftaudit.eventlog.events import FaultInjected, FaultMode
from ftaudit.eventlog.writer import EventWriter


class FaultSpec(BaseModel):
    """One scheduled fault. ``None`` in a selector field matches any value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int = Field(ge=0)
    mode: FaultMode
    attempt: int | None = Field(default=0, ge=0)
    target: Literal["trainer", "driver", "rollout_manager", "engine"] = "trainer"
    cell: int | None = Field(default=None, ge=0)
    rank: int | None = Field(default=None, ge=0)
    incarnation: int | None = Field(default=0, ge=0)
    at: str = "step"
    """The call site that fires it, as named by the caller of :meth:`FaultInjector.maybe_fire`."""
    exit_code: int = 1
    """For ``exit``: the process's exit status."""

    def matches(
        self,
        *,
        step: int,
        attempt: int,
        target: str,
        cell: int | None,
        rank: int | None,
        incarnation: int,
        at: str,
    ) -> bool:
        return (
            self.step == step
            and self.target == target
            and self.at == at
            and self.attempt in (None, attempt)
            and self.cell in (None, cell)
            and self.rank in (None, rank)
            and self.incarnation in (None, incarnation)
        )


class FaultSchedule(BaseModel):
    """The faults of one test run; JSON round-trips (``from_json`` / ``to_json``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    faults: tuple[FaultSpec, ...] = ()

    @classmethod
    def of(cls, faults: Iterable[FaultSpec | dict[str, object]]) -> FaultSchedule:
        """A schedule from specs or plain dicts (``{"step": 3, "mode": "sigkill", ...}``)."""
        return cls(
            faults=tuple(f if isinstance(f, FaultSpec) else FaultSpec(**f) for f in faults)  # type: ignore[arg-type]
        )

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> FaultSchedule:
        """Parse a JSON list of faults or ``{"faults": [...]}``, given as text or a file path."""
        text = str(text_or_path)
        if isinstance(text_or_path, os.PathLike) or not text.lstrip().startswith(("[", "{")):
            text = Path(text_or_path).read_text()
        data = json.loads(text)
        if isinstance(data, list):
            data = {"faults": data}
        return cls.model_validate(data)

    def to_json(self) -> str:
        return self.model_dump_json()

    def find(self, **where: object) -> FaultSpec | None:
        """The first fault matching ``where`` (see :meth:`FaultSpec.matches`), if any."""
        return next((f for f in self.faults if f.matches(**where)), None)  # type: ignore[arg-type]


def fire(spec: FaultSpec) -> None:
    """Make this process fail as ``spec.mode`` says; returns only if the mode is unknown."""
    if spec.mode is FaultMode.SIGKILL:
        os.kill(os.getpid(), signal.SIGKILL)
    elif spec.mode is FaultMode.EXIT:
        os._exit(spec.exit_code)  # no cleanup, like a worker that calls exit deep in a library
    elif spec.mode is FaultMode.SEGFAULT:
        # a real crash, not a Python handler; only the main thread may reset the handler
        # (Ray runs actor methods on other threads: there faulthandler, if on, re-raises)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        ctypes.string_at(0)  # read address 0
        os.kill(os.getpid(), signal.SIGSEGV)
    elif spec.mode is FaultMode.HANG:
        while True:  # stays alive, holding its resources, until someone kills it
            time.sleep(3600)
    time.sleep(60)  # a signal is on its way; never return into training


class FaultInjector:
    """Fires the faults of a schedule that target this process, logging each first."""

    def __init__(
        self,
        schedule: FaultSchedule,
        writer: EventWriter,
        *,
        target: Literal["trainer", "driver", "rollout_manager", "engine"] = "trainer",
        cell: int | None = None,
        rank: int | None = None,
    ) -> None:
        self.schedule = schedule
        self.writer = writer
        self.target = target
        self.cell = cell
        self.rank = rank

    def due(self, step: int, attempt: int, at: str = "step") -> FaultSpec | None:
        """The fault scheduled for this process here, if any (nothing is fired)."""
        return self.schedule.find(
            step=step,
            attempt=attempt,
            target=self.target,
            cell=self.cell,
            rank=self.rank,
            incarnation=self.writer.incarnation,
            at=at,
        )

    def maybe_fire(self, step: int, attempt: int, at: str = "step") -> None:
        """If a fault is due here: log it, flush the log, then fire it (never returns)."""
        spec = self.due(step, attempt, at)
        if spec is None:
            return
        self.writer.log(
            FaultInjected(
                step=step,
                attempt=attempt,
                mode=spec.mode,
                target=self.target if at == "step" else f"{self.target}@{at}",
                cell=self.cell,
                rank=self.rank,
            )
        )
        self.writer.flush()
        fire(spec)
