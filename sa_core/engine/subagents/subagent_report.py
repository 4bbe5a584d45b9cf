"""Reporting: how a child's result reaches its parent.

Three ways, all reading and writing the child's side of the protocol through
:class:`~sa_core.engine.childlink.ChildLink`:

* **A blocking call's result.** The call records itself as the child's ``waiter``
  (:func:`await_child`), waits for the child (:func:`collect`; on several workers
  :func:`sa_core.engine.subagents.child_wait.collect`) and gets the child's session outcome as its
  result (:func:`blocking_result`). With one runtime the child's settle may answer the call
  itself (:func:`settled_execution`), and the call then reads its result from the live row.
* **A notification.** A non-blocking child's settle queues its outcome on the parent as a
  silent message (:func:`on_flow_end`).
* **Status and notes.** ``session_status`` calls and ``state.set_status`` update the parent's
  registry entry (:func:`forward_status`, :func:`set_status`); ``state.notify_parent`` queues
  a note (:func:`notify_parent`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from sa_core.engine import owed
from sa_core.engine.childlink import (
    ATTACHMENTS_TEXT,
    NO_TERMINAL_TEXT,
    WAITING_REASONS,
    ChildLink,
    ChildOutcome,
    call_result,
    entry_status,
)
from sa_core.engine.delivery import delivery
from sa_core.engine.files import copy_attachments
from sa_core.engine.messages import inject
from sa_core.engine.oneshot import finishes
from sa_core.engine.subagents.child_wait import announce_settled
from sa_core.engine.subagents.child_wait import collect as collect_anywhere
from sa_core.engine.tools.approvals import wait_through_approvals
from sa_core.engine.tools.tools import argument_text
from sa_core.errors import NoParentThreadError
from sa_core.spec import SubagentToolConfig, ToolResult

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import SessionOutcome
    from sa_core.engine.flowview import SettlingFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import SessionToolBinding, ToolCall
    from sa_core.store import ThreadRow

RESULT_TEXT = "Subagent (reference: {ref}) has returned the following result:\n\n{result}"
FAILURE_TEXT = "Subagent (reference: {ref}) has reported a failure:\n\n{result}"
INITIATED_TEXT = "The subagent was initiated successfully. Reference: {ref}"
TERMINAL_TOOLS = ("session_stop", "session_fail")


# ---------------------------------------------------------------------------------------------
# A blocking call's result
# ---------------------------------------------------------------------------------------------


async def collect(
    kernel: Kernel, thread: ThreadRef, child_id: str, config: SubagentToolConfig
) -> ToolResult:
    """The tool result of a delivered call: wait for a blocking child, else "initiated"."""
    if not config.blocking:
        return ToolResult(
            status="success", result=INITIATED_TEXT.format(ref=child_id), subagent_id=child_id
        )
    if not kernel.placement.alone:  # the child may run on any worker: wait through the store
        return await collect_anywhere(kernel, thread.thread_id, thread.tool_call_id or "", child_id)
    kernel.scheduler.awaited.add(child_id)
    finished = False
    try:
        await owed.ensure_running(kernel, child_id)
        await kernel.scheduler.wait(child_id)
        await wait_through_approvals(kernel, child_id)
        finished = True
    finally:
        kernel.scheduler.awaited.discard(child_id)
        if not finished and not kernel.closing:  # stopped: the child reports as usual later
            await asyncio.shield(release_child(kernel, child_id))
    return await blocking_result(kernel, thread, child_id)


async def await_child(kernel: Kernel, child: ThreadRef, call_id: str) -> None:
    """Record the waiting call on a child and drop its previous session outcome.

    A run that is cancelled (stop, terminate) records no outcome; the waiter must then report
    that, not the result of the invocation before. While a waiter is recorded the child's
    outcome goes to that call only, never also as a notification (across restarts too).
    """
    before = child.row.execution
    execution = ChildLink.from_execution(before).awaited_by(call_id).to_execution(before)
    child.row.execution = execution
    await kernel.store.update_thread(child.thread_id, execution=execution)


async def release_child(kernel: Kernel, child_id: str, answered: bool = False) -> None:
    """Clear a child's recorded waiter: the wait ended, or (``answered``) its call got the result.

    An answered call stays recorded as ``answered`` so that the call, run again after a
    restart before its result was stored, re-attaches instead of messaging the child again.
    """
    row = kernel.threads.live_row(child_id) or await kernel.store.get_thread(child_id)
    if row is None:
        return
    link = ChildLink.from_execution(row.execution)
    if link.waiter is None:
        return
    execution = link.released(answered).to_execution(row.execution)
    row.execution = execution
    await kernel.store.update_thread(child_id, execution=execution)


async def blocking_result(kernel: Kernel, thread: ThreadRef, child_id: str) -> ToolResult:
    """The finished child's outcome as the call's result.

    One transaction: the reads, the copied attachments, the registry status and the call
    marked ``answered`` on the child. When the child's own settle already did those writes
    (see :func:`settled_execution`), the result is read from its live row with no transaction.
    """
    row = _answered_row(kernel, thread, child_id)
    if row is not None:
        return call_result(child_id, row, [])
    async with kernel.store.transaction():
        return await _blocking_result_in_tx(kernel, thread, child_id)


def _answered_row(kernel: Kernel, thread: ThreadRef, child_id: str) -> ThreadRow | None:
    """The child's live row when its settle already answered this call, else ``None``."""
    call_id = thread.tool_call_id
    row = kernel.threads.live_row(child_id) if kernel.placement.alone else None
    if row is None or call_id is None:
        return None
    link = ChildLink.from_execution(row.execution)
    if link.waiter is not None or link.answered != call_id:
        return None
    return row if not link.outcome_attachments() else None


