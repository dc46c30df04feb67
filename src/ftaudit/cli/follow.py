"""``ft-verify --follow RUN_DIR``: judge a live run as its steps settle, until it finishes.

Talk on stderr: one line per poll that judged steps (provisional) and one per new
violation. Data on stdout: the final report, once the run's last incarnation logged
``run_finished``, in the chosen format; the exit code is then ``ft-verify``'s (0/1).
A run directory that does not exist yet is waited for. Ctrl-C stops the follower with
the provisional verdict on stderr and exit 130 (the verdict was never final).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ftaudit.cli.interrupts import interrupted
from ftaudit.cli.terminal import say
from ftaudit.verifier.anchors import Anchors
from ftaudit.verifier.findings import Report
from ftaudit.verifier.online import OnlineVerifier, Poll
from ftaudit.verifier.pacing import CpuShare


def follow(
    run_dir: Path,
    *,
    interval: float,
    select: list[str] | None,
    skip: tuple[str, ...],
    data_manifests: tuple[Path, ...],
    anchors: Anchors,
    pacer: CpuShare | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    """Poll ``run_dir`` every ``interval`` seconds, or less often where ``pacer`` says the
    last poll's CPU needs a longer wait; return the final report."""
    from ftaudit.verifier.render.describe import location_text

    online = OnlineVerifier(
        run_dir, select=select, skip=skip, data_manifests=data_manifests, anchors=anchors
    )
    share = f", at most {pacer.share:.1%} of a core" if pacer is not None else ""
    say(f"ft-verify: following {run_dir} (every {interval:g} s{share}; Ctrl-C stops)")
    try:
        while True:
            poll = pacer.run(online.poll) if pacer is not None else online.poll()
            _tell(poll, online, location_text)
            if poll.final is not None:
                return poll.final
            sleep(max(interval, pacer.wait()) if pacer is not None else interval)
    except KeyboardInterrupt:
        _stopped(online)
        raise
    except Exception:
        # Ctrl-C during a query: DuckDB is interrupted and the query fails before Python
        # raises KeyboardInterrupt; the failure is the interruption
        if interrupted():
            _stopped(online)
        raise
    finally:
        online.close()


def _stopped(online: OnlineVerifier) -> None:
    through = online.judged_through
    judged = f"steps 0-{through}" if through >= 0 else "no step"
    found = len(online.violations)
    verdict = f"{found} violation(s)" if found else "no violation"
    say(f"ft-verify: stopped before the run finished; {judged} judged: {verdict}")


def _tell(poll: Poll, online: OnlineVerifier, location_text: Callable[..., str]) -> None:
    if poll.judged is not None:
        first, last = poll.judged
        steps = f"step {first}" if first == last else f"steps {first}-{last}"
        verdict = f"{len(poll.violations)} new violation(s)" if poll.violations else "ok"
        say(f"ft-verify: {steps} judged (provisional, {poll.segments_read} segments): {verdict}")
    elif poll.final is not None:
        say("ft-verify: the run finished; final verdict from the whole log")
    for v in poll.violations:
        where = location_text(v.location)
        say(f"  {v.code} {v.severity.value}{' ' + where if where else ''}: {v.message}")
