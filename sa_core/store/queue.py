"""The per-thread message queue: messages waiting for the thread's next step."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.engine import Connection

from sa_core.spec.records import QueueMessageInput
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.conflicts import QueueChanged
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.rows import QueueEntry
from sa_core.store.storebase import StoreBase

_Q = t.queue.c
_COLUMNS = [c for c in t.queue.c if c.name != "seq"]
_INSERT = Prepared(insert(t.queue).values({c.name: bindparam(f"p_{c.name}") for c in _COLUMNS}))
_LIST = Prepared(
    select(*_COLUMNS).where(_Q.thread_id == bindparam("b_tid")).order_by(_Q.created_at, _Q.seq),
    _COLUMNS,
)
_DRAIN_RETURNING = Prepared(
    delete(t.queue).where(_Q.thread_id == bindparam("b_tid")).returning(_Q.seq, *_COLUMNS),
    [_Q.seq, *_COLUMNS],
)
_DELETE_ONE = Prepared(
    delete(t.queue).where(_Q.thread_id == bindparam("b_tid"), _Q.id == bindparam("b_id"))
)
_THREADS = select(_Q.thread_id).distinct().order_by(_Q.thread_id)


def _gone(thread_id: str, queue_id: str) -> Any:
    def raise_gone(_conn: Connection) -> None:
        raise QueueChanged(f"queue entry {queue_id!r} of thread {thread_id!r} is gone")

    return raise_gone


def entry_from_row(row: dict[str, Any]) -> QueueEntry:
    """The :class:`QueueEntry` of a ``queue`` row."""
    return QueueEntry(
        id=row["id"],
        thread_id=row["thread_id"],
        role=row["role"],
        content=row["content"],
        attachments=list(row["attachments"] or []),
        silent=bool(row["silent"]),
        metadata=row["meta"],
        created_at=row["created_at"],
    )


def _drain(conn: Connection, thread_id: str) -> list[QueueEntry]:
    params = {"b_tid": thread_id}
    if conn.dialect.delete_returning:
        rows = sorted(
            _DRAIN_RETURNING.rows(conn, params), key=lambda row: (row["created_at"], row["seq"])
        )
        return [entry_from_row(row) for row in rows]
    entries = [entry_from_row(row) for row in _LIST.rows(conn, params)]
    if entries:
        ids = [entry.id for entry in entries]
        conn.execute(delete(t.queue).where(_Q.thread_id == thread_id, _Q.id.in_(ids)))
    return entries


class QueueMixin(StoreBase):
    """Queued messages."""

    async def enqueue(
        self,
        thread_id: str,
        entry: QueueMessageInput | Mapping[str, Any],
        *,
        tx: Transaction | None = None,
    ) -> str:
        """Queue a message for the thread's next step.

        Args:
            thread_id: The thread.
            entry: A :class:`QueueMessageInput` or a mapping with ``content`` and optionally
                ``role`` (default ``user``), ``attachments``, ``silent``, ``metadata``,
                ``created_at`` and ``id``.
            tx: An open transaction to write in.

        Returns:
            The queue entry id.

        """
        values = entry.model_dump() if isinstance(entry, BaseModel) else dict(entry)
        queue_id = str(values.get("id") or uuid.uuid4())
        attachments: Iterable[Any] = values.get("attachments") or []
        row = {
            "p_id": queue_id,
            "p_thread_id": thread_id,
            "p_role": values.get("role") or "user",
            "p_content": values.get("content") or "",
            "p_attachments": [to_jsonable_python(item) for item in attachments],
            "p_silent": bool(values.get("silent", False)),
            "p_meta": to_jsonable_python(values.get("metadata")),
            "p_created_at": int(values.get("created_at") or now_us()),
        }
        await self._write_deferred([Deferred(_INSERT, row)], tx)
        self._caches.empty_queues.entry_queued(thread_id)
        return queue_id

    async def drain_queue(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[QueueEntry]:
        """Remove and return every queued entry of a thread, oldest first, atomically."""
        return await self._write(lambda conn: _drain(conn, thread_id), tx)

    async def drain_entries(
        self, thread_id: str, entries: Iterable[QueueEntry], *, tx: Transaction
    ) -> None:
        """Remove exactly ``entries``, read from the thread's queue earlier, in ``tx``.

        Unlike :meth:`drain_queue` nothing is read back: on PostgreSQL the deletes go with the
        transaction's other deferred writes, so a drain whose entries are known is one
        statement. Entries queued since the read stay queued.

        Raises:
            QueueChanged: One of them is gone (deleted meanwhile); the transaction must roll
                back. Raised here or by the commit.
        """
        items = [
            Deferred(_DELETE_ONE, {"b_tid": thread_id, "b_id": e.id}, _gone(thread_id, e.id))
            for e in entries
        ]
        await self._write_deferred(items, tx)

    async def list_queue(
        self,
        thread_id: str,
        *,
        tx: Transaction | None = None,
        unwritten: bool = False,
        last: bool = False,
    ) -> list[QueueEntry]:
        """List the queued entries of a thread, oldest first.

        Args:
            thread_id: The thread.
            tx: An open transaction to read in.
            unwritten: ``tx`` writes none of this thread's entries: on PostgreSQL the read may
                go with the transaction's deferred writes, in the same statement (see
                :meth:`Transaction.read_with_writes`).
            last: Also ``tx``'s last statement, committed right after.
        """
        current = tx if tx is not None else self._ambient()
        empty = self._caches.empty_queues
        known = (
            current is not None  # the write lock is held: no other write of this store runs
            and self._backend.dialect != "postgresql"  # other workers queue entries too
            and empty.check(self.external_version())
        )
        if known and empty.known(thread_id):
            return []
        params = {"b_tid": thread_id}
        if (unwritten or last) and tx is not None:
            rows = await self._check_tx(tx).read_with_writes(_LIST, params, last=last)
            if rows is not None:
                return [entry_from_row(row) for row in rows]
        entries = [entry_from_row(row) for row in await self._fetch(_LIST, params, tx)]
        if known and not entries and current is not None:
            # true once the transaction commits (it may have taken entries that a rollback
            # puts back), unless an entry was queued since
            queued = empty.queued
            current.after_commit(lambda: empty.add(thread_id, queued))
        return entries

    async def delete_queue_entry(
        self, thread_id: str, queue_id: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete one queued entry; returns whether it existed."""
        params = {"b_tid": thread_id, "b_id": queue_id}
        return await self._write(lambda conn: _DELETE_ONE.run(conn, params) > 0, tx)

    async def threads_with_queue(self, *, tx: Transaction | None = None) -> list[str]:
        """Ids of threads with queued entries (to resume them after a restart)."""
        return await self._read(lambda conn: list(conn.execute(_THREADS).scalars()), tx)
