"""Threads: create, read, update, list, and cascading hard delete."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from sqlalchemy import (
    JSON,
    Select,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import Connection

from sa_core.spec import SubagentRegistryEntry
from sa_core.store import tables as t
from sa_core.store.clock import now_us
from sa_core.store.conflicts import ThreadChanged
from sa_core.store.executions import new_record
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Transaction
from sa_core.store.lineage import refuse_if_shared
from sa_core.store.registry import CHILDREN
from sa_core.store.rows import THREAD_FIELDS, UNSET, ThreadRow, Unset
from sa_core.store.timelinereads import TimelineMixin

_JSON_DEFAULTS: dict[str, type] = {
    "env": dict,
    "env_types": dict,
    "tags": list,
    "properties": dict,
    "execution": dict,
}

_COLUMNS = list(t.threads.c)
_GET = Prepared(select(*_COLUMNS).where(t.threads.c.id == bindparam("b_id")), _COLUMNS)
_INSERT = Prepared(insert(t.threads).values({c.name: bindparam(f"p_{c.name}") for c in _COLUMNS}))
_INSERT_TAG = insert(t.thread_tags)
_DELETE_TAGS = delete(t.thread_tags).where(t.thread_tags.c.thread_id == bindparam("b_id"))
_UPDATES: dict[tuple[str, ...], Prepared] = {}
_UNCHANGED = Prepared(
    select(literal(1)).where(
        t.threads.c.id == bindparam("b_id"), t.threads.c.updated_at == bindparam("b_at")
    )
)


KIDS_KEY = "children_entries"


@functools.cache
def get_with_children_pg() -> Prepared:
    """The thread row and its registry entries (a JSON array, in order) in one statement.

    Built on first use: SQLite stores never import the PostgreSQL dialect for it.
    """
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    c = t.children.c
    kids = (
        select(func.json_agg(aggregate_order_by(c.entry, c.created_at, c.reference)))
        .where(c.parent_id == t.threads.c.id, c.hidden_by.is_(None))
        .scalar_subquery()
    )
    column = type_coerce(kids, JSON).label(KIDS_KEY)
    stmt = select(*_COLUMNS, column).where(t.threads.c.id == bindparam("b_id"))
    return Prepared(stmt, [*_COLUMNS, column])


def thread_with_children(
    row: Mapping[Any, Any], entries: list[Any]
) -> tuple[ThreadRow, list[SubagentRegistryEntry]]:
    """A thread row and its registry built from a ``threads`` row and registry entries."""
    children = [SubagentRegistryEntry.model_validate(entry) for entry in entries]
    return thread_from_row(row), children


def thread_from_row(row: Mapping[Any, Any]) -> ThreadRow:
    """Build a :class:`ThreadRow` from a ``threads`` row."""
    values = dict(row)
    for name, factory in _JSON_DEFAULTS.items():
        if values.get(name) is None:
            values[name] = factory()
    values["stopped"] = bool(values["stopped"])
    return ThreadRow(**values)


def _update_statement(keys: tuple[str, ...]) -> Prepared:
    stmt = _UPDATES.get(keys)
    if stmt is None:
        stmt = Prepared(
            update(t.threads)
            .where(t.threads.c.id == bindparam("b_id"))
            .values({key: bindparam(f"v_{key}") for key in keys})
        )
        _UPDATES[keys] = stmt
    return stmt


def _write_tags(conn: Connection, thread_id: str, tags: list[str]) -> None:
    conn.execute(_DELETE_TAGS, {"b_id": thread_id})
    unique = list(dict.fromkeys(tags))
    if unique:
        conn.execute(_INSERT_TAG, [{"thread_id": thread_id, "tag": tag} for tag in unique])


def descendants(conn: Connection, thread_id: str) -> list[str]:
    """Ids of every descendant of a thread, breadth first, oldest first within a level."""
    tree = (
        select(t.threads.c.id, t.threads.c.created_at, literal(1).label("level"))
        .where(t.threads.c.parent_id == thread_id)
        .cte("tree", recursive=True)
    )
    tree = tree.union_all(
        select(t.threads.c.id, t.threads.c.created_at, (tree.c.level + 1).label("level")).where(
            t.threads.c.parent_id == tree.c.id
        )
    )
    stmt = select(tree.c.id).order_by(tree.c.level, tree.c.created_at, tree.c.id)
    return list(dict.fromkeys(conn.execute(stmt).scalars()))


_ROW_FIELDS = tuple(THREAD_FIELDS)
_INSERT_PARAMS = tuple(f"p_{name}" for name in _ROW_FIELDS)
"""The insert's parameter of each thread field (``p_<field>``)."""
_ROW_VALUES = attrgetter(*_ROW_FIELDS)
"""A row's values of :data:`_ROW_FIELDS`, in one call."""


