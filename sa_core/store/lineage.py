"""The lineage of threads (``thread_lineage``): forks, rewinds and replays, and who shares what."""

from __future__ import annotations

from sqlalchemy import insert, or_, select
from sqlalchemy.engine import Connection

from sa_core.errors import SharedHistoryError
from sa_core.spec.lineage import LineageEntry
from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.storebase import StoreBase

_L = t.thread_lineage.c


def _entry(row: dict[str, object]) -> LineageEntry:
    values = dict(row)
    values["data"] = values["data"] or {}
    return LineageEntry.model_validate(values)


def forks_sharing(conn: Connection, thread_id: str, created_at: int) -> list[str]:
    """Forks of the thread whose history holds its messages created at ``created_at``."""
    stmt = select(_L.thread_id, _L.data).where(_L.source_id == thread_id, _L.kind == "fork")
    return [
        row.thread_id
        for row in conn.execute(stmt)
        if int((row.data or {}).get("cut_at", 0)) >= created_at
    ]


def refuse_if_shared(conn: Connection, thread_id: str, ids: list[str]) -> None:
    """Refuse to delete ``ids`` (a thread and its descendants) when forks outside share them.

    Raises:
        SharedHistoryError: A fork not among ``ids`` reads messages of one of them.
    """
    stmt = select(_L.thread_id).where(
        _L.source_id.in_(ids), _L.kind == "fork", _L.thread_id.not_in(ids)
    )
    forks = sorted(set(conn.execute(stmt).scalars()))
    if forks:
        detail = f"Cannot delete thread {thread_id}: forks {', '.join(forks)} read its messages."
        raise SharedHistoryError(thread_id, detail)


class LineageMixin(StoreBase):
    """Lineage entries."""

    async def add_lineage(self, entry: LineageEntry, *, tx: Transaction | None = None) -> None:
        """Record a fork, rewind or replay."""
        values = entry.model_dump(mode="json")
        stmt = insert(t.thread_lineage).values(
            {key: values[key] for key in (c.name for c in t.thread_lineage.c)}
        )
        await self._write(lambda conn: conn.execute(stmt), tx)

    async def list_lineage(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[LineageEntry]:
        """Entries naming the thread (made from it or done to it), oldest first."""
        stmt = (
            select(*t.thread_lineage.c)
            .where(or_(_L.thread_id == thread_id, _L.source_id == thread_id))
            .order_by(_L.created_at, _L.id)
        )
        return await self._read(
            lambda conn: [_entry(dict(row)) for row in conn.execute(stmt).mappings()], tx
        )

    async def check_unshared(
        self, thread_id: str, message_id: str, created_at: int, *, tx: Transaction | None = None
    ) -> None:
        """Refuse a change of a thread's own message (created at ``created_at``) forks share.

        Raises:
            SharedHistoryError: A fork's history holds the message.
        """
        forks = await self._read(lambda conn: forks_sharing(conn, thread_id, created_at), tx)
        if forks:
            detail = (
                f"Cannot change message {message_id} of thread {thread_id}: forks "
                f"{', '.join(forks)} share it."
            )
            raise SharedHistoryError(thread_id, detail)
