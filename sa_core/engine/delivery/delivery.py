"""Delivery: a message or queue entry reaches a thread, and the turn it owes starts.

``state.send_message`` commits the message and the turn it is owed in one transaction (or its
queue entry, while a turn runs) and starts the thread's runner (:func:`start_turn`);
``state.queue_message`` queues an entry and wakes an idle thread. Stopping and terminating a
thread and setting its variables live here too: each writes the thread's row and its live
handle together (:mod:`sa_core.engine.threads`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from sa_core.engine.files import save_attachment
from sa_core.engine.flowtypes import side_for_role
from sa_core.engine.messages import announce_created, new_id, new_message, prepare_message
from sa_core.engine.owed import ensure_running
from sa_core.engine.placement import Admission
from sa_core.engine.remote.remote_cancel import cancel_outstanding, remote_children
from sa_core.engine.threads import ThreadRef
from sa_core.errors import ThreadNotFoundError, ThreadTerminatedError
from sa_core.spec import AttachmentRef, QueueMessageInput, Side, ToolAttachment
from sa_core.store.clock import now_us
from sa_core.store.conflicts import ThreadChanged
from sa_core.store.execution_record import ExecutionRecord, ResumePoint

if TYPE_CHECKING:
    from sa_core.engine.events import QueuedFrame
    from sa_core.engine.kernel import Kernel
    from sa_core.spec import Message

Role = Literal["user", "assistant"]
RUNNING = Admission(busy=True)
"""A message to a thread whose runner runs here: it queues."""


async def thread_for_message(kernel: Kernel, thread_id: str) -> ThreadRef:
    """The thread a message is about to be sent on (the server's hot path).

    A live handle the placement says serves (SQLite: known to match the database; several
    workers: this worker holds the thread's lease, and the message's commit checks the row) is
    not read first; otherwise the thread is read.

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    shared = kernel.threads.get(thread_id)
    if shared is not None and kernel.placement.handle_serves(thread_id):
        return ThreadRef(shared)
    return await open_thread(kernel, thread_id)


async def open_thread(kernel: Kernel, thread_id: str) -> ThreadRef:
    """A handle of a stored thread.

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    thread = await kernel.threads.open(thread_id)
    if thread is None:
        raise ThreadNotFoundError(thread_id)
    return thread


async def attachment_refs(
    kernel: Kernel,
    thread: ThreadRef,
    attachments: Sequence[ToolAttachment | AttachmentRef | Mapping[str, Any]],
) -> list[AttachmentRef]:
    """Store new (base64) attachments and pass existing references through."""
    refs: list[AttachmentRef] = []
    for item in attachments:
        if isinstance(item, AttachmentRef):
            refs.append(item)
        elif isinstance(item, ToolAttachment) or (isinstance(item, Mapping) and "data" in item):
            refs.append(await save_attachment(kernel.store, thread.thread_id, item))
        else:
            refs.append(AttachmentRef.model_validate(item))
    return refs


async def send(
    kernel: Kernel,
    thread: ThreadRef,
    content: str,
    role: Role,
    attachments: Sequence[Any],
    silent: bool,
    wait: bool,
    *,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """Send a message on a thread (``state.send_message``); ``metadata`` goes on it.

    Returns once the message and the turn it is owed are committed (one transaction), or
    its queue entry is, while a turn runs; with ``wait``, once the thread is idle again.

    When the placement is shared, the commit also checks that the thread's row is as ``thread``
    holds it (a handle from :func:`thread_for_message` is not read first); when it is not,
    nothing was written: the row is read again and the message sent on it.
    """
    refs = await attachment_refs(kernel, thread, attachments)
    prepared: dict[str, Message] = {}
    verify = not kernel.placement.alone
    while True:
        try:
            message = await deliver(
                kernel, thread, Delivery(content, role, refs, silent, metadata), verify, prepared
            )
            break
        except ThreadChanged:
            thread = await open_thread(kernel, thread.thread_id)
            if thread.row.terminated is not None:
                raise ThreadTerminatedError(thread.thread_id, thread.row.terminated) from None
            verify = False  # just read: as any read, it may race a change
    if wait:
        await kernel.scheduler.wait(thread.thread_id)
    return message


class Delivery:
    """One message to deliver: its content, role, attachments, silence and metadata."""

    __slots__ = ("content", "metadata", "refs", "role", "silent")

    def __init__(
        self,
        content: str,
        role: Role,
        refs: list[AttachmentRef],
        silent: bool,
        metadata: dict[str, Any] | None,
    ) -> None:
        self.content = content
        self.role = role
        self.refs = refs
        self.silent = silent
        self.metadata = metadata

    def message(self, thread_id: str, message_id: str | None = None) -> Message:
        """The message as stored (``message_id``: the id its queue entry carries)."""
        extra = {"id": message_id} if message_id is not None else {}
        return new_message(
            thread_id,
            self.role,
            self.content,
            silent=self.silent,
            attachments=self.refs or None,
            metadata=self.metadata,
            **extra,
        )


async def deliver(
    kernel: Kernel,
    thread: ThreadRef,
    item: Delivery,
    verify: bool,
    prepared: dict[str, Message],
) -> Message:
    """Commit a message (or its queue entry) and start the turn it owes; see :func:`send`.

    Args:
        kernel: The kernel.
        thread: The thread.
        item: The message.
        verify: Check in the commit that the row is as ``thread`` holds it
            (:class:`~sa_core.store.conflicts.ThreadChanged` when not).
        prepared: The message as ``before_create_message`` shaped it, kept across
            attempts (the hooks run once).
    """
    thread_id = thread.thread_id
    store, scheduler = kernel.store, kernel.scheduler
    if thread.row.stopped:
        thread.row.stopped = False
        thread.row.updated_at = now = now_us()
        await store.update_thread(thread_id, stopped=False, updated_at=now)
    # a stopped turn still unwinding drains nothing more, so start after it
    await scheduler.unwinding(thread_id)
    # a runner settling its last turn: wait for its commit rather than queue behind it
    await scheduler.wait_settled(thread_id)
    if scheduler.is_running(thread_id):
        admission = RUNNING
    else:  # the placement says where: queue for another worker, or take the thread here
        admission = await kernel.placement.admit(thread_id)
    if admission.busy:
        return await _queue_while_busy(kernel, thread, item, verify, admission)
    return await _owe_turn(kernel, thread, item, verify, prepared)


async def _queue_while_busy(
    kernel: Kernel, thread: ThreadRef, item: Delivery, verify: bool, admission: Admission
) -> Message:
    """Queue the message for the thread's runner (here or on the worker holding it)."""
    thread_id = thread.thread_id
    store, scheduler, placement = kernel.store, kernel.scheduler, kernel.placement
    message_id = new_id()
    entry = QueueMessageInput(
        role=item.role,
        content=item.content,
        attachments=item.refs,
        silent=item.silent,
        metadata={**(item.metadata or {}), "message_id": message_id},
    )
    async with store.transaction() as tx:
        if verify:
            await store.expect_thread_unchanged(thread_id, thread.row.updated_at, tx=tx)
        await store.enqueue(thread_id, entry, tx=tx)
    scheduler.note_queued(thread_id, committed_here=True)
    if not scheduler.is_running(thread_id):  # no runner, or it ended meanwhile
        side = side_for_role(item.role)
        if placement.alone:
            start_turn(kernel, thread_id, side)  # a runner drains the entry
        else:
            placement.notify_work(thread_id, side, admission.holder)  # another may run it
            if placement.settled(thread_id):
                # its runner here settled meanwhile (nothing owed) and kept the lease
                scheduler.kick(thread_id, side, waiting=True)
            elif not admission.elsewhere:  # a turn a dead worker left owed resumes here first
                await ensure_running(kernel, thread_id)
            # else the lease holder runs it when notified (the reapers, if it died)
    return item.message(thread_id, message_id)


async def _owe_turn(
    kernel: Kernel, thread: ThreadRef, item: Delivery, verify: bool, prepared: dict[str, Message]
) -> Message:
    """Commit the message with the turn it owes (and the claim), then start the runner."""
    thread_id = thread.thread_id
    store, threads = kernel.store, kernel.threads
    message = prepared.get("message") or await prepare_message(
        kernel, thread, item.message(thread_id)
    )
    prepared["message"] = message
    side = side_for_role(item.role)
    # acknowledged only once the message and the turn it is owed commit together; the same
    # transaction claims the thread for this runtime and reads what the runner needs (thread
    # row, registry, queue), so the turn starts without more round trips
    try:
        async with store.transaction() as tx:
            if verify:  # in the same statement as the writes (PostgreSQL)
                await store.expect_thread_unchanged(thread_id, thread.row.updated_at, tx=tx)
            await store.insert_messages([message], tx=tx)
            owed = owed_record(thread, message, side)
            if not kernel.scheduler.accepts_work():
                claimed = False
                await store.save_execution(thread_id, owed, tx=tx)
            elif not kernel.placement.alone:  # the thread's lease, taken above, is the claim
                claimed = True
                await store.save_execution(thread_id, owed, tx=tx)
            else:  # the owed turn and this runtime's claim, in one statement
                claimed = await store.owe_execution(thread_id, owed, kernel.instance_id, tx=tx)
            # the runner needs the live row and registry as committed: re-read them unless the
            # live handle is known current (read earlier with nothing committed since); the
            # reads go with the writes, in one statement (PostgreSQL)
            history: list[Message] | None = None
            if claimed and thread_id in threads and not threads.is_current(thread_id):
                start = await store.read_turn_start(thread_id, tx=tx, written=[message])
                fresh = start is not None and threads.adopt(thread_id, start.row, start.children)
                queued = start is not None and bool(start.queue)
                history = start.history if start is not None else None
            else:
                # the queue, which nothing here writes, may go with the writes
                queued = claimed and bool(await store.list_queue(thread_id, tx=tx, unwritten=True))
                fresh = claimed and thread_id in threads
            queue_empty = fresh and not queued
    except BaseException:
        threads.forget_current(thread_id)  # a row adopted in a rolled-back transaction
        raise
    await announce_created(kernel, thread, [message])
    start_turn(
        kernel,
        thread_id,
        side,
        initial=message,
        claimed=claimed,
        queue_empty=queue_empty,
        fresh=fresh,
        history=history,
    )
    return message


def start_turn(
    kernel: Kernel,
    thread_id: str,
    side: Side,
    *,
    initial: Message | None = None,
    claimed: bool = False,
    queue_empty: bool = False,
    fresh: bool = False,
    history: list[Message] | None = None,
) -> bool:
    """Start the thread's runner on work just committed; returns whether it started.

    Args:
        kernel: The kernel.
        thread_id: The thread.
        side: The side whose turn it is.
        initial: The message that owes the turn, already stored.
        claimed: The committing transaction claimed the thread for this runtime.
        queue_empty: That transaction also found the thread's queue empty.
        fresh: The thread's live handle (row, registry) was written or re-read in that
            transaction, so the runner uses it without reading it back.
        history: The thread's history as that transaction committed it, read with it: the
            turn's first step uses it instead of loading it (with ``fresh`` only).
    """
    scheduler = kernel.scheduler
    new_runner = not scheduler.is_running(thread_id)
    started = scheduler.kick(
        thread_id, side, initial=initial, claimed=claimed, queue_empty=queue_empty
    )
    if started and fresh:  # a runner going on may have written since: no history for it
        kernel.threads.prime(thread_id, history if new_runner else None)
    return started


def owed_record(thread: ThreadRef, message: Message, side: Side) -> ExecutionRecord:
    """The execution record of a thread that owes a turn starting at ``message``."""
    turns = thread.row.execution.get("turns") or {}
    point = ResumePoint(
        since=message.created_at,
        side=side,
        turns={"a": int(turns.get("a", 0)), "b": int(turns.get("b", 0))},
    )
    return ExecutionRecord(status="owed", resume=point)


async def queue_message(
    kernel: Kernel, thread: ThreadRef, message: QueueMessageInput | Mapping[str, Any]
) -> str:
    """``state.queue_message``: validate a message and queue it on an active thread.

    Raises:
        ThreadTerminatedError: the thread is terminated.
    """
    terminated = thread.shared.row.terminated
    if terminated is not None:
        raise ThreadTerminatedError(thread.thread_id, terminated)
    return await enqueue(kernel, thread, QueueMessageInput.model_validate(message))


async def enqueue(kernel: Kernel, thread: ThreadRef, data: QueueMessageInput) -> str:
    """Queue a message on a thread and wake it (``state.queue_message``)."""
    refs = await attachment_refs(kernel, thread, data.attachments)
    entry = data.model_copy(update={"attachments": refs})
    thread_id = thread.thread_id
    store, scheduler = kernel.store, kernel.scheduler
    claimed = fresh = False
    if scheduler.is_running(thread_id):
        queue_id = await store.enqueue(thread_id, entry)
    else:
        # an idle thread: the entry, the claim and the runner's reads in one transaction
        scheduler.note_queued(thread_id)  # no first drain may be skipped from here on
        async with store.transaction() as tx:
            queue_id = await store.enqueue(thread_id, entry, tx=tx)
            # several workers: the runner claims through the thread's lease instead
            claimed = (
                kernel.placement.alone
                and scheduler.accepts_work()
                and await store.claim_execution(thread_id, kernel.instance_id, tx=tx)
            )
            fresh = claimed and await kernel.threads.refresh(thread_id, tx)
    frame: QueuedFrame = {
        "type": "queued",
        "queue_id": queue_id,
        "role": data.role,
        "silent": data.silent,
    }
    kernel.events.publish(thread_id, frame)
    if scheduler.is_running(thread_id):
        scheduler.note_queued(thread_id)
    else:
        side = side_for_role(data.role)
        start_turn(kernel, thread_id, side, claimed=claimed, fresh=fresh)
        kernel.placement.notify_work(thread_id, side)  # it may run on another worker
    return queue_id


async def stop(kernel: Kernel, thread_id: str) -> None:
    """Stop the thread's turn (``state.stop``); the thread stays usable."""
    scheduler, store, placement = kernel.scheduler, kernel.store, kernel.placement
    # flag and cancel before the first await, so that a message sent meanwhile sees the
    # stop (and clears it) and waits for the aborted turn instead of queueing behind it
    shared = kernel.threads.get(thread_id)
    if shared is not None:
        shared.row.stopped = True
    task = scheduler.runner(thread_id)
    if task is not None and task is asyncio.current_task():
        # called from the thread's own turn (a tool, a hook): it cannot wait for itself to
        # be cancelled, so the turn ends after the current step instead
        flow = scheduler.flow(thread_id)
        if flow is not None:
            flow.stop("aborted_by_user")
        task = None
    elif task is not None:
        task.cancel()
    await store.update_thread(thread_id, stopped=True)
    if task is None:
        placement.notify_stop(thread_id)  # its turn may run on another worker
    if task is not None:
        await asyncio.gather(task, return_exceptions=True)
        row = shared.row if shared is not None else await store.get_thread(thread_id)
        if (
            row is not None
            and row.parent_id is not None
            and row.terminated is None
            and thread_id not in scheduler.awaited  # the waiter settles the status
        ):
            await kernel.threads.update_child(row.parent_id, thread_id, status="idle")
    if not scheduler.is_running(thread_id) and (
        task is not None or await placement.may_finish(thread_id)
    ):  # a message sent meanwhile owes a turn; a turn on another worker records its end
        await store.finish_execution(thread_id, "aborted_by_user")
    for child_id in await remote_children(kernel, thread_id):  # their remote tasks stop too
        await stop(kernel, child_id)
        await cancel_outstanding(kernel, child_id)


async def terminate(kernel: Kernel, thread: ThreadRef) -> None:
    """Terminate a thread for good (``state.terminate``)."""
    row = thread.row
    if row.terminated is not None:
        return
    terminated = now_us()
    row.terminated = terminated
    row.stopped = True
    await kernel.store.update_thread(thread.thread_id, terminated=terminated, stopped=True)
    if not kernel.scheduler.is_running(thread.thread_id):
        kernel.placement.notify_stop(thread.thread_id)  # its turn may run on another worker
    await kernel.scheduler.cancel(thread.thread_id)  # never the caller's own runner
    await cancel_outstanding(kernel, thread.thread_id)  # a remote task waiting for input
    await kernel.store.finish_execution(thread.thread_id, "aborted_by_user")
    if row.parent_id is not None:
        await kernel.threads.update_child(row.parent_id, thread.thread_id, status="terminated")
