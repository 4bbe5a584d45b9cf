"""The packs' stores: JSON documents under a namespace and a key, searchable by their text.

Rows of ``store_items`` (:data:`~sa_core.store.tables.store_items`). A namespace is kept
as its labels, each followed by the unit separator U+001F, so that every namespace under a
prefix starts with the prefix's column value. Full-text search uses SQLite's FTS5 (the
``store_items_fts`` table, written in the same transaction as the item, its rowid the item's
``seq``) or PostgreSQL's ``to_tsvector('simple', text)`` (a GIN index), ranked by ``bm25`` /
``ts_rank``. An item past its ``expires_at`` is never read, and the next write of any store
deletes it.

An item of a pack with an embedding model has a vector (``store_vectors``, written with the
item); a search with a vector ranks by cosine distance (:mod:`sa_core.store.vectors`).
:class:`~sa_core.store.packitems.StoreWrites` holds the writes a tool makes until they commit
with its result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Float, RowMapping, and_, delete, func, or_, select, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.interface import Transaction
from sa_core.store.packitems import (
    SEPARATOR,
    ItemWrite,
    StoreItem,
    namespace_labels,
    searchable_text,
)
from sa_core.store.storebase import StoreBase
from sa_core.store.vectors import cosine_distance, encode

_I = t.store_items.c
_V = t.store_vectors.c
_REPLACED = ("value", "text", "updated_at", "expires_at")
"""The columns a put again replaces (``created_at`` stays)."""
_WORD = re.compile(r"\w+", re.UNICODE)
_COLUMNS = (_I.seq, _I.namespace, _I.key, _I.value, _I.created_at, _I.updated_at, _I.expires_at)


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


def _under(prefix: str, dialect: str) -> Any:
    """Namespaces starting with ``prefix`` (labels, each ending with the separator).

    As a range of byte order (``prefix <= namespace < prefix'``, where ``prefix'`` ends with the
    character after the separator), which the ``(package, namespace, key)`` index serves;
    ``COLLATE "C"`` keeps PostgreSQL to byte order whatever the database's collation.
    """
    upper = prefix[:-1] + chr(ord(SEPARATOR) + 1)
    column = _I.namespace
    if not prefix.endswith(SEPARATOR):  # not a namespace column: compare characters
        return func.substr(column, 1, len(prefix)) == prefix
    collated = column.collate("C") if dialect == "postgresql" else column
    return and_(collated >= prefix, collated < upper)


def _purge(conn: Connection, now: int) -> None:
    """Delete every expired item (and, on SQLite, its full-text row)."""
    expired = select(_I.seq).where(_I.expires_at <= now)
    conn.execute(delete(t.store_vectors).where(_V.seq.in_(expired)))
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


def _write_vector(conn: Connection, seq: int, write: ItemWrite) -> None:
    """Replace the vector of item ``seq`` with the write's (none: drop it)."""
    conn.execute(delete(t.store_vectors).where(_V.seq == seq))
    if write.vector is not None and write.model is not None:
        embedding = encode(write.vector, conn.dialect.name)
        conn.execute(
            t.store_vectors.insert().values(seq=seq, model=write.model, embedding=embedding)
        )


def _put(conn: Connection, write: ItemWrite) -> StoreItem:
    """Upsert one item (its full-text row and vector with it)."""
    value = write.value or {}
    values = {
        "package": write.package,
        "namespace": write.namespace,
        "key": write.key,
        "value": value,
        "text": searchable_text(value),
        "created_at": write.now,
        "updated_at": write.now,
        "expires_at": write.expires_at,
    }
    upsert: Any = sqlite_insert
    if conn.dialect.name == "postgresql":  # SQLite stores never load the dialect
        from sqlalchemy.dialects.postgresql import insert as upsert
    insert = upsert(t.store_items).values(values)
    stmt = insert.on_conflict_do_update(
        index_elements=[_I.package, _I.namespace, _I.key],
        set_={name: insert.excluded[name] for name in _REPLACED},
    ).returning(*_COLUMNS)
    row = conn.execute(stmt).mappings().one()
    if conn.dialect.name == "sqlite":
        params = {"seq": row["seq"], "text": values["text"]}
        conn.execute(text("DELETE FROM store_items_fts WHERE rowid = :seq"), params)
        conn.execute(text("INSERT INTO store_items_fts (rowid, text) VALUES (:seq, :text)"), params)
    _write_vector(conn, row["seq"], write)
    return _item(row)


