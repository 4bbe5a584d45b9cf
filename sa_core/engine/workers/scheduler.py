"""The scheduler: which thread runs, one runner task per thread, waiting, stopping, cancelling.

A thread has at most one runner task in a process. The runner claims the thread's execution
row in the store (``claimed_by``) before each flow, so that the store, not this process's
memory, says who runs a thread: a thread claimed by another live runtime is left to it. The
claim is released when the flow settles (``finish_execution``). Which process claims a thread,
and how, is the kernel's :class:`~sa_core.engine.placement.Placement`: alone on a database, the
execution record's claim; several workers on one PostgreSQL database, their thread lease
(:mod:`sa_core.engine.workers.leases`). The runner runs and settles flows with
:mod:`sa_core.engine.turn.running`.

A thread has one :class:`Runner` record, only while it has work: when its runner exits, the
record is dropped, so the scheduler keeps nothing per thread ever seen.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sa_core.engine.flowtypes import side_for_role
from sa_core.engine.priority import background_context
from sa_core.engine.turn.running import run_flow, settle_flow
from sa_core.spec import Side

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import StopReason
    from sa_core.engine.flowview import SettlingFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.turn.flow import Flow
    from sa_core.spec import Message
    from sa_core.store import Store, Transaction
    from sa_core.store.execution_record import ResumePoint
    from sa_core.store.rows import QueueEntry


_RUNNER: ContextVar[str | None] = ContextVar("sa_runner_thread", default=None)
"""The thread whose runner task this is (set in the runner's own context)."""


@dataclass(slots=True)
class Runner:
    """What the scheduler knows of one thread with work (one record per thread).

    Attributes:
        task: The runner task.
        flow: The flow it runs, once started.
        initial: Messages the next flow starts with.
        resume: The point the next flow resumes from.
        kicked: Work was kicked while it ran: check for more when its flow ends.
        settling: Its flow is settling (one commit).
        queued: Entries were queued since its flow last drained the queue.
        claimed: The transaction owing its turn claimed the thread (skip the first claim).
        empty: That transaction found the queue empty (skip the first drain).
        continued: It goes on after settling a flow of its own, work known to wait.
        interrupted: It is ending as a crash would (see :meth:`Scheduler.interrupt`).
        settled_waiter: Set when its settlement ends (messages sent meanwhile wait on it).
    """

    task: asyncio.Task[None] | None = None
    flow: Flow | None = None
    initial: list[Message] = field(default_factory=list)
    resume: ResumePoint | None = None
    kicked: bool = False
    settling: bool = False
    queued: bool = False
    claimed: bool = False
    empty: bool = False
    continued: bool = False
    interrupted: bool = False
    settled_waiter: asyncio.Future[None] | None = None


class Scheduler:
    """Runner tasks per thread, and the background tasks of a runtime.

    Args:
        store: The store holding execution records (the only shared state).

    The kernel is bound once built (:meth:`bind`): the runner runs flows on it and claims
    threads through its placement.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.kernel: Kernel | None = None
        self._closed = False
        self._runners: dict[str, Runner] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.awaited: set[str] = set()
        """Threads a blocking subagent call in this process waits on."""

    def bind(self, kernel: Kernel) -> None:
        """Run flows on ``kernel`` (called once, by the kernel as it is built)."""
        self.kernel = kernel

    def _kernel(self) -> Kernel:
        kernel = self.kernel
        if kernel is None:
            raise RuntimeError("the scheduler runs nothing before the runtime starts")
        return kernel

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
        runner = self._runners.get(thread_id)
        if runner is not None:
            if initial is not None:
                runner.initial.append(initial)
            if resume is not None and runner.resume is None:
                runner.resume = resume
            runner.kicked = True
            runner.empty = False
            if waiting and runner.settling:
                runner.continued = True
            return True
        runner = Runner(
            initial=[initial] if initial is not None else [],
            resume=resume,
            claimed=claimed,
            empty=queue_empty,
            continued=waiting,
        )
        self._runners[thread_id] = runner
        task = asyncio.create_task(
            self._drive(thread_id, side),
            name=f"sa-thread-{thread_id}",
            context=background_context(),
        )
        runner.task = task
        task.add_done_callback(functools.partial(self._runner_done, thread_id))
        return True

    def accepts_work(self) -> bool:
        """Whether :meth:`kick` starts runners (the runtime is open and not closing)."""
        return not self._closed and self.kernel is not None and self.kernel.is_open

    def note_queued(self, thread_id: str, *, committed_here: bool = False) -> None:
        """Note a new queue entry: a running flow drains it before its next step.

        A runner settling its flow runs once more. With ``committed_here`` (the caller has just
        committed the entry, with no await since) it also knows that work waits, as when its
        settlement finds the entry: it reads neither the execution record nor the queue
        again. A note from another worker does not say that: the runner may have taken the
        entry in already.
        """
        runner = self._runners.get(thread_id)
        if runner is None:
            return
        runner.empty = False
        runner.queued = True
        if runner.settling:  # the flow took its last step: run once more
            runner.kicked = True
            if committed_here:
                runner.continued = True

    async def wait_settled(self, thread_id: str) -> None:
        """Wait while the thread's runner settles a flow (one commit), unless called by a runner.

        A message sent meanwhile then owes a turn of its own, in one commit, instead of being
        queued for the runner to read back, take in and store (several more).
        """
        runner = self._runners.get(thread_id)
        if runner is None or not runner.settling or _RUNNER.get() is not None:
            return
        waiter = runner.settled_waiter
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            runner.settled_waiter = waiter
        await asyncio.shield(waiter)

    @staticmethod
    def _end_settling(runner: Runner) -> None:
        runner.settling = False
        waiter, runner.settled_waiter = runner.settled_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def has_queued(self, thread_id: str) -> bool:
        """Whether entries were queued for the thread since its flow last drained the queue."""
        runner = self._runners.get(thread_id)
        return runner is not None and runner.queued

    def take_queued(self, thread_id: str) -> bool:
        """Whether entries were queued for the thread since the last call (clears the note)."""
        runner = self._runners.get(thread_id)
        if runner is not None and runner.queued:
            runner.queued = False
            return True
        return False

    def take_continued(self, thread_id: str) -> bool:
        """Whether the runner goes on after settling a flow of its own (clears the note).

        Nothing is owed then (the settlement said so) and work is known to be waiting (the
        settlement found the queue not empty); a runner going on because it was kicked meanwhile
        is not noted (the work it was kicked for may have been taken in already).
        """
        runner = self._runners.get(thread_id)
        if runner is not None and runner.continued:
            runner.continued = False
            return True
        return False

    def take_known_empty(self, thread_id: str) -> bool:
        """Whether the queue was read empty when the turn was owed, nothing queued here since.

        Clears the note: it holds for the flow's first drain only.
        """
        runner = self._runners.get(thread_id)
        if runner is not None and runner.empty:
            runner.empty = False
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
        return thread_id in self._runners

    def runner(self, thread_id: str) -> asyncio.Task[None] | None:
        """The thread's runner task, if any."""
        runner = self._runners.get(thread_id)
        return runner.task if runner is not None else None

    def current_thread(self) -> str | None:
        """The thread whose runner the caller runs in (its turn, tools, hooks), else ``None``.

        Tasks the runner starts are not the runner: they get ``None``.
        """
        thread_id = _RUNNER.get()
        if thread_id is None or self.runner(thread_id) is not asyncio.current_task():
            return None
        return thread_id

    def flow(self, thread_id: str) -> Flow | None:
        """The flow the thread's runner is running, if any."""
        runner = self._runners.get(thread_id)
        return runner.flow if runner is not None else None

    def pending(self) -> list[asyncio.Task[Any]]:
        """Every runner and background task."""
        runners = [r.task for r in self._runners.values() if r.task is not None]
        return [*runners, *self._background]

    @property
    def busy(self) -> bool:
        """Whether any runner or background task exists."""
        return bool(self._runners or self._background)

    def entries(self) -> int:
        """How many per-thread records the scheduler holds (0 when every thread is idle)."""
        return len(self._runners)

    # -- waiting and stopping -----------------------------------------------------------------

    async def wait(self, thread_id: str) -> None:
        """Wait until the thread has no runner (its work, and work kicked meanwhile, is done)."""
        while (task := self.runner(thread_id)) is not None:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():
                    continue
                raise

    async def cancel(self, thread_id: str) -> None:
        """Cancel the thread's runner (not the caller's own) and wait until it unwound."""
        task = self.runner(thread_id)
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
        runner = self._runners.get(thread_id)
        if runner is None or runner.task is None:
            return
        runner.interrupted = True
        if cancel and runner.task is not asyncio.current_task():
            runner.task.cancel()

    def interrupted(self, thread_id: str) -> bool:
        """Whether the thread's runner is ending as a crash would (see :meth:`interrupt`)."""
        runner = self._runners.get(thread_id)
        return runner is not None and runner.interrupted

    async def unwinding(self, thread_id: str) -> None:
        """Wait for a runner that is being cancelled (a stopped turn) to finish unwinding."""
        task = self.runner(thread_id)
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
        _RUNNER.set(thread_id)  # this task's own context
        kernel = self.kernel
        if kernel is None:  # kicked only once the runtime has started
            raise RuntimeError("the scheduler runs nothing before the runtime starts")
        runner = self._runners[thread_id]
        settled = False
        try:
            while True:
                runner.kicked = False
                if runner.claimed:  # claimed with the owed turn (``delivery``)
                    runner.claimed = False
                elif not await kernel.placement.claim(thread_id):
                    return  # another runtime runs this thread
                initial, runner.initial = runner.initial, []
                resume, runner.resume = runner.resume, None
                flow = await run_flow(kernel, thread_id, side, initial, resume)
                if flow is None:
                    await kernel.placement.give_back(thread_id)
                    return
                queue = flow.settled_queue  # settled with its last step's commit
                if queue is None:
                    async with self.store.transaction() as tx:
                        queue = await self.settle_and_read_queue(flow, tx)
                if not queue and not runner.kicked:
                    settled = not runner.interrupted
                    return
                self._end_settling(runner)
                if queue:  # work known to wait (a kick alone may find it taken already)
                    runner.continued = True
                side = side_for_role(queue[0].role) if queue else flow.current_side
        finally:
            self._runner_ended(thread_id, settled)

    async def settle_and_read_queue(
        self, flow: SettlingFlow, tx: Transaction, reason: StopReason | None = None
    ) -> list[QueueEntry]:
        """Settle a runner's flow in ``tx``, and read the queue last (one commit).

        The runner's own settlement, or the commit of the flow's last step (``reason``: why
        the flow stops; the step's :meth:`Flow.run` has not returned it yet). A message posted
        meanwhile waits for that commit (:meth:`wait_settled`). Returns the queue: work that
        waits for the next flow.
        """
        thread_id = flow.thread.thread_id
        runner = self._runners.get(thread_id)
        if runner is not None:
            runner.settling = True
        await settle_flow(self._kernel(), flow, reason)
        return await self.store.list_queue(thread_id, tx=tx, last=True)

    def _runner_ended(self, thread_id: str, settled: bool) -> None:
        """Forget a thread's runner and give its claim back (kept a while when ``settled``)."""
        if self.kernel is not None:
            self.kernel.placement.release(thread_id, settled)
        runner = self._runners.pop(thread_id, None)
        if runner is not None:
            self._end_settling(runner)

    def _runner_done(self, thread_id: str, task: asyncio.Task[None]) -> None:
        """A runner cancelled before its first step never ran its ``finally``: end it here.

        Left registered, the thread would look busy forever: messages queued behind a runner
        that does not exist, its lease renewed by the heartbeat and never taken over.
        """
        if self.runner(thread_id) is task:
            self._runner_ended(thread_id, settled=False)

    def attach(self, thread_id: str, flow: Flow) -> None:
        """Record the flow a runner runs (``state.execution``; stop from inside a tool)."""
        runner = self._runners.get(thread_id)
        if runner is not None:
            runner.flow = flow
