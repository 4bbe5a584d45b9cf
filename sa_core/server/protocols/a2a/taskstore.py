"""The SDK's ``TaskStore`` over our database: each task is JSON on its thread.

A task id is ``<thread id>.<turn key>`` and the task is stored as a thread value
(``a2a:task:<turn key>``, :meth:`ThreadState.set_value`), so it lives in the same database as
the thread: it survives restarts and every worker sharing a PostgreSQL database reads it.

A task no executor of this process is running (after a restart, on another worker, or while
it waits for input) is brought up to date from its thread when read
(:func:`~sa_core.server.protocols.a2a.outcome.turn_outcome`): a turn that finished, failed or
was stopped since is stored so, with its answer as an artifact, and the push notifications
its new state owes are queued in the same transaction (:mod:`.push_store`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from sa_core.errors import ThreadNotFoundError
from sa_core.runtime import Runtime
from sa_core.server.protocols.a2a.convert import (
    TERMINAL,
    answer_artifacts,
    outcome_status,
    sa_meta,
)
from sa_core.server.protocols.a2a.outcome import turn_outcome
from sa_core.server.protocols.a2a.taskids import task_key
from sa_core.state import ThreadState

log = logging.getLogger(__name__)


@dataclass
class AgentRoute:
    """One served agent: the runtime, its package and agent, and the tasks running here."""

    runtime: Runtime
    package: str
    agent: str
    live: set[str] = field(default_factory=set)
    """Ids of the tasks whose executor runs in this process now."""
    push: Callable[[str, int], Awaitable[None]] | None = None
    """Owes the push notifications of a task's new state (``DurablePushSender.queue``)."""

    async def thread(self, thread_id: str) -> ThreadState | None:
        """The thread if it exists and belongs to this package (else None: never another's)."""
        try:
            thread = await self.runtime.get_thread(thread_id)
        except ThreadNotFoundError:
            return None
        if thread is None or thread.package != self.package:
            return None
        return thread


class ThreadTaskStore(TaskStore):
    """Tasks stored on their threads (see the module docstring)."""

    def __init__(self, route: AgentRoute) -> None:
        """Serve the tasks of ``route``'s package."""
        self.route = route
        self._saved: dict[str, tuple[int, int]] = {}

    async def _locate(self, task_id: str) -> tuple[ThreadState, str] | None:
        located = task_key(task_id)
        if located is None:
            return None
        thread = await self.route.thread(located[0])
        return None if thread is None else (thread, located[1])

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Store the task on its thread.

        Streamed chunks change a working task many times a second; those saves are kept in
        memory by the SDK and written only when the state or the history changes. A task
        already finished keeps its first final state. Cancelling a task that is still running
        (from any worker) stops its thread's turn.
        """
        located = await self._locate(task.id)
        if located is None:
            raise UnsupportedOperationError(message=f"Task {task.id!r} is not a task here.")
        thread, key = located
        shape = (int(task.status.state), len(task.history))
        if shape[0] == TaskState.TASK_STATE_WORKING and self._saved.get(task.id) == shape:
            return
        if task.status.state in TERMINAL:
            stored = await thread.get_value(key)
            before = _state(stored)
            if before in TERMINAL and before != task.status.state:
                log.info("A2A task %s is already %s; keeping it", task.id, before)
                return
            if task.status.state == TaskState.TASK_STATE_CANCELED and before not in TERMINAL:
                await thread.stop()
        await thread.set_value(key, MessageToDict(task))
        self._saved[task.id] = shape
        if task.status.state in TERMINAL:
            self._saved.pop(task.id, None)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """Read a task; one not running here is first brought up to date from its thread."""
        located = await self._locate(task_id)
        if located is None:
            return None
        thread, key = located
        stored = await thread.get_value(key)
        if not isinstance(stored, dict):
            return None
        task = Task()
        ParseDict(stored, task, ignore_unknown_fields=True)
        if task.status.state in TERMINAL or task_id in self.route.live:
            return task
        return await self._refresh(thread, key, task)

    async def _refresh(self, thread: ThreadState, key: str, task: Task) -> Task:
        message_ids = [str(i) for i in sa_meta(task).get("message_ids") or []]
        if not message_ids:
            return task  # the executor has not sent the message yet
        await thread.refresh()
        running = self.route.runtime.is_running(thread.thread_id)
        outcome = await turn_outcome(thread, message_ids, running=running)
        state = outcome_status(outcome, task.context_id, task.id)
        if state.state == task.status.state:
            return task
        if task.status.HasField("message"):
            task.history.append(task.status.message)
        task.status.CopyFrom(state)
        if outcome.state == "completed":
            for artifact in await answer_artifacts(thread, outcome):
                kept = [a for a in task.artifacts if a.artifact_id != artifact.artifact_id]
                del task.artifacts[:]
                task.artifacts.extend([*kept, artifact])
        async with self.route.runtime.store.transaction():  # the state and what it owes
            await thread.set_value(key, MessageToDict(task))
            if self.route.push is not None:
                await self.route.push(task.id, int(task.status.state))
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """Not served: list a context's turns with our HTTP API (``GET .../messages``)."""
        raise UnsupportedOperationError(
            message="tasks/list is not served; read a thread's messages with GET "
            "/api/packages/{package}/threads/{contextId}/messages."
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget a task and its push-notification configs (its thread and messages stay)."""
        located = await self._locate(task_id)
        if located is not None:
            await located[0].set_value(located[1], None)
            await self.route.runtime.store.delete_push_configs(task_id)


def _state(stored: Any) -> int | None:
    if not isinstance(stored, dict):
        return None
    task = Task()
    ParseDict(stored, task, ignore_unknown_fields=True)
    return int(task.status.state)
