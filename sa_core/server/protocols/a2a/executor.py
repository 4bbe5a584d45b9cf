"""The SDK's ``AgentExecutor`` over a thread: one A2A task is one turn.

``execute`` sends the client's message on the thread of the task's ``contextId`` and follows
the thread's live frames: answer text streams as artifact chunks (one artifact per assistant
message), and after each stored message the turn's state is read again from the thread
(:func:`~sa_core.server.protocols.a2a.outcome.turn_outcome`), until the turn is completed,
failed, canceled, or needs input (an approval, or variables for a subagent). ``cancel`` stops
the thread's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from typing import Any, Final

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types.a2a_pb2 import (
    Artifact,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.struct_pb2 import Struct

from sa_core import telemetry
from sa_core.engine.events import Delivered
from sa_core.errors import ThreadTerminatedError
from sa_core.server.protocols.a2a.convert import (
    ANSWER_ARTIFACT,
    answer_artifacts,
    message_parts,
    outcome_status,
    sa_meta,
)
from sa_core.server.protocols.a2a.outcome import TurnOutcome, turn_outcome
from sa_core.server.protocols.a2a.taskstore import AgentRoute
from sa_core.spec import AttachmentRef, ToolAttachment
from sa_core.state import ThreadState

RECHECK_SECONDS = 1.0
"""While the turn runs on another worker (no local runner to wait for), how often to re-read it
besides each frame."""


class _Wake(enum.Enum):
    """Put into a task's frame queue when the thread's local runner is done (never sent)."""

    RUNNER_DONE = "runner_done"


_WAKE: Final = _Wake.RUNNER_DONE


class ThreadAgentExecutor(AgentExecutor):
    """Runs A2A tasks as turns of threads of one agent (see the module docstring)."""

    def __init__(self, route: AgentRoute) -> None:
        """Serve ``route``'s agent."""
        self.route = route

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Send the message on the thread and report the turn until it settles."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        thread = await self.route.thread(context_id)
        if thread is None:
            raise TaskNotFoundError(message=f"No conversation {context_id!r} here.")
        try:
            text, files = message_parts(context.message) if context.message else ("", [])
        except ValueError as exc:
            raise InvalidParamsError(message=str(exc)) from None
        attachments: list[ToolAttachment | AttachmentRef | dict[str, Any]] = [*files]
        task = context.current_task
        if task is None:
            task = Task(id=task_id, context_id=context_id)
            if context.message is not None:
                task.history.append(context.message)
            task.status.state = TaskState.TASK_STATE_SUBMITTED
            await event_queue.enqueue_event(task)
        message_ids = [str(i) for i in sa_meta(task).get("message_ids") or []]
        self.route.live.add(task_id)
        try:
            frames: asyncio.Queue[Delivered | _Wake] = asyncio.Queue()
            async with self.route.runtime.events.subscribe_into(context_id, frames):
                telemetry.continue_trace(context_id)  # the turn runs under this request's span
                try:
                    sent = await thread.send_message(text, "user", attachments, wait=False)
                except ThreadTerminatedError as exc:
                    raise InvalidParamsError(message=str(exc)) from None
                message_ids.append(sent.id)
                await event_queue.enqueue_event(_working(task_id, context_id, message_ids))
                await self._follow(thread, task_id, message_ids, frames, event_queue)
        finally:
            self.route.live.discard(task_id)

    async def _follow(
        self,
        thread: ThreadState,
        task_id: str,
        message_ids: list[str],
        frames: asyncio.Queue[Delivered | _Wake],
        event_queue: EventQueue,
    ) -> None:
        runtime = self.route.runtime
        context_id = thread.thread_id
        waiter = asyncio.create_task(runtime.scheduler.wait(context_id))
        waiter.add_done_callback(lambda _: frames.put_nowait(_WAKE))
        streamed: set[str] = set()
        try:
            while True:
                await thread.refresh()
                running = runtime.is_running(context_id)
                outcome = await turn_outcome(thread, message_ids, running=running)
                if outcome.state != "working":
                    await self._settle(thread, task_id, outcome, event_queue)
                    return
                recheck = None if running or not waiter.done() else RECHECK_SECONDS
                while True:
                    try:
                        frame = await asyncio.wait_for(frames.get(), recheck)
                    except TimeoutError:
                        break
                    if await self._stream(frame, task_id, context_id, streamed, event_queue):
                        break
        finally:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter

    async def _stream(
        self,
        frame: Delivered | _Wake,
        task_id: str,
        context_id: str,
        streamed: set[str],
        event_queue: EventQueue,
    ) -> bool:
        """Forward a frame; True when the turn's state may have changed (read it again)."""
        if frame is _WAKE:
            return True
        if frame["type"] == "overflow" or frame.get("subagent_id"):
            return False
        if frame["type"] == "message_chunk" and not frame["depth"]:
            message_id = str(frame["message_id"])
            artifact = Artifact(
                artifact_id=message_id, name=ANSWER_ARTIFACT, parts=[Part(text=frame["chunk"])]
            )
            await event_queue.enqueue_event(
                TaskArtifactUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    artifact=artifact,
                    append=message_id in streamed,
                )
            )
            streamed.add(message_id)
            return False
        return frame["type"] in ("message_data", "event")

    async def _settle(
        self, thread: ThreadState, task_id: str, outcome: TurnOutcome, event_queue: EventQueue
    ) -> None:
        context_id = thread.thread_id
        if outcome.state in ("completed", "canceled"):
            for artifact in await answer_artifacts(thread, outcome):
                await event_queue.enqueue_event(
                    TaskArtifactUpdateEvent(
                        task_id=task_id,
                        context_id=context_id,
                        artifact=artifact,
                        append=False,
                        last_chunk=True,
                    )
                )
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=outcome_status(outcome, context_id, task_id),
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the thread's turn and report the task canceled."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        thread = await self.route.thread(context_id)
        if thread is not None:
            await thread.stop()
        status = TaskStatus(state=TaskState.TASK_STATE_CANCELED)
        status.timestamp.GetCurrentTime()
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
        )


def _working(task_id: str, context_id: str, message_ids: list[str]) -> TaskStatusUpdateEvent:
    """The ``working`` status, recording the thread and the task's messages in its metadata."""
    metadata = Struct()
    metadata.update({"sa": {"thread_id": context_id, "message_ids": message_ids}})
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
    status.timestamp.GetCurrentTime()
    return TaskStatusUpdateEvent(
        task_id=task_id, context_id=context_id, status=status, metadata=metadata
    )
