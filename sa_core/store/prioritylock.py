"""The store's write lock, which lets requests go before background work.

A process runs one write transaction at a time (the store's lock). On PostgreSQL a
transaction holds it across its round trips, and under load the turns of hundreds of threads
queue for it: with asyncio's first-come lock, a request's transaction (say the
acknowledgement of a posted message) waited behind every one of them, and the message's first
frame came 300-400 ms late at 200 busy threads. Work in a context marked :data:`BACKGROUND`
(the engine marks turns, effects and its own background tasks) now waits behind the rest; one
time in ``fairness + 1`` the lock still goes to background work while both kinds wait, so
requests can never starve the turns. Mutual exclusion is unchanged: only the order in which
waiters get the lock is.

While a worker shares its database with other live workers, the lock stays first come, first
served: there `scale.py` gave two and four workers erratic throughput with the priority order
(48-175 and 41-102 turns/s, p99 up to 8 s, against 142-153 and 107-112 first come), for
reasons not yet understood.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType

BACKGROUND: ContextVar[bool] = ContextVar("sa_background", default=False)
"""True in the context of background work (turns, effects, the runtime's background tasks)."""


def _always() -> bool:
    return True


class PriorityLock:
    """An asyncio lock whose foreground waiters get it first.

    Args:
        fairness: While background work waits, at most this many foreground waiters in a
            row get the lock before one background waiter does.

    """

    def __init__(self, fairness: int = 4) -> None:
        self.fairness = fairness
        self.prioritize: Callable[[], bool] = _always
        """Whether background work waits behind the rest now; when not, waiters are served
        first come, first served (set by the engine: see :mod:`sa_core.engine.workers.leases`)."""
        self._held = False
        self._foreground: deque[asyncio.Future[None]] = deque()
        self._background: deque[asyncio.Future[None]] = deque()
        self._streak = 0

    def locked(self) -> bool:
        """Whether someone holds the lock (or has been handed it)."""
        return self._held

    async def acquire(self) -> bool:
        """Take the lock, waiting behind foreground waiters when this is background work."""
        if not self._held and not self._foreground and not self._background:
            self._held = True
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        background = BACKGROUND.get() and self.prioritize()
        queue = self._background if background else self._foreground
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed the lock, then cancelled: pass it on
            elif waiter in queue:
                queue.remove(waiter)
            raise
        return True

    def release(self) -> None:
        """Hand the lock to the next waiter in priority order, or free it."""
        if not self._held:
            raise RuntimeError("Lock is not acquired.")
        waiter = self._next_waiter()
        if waiter is None:
            self._held = False
        else:
            waiter.set_result(None)  # still held: it passes straight to the waiter

    def _next_waiter(self) -> asyncio.Future[None] | None:
        foreground, background = self._foreground, self._background
        while foreground and foreground[0].done():
            foreground.popleft()
        while background and background[0].done():
            background.popleft()
        if foreground and (not background or self._streak < self.fairness):
            self._streak = self._streak + 1 if background else 0
            return foreground.popleft()
        if background:
            self._streak = 0
            return background.popleft()
        return None

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
