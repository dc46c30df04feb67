"""Step and attempt context: nesting, threads and asyncio tasks."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from ftaudit.eventlog import current, step_context


def test_nested_contexts_override_and_restore():
    assert current().step is None
    with step_context(1, 0):
        with step_context(1, 2):
            assert (current().step, current().attempt) == (1, 2)
        assert (current().step, current().attempt) == (1, 0)
    assert current().step is None


def test_threads_do_not_see_each_others_steps():
    seen: dict[int, tuple[int | None, int | None]] = {}
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        with step_context(i, i):
            barrier.wait()  # all four contexts are open at once
            seen[i] = (current().step, current().attempt)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {i: (i, i) for i in range(4)}


def test_a_thread_started_with_the_context_inherits_it():
    result: list[int | None] = []
    with step_context(7):
        ctx = contextvars.copy_context()
    thread = threading.Thread(target=lambda: ctx.run(lambda: result.append(current().step)))
    thread.start()
    thread.join()
    assert result == [7]


def test_asyncio_tasks_keep_their_own_step():
    async def task(i: int) -> tuple[int | None, int | None]:
        with step_context(i, 0):
            await asyncio.sleep(0.001 * (5 - i))
            return current().step, current().attempt

    async def main() -> list[tuple[int | None, int | None]]:
        return await asyncio.gather(*(task(i) for i in range(5)))

    assert asyncio.run(main()) == [(i, 0) for i in range(5)]


def test_negative_step_is_refused():
    with pytest.raises(ValueError), step_context(-1):
        pass
