"""Messages and logs: the hot path of every model step, written with prebuilt Core statements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import isfinite
from operator import itemgetter
from typing import Any, Literal

from pydantic_core import to_jsonable_python
from sqlalchemy import bindparam, delete, func, insert, null, or_, select, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import Log, Message
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.rows import UNSET, Unset
from sa_core.store.storebase import StoreBase

_M = t.messages.c
_L = t.logs.c
MESSAGE_FIELDS = frozenset(Message.model_fields)
_JSON_FIELDS = frozenset({"tool_calls", "attachments", "metadata", "reasoning_details"})
_COLUMN = {"metadata": "meta"}
_FIELD = {column: field for field, column in _COLUMN.items()}
MESSAGE_COLUMNS = [
    column.label(_FIELD[column.name]) if column.name in _FIELD else column
    for column in t.messages.c
    if column.name != "seq"
]
"""The columns a message is read from, each named as its field (``meta`` as ``metadata``).

Read rows are dicts in the order of the message's fields, then ``extra``."""
_ROW_COLUMNS = [c.name for c in t.messages.c if c.name != "seq"]
"""The table's column names (the insert parameters are ``p_<column>``)."""
_READ_KEYS = tuple(column.key for column in MESSAGE_COLUMNS)
_STORED = {
    key: _COLUMN.get(key, key)
    for key in Message.model_fields
    if _COLUMN.get(key, key) in t.messages.c and key not in ("seq", "extra")
}
"""Message field -> column; any other field (or extra) is kept in the ``extra`` JSON column."""
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


_PARAMS = [(key, f"p_{column}") for key, column in _STORED.items()]
"""(Message field, insert parameter) of every stored field."""
_PLAIN_PARAMS = [(key, param) for key, param in _PARAMS if key not in _JSON_FIELDS]
"""The stored fields whose values are stored as they are (strings, numbers, booleans)."""
_JSON_PARAMS = [(key, param) for key, param in _PARAMS if key in _JSON_FIELDS]
"""The stored fields kept as JSON documents (models and lists of them are dumped first)."""
_PLAIN_NAMES = tuple(param for _, param in _PLAIN_PARAMS)
_PLAIN_VALUES = itemgetter(*(key for key, _ in _PLAIN_PARAMS))
_SERIALIZER = Message.__pydantic_serializer__


def message_to_row(message: Message) -> dict[str, Any]:
    """Convert a message to ``messages`` insert parameters (extras go to ``extra``).

    The same parameters as ``message.model_dump(mode="json")`` gives, dumping only the fields
    that need it: the scalar fields are taken as they are, and the JSON fields that are set
    (usually none, or only ``tool_calls``) go through the model's serializer.
    """
    if message.model_extra:
        return _row_with_extras(message)
    values = message.__dict__
    params = dict(zip(_PLAIN_NAMES, _PLAIN_VALUES(values), strict=True))
    present = {key for key, _ in _JSON_PARAMS if values[key] is not None}
    if present:
        dumped = _SERIALIZER.to_python(message, mode="json", include=present)
        for key, param in _JSON_PARAMS:
            params[param] = dumped.get(key)
    else:
        for _, param in _JSON_PARAMS:
            params[param] = None
    params["p_extra"] = None
    return params


def _row_with_extras(message: Message) -> dict[str, Any]:
    """:func:`message_to_row` of a message with extra fields (kept in the ``extra`` column)."""
    dumped = message.model_dump(mode="json")
    params = {param: dumped[key] for key, param in _PARAMS}
    params["p_extra"] = {key: value for key, value in dumped.items() if key not in _STORED} or None
    return params


def message_from_row(row: dict[str, Any]) -> Message:
    """Build a :class:`Message` from a row read with :data:`MESSAGE_COLUMNS` (consumed)."""
    extra = row.pop("extra")
    if extra:
        for key, value in extra.items():
            row.setdefault(key, value)
    elif row["tool_calls"] is None and row["attachments"] is None and IN_FIELD_ORDER:
        return _stored_message(row)
    return Message.model_validate(row)


