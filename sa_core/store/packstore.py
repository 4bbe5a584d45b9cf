"""The packs' stores: JSON documents under a namespace and a key, searchable by their text.

Rows of ``store_items`` (:class:`~sa_core.store.tables.StoreItemTable`). A namespace is kept
as its labels, each followed by the unit separator U+001F, so that every namespace under a
prefix starts with the prefix's column value. Full-text search uses SQLite's FTS5 (the
``store_items_fts`` table, written in the same transaction as the item, its rowid the item's
``seq``) or PostgreSQL's ``to_tsvector('simple', text)`` (a GIN index), ranked by ``bm25`` /
``ts_rank``. An item past its ``expires_at`` is never read, and the next write of any store
deletes it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Float, RowMapping, and_, delete, func, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.storebase import StoreBase

SEPARATOR = "\x1f"
"""Ends each label of a namespace in the ``namespace`` column (labels may not contain it)."""
_I = t.store_items.c
_WORD = re.compile(r"\w+", re.UNICODE)
_COLUMNS = (_I.seq, _I.namespace, _I.key, _I.value, _I.created_at, _I.updated_at, _I.expires_at)


class StoreItem(BaseModel):
    """An item of a pack's store.

    Attributes:
        namespace: Its namespace, a tuple of labels such as ``("users", "42", "notes")``.
        key: Its key in the namespace.
        value: The JSON document.
        created_at: When it was first put (µs since the epoch).
        updated_at: When it was last put (µs).
        expires_at: When it expires (µs), if it was put with a ``ttl``.
        score: How well it matched a search's ``query`` (higher is better), else ``None``.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    expires_at: int | None = None
    score: float | None = None


def namespace_column(labels: Sequence[str]) -> str:
    """A namespace's labels as stored (each followed by the separator)."""
    return "".join(f"{label}{SEPARATOR}" for label in labels)


def namespace_labels(column: str) -> tuple[str, ...]:
    """The labels of a stored namespace."""
    return tuple(column.split(SEPARATOR)[:-1])


