"""A blocking subagent call waiting for its child on whichever worker runs it.

With one runtime (SQLite) a blocking call waits for the child's runner in this process
(:func:`sa_core.engine.subagents.subagent_report.collect`). With several workers on one PostgreSQL
database the child's turns may run on any worker (the one that takes its lease), and move to another
when a worker dies, so the waiting call cannot watch a runner: it watches the child's row in
the store instead.

* **The wait.** The call recorded itself as the child's ``waiter`` (``row.execution``) in the
  transaction that handed the child its message. A child's settle, on any worker, writes its
  session outcome (``last_outcome``, ``last_stop_reason``) in the same row and, while a waiter
  is recorded, queues no notification to the parent. The waiting call re-reads the child's
  row whenever it is woken, and is done once the row shows the settle (or a stop, a
  termination, a deletion). It is woken by the child's settle: in the same process directly,
  on another worker by a ``settled`` note on the workers' ``sa_work`` channel, sent once the
  settle has committed (:func:`announce_settled`). A note can be lost (its sender killed
  right after the commit), so the wait also re-reads the row every
  ``Placement.reread_seconds()``.
* **Exactly once.** The call's result is the child's outcome, answered in one transaction
  (:func:`answer_call`): the attachments copied to the parent, the registry status and the
  child's ``waiter`` turned into ``answered``, computed from the row read in that
  transaction (never from this worker's live handle, which may predate the child's settle on
  another worker). That transaction is the parent runner's, fenced by the parent's lease.
  The result itself is stored as the call's tool message; a restart (or takeover) before that
  runs the call again, which finds its child by the call id and answers from the same row.
  The recorded waiter is never cleared by a wait that ends because this worker lost the
  parent (shutdown, lost lease): the worker resuming the parent waits again.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import TYPE_CHECKING, Any

from sa_core.engine import owed
from sa_core.engine.childlink import ChildLink, call_result, entry_status
from sa_core.engine.files import copy_attachments
from sa_core.spec import ToolResult

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.store import ThreadRow

_WAITS: weakref.WeakKeyDictionary[Kernel, dict[str, asyncio.Event]] = weakref.WeakKeyDictionary()
"""Per kernel: child thread id -> the event its waiting blocking call sleeps on."""

SETTLED_REASONS_NOT_DONE = ("awaiting_approval",)
"""Settles that park the child without finishing the call (it settles again later)."""


def wake(kernel: Kernel, child_id: str) -> None:
    """Wake the call in this process waiting for ``child_id``, if any (a settle was seen)."""
    event = _WAITS.get(kernel, {}).get(child_id)
    if event is not None:
        event.set()


def announce_settled(kernel: Kernel, child_id: str) -> None:
    """Tell the call waiting for this child, on any worker, that its settle committed.

    Call inside the settle's transaction (several workers only); the wake-ups go out once it
    commits, never after a rollback.
    """

    def announce() -> None:
        wake(kernel, child_id)
        kernel.placement.notify_settled(child_id)

    kernel.store.after_commit(announce)


def waits_for(row: ThreadRow | None, call_id: str, stopped_idle: bool) -> bool:
    """Whether a blocking call still waits for the child whose row is ``row``.

    Args:
        row: The child's row as the store holds it (``None``: deleted).
        call_id: The waiting tool call's id.
        stopped_idle: The child is stopped and owes no turn (its stop writes no outcome).

    Returns:
        False once the call can be answered: the child settled this call's session, was
        stopped, terminated or deleted, or the call was answered or released already.
    """
    if row is None or row.terminated is not None:
        return False
    link = ChildLink.from_execution(row.execution)
    if link.answered == call_id or link.waiter != call_id:
        return False
    reason = link.stop_reason
    if reason is not None and reason not in SETTLED_REASONS_NOT_DONE:
        return False
    return not stopped_idle


async def _stopped_idle(kernel: Kernel, row: ThreadRow | None) -> bool:
    if row is None or not row.stopped:
        return False
    record = await kernel.store.get_execution(row.id)
    return record is None or record.status == "idle"


def settled_here(kernel: Kernel, child_id: str, call_id: str) -> bool:
    """Whether this process's live handle shows the child's settle of this call's session.

    The handle records the waiter when the call hands the child its message, and a settle
    in this process writes the outcome in it: the waiter with a stop reason after it is a
    settle of this process (never a stale view). A settle that then failed to commit is
    caught by :func:`answer_call`, which reads the row again.
    """
    live = kernel.threads.live_row(child_id)
    if live is None:
        return False
    link = ChildLink.from_execution(live.execution)
    if link.waiter != call_id:
        return False
    reason = link.stop_reason
    return reason is not None and reason not in SETTLED_REASONS_NOT_DONE


async def wait_for_child(kernel: Kernel, child_id: str, call_id: str) -> None:
    """Wait until the child's row shows the session this call waits for ended (any worker).

    A child whose runner is in this process is waited for first without reading anything
    (as with one runtime); its settle, seen on the live handle, ends the wait.
    """
    if kernel.scheduler.is_running(child_id):
        await kernel.scheduler.wait(child_id)
        if settled_here(kernel, child_id, call_id):
            return
    waits = _WAITS.setdefault(kernel, {})
    event = waits.setdefault(child_id, asyncio.Event())
    try:
        while True:
            event.clear()  # before the read: a settle committed after it sets the event again
            row = await kernel.store.get_thread(child_id)
            if not waits_for(row, call_id, await _stopped_idle(kernel, row)):
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), kernel.placement.reread_seconds())
    finally:
        if waits.get(child_id) is event:
            del waits[child_id]


async def collect(kernel: Kernel, thread_id: str, call_id: str, child_id: str) -> ToolResult:
    """A blocking call's result from its child, wherever the child runs (several workers).

    Starts the child here if it owes work and no worker runs it (its lease decides), waits for
    its session to end (:func:`wait_for_child`) and answers the call (:func:`answer_call`).
    A wait cut short by a user's stop of the parent releases the child (it then reports as a
    non-blocking child would); one cut short because this worker is closing or lost the
    parent's lease keeps the waiter recorded for the worker that resumes the parent.
    """
    kernel.scheduler.awaited.add(child_id)
    result = None
    try:
        await owed.ensure_running(kernel, child_id)
        while result is None:
            await wait_for_child(kernel, child_id, call_id)
            result = await answer_call(kernel, thread_id, call_id, child_id)
    finally:
        kernel.scheduler.awaited.discard(child_id)
        if result is None and not kernel.closing and not kernel.scheduler.interrupted(thread_id):
            await asyncio.shield(release(kernel, child_id, call_id))
    return result


async def release(kernel: Kernel, child_id: str, call_id: str) -> None:
    """Clear the child's waiter (the call stopped waiting), read from the store, not a handle."""
    store = kernel.store
    async with store.transaction():
        row = await store.get_thread(child_id)
        link = ChildLink.of(row)
        if row is None or link.waiter != call_id:
            return
        execution = link.released().to_execution(row.execution)
        await store.update_thread(child_id, execution=execution)
    _adopt_execution(kernel, child_id, execution)


