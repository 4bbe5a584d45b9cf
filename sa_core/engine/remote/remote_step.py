"""A remote child's step: one A2A exchange where a local child would call its model.

The flow of a remote child (a thread whose agent is a pack's remote agent) runs this instead
of :func:`sa_core.engine.turn.step.run_step` (:class:`sa_core.engine.turn.flow.Flow` asks the
scope). Everything around it is the subagent machinery of local children: the parent's messages
reach the child as ``user`` messages (its first one owed with the child, later ones through
the durable queue), and the child's session outcome reaches the parent when the flow settles
(a blocking call's result, or one notification), exactly once.

One step, in order:

1. the child's ``user`` messages since its last answer are the exchange's input (their texts
   unchanged, their attachments as file parts);
2. the record (:mod:`sa_core.engine.remote.remote_record`) is committed as ``sending``, the message
   goes out and the task is followed (:mod:`sa_core.engine.remote.remote_exchange`) within the
   definition's ``timeout``; the task's id is committed as soon as the remote names it (the
   parent's registry then shows the remote state, ``submitted`` or ``working``), and
   each status text it sends while working is stored as a note (an ``assistant`` message
   marked ``metadata.a2a.kind == "status"``) (and shown as the
   child's status in the parent's registry);
3. the answer commits in one transaction: the artifacts' files stored in the child's files,
   an ``assistant`` message with the text (data parts as structured output, files attached),
   the record, a ``llm_call`` log when the remote reported usage, and (when nothing else
   waits) the flow's settlement with the parent's report.

After a restart the flow resumes here: a task already acknowledged is followed, not sent again
(:meth:`~sa_core.engine.remote.remote_record.Record.follows`), and an answer committed before the
settlement is reported from the stored message (:func:`replay`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sa_core import telemetry
from sa_core.engine.messages import create_message, new_message
from sa_core.engine.remote.remote_answer import A2A, commit, replay
from sa_core.engine.remote.remote_cancel import cancel_task
from sa_core.engine.remote.remote_client import RemoteError, connect, where
from sa_core.engine.remote.remote_exchange import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    Progress,
    follow,
    new_view,
    request_for,
    send,
)
from sa_core.engine.remote.remote_files import fetch_linked
from sa_core.engine.remote.remote_push import (
    forget,
    new_token,
    push_poll_seconds,
    push_target,
    waker,
)
from sa_core.engine.remote.remote_record import SENDING, Record, load, save
from sa_core.engine.secrets import redact
from sa_core.store.clock import now_us

if TYPE_CHECKING:
    from sa_core.engine.flowtypes import StepResult
    from sa_core.engine.flowview import RemoteFlow
    from sa_core.engine.remote.remote_client import Connection
    from sa_core.engine.remote.remote_task import Answer, TaskView
    from sa_core.spec import Message, RemoteAgentDefinition

STATUS_LENGTH = 200
"""A status note shown in the parent's registry is cut to this many characters."""


@dataclass(slots=True)
class Exchange:
    """One exchange's working state: the record as committed, and what the remote said."""

    record: Record
    view: TaskView
    secrets: list[str] = field(default_factory=list)
    error: RemoteError | None = None
    answer: Answer | None = None
    """The completed answer with its linked files downloaded (None: read it from the view)."""
    push_token: str | None = None
    """The push-notification token this exchange registers (when the server has a public URL)."""


def unanswered(messages: list[Message]) -> list[Message]:
    """The child's messages since its last answer that the remote has not answered."""
    start = 0
    for index, message in enumerate(messages):
        if (message.metadata or {}).get(A2A, {}).get("kind") == "answer":
            start = index + 1
    return [
        m
        for m in messages[start:]
        if m.role == "user" and not m.silent and A2A not in (m.metadata or {})
    ]


async def run_remote_step(flow: RemoteFlow, remote: RemoteAgentDefinition) -> StepResult:
    """Run the exchange for the child's unanswered messages (see the module docstring)."""
    inputs = unanswered(flow.messages)
    if not inputs:
        return await replay(flow, remote)
    kernel, thread = flow.kernel, flow.thread
    exchange = Exchange(await load(kernel, thread.thread_id), new_view())
    async with telemetry.remote_call(thread, remote.name, remote.card_url) as span:
        try:
            await _run(flow, remote, exchange, inputs)
        except asyncio.CancelledError:
            task_id = exchange.view.task_id or exchange.record.task_id
            if (
                task_id
                and not kernel.closing
                and not kernel.scheduler.interrupted(thread.thread_id)
            ):
                await asyncio.shield(cancel_task(kernel, thread, remote, task_id))  # a stop
            raise
        view = exchange.view
        error = exchange.error.code if exchange.error is not None else None
        telemetry.annotate(span, {"a2a.task_id": view.task_id, "a2a.state": view.state}, error)
    return await commit(
        flow, remote, exchange.record, exchange.view, exchange.error, exchange.secrets,
        exchange.answer,
    )  # fmt: skip


