"""Messages read through a thread's timeline (the history of a fork or a rewound thread).

Each segment of a timeline is one range query on ``(thread_id, created_at)``, the index every
history read uses; the segments are joined with ``UNION ALL`` and ordered by the database,
which merges the already ordered parts (SQLite's and PostgreSQL's merge of ordered inputs), so
a page of a fork's messages stops reading as early as a page of a thread's own.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, literal_column, or_, select, union_all, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import Message
from sa_core.store import tables as t
from sa_core.store.fast import Prepared
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import MESSAGE_COLUMNS, message_from_row, messages_from_rows
from sa_core.store.storebase import StoreBase
from sa_core.store.timeline import MISSING, Missing, Segment, Timeline

_M = t.messages.c
_SEQ = _M.seq.label("seq_")
_NO_END = 2**62
"""``upto`` of a segment without an end, as a bound."""
_TIMELINE = Prepared(
    select(t.threads.c.timeline).where(t.threads.c.id == bindparam("b_id")),
    [t.threads.c.timeline],
)


def segment_where(segment: Segment) -> list[Any]:
    """The conditions selecting a segment's messages."""
    where = [_M.thread_id == segment.thread_id, _M.created_at > segment.after]
    if segment.upto is not None:
        where.append(_M.created_at <= segment.upto)
    return where


def _order(compound: Any, order: str) -> Any:
    keys: tuple[Any, ...] = (literal_column("created_at"), literal_column("seq_"))
    if order == "desc":
        return compound.order_by(*(key.desc() for key in keys))
    return compound.order_by(*keys)


@functools.cache
def _history_union(count: int) -> Prepared:
    """The engine's history (see ``MessagesMixin.history``) over ``count`` segments."""
    arms = [
        select(*MESSAGE_COLUMNS, _SEQ).where(
            _M.thread_id == bindparam(f"b_t{i}"),
            _M.depth == 0,
            _M.created_at > bindparam(f"b_a{i}"),
            _M.created_at <= bindparam(f"b_u{i}"),
            or_(_M.status.is_(None), _M.status != "pending"),
        )
        for i in range(count)
    ]
    stmt = arms[0] if count == 1 else _order(union_all(*arms), "asc")
    return Prepared(stmt, [*MESSAGE_COLUMNS, _SEQ])