def searchable_text(value: Any) -> str:
    """Every string in a JSON document (keys aside), one per line: what search matches."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(filter(None, (searchable_text(v) for v in value.values())))
    if isinstance(value, list):
        return "\n".join(filter(None, (searchable_text(v) for v in value)))
    return ""


def words(query: str) -> list[str]:
    """The words of a search query (punctuation and operators dropped), lower-cased."""
    return [word.lower() for word in _WORD.findall(query)]


def _item(row: RowMapping, score: float | None = None) -> StoreItem:
    return StoreItem(
        namespace=namespace_labels(row["namespace"]),
        key=row["key"],
        value=dict(row["value"] or {}),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        score=score,
    )


def _live(now: int) -> Any:
    return or_(_I.expires_at.is_(None), _I.expires_at > now)


def _under(prefix: str) -> Any:
    return func.substr(_I.namespace, 1, len(prefix)) == prefix


def _purge(conn: Connection, now: int) -> None:
    """Delete every expired item (and, on SQLite, its full-text row)."""
    expired = select(_I.seq).where(_I.expires_at <= now)
    if conn.dialect.name == "sqlite":
        conn.execute(
            text(
                "DELETE FROM store_items_fts WHERE rowid IN "
                "(SELECT seq FROM store_items WHERE expires_at <= :now)"
            ),
            {"now": now},
        )
    conn.execute(delete(t.store_items).where(_I.seq.in_(expired)))


def _matching(conn: Connection, query: str) -> tuple[Any, Any]:
    """The ``(condition, score)`` of items matching the words of ``query``, per dialect."""
    terms = words(query)
    if conn.dialect.name == "postgresql":
        tsquery = func.to_tsquery("simple", " | ".join(terms))
        vector = func.to_tsvector("simple", _I.text)
        return vector.op("@@")(tsquery), func.ts_rank(vector, tsquery)
    match = " OR ".join(f'"{term}"' for term in terms)
    fts = text("SELECT rowid, -bm25(store_items_fts) AS score FROM store_items_fts "
               "WHERE store_items_fts MATCH :match").bindparams(match=match)  # fmt: skip
    found = fts.columns(rowid=_I.seq.type, score=Float()).subquery("fts")
    return _I.seq == found.c.rowid, found.c.score


class PackStoreMixin(StoreBase):
    """The items of the packs' stores."""

    async def put_item(
        self,
        package: str,
        namespace: str,
        key: str,
        value: dict[str, Any],
        *,
        now: int,
        expires_at: int | None = None,
        tx: Transaction | None = None,
    ) -> StoreItem:
        """Store ``value`` under ``(namespace, key)`` of a package, replacing what was there.

        Args:
            package: The package whose store it is.
            namespace: The namespace as stored (:func:`namespace_column`).
            key: The key.
            value: The JSON document.
            now: The time of the write (µs).
            expires_at: When it expires (µs); ``None``: never.
            tx: An open transaction to write in.
        """
        values = {
            "package": package,
            "namespace": namespace,
            "key": key,
            "value": value,
            "text": searchable_text(value),
            "created_at": now,
            "updated_at": now,
            "expires_at": expires_at,
        }

        def op(conn: Connection) -> StoreItem:
            _purge(conn, now)
            upsert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
            insert = upsert(t.store_items).values(values)
            stmt = insert.on_conflict_do_update(
                index_elements=[_I.package, _I.namespace, _I.key],
                set_={
                    name: insert.excluded[name]
                    for name in ("value", "text", "updated_at", "expires_at")
                },
            ).returning(*_COLUMNS)
            row = conn.execute(stmt).mappings().one()
            if conn.dialect.name == "sqlite":
                params = {"seq": row["seq"], "text": values["text"]}
                conn.execute(text("DELETE FROM store_items_fts WHERE rowid = :seq"), params)
                conn.execute(
                    text("INSERT INTO store_items_fts (rowid, text) VALUES (:seq, :text)"), params
                )
            return _item(row)

        return await self._write(op, tx)

    async def get_item(
        self, package: str, namespace: str, key: str, *, now: int, tx: Transaction | None = None
    ) -> StoreItem | None:
        """The item under ``(namespace, key)`` of a package, unless absent or expired."""
        stmt = select(*_COLUMNS).where(
            _I.package == package, _I.namespace == namespace, _I.key == key, _live(now)
        )

        def op(conn: Connection) -> StoreItem | None:
            row = conn.execute(stmt).mappings().first()
            return _item(row) if row is not None else None

        return await self._read(op, tx)

    async def delete_item(
        self, package: str, namespace: str, key: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete an item; returns whether there was one."""
        where = and_(_I.package == package, _I.namespace == namespace, _I.key == key)

        def op(conn: Connection) -> bool:
            seq = conn.execute(select(_I.seq).where(where)).scalar()
            if seq is None:
                return False
            if conn.dialect.name == "sqlite":
                conn.execute(text("DELETE FROM store_items_fts WHERE rowid = :seq"), {"seq": seq})
            conn.execute(delete(t.store_items).where(_I.seq == seq))
            return True

        return await self._write(op, tx)

    async def search_items(
        self,
        package: str,
        prefix: str,
        *,
        now: int,
        query: str | None = None,
        limit: int = 10,
        offset: int = 0,
        tx: Transaction | None = None,
    ) -> list[StoreItem]:
        """Items of a package under a namespace prefix, best matches of ``query`` first.

        Without a query (or one without words) the most recently put come first.
        """

        def op(conn: Connection) -> list[StoreItem]:
            stmt = select(*_COLUMNS).where(_I.package == package, _live(now))
            if prefix:
                stmt = stmt.where(_under(prefix))
            if query is None or not words(query):
                stmt = stmt.order_by(_I.updated_at.desc(), _I.seq.desc())
                rows = conn.execute(stmt.limit(limit).offset(offset)).mappings()
                return [_item(row) for row in rows]
            condition, score = _matching(conn, query)
            stmt = stmt.add_columns(score.label("score")).where(condition)
            stmt = stmt.order_by(score.desc(), _I.updated_at.desc(), _I.seq.desc())
            rows = conn.execute(stmt.limit(limit).offset(offset)).mappings()
            return [_item(row, float(row["score"])) for row in rows]

        return await self._read(op, tx)

    async def item_namespaces(
        self, package: str, prefix: str, *, now: int, tx: Transaction | None = None
    ) -> list[str]:
        """The namespaces of a package's live items under a prefix (as stored), sorted."""
        stmt = select(_I.namespace).where(_I.package == package, _live(now)).distinct()
        if prefix:
            stmt = stmt.where(_under(prefix))
        stmt = stmt.order_by(_I.namespace)
        return await self._read(lambda conn: list(conn.execute(stmt).scalars()), tx)

    async def expire_items(self, now: int, *, tx: Transaction | None = None) -> None:
        """Delete every expired item now (writes do it too)."""
        await self._write(lambda conn: _purge(conn, now), tx)


__all__ = ["PackStoreMixin", "StoreItem", "namespace_column", "namespace_labels"]
