"""Messages and logs: the hot path of every model step, written with prebuilt Core statements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic_core import to_jsonable_python
from sqlalchemy import bindparam, delete, func, insert, null, or_, select, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import Log, Message
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import (
    COLUMN_OF,
    JSON_FIELDS,
    MESSAGE_COLUMNS,
    MESSAGE_FIELDS,
    history_rows,
    message_from_row,
    message_to_row,
    messages_from_rows,
)
from sa_core.store.modelcalls import ModelCallsMixin
from sa_core.store.pghistory import SUMMARY_KEY, apply_history_read, history_params, history_read_pg
from sa_core.store.rows import UNSET, Unset
from sa_core.store.timeline import Timeline, fork_prefix
from sa_core.store.timelinereads import PageShape, TimelineMixin

_M = t.messages.c
_L = t.logs.c
_LOG_FIELDS = frozenset(Log.model_fields)


def _select(*conditions: Any) -> Any:
    return select(*MESSAGE_COLUMNS).where(*conditions)


def _insert_all(table: Any, skip: tuple[str, ...] = ("seq",)) -> Prepared:
    """INSERT of every column but ``skip``; parameters are named after the columns."""
    names = [c.name for c in table.c if c.name not in skip]
    return Prepared(insert(table).values({name: bindparam(f"p_{name}") for name in names}))


class _ShapedInsert:
    """INSERTs of one row whose ``None`` values are written as ``NULL`` in the statement.

    The row stored is the same as with :func:`_insert_all`; only the ``None`` values are no
    longer parameters. Binding ``None`` costs the ``sqlite3`` driver a failed adapter lookup
    (an exception raised and cleared) per value, and most columns of a message are ``None``.
    One statement is prepared per set of ``None`` columns (a few per workload: tool results,
    assistant steps, user messages), at most :attr:`MAX_SHAPES`; further sets use the plain
    INSERT.
    """

    MAX_SHAPES = 64

    def __init__(self, table: Any, skip: tuple[str, ...] = ("seq",)) -> None:
        self._table = table
        self._names = [c.name for c in table.c if c.name not in skip]
        self.every = _insert_all(table, skip)
        """The INSERT binding every column (for several rows at once)."""
        self._shapes: dict[tuple[str, ...], Prepared] = {}

    def for_row(self, row: dict[str, Any]) -> Prepared:
        """The INSERT for ``row`` (parameters ``p_<column>``), its ``None`` columns as NULL."""
        nulls = tuple([key for key, value in row.items() if value is None])
        prepared = self._shapes.get(nulls)
        if prepared is None:
            prepared = self._shape(frozenset(key[2:] for key in nulls))
            if len(self._shapes) < self.MAX_SHAPES:
                self._shapes[nulls] = prepared
        return prepared

    def _shape(self, nulls: frozenset[str]) -> Prepared:
        values = {name: null() if name in nulls else bindparam(f"p_{name}") for name in self._names}
        return Prepared(insert(self._table).values(values))


_INSERT = _ShapedInsert(t.messages)
_GET = Prepared(
    _select(_M.thread_id == bindparam("b_tid"), _M.id == bindparam("b_id")), MESSAGE_COLUMNS
)
_GET_BY_ID = Prepared(_select(_M.id == bindparam("b_id")), MESSAGE_COLUMNS)
_HISTORY = Prepared(
    _select(
        _M.thread_id == bindparam("b_tid"),
        _M.depth == 0,
        _M.created_at > bindparam("b_since"),
        or_(_M.status.is_(None), _M.status != "pending"),
    ).order_by(_M.created_at, _M.seq),
    MESSAGE_COLUMNS,
)
_BY_PARENT = Prepared(
    _select(_M.thread_id == bindparam("b_tid"), _M.parent_id == bindparam("b_pid")).order_by(
        _M.created_at, _M.seq
    ),
    MESSAGE_COLUMNS,
)
_DELETE = Prepared(
    delete(t.messages).where(_M.thread_id == bindparam("b_tid"), _M.id == bindparam("b_id"))
)
_INSERT_LOG = _ShapedInsert(t.logs)
_UPDATES: dict[tuple[tuple[str, ...], bool], Prepared] = {}


def _update_statement(keys: tuple[str, ...], returning: bool) -> Prepared:
    cached = _UPDATES.get((keys, returning))
    if cached is not None:
        return cached
    stmt = update(t.messages).where(_M.id == bindparam("b_id"))
    stmt = stmt.values({COLUMN_OF.get(key, key): bindparam(f"v_{key}") for key in keys})
    if returning:
        prepared = Prepared(stmt.returning(*MESSAGE_COLUMNS), MESSAGE_COLUMNS)
    else:
        prepared = Prepared(stmt)
    _UPDATES[(keys, returning)] = prepared
    return prepared


class MessagesMixin(TimelineMixin, ModelCallsMixin):
    """Messages and logs.

    A fork's or a rewound thread's messages are read through its timeline; an ``llm_call`` log
    is stored with the model call recorded for it.
    """

    async def insert_messages(
        self, messages: Sequence[Message], *, tx: Transaction | None = None
    ) -> None:
        """Insert messages; a zero ``created_at`` is set to now (on the model too).

        Raises:
            ValueError: A message has no ``thread_id``.

        """
        rows = []
        oldest: dict[str, int] = {}
        for message in messages:
            thread_id = message.thread_id
            if thread_id is None:
                raise ValueError(f"Message {message.id} has no thread_id; set it before storing.")
            if not message.created_at:
                message.created_at = now_us()
            rows.append(message_to_row(message))
            if thread_id not in oldest or message.created_at < oldest[thread_id]:
                oldest[thread_id] = message.created_at
        if not rows:
            return
        cache = self._caches.history
        tokens = {thread_id: cache.before_insert(thread_id) for thread_id in oldest}
        for thread_id, created_at in oldest.items():
            self._touched(thread_id, created_at)
        deferred = [Deferred(_INSERT.for_row(row), row) for row in rows]

        def op(conn: Connection) -> None:
            if len(rows) == 1:
                deferred[0].prepared.run(conn, rows[0])
            else:
                _INSERT.every.run_many(conn, rows)

        await self._write_deferred(deferred, tx, op=op)
        if any(tokens.values()):  # a token is a (never empty) tuple
            # a cached history takes the rows once they commit, instead of reading them back
            def keep() -> None:
                for thread_id, token in tokens.items():
                    if token is not None:
                        cache.appended(thread_id, token, history_rows(thread_id, messages, rows))

            transaction = tx if tx is not None else self._ambient()
            if transaction is None:
                keep()  # committed by the write itself
            else:
                transaction.after_commit(keep)

    async def update_message(
        self, message_id: str, fields: dict[str, Any], *, tx: Transaction | None = None
    ) -> Message | None:
        """Update fields of a message.

        Args:
            message_id: The message.
            fields: Message fields to set (models and lists of models are accepted).
            tx: An open transaction to write in.

        Returns:
            The updated message, or ``None`` when it does not exist.

        Raises:
            ValueError: An unknown field, or ``id``.

        """
        unknown = (set(fields) - MESSAGE_FIELDS) | ({"id"} & set(fields))
        if unknown:
            raise ValueError(f"update_message: unknown or read-only fields {sorted(unknown)}")
        params: dict[str, Any] = {"b_id": message_id}
        for key, value in fields.items():
            params[f"v_{key}"] = to_jsonable_python(value) if key in JSON_FIELDS else value
        keys = tuple(sorted(fields))

        def op(conn: Connection) -> Message | None:
            returning = conn.dialect.update_returning
            stmt = _update_statement(keys, returning) if keys else None
            if stmt is None or not returning:
                if stmt is not None and stmt.run(conn, params) == 0:
                    return None
                found = _GET_BY_ID.first(conn, params)
            else:
                found = stmt.first(conn, params)
            return message_from_row(found) if found is not None else None

        try:
            updated = await self._write(op, tx)
        except BaseException:
            self._caches.history.clear()  # the row may have changed; which thread is unknown
            raise
        if updated is not None:
            # a moved message may have left an earlier position: reload the whole history
            moved = "created_at" in fields
            self._touched(updated.thread_id, None if moved else updated.created_at)
        return updated

    async def get_message(
        self, thread_id: str, message_id: str, *, tx: Transaction | None = None
    ) -> Message | None:
        """Return one message of a thread's history (rewound ones included), or ``None``."""
        params = {"b_tid": thread_id, "b_id": message_id}

        def op(conn: Connection) -> Message | None:
            found = _GET.first(conn, params)
            return message_from_row(found) if found is not None else None

        found = await self._read(op, tx)
        if found is None:
            timeline = await self._timeline_of(thread_id, tx)
            if timeline is not None:
                return await self._view_message(timeline, message_id, tx)
        return found

    async def list_messages(
        self,
        thread_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "asc",
        include_silent: bool = False,
        max_depth: int | None = 0,
        statuses_excluded: Iterable[str] = (),
        parent_id: str | None | Unset = UNSET,
        include_rewound: bool = False,
        tx: Transaction | None = None,
    ) -> tuple[list[Message], int]:
        """List a thread's messages by ``created_at`` then insertion order.

        A fork lists its source's messages up to the cut, then its own; a rewound thread
        leaves out the messages its rewinds took back, unless ``include_rewound``.

        Args:
            thread_id: The thread.
            limit: Page size.
            offset: Rows to skip (in the chosen order).
            order: ``asc`` (oldest first) or ``desc`` (newest first).
            include_silent: Include silent messages.
            max_depth: Deepest ``depth`` included (``None``: every depth).
            statuses_excluded: Statuses left out (``None`` status is never excluded).
            parent_id: ``UNSET``: any; ``None``: messages without a parent; an id: its children.
            include_rewound: Include messages that rewinds took out of the history.
            tx: An open transaction to read in.

        Returns:
            The page and the count of every message matching the filters.

        """
        timeline = await self._timeline_of(thread_id, tx) or Timeline.own(thread_id)
        shape = PageShape(include_silent, max_depth, tuple(statuses_excluded), parent_id)
        segments = timeline.seen if include_rewound else timeline.segments
        return await self._view_page(
            segments, shape, order=order, limit=limit, offset=offset, tx=tx
        )

    async def history(
        self, thread_id: str, *, since: int | None = None, tx: Transaction | None = None
    ) -> list[Message]:
        """Load the engine's context: top-level (depth 0), non-pending messages, silent included.

        Outside a transaction, recent threads' histories are kept in a bounded cache and only
        the rows written since are loaded (:mod:`sa_core.store.caches`); the returned list is
        new, but its messages may be shared with other callers: do not change them in place
        (``model_copy`` them).

        Args:
            thread_id: The thread.
            since: Only messages created strictly after this time (µs).
            tx: An open transaction to read in.

        Returns:
            The messages, oldest first.

        """
        version = self.external_version()
        timeline = await self._timeline_of(thread_id, tx, version)
        if since is not None or tx is not None or self._ambient() is not None:
            return await self._load_history(thread_id, since, tx, timeline)
        cache = self._caches.history
        if not cache.check(version):
            if timeline is not None:
                return await self._timeline_history_pg(thread_id, timeline)
            if self._backend.dialect == "postgresql":
                return await self._read_history_pg(thread_id)
            return await self._load_history(thread_id, None, None)
        fillable = self._cache_fillable()
        found = cache.lookup(thread_id)
        if found is None:
            messages = await self._load_history(thread_id, None, None, timeline)
        else:
            kept, dirty_from = found
            if dirty_from is None:
                return list(kept)
            fresh = await self._load_history(thread_id, dirty_from - 1, None, timeline)
            cut = len(kept)  # oldest first: walk back over the rows written since
            while cut and kept[cut - 1].created_at >= dirty_from:
                cut -= 1
            messages = kept[:cut] + fresh
        if fillable:
            cache.store(thread_id, messages)
        return list(messages)

    async def _timeline_history_pg(self, thread_id: str, timeline: Timeline) -> list[Message]:
        """The history of a fork or a rewound thread on PostgreSQL.

        A fork's: the shared history (kept: it never changes), then its own messages read like
        any thread's (only the rows new since the last read). A rewound thread's: read whole.
        """
        key = fork_prefix(timeline, thread_id)
        if key is None:
            return await self._view_history(timeline, None, None)
        kept = self._caches.timelines.prefix(key)
        if kept is None:
            kept = await self._view_history(Timeline(key, key), None, None)
            self._caches.timelines.keep_prefix(key, kept)
        return kept + await self._read_history_pg(thread_id)

    async def _read_history_pg(self, thread_id: str) -> list[Message]:
        """The history on PostgreSQL: only the rows new since the kept one (``pghistory``)."""
        while True:  # twice at most: a changed kept history is dropped, then read whole
            held = self._caches.read_histories.get(thread_id)
            params = history_params(thread_id, held)
            rows = await self._fetch(history_read_pg(), params, None)
            found = apply_history_read(self._caches, thread_id, held, rows[0][SUMMARY_KEY])
            if found is not None:
                return list(found[0])

    async def _load_history(
        self,
        thread_id: str,
        since: int | None,
        tx: Transaction | None,
        timeline: Timeline | None = None,
    ) -> list[Message]:
        if timeline is not None:
            return await self._view_history(timeline, since, tx)
        params = {"b_tid": thread_id, "b_since": -1 if since is None else since}
        rows = await self._fetch(_HISTORY, params, tx)
        if self._backend.dialect == "postgresql":  # read whole every time: reuse what is equal
            kept = self._caches.rows
            return [kept.message(row, message_from_row) for row in rows]
        return messages_from_rows(rows)

    def keeps_history(self, thread_id: str) -> bool:
        """Whether the store keeps the thread's history between turns.

        Its next :meth:`history` then reads only the rows written since, and returns the same
        message objects for the rest: caches built on them (the engine's conversions) can keep
        the thread too, and share its messages instead of holding copies.
        """
        if self._backend.dialect == "postgresql":
            return self._caches.read_histories.holds(thread_id)
        return self._caches.history.holds(thread_id)

    def _touched(self, thread_id: str | None, created_at: int | None) -> None:
        """Mark a thread's cached history changed from ``created_at`` on (see ``caches``)."""
        if thread_id is not None:
            self._caches.history.touched(thread_id, created_at)

    async def messages_by_parent(
        self, thread_id: str, parent_id: str, *, tx: Transaction | None = None
    ) -> list[Message]:
        """Messages whose ``parent_id`` is the given message, oldest first."""
        timeline = await self._timeline_of(thread_id, tx)
        if timeline is not None:
            return await self._view_by_parent(timeline, parent_id, tx)
        params = {"b_tid": thread_id, "b_pid": parent_id}
        return await self._read(lambda conn: messages_from_rows(_BY_PARENT.rows(conn, params)), tx)

    async def delete_message(
        self, thread_id: str, message_id: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete one message; returns whether it existed."""
        params = {"b_tid": thread_id, "b_id": message_id}
        self._touched(thread_id, None)
        return await self._write(lambda conn: _DELETE.run(conn, params) > 0, tx)

    async def insert_log(self, thread_id: str, log: Log, *, tx: Transaction | None = None) -> None:
        """Insert a log row of a thread."""
        dumped = log.model_dump(mode="json")
        row = {f"p_{key}": value for key, value in dumped.items() if key in _LOG_FIELDS}
        extra = {key: value for key, value in dumped.items() if key not in _LOG_FIELDS}
        row["p_thread_id"] = thread_id
        row["p_extra"] = extra or None
        # a model call's recording rides in its row (its request's parts, when new, before it)
        staged = self.staged_calls.pop(log.id, None) if self.staged_calls else None
        row["p_recording"], parts = (None, None) if staged is None else staged
        write = Deferred(_INSERT_LOG.for_row(row), row)
        if parts is None or parts.stored:
            await self._write_deferred([write], tx)
            return
        await self._write_deferred([self.parts_write(parts, log.created_at, tx), write], tx)
        if tx is None:  # committed
            parts.mark_stored()

    async def list_logs(
        self,
        thread_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "desc",
        tx: Transaction | None = None,
    ) -> tuple[list[Log], int]:
        """List a thread's logs (newest first by default) and their total count."""
        sort = (_L.created_at, _L.seq) if order == "asc" else (_L.created_at.desc(), _L.seq.desc())
        columns = [c for c in t.logs.c if c.name not in ("seq", "thread_id", "recording")]
        page = (
            select(*columns)
            .where(_L.thread_id == thread_id)
            .order_by(*sort)
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(t.logs).where(_L.thread_id == thread_id)

        def op(conn: Connection) -> tuple[list[Log], int]:
            logs = []
            for row in conn.execute(page).mappings():
                values = dict(row)
                extra = values.pop("extra") or {}
                values["data"] = values["data"] or {}
                logs.append(Log.model_validate({**extra, **values}))
            return logs, int(conn.execute(count).scalar_one())

        return await self._read(op, tx)
