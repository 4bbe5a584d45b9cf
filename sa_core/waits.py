"""Waiting for an event with a time limit, in loops that must still stop when cancelled."""

from __future__ import annotations

import asyncio
import contextlib


async def event_set_within(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; returns whether it is set.

    Uses ``asyncio.timeout`` rather than ``asyncio.wait_for``. On Python 3.11, ``wait_for`` can
    turn a cancellation that arrives as its own time limit expires into ``TimeoutError``. A
    loop that suppresses that error then never sees the cancellation, and the task that
    cancelled it (say a runtime's ``close``) waits for it forever. ``asyncio.timeout`` only
    turns its own cancellation into ``TimeoutError``.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()
