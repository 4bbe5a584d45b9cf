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

from sqlalchemy import JSON, String, bindparam, func, literal, select, type_coerce

from sa_core.store import tables as t
from sa_core.store.executions import RECORD_COLUMNS, ExecutionsMixin, record_from_row
from sa_core.store.fast import Prepared
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import history_rows, message_to_row
from sa_core.store.pghistory import (
    apply_history_read,
    history_params,
    history_since_known,
    merged,
    without_seq,
)
from sa_core.store.queue import QueueMixin, entry_from_row
from sa_core.store.threads import KIDS_KEY, ThreadsMixin, get_with_children_pg, thread_with_children

if TYPE_CHECKING:
    from sa_core.spec import SubagentRegistryEntry
    from sa_core.spec.records import Message
    from sa_core.store.caches import ReadHistory
    from sa_core.store.execution_record import ExecutionRecord
    from sa_core.store.rows import QueueEntry, ThreadRow

_QUEUE_KEY = "queue_entries"
_HISTORY_KEY = "history_entries"
_EXECUTION_KEY = "execution_record"


@dataclass(slots=True)
class TurnStart:
    """A thread as the transaction that owes its turn left it."""

    row: ThreadRow
    children: list[SubagentRegistryEntry]
    queue: list[QueueEntry]
    history: list[Message] | None
    """The engine's context (as :meth:`MessagesMixin.history` loads it), or ``None`` when it
    was not read here (the engine loads it)."""
    execution: ExecutionRecord | None = None
    """The thread's execution record (read by :meth:`TurnStartMixin.read_runner_start` only;
    ``None`` there when the thread never ran)."""


@functools.cache
def _turn_start_pg() -> Prepared:
    """Thread row, registry, queue and history of a thread in one PostgreSQL query.

    The registry, queue and history come back as JSON arrays of rows, in their orders. Built
    on first use: SQLite stores never import the PostgreSQL dialect for it.
    """
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    def rows_of(table: Any, *conditions: Any) -> Any:
        found = select(*table.c).where(*conditions).subquery()
        ordered = aggregate_order_by(found.table_valued(), found.c.created_at, found.c.seq)
        return select(func.json_agg(ordered)).scalar_subquery()

    thread_id: Any = bindparam("b_id")
    q = t.queue.c
    queue = type_coerce(rows_of(t.queue, q.thread_id == thread_id), JSON).label(_QUEUE_KEY)
    history = type_coerce(history_since_known(thread_id), JSON).label(_HISTORY_KEY)
    base = get_with_children_pg()
    stmt: Any = base.stmt
    return Prepared(stmt.add_columns(queue, history), [*base.columns, queue, history])


@functools.cache
def _runner_start_pg() -> Prepared:
    """:func:`_turn_start_pg` and the thread's execution record, in one query."""
    # each key typed as text: PostgreSQL cannot infer the type of an untyped parameter there
    pairs = [(literal(c.name, String), c) for c in RECORD_COLUMNS]
    fields = func.json_build_object(*(item for pair in pairs for item in pair))
    where = t.executions.c.thread_id == bindparam("b_id")
    found = select(fields).where(where).scalar_subquery()
    record = type_coerce(found, JSON).label(_EXECUTION_KEY)
    base = _turn_start_pg()
    stmt: Any = base.stmt
    return Prepared(stmt.add_columns(record), [*base.columns, record])


class TurnStartMixin(ThreadsMixin, QueueMixin, ExecutionsMixin):
    """The read that ends the transaction owing a turn, and a runner's read as it starts."""

    async def read_runner_start(self, thread_id: str) -> TurnStart | None:
        """What a runner woken for a thread's queued or owed work reads, under its lease.

        The thread row, registry, queue, execution record and (on PostgreSQL) history, in one
        query there: a worker woken by another's notification otherwise reads the row, the
        record and the queue one round trip each, and the history at the first step.

        Returns:
            The thread, or ``None`` when it is gone.
        """
        if self._backend.dialect != "postgresql":
            start = await self._turn_start_apart(thread_id, None)
            if start is not None:
                start.execution = await self.get_execution(thread_id)
            return start
        held = self._caches.read_histories.get(thread_id)
        rows = await self._fetch(_runner_start_pg(), history_params(thread_id, held), None)
        if not rows:
            self._caches.read_histories.drop(thread_id)
            return None
        row = rows[0]
        execution = row.pop(_EXECUTION_KEY)
        start = self._turn_start_of(thread_id, held, row, ())
        start.execution = record_from_row(execution) if execution is not None else None
        return start

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
        if self._backend.dialect != "postgresql":
            return await self._turn_start_apart(thread_id, tx)
        held = self._caches.read_histories.get(thread_id)
        query = _turn_start_pg()
        params = history_params(thread_id, held)
        rows = await self._check_tx(tx).read_with_writes(query, params, last=True)
        if rows is None:
            rows = await self._fetch(query, params, tx)
        if not rows:
            self._caches.read_histories.drop(thread_id)
            return None
        return self._turn_start_of(thread_id, held, rows[0], written)

    async def _turn_start_apart(self, thread_id: str, tx: Transaction | None) -> TurnStart | None:
        """The row with its registry, and the queue, read as usual (the history is left out)."""
        found = await self.get_thread_with_children(thread_id, tx=tx)
        if found is None:
            return None
        return TurnStart(found[0], found[1], await self.list_queue(thread_id, tx=tx), None)

    def _turn_start_of(
        self,
        thread_id: str,
        held: ReadHistory | None,
        row: dict[str, Any],
        written: Sequence[Message],
    ) -> TurnStart:
        """The :class:`TurnStart` of a row of :func:`_turn_start_pg`.

        ``written``: see :meth:`read_turn_start`.
        """
        queue = [entry_from_row(without_seq(entry)) for entry in row.pop(_QUEUE_KEY) or []]
        summary = row.pop(_HISTORY_KEY)
        thread, children = thread_with_children(row, row.pop(KIDS_KEY) or [])
        self.note_timeline(thread_id, thread.timeline)
        shared: list[Message] = []
        if thread.timeline:  # a fork: the history it shares (kept), then its own, read here
            kept_shared = self._caches.timelines.shared_history(thread_id, thread.timeline)
            if kept_shared is None:  # not kept yet, or a rewound thread: read through it
                return TurnStart(thread, children, queue, None)
            shared = kept_shared
        history_read = apply_history_read(self._caches, thread_id, held, summary)
        if history_read is None:  # an older row changed: the engine reads the history whole
            return TurnStart(thread, children, queue, None)
        kept, fetched = history_read
        read = {message.id for message in fetched}  # what it wrote can only be new
        unseen = [message for message in written if message.id not in read]
        history = kept
        if unseen:
            rows_written = [message_to_row(message) for message in unseen]
            history = merged(kept, history_rows(thread_id, unseen, rows_written))
        return TurnStart(thread, children, queue, [*shared, *history])
