"""The online verifier agrees with the offline one: fed a synth run as it is written
(a poll after every step, in the writing process), its provisional findings are the
offline verification's, found before the run finished, and its final report is the
offline report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import ftaudit.verifier.rules.ft009_restore_evidence as ft009
from ftaudit.errors import SegmentVanishedError
from ftaudit.eventlog import scan_run
from ftaudit.eventlog.load import new_columns, unified_schema
from ftaudit.eventlog.reader import RunScan
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.rundir import list_segments
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import table_of
from ftaudit.synth import SynthConfig, SynthResult, synthesize
from ftaudit.synth.bugs import BUGS, BUGS_BY_NAME
from ftaudit.verifier import Report, verify
from ftaudit.verifier.anchors import NO_ANCHORS
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.engine import check_session, select_rules
from ftaudit.verifier.incremental import HEAD_ONLY, WINDOW_ONLY, FooterCache, select
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.rules.rank_rows import RankRow
from ftaudit.verifier.session import Session
from tests.support.online_agreement import (
    check_agreement,
    finding,
    judged_pairs,
    without_timings,
)
from tests.support.synth_runs import LOOKBACK

SHAPE = LOOKBACK


@dataclasses.dataclass
class Followed:
    run: SynthResult
    online: OnlineVerifier
    provisional: set[tuple[object, ...]]
    """Violations the polls reported before the run finished."""
    judged_live: int
    """The last step judged before the run finished."""
    judged: set[tuple[int, int]]
    """The ``(incarnation, step)`` pairs judged before the run finished."""
    polls_that_judged: int
    steps_judged: set[int]
    """Every step a poll judged before the run finished, of any incarnation."""


def _follow(run_dir: Path, config: SynthConfig, *, every: int = 1, since: int = 0) -> Followed:
    online = OnlineVerifier(run_dir, since_step=since)
    judged = 0
    pairs: set[tuple[int, int]] = set()
    steps: set[int] = set()

    def after_step(step: int) -> None:
        nonlocal judged
        if step % every == 0:
            poll = online.poll()
            assert not poll.finished  # the run ends after its last step
            judged += poll.judged is not None
            pairs.update(judged_pairs(poll))
            if poll.judged is not None:
                steps.update(range(poll.judged[0], poll.judged[1] + 1))

    run = synthesize(run_dir, config, after_step=after_step)
    provisional = {finding(v) for v in online.violations}
    live = online.judged_through
    assert online.poll().finished
    return Followed(run, online, provisional, live, pairs, judged, steps)


def _as_polled(report: Report) -> dict:
    """A report as a follower's poll keeps it: the violations, not how much was checked
    (a poll does not count: :meth:`~ftaudit.verifier.context.RunContext.count`)."""
    out = without_timings(report)
    for result in out["results"]:
        result.pop("checked", None)
    return out


def _check_agreement(followed: Followed, *, live_evidence_kept: bool = True) -> None:
    check_agreement(
        followed.run.run_dir,
        followed.online,
        followed.provisional,
        followed.judged,
        live_evidence_kept=live_evidence_kept,
    )


SMALL = dataclasses.replace(SHAPE, steps=24, restarts=1, retries=2, checkpoint_every=6)
"""The fast suite's shape: one restart, a few retries."""


def test_a_clean_run_is_judged_live_and_verifies(tmp_path: Path) -> None:
    followed = _follow(tmp_path / "run", SMALL, every=2)
    assert followed.run.crashes  # the re-run steps after the restart are judged again
    assert followed.provisional == set()
    # every step but the last few settled while the run was live
    assert followed.judged_live >= SMALL.steps - 5
    assert followed.polls_that_judged >= 5
    _check_agreement(followed)
    assert followed.online.final is not None and followed.online.final.passed()


def test_a_bug_is_found_before_the_run_finished(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, steps=12, restarts=0, bug="missing_sample", bug_step=5)
    followed = _follow(tmp_path / "run", config, every=2)
    # seen at the first snapshot after step 5, long before the run's last step
    assert any(k[0] == "FT004" for k in followed.provisional), followed.provisional
    _check_agreement(followed)
    assert not followed.online.passed()


