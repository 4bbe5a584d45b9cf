"""The SDK's request handler for one agent, as this server runs it.

Resubscribing (``tasks/resubscribe``, ``SubscribeToTask``) streams a task only from the process
whose executor follows its turn. Elsewhere (a task resumed after a restart, or running on
another worker) the SDK would open a stream that never receives an event; instead the request
is refused with ``UnsupportedOperationError`` saying so, and the client polls ``tasks/get`` (or
waits for a push notification), which reads the task from its thread.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types.a2a_pb2 import SubscribeToTaskRequest
from a2a.utils.errors import UnsupportedOperationError

from sa_core.server.protocols.a2a.convert import TERMINAL
from sa_core.server.protocols.a2a.taskstore import AgentRoute, ThreadTaskStore


class ThreadRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` streaming a task only where its executor runs."""

    def __init__(self, route: AgentRoute, tasks: ThreadTaskStore, **kwargs: Any) -> None:
        """Serve ``route``'s agent with its ``tasks``; ``kwargs`` go to the SDK's handler."""
        super().__init__(task_store=tasks, **kwargs)
        self.route = route
        self.tasks = tasks

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """Stream the task's events when its executor runs here, else refuse (poll instead).

        Raises:
            UnsupportedOperationError: the task's turn is not followed by this process.
        """
        if params.id not in self.route.live:
            task = await self.tasks.get(params.id, context)
            if task is not None and task.status.state not in TERMINAL:
                raise UnsupportedOperationError(
                    message=f"Task {params.id} is not streamed by this server process (it was "
                    "resumed after a restart, or runs on another worker); poll tasks/get, or "
                    "register a push-notification config."
                )
        async for event in super().on_subscribe_to_task(params, context):
            yield event


__all__ = ["ThreadRequestHandler"]
