"""The ``status`` filter of ``GET threads``: a thread's state as the console shows it."""

from __future__ import annotations

from typing import Any, Literal

from sa_core.runtime import Runtime
from sa_core.store import ThreadRow

ThreadStatusFilter = Literal["running", "awaiting_human", "idle", "new", "stopped", "terminated"]

_BATCH = 500


def thread_status(runtime: Runtime, row: ThreadRow) -> ThreadStatusFilter:
    """The one status a thread is listed under (terminated and running win)."""
    if row.terminated is not None:
        return "terminated"
    if runtime.is_running(row.id):
        return "running"
    if row.stopped:
        return "stopped"
    status = row.execution.get("status")
    if status == "awaiting_human":
        return "awaiting_human"
    if status is None:
        return "new"
    return "idle"


async def threads_with_status(
    runtime: Runtime,
    status: ThreadStatusFilter,
    limit: int,
    offset: int,
    filters: dict[str, Any],
) -> tuple[list[ThreadRow], int]:
    """One page of the threads matching ``filters`` whose status is ``status``, newest first.

    The status partly lives outside the database (a running turn), so the rows are read in
    batches and filtered here.
    """
    matched: list[ThreadRow] = []
    total = 0
    scanned = 0
    while True:
        rows, _ = await runtime.store.list_threads(limit=_BATCH, offset=scanned, **filters)
        scanned += len(rows)
        for row in rows:
            if thread_status(runtime, row) == status:
                if offset <= total < offset + limit:
                    matched.append(row)
                total += 1
        if len(rows) < _BATCH:
            return matched, total
