"""The training job: one process, one incarnation. ``python -m ftaudit.demo.job CONFIG_JSON``.

``ftaudit demo`` runs it as a subprocess so that it can be killed for real (SIGKILL from
the fault schedule) and relaunched; a relaunch resumes from the newest complete
checkpoint in the log; so does one that exits with ``RESTART_EXIT`` after it lost every
cell. It joins the Ray cluster named by ``RAY_ADDRESS``.
"""

from __future__ import annotations

import os
import sys

import ray

from ftaudit.demo.config import DemoConfig
from ftaudit.demo.driver import DemoDriver
from ftaudit.demo.run import RESTART_EXIT, TALK_FD_ENV
from ftaudit.demo.talk import say, speak_on
from ftaudit.errors import EveryCellLost


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = DemoConfig.from_json(args[0])
    talk_fd = os.environ.get(TALK_FD_ENV)
    if talk_fd is not None:  # run by ftaudit demo, which reads progress from this pipe
        speak_on(open(int(talk_fd), "w", encoding="utf-8"))
    ray.init(log_to_driver=False, configure_logging=False)
    try:
        DemoDriver(cfg).run()
    except EveryCellLost as exc:  # the log is flushed at exit, not finished
        say(f"[job] {exc}")
        return RESTART_EXIT
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