async def _run(
    flow: RemoteFlow, remote: RemoteAgentDefinition, exchange: Exchange, inputs: list[Message]
) -> None:
    """Send (or, after a restart, follow) within the timeout; failures land in ``exchange``."""
    kernel, thread = flow.kernel, flow.thread
    ids = [m.id for m in inputs]
    record = exchange.record
    if record.follows(ids):
        exchange.view.task_id = record.task_id or ""
        exchange.view.context_id = record.context_id or ""
    else:
        started = record.started_at if record.resends(ids) else now_us()
        task = record.task_id if record.resends(ids) else record.waiting_task
        push_hash = None
        if push_target(kernel, thread.thread_id) is not None:
            exchange.push_token, push_hash = new_token()
        record = record.replace(
            state=SENDING,
            message_ids=tuple(ids),
            started_at=started,
            task_id=task,
            push_hash=push_hash,
        )
        await save(kernel, thread.thread_id, record)
        exchange.record = record
    left = record.started_at / 1e6 + remote.timeout - time.time()
    try:
        async with asyncio.timeout(max(left, 0.001)):
            await _connected(flow, remote, exchange, inputs)
    except TimeoutError:
        exchange.error = RemoteError(
            f"{where(remote)} did not finish within {remote.timeout:g} seconds (its timeout).",
            "remote_timeout",
        )
        task_id = exchange.view.task_id or exchange.record.task_id
        if task_id:
            await cancel_task(kernel, thread, remote, task_id)
    except RemoteError as exc:
        exchange.error = exc


async def _connected(
    flow: RemoteFlow, remote: RemoteAgentDefinition, exchange: Exchange, inputs: list[Message]
) -> None:
    """Send the inputs, or follow their task; an unreachable agent is retried once it has one.

    Before the remote acknowledged the message, an unreachable agent fails the exchange at
    once; a task it acknowledged is followed again with a backoff (the caller's timeout
    bounds it), so a remote briefly away, say while this server restarts, loses nothing.
    """
    kernel, thread = flow.kernel, flow.thread

    async def progress(view: TaskView) -> None:
        await _progress(flow, exchange, view)

    delay = BACKOFF_FIRST
    try:
        while True:
            try:
                async with connect(kernel, thread, remote) as conn:
                    await _talk(flow, conn, exchange, inputs, progress)
                return
            except RemoteError as exc:
                if exc.code != "remote_unreachable" or not exchange.view.task_id:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)
    finally:
        forget(kernel, thread.thread_id)


async def _talk(
    flow: RemoteFlow,
    conn: Connection,
    exchange: Exchange,
    inputs: list[Message],
    progress: Progress,
) -> None:
    """Over one connection: send the inputs (registering push when the agent pushes) or follow."""
    kernel, thread = flow.kernel, flow.thread
    exchange.secrets = conn.secrets
    pushes = bool(conn.card.capabilities.push_notifications) and exchange.record.push_hash
    wake = (waker(kernel, thread.thread_id), push_poll_seconds()) if pushes else None
    if exchange.view.task_id:
        await follow(conn, exchange.view, progress, wake)
    else:
        target = push_target(kernel, thread.thread_id)
        push = (target, exchange.push_token) if pushes and target and exchange.push_token else None
        files = await _files(flow, inputs)
        texts = [m.content or "" for m in inputs]
        request = request_for(exchange.record, inputs[0].id, texts, files, push)
        await send(conn, request, exchange.view, progress, wake if push else None)
    if exchange.view.state == "completed":
        exchange.answer = await fetch_linked(conn, exchange.view.answer())


async def _files(flow: RemoteFlow, inputs: list[Message]) -> list[tuple[str, str, bytes]]:
    """``(name, mime type, bytes)`` of the inputs' attachments, read from the child's files."""
    found: list[tuple[str, str, bytes]] = []
    for message in inputs:
        for ref in message.attachments or []:
            data = await flow.kernel.store.read_file(flow.thread.thread_id, ref.path)
            if data is not None:
                name = ref.name or ref.path.rsplit("/", 1)[-1]
                found.append((name, ref.mime_type or "application/octet-stream", data))
    return found


async def _progress(flow: RemoteFlow, exchange: Exchange, view: TaskView) -> None:
    """After each item: commit the task's id once known, store status texts as notes."""
    kernel, thread = flow.kernel, flow.thread
    record = exchange.record
    parent_id = thread.row.parent_id
    if view.task_id and (view.task_id != record.task_id or record.state == SENDING):
        record = record.replace(
            task_id=view.task_id, context_id=view.context_id or record.context_id, state=view.state
        )
        async with kernel.store.transaction():  # acknowledged: followed, never sent again
            await save(kernel, thread.thread_id, record)
            if parent_id is not None and not view.settled:
                await kernel.threads.update_child(parent_id, thread.thread_id, status=view.state)
        exchange.record = record
    notes = view.take_notes()
    if view.settled:
        return  # the answer carries the last status
    for text in notes:
        text = redact(text, [*exchange.secrets, *kernel.secret_values(thread)])
        meta: dict[str, Any] = {A2A: {"kind": "status", "state": view.state}}
        note = new_message(thread.thread_id, "assistant", text, metadata=meta)
        flow.remember(await create_message(kernel, thread, note))
        if parent_id is not None:
            status = text if len(text) <= STATUS_LENGTH else text[: STATUS_LENGTH - 1] + "…"
            await kernel.threads.update_child(parent_id, thread.thread_id, status=status)


__all__ = ["A2A", "run_remote_step", "unanswered"]
