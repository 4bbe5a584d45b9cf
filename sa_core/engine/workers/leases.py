"""Many workers on one PostgreSQL database: one executor per thread, takeover on crash.

Attached by the runtime when its store is PostgreSQL (:func:`attach_workers`); on SQLite the
single process keeps working as before and nothing here runs.

* **Leases.** A worker runs a thread's turns only while it holds the thread's lease
  (``thread_leases``). The lease is taken before a turn starts, renewed by the worker's heartbeat
  every third of the expiry, and kept for a third of the expiry after the thread's work is done
  (a conversation's next message usually follows soon, and reaches the same worker behind a
  sticky load balancer: it then needs no round trip to take the lease, nor one to give it back),
  then released. A worker that finds the
  lease held elsewhere queues the message (the queue is durable) and notifies the holder on the
  ``sa_work`` channel, which drains it before its next step, or after its turn.
* **Takeover.** A worker that dies stops renewing; its leases expire (default 10 s,
  ``SA_LEASE_SECONDS``) and the other workers' reapers claim them with ``FOR UPDATE SKIP
  LOCKED`` and resume each thread from its last committed point, as a restart would. The
  resume point is read once the lease is taken, never before.
* **One executor at a time.** A worker stops a turn before its lease could expire unrenewed
  (the watchdog) and hands the lease over; every write transaction of a turn is fenced by the
  lease at commit (:meth:`LeasePlacement.fence`), so a worker that lost a lease commits nothing more
  for that thread. A turn ended this way writes nothing more, as a crash would.
* **Streams.** Frames are relayed to every worker (:mod:`sa_core.engine.workers.relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery.delivery import stop
from sa_core.engine.delivery.effects import MAX_EFFECT_ATTEMPTS
from sa_core.engine.owed import ensure_running
from sa_core.engine.placement import Admission
from sa_core.engine.remote import remote_push
from sa_core.engine.subagents.child_wait import wake
from sa_core.engine.workers.relay import FRAME_RETENTION_US, STREAM_CHANNEL, RelayBus, asyncpg_dsn
from sa_core.spec import Side
from sa_core.store.apikeys import KEYS_CHANNEL
from sa_core.store.clock import now_us
from sa_core.store.leases import LeaseLost, lease_guard, lease_valid

if TYPE_CHECKING:
    from sa_core.engine.events import Frame
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.workers.scheduler import Scheduler
    from sa_core.store import Store
    from sa_core.store.fast import Deferred

WORK_CHANNEL = "sa_work"
DEFAULT_LEASE_SECONDS = 10.0
LEASE_ENV = "SA_LEASE_SECONDS"

log = logging.getLogger("sa_core.workers")

_ACQUIRING: ContextVar[bool] = ContextVar("sa_lease_acquiring", default=False)


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
    """A worker's leases, heartbeat, reaper, work notifications and stream relay.

    The kernel's :class:`~sa_core.engine.placement.Placement` when several workers share a
    database (:attr:`alone` is False).

    Args:
        store: The store (PostgreSQL).
        ttl: Lease expiry in seconds.

    """

    alone = False

    def __init__(self, store: Store, ttl: float) -> None:
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
        self._conn: Any = None
        self._listen: Any = None
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self.relay = RelayBus(self.worker_id, self._notify, self._store_frame, self._fetch_frame)

    # -- lifecycle -------------------------------------------------------------------------

    def bind(self, kernel: Kernel) -> None:
        """Work with the kernel once the runtime has built it."""
        self.kernel = kernel

    def _scheduler(self) -> Scheduler | None:
        """The kernel's scheduler, or None while the runtime starts."""
        return self.kernel.scheduler if self.kernel is not None else None

    def _bound(self) -> Kernel:
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
        await self._listen.add_listener(WORK_CHANNEL, self._on_work)
        store = self.store
        await self._listen.add_listener(KEYS_CHANNEL, self._on_keys_revoked)
        # API keys are cached while revocations are heard; never once the listener is gone
        self._listen.add_termination_listener(self._on_listener_lost)
        store.keys_epoch = 0
        store.worker_id = self.worker_id
        store.worker_ttl_us = self.ttl_us
        store.write_fence = self.fence
        store.write_fence_guard = self.fence_guard
        store.write_fence_owner = self.fence_owner
        relay = self.relay
        store.prioritize_requests(lambda: not relay.peers)  # first come while workers share
        await store.heartbeat(self.worker_id, self.ttl_us, [])
        self.relay.peers = len(await store.live_workers(self.ttl_us)) > 1
        self.relay.start()
        await self._notify([(WORK_CHANNEL, json.dumps({"w": self.worker_id, "hello": True}))])

    def run(self) -> None:
        """Start the heartbeat and the reaper (once the runtime's scheduler accepts work)."""
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="sa-heartbeat"),
            asyncio.create_task(self._reaper_loop(), name="sa-reaper"),
            asyncio.create_task(self._watchdog_loop(), name="sa-lease-watchdog"),
        ]

    async def stop(self) -> None:
        """Stop the loops, release every lease of this worker and close the connections."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)
        await self.relay.stop()
        with contextlib.suppress(Exception):
            await self.store.retire_worker(self.worker_id)
        self.store.keys_epoch = None
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
        unfenced = _ACQUIRING.set(True)  # the runner's own claim: not a write of its turn
        try:
            attempt = await self.store.try_lease(thread_id, self.worker_id, self.ttl_us)
        finally:
            _ACQUIRING.reset(unfenced)
        token = attempt.token
        if token is None:
            if self.held.get(thread_id) is not None:
                self._lost(thread_id)
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
        thread's turns are still fenced by the database (:meth:`fence`).
        """
        at = self.expires.get(thread_id)
        return at is not None and thread_id in self.held and at - now_us() >= self.ttl_us // 2

    def settled(self, thread_id: str) -> bool:
        """Whether the thread's lease is kept after its runner settled (nothing owed since)."""
        return thread_id in self.lingering

    def fence_owner(self, thread_id: str) -> str | None:
        """The worker id when a write of the thread made now is its runner's (to be fenced)."""
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get() or scheduler.current_thread() != thread_id:
            return None
        return self.worker_id

    def fence(self, conn: Any) -> None:
        """Before a write of a thread's turn commits: refuse it if the lease was lost.

        The store runs this in every write transaction (``write_fence``); only writes made by
        a thread's runner (its turn, tools and hooks) are checked, against that thread's
        lease. The check share-locks the lease row until the commit, so no other worker takes
        the thread over between the check and the commit.

        Raises:
            LeaseLost: The lease expired or another worker took the thread over; the
                transaction rolls back and the turn ends here.
        """
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get():
            return
        thread_id = scheduler.current_thread()
        if thread_id is not None and not lease_valid(conn, thread_id, self.worker_id):
            log.warning("lease on thread %s lost; its turn on this worker ends", thread_id)
            scheduler.interrupt(thread_id, cancel=False)
            raise LeaseLost(thread_id)

    def fence_guard(self) -> Deferred | None:
        """:meth:`fence` as a statement sent with a transaction's deferred writes, or ``None``.

        It selects the lease row (share-locking it) while the lease holds; when it does not,
        the store undoes the writes and runs :meth:`fence` itself, which raises.
        """
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get():
            return None
        thread_id = scheduler.current_thread()
        if thread_id is None:
            return None
        return lease_guard(thread_id, self.worker_id, self.fence)

    def release(self, thread_id: str, settled: bool = False) -> None:
        """Give the lease back once the thread's runner exits (in the background).

        A runner that settled its flow (``settled``) keeps the lease for :attr:`linger_us`:
        the heartbeat renews it meanwhile and gives it back after. A runner cut off (a lost
        lease, a shutdown, a lease about to expire) may leave a turn owed: that lease is
        expired rather than deleted, so the workers' reapers take the thread over and resume
        the turn at once.
        """
        if settled and thread_id in self.held and self._bound().scheduler.accepts_work():
            self.lingering[thread_id] = now_us()
            return
        self.lingering.pop(thread_id, None)
        if thread_id in self.held:
            token = self.held.pop(thread_id)
            self.expires.pop(thread_id, None)
            self._spawn(self.store.release_lease(thread_id, self.worker_id, token, handover=True))

    def notify_work(self, thread_id: str, side: Side = "a", holder: str | None = None) -> None:
        """Tell the other workers that a thread has queued work.

        The one running the thread takes it in before its next step; the others try to take
        the lease (it may have just been released) and otherwise ignore it. With ``holder``
        (the worker :meth:`try_acquire` just found holding the lease), only that worker (or
        one holding the lease now) starts the thread: the others would each spend a refused
        acquisition. A lost notification is made up by the reapers, which start queued work
        nobody holds.
        """
        if not self.relay.peers:  # no other worker alive (one that starts says hello first)
            return
        note = {"w": self.worker_id, "t": thread_id, "s": side}
        if holder is not None:  # addressed to the holder: the others need not look
            note["to"] = holder
        payload = json.dumps(note)
        self._spawn(self._notify([(WORK_CHANNEL, payload)]))

    def notify_settled(self, thread_id: str) -> None:
        """Tell the other workers that a child's settle committed (a blocking call may wait).

        See :mod:`sa_core.engine.subagents.child_wait`; a lost note is made up by the waiting call's
        periodic read of the child's row.
        """
        self._tell({"settled": thread_id})

    def notify_pushed(self, thread_id: str) -> None:
        """Wake a remote child's follower where it runs (``engine/remote/remote_push.py``)."""
        self._tell({"pushed": thread_id})

    def _tell(self, note: dict[str, str]) -> None:
        if self.relay.peers:
            self._spawn(self._notify([(WORK_CHANNEL, json.dumps({"w": self.worker_id, **note}))]))

    def notify_stop(self, thread_id: str) -> None:
        """Ask the worker running the thread to stop its turn (a stop posted elsewhere)."""
        payload = json.dumps({"w": self.worker_id, "t": thread_id, "stop": True})
        self._spawn(self._notify([(WORK_CHANNEL, payload)]))

    def _on_keys_revoked(self, _conn: Any, _pid: int, _channel: str, _payload: str) -> None:
        store = self.store
        if store.keys_epoch is not None:
            store.keys_epoch += 1

    def _on_listener_lost(self, _conn: Any) -> None:
        self.store.keys_epoch = None

    def _on_work(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        note = json.loads(payload)
        if note.get("w") == self.worker_id:
            return
        if note.get("hello"):  # a worker started: relay frames to it from now on
            self.relay.peers = True
            return
        if "settled" in note or "pushed" in note:  # a child settled, or a remote task pushed
            if self.kernel is not None:
                woke = wake if "settled" in note else remote_push.wake
                woke(self.kernel, str(note.get("settled") or note.get("pushed")))
            return
        thread_id = str(note["t"])
        scheduler = self._scheduler()
        if scheduler is None:  # still starting: it kicks queued threads once started
            return
        if note.get("stop"):
            if scheduler.is_running(thread_id):
                self._spawn(self._stop_here(thread_id))
            return
        if scheduler.is_running(thread_id):
            scheduler.note_queued(thread_id)
        elif note.get("to") == self.worker_id:
            # the holder: its runner checks, under the lease, that the work is still queued
            scheduler.kick(thread_id, "b" if note.get("s") == "b" else "a")
        elif "to" not in note or thread_id in self.held:
            self.kick_if_queued(thread_id, "b" if note.get("s") == "b" else "a")

    async def _stop_here(self, thread_id: str) -> None:
        """Stop the turn this worker runs: a stop or a terminate posted to another worker."""
        kernel = self._bound()
        row = await self.store.get_thread(thread_id)
        live = kernel.threads.live_row(thread_id)
        if row is not None and live is not None:  # a terminate: this worker's view learns it
            live.terminated = row.terminated
        await stop(kernel, thread_id)

    def kick_if_queued(self, thread_id: str, side: Side = "a") -> None:
        """Start the thread here if it has queued work (a lease held elsewhere stops it there).

        Without queued work a turn would run on nothing new: the holder may have taken the
        entries in already.
        """

        async def check() -> None:
            scheduler = self._bound().scheduler
            if scheduler.is_running(thread_id):
                return
            queued = await self.store.list_queue(thread_id)
            if queued:
                scheduler.kick(thread_id, "b" if queued[0].role == "assistant" else side)

        self._spawn(check())

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

    # -- loops -----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        store = self.store
        beats = 0
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                self._end_lingering()
                held = dict(self.held)
                before = now_us()  # the renewed leases expire no sooner than ttl after this
                renewed = set(await store.heartbeat(self.worker_id, self.ttl_us, list(held)))
                for thread_id, token in held.items():
                    if self.held.get(thread_id) != token:
                        continue  # released or acquired again meanwhile
                    if thread_id in renewed:
                        expires = before + self.ttl_us
                        self.expires[thread_id] = max(self.expires.get(thread_id, 0), expires)
                    else:
                        self._lost(thread_id)
                beats += 1
                self.relay.peers = len(await store.live_workers(self.ttl_us)) > 1
                if beats % 10 == 0:
                    await store.prune_stream_frames(FRAME_RETENTION_US)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker heartbeat failed")

    def _lost(self, thread_id: str) -> None:
        """Another worker took the thread over: stop running it here."""
        log.warning("lease on thread %s lost; stopping its turn on this worker", thread_id)
        self.held.pop(thread_id, None)
        self.expires.pop(thread_id, None)
        self.lingering.pop(thread_id, None)
        self._bound().scheduler.interrupt(thread_id)

    def _end_lingering(self) -> None:
        """Give back the leases kept longer than :attr:`linger_us` after their runner settled."""
        scheduler = self._bound().scheduler
        limit = now_us() - self.linger_us
        for thread_id, since in list(self.lingering.items()):
            if since <= limit and not scheduler.is_running(thread_id):
                self.release(thread_id)

    def expiring(self, now: int | None = None) -> list[str]:
        """Threads whose lease this worker has not renewed in time: within the margin of expiry."""
        limit = (now_us() if now is None else now) + self.margin_us
        return [thread_id for thread_id, at in self.expires.items() if at <= limit]

    async def _watchdog_loop(self) -> None:
        """Stop turns whose lease could expire before it is renewed (a stalled heartbeat).

        A worker's turns never run past its lease: once another worker could take a thread
        over, this one has already stopped it (its lease is then expired for the reapers), so
        two workers never run a thread's turns at the same time.
        """
        scheduler = self._bound().scheduler
        while True:
            await asyncio.sleep(self.ttl / 8)
            for thread_id in self.expiring():
                if scheduler.runner(thread_id) is None or scheduler.interrupted(thread_id):
                    continue
                log.warning(
                    "lease on thread %s not renewed in time; its turn here ends, to resume on "
                    "whichever worker takes the lease over",
                    thread_id,
                )
                scheduler.interrupt(thread_id)

    async def _reaper_loop(self) -> None:
        store = self.store
        while True:
            await asyncio.sleep(max(0.2, self.ttl / 4))
            try:
                at = now_us()
                for thread_id in await store.claim_expired_leases(
                    self.worker_id, self.ttl_us, at=at
                ):
                    self.taken_over += 1
                    await self._resume(thread_id, at)
                for thread_id in await store.unleased_queued_threads():
                    self.kick_if_queued(thread_id)
                await store.reset_processing_effects(max_attempts=MAX_EFFECT_ATTEMPTS)
                # this worker's effect loop only knows the effects it scheduled itself: those a
                # dead worker scheduled, or had claimed and the line above gave back, are
                # found by reading the next due time again
                self._bound().effects.wake()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker reaper failed")

    async def _resume(self, thread_id: str, token: int) -> None:
        """Resume a thread taken over from a dead worker from its last committed point.

        The thread's execution record (written with each committed step) says where; this is
        what a restart does for a single process (:func:`sa_core.engine.owed.ensure_running`,
        as :func:`sa_core.engine.turn.running.resume_interrupted` does at start).
        """
        kernel = self._bound()
        store = self.store
        if kernel.scheduler.is_running(thread_id):  # cannot be: the lease was not ours
            return
        # the lease stays this worker's (held, renewed) until its runner exits: released in
        # between, another worker could start the thread without its resume point
        self.held[thread_id] = token
        self.expires[thread_id] = token + self.ttl_us
        row = await store.get_thread(thread_id)
        if row is None or row.terminated is not None or row.stopped:
            record = await store.get_execution(thread_id)
            if row is not None and record is not None and record.status != "idle":
                await store.finish_execution(thread_id, record.stop_reason)
        else:
            log.info("resuming thread %s taken over from a stopped worker", thread_id)
            await ensure_running(kernel, thread_id)
        if not kernel.scheduler.is_running(thread_id) and self.held.get(thread_id) == token:
            self.release(thread_id)  # nothing to do after all (and not acquired again since)

    # -- notifications ---------------------------------------------------------------------

    async def _notify(self, notes: list[tuple[str, str]]) -> None:
        # one transaction (asyncpg's executemany): PostgreSQL delivers identical payloads in it
        # once, so senders that must not lose a repeat make their payloads differ (the relay
        # numbers its own); a repeated work notification means nothing more than the first
        if self._conn is None:
            return
        async with self._lock:
            await self._conn.executemany("SELECT pg_notify($1, $2)", notes)

    async def _store_frame(self, thread_id: str, frame: Frame) -> int:
        return await self.store.put_stream_frame(thread_id, frame)

    async def _fetch_frame(self, seq: int) -> dict[str, Any] | None:
        return await self.store.get_stream_frame(seq)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


async def attach_workers(store: Store) -> LeasePlacement | None:
    """Share the runtime's threads with the other workers of its PostgreSQL database.

    Called by the runtime once its store is open; returns ``None`` (nothing to share) on SQLite.
    The workers' relaying bus (``workers.relay``) is then the runtime's event bus.
    """
    if not store.url.startswith("postgresql"):
        return None
    workers = LeasePlacement(store, lease_seconds())
    await workers.connect()
    return workers
