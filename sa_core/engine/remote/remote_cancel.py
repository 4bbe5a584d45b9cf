"""Cancelling a remote child's A2A task: on terminate, on a stop, and with its parent's stop.

A remote child's runner that is stopped or terminated while its exchange runs cancels the
remote task itself (:func:`cancel_task`, from :mod:`sa_core.engine.remote.remote_step`). A child
with no runner may still hold a task: one waiting for our input. :func:`cancel_outstanding` cancels
that one when the child is terminated, and :func:`remote_children` names the remote children a
stopped parent stops with it. Cancelling is best effort (``tasks/cancel`` within
:data:`CANCEL_SECONDS`): the child is stopped either way, and its record forgets the task so
nothing follows it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from sa_core.engine.remote.remote_client import RemoteError, connect
from sa_core.engine.remote.remote_exchange import cancel
from sa_core.engine.remote.remote_record import load, save
from sa_core.engine.remote.remote_task import TERMINAL

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.spec import RemoteAgentDefinition
    from sa_core.store import ThreadRow

CANCEL_SECONDS = 10.0
"""How long a ``tasks/cancel`` may take before the child is left stopped without it."""


def any_remote_agents(kernel: Kernel) -> bool:
    """Whether any loaded pack declares a remote agent (else nothing here reads anything)."""
    return any(scope.remote_agents for scope in kernel.registry.scopes.values())


def remote_of(kernel: Kernel, row: ThreadRow) -> RemoteAgentDefinition | None:
    """The remote agent a thread is a child of, if it is a remote child."""
    scope = kernel.registry.scopes.get(row.package)
    return scope.remote_agent(row.agent_id) if scope is not None else None


async def cancel_task(
    kernel: Kernel, thread: ThreadRef, remote: RemoteAgentDefinition, task_id: str
) -> None:
    """``tasks/cancel`` the child's remote task (best effort) and forget it in its record."""
    with contextlib.suppress(RemoteError, TimeoutError, OSError):
        async with asyncio.timeout(CANCEL_SECONDS), connect(kernel, thread, remote) as conn:
            await cancel(conn, task_id)
    record = await load(kernel, thread.thread_id)
    if record.task_id == task_id:
        await save(kernel, thread.thread_id, record.replace(task_id=None, state="canceled"))


async def cancel_outstanding(kernel: Kernel, thread_id: str) -> None:
    """Cancel the task a remote child holds, if any (its runner, if any, is stopped already)."""
    if not any_remote_agents(kernel):
        return
    row = kernel.threads.live_row(thread_id) or await kernel.store.get_thread(thread_id)
    remote = remote_of(kernel, row) if row is not None else None
    if remote is None:
        return
    record = await load(kernel, thread_id)
    if record.task_id is None or record.state in TERMINAL:
        return
    thread = await kernel.threads.open(thread_id)
    if thread is not None:
        await cancel_task(kernel, thread, remote, record.task_id)


async def remote_children(kernel: Kernel, parent_id: str) -> list[str]:
    """The remote children of a thread at work: running here, or holding a remote task.

    A stopped parent stops them (and their remote tasks); idle ones are left as they are.
    """
    if not any_remote_agents(kernel):
        return []
    row = kernel.threads.live_row(parent_id) or await kernel.store.get_thread(parent_id)
    scope = kernel.registry.scopes.get(row.package) if row is not None else None
    if scope is None or not scope.remote_agents:
        return []
    found = []
    for entry in await kernel.store.list_children(parent_id):
        if entry.name not in scope.remote_agents or entry.status == "terminated":
            continue
        if kernel.scheduler.is_running(entry.reference):
            found.append(entry.reference)
            continue
        record = await load(kernel, entry.reference)
        if record.task_id is not None and record.state not in TERMINAL:
            found.append(entry.reference)
    return found


__all__ = [
    "any_remote_agents",
    "CANCEL_SECONDS",
    "cancel_outstanding",
    "cancel_task",
    "remote_children",
    "remote_of",
]
