"""Fixtures and settings every test shares: an isolated terminal, no timing assumptions."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# A loaded machine runs an example in seconds, not milliseconds: no per-example deadline
# and no "too slow" health check, so a property test fails only on a wrong result.
settings.register_profile(
    "ftaudit", deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
settings.load_profile("ftaudit")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    os.environ.pop("FORCE_COLOR", None)
