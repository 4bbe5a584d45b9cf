"""Database URLs and SQLite connection set-up (the only SQLite-specific SQL of the store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection, make_url

from sa_core.store.checkpoint import AUTOCHECKPOINT_PAGES, CheckpointerSet
from sa_core.store.vectors import load_sqlite_vec

BUSY_TIMEOUT_MS = 5000
WRITE_OPTION = "sa_store_write"
"""Execution option marking a connection whose transactions write (``BEGIN IMMEDIATE``)."""


def resolve_database_url(database_url: str) -> tuple[str, bool]:
    """Map a user-facing database URL to the SQLAlchemy URL the store opens.

    ``sqlite:///path`` (and ``sqlite+pysqlite``) open the inline SQLite backend;
    ``sqlite+aiosqlite://`` is kept as is; ``postgresql://`` / ``postgres://`` become
    ``postgresql+asyncpg://``. Parent directories of SQLite files are created.

    Args:
        database_url: A SQLAlchemy-style URL.

    Returns:
        The URL to open and whether it is for the async backend.

    Raises:
        ValueError: The URL names an unsupported database.

    """
    url = make_url(database_url)
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        if driver in ("", "pysqlite"):
            return url.set(drivername="sqlite+pysqlite").render_as_string(False), False
        if driver == "aiosqlite":
            return url.render_as_string(False), True
    elif backend in ("postgresql", "postgres") and driver in ("", "asyncpg"):
        return url.set(drivername="postgresql+asyncpg").render_as_string(False), True
    raise ValueError(
        f"Unsupported database URL {database_url!r}: use sqlite:///path/to/file.db, "
        "sqlite+aiosqlite:///path or postgresql://user:pass@host/db."
    )


def is_memory(url: str) -> bool:
    """Whether a SQLite URL names an in-memory database."""
    database = make_url(url).database or ""
    return database in ("", ":memory:") or "mode=memory" in url


def install_sqlite_listeners(engine: Engine, *, memory: bool, vectors: bool = False) -> None:
    """Configure SQLite connections: pragmas on connect, explicit ``BEGIN`` per transaction.

    The driver's own implicit transaction handling is disabled (``isolation_level=None``) and
    each SQLAlchemy transaction emits ``BEGIN`` (reads) or ``BEGIN IMMEDIATE`` (writes), so
    reads see one snapshot and writes take the write lock up front.

    Args:
        engine: The synchronous engine (``AsyncEngine.sync_engine`` for aiosqlite).
        memory: Whether the database is in memory (no WAL there).
        vectors: Load ``sqlite-vec`` into each connection (the engine's DB-API module must
            load extensions: :func:`sa_core.store.vectors.sqlite_module`).

    """
    checkpoints = None
    database = engine.url.database or ""
    if not memory and database and not database.startswith("file:"):
        checkpoints = CheckpointerSet(database)  # the log is checkpointed off the event loop

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        if checkpoints is not None:
            cursor.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
            checkpoints.connected()
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        if vectors:
            load_sqlite_vec(dbapi_connection)

    def on_begin(conn: Connection) -> None:
        raw: Any = conn.connection.dbapi_connection
        if getattr(raw, "in_transaction", False):
            return  # joins a transaction the store began on the raw connection
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        cursor = raw.cursor()
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        cursor.close()

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    if checkpoints is not None:
        set_ = checkpoints

        def on_close(_dbapi_connection: Any, _record: Any) -> None:
            set_.closed()

        event.listen(engine, "close", on_close)
        event.listen(engine, "close_detached", on_close)