async def answer_call(
    kernel: Kernel, thread_id: str, call_id: str, child_id: str
) -> ToolResult | None:
    """Answer the blocking call from its child's row: one transaction, then the result.

    The reads, the attachments copied to the parent, the registry status and the call marked
    ``answered`` on the child commit together. A call answered before (run again after a
    restart that came before its tool message was stored) gets the same result again.

    Returns:
        The call's result, or ``None`` (nothing written) when the row read shows the call
        still waits: a settle seen on the live handle did not commit.
    """
    store = kernel.store
    execution: dict[str, Any] | None = None
    async with store.transaction():
        row = await store.get_thread(child_id)
        if call_id and waits_for(row, call_id, await _stopped_idle(kernel, row)):
            return None
        link = ChildLink.of(row)
        refs = link.outcome.attachment_refs() if link.outcome is not None else []
        copied = await copy_attachments(store, child_id, refs, thread_id)
        await kernel.threads.update_child(thread_id, child_id, status=entry_status(row))
        if row is not None and call_id and link.waiter == call_id:
            execution = link.released(answered=True).to_execution(row.execution)
            await store.update_thread(child_id, execution=execution)
    if execution is not None:
        _adopt_execution(kernel, child_id, execution)
    return call_result(child_id, row, copied)


def _adopt_execution(kernel: Kernel, child_id: str, execution: dict[str, Any]) -> None:
    """Make this process's live handle of the child (if any) show the committed entry."""
    live = kernel.threads.live_row(child_id)
    if live is not None:
        live.execution = execution


__all__ = [
    "announce_settled",
    "answer_call",
    "collect",
    "release",
    "settled_here",
    "wait_for_child",
    "waits_for",
    "wake",
]
