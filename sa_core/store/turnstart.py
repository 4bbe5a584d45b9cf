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
    from sa_core.store.pghistory import history_since_known
    from sa_core.store.threads import _get_with_children_pg

    def rows_of(table: Any, *conditions: Any) -> Any:
        found = select(*table.c).where(*conditions).subquery()
        ordered = aggregate_order_by(found.table_valued(), found.c.created_at, found.c.seq)
        return select(func.json_agg(ordered)).scalar_subquery()

    thread_id: Any = bindparam("b_id")
    q = t.queue.c
    queue = type_coerce(rows_of(t.queue, q.thread_id == thread_id), JSON).label(_QUEUE_KEY)
    history = type_coerce(history_since_known(thread_id), JSON).label(_HISTORY_KEY)
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
        from sa_core.store.messages import _history_rows, message_to_row
        from sa_core.store.pghistory import (
            apply_history_read,
            history_params,
            merged,
            without_seq,
        )
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
        params = history_params(thread_id, held)
        rows = await self._check_tx(tx).read_with_writes(query, params, last=True)
        if rows is None:
            rows = await self._fetch(query, params, tx)
        if not rows:
            histories.drop(thread_id)
            return None
        row = rows[0]
        queue = [_entry(without_seq(entry)) for entry in row.pop(_QUEUE_KEY) or []]
        summary = row.pop(_HISTORY_KEY)
        thread, children = thread_with_children(row, row.pop(_KIDS_KEY) or [])
        history_read = apply_history_read(self._caches, thread_id, held, summary)
        if history_read is None:  # an older row changed: the engine reads the history whole
            return TurnStart(thread, children, queue, None)
        kept, fetched = history_read
        read = {message.id for message in fetched}  # what it wrote can only be new
        unseen = [message for message in written if message.id not in read]
        history = kept
        if unseen:
            rows_written = [message_to_row(message) for message in unseen]
            history = merged(kept, _history_rows(thread_id, unseen, rows_written))
        return TurnStart(thread, children, queue, list(history))