def test_a_follower_judges_on_after_a_resume_from_a_step_it_had_not_judged(
    tmp_path: Path,
) -> None:
    """The follower had judged through step 10 when the run crashed, and the next
    incarnation resumed from checkpoint 11: step 11 is the crashed incarnation's, settled
    since it ended. The follower waited for the new incarnation's step 11, which never
    came, and judged nothing more until the run finished; it now judges step 11 with the
    new incarnation's first steps, and every step of the committed history while the run
    is live."""
    config = dataclasses.replace(SHAPE, checkpoint_every=4)
    followed = _follow(tmp_path / "run", config)
    assert followed.run.crashes
    assert followed.judged_live >= config.steps - 2
    with Session.open(followed.run.run_dir) as session:
        rows = session.rows("SELECT DISTINCT step FROM committed_steps ORDER BY step")
    assert [r["step"] for r in rows] == list(range(config.steps))
    # each poll judged from where the last one stopped: no step left out
    assert set(range(followed.judged_live + 1)) <= followed.steps_judged
    _check_agreement(followed)


@pytest.mark.slow
def test_a_follower_attached_late_judges_from_its_step(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, bug="missing_sample", bug_step=16)
    followed = _follow(tmp_path / "run", config, every=2, since=12)
    assert any(k[0] == "FT004" for k in followed.provisional), followed.provisional
    assert all(k[1] is None or k[1] >= 12 for k in followed.provisional), followed.provisional
    _check_agreement(followed)


@pytest.mark.parametrize("every", [1, 3])
def test_a_content_trained_again_long_after_is_found_live(tmp_path: Path, every: int) -> None:
    """A resumed loader reads its epoch again from the first item while the sample
    indices go on, in a run without a manifest: every content it feeds was trained steps
    before the window the poll loads (the trainers' rows from the step before the first
    judged). The follower's ledger holds them; each repeat is reported live, located at
    its first feeding as offline, at the poll that judges the step that fed it again."""
    config = dataclasses.replace(SHAPE, bug="epoch_restarted_after_resume", manifest=False)
    followed = _follow(tmp_path / "run", config, every=every)
    _check_agreement(followed)
    offline = verify(followed.run.run_dir, select=["FT008"])
    (result,) = offline.results
    repeats = [v for v in result.violations if v.kind == "duplicate_content"]
    resumed = followed.run.crashes[-1][1] + 1
    far = [v for v in repeats if v.shown_at is not None and v.shown_at - v.location.step > 4]
    assert far and all(v.location.step < resumed for v in far)
    live = {f for f in followed.provisional if f[0] == "FT008"}
    judged = {v for v in far if v.shown_at in followed.steps_judged}
    assert judged and {finding(v) for v in judged} <= live
    before_window = [v for v in followed.online.violations if v.kind == "duplicate_content"]
    assert any(v.location.step < resumed - 2 for v in before_window)


@pytest.mark.parametrize("manifest", [True, False])
@pytest.mark.parametrize("dataset_size", [None, 160])
def test_a_correct_run_without_a_manifest_has_no_repeats_live(
    tmp_path: Path, manifest: bool, dataset_size: int | None
) -> None:
    """The correct twin: restarts, retries and rolled-back steps, one epoch or an epoch
    every 2.5 steps (the ledger drops the epochs behind the window; resumes go back over
    an epoch's edge). Nothing is found live, the offline verdict passes."""
    config = dataclasses.replace(SHAPE, manifest=manifest, dataset_size=dataset_size)
    followed = _follow(tmp_path / "run", config, every=1)
    assert followed.provisional == set()
    _check_agreement(followed)
    assert followed.online.passed()


def test_a_repeat_across_the_edge_of_since_step_is_reported(tmp_path: Path) -> None:
    """``--since-step K`` loads the trainers' rows from step ``K - 1``: a content fed at
    ``K - 1`` and again at ``K`` is located at ``K - 1``, yet it is new to this check (its
    later feeding is under judgement). A gate that checked the run up to ``K - 1`` before
    step ``K`` existed could not have seen it; this check reports it as the full one does."""
    config = dataclasses.replace(SHAPE, bug="wrong_items_after_resume", manifest=False)
    run = synthesize(tmp_path / "run", config)
    resumed = run.crashes[-1][1] + 1
    (result,) = verify(run.run_dir, select=["FT008"], since_step=resumed).results
    repeats = [v for v in result.violations if v.kind == "duplicate_content"]
    assert repeats and all(v.location.step == resumed - 1 for v in repeats)
    assert all(v.shown_at == resumed for v in repeats)
    (whole,) = verify(run.run_dir, select=["FT008"]).results
    assert [v.message for v in repeats] == [
        v.message for v in whole.violations if v.kind == "duplicate_content"
    ]


