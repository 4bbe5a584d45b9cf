"""Execution records: the turn a thread owes and the point a restart resumes it from.

One row per thread in ``executions``. The engine writes it in the same transaction as the
writes that move a flow forward (the acknowledged message, each model step, each queue drain),
so after a crash the record and the messages always agree. A thread whose record is ``owed`` or
``running`` when a runtime starts has work to finish.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import and_, bindparam, delete, exists, insert, or_, select, update
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.execution_record import ExecutionRecord
from sa_core.store.execution_record import ResumePoint as ResumePoint
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.leases import lease_held
from sa_core.store.storebase import StoreBase

Params = dict[str, Any]

_X = t.executions.c
RECORD_COLUMNS = (_X.status, _X.record, _X.claimed_by, _X.claimed_until)
"""The columns an :class:`ExecutionRecord` is read from (see :func:`record_from_row`)."""
_GET = Prepared(select(*RECORD_COLUMNS).where(_X.thread_id == bindparam("b_tid")), RECORD_COLUMNS)
_UPDATE = Prepared(
    update(t.executions)
    .where(_X.thread_id == bindparam("b_tid"))
    .values(
        status=bindparam("v_status"),
        record=bindparam("v_record"),
        updated_at=bindparam("v_updated_at"),
    )
)
_UPDATE_RELEASE = Prepared(
    update(t.executions)
    .where(_X.thread_id == bindparam("b_tid"))
    .values(
        status=bindparam("v_status"),
        record=bindparam("v_record"),
        claimed_by=None,
        claimed_until=None,
        updated_at=bindparam("v_updated_at"),
    )
)
_LEASE_HELD = exists(lease_held("b_fence_owner", "b_fence_now"))
"""The worker ``b_fence_owner`` holds a valid lease on the thread (share-locked till commit)."""
_UPDATE_FENCED = Prepared(_UPDATE.stmt.where(_LEASE_HELD))  # type: ignore[attr-defined]
_UPDATE_RELEASE_FENCED = Prepared(_UPDATE_RELEASE.stmt.where(_LEASE_HELD))  # type: ignore[attr-defined]
_INSERT = Prepared(
    insert(t.executions).values(
        thread_id=bindparam("v_tid"),
        status=bindparam("v_status"),
        record=bindparam("v_record"),
        claimed_by=bindparam("v_claimed_by"),
        updated_at=bindparam("v_updated_at"),
    )
)
_CLAIMABLE = and_(
    _X.thread_id == bindparam("b_tid"),
    or_(
        _X.claimed_by.is_(None),
        _X.claimed_by == bindparam("b_owner"),
        and_(_X.claimed_until.is_not(None), _X.claimed_until < bindparam("b_now")),
    ),
)
"""The thread's record, when it is free, ``b_owner``'s already, or its claim has lapsed."""
_CLAIM = Prepared(
    update(t.executions)
    .where(_CLAIMABLE)
    .values(claimed_by=bindparam("v_owner"), claimed_until=None)
)
_OWED = select(_X.thread_id, *RECORD_COLUMNS).where(_X.status.in_(("owed", "running")))


def record_from_row(row: dict[str, Any]) -> ExecutionRecord:
    """The :class:`ExecutionRecord` of an ``executions`` row read with :data:`RECORD_COLUMNS`."""
    data = dict(row["record"] or {})
    data.update(
        status=row["status"], claimed_by=row["claimed_by"], claimed_until=row["claimed_until"]
    )
    return ExecutionRecord.model_validate(data)


def _body(record: ExecutionRecord) -> dict[str, Any]:
    """The ``record`` column of an execution record (its own columns left out)."""
    return record.model_dump(mode="json", exclude={"status", "claimed_by", "claimed_until"})


def _params(
    thread_id: str,
    status: str,
    body: dict[str, Any],
    claimed_by: str | None,
    at: int | None = None,
) -> Params:
    return {
        "b_tid": thread_id,
        "v_tid": thread_id,
        "v_status": status,
        "v_record": body,
        "v_claimed_by": claimed_by,
        "v_updated_at": now_us() if at is None else at,
    }


def _deferred(
    thread_id: str,
    status: str,
    body: dict[str, Any],
    claimed_by: str | None,
    *,
    release: bool = False,
    fence_owner: str | None = None,
) -> Deferred:
    """Update a thread's execution record (the claim stays unless ``release``).

    When the update changes no row, the record is inserted, claimed by ``claimed_by``. With
    ``fence_owner`` the update is also the transaction's lease fence (``fencing``): it changes
    the row only while that worker holds a valid lease on the thread, and share-locks the lease
    until the commit (see :meth:`StoreBase.fenced`); when it does not, the row is written
    unfenced, and the fence runs before the commit as usual.
    """
    params = _params(thread_id, status, body, claimed_by)
    update_ = _UPDATE_RELEASE if release else _UPDATE
    if fence_owner is None:
        return Deferred(update_, params, lambda conn: _INSERT.run(conn, params))

    def unfenced(conn: Connection) -> None:
        if update_.run(conn, params) == 0:
            _INSERT.run(conn, params)

    fenced = _UPDATE_RELEASE_FENCED if release else _UPDATE_FENCED
    fence = {**params, "b_fence_owner": fence_owner, "b_fence_now": params["v_updated_at"]}
    return Deferred(fenced, fence, unfenced, fencing=True)


@functools.cache
def _idle_body() -> dict[str, Any]:
    return _body(ExecutionRecord(status="idle"))


def new_record(thread_id: str, at: int) -> Deferred:
    """A new thread's execution record: idle, nothing owed, unclaimed.

    Written with the thread, so a thread's first turn updates the record like every later one
    (on PostgreSQL a missing record would undo the turn's first statement and send it again).
    """
    return Deferred(_INSERT, _params(thread_id, "idle", _idle_body(), None, at))


class ExecutionsMixin(StoreBase):
    """Execution records (one per thread)."""

    async def save_execution(
        self, thread_id: str, record: ExecutionRecord, *, tx: Transaction | None = None
    ) -> None:
        """Create or replace a thread's execution record (its claim is left as it is)."""
        await self._write_deferred([_deferred(thread_id, record.status, _body(record), None)], tx)

    async def save_running_point(
        self,
        thread_id: str,
        point: dict[str, Any],
        claimed_by: str | None,
        *,
        tx: Transaction | None = None,
    ) -> None:
        """Record a running flow's resume point (the per-step fast path of ``save_execution``).

        Args:
            thread_id: The thread.
            point: A :class:`ResumePoint` as a JSON dict (validated when read back).
            claimed_by: The runtime instance running the flow.
            tx: An open transaction to write in.
        """
        body = {"resume": point, "stop_reason": None}
        owner = self.fence_owner(thread_id)
        item = _deferred(thread_id, "running", body, claimed_by, fence_owner=owner)
        if await self._write_deferred([item], tx):
            self.fenced(tx)

    async def get_execution(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> ExecutionRecord | None:
        """A thread's execution record, or ``None`` when it never ran."""
        found = await self._fetch(_GET, {"b_tid": thread_id}, tx)
        return record_from_row(found[0]) if found else None

    async def owed_executions(self, *, tx: Transaction | None = None) -> dict[str, ExecutionRecord]:
        """Records of threads with an owed or running turn (to resume after a restart).

        A scan of every record: ``status`` has no index, since each turn changes it two or
        three times and only a runtime's start asks.
        """

        def op(conn: Connection) -> dict[str, ExecutionRecord]:
            return {
                row.thread_id: record_from_row(dict(row._mapping)) for row in conn.execute(_OWED)
            }

        return await self._read(op, tx)

    async def finish_execution(
        self, thread_id: str, stop_reason: str | None, *, tx: Transaction | None = None
    ) -> None:
        """Mark a thread's execution idle: nothing owed, no resume point, no claim."""
        record = ExecutionRecord(status="idle", stop_reason=stop_reason)
        owner = self.fence_owner(thread_id)
        item = _deferred(thread_id, "idle", _body(record), None, release=True, fence_owner=owner)
        if await self._write_deferred([item], tx):
            self.fenced(tx)

    async def pending_message_ids(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[str]:
        """Ids of a thread's messages still ``pending`` (model calls a crash cut off)."""
        _M = t.messages.c
        stmt = (
            select(_M.id)
            .where(_M.thread_id == thread_id, _M.status == "pending")
            .order_by(_M.created_at, _M.seq)
        )
        return await self._read(lambda conn: list(conn.execute(stmt).scalars()), tx)

    async def claim_execution(
        self, thread_id: str, owner: str, *, tx: Transaction | None = None
    ) -> bool:
        """Claim a thread's execution for ``owner``; False when another owner holds it.

        A claim is free when unset, already ``owner``'s, or past its ``claimed_until``. A thread
        without a record gets an idle one, claimed.
        """
        params = {"b_tid": thread_id, "b_owner": owner, "b_now": now_us(), "v_owner": owner}

        def op(conn: Connection) -> bool:
            if _CLAIM.run(conn, params):
                return True
            if _GET.first(conn, {"b_tid": thread_id}) is not None:
                return False
            _INSERT.run(conn, _params(thread_id, "idle", {}, owner))
            return True

        return await self._write(op, tx)

    async def release_execution(
        self, thread_id: str, owner: str, *, tx: Transaction | None = None
    ) -> None:
        """Drop ``owner``'s claim on a thread's execution (the record stays as it is)."""
        stmt = (
            update(t.executions)
            .where(_X.thread_id == thread_id, _X.claimed_by == owner)
            .values(claimed_by=None, claimed_until=None)
        )
        await self._write(lambda conn: conn.execute(stmt), tx)

    async def release_claims(self, *, tx: Transaction | None = None) -> int:
        """Drop every claim (a runtime starting alone on a database); returns how many."""
        stmt = (
            update(t.executions)
            .where(_X.claimed_by.is_not(None))
            .values(claimed_by=None, claimed_until=None)
        )
        return await self._write(lambda conn: int(conn.execute(stmt).rowcount), tx)

    async def delete_execution(self, thread_id: str, *, tx: Transaction | None = None) -> None:
        """Forget a thread's execution record."""
        stmt = delete(t.executions).where(_X.thread_id == thread_id)
        await self._write(lambda conn: conn.execute(stmt), tx)

    async def owe_execution(
        self, thread_id: str, record: ExecutionRecord, owner: str, *, tx: Transaction | None = None
    ) -> bool:
        """Save an owed record and claim the thread for ``owner``, in one statement when free.

        Equal to :meth:`claim_execution` followed by :meth:`save_execution` (the record is saved
        whether or not the claim succeeds), in one ``UPDATE`` when the claim is free.

        Returns:
            Whether ``owner`` holds the claim (False when another owner holds it).
        """
        body = _body(record)
        now = now_us()
        params = {
            "b_tid": thread_id,
            "b_owner": owner,
            "b_now": now,
            "v_tid": thread_id,
            "v_owner": owner,
            "v_status": record.status,
            "v_record": body,
            "v_claimed_by": owner,
            "v_updated_at": now,
        }

        def op(conn: Connection) -> bool:
            if _CLAIM_SAVE.run(conn, params):
                return True
            if _UPDATE.run(conn, params):  # the record exists: another owner holds the claim
                return False
            _INSERT.run(conn, params)
            return True

        return await self._write(op, tx)


_CLAIM_SAVE = Prepared(
    update(t.executions)
    .where(_CLAIMABLE)
    .values(
        status=bindparam("v_status"),
        record=bindparam("v_record"),
        claimed_by=bindparam("v_owner"),
        claimed_until=None,
        updated_at=bindparam("v_updated_at"),
    )
)
