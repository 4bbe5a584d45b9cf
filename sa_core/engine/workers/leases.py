"""Many workers on one PostgreSQL database: one executor per thread, takeover on crash.

Attached by the runtime when its store is PostgreSQL (:func:`attach_workers`); on SQLite the
single process keeps working as before and nothing here runs. :class:`LeasePlacement` is the
worker's placement: its leases, here; each other job in a module of its own.

* **Leases.** A worker runs a thread's turns only while it holds the thread's lease
  (``thread_leases``). The lease is taken before a turn starts, renewed by the worker's heartbeat
  (:mod:`~sa_core.engine.workers.heartbeat`) every third of the expiry, and kept for a third of
  the expiry after the thread's work is done (a conversation's next message usually follows
  soon, and reaches the same worker behind a sticky load balancer: it then needs no round trip
  to take the lease, nor one to give it back), then released. A worker that finds the lease
  held elsewhere queues the message (the queue is durable) and notifies the holder
  (:mod:`~sa_core.engine.workers.worknotes`), which drains it before its next step, or after its
  turn.
* **Takeover.** A worker that dies stops renewing; its leases expire (default 10 s,
  ``SA_LEASE_SECONDS``) and the other workers' reapers (:mod:`~sa_core.engine.workers.reaper`)
  claim them and resume each thread from its last committed point, as a restart would.
* **One executor at a time.** A worker stops a turn before its lease could expire unrenewed
  (:mod:`~sa_core.engine.workers.watchdog`) and hands the lease over; every write transaction
  of a turn is fenced by the lease at commit (:mod:`~sa_core.engine.workers.leasefence`), so a
  worker that lost a lease commits nothing more for that thread. A turn ended this way writes
  nothing more, as a crash would.
* **Streams.** Frames are relayed to every worker (:mod:`sa_core.engine.workers.relay`), large
  ones through the store's stream-frame rows.
* **API keys** stay cached while revocations are heard
  (:mod:`~sa_core.engine.workers.keyrevocations`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

from sa_core.engine.placement import Admission
from sa_core.engine.workers.heartbeat import heartbeat_loop
from sa_core.engine.workers.keyrevocations import listen_for_revocations
from sa_core.engine.workers.leasefence import LeaseFence, acquiring
from sa_core.engine.workers.reaper import reaper_loop
from sa_core.engine.workers.relay import STREAM_CHANNEL, RelayBus, asyncpg_dsn
from sa_core.engine.workers.watchdog import watchdog_loop
from sa_core.engine.workers.worknotes import WorkNotes
from sa_core.spec import Side
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.events import ParentOf
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.workers.scheduler import Scheduler
    from sa_core.store import Store

DEFAULT_LEASE_SECONDS = 10.0
LEASE_ENV = "SA_LEASE_SECONDS"

log = logging.getLogger("sa_core.workers")


def lease_seconds() -> float:
    """The lease expiry: ``$SA_LEASE_SECONDS`` or 10 s.

    Raises:
        ValueError: The variable is not a positive number.

    """
    raw = os.environ.get(LEASE_ENV)
    if raw is None or raw == "":
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{LEASE_ENV}={raw!r}: give the lease expiry in seconds, e.g. 10")
    return value


class LeasePlacement:
    """A worker's leases, and the jobs that keep them: heartbeat, reaper, watchdog, notes, relay.

    The kernel's :class:`~sa_core.engine.placement.Placement` when several workers share a
    database (:attr:`alone` is False).

    Args:
        store: The store (PostgreSQL).
        ttl: Lease expiry in seconds.
        parent_of: A thread's parent (see :class:`~sa_core.engine.events.EventBus`).

    """

    alone = False

    def __init__(self, store: Store, ttl: float, parent_of: ParentOf | None = None) -> None:
        self.store = store
        self.kernel: Kernel | None = None
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ttl = ttl
        self.ttl_us = int(ttl * 1_000_000)
        self.held: dict[str, int] = {}
        """Thread id -> token of the lease this worker holds."""
        self.expires: dict[str, int] = {}
        """Thread id -> when (µs) this worker's lease on it expires unless renewed again."""
        self.margin_us = self.ttl_us // 4
        """A turn stops this long before its lease could expire without a renewal."""
        self.linger_us = self.ttl_us // 3
        """How long a lease is kept once its thread's runner settled (for the next turn)."""
        self.lingering: dict[str, int] = {}
        """Thread id -> when (µs) its runner settled: the lease is kept, nothing is owed."""
        self.taken_over = 0
        """Threads this worker's reaper took over from dead workers."""
        self._conn: Any = None
        self._listen: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self.notes = WorkNotes(self)
        self.relay = RelayBus(
            self.worker_id,
            self.notes.send,
            store.put_stream_frame,
            store.get_stream_frame,
            parent_of,
        )
        self.fence = LeaseFence(self.worker_id, self._scheduler)

    # -- lifecycle -------------------------------------------------------------------------

    def bind(self, kernel: Kernel) -> None:
        """Work with the kernel once the runtime has built it."""
        self.kernel = kernel

    def _scheduler(self) -> Scheduler | None:
        """The kernel's scheduler, or None while the runtime starts."""
        return self.kernel.scheduler if self.kernel is not None else None

    def bound(self) -> Kernel:
        """The kernel (raises before the runtime built it: the workers run nothing then)."""
        if self.kernel is None:
            raise RuntimeError("the workers run nothing before the runtime starts")
        return self.kernel

    async def start(self) -> None:
        """Nothing more to take up once the runtime opened its store (see :meth:`connect`)."""

    async def connect(self) -> None:
        """Connect the notification connections and register (the loops start with :meth:`run`)."""
        import asyncpg  # type: ignore[import-untyped]

        dsn = asyncpg_dsn(self.store.url)
        self._conn = await asyncpg.connect(dsn)
        self._listen = await asyncpg.connect(dsn)
        await self._listen.add_listener(STREAM_CHANNEL, self.relay.on_notify)
        await self.notes.open(self._conn, self._listen)
        store = self.store
        await listen_for_revocations(self._listen, store)
        store.join_workers(self.worker_id, self.ttl_us)
        store.fence_writes(self.fence)
        relay = self.relay
        store.prioritize_requests(lambda: not relay.peers)  # first come while workers share
        await store.heartbeat(self.worker_id, self.ttl_us, [])
        self.relay.peers = len(await store.live_workers(self.ttl_us)) > 1
        self.relay.start()
        await self.notes.greet()

    def run(self) -> None:
        """Start the heartbeat, the reaper and the watchdog (once the scheduler accepts work)."""
        self._tasks = [
            asyncio.create_task(heartbeat_loop(self), name="sa-heartbeat"),
            asyncio.create_task(reaper_loop(self), name="sa-reaper"),
            asyncio.create_task(
                watchdog_loop(self, self.bound().scheduler), name="sa-lease-watchdog"
            ),
        ]

    async def stop(self) -> None:
        """Stop the loops, release every lease of this worker and close the connections."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self.notes.background, return_exceptions=True)
        await self.relay.stop()
        with contextlib.suppress(Exception):
            await self.store.retire_worker(self.worker_id)
        self.store.revocations_unheard()
        self.notes.close()
        for conn in (self._listen, self._conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._conn = self._listen = None

    # -- leases ----------------------------------------------------------------------------

    async def acquire(self, thread_id: str) -> bool:
        """Take the thread's lease for this worker.

        Returns:
            Whether this worker may run the thread's turns now (``False``: another worker
            holds the lease; queue the work and :meth:`notify_work`).

        """
        return (await self.try_acquire(thread_id))[0]

    async def try_acquire(self, thread_id: str) -> tuple[bool, str | None]:
        """:meth:`acquire`, and the worker found holding the lease when it was refused.

        Returns:
            Whether the lease is this worker's now, and the holder (if known) when not: the
            worker to address :meth:`notify_work` to.
        """
        if self.holds(thread_id):
            self.lingering.pop(thread_id, None)
            return True, None
        # otherwise asked of the database (renewed when this worker holds it)
        with acquiring():  # the runner's own claim: not a write of its turn
            attempt = await self.store.try_lease(thread_id, self.worker_id, self.ttl_us)
        token = attempt.token
        if token is None:
            if self.held.get(thread_id) is not None:
                self.lost(thread_id)
            return False, attempt.holder
        self.held[thread_id] = token
        self.expires[thread_id] = token + self.ttl_us  # the token is the acquisition's time
        return True, None

    async def claim(self, thread_id: str) -> bool:
        """The scheduler's claim before a thread's flow: :meth:`acquire`, in its runner.

        A lease this worker holds is taken without a round trip; the runner then waits for the
        write transaction open in this process, if any, to end, as taking the lease in the
        database would: the work it was kicked for may commit with that transaction.
        """
        if self.holds(thread_id):
            await self.store.wait_for_writes()
        return await self.acquire(thread_id)

    def holds(self, thread_id: str) -> bool:
        """Whether this worker surely holds the thread's lease, without asking the database.

        True while the lease, taken or renewed by this worker, has at least half its expiry
        left: no other worker can take a lease before it expires (taking one needs it expired
        or held by the taker), and the heartbeat renews it every third of the expiry, so with a
        healthy heartbeat this holds from one acquisition to the release. Commits of the
        thread's turns are still fenced by the database (:attr:`fence`).
        """
        at = self.expires.get(thread_id)
        return at is not None and thread_id in self.held and at - now_us() >= self.ttl_us // 2

    def settled(self, thread_id: str) -> bool:
        """Whether the thread's lease is kept after its runner settled (nothing owed since)."""
        return thread_id in self.lingering

    def release(self, thread_id: str, settled: bool = False) -> None:
        """Give the lease back once the thread's runner exits (in the background).

        A runner that settled its flow (``settled``) keeps the lease for :attr:`linger_us`:
        the heartbeat renews it meanwhile and gives it back after. A runner cut off (a lost
        lease, a shutdown, a lease about to expire) may leave a turn owed: that lease is
        expired rather than deleted, so the workers' reapers take the thread over and resume
        the turn at once.
        """
        if settled and thread_id in self.held and self.bound().scheduler.accepts_work():
            self.lingering[thread_id] = now_us()
            return
        self.lingering.pop(thread_id, None)
        if thread_id in self.held:
            token = self.held.pop(thread_id)
            self.expires.pop(thread_id, None)
            released = self.store.release_lease(thread_id, self.worker_id, token, handover=True)
            self.notes.spawn(released)

    def notify_work(self, thread_id: str, side: Side = "a", holder: str | None = None) -> None:
        """Tell the other workers that a thread has queued work (:meth:`WorkNotes.work`).

        ``holder``: the worker :meth:`try_acquire` just found holding the lease. A lost note is
        made up by the reapers, which start queued work nobody holds.
        """
        self.notes.work(thread_id, side, holder)

    def notify_settled(self, thread_id: str) -> None:
        """Tell the other workers that a child's settle committed (a blocking call may wait).

        See :mod:`sa_core.engine.subagents.child_wait`; a lost note is made up by the waiting
        call's periodic read of the child's row.
        """
        self.notes.tell({"settled": thread_id})

    def notify_pushed(self, thread_id: str) -> None:
        """Wake a remote child's follower where it runs (``engine/remote/remote_push.py``)."""
        self.notes.tell({"pushed": thread_id})

    def notify_stop(self, thread_id: str) -> None:
        """Ask the worker running the thread to stop its turn (a stop posted elsewhere)."""
        self.notes.stop(thread_id)

    # -- placement (see sa_core.engine.placement) -------------------------------------------

    async def give_back(self, thread_id: str) -> None:
        """Nothing to do: the runner's release gives the lease back."""

    def handle_serves(self, thread_id: str) -> bool:
        """A live handle serves while this worker holds the lease (the commit checks the row)."""
        return thread_id in self.held

    async def admit(self, thread_id: str) -> Admission:
        """Take the thread's lease for a message; it queues when held elsewhere or owed here.

        Taken here, a turn a dead worker left owed resumes first and the message queues.
        """
        settled = self.settled(thread_id)  # kept since its last turn: nothing owed
        taken, holder = await self.try_acquire(thread_id)
        if not taken:
            return Admission(busy=True, elsewhere=True, holder=holder)
        if settled:
            return Admission(busy=False)
        record = await self.store.get_execution(thread_id)
        return Admission(busy=record is not None and record.owed_resume is not None)

    async def may_finish(self, thread_id: str) -> bool:
        """A stop records the execution's end unless another worker holds the lease."""
        return await self.store.lease_owner(thread_id) in (None, self.worker_id)

    def reread_seconds(self) -> float:
        """A quarter of the lease expiry (at least 0.25 s)."""
        return max(0.25, self.ttl / 4)

    def renewed(self, thread_id: str, expires: int) -> None:
        """The heartbeat renewed the thread's lease: it expires no sooner than ``expires``."""
        self.expires[thread_id] = max(self.expires.get(thread_id, 0), expires)

    def took_over(self, thread_id: str, token: int) -> None:
        """The reaper took the thread's expired lease over at ``token`` (µs).

        Held till the thread's runner exits, renewed meanwhile.
        """
        self.taken_over += 1
        self.held[thread_id] = token
        self.expires[thread_id] = token + self.ttl_us

    def lost(self, thread_id: str) -> None:
        """Another worker took the thread over: stop running it here."""
        log.warning("lease on thread %s lost; stopping its turn on this worker", thread_id)
        self.held.pop(thread_id, None)
        self.expires.pop(thread_id, None)
        self.lingering.pop(thread_id, None)
        self.bound().scheduler.interrupt(thread_id)

    def end_lingering(self) -> None:
        """Give back the leases kept longer than :attr:`linger_us` after their runner settled."""
        scheduler = self.bound().scheduler
        limit = now_us() - self.linger_us
        for thread_id, since in list(self.lingering.items()):
            if since <= limit and not scheduler.is_running(thread_id):
                self.release(thread_id)

    def expiring(self, now: int | None = None) -> list[str]:
        """Threads whose lease this worker has not renewed in time: within the margin of expiry."""
        limit = (now_us() if now is None else now) + self.margin_us
        return [thread_id for thread_id, at in self.expires.items() if at <= limit]


async def attach_workers(store: Store, parent_of: ParentOf | None = None) -> LeasePlacement | None:
    """Share the runtime's threads with the other workers of its PostgreSQL database.

    Called by the runtime once its store is open; returns ``None`` (nothing to share) on SQLite.
    The workers' relaying bus (``workers.relay``) is then the runtime's event bus.
    """
    if not store.url.startswith("postgresql"):
        return None
    workers = LeasePlacement(store, lease_seconds(), parent_of)
    await workers.connect()
    return workers
