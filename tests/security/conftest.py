"""Fixtures of the security suite: the CLI tests' real runs and in-process runner."""

from tests.cli.conftest import bad_run, ftaudit, good_run

__all__ = ["bad_run", "ftaudit", "good_run"]
