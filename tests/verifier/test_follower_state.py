"""What a follower keeps between polls costs what the new segments cost, and a window
that outgrew one DuckDB thread gets the session a window of its size would get."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import pytest

from ftaudit.eventlog.rundir import SegmentFile, SegmentListing, list_segments
from ftaudit.synth import synthesize
from ftaudit.verifier import session as session_module
from ftaudit.verifier.incremental import FooterCache, select
from ftaudit.verifier.session import Session
from tests.support.synth_runs import LOOKBACK

CONFIG = dataclasses.replace(LOOKBACK, steps=24, restarts=0, retries=0, flush_every=1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(tmp_path_factory.mktemp("follower") / "run", CONFIG).run_dir


def _threads(session: Session) -> int:
    return session.con.execute("SELECT current_setting('threads')").fetchone()[0]


def test_a_window_that_outgrew_one_thread_is_opened_on_all_threads(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = FooterCache()
    late, late_window = select(run_dir, 20, cache=cache)
    early, early_window = select(run_dir, 4, cache=cache)
    small = sum(i.num_rows for i in late.segments)
    assert small < sum(i.num_rows for i in early.segments)
    monkeypatch.setattr(session_module, "ONE_THREAD_ROWS", small + 1)
    parts = {"head_only": late_window.head_only, "witness_only": late_window.witness_only}
    with Session.open(run_dir, scan=late, **parts) as session:
        assert session.one_thread and _threads(session) == 1
        grown = {"head_only": early_window.head_only, "witness_only": early_window.witness_only}
        # the session's configuration is locked: the grown window needs a new session
        assert not session.move(early, **grown)
        assert session.move(late, **parts)  # unchanged, it still moves along
    with Session.open(run_dir, scan=early, **grown) as session, duckdb.connect() as plain:
        default = plain.execute("SELECT current_setting('threads')").fetchone()[0]
        assert not session.one_thread and _threads(session) == default


class _Counting(FooterCache):
    looked: list[Path]

    def info(self, listed: SegmentFile):  # type: ignore[no-untyped-def]
        self.looked.append(listed.path)
        return super().info(listed)


def test_a_poll_looks_at_no_footer_before_its_window(run_dir: Path) -> None:
    """The data declarations before the window are found among the segments sealed since
    the last poll, not by looking at every older footer again."""
    listing = list_segments(run_dir)
    cache = _Counting()
    cache.looked = []
    last, _ = select(run_dir, 20, listing=listing, cache=cache)
    assert cache.declared  # each writer's segments before the window were looked at once
    cache.looked = []
    scan, _ = select(run_dir, 21, listing=listing, cache=cache)
    # the window's segments, and those that just left it: none from before the last window
    assert set(cache.looked) <= {i.path for i in (*last.segments, *scan.segments)}
    assert len(scan.segments) < len(listing)  # the window is not the whole run
    # a segment that left the listing (a roll merged it) makes the cache look again, once
    writer, files = next(iter(listing.writers.items()))
    rolled = SegmentListing(listing.run_dir, {**listing.writers, writer: files[1:]}, ())
    cache.keep(rolled)
    assert not cache.declared
    again, _ = select(run_dir, 21, listing=rolled, cache=cache)
    want, _ = select(run_dir, 21, listing=rolled)  # a fresh cache
    assert [i.path for i in again.segments] == [i.path for i in want.segments]