def _history_params(segments: Sequence[Segment]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for i, segment in enumerate(segments):
        params[f"b_t{i}"] = segment.thread_id
        params[f"b_a{i}"] = segment.after
        params[f"b_u{i}"] = _NO_END if segment.upto is None else segment.upto
    return params


def _messages(rows: list[dict[str, Any]]) -> list[Message]:
    for row in rows:
        row.pop("seq_", None)
    return messages_from_rows(rows)


class TimelineMixin(StoreBase):
    """Thread timelines: looked up (cached), stored, and the message reads through them."""

    async def thread_timeline(self, thread_id: str, *, tx: Transaction | None = None) -> Timeline:
        """The thread's timeline (a thread whose history is its own gets :meth:`Timeline.own`)."""
        found = await self._timeline_of(thread_id, tx)
        return Timeline.own(thread_id) if found is None else found

    async def _timeline_of(
        self,
        thread_id: str,
        tx: Transaction | None,
        version: int | None | Missing = MISSING,
    ) -> Timeline | None:
        """The thread's timeline, or ``None`` when its history is all its own (cached).

        ``version``: the store's external version, when the caller has just read it.
        """
        cache = self._caches.timelines
        if isinstance(version, Missing):
            version = self.external_version()
        found = cache.get(thread_id, version)
        if found is not MISSING:
            return found  # type: ignore[return-value]
        rows = await self._fetch(_TIMELINE, {"b_id": thread_id}, tx)
        stored = rows[0]["timeline"] if rows else None
        if self._cache_fillable():
            cache.put(thread_id, stored, version)
        return Timeline.of(thread_id, stored) if stored else None

    def note_timeline(self, thread_id: str, stored: dict[str, Any] | None) -> None:
        """A read of the thread's row found ``stored``: remember it where nothing else can tell.

        Only for a backend without an external version (PostgreSQL): there a worker learns of
        another worker's fork or rewind by reading the row, as every turn does when it starts.
        """
        if self.external_version() is None and self._cache_fillable():
            self._caches.timelines.put(thread_id, stored, None)

    async def set_timeline(
        self, thread_id: str, timeline: Timeline | None, *, tx: Transaction
    ) -> None:
        """Store the thread's timeline (``None``: its own history) in ``tx``.

        Once ``tx`` commits, the thread's cached timeline and history are forgotten.
        """
        stored = None if timeline is None or timeline.is_own else timeline.to_json()
        stmt = update(t.threads).where(t.threads.c.id == thread_id).values(timeline=stored)
        await self._write(lambda conn: conn.execute(stmt), tx)
        caches = self._caches

        def forget() -> None:
            caches.timelines.drop(thread_id)
            caches.history.drop(thread_id)
            caches.read_histories.drop(thread_id)

        forget()
        tx.after_commit(forget)

    async def _view_history(
        self, timeline: Timeline, since: int | None, tx: Transaction | None
    ) -> list[Message]:
        """The engine's history through a timeline, created after ``since`` (all without)."""
        segments = timeline.since(since)
        if not segments:
            return []
        rows = await self._fetch(_history_union(len(segments)), _history_params(segments), tx)
        if self._backend.dialect == "postgresql":  # read whole every time: reuse what is equal
            kept = self._caches.rows
            for row in rows:
                row.pop("seq_", None)
            return [kept.message(row, message_from_row) for row in rows]
        return _messages(rows)

    async def _view_page(
        self,
        segments: Sequence[Segment],
        conditions: list[Any],
        *,
        order: str,
        limit: int,
        offset: int,
        tx: Transaction | None,
    ) -> tuple[list[Message], int]:
        """A page of the messages of ``segments`` matching ``conditions``, and their count."""
        arms = [
            select(*MESSAGE_COLUMNS, _SEQ).where(*segment_where(s), *conditions) for s in segments
        ]
        page = _order(union_all(*arms), order).limit(limit).offset(offset)
        counts = [
            select(func.count()).select_from(t.messages).where(*segment_where(s), *conditions)
            for s in segments
        ]

        def op(conn: Connection) -> tuple[list[Message], int]:
            rows = [dict(row) for row in conn.execute(page).mappings()]
            total = sum(int(conn.execute(count).scalar_one()) for count in counts)
            return _messages(rows), total

        return await self._read(op, tx)

    async def view_tail(
        self,
        segments: Sequence[Segment],
        *,
        limit: int,
        offset: int = 0,
        tx: Transaction | None = None,
    ) -> list[Message]:
        """Top-level messages of ``segments``, newest first (a page of ``limit`` from ``offset``).

        What a cut looks at: the end of a history, read backwards only as far as needed.
        """
        arms = [
            select(*MESSAGE_COLUMNS, _SEQ).where(
                *segment_where(s), _M.depth == 0, _M.parent_id.is_(None)
            )
            for s in segments
        ]
        if not arms:
            return []
        stmt = _order(union_all(*arms), "desc").limit(limit).offset(offset)
        return await self._read(
            lambda conn: _messages([dict(row) for row in conn.execute(stmt).mappings()]), tx
        )

    async def _view_message(
        self, timeline: Timeline, message_id: str, tx: Transaction | None
    ) -> Message | None:
        """A message of the timeline's history (rewound ones included) by id, else ``None``."""
        stmt = select(*MESSAGE_COLUMNS).where(_M.id == message_id)

        def op(conn: Connection) -> Message | None:
            row = conn.execute(stmt).mappings().first()
            if row is None or not timeline.has_seen(row["thread_id"], row["created_at"]):
                return None
            return messages_from_rows([dict(row)])[0]

        return await self._read(op, tx)

    async def _view_by_parent(
        self, timeline: Timeline, parent_id: str, tx: Transaction | None
    ) -> list[Message]:
        """Messages whose ``parent_id`` is the given message, through a timeline."""
        threads = sorted({segment.thread_id for segment in timeline.seen})
        stmt = (
            select(*MESSAGE_COLUMNS)
            .where(_M.thread_id.in_(threads), _M.parent_id == parent_id)
            .order_by(_M.created_at, _M.seq)
        )

        def op(conn: Connection) -> list[Message]:
            rows = [dict(row) for row in conn.execute(stmt).mappings()]
            return messages_from_rows(
                [row for row in rows if timeline.has_seen(row["thread_id"], row["created_at"])]
            )

        return await self._read(op, tx)
