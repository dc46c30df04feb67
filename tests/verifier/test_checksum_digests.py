"""A follower keeps its checksums' digests and points
(``verifier.checksum_digests.ChecksumDigests``) instead of asking ``CHECKSUM_POINTS`` of
its window at every poll (FT006 and FT010 ask it first): at each poll what it answers must
be exactly the query's rows over the same window, a checksum that came late counted as
saved, as segments join the window and leave it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ftaudit.synth import synthesize
from ftaudit.verifier.checksum_digests import ChecksumDigests, ChecksumPoint
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.online import OnlineVerifier
from tests.support.synth_runs import LOOKBACK

POINTS = """
    SELECT "when", count(*) AS n, bool_or(step IS NULL OR step >= $1) AS judged,
           bool_or(coalesce(checkpoint.iteration, step) >= $1
                   OR list_contains($2::VARCHAR[], segment)) AS saved
    FROM trainer_weight_checksum GROUP BY "when" """
"""The query a follower's poll asked before (the late segments as ``$2``)."""


def _follow(run: Path, bug: str | None, select: list[str]) -> None:
    """Follow a synth run with ``bug`` as it is written, a poll a step, to its end."""
    follower = OnlineVerifier(run, select=select)
    synthesize(
        run,
        dataclasses.replace(LOOKBACK, bug=bug, checkpoint_every=4),
        after_step=lambda _: follower.poll(),
    )
    assert follower.poll().finished


@pytest.mark.parametrize("bug", [None, "checkpoint_late", "not_rolled_back", "checksum_mismatch"])
def test_a_followers_checksum_points_are_the_querys_at_every_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bug: str | None
) -> None:
    compared: list[dict[str, ChecksumPoint]] = []
    kept = RunContext.checksum_points.func

    def both(ctx: RunContext) -> dict[str, ChecksumPoint]:
        got = kept(ctx)
        if ctx.following:  # the final verdict asks the query itself
            late = sorted(ctx.session.added_segments)
            rows = ctx.rows(
                POINTS, [ctx.since, late], label="test", needs=["trainer_weight_checksum"]
            )
            want = {
                r["when"]: ChecksumPoint(r["n"], bool(r["judged"]), bool(r["saved"])) for r in rows
            }
            assert got == want, ctx.since
            compared.append(got)
        return got

    monkeypatch.setattr(RunContext, "checksum_points", property(both))
    _follow(tmp_path / "run", bug, ["FT006", "FT010"])
    assert compared
    whens = {w for points in compared for w in points}
    assert {"at_save", "after_load", "after_step"} <= whens
    assert any(p["at_save"].saved for p in compared if "at_save" in p)
    assert any(p["after_load"].judged for p in compared if "after_load" in p)


ALIKE = """
    SELECT count(*) AS points,
           coalesce(bool_and(alike) FILTER (
               "when" <> 'after_heal' AND (step IS NULL OR step >= $1)), true) AS alike
    FROM (SELECT "when", step, count(DISTINCT hashes) = 1 AS alike
          FROM trainer_weight_checksum
          GROUP BY incarnation, step, attempt, "when", coalesce(source_role, ''), rank)"""
"""How many points, and whether each from step ``$1`` on holds one set of hashes (DuckDB
compares the maps themselves)."""


@pytest.mark.parametrize("bug", [None, "checksum_mismatch", "scheduler_not_restored"])
def test_a_followers_digests_tell_alike_points_as_the_maps_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bug: str | None
) -> None:
    """The digests a follower makes of the hashes it decoded (no query) find the points
    alike exactly where the hashes themselves are, at every poll."""
    compared: list[bool] = []
    kept = ChecksumDigests.all_alike

    def both(digests: ChecksumDigests, since: int) -> bool:
        got = kept(digests, since)
        compared.append(got)
        return got

    checked = RunContext.checksum_points.func

    def check(ctx: RunContext) -> dict[str, ChecksumPoint]:
        if ctx.following:
            digests = ctx.kept(ChecksumDigests)
            want = ctx.rows(ALIKE, [ctx.since], label="test")[0]
            assert (digests.points, digests.all_alike(ctx.since)) == (
                want["points"],
                want["alike"],
            )
        return checked(ctx)

    monkeypatch.setattr(ChecksumDigests, "all_alike", both)
    monkeypatch.setattr(RunContext, "checksum_points", property(check))
    _follow(tmp_path / "run", bug, ["FT006"])
    assert compared
    if bug is None:
        assert all(compared)
    if bug == "checksum_mismatch":  # a replica holds other weights: a point differs
        assert not all(compared)
