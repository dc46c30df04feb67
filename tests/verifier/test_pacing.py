"""A follower paced to a share of one core (``ftaudit.verifier.pacing.CpuShare``).

Both clocks are the test's own: a poll "costs" what the fake CPU clock moves while it
runs, and time passes only where the test moves the wall clock, so nothing here depends
on how fast the machine is.
"""

from __future__ import annotations

import pytest

from ftaudit.verifier.pacing import CpuShare


class _Clocks:
    """A wall clock and a CPU clock that move only when told."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 5.0

    def pacer(self, share: float) -> CpuShare:
        return CpuShare(share, clock=lambda: self.wall, cpu=lambda: self.cpu)

    def poll(self, cpu: float, wall: float | None = None):  # type: ignore[no-untyped-def]
        """A poll that takes ``cpu`` seconds of CPU and ``wall`` of wall time."""

        def run() -> str:
            self.cpu += cpu
            self.wall += cpu if wall is None else wall
            return "judged"

        return run


@pytest.mark.parametrize("share", [0.0, -0.01, 1.01, float("nan")])
def test_a_share_is_a_fraction_of_one_core(share: float) -> None:
    with pytest.raises(ValueError, match="fraction in"):
        CpuShare(share)


def test_the_first_poll_is_due_at_once() -> None:
    assert _Clocks().pacer(0.01).wait() == 0.0


def test_the_next_poll_waits_for_the_last_ones_cpu_over_the_share() -> None:
    clocks = _Clocks()
    pacer = clocks.pacer(0.01)
    assert pacer.run(clocks.poll(cpu=0.2)) == "judged"
    assert pacer.last_cpu == pytest.approx(0.2)
    # due 0.2 / 0.01 = 20 s after the poll began; 0.2 s of it passed in the poll
    assert pacer.wait() == pytest.approx(19.8)
    clocks.wall += 20.0
    assert pacer.wait() == 0.0
    # a poll's wall time beyond its CPU (waiting on the disk) is not charged
    pacer.run(clocks.poll(cpu=0.1, wall=3.0))
    assert pacer.wait() == pytest.approx(10.0 - 3.0)


def test_a_poll_that_raises_is_paced_too() -> None:
    clocks = _Clocks()
    pacer = clocks.pacer(0.5)

    def failing() -> None:
        clocks.cpu += 1.0
        raise OSError("the disk went away")

    with pytest.raises(OSError):
        pacer.run(failing)
    assert pacer.wait() == pytest.approx(2.0)


def test_over_many_polls_the_cpu_stays_within_the_share() -> None:
    clocks = _Clocks()
    share = 0.05
    pacer = clocks.pacer(share)
    began, spent = clocks.wall, 0.0
    # polls of growing cost (more settled since the last one), each run once it is due
    for cost in (0.3, 0.05, 0.8, 0.01, 1.2, 0.4):
        clocks.wall += pacer.wait()
        pacer.run(clocks.poll(cpu=cost))
        spent += cost
        # run when due, every poll and its wait together take exactly the share
        assert spent / (clocks.wall + pacer.wait() - began) == pytest.approx(share)
