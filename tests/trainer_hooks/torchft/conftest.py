"""torchft tests: skipped where torchft (extra ``ray``) is not installed."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("torchft") is None else []
