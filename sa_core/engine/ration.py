"""Model steps rationed per event-loop pass while several runners are in flight.

asyncio runs, in each pass of its loop, every callback that was ready when the pass began, in
the order they became ready. A runner's model step with a fast model is one long callback (the
step, its commit, the frames): with twenty runners ready, a pass runs twenty steps, and a
request that arrived meanwhile (a posted message, a stream frame to write) waits for all of
them. :class:`StepRation` gives each pass a budget of runner time: steps start at once while
the pass has spent less than it on runners; later ones queue and are woken one per pass. So
requests are served between steps instead of behind all of them (a posted message is
acknowledged, and its frame written, while the turns in flight wait their share), and cheap
steps (a model called over the network returns control at once) cost no extra pass. The same
work is done in the same order per thread; only the order between threads and requests
changes. Runners wait without holding anything, so a parent waiting on its blocking subagent
cannot starve it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

PASS_BUDGET = 0.001
"""Seconds of runner steps one loop pass may start before later steps wait for the next."""


class StepRation:
    """Runners about to start a step: let through within a pass's budget, else queued.

    Args:
        budget: Seconds of runner time a pass may spend before further steps wait (0: one
            step per pass).
    """

    __slots__ = ("_budget", "_waiting", "_pumping", "_opened", "_loop")

    def __init__(self, budget: float = PASS_BUDGET) -> None:
        self._budget = budget
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._pumping = False
        self._opened: float | None = None
        """When the current pass let its first step through (``None``: none yet)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def waiting(self) -> int:
        """How many runners wait for their step (cancelled ones included until their pass)."""
        return len(self._waiting)

    async def wait(self) -> None:
        """Return when this runner may start its step.

        At once when no one is queued and the pass is within its budget; else after the
        runners queued before it, one a pass.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop: nothing scheduled on the old one counts
            self._loop, self._pumping, self._opened = loop, False, None
            self._waiting.clear()
        if not self._waiting and self._within_budget(loop):
            return
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        if not self._pumping:
            self._pumping = True
            loop.call_soon(self._pump, loop)
        await waiter
        self._within_budget(loop)  # this step counts against the pass it runs in

    def _within_budget(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether this pass may start another step (opens the pass's account if new)."""
        now = time.perf_counter()
        if self._opened is None:
            self._opened = now
            loop.call_soon(self._close_pass)  # runs in the next pass, after this one's work
            return True
        return now - self._opened < self._budget

    def _close_pass(self) -> None:
        self._opened = None

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
            self._pumping = False