IN_FIELD_ORDER = (*Message.model_fields, "extra") == _READ_KEYS
"""Whether the table's columns are the message's fields in order, then ``extra`` (a read row
without ``extra`` is then a message's ``__dict__``)."""
_new, _set = object.__new__, object.__setattr__


def _stored_message(fields: dict[str, Any]) -> Message:
    """The :class:`Message` of a read row with no extras and no nested model to build.

    Equal to what ``Message.model_validate`` returns for it, field for field and type for type
    (the columns' result processors give the Python types: ``bool``, ``int``, decoded JSON), in
    the same order, without checking again what was checked when the message was written. A
    history read builds most of its messages this way, at about a third of the cost; pydantic's
    ``model_construct`` does the same in Python, slower than validating a model of 31 fields.
    """
    message = _new(Message)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", set(MESSAGE_FIELDS))
    _set(message, "__pydantic_extra__", {})
    _set(message, "__pydantic_private__", None)
    return message


def _history_rows(
    thread_id: str, messages: Sequence[Message], rows: list[dict[str, Any]]
) -> list[Message]:
    """The messages :meth:`MessagesMixin.history` would load from these inserted rows.

    In stored order (creation time, then insertion). A message whose free-form values are
    plain JSON already reads back equal to itself and is kept as it is (no copy, no
    validation); any other is rebuilt from its row the way a reload builds it.
    """
    found = []
    for message, row in zip(messages, rows, strict=True):
        if message.thread_id != thread_id or message.depth != 0 or message.status == "pending":
            continue
        metadata, details, extra = message.metadata, message.reasoning_details, message.model_extra
        if (
            (metadata is None or _plain_json(metadata))
            and (details is None or _plain_json(details))
            and (not extra or _plain_json(extra))
        ):
            found.append(message)
        else:
            values = (row[f"p_{column}"] for column in _ROW_COLUMNS)
            found.append(message_from_row(dict(zip(_READ_KEYS, values, strict=True))))
    found.sort(key=lambda message: message.created_at)
    return found


def _plain_json(value: Any) -> bool:
    """Whether a value reads back from JSON as itself (str keys, JSON scalars, lists).

    A float that is not finite is not: the model's JSON dump stores it as ``null``.
    """
    if value is None or isinstance(value, (str, int)):
        return True
    if isinstance(value, float):
        return isfinite(value)
    if isinstance(value, list):
        return all(_plain_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_json(item) for key, item in value.items())
    return False


def _messages(rows: list[dict[str, Any]]) -> list[Message]:
    return [message_from_row(row) for row in rows]


def _update_statement(keys: tuple[str, ...], returning: bool) -> Prepared:
    cached = _UPDATES.get((keys, returning))
    if cached is not None:
        return cached
    stmt = update(t.messages).where(_M.id == bindparam("b_id"))
    stmt = stmt.values({_COLUMN.get(key, key): bindparam(f"v_{key}") for key in keys})
    if returning:
        prepared = Prepared(stmt.returning(*MESSAGE_COLUMNS), MESSAGE_COLUMNS)
    else:
        prepared = Prepared(stmt)
    _UPDATES[(keys, returning)] = prepared
    return prepared


