"""Messages read through a thread's timeline (the history of a fork or a rewound thread).

A page of messages (``list_messages``) is read this way for every thread (a thread whose
history is its own is one segment), with statements prepared once per shape of filters. Each
segment of a timeline is one range query on ``(thread_id, created_at)``, the index every
history read uses; the segments are joined with ``UNION ALL`` and ordered by the database,
which merges the already ordered parts (SQLite's and PostgreSQL's merge of ordered inputs), so
a page of a fork's messages stops reading as early as a page of a thread's own.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, literal_column, or_, select, union_all, update
from sqlalchemy.engine import Connection

from sa_core.spec.records import Message
from sa_core.store import tables as t
from sa_core.store.fast import Prepared
from sa_core.store.interface import Transaction
from sa_core.store.messagerows import MESSAGE_COLUMNS, message_from_row, messages_from_rows
from sa_core.store.rows import UNSET, Unset
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


@dataclass(frozen=True, slots=True)
class PageShape:
    """The filters of a page of messages (the arguments of ``list_messages``)."""

    include_silent: bool
    max_depth: int | None
    excluded: tuple[str, ...]
    parent: str | None | Unset

    def conditions(self) -> list[Any]:
        """The filters as conditions on ``messages`` (values as bound parameters)."""
        where: list[Any] = []
        if not self.include_silent:
            where.append(_M.silent.is_(False))
        if self.max_depth is not None:
            where.append(_M.depth <= bindparam("b_depth"))
        if self.excluded:
            where.append(or_(_M.status.is_(None), _M.status.not_in(self.excluded)))
        if self.parent is None:
            where.append(_M.parent_id.is_(None))
        elif not isinstance(self.parent, Unset):
            where.append(_M.parent_id == bindparam("b_pid"))
        return where

    def params(self) -> dict[str, Any]:
        """The values of the bound parameters of :meth:`conditions`."""
        return {"b_depth": self.max_depth, "b_pid": self.parent}

    def key(self) -> tuple[Any, ...]:
        """What makes two shapes compile to the same statement."""
        parent = "none" if self.parent is None else "id"
        if isinstance(self.parent, Unset):
            parent = "any"
        return (self.include_silent, self.max_depth is None, self.excluded, parent)


@functools.lru_cache(maxsize=256)
def _page_statements_for(count: int, key: tuple[Any, ...], order: str) -> tuple[Prepared, Prepared]:
    silent, no_depth, excluded, parent = key
    shape = PageShape(
        include_silent=silent,
        max_depth=None if no_depth else 0,
        excluded=excluded,
        parent=UNSET if parent == "any" else None if parent == "none" else "id",
    )
    where = shape.conditions()
    arms = [select(*MESSAGE_COLUMNS, _SEQ).where(*_arm_where(i), *where) for i in range(count)]
    page: Any = (
        arms[0].order_by(*_arm_order(order)) if count == 1 else _order(union_all(*arms), order)
    )
    page = page.limit(bindparam("b_limit")).offset(bindparam("b_offset"))
    counts = [
        select(func.count()).select_from(t.messages).where(*_arm_where(i), *where).scalar_subquery()
        for i in range(count)
    ]
    total: Any = counts[0]
    for more in counts[1:]:
        total = total + more
    total = total.label("total")
    return Prepared(page, [*MESSAGE_COLUMNS, _SEQ]), Prepared(select(total), [total])


def _page_statements(count: int, shape: PageShape, order: str) -> tuple[Prepared, Prepared]:
    """The page and count statements of ``count`` segments of a shape (built once each)."""
    return _page_statements_for(count, shape.key(), order)


def _arm_where(i: int) -> list[Any]:
    return [
        _M.thread_id == bindparam(f"b_t{i}"),
        _M.created_at > bindparam(f"b_a{i}"),
        _M.created_at <= bindparam(f"b_u{i}"),
    ]


def _arm_order(order: str) -> tuple[Any, ...]:
    if order == "desc":
        return (_M.created_at.desc(), _M.seq.desc())
    return (_M.created_at, _M.seq)


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

        Only on PostgreSQL (no external version tells of other workers' writes): there a worker
        learns of another worker's fork or rewind by reading the row, as every turn does when it
        starts. (Asked on every row read, so it costs a comparison, not a query.)
        """
        if self._backend.dialect == "postgresql" and self._cache_fillable():
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
        shape: PageShape,
        *,
        order: str,
        limit: int,
        offset: int,
        tx: Transaction | None,
    ) -> tuple[list[Message], int]:
        """A page of the messages of ``segments`` of a shape (filters), and their count."""
        page, count = _page_statements(len(segments), shape, order)
        params = _history_params(segments)
        params.update(shape.params(), b_limit=limit, b_offset=offset)

        def op(conn: Connection) -> tuple[list[Message], int]:
            rows = page.rows(conn, params)
            total = count.rows(conn, params)[0]["total"]
            return _messages(rows), int(total or 0)

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
