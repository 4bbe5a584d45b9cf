"""The message queue of a thread: list what waits for the next step, cancel an entry."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller, delete, get
from litestar.params import FromPath

from sa_core.server.context import RuntimeDep, ThreadDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base


class QueueEntryOut(Base, kw_only=True):
    """A message waiting for the thread's next step."""

    id: str
    role: Literal["user", "assistant"]
    content: str
    silent: bool
    attachments: list[dict[str, Any]]
    created_at: int


class QueueOut(Base, kw_only=True):
    """``GET threads/{id}/queue``."""

    queue: list[QueueEntryOut]


class QueueController(Controller):
    """The queue of one thread."""

    path = "/threads/{thread_id:str}/queue"

    @get("/", responses=errors(404), summary="List queued messages")
    async def list_queue(self, thread: ThreadDep, runtime: RuntimeDep) -> QueueOut:
        """Messages queued while a turn ran, oldest first; they enter the next step."""
        entries = await runtime.store.list_queue(thread.thread_id)
        return QueueOut(
            queue=[
                QueueEntryOut(
                    id=entry.id,
                    role="assistant" if entry.role == "assistant" else "user",
                    content=entry.content,
                    silent=entry.silent,
                    attachments=entry.attachments,
                    created_at=entry.created_at,
                )
                for entry in entries
            ]
        )

    @delete("/{queue_id:str}", responses=errors(404), summary="Cancel a queued message")
    async def cancel(self, thread: ThreadDep, runtime: RuntimeDep, queue_id: FromPath[str]) -> None:
        """Remove a queued message before the thread's next step takes it (204)."""
        if not await runtime.store.delete_queue_entry(thread.thread_id, queue_id):
            raise ApiError(
                404, "queue_entry_not_found", f"No queued message {queue_id!r}; it may have run."
            )
