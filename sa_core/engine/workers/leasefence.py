"""The lease fence: no write of a thread's turn commits once this worker lost the thread's lease.

Given to the store (:meth:`sa_core.store.storebase.StoreBase.fence_writes`) by the worker's
:class:`~sa_core.engine.workers.leases.LeasePlacement`; the store runs it in every write
transaction. Only writes made by a thread's runner (its turn, tools and hooks) are fenced, against
that thread's lease; the runner's own claim of the lease (:func:`acquiring`) is not.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from sa_core.store.leases import LeaseLost, lease_guard, lease_valid

if TYPE_CHECKING:
    from sa_core.engine.workers.scheduler import Scheduler
    from sa_core.store.fast import Deferred

log = logging.getLogger("sa_core.workers")

_ACQUIRING: ContextVar[bool] = ContextVar("sa_lease_acquiring", default=False)


@contextlib.contextmanager
def acquiring() -> Iterator[None]:
    """Within the block, writes are the runner's claim of its lease: not fenced."""
    unfenced = _ACQUIRING.set(True)
    try:
        yield
    finally:
        _ACQUIRING.reset(unfenced)


class LeaseFence:
    """A worker's :class:`~sa_core.store.storebase.WriteFence`.

    Args:
        worker_id: The worker whose leases fence the writes.
        scheduler: The kernel's scheduler, or ``None`` while the runtime starts (nothing runs).
    """

    def __init__(self, worker_id: str, scheduler: Callable[[], Scheduler | None]) -> None:
        self.worker_id = worker_id
        self._scheduler = scheduler

    def owner(self, thread_id: str) -> str | None:
        """The worker id when a write of the thread made now is its runner's (to be fenced)."""
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get() or scheduler.current_thread() != thread_id:
            return None
        return self.worker_id

    def check(self, conn: Any) -> None:
        """Before a write of a thread's turn commits: refuse it if the lease was lost.

        The store runs this in every write transaction (``write_fence``); only writes made by
        a thread's runner (its turn, tools and hooks) are checked, against that thread's
        lease. The check share-locks the lease row until the commit, so no other worker takes
        the thread over between the check and the commit.

        Raises:
            LeaseLost: The lease expired or another worker took the thread over; the
                transaction rolls back and the turn ends here.
        """
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get():
            return
        thread_id = scheduler.current_thread()
        if thread_id is not None and not lease_valid(conn, thread_id, self.worker_id):
            log.warning("lease on thread %s lost; its turn on this worker ends", thread_id)
            scheduler.interrupt(thread_id, cancel=False)
            raise LeaseLost(thread_id)

    def guard(self) -> Deferred | None:
        """:meth:`check` as a statement sent with a transaction's deferred writes, or ``None``.

        It selects the lease row (share-locking it) while the lease holds; when it does not,
        the store undoes the writes and runs :meth:`check` itself, which raises.
        """
        scheduler = self._scheduler()
        if scheduler is None or _ACQUIRING.get():
            return None
        thread_id = scheduler.current_thread()
        if thread_id is None:
            return None
        return lease_guard(thread_id, self.worker_id, self.check)
