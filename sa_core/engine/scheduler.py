"""The scheduler: which thread runs, one runner task per thread, waiting, stopping, cancelling.

A thread has at most one runner task in a process. The runner claims the thread's execution
row in the store (``claimed_by``) before each flow, so that the store, not this process's
memory, says who runs a thread: a thread claimed by another live runtime is left to it. The
claim is released when the flow settles (``finish_execution``), and a runtime starting alone on
a database (SQLite) releases the claims of the processes that ran before it. Several workers on
one PostgreSQL database claim through their thread lease instead (``claim``/``release``,
:mod:`sa_core.engine.leases`): owner plus expiry, renewed by a heartbeat while the flow runs,
taken over once expired by another worker that resumes from the last committed point.

Per-thread entries exist only while the thread has work: when its runner exits, every entry of
the thread is dropped, so the scheduler keeps nothing per thread ever seen.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.priority import background_context

if TYPE_CHECKING:
    from sa_core.engine.flow import Flow, StopReason
    from sa_core.spec import Message
    from sa_core.store import Store, Transaction
    from sa_core.store.executions import ResumePoint
    from sa_core.store.rows import QueueEntry

Side = Literal["a", "b"]
RunFlow = Callable[[str, Side, list["Message"], "ResumePoint | None"], Awaitable["Flow | None"]]
"""Runs one flow of a thread to its end (``None`` when the thread cannot run)."""
SettleFlow = Callable[["Flow", "StopReason | None"], Awaitable[None]]
"""Records how a flow ended (outcome, parent report, nothing owed), and why (default: the
flow's ``end_reason``)."""

_RUNNER: ContextVar[str | None] = ContextVar("sa_runner_thread", default=None)
"""The thread whose runner task this is (set in the runner's own context)."""


class Scheduler:
    """Runner tasks per thread, and the background tasks of a runtime.

    Args:
        store: The store holding execution records (the only shared state).
        instance_id: The name this runtime claims threads under.
        run_flow: Runs one flow of a thread.
        settle_flow: Settles a finished flow.
        accepting: Whether new work may start (the runtime is open); default always.
        claim: Claims a thread for this runtime before each flow (default: the execution
            row's ``claimed_by``); several workers on PostgreSQL pass their thread lease, which
            has an expiry, a heartbeat and takeover (:mod:`sa_core.engine.leases`).
        release: Called when a thread's runner exits, with ``claim`` (gives the lease back);
            its ``settled`` argument says the runner ran a flow and settled it cleanly (no
            turn left owed, not cut off), so the lease may be kept a while for the next turn.
    """

    def __init__(
        self,
        store: Store,
        instance_id: str,
        run_flow: RunFlow,
        settle_flow: SettleFlow,
        accepting: Callable[[], bool] = lambda: True,
        claim: Callable[[str], Awaitable[bool]] | None = None,
        release: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.store = store
        self.instance_id = instance_id
        self._run_flow = run_flow
        self._settle_flow = settle_flow
        self._accepting = accepting
        self._claim = claim
        self._release = release
        self._closed = False
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._flows: dict[str, Flow] = {}
        self._kicked: set[str] = set()
        self._settling: set[str] = set()
        self._queued: set[str] = set()
        self._claimed: set[str] = set()
        self._empty: set[str] = set()
        self._continued: set[str] = set()
        self._settled_waiters: dict[str, asyncio.Future[None]] = {}
        self._interrupted: set[str] = set()
        self._initial: dict[str, list[Message]] = {}
        self._resume: dict[str, ResumePoint] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.awaited: set[str] = set()
        """Threads a blocking subagent call in this process waits on."""

    # -- starting work ------------------------------------------------------------------------

    def kick(
        self,
        thread_id: str,
        side: Side,
        *,
        initial: Message | None = None,
        resume: ResumePoint | None = None,
        claimed: bool = False,
        queue_empty: bool = False,
        waiting: bool = False,
    ) -> bool:
        """Run the thread on ``side`` (with a first message or from a resume point).

        A thread that already has a runner is noted to check for more work when its flow ends.

        Args:
            thread_id: The thread.
            side: The side that acts first.
            initial: The message the flow starts with.
            resume: The point a restart resumes the flow from.
            claimed: The caller claimed the thread's execution for this runtime in the
                transaction that owed the turn (the runner's first claim is skipped).
            queue_empty: That transaction also found the thread's queue empty (the flow's
                first drain is skipped unless an entry is queued meanwhile).
            waiting: The caller has just committed a queue entry for the thread (no await
                since) and knows it owes no turn (its last runner here settled, nothing owed
                since): the runner goes on as after its own settlement found work waiting.

        Returns:
            False when the runtime takes no new work (closed), else True.
        """
        if not self.accepts_work():
            return False
        if initial is not None:
            self._initial.setdefault(thread_id, []).append(initial)
        if resume is not None:
            self._resume.setdefault(thread_id, resume)
        if thread_id in self._tasks:
            self._kicked.add(thread_id)
            self._empty.discard(thread_id)
            if waiting and thread_id in self._settling:
                self._continued.add(thread_id)
            return True
        if claimed:
            self._claimed.add(thread_id)
        if queue_empty:
            self._empty.add(thread_id)
        if waiting:
            self._continued.add(thread_id)
        task = asyncio.create_task(
            self._drive(thread_id, side),
            name=f"sa-thread-{thread_id}",
            context=background_context(),
        )
        self._tasks[thread_id] = task
        task.add_done_callback(functools.partial(self._runner_done, thread_id))
        return True

    def accepts_work(self) -> bool:
        """Whether :meth:`kick` starts runners (the runtime is open and not closing)."""
        return not self._closed and self._accepting()

    def note_queued(self, thread_id: str, *, committed_here: bool = False) -> None:
        """Note a new queue entry: a running flow drains it before its next step.

        A runner settling its flow runs once more. With ``committed_here`` (the caller has just
        committed the entry, with no await since) it also knows that work waits, as when its
        settlement finds the entry: it reads neither the execution record nor the queue
        again. A note from another worker does not say that: the runner may have taken the
        entry in already.
        """
        self._empty.discard(thread_id)
        if thread_id in self._tasks:
            self._queued.add(thread_id)
            if thread_id in self._settling:  # the flow took its last step: run once more
                self._kicked.add(thread_id)
                if committed_here:
                    self._continued.add(thread_id)

    async def wait_settled(self, thread_id: str) -> None:
        """Wait while the thread's runner settles a flow (one commit), unless called by a runner.

        A message sent meanwhile then owes a turn of its own, in one commit, instead of being
        queued for the runner to read back, take in and store (several more).
        """
        if thread_id not in self._settling or _RUNNER.get() is not None:
            return
        waiter = self._settled_waiters.get(thread_id)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._settled_waiters[thread_id] = waiter
        await asyncio.shield(waiter)

    def _end_settling(self, thread_id: str) -> None:
        self._settling.discard(thread_id)
        waiter = self._settled_waiters.pop(thread_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def has_queued(self, thread_id: str) -> bool:
        """Whether entries were queued for the thread since its flow last drained the queue."""
        return thread_id in self._queued

    def take_queued(self, thread_id: str) -> bool:
        """Whether entries were queued for the thread since the last call (clears the note)."""
        if thread_id in self._queued:
            self._queued.discard(thread_id)
            return True
        return False

    def take_continued(self, thread_id: str) -> bool:
        """Whether the runner goes on after settling a flow of its own (clears the note).

        Nothing is owed then (the settlement said so) and work is known to be waiting (the
        settlement found the queue not empty); a runner going on because it was kicked meanwhile
        is not noted (the work it was kicked for may have been taken in already).
        """
        if thread_id in self._continued:
            self._continued.discard(thread_id)
            return True
        return False

    def take_known_empty(self, thread_id: str) -> bool:
        """Whether the queue was read empty when the turn was owed, nothing queued here since.

        Clears the note: it holds for the flow's first drain only.
        """
        if thread_id in self._empty:
            self._empty.discard(thread_id)
            return True
        return False

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a background task of the runtime (awaited by ``wait_idle``, cancelled on close)."""
        task = asyncio.create_task(coro, name=name, context=background_context())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- observing ----------------------------------------------------------------------------

    def is_running(self, thread_id: str) -> bool:
        """Whether the thread has a runner (a turn in flight or about to start)."""
        return thread_id in self._tasks

    def runner(self, thread_id: str) -> asyncio.Task[None] | None:
        """The thread's runner task, if any."""
        return self._tasks.get(thread_id)

    def current_thread(self) -> str | None:
        """The thread whose runner the caller runs in (its turn, tools, hooks), else ``None``.

        Tasks the runner starts are not the runner: they get ``None``.
        """
        thread_id = _RUNNER.get()
        if thread_id is None or self._tasks.get(thread_id) is not asyncio.current_task():
            return None
        return thread_id

    def flow(self, thread_id: str) -> Flow | None:
        """The flow the thread's runner is running, if any."""
        return self._flows.get(thread_id)

    def in_own_runner(self, thread_id: str) -> bool:
        """Whether the caller runs inside the thread's own runner (a tool, a hook)."""
        task = self._tasks.get(thread_id)
        return task is not None and task is asyncio.current_task()

    def pending(self) -> list[asyncio.Task[Any]]:
        """Every runner and background task."""
        return [*self._tasks.values(), *self._background]

    @property
    def busy(self) -> bool:
        """Whether any runner or background task exists."""
        return bool(self._tasks or self._background)

    def entries(self) -> int:
        """How many per-thread entries the scheduler holds (0 when every thread is idle)."""
        return sum(
            len(c)
            for c in (
                self._tasks,
                self._flows,
                self._kicked,
                self._settling,
                self._queued,
                self._claimed,
                self._empty,
                self._continued,
                self._interrupted,
                self._initial,
                self._resume,
                self._settled_waiters,
            )
        )

    # -- waiting and stopping -----------------------------------------------------------------

    async def wait(self, thread_id: str) -> None:
        """Wait until the thread has no runner (its work, and work kicked meanwhile, is done)."""
        while thread_id in self._tasks:
            task = self._tasks[thread_id]
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():
                    continue
                raise

    async def cancel(self, thread_id: str) -> None:
        """Cancel the thread's runner (not the caller's own) and wait until it unwound."""
        task = self._tasks.get(thread_id)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def interrupt(self, thread_id: str, *, cancel: bool = True) -> None:
        """End the thread's turn here the way a crash would: it resumes elsewhere.

        Several workers: the worker lost the thread's lease (or could lose it before renewing
        it). The runner unwinds without writing anything more (no stopped-turn records): the
        worker that takes the thread over resumes it from its last committed point.

        Args:
            thread_id: The thread.
            cancel: Cancel the runner (``False``: it is already unwinding, e.g. a refused
                commit).
        """
        task = self._tasks.get(thread_id)
        if task is None:
            return
        self._interrupted.add(thread_id)
        if cancel and task is not asyncio.current_task():
            task.cancel()

    def interrupted(self, thread_id: str) -> bool:
        """Whether the thread's runner is ending as a crash would (see :meth:`interrupt`)."""
        return thread_id in self._interrupted

    async def unwinding(self, thread_id: str) -> None:
        """Wait for a runner that is being cancelled (a stopped turn) to finish unwinding."""
        task = self._tasks.get(thread_id)
        if task is not None and task.cancelling() and task is not asyncio.current_task():
            await asyncio.wait([task])

    async def close(self) -> None:
        """Cancel every runner and background task; runners owe their work to the next start."""
        self._closed = True
        tasks = self.pending()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the runner ---------------------------------------------------------------------------

    async def _drive(self, thread_id: str, side: Side) -> None:
        from sa_core.engine.flow import side_for_role

        _RUNNER.set(thread_id)  # this task's own context
        settled = False
        try:
            while True:
                self._kicked.discard(thread_id)
                if thread_id in self._claimed:  # claimed with the owed turn (``send``)
                    self._claimed.discard(thread_id)
                elif not await self._claim_thread(thread_id):
                    return  # another runtime runs this thread
                initial = self._initial.pop(thread_id, [])
                resume = self._resume.pop(thread_id, None)
                flow = await self._run_flow(thread_id, side, initial, resume)
                if flow is None:
                    if self._release is None:
                        await self.store.release_execution(thread_id, self.instance_id)
                    return
                queue = flow.settled_queue  # settled with its last step's commit
                if queue is None:
                    async with self.store.transaction() as tx:
                        queue = await self.settle_in(flow, tx)
                if not queue and thread_id not in self._kicked:
                    settled = thread_id not in self._interrupted
                    return
                self._end_settling(thread_id)
                if queue:  # work known to wait (a kick alone may find it taken already)
                    self._continued.add(thread_id)
                side = side_for_role(queue[0].role) if queue else flow.current_side
        finally:
            self._runner_ended(thread_id, settled)

    async def settle_in(
        self, flow: Flow, tx: Transaction, reason: StopReason | None = None
    ) -> list[QueueEntry]:
        """Settle a runner's flow in ``tx``, and read the queue last (one commit).

        The runner's own settlement, or the commit of the flow's last step (``reason``: why
        the flow stops; the step's :meth:`Flow.run` has not returned it yet). A message posted
        meanwhile waits for that commit (:meth:`wait_settled`). Returns the queue: work that
        waits for the next flow.
        """
        thread_id = flow.state.thread_id
        self._settling.add(thread_id)
        await self._settle_flow(flow, reason)
        return await self.store.list_queue(thread_id, tx=tx, last=True)

    def _runner_ended(self, thread_id: str, settled: bool) -> None:
        """Forget a thread's runner and give its claim back (kept a while when ``settled``)."""
        if self._release is not None:
            self._release(thread_id, settled)
        self._end_settling(thread_id)
        for entries in (
            self._continued,
            self._kicked,
            self._queued,
            self._claimed,
            self._empty,
            self._interrupted,
        ):
            entries.discard(thread_id)
        for mapping in (self._flows, self._tasks, self._initial, self._resume):
            mapping.pop(thread_id, None)

    def _runner_done(self, thread_id: str, task: asyncio.Task[None]) -> None:
        """A runner cancelled before its first step never ran its ``finally``: end it here.

        Left registered, the thread would look busy forever: messages queued behind a runner
        that does not exist, its lease renewed by the heartbeat and never taken over.
        """
        if self._tasks.get(thread_id) is task:
            self._runner_ended(thread_id, settled=False)

    async def _claim_thread(self, thread_id: str) -> bool:
        if self._claim is not None:
            return await self._claim(thread_id)
        return await self.store.claim_execution(thread_id, self.instance_id)

    def attach(self, thread_id: str, flow: Flow) -> None:
        """Record the flow a runner runs (``state.execution``; stop from inside a tool)."""
        self._flows[thread_id] = flow