async def _blocking_result_in_tx(kernel: Kernel, thread: ThreadRef, child_id: str) -> ToolResult:
    row = await kernel.store.get_thread(child_id)
    outcome = ChildLink.of(row).outcome
    refs = outcome.attachment_refs() if outcome is not None else []
    copied = await copy_attachments(kernel.store, child_id, refs, thread.thread_id)
    await kernel.threads.update_child(thread.thread_id, child_id, status=entry_status(row))
    await release_child(kernel, child_id, answered=True)
    return call_result(child_id, row, copied)


def _can_answer_here(kernel: Kernel, link: ChildLink) -> bool:
    """Whether a child's settle may answer its waiting blocking call itself.

    The settle then commits the registry status and the call marked ``answered`` with the
    child's outcome, and the parent reads its result from the live row with no transaction
    (see :func:`blocking_result`). Only for a single runtime (the parent waits in this
    process) and an outcome without attachments (the parent copies those, in
    :func:`blocking_result`'s transaction).
    """
    return kernel.placement.alone and not kernel.closing and not link.outcome_attachments()


# ---------------------------------------------------------------------------------------------
# Status and notes
# ---------------------------------------------------------------------------------------------


async def forward_status(
    flow: SettlingFlow, call: ToolCall, result: ToolResult, binding: SessionToolBinding
) -> None:
    """A ``session_status`` call updates the parent's registry status, ending nothing."""
    thread = flow.thread
    parent_id = thread.row.parent_id
    if parent_id is None:
        return
    status = None
    if binding.message_property:
        status = argument_text(call.arguments.get(binding.message_property))
    status = status or result.result or result.error or "running"
    await flow.kernel.threads.update_child(parent_id, thread.thread_id, status=status.strip())


async def set_status(kernel: Kernel, thread: ThreadRef, status: str) -> None:
    """``state.set_status``."""
    if not status.strip():
        raise ValueError("set_status needs a non-empty status.")
    parent_id = thread.row.parent_id
    if parent_id is None:
        raise NoParentThreadError(thread.thread_id, "set_status")
    await kernel.threads.update_child(parent_id, thread.thread_id, status=status.strip())


async def notify_parent(kernel: Kernel, thread: ThreadRef, content: str) -> None:
    """``state.notify_parent``: a silent message queued on the parent, tagged with this child."""
    if not content.strip():
        raise ValueError("notify_parent needs non-empty content.")
    if thread.row.parent_id is None:
        raise NoParentThreadError(thread.thread_id, "notify_parent")
    parent = await kernel.threads.parent(thread)
    if parent is None or parent.row.terminated is not None:
        return
    role = "assistant" if thread.row.properties.get("owner_side") == "b" else "user"
    await delivery.queue_message(
        kernel,
        parent,
        {
            "role": role,
            "content": content,
            "silent": True,
            "metadata": {"subagent_id": thread.thread_id, "subagent_event": "notification"},
        },
    )


# ---------------------------------------------------------------------------------------------
# A child's settle
# ---------------------------------------------------------------------------------------------


def _final_outcome(flow: SettlingFlow) -> SessionOutcome | None:
    """The flow's session outcome, with the text a failure without a terminal tool reports."""
    outcome = flow.outcome
    if outcome is not None and outcome.content is None and outcome.reason not in TERMINAL_TOOLS:
        outcome = dataclasses.replace(
            outcome, content=NO_TERMINAL_TEXT.format(reason=outcome.reason)
        )
    return outcome


