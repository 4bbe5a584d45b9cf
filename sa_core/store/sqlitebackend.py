"""SQLite through the stdlib driver, run inline on the event loop thread (the default).

One writer and one reader connection, WAL, ``synchronous=NORMAL``; write transactions start
with ``BEGIN IMMEDIATE``. A statement costs tens of microseconds, far less than handing it to
a driver thread, so nothing is offloaded.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool, StaticPool

from sa_core import jsontext
from sa_core.store.connect import WRITE_OPTION, install_sqlite_listeners, is_memory
from sa_core.store.interface import Backend, Op, T, Transaction
from sa_core.store.migrate import ensure_schema
from sa_core.store.vectors import sqlite_module


class _SQLiteTransaction(Transaction):
    """A write transaction driven on the raw ``sqlite3`` connection (``BEGIN IMMEDIATE``).

    Operations still receive the SQLAlchemy ``Connection``: prepared statements run on its
    DBAPI cursor, and one that goes through ``Connection.execute`` autobegins a SQLAlchemy
    transaction, which joins the open SQLite one (the ``begin`` listener emits no second
    ``BEGIN``) and is committed or rolled back with it.
    """

    __slots__ = ("_conn", "_raw")

    def __init__(self, owner: object, conn: Connection) -> None:
        super().__init__(owner)
        self._conn = conn
        self._raw = _raw_connection(conn)
        self._raw.execute("BEGIN IMMEDIATE")

    async def run(self, op: Op[T]) -> T:
        return op(self._conn)

    async def commit(self) -> None:
        _finish(self._conn, self._raw, commit=True)

    async def rollback(self) -> None:
        _finish(self._conn, self._raw, commit=False)


def _raw_connection(conn: Connection) -> Any:
    """The ``sqlite3.Connection`` under a SQLAlchemy connection."""
    return conn.connection.dbapi_connection


def _finish(conn: Connection, raw: Any, *, commit: bool) -> None:
    """End a transaction begun on ``raw``, and SQLAlchemy's joined one if an operation began it."""
    if conn.in_transaction():
        if commit:
            conn.commit()
        else:
            conn.rollback()
    if raw.in_transaction:
        raw.execute("COMMIT" if commit else "ROLLBACK")


def _run_in_raw(conn: Connection, begin: str, op: Op[T]) -> T:
    """Run ``op`` in a transaction begun with ``begin`` on the raw connection; commit it."""
    raw = _raw_connection(conn)
    raw.execute(begin)
    try:
        result = op(conn)
        _finish(conn, raw, commit=True)
    except BaseException:
        _finish(conn, raw, commit=False)  # nothing left to do when the commit went through
        raise
    return result


class SQLiteBackend(Backend):
    """SQLite through the stdlib driver, run inline: a writer and a reader connection."""

    def __init__(self, url: str, *, vectors: bool = False) -> None:
        memory = is_memory(url)
        self.serialize_reads = memory
        options: dict[str, Any] = {}
        if vectors:  # sqlite-vec in every connection (see sa_core.store.vectors)
            options["module"] = sqlite_module()
        self._engine = create_engine(
            url,
            poolclass=StaticPool if memory else NullPool,
            connect_args={"check_same_thread": False},
            json_serializer=jsontext.dumps,
            **options,
        )
        install_sqlite_listeners(self._engine, memory=memory, vectors=vectors)
        self._memory = memory
        self._writer: Connection | None = None
        self._reader: Connection | None = None

    async def setup(self) -> None:
        """Connect and create or upgrade the tables."""
        self._writer = self._engine.connect().execution_options(**{WRITE_OPTION: True})
        self._reader = self._writer if self._memory else self._engine.connect()
        with self._writer.begin():
            self.created = ensure_schema(self._writer) == "created"

    def _conns(self) -> tuple[Connection, Connection]:
        if self._writer is None or self._reader is None:
            raise RuntimeError("The store is closed.")
        return self._writer, self._reader

    async def read(self, op: Op[T]) -> T:
        """Run a read-only operation in its own short transaction."""
        return _run_in_raw(self._conns()[1], "BEGIN", op)

    async def read_one(self, op: Op[T]) -> T:
        """Run a single-statement read in SQLite's own statement transaction (no BEGIN/COMMIT).

        The driver runs in autocommit mode, so a lone SELECT reads one consistent snapshot;
        an operation that goes through SQLAlchemy's ``execute`` (which begins) is committed.
        """
        conn = self._conns()[1]
        if conn.in_transaction():
            return await self.read(op)
        try:
            return op(conn)
        finally:
            if conn.in_transaction():
                conn.commit()

    async def write(self, op: Op[T]) -> T:
        """Run a write operation in its own transaction."""
        return _run_in_raw(self._conns()[0], "BEGIN IMMEDIATE", op)

    async def begin(self, owner: object) -> Transaction:
        """Open a write transaction."""
        return _SQLiteTransaction(owner, self._conns()[0])

    def external_version(self) -> int | None:
        """``PRAGMA data_version`` of the writer: it changes when another connection commits.

        The writer's own commits leave it unchanged and the reader never writes, so a change
        means another process (or another store on the same file) wrote to the database.
        """
        if self._writer is None:
            return None
        if self._memory:
            return 0
        raw: Any = self._writer.connection.dbapi_connection
        return int(raw.execute("PRAGMA data_version").fetchone()[0])

    async def close(self) -> None:
        """Close every connection."""
        for conn in {id(c): c for c in (self._reader, self._writer) if c is not None}.values():
            conn.close()
        self._writer = self._reader = None
        self._engine.dispose()
