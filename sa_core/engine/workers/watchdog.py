"""The lease watchdog: a worker's turns never run past its lease.

A stalled heartbeat could let a lease expire while its turn still runs here; once another worker
could take the thread over, this one has already stopped the turn (its lease is then expired for
the reapers), so two workers never run a thread's turns at the same time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sa_core.engine.workers.scheduler import Scheduler

log = logging.getLogger("sa_core.workers")


class Watched(Protocol):
    """The leases the watchdog watches (:class:`~sa_core.engine.workers.leases.LeasePlacement`)."""

    ttl: float

    def expiring(self, now: int | None = None) -> list[str]:
        """Threads whose lease was not renewed in time."""
        ...


async def watchdog_loop(leases: Watched, scheduler: Scheduler) -> None:
    """Stop turns whose lease could expire before it is renewed (every eighth of the expiry)."""
    while True:
        await asyncio.sleep(leases.ttl / 8)
        for thread_id in leases.expiring():
            if scheduler.runner(thread_id) is None or scheduler.interrupted(thread_id):
                continue
            log.warning(
                "lease on thread %s not renewed in time; its turn here ends, to resume on "
                "whichever worker takes the lease over",
                thread_id,
            )
            scheduler.interrupt(thread_id)
