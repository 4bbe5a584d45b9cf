"""The SDK's push-notification config store and sender, over our database.

:class:`ThreadPushConfigStore` keeps each task's configs in ``a2a_push``
(:mod:`sa_core.store.a2apush`): the SDK's request handler serves
``tasks/pushNotificationConfig/set|get|list|delete`` (and the 1.0 names
``CreateTaskPushNotificationConfig``...) with it, and registers the config a client sends
with its message. Configs are the client's, shown back as given except their
``authentication.credentials`` (``[redacted]``).

:class:`DurablePushSender` is the SDK's push sender: where the SDK would POST, it queues the
notification in the database (:meth:`~sa_core.store.a2apush.A2APushMixin.queue_push`) and
wakes the :class:`~sa_core.server.protocols.a2a.push_delivery.PushDelivery` loop, which sends
it with retries, from any worker, across restarts. One notification is owed per state the
task enters after ``submitted``; status texts and artifact chunks in between are not pushed
(the notification carries the whole task as it stands when sent).
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.server.tasks.push_notification_sender import PushNotificationEvent, PushNotificationSender
from a2a.types.a2a_pb2 import Task, TaskPushNotificationConfig, TaskStatusUpdateEvent
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict, ParseDict

from sa_core.server.protocols.a2a.convert import split_task_id, state_name
from sa_core.server.protocols.a2a.push_delivery import PushDelivery
from sa_core.server.protocols.a2a.taskstore import AgentRoute

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
REDACTED = "[redacted]"


def _config(stored: dict[str, object]) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig()
    ParseDict(stored, config, ignore_unknown_fields=True)
    return config


def shown(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """A copy for an API answer: the credentials of its ``authentication`` redacted."""
    copy = TaskPushNotificationConfig()
    copy.CopyFrom(config)
    if copy.HasField("authentication") and copy.authentication.credentials:
        copy.authentication.credentials = REDACTED
    return copy


class ThreadPushConfigStore(PushNotificationConfigStore):
    """The push-notification configs of one agent's tasks, in the database."""

    def __init__(self, route: AgentRoute, delivery: PushDelivery) -> None:
        """Keep the configs of ``route``'s tasks; ``delivery`` is woken when one is set."""
        self.route = route
        self.delivery = delivery

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        """Store (or replace) a config of a task of this agent's package.

        Raises:
            TaskNotFoundError: the task is not one of this package's.
        """
        split = split_task_id(task_id)
        thread = await self.route.thread(split[0]) if split is not None else None
        if thread is None:
            raise TaskNotFoundError(message=f"No task {task_id!r} here.")
        stored = normalize_push_notification_config(task_id, notification_config)
        await self.route.runtime.store.put_push_config(
            task_id, stored.id, thread.thread_id, MessageToDict(stored)
        )
        self.delivery.wake()  # a task to watch
        return shown(stored)

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The task's configs, as shown to a client."""
        return [shown(config) for config in await self.get_info_for_dispatch(task_id)]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs as stored."""
        return [_config(stored) for stored in await self.route.runtime.store.push_configs(task_id)]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Delete one config of the task (``None``: every one)."""
        await self.route.runtime.store.delete_push_configs(task_id, config_id)


class DurablePushSender(PushNotificationSender):
    """Queues a notification per new task state in the database (see the module docstring)."""

    def __init__(self, route: AgentRoute, delivery: PushDelivery) -> None:
        """Queue for ``route``'s tasks; wake ``delivery`` once a queue commits."""
        self.route = route
        self.delivery = delivery

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Owe a notification when ``event`` is a task or status in a new state."""
        if isinstance(event, Task | TaskStatusUpdateEvent):
            await self.queue(task_id, int(event.status.state))

    async def queue(self, task_id: str, state: int) -> None:
        """Owe a notification on each config of the task unless one for ``state`` is owed.

        Inside an open transaction it commits with it (the loop is woken after the commit).
        """
        name = state_name(state)
        if name in ("unspecified", "submitted"):
            return
        store = self.route.runtime.store
        if await store.queue_push(task_id, name, final=name in TERMINAL_STATES):
            store.after_commit(self.delivery.wake)


__all__ = ["DurablePushSender", "ThreadPushConfigStore", "shown"]
