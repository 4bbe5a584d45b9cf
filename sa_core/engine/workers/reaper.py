"""The reaper: take over the threads of dead workers, and start queued work nobody holds.

A worker that dies stops renewing; its leases expire and the other workers' reapers claim them
with ``FOR UPDATE SKIP LOCKED`` and resume each thread from its last committed point, as a
restart would (:func:`resume_taken_over`). The resume point is read once the lease is taken,
never before. The reaper also makes up for lost work notifications (queued work on a thread no
worker holds) and gives back the effects a dead worker had claimed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from sa_core.engine.delivery.effects import MAX_EFFECT_ATTEMPTS
from sa_core.engine.owed import ensure_running
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.workers.worknotes import WorkNotes
    from sa_core.store import Store

log = logging.getLogger("sa_core.workers")


class Reaping(Protocol):
    """The leases the reaper adds to (:class:`~sa_core.engine.workers.leases.LeasePlacement`)."""

    store: Store
    worker_id: str
    ttl: float
    ttl_us: int
    held: dict[str, int]
    notes: WorkNotes

    def bound(self) -> Kernel:
        """The kernel the leases serve."""
        ...

    def took_over(self, thread_id: str, token: int) -> None:
        """The worker took the thread's expired lease over at ``token`` (µs)."""
        ...

    def release(self, thread_id: str, settled: bool = False) -> None:
        """Give the lease back."""
        ...


async def reaper_loop(leases: Reaping) -> None:
    """Reap every quarter of the lease expiry (at least 0.2 s) until cancelled."""
    store = leases.store
    while True:
        await asyncio.sleep(max(0.2, leases.ttl / 4))
        try:
            at = now_us()
            for thread_id in await store.claim_expired_leases(
                leases.worker_id, leases.ttl_us, at=at
            ):
                await resume_taken_over(leases, thread_id, at)
            for thread_id in await store.unleased_queued_threads():
                leases.notes.kick_if_queued(thread_id)
            await store.reset_processing_effects(max_attempts=MAX_EFFECT_ATTEMPTS)
            # this worker's effect loop only knows the effects it scheduled itself: those a
            # dead worker scheduled, or had claimed and the line above gave back, are
            # found by reading the next due time again
            leases.bound().effects.wake()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker reaper failed")


async def resume_taken_over(leases: Reaping, thread_id: str, token: int) -> None:
    """Resume a thread taken over from a dead worker from its last committed point.

    The thread's execution record (written with each committed step) says where; this is
    what a restart does for a single process (:func:`sa_core.engine.owed.ensure_running`,
    as :func:`sa_core.engine.turn.running.resume_interrupted` does at start).
    """
    kernel = leases.bound()
    store = leases.store
    if kernel.scheduler.is_running(thread_id):  # cannot be: the lease was not ours
        return
    # the lease stays this worker's (held, renewed) until its runner exits: released in
    # between, another worker could start the thread without its resume point
    leases.took_over(thread_id, token)
    row = await store.get_thread(thread_id)
    if row is None or row.terminated is not None or row.stopped:
        record = await store.get_execution(thread_id)
        if row is not None and record is not None and record.status != "idle":
            await store.finish_execution(thread_id, record.stop_reason)
    else:
        log.info("resuming thread %s taken over from a stopped worker", thread_id)
        await ensure_running(kernel, thread_id)
    if not kernel.scheduler.is_running(thread_id) and leases.held.get(thread_id) == token:
        leases.release(thread_id)  # nothing to do after all (and not acquired again since)
