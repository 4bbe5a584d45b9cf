"""Driving one A2A exchange to its end: send, follow the stream, resubscribe, poll.

:func:`send` sends the message (``message/stream`` when the agent streams, else
``message/send`` asking to return at once) and follows the task until it settles: it ends
(``completed``, ``failed``, ``canceled``, ``rejected``) or waits for our next message
(``input-required``, ``auth-required``). :func:`follow` picks up a task already sent (after a
dropped stream, or a restart): it resubscribes (``tasks/resubscribe``) while the agent streams,
at most :data:`RESUBSCRIBES` times in a row, and otherwise polls ``tasks/get`` with a backoff
from :data:`BACKOFF_FIRST` to :data:`BACKOFF_MAX` seconds. A refusal (HTTP 401/403) or a task
the remote no longer knows ends the exchange with a :class:`RemoteError`; network trouble
while following only changes how the task is followed. The caller bounds the whole exchange
with the definition's ``timeout``.

``progress`` is awaited after every item: the caller commits the task id as soon as it is
known and stores status notes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from sa_core.engine.remote.remote_client import RemoteError, where
from sa_core.engine.remote.remote_task import TaskView
from sa_core.remote_http import http_status

if TYPE_CHECKING:
    from sa_core.engine.remote.remote_client import Connection
    from sa_core.engine.remote.remote_record import Record

Progress = Callable[[TaskView], Awaitable[None]]
Wake = tuple[asyncio.Event, float] | None
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 10.0
RESUBSCRIBES = 3


def new_view() -> TaskView:
    """An empty :class:`TaskView` naming states with the SDK's ``TaskState``."""
    from a2a.types.a2a_pb2 import TaskState

    return TaskView(TaskState)


def request_for(
    record: Record,
    message_id: str,
    texts: Sequence[str],
    files: Sequence[tuple[str, str, bytes]],
    push: tuple[str, str] | None = None,
) -> Any:
    """The ``SendMessageRequest``: one text part per message, one raw part per file.

    Args:
        record: The child's record, ``sending``: its ``contextId``, and the task this message
            continues (one that waited for our input), if any.
        message_id: The A2A ``messageId`` (our first message's id).
        texts: The messages' texts, unchanged.
        files: ``(name, mime type, bytes)`` of their attachments.
        push: ``(URL, token)`` of a push-notification config to register with the task.
    """
    from a2a.types.a2a_pb2 import (
        Message,
        Part,
        Role,
        SendMessageRequest,
        TaskPushNotificationConfig,
    )

    parts = [Part(text=text) for text in texts if text]
    parts += [Part(raw=data, filename=name, media_type=mime) for name, mime, data in files]
    message = Message(
        role=Role.ROLE_USER,
        message_id=message_id,
        context_id=record.context_id or "",
        task_id=record.task_id or "",
        parts=parts or [Part(text="")],
    )
    request = SendMessageRequest(message=message)
    if push is not None:
        config = TaskPushNotificationConfig(url=push[0], token=push[1])
        request.configuration.task_push_notification_config.CopyFrom(config)
    return request


def fatal(exc: BaseException) -> bool:
    """Whether a failure while following a task ends the exchange (else: follow another way)."""
    from a2a.utils.errors import TaskNotFoundError

    if isinstance(exc, RemoteError | TaskNotFoundError):
        return True
    return http_status(exc) in (401, 403)


async def send(
    conn: Connection, request: Any, view: TaskView, progress: Progress, wake: Wake = None
) -> None:
    """Send the message and follow its task until it settles (see the module docstring).

    Raises:
        RemoteError: the message could not be sent, or the task could not be followed.
    """
    try:
        async for item in conn.client.send_message(request):
            view.take(item)
            await progress(view)
            if view.settled:
                return
    except Exception as exc:  # the remote's failure, said once for the parent
        if not view.task_id or fatal(exc):
            raise conn.failure(exc, "sending the message") from exc
    if not view.task_id:
        raise RemoteError(
            conn.scrub(f"{where(conn.remote)} answered with neither a task nor a reply.")
        )
    await follow(conn, view, progress, wake)


async def follow(conn: Connection, view: TaskView, progress: Progress, wake: Wake = None) -> None:
    """Follow a sent task until it settles: resubscribe while streaming, else poll.

    ``wake``: ``(event, seconds)`` when the task pushes notifications: between polls, wait
    for the event (set by a notification) for at most ``seconds`` instead of the backoff.

    Raises:
        RemoteError: a refusal, or a task the remote does not know.
    """
    delay = BACKOFF_FIRST
    resubscribes = RESUBSCRIBES if conn.streaming else 0
    while not view.settled:
        if resubscribes > 0:
            resubscribes -= 1
            if await _resubscribe(conn, view, progress):
                delay = BACKOFF_FIRST
                continue
            resubscribes = 0  # the remote cannot: poll from now on
        if await _poll(conn, view, progress):
            return
        if wake is not None:
            event, seconds = wake
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), seconds)
            event.clear()
            continue
        await asyncio.sleep(delay)
        delay = min(delay * 2, BACKOFF_MAX)


async def _resubscribe(conn: Connection, view: TaskView, progress: Progress) -> bool:
    """Follow the task's stream again; False when the remote would not (poll instead)."""
    from a2a.types.a2a_pb2 import SubscribeToTaskRequest

    try:
        async for item in conn.client.subscribe(SubscribeToTaskRequest(id=view.task_id)):
            view.take(item)
            await progress(view)
            if view.settled:
                return True
    except Exception as exc:  # network trouble, or a task that no longer streams
        if fatal(exc):
            raise conn.failure(exc, f"following task {view.task_id}") from exc
        return False
    return True


async def _poll(conn: Connection, view: TaskView, progress: Progress) -> bool:
    """One ``tasks/get``; whether the task has settled (a network failure: not yet)."""
    from a2a.types.a2a_pb2 import GetTaskRequest

    try:
        task = await conn.client.get_task(GetTaskRequest(id=view.task_id))
    except Exception as exc:  # network trouble is retried; a refusal ends the exchange
        if fatal(exc):
            raise conn.failure(exc, f"reading task {view.task_id}") from exc
        return False
    view.snapshot(task)
    await progress(view)
    return view.settled


async def cancel(conn: Connection, task_id: str) -> None:
    """``tasks/cancel``; a remote that cannot cancel (or is gone) is left as it is."""
    from a2a.types.a2a_pb2 import CancelTaskRequest

    try:
        await conn.client.cancel_task(CancelTaskRequest(id=task_id))
    except Exception:  # noqa: BLE001 - best effort: the child is stopped either way
        return


__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "RESUBSCRIBES", "cancel", "follow", "new_view", "send"]
