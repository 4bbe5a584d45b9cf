"""Draining the thread's durable queue into a thread's top-level flow, before each step.

Queued entries become the thread's messages in the transaction that removes them from the
queue and moves the resume point past them; an entry queued by ``state.run_agent`` makes its
agent the thread's owner instead, and one carrying client tool results records them for the
parked turn to go on with (:mod:`sa_core.engine.turn.clienttools`). The first queued role picks the
side that acts next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sa_core.engine.flowtypes import side_for_role
from sa_core.engine.messages import announce_created, new_message, prepare_message
from sa_core.engine.subagents.runagent import run_agent_request, take_run_agent
from sa_core.engine.turn import clienttools
from sa_core.spec import AttachmentRef, Message
from sa_core.store.conflicts import QueueChanged

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import Side
    from sa_core.store import Transaction
    from sa_core.store.execution_record import ResumePoint
    from sa_core.store.rows import QueueEntry


class DrainingFlow(Protocol):
    """What the drain reads and changes of a flow (:class:`sa_core.engine.turn.flow.Flow`).

    A protocol so that this module stays out of the turn loop's import cycle; the flow's
    step state is the turn modules' own, so these members are settable.
    """

    kernel: Kernel
    thread: ThreadRef
    current_side: Side
    step_count: int
    stopped: bool
    turns: dict[Side, int]
    messages: list[Message]
    queued_entries: list[QueueEntry] | None
    context: dict[str, Any]

    def remember(self, message: Message) -> None:
        """Add a message created during this flow to the live history."""
        ...

    def read_turn(self, messages: Sequence[Message]) -> None:
        """Take the turn's options from its user message."""
        ...

    def resume_point(self, step_message_id: str | None = None) -> ResumePoint:
        """Where the flow stands now."""
        ...

    async def save_point(self, point: ResumePoint, *, tx: Transaction | None = None) -> None:
        """Store ``point`` as the thread's resume point (a durable flow only)."""
        ...


async def drain_queue(flow: DrainingFlow) -> None:
    """Move queued entries into the thread.

    Every queue write in this process flags the thread, so after the flow's first drain an
    unflagged thread is known to be empty; so is it at the first drain when the transaction
    that owed the turn read the queue empty (``Scheduler.take_known_empty``).
    """
    kernel = flow.kernel
    scheduler = kernel.scheduler
    known, flow.queued_entries = flow.queued_entries, None
    if not scheduler.take_queued(flow.thread.thread_id) and (
        flow.step_count or scheduler.take_known_empty(flow.thread.thread_id)
    ):
        return
    # consumed exactly once: the entries leave the queue in the transaction that stores
    # them as messages (ids taken from the entries) and moves the resume point past them.
    # Read under the lease, they are removed by id with the writes: one statement, nothing
    # read back. One deleted meanwhile undoes that; the queue is then drained as it is.
    if known and await drain_entries(flow, known):
        return
    await drain_entries(flow, None)


async def drain_entries(flow: DrainingFlow, known: list[QueueEntry] | None) -> bool:
    """Store queue entries as the thread's messages; returns whether any were drained.

    ``known``: the entries to remove by id (:meth:`Store.drain_entries`); ``None``: take
    whatever is queued. Their frames go out once the messages are committed.
    """
    kernel = flow.kernel
    kept = (len(flow.messages), dict(flow.turns), flow.current_side, flow.stopped)
    row = flow.thread.row
    owner = (row.agent_id, row.package)  # a run_agent entry may change it
    try:
        async with kernel.store.transaction() as tx:
            if known is None:
                entries = await kernel.store.drain_queue(flow.thread.thread_id, tx=tx)
                if not entries:
                    return False
            else:
                entries = known
                await kernel.store.drain_entries(flow.thread.thread_id, entries, tx=tx)
            stored = await store_entries(flow, entries, tx)
    except QueueChanged:  # (``known`` only) nothing of the transaction stayed
        del flow.messages[kept[0] :]
        flow.turns, flow.current_side, flow.stopped = kept[1], kept[2], kept[3]
        row.agent_id, row.package = owner
        return False
    await announce_created(flow.kernel, flow.thread, stored)
    return True


async def store_entries(
    flow: DrainingFlow, entries: list[QueueEntry], tx: Transaction
) -> list[Message]:
    """Insert drained entries as messages in ``tx`` and move the resume point past them.

    An entry queued by ``state.run_agent`` is no message: it makes its agent the owner; nor
    is one carrying client tool results: they become their calls' decisions.
    """
    messages = []
    for entry in entries:
        request = run_agent_request(entry.metadata)
        if request is not None:
            await take_run_agent(flow, request, tx)
            continue
        if clienttools.results_of(entry.metadata) is not None:
            metadata = entry.metadata or {}
            await clienttools.take_results(flow.kernel, flow.thread.thread_id, metadata, tx)
            continue
        metadata = dict(entry.metadata or {})
        metadata.setdefault("queued", True)
        message_id = metadata.pop("message_id", None) or entry.id
        refs = [AttachmentRef.model_validate(a) for a in entry.attachments]
        message = new_message(
            flow.thread.thread_id,
            entry.role,
            entry.content,
            id=message_id,
            silent=entry.silent,
            metadata=metadata,
            attachments=refs or None,
            subagent_id=metadata.get("subagent_id"),
        )
        messages.append(await prepare_message(flow.kernel, flow.thread, message))
    await flow.kernel.store.insert_messages(messages, tx=tx)
    for message in messages:
        flow.remember(message)
        if message.role == "user":
            flow.read_turn([message])
    flow.current_side = side_for_role(entries[0].role)
    flow.stopped = False
    await flow.save_point(flow.resume_point(), tx=tx)
    return messages