@pytest.mark.parametrize("since", [20, 30])
def test_a_follower_attached_late_finds_the_repeats_of_contents_fed_before_it(
    tmp_path: Path, since: int
) -> None:
    """Attached at step ``since``, after the first feedings: its ledger reads the
    committed samples before its window from the log once (the epochs from the one
    before the window's), and each repeat it judges is found live."""
    config = dataclasses.replace(SHAPE, bug="epoch_restarted_after_resume", manifest=False)
    followed = _follow(tmp_path / "run", config, every=2, since=since)
    _check_agreement(followed)
    (result,) = verify(followed.run.run_dir, select=["FT008"]).results
    judged = {
        finding(v)
        for v in result.violations
        if v.shown_at is not None and since <= v.shown_at <= followed.judged_live
    }
    assert judged and all(step < since for _, step, _ in judged)
    assert judged <= followed.provisional


def _loaded(session: Session) -> dict[str, list[dict]]:
    """Every loaded row, by event type, with every column of its type's table (a moved
    session keeps the tables of types whose segments left its window, empty)."""
    loaded = {
        name: session.rows(f"SELECT * FROM {ident(table_of(name))} ORDER BY filename, seq")
        for name in sorted(session.tables.types)
    }
    return {name: rows for name, rows in loaded.items() if rows}


@pytest.mark.parametrize(
    ("bug", "bug_step", "roll"),
    [
        ("missing_sample", 14, 0),
        ("stepped_twice", 14, 0),
        ("scheduler_not_restored", 0, 0),
        ("checksum_mismatch", 14, 0),
        # every writer rolls 3 flushes into one: most windows begin inside a merged
        # segment, which is loaded from there on, and cut again as the window moves
        ("missing_sample", 14, 3),
        ("reissued_ids", None, 3),
        ("checksum_mismatch", 14, 3),
    ],
)
def test_a_moved_window_holds_and_judges_what_a_fresh_load_does(
    tmp_path: Path, bug: str, bug_step: int | None, roll: int
) -> None:
    """One session moved along the run (segments that left the window dropped, only the
    new ones read) holds the rows of a fresh load of the same window and gets the same
    report, forwards and back (a resume moves the first step to judge back); with the
    rules' states kept between the moves and fed only the new segments, as a follower's."""
    config = dataclasses.replace(SMALL, bug=bug, bug_step=bug_step, roll_segments=roll)
    run_dir = synthesize(tmp_path / "run", config).run_dir
    rules = select_rules()
    cache = FooterCache()
    moved: Session | None = None
    opened = 0
    found: set[str] = set()
    cut = 0
    for since in [4, 10, 12, 14, 16, 9, 21]:
        scan, window = select(run_dir, since, cache=cache)
        cut += any(k not in (HEAD_ONLY, WINDOW_ONLY) for k in window.kept.values())
        parts = {"kept": window.kept}
        if moved is None or not moved.move(scan, **parts):
            moved = Session.open(run_dir, scan=scan, **parts)
            opened += 1
        with Session.open(run_dir, scan=scan, **parts) as fresh:
            assert _loaded(moved) == _loaded(fresh), since
            got = check_session(moved, rules, window, None, (), NO_ANCHORS, cache)
            want = check_session(fresh, rules, window, None, (), NO_ANCHORS)
            assert _as_polled(got) == _as_polled(want), since
            found |= {v.code for r in got.results for v in r.violations}
    assert moved is not None
    moved.close()
    assert opened <= 4  # moved, not reloaded: new columns (a checkpoint's) or a head re-read
    assert BUGS_BY_NAME[bug].rule in found
    assert (cut >= 3) if roll else not cut


def test_a_moved_window_takes_in_the_columns_its_new_segments_bring(tmp_path: Path) -> None:
    """Segments new to a window may hold a column its table lacks (a writer's first roll
    merges the flushes that declared its parameters, long before a late window began):
    the table is widened, and the type views the rules read, and the report, are a
    fresh load's."""
    run_dir = synthesize(tmp_path / "run", SMALL).run_dir
    whole = scan_run(run_dir)
    late = tuple(i for i in whole.segments if "parameter_manifest" not in i.meta.types)
    first = RunScan(run_dir, late, ())
    with Session.open(run_dir, scan=first) as moved, Session.open(run_dir, scan=whole) as fresh:
        added = new_columns(whole, moved.schema)
        assert added and all(f.name.startswith("parameter_manifest.") for f in added)
        assert moved.move(whole)
        # the table's columns, then the new ones: rows join it by position
        assert moved.schema.names == [*unified_schema(first).names, *(f.name for f in added)]
        for event_type in default_registry:
            query = f"SELECT * FROM {event_type.name} ORDER BY writer, seq"
            assert moved.query(query).to_pylist() == fresh.query(query).to_pylist()
        rules = select_rules()
        assert _as_polled(check_session(moved, rules, None, None, (), NO_ANCHORS)) == _as_polled(
            check_session(fresh, rules, None, None, (), NO_ANCHORS)
        )