def _thread_update(thread_id: str, fields: dict[str, Any]) -> tuple[Prepared, dict[str, Any]]:
    """The statement and parameters updating ``fields`` of a thread (and ``updated_at``)."""
    unknown = (set(fields) - THREAD_FIELDS) | ({"id"} & set(fields))
    if unknown:
        raise ValueError(f"update_thread: unknown or read-only fields {sorted(unknown)}")
    if "updated_at" not in fields:
        fields["updated_at"] = now_us()
    keys = tuple(sorted(fields))
    params = {f"v_{key}": value for key, value in fields.items()}
    params["b_id"] = thread_id
    return _update_statement(keys), params


class ThreadsMixin(TimelineMixin):
    """Thread rows."""

    async def create_thread(self, row: ThreadRow, *, tx: Transaction | None = None) -> ThreadRow:
        """Insert a thread (``created_at``/``updated_at`` default to now) with its execution record.

        Args:
            row: The thread; its timestamps are filled in place when zero.
            tx: An open transaction to write in.

        Returns:
            The stored row (the same object).

        """
        if not row.created_at:
            row.created_at = now_us()
        if not row.updated_at:
            row.updated_at = row.created_at
        values = dict(zip(_INSERT_PARAMS, _ROW_VALUES(row), strict=True))
        writes = [Deferred(_INSERT, values), new_record(row.id, row.updated_at)]
        if row.tags:

            def op(conn: Connection) -> None:
                for write in writes:
                    write.prepared.run(conn, write.params)
                _write_tags(conn, row.id, row.tags)

            await self._write(op, tx)
        else:
            await self._write_deferred(writes, tx)
        cache = self._caches.history
        self._caches.timelines.created(row.id, row.timeline)
        if cache.version is not None and not row.timeline:  # a fork's is its source's
            # a fresh id: its history is empty whether or not the write has committed yet (a
            # rollback leaves no thread, whose history is empty too), so the first turn reads
            # none. Messages written in the same transaction mark the entry as any write does
            # (a commit elsewhere since the cache's version clears it)
            cache.store(row.id, [])
        empty = self._caches.empty_queues
        if empty.version is not None:  # so is its queue (entries queued later take it out)
            empty.add(row.id)
        return row

    async def get_thread(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> ThreadRow | None:
        """Return a thread, or ``None`` when it does not exist."""
        found = await self._fetch(_GET, {"b_id": thread_id}, tx)
        if not found:
            return None
        row = thread_from_row(found[0])
        self.note_timeline(row.id, row.timeline)
        return row

    async def get_thread_with_children(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> tuple[ThreadRow, list[SubagentRegistryEntry]] | None:
        """A thread and its subagent registry (in creation order), or ``None`` when it is gone.

        One statement on PostgreSQL (a round trip fewer than :meth:`get_thread` and
        ``list_children``); two in one operation elsewhere.
        """
        built = thread_with_children
        if self._backend.dialect == "postgresql":
            rows = await self._fetch(get_with_children_pg(), {"b_id": thread_id}, tx)
            if not rows:
                return None
            found = built(rows[0], rows[0].pop(KIDS_KEY) or [])
            self.note_timeline(thread_id, found[0].timeline)
            return found

        def op(conn: Connection) -> tuple[ThreadRow, list[SubagentRegistryEntry]] | None:
            found = _GET.first(conn, {"b_id": thread_id})
            if found is None:
                return None
            children = CHILDREN.rows(conn, {"b_pid": thread_id})
            return built(found, [row["entry"] for row in children])

        return await self._read(op, tx)

    async def update_thread(
        self, thread_id: str, *, tx: Transaction | None = None, **fields: Any
    ) -> bool:
        """Update fields of a thread and set ``updated_at``.

        Args:
            thread_id: The thread.
            tx: An open transaction to write in.
            **fields: Any :class:`ThreadRow` field except ``id``.

        Returns:
            Whether the thread exists.

        Raises:
            ValueError: An unknown field name.

        """
        stmt, params = _thread_update(thread_id, fields)

        def op(conn: Connection) -> bool:
            found = stmt.run(conn, params) > 0
            if found and "tags" in fields:
                _write_tags(conn, thread_id, list(fields["tags"] or []))
            return found

        return await self._write(op, tx)

    async def set_thread_fields(
        self, thread_id: str, *, tx: Transaction | None = None, **fields: Any
    ) -> None:
        """:meth:`update_thread` without telling whether the thread exists (nor ``tags``).

        The write may wait for the transaction's next statement or its commit, and go with
        the others (see :class:`~sa_core.store.fast.Deferred`): for a thread known to exist.

        Raises:
            ValueError: An unknown field name, or ``tags``.

        """
        if "tags" in fields:
            raise ValueError("set_thread_fields: set tags with update_thread")
        stmt, params = _thread_update(thread_id, fields)
        await self._write_deferred([Deferred(stmt, params)], tx)

    async def expect_thread_unchanged(
        self, thread_id: str, updated_at: int, *, tx: Transaction
    ) -> None:
        """Make ``tx`` fail with :class:`ThreadChanged` unless the row is as read.

        The check may go with the transaction's other deferred writes, in one statement
        (PostgreSQL); it compares ``updated_at``, which every update of the row sets.

        Args:
            thread_id: The thread.
            updated_at: Its ``updated_at`` as the caller read (or wrote) it.
            tx: The transaction to check in.
        """
        params = {"b_id": thread_id, "b_at": updated_at}

        def changed(conn: Connection) -> None:
            raise ThreadChanged(thread_id)

        def check(conn: Connection) -> None:  # run at once (SQLite)
            if _UNCHANGED.first(conn, params) is None:
                changed(conn)

        await self._write_deferred([Deferred(_UNCHANGED, params, changed)], tx, op=check)

    async def list_threads(
        self,
        *,
        package: str | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        parent_id: str | None | Unset = UNSET,
        user_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
        tx: Transaction | None = None,
    ) -> tuple[list[ThreadRow], int]:
        """List threads, newest first.

        Args:
            package: Only threads of this package.
            agent_id: Only threads of this agent.
            tag: Only threads carrying this tag.
            parent_id: ``UNSET`` (default): any; ``None``: top-level threads only; an id: the
                children of that thread.
            user_id: Only threads of this user.
            limit: Page size.
            offset: Rows to skip.
            tx: An open transaction to read in.

        Returns:
            The page and the total count matching the filters.

        """
        c = t.threads.c
        conditions: list[Any] = []
        if package is not None:
            conditions.append(c.package == package)
        if agent_id is not None:
            conditions.append(c.agent_id == agent_id)
        if user_id is not None:
            conditions.append(c.user_id == user_id)
        if not isinstance(parent_id, Unset):
            conditions.append(
                c.parent_id.is_(None) if parent_id is None else c.parent_id == parent_id
            )
        if tag is not None:
            tags = t.thread_tags.c
            conditions.append(
                select(tags.thread_id).where(tags.thread_id == c.id, tags.tag == tag).exists()
            )
        page: Select[Any] = (
            select(t.threads)
            .where(*conditions)
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(t.threads).where(*conditions)

        def op(conn: Connection) -> tuple[list[ThreadRow], int]:
            rows = [thread_from_row(r) for r in conn.execute(page).mappings()]
            return rows, int(conn.execute(count).scalar_one())

        return await self._read(op, tx)

    async def descendant_ids(self, thread_id: str, *, tx: Transaction | None = None) -> list[str]:
        """Ids of every descendant thread (children, grandchildren...), breadth first."""
        return await self._read(lambda conn: descendants(conn, thread_id), tx)

    async def delete_thread(self, thread_id: str, *, tx: Transaction | None = None) -> list[str]:
        """Hard-delete a thread, its descendants and every row they own.

        Returns:
            The deleted thread ids (the thread first), or ``[]`` when it does not exist.

        """

        def op(conn: Connection) -> list[str]:
            if _GET.first(conn, {"b_id": thread_id}) is None:
                return []
            ids = [thread_id, *descendants(conn, thread_id)]
            refuse_if_shared(conn, thread_id, ids)
            for table, column in t.PER_THREAD_TABLES:
                conn.execute(delete(table).where(table.c[column].in_(ids)))
            conn.execute(delete(t.threads).where(t.threads.c.id.in_(ids)))
            return ids

        deleted = await self._write(op, tx)
        self._caches.history.forget(deleted)
        return deleted
