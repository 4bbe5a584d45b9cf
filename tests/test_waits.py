"""Timed waits in loops: a cancellation is never lost, however it coincides with the wait."""

from __future__ import annotations

import asyncio

import pytest

from sa_core.waits import event_set_within

pytestmark = pytest.mark.asyncio


async def _wait_in_a_loop(event: asyncio.Event, seconds: float, woken: list[bool]) -> None:
    """What the effect loop and the workers' supervisor do: wait, look, wait again."""
    while True:
        woken.append(await event_set_within(event, seconds))
        event.clear()


async def test_a_cancellation_that_arrives_with_the_event_stops_the_loop() -> None:
    event, woken = asyncio.Event(), []
    task = asyncio.create_task(_wait_in_a_loop(event, 10, woken))
    await asyncio.sleep(0)  # the loop waits
    event.set()
    task.cancel()  # in the same moment: the loop must stop, not wait 10 s more
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 8)


async def test_the_wait_says_whether_the_event_was_set_in_time() -> None:
    event = asyncio.Event()
    assert await event_set_within(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await event_set_within(event, 5) is True
