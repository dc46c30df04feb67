"""Fault schedules, shards and the bug registry of the demo (no Ray, no training)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ftaudit.demo.bugs import BUGS, active, get_bug
from ftaudit.demo.config import DemoConfig
from ftaudit.demo.schedule import DemoSchedule, default_schedule
from ftaudit.demo.shards import shard_slice


def test_a_bare_list_is_a_list_of_process_faults() -> None:
    s = DemoSchedule.parse('[{"step": 2, "mode": "sigkill", "cell": 1, "at": "after_commit"}]')
    (fault,) = s.faults
    assert (fault.step, fault.mode.value, fault.cell, fault.at) == (2, "sigkill", 1, "after_commit")
    assert s.discards == ()


def test_an_object_holds_faults_and_discards() -> None:
    s = DemoSchedule.parse(
        '{"faults": [{"step": 7, "mode": "sigkill", "target": "driver", "at": "mid_step"}],'
        ' "discards": [{"step": 4, "cell": 1}]}'
    )
    assert s.job_kill_steps() == [7]
    assert s.discards_now(step=4, attempt=0, cell=1, incarnation=0)
    assert not s.discards_now(step=4, attempt=1, cell=1, incarnation=0)
    assert not s.discards_now(step=4, attempt=0, cell=1, incarnation=1)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[{"step": 1, "mode": "sigkill", "at": "befor_allreduce"}]', "never fires"),
        (
            '[{"step": 1, "mode": "sigkill", "target": "driver", "at": "after_commit"}]',
            "never fires",
        ),
        ('[{"step": 1, "mode": "sigkill", "target": "engine", "at": "mid_step"}]', "no 'engine'"),
    ],
)
def test_a_fault_at_a_site_nothing_fires_is_refused(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DemoSchedule.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        '[{"step": -1, "mode": "sigkill"}]',
        '[{"step": 1, "mode": "explode"}]',
        '{"faults": [], "typo": []}',
        '{"discards": [{"step": 1}]}',
    ],
)
def test_invalid_schedules_are_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        DemoSchedule.parse(text)


def test_a_quorum_timeout_holds_the_peers_of_its_cell_once() -> None:
    s = DemoSchedule.parse('{"quorum_timeouts": [{"step": 3, "cell": 0}]}')
    at = {"step": 3, "attempt": 0, "incarnation": 0}
    assert s.quorum_times_out(cell=0, **at) and not s.quorum_times_out(cell=1, **at)
    assert s.holds_quorum(cell=1, **at) and s.holds_quorum(cell=2, **at)
    assert not s.holds_quorum(cell=0, **at)
    assert not s.holds_quorum(cell=1, step=3, attempt=1, incarnation=0)
    assert not s.quorum_times_out(cell=0, step=3, attempt=0, incarnation=1)
    both = DemoSchedule.parse(
        '{"quorum_timeouts": [{"step": 3, "cell": 0}, {"step": 3, "cell": 1}]}'
    )
    assert not both.holds_quorum(cell=1, **at) and both.holds_quorum(cell=2, **at)


def test_the_quorum_deadline_outlasts_every_wait_the_lighthouse_ends() -> None:
    """A quorum of slow but live cells forms before the deadline: the lighthouse drops a
    dead cell after its heartbeat timeout and issues without a straggler after its join
    timeout (both at most, from the first ask)."""
    pytest.importorskip("torchft")
    from ftaudit.demo.torchft_quorum import HEARTBEAT_TIMEOUT_MS, JOIN_TIMEOUT_MS, quorum_deadline

    deadline = quorum_deadline(DemoConfig(run_dir="r").collective_timeout_s)
    assert deadline.total_seconds() > (JOIN_TIMEOUT_MS + HEARTBEAT_TIMEOUT_MS) / 1000


def test_the_default_schedule_round_trips_and_covers_every_fault_kind() -> None:
    s = default_schedule()
    assert DemoSchedule.parse(s.to_json()) == s
    modes = {(f.target, f.mode.value, f.at) for f in s.faults}
    assert ("trainer", "sigkill", "before_allreduce") in modes
    assert ("trainer", "sigkill", "after_commit") in modes
    assert ("trainer", "hang", "before_allreduce") in modes
    assert ("trainer", "exit", "after_step") in modes
    assert s.job_kill_steps() == [7] and s.discards


def test_config_round_trips_through_json() -> None:
    cfg = DemoConfig(
        run_dir="/tmp/x",
        cells=3,
        bug="wrong_shard",
        faults_json=default_schedule().to_json(),
    )
    assert DemoConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    ("world", "expected"),
    [(1, [(0, 16)]), (2, [(0, 8), (8, 16)]), (3, [(0, 8), (8, 12), (12, 16)])],
)
def test_shards_are_whole_groups_covering_the_batch(
    world: int, expected: list[tuple[int, int]]
) -> None:
    got = [shard_slice(16, 4, r, world) for r in range(world)]
    assert [(s.start, s.stop) for s in got] == expected


def test_shard_errors() -> None:
    with pytest.raises(ValueError, match="outside"):
        shard_slice(16, 4, 2, 2)
    with pytest.raises(ValueError, match="whole groups"):
        shard_slice(15, 4, 0, 1)


def test_bug_registry() -> None:
    assert len(BUGS) >= 10 and len({b.name for b in BUGS}) == len(BUGS)
    assert all(b.rule.startswith("FT") for b in BUGS)
    assert get_bug(None) is None and get_bug("wrong_shard").rule == "FT004"
    with pytest.raises(ValueError, match="known bugs"):
        get_bug("nope")
    assert active("wrong_shard", "wrong_shard") and not active(None, "wrong_shard")
    with pytest.raises(KeyError):
        active("wrong_shard", "wrong_shrd")


def test_a_single_cell_gets_only_faults_it_can_survive() -> None:
    s = default_schedule(cells=1)
    assert [(f.target, f.mode.value) for f in s.faults] == [("driver", "sigkill")]
    assert [d.cell for d in s.discards] == [0]