def settled_execution(
    kernel: Kernel, thread: ThreadRef, flow: SettlingFlow, reason: str, execution: dict[str, Any]
) -> dict[str, Any]:
    """A child's execution entry as its flow settles: its outcome, and the call it answers.

    ``execution`` is the thread's entry with the settled turn counts and status; a thread
    without a parent keeps it as it is, a child gets the entry its settle writes (a new dict).
    The runtime's settle writes it in its one update of the thread's row, and then calls
    :func:`on_flow_end`.
    """
    if thread.row.parent_id is None:
        return execution
    final = _final_outcome(flow)
    outcome = (
        ChildOutcome(
            final.reason,
            final.failed,
            final.content,
            tuple(a.model_dump() for a in final.attachments),
        )
        if final is not None
        else None
    )
    link = ChildLink.from_execution(execution)
    settled = link.settled(outcome, reason, answer=False)
    answer = _answering(kernel, thread, reason, settled)
    if answer and link.waiter:
        settled = link.settled(outcome, reason, answer=True)  # answered in this write
    elif not kernel.placement.alone and link.waiter:
        # wakes the waiting call, on any worker, once this commits
        announce_settled(kernel, thread.thread_id)
    return settled.to_execution(execution)


def _answering(kernel: Kernel, thread: ThreadRef, reason: str, link: ChildLink) -> bool:
    """Whether a child's settle answers its waiting blocking call itself."""
    return (
        reason != "awaiting_approval"
        and thread.thread_id in kernel.scheduler.awaited
        and bool(link.waiter or link.answered)
        and _can_answer_here(kernel, link)
    )


async def on_flow_end(kernel: Kernel, thread: ThreadRef, flow: SettlingFlow, reason: str) -> None:
    """After a child's flow settled its row: the registry status, and the parent's report.

    The row's execution entry was shaped by :func:`settled_execution` and written before.
    """
    row = thread.row
    parent_id = row.parent_id
    if parent_id is None:
        return
    thread_id = thread.thread_id
    outcome = _final_outcome(flow)
    link = ChildLink.from_execution(row.execution)
    if reason == "awaiting_approval":  # parked, not finished: the parent keeps waiting
        await kernel.threads.update_child(parent_id, thread_id, status=reason)
        return
    if _answering(kernel, thread, reason, link):
        # answered in this settle (or in the settle of a flow before this one, while the
        # call still waits): the waiting call reads the outcome without another transaction
        await kernel.threads.update_child(parent_id, thread_id, status=entry_status(row))
        return
    if thread_id in kernel.scheduler.awaited or link.waiter:
        return  # a blocking call receives the outcome as its result
    entries = await kernel.store.list_children(parent_id)
    entry = next((e for e in entries if e.reference == thread_id), None)
    if entry is None:
        return
    finished = finishes(row, reason)  # a non-resumable child: terminated by this settle
    if row.terminated is not None and not finished:
        return
    if outcome is None:
        if reason == "aborted_by_user":  # stopped: not running any more, nothing to report
            await kernel.threads.update_child(parent_id, thread_id, status="idle")
            return
        if not entry.resumable and reason not in ("awaiting_human",):
            outcome_text, failed = NO_TERMINAL_TEXT.format(reason=reason), True
        else:
            await kernel.threads.update_child(parent_id, thread_id, status="idle")
            return
    else:
        outcome_text, failed = outcome.content or "", outcome.failed
    status = "terminated" if finished else ("failed" if failed else "idle")
    if outcome is not None and outcome.reason in WAITING_REASONS:
        status = outcome.reason  # it waits for the parent's answer (subagent_message)
    await kernel.threads.update_child(parent_id, thread_id, status=status)
    if entry.parent_communication == "explicit":
        return
    await _report(kernel, thread, outcome, outcome_text, failed)


async def _report(
    kernel: Kernel,
    thread: ThreadRef,
    outcome: SessionOutcome | None,
    outcome_text: str,
    failed: bool,
) -> None:
    """Queue a finished child's outcome on its parent, and note the report on the child."""
    parent = await kernel.threads.parent(thread)
    if parent is None or parent.row.terminated is not None:
        return
    copied = []
    if outcome is not None and outcome.attachments:
        copied = await copy_attachments(
            kernel.store, thread.thread_id, outcome.attachments, parent.thread_id
        )
    template = FAILURE_TEXT if failed else RESULT_TEXT
    text = template.format(ref=thread.thread_id, result=outcome_text)
    if copied:
        text += ATTACHMENTS_TEXT.format(paths="\n".join(r.path for r in copied))
    role = "assistant" if thread.row.properties.get("owner_side") == "b" else "user"
    await delivery.queue_message(
        kernel,
        parent,
        {
            "role": role,
            "content": text,
            "silent": True,
            "attachments": copied,
            "metadata": {
                "subagent_id": thread.thread_id,
                "subagent_event": "failure" if failed else "result",
            },
        },
    )
    await inject(
        kernel,
        thread,
        {
            "role": "system",
            "content": "Subagent forwarded "
            + ("failure details" if failed else "results")
            + " to parent thread.",
            "silent": True,
            "metadata": {"status_kind": "subagent_event"},
        },
    )


__all__ = [
    "INITIATED_TEXT",
    "await_child",
    "blocking_result",
    "collect",
    "forward_status",
    "notify_parent",
    "on_flow_end",
    "release_child",
    "set_status",
    "settled_execution",
]