@pytest.mark.slow
@pytest.mark.parametrize("roll", [0, 3])  # 3: writers roll every 3 flushes
@pytest.mark.parametrize("bug", [b.name for b in BUGS])
def test_every_synth_bug_online_agrees_with_offline(tmp_path: Path, bug: str, roll: int) -> None:
    config = dataclasses.replace(SHAPE, bug=bug, roll_segments=roll)
    followed = _follow(tmp_path / "run", config, every=4)
    # sequence_gap removes a flush once the run finished, and with rolls the merged
    # segment holding it: events of steps judged live are gone after the fact, which the
    # final verification reports (FT001's hole, FT004's missing rows)
    _check_agreement(followed, live_evidence_kept=not (bug == "sequence_gap" and roll))
    assert not followed.online.passed()


@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("bug", ["stream_skips_after_resume", "stream_replays_after_resume"])
def test_a_root_cause_found_live_keeps_its_later_consequences(
    tmp_path: Path, bug: str, every: int
) -> None:
    """A resumed loader restarted off its checkpoint's position: the poll that judges the
    incarnation's first step finds the shift (it holds the checkpoint's steps); later
    polls' windows do not, yet the holes, duplicates and differing replays they show are
    the shift's, not findings of their own. Reported live as the offline verdict reports
    them: once, as the root cause. (The demo's ``skip_sample_after_resume`` reported
    them apart when its follower's polls fell between steps 6 and 7.)"""
    followed = _follow(tmp_path / "run", dataclasses.replace(SHAPE, bug=bug), every=every)
    _check_agreement(followed)
    resumed = followed.run.crashes[-1][1] + 1
    last = followed.run.incarnations - 1
    assert followed.provisional == {("FT005", resumed, last)}


