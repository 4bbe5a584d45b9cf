"""Model steps let through one per event-loop pass while several runners are in flight.

asyncio runs, in each pass of its loop, every callback that was ready when the pass began, in
the order they became ready. A runner's model step with a fast model is one long callback (the
step, its commit, the frames): with twenty runners ready, a pass runs twenty steps, and a
request that arrived meanwhile (a posted message, a stream frame to write) waits for all of
them. :class:`StepRation` queues runners about to start a step and wakes one per pass, so
requests are served between steps instead of behind all of them: a posted message is
acknowledged, and its frame written, while the turns in flight wait their share. The same work
is done in the same order per thread; only the order between threads and requests changes.
Runners wait without holding anything, so a parent waiting on its blocking subagent cannot
starve it.
"""

from __future__ import annotations

import asyncio
from collections import deque


class StepRation:
    """A queue of runners waiting to start a step, woken one per event-loop pass."""

    __slots__ = ("_waiting", "_pumping")

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._pumping: asyncio.AbstractEventLoop | None = None
        """The loop a wake-up is scheduled on, if any."""

    @property
    def waiting(self) -> int:
        """How many runners wait for their step (cancelled ones included until their pass)."""
        return len(self._waiting)

    async def wait(self) -> None:
        """Wait until this runner's turn comes: after the runners queued before it, one a pass."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        if self._pumping is not loop:  # none scheduled (or on a loop since closed)
            self._pumping = loop
            loop.call_soon(self._pump, loop)
        await waiter

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the first runner still waiting; come back next pass while others wait."""
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():  # a cancelled runner gave up its place
                waiter.set_result(None)
                break
        if waiting:
            loop.call_soon(self._pump, loop)
        else:
            self._pumping = None
