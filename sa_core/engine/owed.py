"""Owed work: whether a thread owes a turn or has queued work, and starting its runner.

Low in the engine on purpose (the store and the scheduler only): a blocking subagent call, the
delivery of a message and the workers' takeover start a thread that owes work without
importing the turn loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.engine.flowtypes import side_for_role

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel


async def ensure_running(kernel: Kernel, thread_id: str) -> None:
    """Start a thread's runner if it owes work (a turn or queued entries) and has none."""
    if kernel.scheduler.is_running(thread_id) or not kernel.is_open:
        return
    record = await kernel.store.get_execution(thread_id)
    point = record.owed_resume if record is not None else None
    if point is not None:
        kernel.scheduler.kick(thread_id, point.side, resume=point)
        return
    queue = await kernel.store.list_queue(thread_id)
    if queue:
        kernel.scheduler.kick(thread_id, side_for_role(queue[0].role))


async def turn_settled(kernel: Kernel, thread_id: str) -> bool:
    """Whether the thread owes no turn and has nothing queued, as the database says.

    Unlike ``scheduler.wait`` (this process's runner only), this holds whichever worker runs
    the thread: a caller on any worker can watch the thread's frames and ask this when one of
    them looks like the end of a turn.
    """
    record = await kernel.store.get_execution(thread_id)
    if record is not None and record.status != "idle":
        return False
    return not await kernel.store.list_queue(thread_id)
