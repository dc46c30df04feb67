"""Megatron tests: skipped where megatron-core (extra ``megatron``) is not installed."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("megatron") is None else []