class MessagesMixin(StoreBase):
    """Messages and logs."""

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
        if any(token is not None for token in tokens.values()):
            # a cached history takes the rows once they commit, instead of reading them back
            def keep() -> None:
                for thread_id, token in tokens.items():
                    if token is not None:
                        cache.appended(thread_id, token, _history_rows(thread_id, messages, rows))

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
            params[f"v_{key}"] = to_jsonable_python(value) if key in _JSON_FIELDS else value
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
        """Return one message of a thread, or ``None``."""
        params = {"b_tid": thread_id, "b_id": message_id}

        def op(conn: Connection) -> Message | None:
            found = _GET.first(conn, params)
            return message_from_row(found) if found is not None else None

        return await self._read(op, tx)

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
        tx: Transaction | None = None,
    ) -> tuple[list[Message], int]:
        """List a thread's messages by ``created_at`` then insertion order.

        Args:
            thread_id: The thread.
            limit: Page size.
            offset: Rows to skip (in the chosen order).
            order: ``asc`` (oldest first) or ``desc`` (newest first).
            include_silent: Include silent messages.
            max_depth: Deepest ``depth`` included (``None``: every depth).
            statuses_excluded: Statuses left out (``None`` status is never excluded).
            parent_id: ``UNSET``: any; ``None``: messages without a parent; an id: its children.
            tx: An open transaction to read in.

        Returns:
            The page and the count of every message matching the filters.

        """
        conditions: list[Any] = [_M.thread_id == thread_id]
        if not include_silent:
            conditions.append(_M.silent.is_(False))
        if max_depth is not None:
            conditions.append(_M.depth <= max_depth)
        excluded = list(statuses_excluded)
        if excluded:
            conditions.append(or_(_M.status.is_(None), _M.status.not_in(excluded)))
        if not isinstance(parent_id, Unset):
            conditions.append(
                _M.parent_id.is_(None) if parent_id is None else _M.parent_id == parent_id
            )
        sort = (_M.created_at, _M.seq) if order == "asc" else (_M.created_at.desc(), _M.seq.desc())
        page = (
            select(*MESSAGE_COLUMNS).where(*conditions).order_by(*sort).limit(limit).offset(offset)
        )
        count = select(func.count()).select_from(t.messages).where(*conditions)

        def op(conn: Connection) -> tuple[list[Message], int]:
            rows = _messages([dict(row) for row in conn.execute(page).mappings()])
            return rows, int(conn.execute(count).scalar_one())

        return await self._read(op, tx)

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
        if since is not None or tx is not None or self._ambient() is not None:
            return await self._load_history(thread_id, since, tx)
        cache = self._caches.history
        if not cache.check(self.external_version()):
            if self._backend.dialect == "postgresql":
                return await self._read_history_pg(thread_id)
            return await self._load_history(thread_id, None, None)
        fillable = self._cache_fillable()
        found = cache.lookup(thread_id)
        if found is None:
            messages = await self._load_history(thread_id, None, None)
        else:
            kept, dirty_from = found
            if dirty_from is None:
                return list(kept)
            fresh = await self._load_history(thread_id, dirty_from - 1, None)
            cut = len(kept)  # oldest first: walk back over the rows written since
            while cut and kept[cut - 1].created_at >= dirty_from:
                cut -= 1
            messages = kept[:cut] + fresh
        if fillable:
            cache.store(thread_id, messages)
        return list(messages)

    async def _read_history_pg(self, thread_id: str) -> list[Message]:
        """The history on PostgreSQL: only the rows new since the kept one (``pghistory``)."""
        from sa_core.store.pghistory import (
            SUMMARY_KEY,
            apply_history_read,
            history_params,
            history_read_pg,
        )

        while True:  # twice at most: a changed kept history is dropped, then read whole
            held = self._caches.read_histories.get(thread_id)
            params = history_params(thread_id, held)
            rows = await self._fetch(history_read_pg(), params, None)
            found = apply_history_read(self._caches, thread_id, held, rows[0][SUMMARY_KEY])
            if found is not None:
                return list(found[0])

    async def _load_history(
        self, thread_id: str, since: int | None, tx: Transaction | None
    ) -> list[Message]:
        params = {"b_tid": thread_id, "b_since": -1 if since is None else since}
        rows = await self._fetch(_HISTORY, params, tx)
        if self._backend.dialect == "postgresql":  # read whole every time: reuse what is equal
            kept = self._caches.rows
            return [kept.message(row, message_from_row) for row in rows]
        return _messages(rows)

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
        params = {"b_tid": thread_id, "b_pid": parent_id}
        return await self._read(lambda conn: _messages(_BY_PARENT.rows(conn, params)), tx)

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
        await self._write_deferred([Deferred(_INSERT_LOG.for_row(row), row)], tx)

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
        columns = [c for c in t.logs.c if c.name not in ("seq", "thread_id")]
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
