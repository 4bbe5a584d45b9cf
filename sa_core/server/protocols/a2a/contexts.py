"""Ids of A2A requests: ``contextId`` is a thread, a task id is ``<thread id>.<turn key>``.

A message without ``contextId`` starts a conversation: a new thread of the agent, whose id
becomes the ``contextId``. A ``contextId`` must name a thread of the agent's package; any other
(unknown, or another package's) is refused as if it did not exist.
"""

from __future__ import annotations

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import SendMessageRequest, Task
from a2a.utils.errors import InvalidParamsError

from sa_core.errors import MissingVariablesError, ThreadTerminatedError
from sa_core.server.protocols.a2a.convert import new_task_id, split_task_id
from sa_core.server.protocols.a2a.taskstore import AgentRoute


class ThreadContextBuilder(SimpleRequestContextBuilder):
    """Maps ``contextId`` onto threads and makes task ids that name their thread."""

    def __init__(self, route: AgentRoute) -> None:
        """Build contexts for ``route``'s agent."""
        super().__init__()
        self.route = route

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """Resolve (or create) the thread, then give the task an id on it.

        Raises:
            InvalidParamsError: the ``contextId`` is not a thread of this package, the thread
                is terminated, or a new thread lacks required variables.
        """
        if context_id:
            thread = await self.route.thread(context_id)
            if thread is None:
                raise InvalidParamsError(
                    message=f"Unknown contextId {context_id!r}: it is not a conversation of "
                    f"package '{self.route.package}'. Omit contextId to start a new one."
                )
            if thread.terminated is not None:
                raise InvalidParamsError(
                    message=str(ThreadTerminatedError(thread.thread_id, thread.terminated))
                )
        else:
            context_id = await self._new_thread()
        if task_id:
            split = split_task_id(task_id)
            if split is None or split[0] != context_id:
                raise InvalidParamsError(
                    message=f"Task {task_id!r} does not belong to context {context_id!r}."
                )
        else:
            task_id = new_task_id(context_id)
        return await super().build(
            context=context, params=params, task_id=task_id, context_id=context_id, task=task
        )

    async def _new_thread(self) -> str:
        try:
            thread = await self.route.runtime.create_thread(
                self.route.agent, package=self.route.package
            )
        except MissingVariablesError as exc:
            names = ", ".join(name for name, _ in exc.missing)
            raise InvalidParamsError(
                message=f"Agent '{self.route.package}/{self.route.agent}' needs variables "
                f"without a value ({names}); A2A cannot pass them. Create the thread with "
                f"POST /api/packages/{self.route.package}/threads and its env, then send "
                "its id as contextId."
            ) from None
        return thread.thread_id
