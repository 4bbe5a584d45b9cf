"""A new child thread's first turn, owed in the transaction that creates the child.

A subagent call used to queue the child's first message and let the child's runner drain it:
one more write transaction (the drain) and the queue's claim and reads per delegation. A child
created a moment ago has no runner, no queue and no history, so its first message is stored
as a message straight away, with the turn it is owed (an ``owed`` execution record claimed by
this runtime), in the caller's transaction: the child, its registry entry, its first message
and (blocking) the waiting call's id commit together, as before. The runner starts after the
commit with that message, without re-reading the child's row or registry.

Several workers (leases) keep the queue path: there the thread's lease decides which worker
runs the child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from sa_core.engine.delivery import delivery
from sa_core.engine.flowtypes import side_for_role
from sa_core.engine.messages import create_messages, new_message
from sa_core.engine.tools import approvals
from sa_core.store.execution_record import ExecutionRecord, ResumePoint

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import AttachmentRef, Message


def can_owe_directly(kernel: Kernel, child: ThreadRef) -> bool:
    """Whether a just-created child's first turn can be owed in its creation transaction.

    True for a single runtime taking work, and a ``dual_ai`` child (both sides are models, so
    no human turn is counted when the message is drained).
    """
    return (
        kernel.placement.alone
        and kernel.scheduler.accepts_work()
        and not kernel.scheduler.is_running(child.thread_id)
        and kernel.agent_of(child).type == "dual_ai"
    )


async def owe_first_turn(
    kernel: Kernel,
    child: ThreadRef,
    role: Literal["user", "assistant"],
    content: str,
    attachments: list[AttachmentRef],
) -> Message:
    """Store the child's first message and the turn it is owed, claimed by this runtime.

    Call inside the open creation transaction. The message looks as a drained queue entry
    did (``metadata.queued``). Start the runner with :func:`start_child` once it commits.

    Returns:
        The stored message.
    """
    store = kernel.store
    message = new_message(
        child.thread_id,
        role,
        content,
        metadata={"queued": True},
        attachments=list(attachments) or None,
    )
    async with store.transaction() as tx:  # joins the creation transaction
        [stored] = await create_messages(kernel, child, [message], tx=tx)
        turns = child.row.execution.get("turns") or {}
        point = ResumePoint(
            since=stored.created_at,
            side=side_for_role(role),
            turns={"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))},
        )
        # owed and claimed in one update (nobody else knows of the child yet)
        record = ExecutionRecord(status="owed", resume=point)
        await store.owe_execution(child.thread_id, record, kernel.instance_id, tx=tx)
    return stored


def start_child(kernel: Kernel, child_id: str, first: Message) -> None:
    """Start a child's runner on its committed first message (see :func:`owe_first_turn`).

    The child's live handle was written in this process a moment ago, so the runner uses it
    as it is; the queue is known to be empty and the claim is already held.
    """
    approvals.mark_no_pending(kernel, child_id)  # a new thread has no approval requests
    delivery.start_turn(
        kernel,
        child_id,
        side_for_role(first.role),
        initial=first,
        claimed=True,
        queue_empty=True,
        fresh=True,  # the runner reads nothing back (see delivery.start_turn)
    )
