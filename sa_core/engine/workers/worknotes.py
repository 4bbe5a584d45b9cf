"""Work notes between the workers of one database, on the ``sa_work`` channel.

A worker that finds a thread's lease held elsewhere queues the message (the queue is durable)
and tells the holder, which drains it before its next step or after its turn. The same channel
carries a stop posted to another worker, a child's settle (a blocking call may wait on it), a
remote task's push, and a starting worker's greeting. A lost note is made up by the reapers
(queued work nobody holds) or by the waiting call's periodic read.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Protocol

from sa_core.engine.delivery.delivery import stop
from sa_core.engine.remote import remote_push
from sa_core.engine.subagents.child_wait import wake
from sa_core.spec import Side

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from sa_core.engine.kernel import Kernel
    from sa_core.engine.workers.relay import RelayBus
    from sa_core.engine.workers.scheduler import Scheduler
    from sa_core.store import Store

WORK_CHANNEL = "sa_work"


class Noted(Protocol):
    """The worker the notes serve (:class:`~sa_core.engine.workers.leases.LeasePlacement`)."""

    store: Store
    worker_id: str
    kernel: Kernel | None
    held: dict[str, int]
    relay: RelayBus

    def bound(self) -> Kernel:
        """The kernel the worker serves."""
        ...


class WorkNotes:
    """A worker's notes to the others, and its answers to theirs.

    Args:
        worker: The worker (its leases and relay).
    """

    def __init__(self, worker: Noted) -> None:
        self._worker = worker
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self.background: set[asyncio.Task[Any]] = set()
        """Notes and checks under way (awaited when the worker stops)."""

    async def open(self, conn: Any, listen: Any) -> None:
        """Send on ``conn`` and hear the others' notes on ``listen`` (asyncpg connections)."""
        self._conn = conn
        await listen.add_listener(WORK_CHANNEL, self.on_note)

    def close(self) -> None:
        """Send nothing more (the connections are closed by the worker)."""
        self._conn = None

    async def greet(self) -> None:
        """Tell the other workers this one started (they relay frames to it from now on)."""
        await self.send([(WORK_CHANNEL, json.dumps({"w": self._worker.worker_id, "hello": True}))])

    async def send(self, notes: list[tuple[str, str]]) -> None:
        """Send ``(channel, payload)`` notifications (the relay's frames too) in one transaction.

        PostgreSQL delivers identical payloads in one transaction once, so senders that must not
        lose a repeat make their payloads differ (the relay numbers its own); a repeated work
        note means nothing more than the first.
        """
        if self._conn is None:
            return
        async with self._lock:
            await self._conn.executemany("SELECT pg_notify($1, $2)", notes)

    def work(self, thread_id: str, side: Side = "a", holder: str | None = None) -> None:
        """Tell the other workers that a thread has queued work.

        The one running the thread takes it in before its next step; the others try to take
        the lease (it may have just been released) and otherwise ignore it. With ``holder``
        (the worker found holding the lease), only that worker (or one holding the lease now)
        starts the thread: the others would each spend a refused acquisition.
        """
        if not self._worker.relay.peers:  # no other worker alive (one that starts says hello)
            return
        note = {"w": self._worker.worker_id, "t": thread_id, "s": side}
        if holder is not None:  # addressed to the holder: the others need not look
            note["to"] = holder
        self.spawn(self.send([(WORK_CHANNEL, json.dumps(note))]))

    def tell(self, note: dict[str, str]) -> None:
        """Send ``note`` (a settle, a push) to the other workers, if any is alive."""
        if self._worker.relay.peers:
            payload = json.dumps({"w": self._worker.worker_id, **note})
            self.spawn(self.send([(WORK_CHANNEL, payload)]))

    def stop(self, thread_id: str) -> None:
        """Ask the worker running the thread to stop its turn (a stop posted elsewhere)."""
        payload = json.dumps({"w": self._worker.worker_id, "t": thread_id, "stop": True})
        self.spawn(self.send([(WORK_CHANNEL, payload)]))

    def on_note(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        """A note from another worker (asyncpg's listener callback)."""
        worker = self._worker
        note = json.loads(payload)
        if note.get("w") == worker.worker_id:
            return
        if note.get("hello"):  # a worker started: relay frames to it from now on
            worker.relay.peers = True
            return
        if "settled" in note or "pushed" in note:  # a child settled, or a remote task pushed
            if worker.kernel is not None:
                woke = wake if "settled" in note else remote_push.wake
                woke(worker.kernel, str(note.get("settled") or note.get("pushed")))
            return
        scheduler = worker.kernel.scheduler if worker.kernel is not None else None
        if scheduler is None:  # still starting: it kicks queued threads once started
            return
        self._on_thread_note(scheduler, str(note["t"]), note)

    def _on_thread_note(self, scheduler: Scheduler, thread_id: str, note: dict[str, Any]) -> None:
        """A note about one thread: stop its turn here, or take its queued work in."""
        if note.get("stop"):
            if scheduler.is_running(thread_id):
                self.spawn(self._stop_here(thread_id))
            return
        side: Side = "b" if note.get("s") == "b" else "a"
        if scheduler.is_running(thread_id):
            scheduler.note_queued(thread_id)
        elif note.get("to") == self._worker.worker_id:
            # the holder: its runner checks, under the lease, that the work is still queued
            scheduler.kick(thread_id, side)
        elif "to" not in note or thread_id in self._worker.held:
            self.kick_if_queued(thread_id, side)

    async def _stop_here(self, thread_id: str) -> None:
        """Stop the turn this worker runs: a stop or a terminate posted to another worker."""
        kernel = self._worker.bound()
        row = await self._worker.store.get_thread(thread_id)
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
            scheduler = self._worker.bound().scheduler
            if scheduler.is_running(thread_id):
                return
            queued = await self._worker.store.list_queue(thread_id)
            if queued:
                scheduler.kick(thread_id, "b" if queued[0].role == "assistant" else side)

        self.spawn(check())

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background (awaited when the worker stops)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
