"""What a thread's runner needs as a turn starts: the thread row, registry, queue and history.

On PostgreSQL the four come back from one query, sent in the same statement as the deferred
writes of the transaction that owes the turn (:meth:`Transaction.read_with_writes`): the
acknowledgement of a message is one round trip, and the turn's first step reads nothing back.
Elsewhere the row, registry and queue are read as usual and the history is left to
:meth:`MessagesMixin.history` and its cache.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.store.backend import Transaction
from sa_core.store.caches import ReadHistory
from sa_core.store.fast import Prepared
from sa_core.store.queue import QueueMixin
from sa_core.store.threads import ThreadsMixin

if TYPE_CHECKING:
    from sa_core.spec import SubagentRegistryEntry
    from sa_core.spec.records import Message
    from sa_core.store.rows import QueueEntry, ThreadRow

_QUEUE_KEY = "queue_entries"
_HISTORY_KEY = "history_entries"


@dataclass(slots=True)
class TurnStart:
    """A thread as the transaction that owes its turn left it."""

    row: ThreadRow
    children: list[SubagentRegistryEntry]
    queue: list[QueueEntry]
    history: list[Message] | None
    """The engine's context (as :meth:`MessagesMixin.history` loads it), or ``None`` when it
    was not read here (the engine loads it)."""


@functools.cache
def _turn_start_pg() -> Prepared:
    """Thread row, registry, queue and history of a thread in one PostgreSQL query.

    The registry, queue and history come back as JSON arrays of rows, in their orders. Built
    on first use: SQLite stores never import the PostgreSQL dialect for it.
    """
    from sqlalchemy import JSON, bindparam, func, select, type_coerce
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    from sa_core.store import tables as t
    from sa_core.store.threads import _get_with_children_pg

    def rows_of(table: Any, *conditions: Any) -> Any:
        found = select(*table.c).where(*conditions).subquery()
        ordered = aggregate_order_by(found.table_valued(), found.c.created_at, found.c.seq)
        return select(func.json_agg(ordered)).scalar_subquery()

    thread_id: Any = bindparam("b_id")
    q = t.queue.c
    queue = type_coerce(rows_of(t.queue, q.thread_id == thread_id), JSON).label(_QUEUE_KEY)
    history = type_coerce(_history_since_known(thread_id), JSON).label(_HISTORY_KEY)
    base = _get_with_children_pg()
    stmt: Any = base.stmt
    return Prepared(stmt.add_columns(queue, history), [*base.columns, queue, history])


class TurnStartMixin(ThreadsMixin, QueueMixin):
    """The read that ends the transaction owing a turn."""

    async def read_turn_start(
        self, thread_id: str, *, tx: Transaction, written: Sequence[Message] = ()
    ) -> TurnStart | None:
        """Read a thread for its runner as the last operation of ``tx`` (commit it right after).

        Args:
            thread_id: The thread.
            tx: The transaction that owes the turn; it must write none of the thread's queue
                entries or registry.
            written: Messages ``tx`` inserted into the thread: on PostgreSQL the read may go
                in the statement that writes them, and so not see them; the history includes
                them either way. Fields of the thread row that ``tx`` wrote may likewise read
                as they were before: the caller keeps the values it wrote.

        Returns:
            The thread, or ``None`` when it is gone.
        """
        from sa_core.store.messages import _history_rows, message_from_row, message_to_row
        from sa_core.store.queue import _entry
        from sa_core.store.threads import _KIDS_KEY, thread_with_children

        if self._backend.dialect != "postgresql":
            found = await self.get_thread_with_children(thread_id, tx=tx)
            if found is None:
                return None
            queue = await self.list_queue(thread_id, tx=tx)
            return TurnStart(found[0], found[1], queue, None)
        histories = self._caches.read_histories
        held = histories.get(thread_id)
        query = _turn_start_pg()
        params = {"b_id": thread_id, "b_known": -1 if held is None else held.seq}
        rows = await self._check_tx(tx).read_with_writes(query, params, last=True)
        if rows is None:
            rows = await self._fetch(query, params, tx)
        if not rows:
            histories.drop(thread_id)
            return None
        row = rows[0]
        queue = [_entry(_without_seq(entry)) for entry in row.pop(_QUEUE_KEY) or []]
        entries, digest_known, digest_all, highest = row.pop(_HISTORY_KEY)
        thread, children = thread_with_children(row, row.pop(_KIDS_KEY) or [])
        if held is not None and digest_known != held.digest:
            histories.drop(thread_id)  # an older row changed: the engine reads it all
            return TurnStart(thread, children, queue, None)
        kept = self._caches.rows
        newer = [kept.message(_without_seq(entry), message_from_row) for entry in entries or []]
        history = newer if held is None else _merged(held.messages, newer)
        highest = -1 if highest is None else int(highest)
        histories.put(thread_id, ReadHistory(highest, digest_all, history))
        read = {message.id for message in newer}
        unseen = [message for message in written if message.id not in read]
        if unseen:
            rows_written = [message_to_row(message) for message in unseen]
            history = _merged(history, _history_rows(thread_id, unseen, rows_written))
        return TurnStart(thread, children, queue, list(history))


def _history_since_known(thread_id: Any) -> Any:
    """``[rows newer than b_known, digest of the rest, digest of all, highest seq]`` (JSON).

    The rows are the history's (depth 0, not pending) in order; a digest is the MD5 of the
    rows' MD5s (of each whole row as text) in that order, so any change of a row at or below
    ``b_known`` (an edit, a status, a deletion) changes the first digest.
    """
    from sqlalchemy import BigInteger, Text, bindparam, cast, func, literal_column, or_, select
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    from sa_core.store import tables as t

    m = t.messages.c
    found = (
        select(*t.messages.c)
        .where(
            m.thread_id == thread_id,
            m.depth == 0,
            or_(m.status.is_(None), m.status != "pending"),
        )
        .subquery()
    )
    known: Any = bindparam("b_known", type_=BigInteger)
    order = (found.c.created_at, found.c.seq)
    row = found.table_valued()
    newer = func.json_agg(aggregate_order_by(row, *order)).filter(found.c.seq > known)

    def digest(*only: Any) -> Any:
        hashes = func.string_agg(
            func.md5(cast(row, Text)), aggregate_order_by(literal_column("','"), *order)
        )
        return func.md5(hashes.filter(*only) if only else hashes)

    summary = func.json_build_array(
        newer, digest(found.c.seq <= known), digest(), func.max(found.c.seq)
    )
    return select(summary).scalar_subquery()


def _merged(older: list[Message], newer: list[Message]) -> list[Message]:
    """Messages in stored order: ``newer`` were all inserted after ``older``."""
    merged = older + newer
    if newer and older and newer[0].created_at < older[-1].created_at:
        merged.sort(key=lambda message: message.created_at)  # stable: insertion breaks ties
    return merged


def _without_seq(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("seq", None)
    return row
