"""The GPU check scripts run their checks on the CPU here: they need torch."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("torch") is None else []