def test_a_poll_listed_again_takes_in_every_new_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new segment that vanished while a poll read it (a writer's roll) makes the poll
    list the run again. The new segments it had not taken in by then are taken in by the
    second listing: a driver's step ends left out held every later step back."""
    config = dataclasses.replace(SMALL, restarts=0, retries=0)
    whole = _follow(tmp_path / "whole", config)
    real = FooterCache.info
    ends: set[Path] = set()  # the segments of step ends read so far
    vanished: list[Path] = []

    def info(cache: FooterCache, listed: Any) -> Any:
        found = real(cache, listed)
        if "step_end" in found.meta.types and listed.path not in ends:
            if len(ends) == 4 and not vanished:  # mid-run, once: the next listing reads it
                vanished.append(listed.path)
                raise SegmentVanishedError(listed.path, "removed by a roll")
            ends.add(listed.path)
        return found

    monkeypatch.setattr(FooterCache, "info", info)
    faulted = _follow(tmp_path / "faulted", config)
    assert vanished
    assert faulted.steps_judged == whole.steps_judged
    _check_agreement(faulted)


@pytest.mark.parametrize("bug", [None, "missing_sample", "allocation_lost", "head_frozen"])
def test_a_follower_of_rolling_writers_agrees_with_offline(tmp_path: Path, bug: str | None) -> None:
    """Writers that roll every 3 flushes: a poll's window mostly begins inside a merged
    segment (read from there on) and is cut again as it moves."""
    config = dataclasses.replace(SHAPE, bug=bug, roll_segments=3)
    followed = _follow(tmp_path / "run", config, every=4)
    _check_agreement(followed)
    assert followed.online.passed() == (bug is None)


def test_rolling_writers_do_not_make_a_follower_load_its_window_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merged segment enters the window cut, and its cut moves on at later polls: the
    window is moved (rows dropped), not loaded from the log again (an attach's cost), as
    often as over writers that never roll."""
    opened: list[Path] = []
    open_session = Session.open.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Session], run_dir: Path, **kwargs: object) -> Session:
        opened.append(Path(run_dir))
        return open_session(cls, run_dir, **kwargs)

    monkeypatch.setattr(Session, "open", classmethod(counting))
    loads = {}
    for roll in (0, 3):
        config = dataclasses.replace(SHAPE, steps=60, restarts=0, retries=0, roll_segments=roll)
        opened.clear()
        _follow(tmp_path / f"roll{roll}", config, every=1)
        loads[roll] = sum(1 for p in opened if p.name == f"roll{roll}")
        assert loads[roll] >= 2  # the first poll's, the final verification's
    assert loads[3] <= loads[0], loads


def test_a_follower_keeps_the_row_positions_of_the_merged_segments_it_cuts_only(
    tmp_path: Path,
) -> None:
    """Where the rows of a merged segment begin is read to cut it, and forgotten once the
    window left it: a long follower does not keep every roll's (a window begins inside
    at most two segments of a writer)."""
    online = OnlineVerifier(tmp_path / "run")
    kept: list[int] = []
    writers: list[int] = []

    def after_step(step: int) -> None:
        online.poll()
        kept.append(len(online._cache.steps))
        writers.append(len(list_segments(tmp_path / "run", allow_empty=True).writers))

    config = dataclasses.replace(SHAPE, steps=60, restarts=0, retries=0, roll_segments=3)
    synthesize(tmp_path / "run", config, after_step=after_step)
    assert max(kept) > 0  # merged segments were cut
    assert all(k <= 2 * w for k, w in zip(kept, writers, strict=True)), (kept, writers)


def test_a_segment_altered_after_a_follower_listed_its_writer_is_found_live(
    tmp_path: Path,
) -> None:
    """A segment sealed after the follower's window was loaded, then rewritten with equal
    rows but other bytes (its footer's digest left as sealed), is found by the poll that
    takes it in, as offline: the follower hashes the new segments it decodes."""
    config = dataclasses.replace(SMALL, restarts=0, retries=0)
    online = OnlineVerifier(tmp_path / "run", since_step=0)
    seen: set[Path] = set()
    altered: list[Path] = []

    def after_step(step: int) -> None:
        files = {f.path for f in list_segments(tmp_path / "run", allow_empty=True).files}
        sealed = sorted(p for p in files - seen if "trainer" in p.parent.name)
        if step >= 12 and sealed and not altered:  # the window is loaded: read whole
            victim = sealed[0]
            table = pq.read_table(victim)
            meta = pq.read_metadata(victim).metadata
            pq.write_table(table.replace_schema_metadata(meta), victim, compression="none")
            altered.append(victim)
        seen.update(files)
        online.poll()

    run = synthesize(tmp_path / "run", config, after_step=after_step)
    live = [v for v in online.violations if v.kind == "altered_segment"]
    assert [v.location.segment for v in live] == [str(altered[0])]
    assert online.poll().finished
    offline = verify(run.run_dir)
    found = [v for r in offline.results for v in r.violations if v.kind == "altered_segment"]
    assert [v.location.segment for v in found] == [str(altered[0])]


def _publish(run: Path, live: Path, wanted: list[Path]) -> None:
    """Make ``live`` hold ``run``'s files outside ``events/`` (the run's file, its
    manifests) and the segments ``wanted`` (hard links: a sealed segment is the file as it
    stays)."""
    outside = [p for p in run.rglob("*") if p.is_file() and "events" not in p.parts]
    for source in [*outside, *wanted]:
        target = live / source.relative_to(run)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.hardlink_to(source)


def _tops(run: Path) -> dict[Path, int]:
    """Each segment of ``run``: the largest step it holds (-1: none)."""
    cache = FooterCache()
    tops = {}
    for listed in list_segments(run).files:
        top = cache.max_step(cache.info(listed).path)
        tops[listed.path] = -1 if top is None else top
    return tops


def _sealed(tops: dict[Path, int], limit: int, lagging: Path, lag_limit: int) -> list[Path]:
    """Each writer's segments up to its first one past ``limit`` (``lag_limit`` for the
    writer ``lagging``): what the writers had sealed at some moment."""
    out = []
    for writer in {p.parent for p in tops}:
        top = lag_limit if writer == lagging else limit
        for path in sorted(p for p in tops if p.parent == writer):
            if tops[path] > top:
                break
            out.append(path)
    return out


def test_a_step_is_judged_once_every_writer_sealed_past_it(tmp_path: Path) -> None:
    """A writer's steps only grow, so step K is settled when every writer that may log
    about it has sealed an event past K. One trainer lags (its flushes since the last
    checkpoint, which vouched for what it had sealed, not sealed yet): the follower
    judges no step it may still log rows of; those steps are judged once it sealed them,
    and the verdicts agree with the offline ones."""
    config = dataclasses.replace(SMALL, restarts=0, retries=0, flush_every=2)
    run = synthesize(tmp_path / "run", config).run_dir
    tops = _tops(run)
    lagging = sorted(p.parent for p in tops if p.parent.name.startswith("trainer"))[0]
    early = _sealed(tops, 10, lagging, 5)  # checkpoints after steps 5 and 11
    lag_top = max(tops[p] for p in early if p.parent == lagging)
    assert lag_top < max(tops[p] for p in early) - 2  # it lags by more than a step

    live = tmp_path / "live"
    online = OnlineVerifier(live)
    _publish(run, live, early)
    first = online.poll()
    assert first.judged is not None and first.judged[1] == lag_top - 1, (first, lag_top)
    _publish(run, live, _sealed(tops, 10, lagging, 10))
    caught_up = online.poll()
    assert caught_up.judged is not None and caught_up.judged[0] == lag_top, caught_up
    provisional = {finding(v) for v in online.violations}
    judged = judged_pairs(first) | judged_pairs(caught_up)
    _publish(run, live, list(tops))
    assert online.poll().finished
    check_agreement(live, online, provisional, judged)


@pytest.mark.parametrize("bug", [None, "missing_sample"])
def test_a_trainer_that_has_sealed_nothing_yet_holds_the_steps_it_ran_back(
    tmp_path: Path, bug: str | None
) -> None:
    """A trainer's first flush can come after the driver ended several steps (a writer
    flushes on an interval): the step ends name its rank, so those steps wait for it.
    Judged without it, a clean run read as missing its snapshots and fingerprints."""
    config = dataclasses.replace(SMALL, restarts=0, retries=0, flush_every=2, bug=bug, bug_step=2)
    run = synthesize(tmp_path / "run", config).run_dir
    tops = _tops(run)
    silent = sorted(p.parent for p in tops if p.parent.name.startswith("trainer"))[0]
    live = tmp_path / "live"
    online = OnlineVerifier(live)
    _publish(run, live, _sealed(tops, 4, silent, -5))  # before checkpoint 5 vouched for it
    waiting = online.poll()
    assert waiting.judged is None and not online.violations, online.violations
    _publish(run, live, _sealed(tops, 10, silent, 10))
    judged = online.poll()
    assert judged.judged is not None and judged.judged[0] == 0, judged
    provisional = {finding(v) for v in online.violations}
    _publish(run, live, list(tops))
    assert online.poll().finished
    check_agreement(live, online, provisional, judged_pairs(judged))
    assert bool(provisional) == (bug is not None)


LOST_AT = 12
LOST_STEPS = 30
LOST_CONFIG = dataclasses.replace(SHAPE, steps=LOST_STEPS, restarts=0, retries=2)


@pytest.mark.parametrize("bug", [None, "allocation_lost"])
def test_a_lost_allocation_is_reported_live_and_its_twin_asks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bug: str | None
) -> None:
    """FT009's unallocated attempts are asked of DuckDB only where an attempt the window's
    trainer rows name has no allocation (``verifier/rules/attempt_keys.py``): the lost
    allocation is still reported by a poll while the run is live, and the correct twin's
    polls never ask."""
    asked: list[str] = []  # the labels a follower's poll asked (not an offline verify)
    ask = ft009.judged_rank_rows

    def counting(ctx: RunContext, sql: str, **kwargs: Any) -> list[RankRow]:
        if ctx.following:
            asked.append(str(kwargs["label"]))
        return ask(ctx, sql, **kwargs)

    monkeypatch.setattr(ft009, "judged_rank_rows", counting)
    config = dataclasses.replace(LOST_CONFIG, bug=bug, bug_step=LOST_AT if bug else None)
    followed = _follow(tmp_path / "run", config, every=2)
    _check_agreement(followed)
    lost = [
        (v.location.step, v.location.incarnation)
        for v in followed.online.violations
        if v.kind == "unallocated_attempt"
    ]
    if bug is None:
        assert lost == []
        assert "FT009 unallocated attempts" not in asked
        assert "FT009 unallocated ids" in asked  # the spy saw the polls' queries
        return
    assert lost == [(LOST_AT, 0)]
    # found while the run was live: a poll judged the step, the final verdict did not
    assert ("FT009", LOST_AT, 0) in followed.provisional
    assert followed.judged_live > LOST_AT
    assert "FT009 unallocated attempts" in asked
