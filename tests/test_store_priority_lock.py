"""The store's write lock: requests before turns, turns never starved, exclusion kept."""

from __future__ import annotations

import asyncio

import pytest

from sa_core.store.prioritylock import BACKGROUND, PriorityLock


async def _take(lock: PriorityLock, name: str, order: list[str], *, background: bool) -> None:
    BACKGROUND.set(background)  # the task's own context
    async with lock:
        order.append(name)
        await asyncio.sleep(0)


async def _queue(
    lock: PriorityLock, order: list[str], names: list[tuple[str, bool]]
) -> list[asyncio.Task[None]]:
    tasks = []
    for name, background in names:
        tasks.append(asyncio.ensure_future(_take(lock, name, order, background=background)))
        await asyncio.sleep(0)  # queued in this order
    return tasks


@pytest.mark.asyncio
async def test_a_request_gets_the_lock_before_turns_that_waited_longer() -> None:
    lock = PriorityLock()
    await lock.acquire()
    order: list[str] = []
    tasks = await _queue(lock, order, [("turn1", True), ("turn2", True), ("request", False)])
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["request", "turn1", "turn2"]
    assert not lock.locked()


@pytest.mark.asyncio
async def test_a_waiting_turn_gets_the_lock_after_at_most_four_requests() -> None:
    lock = PriorityLock(fairness=4)
    await lock.acquire()
    order: list[str] = []
    names = [("turn", True)] + [(f"request{i}", False) for i in range(8)]
    tasks = await _queue(lock, order, names)
    lock.release()
    await asyncio.gather(*tasks)
    assert order.index("turn") == 4


@pytest.mark.asyncio
async def test_holders_never_overlap() -> None:
    lock = PriorityLock(fairness=2)
    inside = 0
    most = 0

    async def work(background: bool) -> None:
        nonlocal inside, most
        BACKGROUND.set(background)
        for _ in range(20):
            async with lock:
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0)
                inside -= 1

    await asyncio.gather(*(work(i % 3 == 0) for i in range(12)))
    assert most == 1 and not lock.locked()


@pytest.mark.asyncio
async def test_a_cancelled_waiter_neither_takes_nor_loses_the_lock() -> None:
    lock = PriorityLock()
    await lock.acquire()
    order: list[str] = []
    [cancelled, kept] = await _queue(lock, order, [("cancelled", False), ("kept", True)])
    cancelled.cancel()
    await asyncio.sleep(0)
    lock.release()
    await asyncio.wait_for(kept, 60)
    assert order == ["kept"] and not lock.locked()


@pytest.mark.asyncio
async def test_a_waiter_cancelled_after_being_handed_the_lock_passes_it_on() -> None:
    lock = PriorityLock()
    await lock.acquire()
    order: list[str] = []
    [first, second] = await _queue(lock, order, [("first", False), ("second", False)])
    lock.release()  # handed to "first", which has not resumed yet
    first.cancel()
    await asyncio.wait_for(second, 60)
    assert order == ["second"] and not lock.locked()


@pytest.mark.asyncio
async def test_waiters_are_served_first_come_while_priority_is_off() -> None:
    """Several workers on one database: the lock is asyncio's first-come order again."""
    lock = PriorityLock()
    lock.prioritize = lambda: False
    await lock.acquire()
    order: list[str] = []
    tasks = await _queue(lock, order, [("turn1", True), ("request", False), ("turn2", True)])
    lock.release()
    await asyncio.gather(*tasks)
    assert order == ["turn1", "request", "turn2"]
