"""Running a thread: one flow from its start to its settlement, and resuming at start.

The scheduler's runner (:mod:`sa_core.engine.workers.scheduler`) calls :func:`run_flow` for each
flow of a thread and :func:`settle_flow` when it ends: the outcome, a parent's report and "nothing
owed" commit at once. :func:`resume_interrupted` starts, when the runtime starts, every flow a
stopped process left owed (:func:`sa_core.engine.owed.ensure_running` starts one thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.engine.frames import emit
from sa_core.engine.oneshot import termination_fields
from sa_core.engine.subagents.subagent_report import on_flow_end, settled_execution
from sa_core.engine.threads import ThreadRef
from sa_core.engine.tools import approvals
from sa_core.engine.turn.flow import Flow
from sa_core.spec import Side
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import StopReason
    from sa_core.engine.flowview import SettlingFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.spec import Message
    from sa_core.store.execution_record import ResumePoint
    from sa_core.store.rows import QueueEntry

FLOW_MARKER = "sa:flow"
"""Thread value older versions set while a flow ran (read once on start, then removed).

The engine now keeps a typed execution record per thread (``store.get_execution``)."""


async def run_flow(
    kernel: Kernel,
    thread_id: str,
    side: Side,
    initial: list[Message],
    resume: ResumePoint | None,
) -> Flow | None:
    """Run one flow of a thread (the scheduler's runner calls this); None: nothing to run."""
    continued = kernel.scheduler.take_continued(thread_id)  # nothing owed, work waits
    shared, history = kernel.threads.take_primed(thread_id)
    queued: list[QueueEntry] | None = None
    if shared is not None:  # read in the transaction that owed this turn (see ``delivery``)
        if shared.row.terminated is not None:
            return None
        thread = ThreadRef(shared)
    elif not initial and not continued and not kernel.placement.alone:
        # read under the lease just taken, never before it: a resume point read earlier
        # (a restart's owed turns) may be one another worker has finished meanwhile. The
        # row, registry, record, queue and history come back from one query
        start = await kernel.store.read_runner_start(thread_id)
        if start is None or start.row.terminated is not None:
            return None
        owed = start.execution.owed_resume if start.execution is not None else None
        if owed is not None:
            # kicked for queued work on a thread another worker left mid-turn: finish that
            # turn from its resume point first (the queue is drained on the way)
            resume, side = owed, owed.side
        elif start.queue or await has_approvals(kernel, thread_id):
            resume = None  # the turn it owed is done: only the queued work is left
            history, queued = start.history, start.queue
        else:
            return None  # another worker did the work meanwhile
        thread = await kernel.threads.ref_for(start.row, children=start.children)
    else:
        version, row, children = await kernel.threads.read(thread_id)
        if row is None or row.terminated is not None:
            return None
        thread = await kernel.threads.ref_for(row, read_at=version, children=children)
    flow = Flow(
        kernel,
        thread,
        side,
        initial_messages=initial,
        resume=resume,
        durable=True,
        history=history,
        queued=queued,
    )
    kernel.scheduler.attach(thread_id, flow)
    try:
        flow.end_reason = await flow.run()
    except BaseException:
        kernel.threads.forget_current(thread_id)  # a write of the step may have rolled back
        raise
    if flow.end_reason == "step_error":
        kernel.threads.forget_current(thread_id)
    return flow


async def settle_flow(kernel: Kernel, flow: SettlingFlow, reason: StopReason | None = None) -> None:
    """Record a finished flow: the outcome, a parent's report and "nothing owed", at once.

    ``reason`` is why the flow stopped when it is settled before :meth:`Flow.run` returns
    (in the commit of its last step); by default the flow's ``end_reason``.

    The runner's thread handle then lets go of the flow (``state.execution`` is ``None``
    outside a turn): a handle kept elsewhere, say by a provider's request log, no longer
    holds the turn's messages in a flow-handle reference cycle that only the garbage
    collector's full passes free.
    """
    why: str = reason or flow.end_reason or "idle"
    thread_id = flow.thread.thread_id
    try:
        async with kernel.store.transaction() as tx:
            await write_settlement(kernel, flow, why)
            await kernel.store.finish_execution(thread_id, why, tx=tx)
    except BaseException:
        kernel.threads.forget_current(thread_id)  # the live row went ahead of the store
        raise
    if why == approvals.CLIENT_STATUS:  # watchers (the served protocols) answer with the calls
        emit(kernel, flow.thread, approvals.CLIENT_STATUS, {"thread_id": thread_id})
    flow.thread.execution = None
    if not kernel.placement.alone:  # the lease stays a while: so does the handle
        kernel.threads.keep(thread_id)


async def write_settlement(kernel: Kernel, flow: SettlingFlow, reason: str) -> None:
    """Write a flow's end on its thread's row (and a child's outcome, in the same update)."""
    thread = flow.thread
    row = thread.row
    execution = dict(row.execution)
    execution.update(
        turns=dict(flow.turns),
        side=flow.current_side,
        last_stop_reason=reason,
        status="awaiting_human"
        if reason in ("awaiting_human", "stop_on_response", "stop_tool")
        else (reason if reason in approvals.PARKED else "idle"),
    )
    # a child's outcome (and the call it answers) goes in the same update
    row.execution = settled_execution(kernel, thread, flow, reason, execution)
    row.updated_at = now = now_us()
    # a non-resumable child that reported is terminated in the same write
    ended = termination_fields(row, reason, now)
    await kernel.store.set_thread_fields(row.id, execution=row.execution, updated_at=now, **ended)
    await on_flow_end(kernel, thread, flow, reason)


async def has_approvals(kernel: Kernel, thread_id: str) -> bool:
    """Whether a thread kicked without a message or queued entries has approvals to act on.

    Several workers are told about the same queued work; the one that gets the lease after
    another already took the entries in must not run a turn on nothing new.
    """
    return await kernel.store.get_value(thread_id, approvals.KEY) is not None


async def resume_interrupted(kernel: Kernel) -> None:
    """Resume every owed or interrupted flow from the last point it committed."""
    store, scheduler = kernel.store, kernel.scheduler
    for thread_id, record in (await store.owed_executions()).items():
        row = await store.get_thread(thread_id)
        if row is None or row.terminated is not None or row.stopped or record.resume is None:
            await store.finish_execution(thread_id, record.stop_reason)
            continue
        scheduler.kick(thread_id, record.resume.side, resume=record.resume)
    for thread_id, marker in (await store.threads_with_value(FLOW_MARKER)).items():
        await store.delete_value(thread_id, FLOW_MARKER)  # written by older versions
        row = await store.get_thread(thread_id)
        if row is None or row.terminated is not None or row.stopped:
            continue
        marker = marker if isinstance(marker, dict) else {}
        side: Side = "b" if marker.get("side") == "b" else "a"
        for message_id in marker.get("messages", []):
            message = await store.get_message(thread_id, message_id)
            if message is not None:
                scheduler.kick(thread_id, side, initial=message)
        scheduler.kick(thread_id, side)
    for thread_id in await store.threads_with_queue():
        row = await store.get_thread(thread_id)
        if row is not None and row.terminated is None:
            scheduler.kick(thread_id, "a")