def _delete(conn: Connection, package: str, namespace: str, key: str) -> bool:
    where = and_(_I.package == package, _I.namespace == namespace, _I.key == key)
    seq = conn.execute(select(_I.seq).where(where)).scalar()
    if seq is None:
        return False
    if conn.dialect.name == "sqlite":
        conn.execute(text("DELETE FROM store_items_fts WHERE rowid = :seq"), {"seq": seq})
    conn.execute(delete(t.store_vectors).where(_V.seq == seq))
    conn.execute(delete(t.store_items).where(_I.seq == seq))
    return True


def _nearest(
    conn: Connection,
    items: Any,
    vector: Sequence[float],
    model: str | None,
    limit: int,
    offset: int,
) -> list[StoreItem]:
    """The ``items`` (a select) with a vector of ``model``, nearest to ``vector`` first.

    The nearest are found first by ``seq`` and distance alone, then their columns are read:
    sorting whole rows (values and all) would cost far more on a large store.
    """
    distance, comparable = cosine_distance(conn, vector)
    candidates = items.with_only_columns(_I.seq).scalar_subquery()
    nearest = (
        select(_V.seq, distance.label("distance"))
        .where(_V.model == model, comparable, _V.seq.in_(candidates))
        .order_by(distance, _V.seq.desc())
        .limit(limit)
        .offset(offset)
        .subquery("nearest")
    )
    stmt = (
        select(*_COLUMNS, nearest.c.distance)
        .join(nearest, nearest.c.seq == _I.seq)
        .order_by(nearest.c.distance, _I.seq.desc())
    )
    rows = conn.execute(stmt).mappings()
    return [_item(row, 1.0 - float(row["distance"])) for row in rows]


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
        vector: Sequence[float] | None = None,
        model: str | None = None,
        tx: Transaction | None = None,
    ) -> StoreItem:
        """Store ``value`` under ``(namespace, key)`` of a package, replacing what was there.

        Args:
            package: The package whose store it is.
            namespace: The namespace as stored (:func:`~sa_core.store.packitems.namespace_column`).
            key: The key.
            value: The JSON document.
            now: The time of the write (µs).
            expires_at: When it expires (µs); ``None``: never.
            vector: Its embedding (with ``model``, the model that made it), if any.
            model: The embedding model (``provider:model``).
            tx: An open transaction to write in.
        """
        write = ItemWrite(package, namespace, key, value, now, expires_at, vector, model)

        def op(conn: Connection) -> StoreItem:
            _purge(conn, now)
            return _put(conn, write)

        return await self._write(op, tx)

    async def write_items(
        self, writes: Sequence[ItemWrite], *, now: int, tx: Transaction | None = None
    ) -> None:
        """Apply held writes (:class:`~sa_core.store.packitems.StoreWrites`) in one transaction."""

        def op(conn: Connection) -> None:
            _purge(conn, now)
            for write in writes:
                if write.value is None:
                    _delete(conn, write.package, write.namespace, write.key)
                else:
                    _put(conn, write)

        await self._write(op, tx)

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

        return await self._read_one(op, tx)

    async def delete_item(
        self, package: str, namespace: str, key: str, *, tx: Transaction | None = None
    ) -> bool:
        """Delete an item; returns whether there was one."""
        return await self._write(lambda conn: _delete(conn, package, namespace, key), tx)

    async def search_items(
        self,
        package: str,
        prefix: str,
        *,
        now: int,
        query: str | None = None,
        vector: Sequence[float] | None = None,
        model: str | None = None,
        limit: int = 10,
        offset: int = 0,
        tx: Transaction | None = None,
    ) -> list[StoreItem]:
        """Items of a package under a namespace prefix, best matches first.

        With ``vector`` (and ``model``, the model that made it): the items with a vector of
        that model, nearest first (``score`` is the cosine similarity). Else with a query:
        the items matching its words, best first. Else the most recently put first.
        """

        def op(conn: Connection) -> list[StoreItem]:
            stmt = select(*_COLUMNS).where(_I.package == package, _live(now))
            if prefix:
                stmt = stmt.where(_under(prefix, conn.dialect.name))
            if vector is not None:
                return _nearest(conn, stmt, vector, model, limit, offset)
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

        def op(conn: Connection) -> list[str]:
            stmt = select(_I.namespace).where(_I.package == package, _live(now)).distinct()
            if prefix:
                stmt = stmt.where(_under(prefix, conn.dialect.name))
            return list(conn.execute(stmt.order_by(_I.namespace)).scalars())

        return await self._read(op, tx)

    async def expire_items(self, now: int, *, tx: Transaction | None = None) -> None:
        """Delete every expired item now (writes do it too)."""
        await self._write(lambda conn: _purge(conn, now), tx)


__all__ = ["PackStoreMixin"]
