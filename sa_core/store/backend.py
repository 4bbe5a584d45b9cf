"""Database backends behind one small interface, and the transaction machinery of the store.

Every repository operation is a *synchronous* function of a SQLAlchemy ``Connection`` built
from portable Core statements. A backend decides how that function runs:

* :class:`SQLiteBackend` (``sqlite:///file.db``, the embedded default) runs it inline on the
  event loop thread with the stdlib ``sqlite3`` driver: one writer and one reader connection,
  WAL, ``synchronous=NORMAL``. A statement costs tens of microseconds, far less than handing it
  to a driver thread (aiosqlite costs ~1.5 ms per model step here), so nothing is offloaded.
* :class:`AsyncBackend` (``sqlite+aiosqlite://``, ``postgresql+asyncpg://``) runs it through
  ``AsyncConnection.run_sync``: one hop per operation, not one per statement.

Writes are serialised by one ``asyncio.Lock`` per store, so SQLite never reports "database is
locked" from within the process; write transactions start with ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import Context, ContextVar, copy_context
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool, StaticPool

from sa_core import jsontext
from sa_core.store.caches import StoreCaches
from sa_core.store.connect import WRITE_OPTION, install_sqlite_listeners, is_memory
from sa_core.store.migrate import ensure_schema
from sa_core.store.prioritylock import PriorityLock

if TYPE_CHECKING:
    from sa_core.store.fast import Deferred, Prepared

T = TypeVar("T")
POOL_SIZE = 5
"""Connections of a PostgreSQL store's pool kept open (SQLAlchemy's default)."""
POOL_OVERFLOW = 10
"""Connections a PostgreSQL store opens beyond :data:`POOL_SIZE` under load."""
Op = Callable[[Connection], T]


class Transaction(ABC):
    """An open write transaction; pass it as ``tx=`` to store methods."""

    __slots__ = ("owner", "active", "fenced", "_after_commit")

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.active = True
        self.fenced = False
        """A statement of this transaction already checked and share-locked the lease."""
        self._after_commit: list[Callable[[], None]] | None = None

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this transaction has committed (never after a rollback)."""
        if self._after_commit is None:
            self._after_commit = []
        self._after_commit.append(callback)

    def committed(self, caches: StoreCaches) -> None:
        """Run the ``after_commit`` callbacks; a failing one empties the caches instead."""
        callbacks, self._after_commit = self._after_commit, None
        for callback in callbacks or ():
            try:
                callback()
            except Exception:
                caches.history.clear()

    def defer(self, items: Sequence[Deferred]) -> bool:
        """Keep writes to send with the next operation or the commit; ``False``: not here.

        A backend that cannot batch writes returns ``False``, and the caller runs them now.
        """
        return False

    async def read_with_writes(
        self, read: Prepared, params: Mapping[str, Any], *, last: bool = False
    ) -> list[dict[str, Any]] | None:
        """Run ``read`` in the statement that sends the deferred writes, if there are any.

        The read sees the database as that statement began, without the writes: use it only
        for rows the transaction does not write. With ``last`` (the transaction's last
        statement; commit it right after), a transaction that sent nothing yet may go out
        whole, as one statement outside ``BEGIN``/``COMMIT``; it then takes no more
        operations.

        Returns:
            The rows, or ``None`` when there is nothing to send with them (read as usual).
        """
        return None

    @abstractmethod
    async def run(self, op: Op[T]) -> T:
        """Run a repository operation on this transaction's connection."""

    @abstractmethod
    async def commit(self) -> None:
        """Commit and release the connection."""

    @abstractmethod
    async def rollback(self) -> None:
        """Roll back and release the connection."""


class Backend(ABC):
    """How repository operations reach the database."""

    serialize_reads: bool = False
    """Reads also take the write lock (one shared connection, e.g. an in-memory database)."""
    dialect = "sqlite"
    """The database's SQL dialect: ``sqlite`` or ``postgresql``."""
    defers = False
    """Whether its transactions keep :class:`~sa_core.store.fast.Deferred` writes to send
    together (PostgreSQL); elsewhere they run at once."""

    @abstractmethod
    async def setup(self) -> None:
        """Connect and create the tables."""

    @abstractmethod
    async def read(self, op: Op[T]) -> T:
        """Run a read-only operation in its own short transaction."""

    async def read_one(self, op: Op[T]) -> T:
        """Run a read-only operation that issues a single statement.

        A single statement is consistent on its own, so a backend may skip the explicit
        transaction around it; by default it runs like :meth:`read`.
        """
        return await self.read(op)

    async def fetch(self, query: Prepared, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rows of one prepared query, read on its own (see :meth:`read_one`)."""
        return await self.read_one(lambda conn: query.rows(conn, params))

    @abstractmethod
    async def write(self, op: Op[T]) -> T:
        """Run a write operation in its own transaction (the caller holds the write lock)."""

    async def write_statement(
        self, query: Prepared, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """Run one writing statement in its own transaction; its rows (``RETURNING``).

        The caller holds the write lock.
        """
        return await self.write(lambda conn: query.rows(conn, params))

    @abstractmethod
    async def begin(self, owner: object) -> Transaction:
        """Open a write transaction (the caller holds the write lock)."""

    @abstractmethod
    async def close(self) -> None:
        """Close every connection."""

    def external_version(self) -> int | None:
        """A number that changes whenever another connection commits, or ``None`` (unknown).

        In-process caches (history, API keys) stay valid only while it is unchanged; a backend
        that cannot tell returns ``None`` and those caches are not used.
        """
        return None


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

    def __init__(self, url: str) -> None:
        memory = is_memory(url)
        self.serialize_reads = memory
        self._engine = create_engine(
            url,
            poolclass=StaticPool if memory else NullPool,
            connect_args={"check_same_thread": False},
            json_serializer=jsontext.dumps,
        )
        install_sqlite_listeners(self._engine, memory=memory)
        self._memory = memory
        self._writer: Connection | None = None
        self._reader: Connection | None = None

    async def setup(self) -> None:
        """Connect and create or upgrade the tables."""
        self._writer = self._engine.connect().execution_options(**{WRITE_OPTION: True})
        self._reader = self._writer if self._memory else self._engine.connect()
        with self._writer.begin():
            ensure_schema(self._writer)

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


class _AsyncTransaction(Transaction):
    __slots__ = ("_conn", "_done")

    def __init__(
        self, owner: object, conn: Any, done: Callable[[Any, bool], Awaitable[None]]
    ) -> None:
        super().__init__(owner)
        self._conn = conn
        self._done: Callable[[Any, bool], Awaitable[None]] | None = done

    async def run(self, op: Op[T]) -> T:
        result: T = await self._conn.run_sync(op)
        return result

    async def _finish(self, commit: bool) -> bool:
        """Commit or roll back; returns whether the connection may be used again."""
        await (self._conn.commit() if commit else self._conn.rollback())
        return True

    async def _end(self, commit: bool) -> None:
        done = self._done
        if done is None:  # a failed commit already gave the connection up
            return
        self._done = None
        ok = False
        try:
            ok = await self._finish(commit)
        finally:
            await done(self._conn, ok)

    async def commit(self) -> None:
        await self._end(commit=True)

    async def rollback(self) -> None:
        await self._end(commit=False)


class _DriverTransaction(_AsyncTransaction):
    """A PostgreSQL write transaction begun and ended on the asyncpg connection itself.

    The store's PostgreSQL connections are in autocommit as far as SQLAlchemy knows, so it
    sends no ``BEGIN`` or ``COMMIT`` of its own (nor spends a greenlet on them): this object
    sends them on the driver connection, and every statement of its operations, prepared or
    not, runs between them.

    ``BEGIN`` is sent with the first operation, and deferred writes (:meth:`defer`) wait for
    the next operation or the commit. A transaction that only wrote deferred writes sends them
    as one statement outside ``BEGIN``/``COMMIT`` (one round trip, atomic as any statement);
    one whose guarded write missed is undone by the server and sent again inside a transaction,
    with the writes' fallbacks and the lease fence.
    """

    __slots__ = ("_begun", "_batch", "_ended")

    def __init__(
        self, owner: object, conn: Any, done: Callable[[Any, bool], Awaitable[None]]
    ) -> None:
        super().__init__(owner, conn, done)
        self._begun = False
        self._batch: list[Deferred] = []
        self._ended = False
        """It went out whole with its last read (:meth:`read_with_writes`): commit it."""

    def _check_open(self) -> None:
        if self._ended:
            raise RuntimeError("This transaction ended with its last read; commit it.")

    def defer(self, items: Sequence[Deferred]) -> bool:
        self._check_open()
        self._batch.extend(items)
        if any(item.fencing for item in items):
            self.fenced = True
        return True

    async def _start(
        self, read: Prepared | None = None, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Send ``BEGIN`` if not yet sent, then the deferred writes (with ``read``, if given).

        Returns:
            The rows of ``read`` (none without it).
        """
        from sa_core.store.fast import run_batch_async, run_on_driver_async

        if not self._begun:
            await run_on_driver_async(self._conn, "BEGIN")
            self._begun = True
        if not self._batch:
            return []
        batch, self._batch = self._batch, []
        counts, rows = await run_batch_async(
            self._conn, batch, guarded=False, read=read, read_params=params
        )
        missed = [
            item for item, count in zip(batch, counts, strict=True)
            if count == 0 and item.on_miss is not None
        ]
        if missed:
            if any(item.fencing for item in missed):
                self.fenced = False

            def fallbacks(conn: Connection) -> None:
                for item in missed:
                    assert item.on_miss is not None
                    item.on_miss(conn)

            await self._conn.run_sync(fallbacks)
        return rows

    async def run(self, op: Op[T]) -> T:
        self._check_open()
        await self._start()
        result: T = await self._conn.run_sync(op)
        return result

    async def read_with_writes(
        self, read: Prepared, params: Mapping[str, Any], *, last: bool = False
    ) -> list[dict[str, Any]] | None:
        from sa_core.store.fast import GuardFailed, run_batch_async

        self._check_open()
        if not self._batch or read._plan(self._conn.sync_connection.dialect) is None:
            return None
        if last and not self._begun and self._fence_sent_with_batch():
            try:  # all of the transaction in one statement, outside BEGIN/COMMIT
                _, rows = await run_batch_async(
                    self._conn, self._batch, guarded=True, read=read, read_params=params
                )
            except GuardFailed:  # nothing applied: sent again in a transaction, below
                pass
            else:
                self._batch = []
                self._ended = True
                return rows
        return await self._start(read, params)

    def _fence_sent_with_batch(self) -> bool:
        """Whether the lease fence this transaction needs, if any, is in its batch now.

        The fence's statement is added when it is not there yet (as the commit would add it);
        ``False`` when the fence can only run as a statement of its own.
        """
        fence = getattr(self.owner, "write_fence", None)
        if self.fenced or fence is None:
            return True
        guard = getattr(self.owner, "write_fence_guard", None)
        if guard is None:
            return False
        item = guard()
        if item is None:  # no write is fenced now: the commit will not fence either
            self.fenced = True
        else:
            self.defer([item])
        return True

    async def commit(self) -> None:
        await self._send_deferred()
        await self._end(commit=True)

    async def _send_deferred(self) -> None:
        """Before the commit: send the writes still kept (alone, when nothing else was sent)."""
        from sa_core.store.fast import GuardFailed, run_batch_async

        if not self._batch:
            return
        if not self._begun:
            try:
                await run_batch_async(self._conn, self._batch, guarded=True)
                self._batch = []
                return
            except GuardFailed:  # nothing applied: again, in a transaction, with fallbacks
                pass
        fenced = self.fenced
        await self._start()
        fence = getattr(self.owner, "write_fence", None)
        if fenced and not self.fenced and fence is not None:  # the fencing write missed
            await self._conn.run_sync(fence)

    async def _finish(self, commit: bool) -> bool:
        from sa_core.store.fast import run_on_driver_async

        self._batch = []
        if not self._begun:
            return True  # nothing was sent
        if commit:
            await run_on_driver_async(self._conn, "COMMIT")
        else:
            try:
                await run_on_driver_async(self._conn, "ROLLBACK")
            except Exception:  # a broken connection: dropped, and the server rolls back
                return False
        if self._conn.in_transaction():  # SQLAlchemy's own (autocommit) bookkeeping
            await self._conn.rollback()
        return True


def _in_driver_transaction(op: Op[T]) -> Op[T]:
    """``op`` between ``BEGIN`` and ``COMMIT`` (or ``ROLLBACK``) sent on the asyncpg connection."""
    from sa_core.store.fast import run_on_driver

    def run(conn: Connection) -> T:
        run_on_driver(conn, "BEGIN")
        try:
            result = op(conn)
        except BaseException:
            with contextlib.suppress(Exception):  # a broken connection is dropped, not reused
                run_on_driver(conn, "ROLLBACK")
            raise
        finally:
            if conn.in_transaction():  # SQLAlchemy's own (autocommit) bookkeeping
                conn.rollback()
        run_on_driver(conn, "COMMIT")
        return result

    return run


def _session_intact(error: Exception) -> bool:
    """Whether a connection is still usable after an operation raised ``error``.

    A constraint violation (or an error of the operation's own Python code) leaves the session
    as it was once the transaction rolled back; any other driver error may come from a broken
    or desynchronised connection, which is then not reused.
    """
    from sqlalchemy.exc import DBAPIError, IntegrityError

    return not isinstance(error, DBAPIError) or isinstance(error, IntegrityError)


def _autocommit_read(op: Op[T]) -> Op[T]:
    """``op`` on a connection in autocommit: each statement sees what is committed as it runs.

    No ``BEGIN``/``COMMIT`` is sent, nor SQLAlchemy's own begin and commit (with their events)
    run, for what would be no transaction at all on the server.
    """

    def run(conn: Connection) -> T:
        try:
            return op(conn)
        finally:
            if conn.in_transaction():  # SQLAlchemy's autobegin of a Core statement
                conn.rollback()

    return run


class AsyncBackend(Backend):
    """An ``AsyncEngine`` (aiosqlite, asyncpg); each operation is one ``run_sync`` call.

    On PostgreSQL the backend keeps the connections it checked out (readers and writers) and
    reuses them, instead of checking one out of SQLAlchemy's pool for every operation: a
    checkout, its events and the return cost about as much CPU as the statement's round trip.
    They are all in autocommit as far as SQLAlchemy knows; a write sends its own ``BEGIN`` and
    ``COMMIT`` on the asyncpg connection, inside the one ``run_sync`` (greenlet) of a single
    operation, or from the :class:`_DriverTransaction` of a transaction block. The pool still
    bounds the connections (``pool_size`` + ``max_overflow``); a connection that failed (lost,
    or its operation was cancelled) is invalidated rather than reused.
    """

    def __init__(self, url: str) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine

        options: dict[str, Any] = {"json_serializer": jsontext.dumps}
        postgres = url.startswith("postgresql")
        if postgres:
            # every use of a connection ends in COMMIT or ROLLBACK: skip the pool's extra
            # ROLLBACK on return (a round trip per operation)
            options["pool_reset_on_return"] = None
            options["pool_size"] = POOL_SIZE
            options["max_overflow"] = POOL_OVERFLOW
        self._engine = create_async_engine(url, **options)
        self.dialect = self._engine.dialect.name
        self._reader = self._engine
        self._writer = self._engine
        self._keep = postgres
        self.defers = postgres
        self._idle_readers: list[Any] = []
        self._idle_writers: list[Any] = []
        self._closing = False
        self._held = 0
        """Connections checked out of the pool: kept idle here or in use."""
        self._slots = asyncio.Semaphore(POOL_SIZE + POOL_OVERFLOW)
        if postgres:
            # reads run in autocommit: no BEGIN/COMMIT round trips (each statement still sees
            # only committed rows)
            self._reader = self._engine.execution_options(isolation_level="AUTOCOMMIT")
            # writes too: they send BEGIN and COMMIT on the driver connection themselves
            self._writer = self._reader
        if self._engine.dialect.name == "sqlite":
            memory = is_memory(url)
            self.serialize_reads = memory
            install_sqlite_listeners(self._engine.sync_engine, memory=memory)

    async def setup(self) -> None:
        """Connect and create or upgrade the tables."""
        async with self._engine.begin() as conn:
            await conn.run_sync(ensure_schema)

    async def _checkout(self, write: bool) -> Any:
        """A kept connection of the kind, or a new one; waits while every connection is in use.

        Kept and in-use connections never exceed the pool's capacity, so the pool's own
        checkout never waits (a connection kept here is not returned to the pool, and a wait
        there would never end).
        """
        await self._slots.acquire()
        try:
            idle = self._idle_writers if write else self._idle_readers
            other = self._idle_readers if write else self._idle_writers
            pool: Any = self._engine.pool
            while True:
                if idle:  # also one checked in while an idle connection was being dropped
                    return idle.pop()
                full = (
                    self._held >= POOL_SIZE + POOL_OVERFLOW
                    or pool.checkedout() >= POOL_SIZE + POOL_OVERFLOW
                )
                if not full or not other:
                    break  # a full pool here only waits for connections being given back
                self._held -= 1
                await asyncio.shield(self._drop(other.pop(), True))
            engine = self._writer if write else self._reader
            conn = await engine.connect().start()
        except BaseException:
            self._slots.release()
            raise
        self._held += 1
        if write:
            try:
                await conn.execution_options(**{WRITE_OPTION: True})
            except BaseException:
                await self._checkin(conn, write, ok=False)
                raise
        return conn

    async def _checkin(self, conn: Any, write: bool, ok: bool) -> None:
        """Keep a connection for the next operation, or drop it when it may be unusable."""
        self._slots.release()
        if ok and not conn.invalidated and not self._closing:
            (self._idle_writers if write else self._idle_readers).append(conn)
            return
        self._held -= 1
        # shielded: a second cancellation must not leave the connection checked out of the
        # pool while it is no longer counted here (the pool would run dry)
        await asyncio.shield(self._drop(conn, ok))

    @staticmethod
    async def _drop(conn: Any, ok: bool) -> None:
        """Give a connection back to the pool, invalidated when its session may be unusable."""
        with contextlib.suppress(Exception):  # already broken: the pool forgets it
            if not ok and not conn.invalidated:  # interrupted: the session state is unknown
                await conn.invalidate()
        with contextlib.suppress(Exception):
            await conn.close()

    async def _run(self, op: Op[T], write: bool) -> T:
        from sa_core.store.fast import in_driver_transaction

        conn = await self._checkout(write)
        ok = False
        try:
            wrapped = _in_driver_transaction(op) if write else _autocommit_read(op)
            result: T = await conn.run_sync(wrapped)
            ok = True
            return result
        except Exception as error:
            ok = (
                _session_intact(error)
                and not conn.in_transaction()
                and not in_driver_transaction(conn.sync_connection)
            )
            raise
        finally:
            await self._checkin(conn, write, ok)

    async def fetch(self, query: Prepared, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """On PostgreSQL, straight on a kept reader's asyncpg connection (no greenlet)."""
        if not self._keep:
            return await super().fetch(query, params)
        return await self._statement(query, params, write=False)

    async def write_statement(
        self, query: Prepared, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """On PostgreSQL, one round trip: the statement alone, in autocommit, on a writer."""
        if not self._keep:
            return await super().write_statement(query, params)
        return await self._statement(query, params, write=True)

    async def _statement(
        self, query: Prepared, params: Mapping[str, Any], *, write: bool
    ) -> list[dict[str, Any]]:
        """One statement on a kept connection's asyncpg connection, in autocommit."""
        conn = await self._checkout(write)
        ok = False
        try:
            rows = await query.rows_async(conn, params)
            ok = True
            return rows
        except Exception as error:
            ok = _session_intact(error)
            raise
        finally:
            await self._checkin(conn, write, ok)

    async def read(self, op: Op[T]) -> T:
        """Run a read-only operation in its own short transaction (autocommit on PostgreSQL)."""
        if self._keep:
            return await self._run(op, write=False)
        async with self._reader.connect() as conn, conn.begin():
            return await conn.run_sync(op)

    async def write(self, op: Op[T]) -> T:
        """Run a write operation in its own transaction."""
        if self._keep:
            return await self._run(op, write=True)
        async with self._engine.connect() as conn:
            await conn.execution_options(**{WRITE_OPTION: True})
            async with conn.begin():
                return await conn.run_sync(op)

    async def begin(self, owner: object) -> Transaction:
        """Open a write transaction."""
        if self._keep:
            conn = await self._checkout(write=True)
            return _DriverTransaction(owner, conn, self._done)  # BEGIN goes with its first use
        else:
            conn = await self._engine.connect().start()
            try:
                await conn.execution_options(**{WRITE_OPTION: True})
            except BaseException:
                await conn.close()
                raise
        try:
            await conn.begin()
        except BaseException:
            await self._done(conn, False)
            raise
        return _AsyncTransaction(owner, conn, self._done)

    async def _done(self, conn: Any, ok: bool) -> None:
        if self._keep:
            await self._checkin(conn, True, ok)
        else:
            await conn.close()

    async def close(self) -> None:
        """Close every connection."""
        self._closing = True
        idle = self._idle_readers + self._idle_writers
        self._idle_readers, self._idle_writers = [], []
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()
        await self._engine.dispose()


_current_tx: ContextVar[Transaction | None] = ContextVar("sa_store_tx", default=None)


class _TransactionContext:
    """``async with store.transaction() as tx``; a nested block joins the open transaction."""

    __slots__ = ("_store", "_tx", "_token", "_joined")

    def __init__(self, store: StoreBase) -> None:
        self._store = store
        self._joined = False

    async def __aenter__(self) -> Transaction:
        store = self._store
        ambient = store._ambient()
        if ambient is not None:
            self._joined = True
            return ambient
        await store._lock.acquire()
        try:
            self._tx = await store._backend.begin(store)
        except BaseException:
            store._lock.release()
            raise
        self._token = _current_tx.set(self._tx)
        return self._tx

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._joined:
            return
        tx = self._tx
        try:
            if exc_type is None:
                try:
                    if not tx.fenced:
                        await self._store._fence(tx)
                    await tx.commit()
                except BaseException:
                    await tx.rollback()
                    raise
                tx.committed(self._store._caches)
            else:
                await tx.rollback()
        finally:
            tx.active = False
            _current_tx.reset(self._token)
            self._store._lock.release()


def detached_context() -> Context:
    """A copy of the current context without an open store transaction.

    Start tasks in it (``asyncio.create_task(coro, context=detached_context())``) when the
    caller may be inside a transaction block: a task started there would otherwise join the
    caller's transaction.
    """
    context = copy_context()
    context.run(_current_tx.set, None)
    return context


class StoreBase:
    """Connection handling shared by every part of the store."""

    write_fence: Op[None] | None = None
    """Run in each write transaction before it commits (several workers: the lease fence).

    Set by :mod:`sa_core.engine.leases`: inside a thread's turn it raises when the worker's
    lease on the thread was lost, so nothing the turn wrote commits.
    """

    write_fence_guard: Callable[[], Deferred | None] | None = None
    """The :attr:`write_fence` as a statement to send with a batch of deferred writes (it
    selects the lease row when the lease holds), or ``None`` when no write is fenced now; set
    by :mod:`sa_core.engine.leases` with :attr:`write_fence`."""

    write_fence_owner: Callable[[str], str | None] | None = None
    """The worker whose lease fences a write of the thread now, else ``None`` (see
    :meth:`fence_owner`); set by :mod:`sa_core.engine.leases` with :attr:`write_fence`."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = PriorityLock()  # one write transaction at a time; requests go first
        self._closed = False
        self._caches = StoreCaches()

    def prioritize_requests(self, when: Callable[[], bool]) -> None:
        """Let requests' write transactions go before background work's only while ``when()``.

        By default they always do (see :mod:`sa_core.store.prioritylock`).
        """
        self._lock.prioritize = when

    def external_version(self) -> int | None:
        """A number that changes whenever another connection commits; ``None``: unknown.

        SQLite's ``PRAGMA data_version`` (see :mod:`sa_core.store.caches`). Whatever was read
        while it was ``v`` is still what the database holds as long as it is ``v`` and this
        store wrote nothing more; a backend that cannot tell (PostgreSQL) returns ``None``.
        """
        if self._closed:
            return None
        return self._backend.external_version()

    async def wait_for_writes(self) -> None:
        """Wait until the write transaction open now in this process, if any, has ended.

        Work kicked from inside a transaction (a child queueing a message on its parent as
        its flow settles) is committed only when that transaction ends: a runner waits here
        before reading it. Never call it from inside a transaction block (it would wait on
        itself).
        """
        if self._lock.locked():
            async with self._lock:
                pass

    def fence_owner(self, thread_id: str) -> str | None:
        """The worker whose lease must fence a write of this thread made now, or ``None``.

        A statement that writes the thread's row anyway can check the lease itself (and
        share-lock it till the commit) and then call :meth:`fenced`: the transaction's
        :attr:`write_fence` statement is skipped, one round trip fewer per commit.
        """
        owner_of = self.write_fence_owner
        return owner_of(thread_id) if owner_of is not None else None

    def fenced(self, tx: Transaction | None) -> None:
        """Record that the transaction in effect (``tx`` or the task's) checked its lease."""
        current = tx if tx is not None else self._ambient()
        if current is not None:
            current.fenced = True

    async def _fence(self, tx: Transaction) -> None:
        """Before ``tx`` commits: check the lease (workers refuse a turn whose lease is lost)."""
        fence = self.write_fence
        if fence is None:
            return
        guard = self.write_fence_guard
        if guard is not None:
            item = guard()
            if item is None or tx.defer([item]):
                return
        await tx.run(fence)

    def _cache_fillable(self) -> bool:
        """Whether a read now sees only committed rows that no open transaction will change."""
        return not self._lock.locked() and self._ambient() is None

    def in_transaction(self) -> bool:
        """Whether the calling task has a write transaction of this store open.

        Inside one, no other connection can commit until it ends: what the task knows the
        database holds (say a live handle marked current) stays so until the commit.
        """
        return self._ambient() is not None

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the calling task's open transaction commits (now if none is).

        Never after a rollback.
        """
        tx = self._ambient()
        if tx is None:
            callback()
        else:
            tx.after_commit(callback)

    def transaction(self) -> _TransactionContext:
        """Open a write transaction used by every method given ``tx=`` (or called inside it).

        Commits when the block exits, rolls back when it raises. Methods called inside the block
        without ``tx=`` (same task) join the transaction too; nested blocks join the outer one.

        Returns:
            An async context manager yielding the :class:`Transaction`.

        """
        return _TransactionContext(self)

    def _ambient(self) -> Transaction | None:
        tx = _current_tx.get()
        if tx is not None and tx.owner is self and tx.active:
            return tx
        return None

    def _check_tx(self, tx: Transaction) -> Transaction:
        if tx.owner is not self or not tx.active:
            raise RuntimeError("This transaction is closed or belongs to another store.")
        return tx

    async def _read(self, op: Op[T], tx: Transaction | None = None, *, one: bool = False) -> T:
        """Run a read in ``tx``, the task's open transaction, or a read of its own.

        ``one``: the operation issues a single statement, so it runs without BEGIN/COMMIT.
        """
        if tx is not None:
            return await self._check_tx(tx).run(op)
        ambient = self._ambient()
        if ambient is not None:
            return await ambient.run(op)
        read = self._backend.read_one if one else self._backend.read
        if self._backend.serialize_reads:
            async with self._lock:
                return await read(op)
        return await read(op)

    async def _read_one(self, op: Op[T], tx: Transaction | None = None) -> T:
        """Like :meth:`_read`, for an operation that issues one statement (no BEGIN/COMMIT)."""
        return await self._read(op, tx, one=True)

    async def _fetch(
        self, query: Prepared, params: Mapping[str, Any], tx: Transaction | None = None
    ) -> list[dict[str, Any]]:
        """The rows of one prepared query, in ``tx`` or the task's transaction, else alone."""
        current = tx if tx is not None else self._ambient()
        if current is not None or self._backend.serialize_reads:
            return await self._read_one(lambda conn: query.rows(conn, params), current)
        return await self._backend.fetch(query, params)

    async def _write(self, op: Op[T], tx: Transaction | None = None) -> T:
        if tx is not None:
            return await self._check_tx(tx).run(op)
        ambient = self._ambient()
        if ambient is not None:
            return await ambient.run(op)
        fence = self.write_fence
        if fence is not None:
            inner = op

            def op(conn: Connection) -> T:
                fence(conn)
                return inner(conn)

        async with self._lock:
            return await self._backend.write(op)

    async def _write_statement(
        self, query: Prepared, params: Mapping[str, Any], tx: Transaction | None = None
    ) -> list[dict[str, Any]]:
        """One writing statement's rows: in ``tx`` or the task's transaction, else alone.

        Alone it commits on its own (one round trip on PostgreSQL, no ``BEGIN``/``COMMIT``),
        without the write fence: only for writes that are no turn's (taking a lease).
        """
        current = tx if tx is not None else self._ambient()
        if current is not None:
            return await self._check_tx(current).run(lambda conn: query.rows(conn, params))
        async with self._lock:
            return await self._backend.write_statement(query, params)

    async def _write_deferred(
        self,
        items: Sequence[Deferred],
        tx: Transaction | None = None,
        *,
        op: Op[None] | None = None,
    ) -> bool:
        """Write ``items`` (see :class:`~sa_core.store.fast.Deferred`), like :meth:`_write`.

        Where the transaction can keep them (PostgreSQL), the writes wait for its next
        operation or its commit; a write outside a transaction block gets a transaction of its
        own, committed here. Elsewhere they run now: ``op`` if given (the same writes, run
        another way), else each item, its ``on_miss`` when it changes no row.

        Returns:
            Whether a fencing item is among them and changed its row (sent later: whether one
            is among them), so the transaction needs no lease fence of its own.
        """
        fencing = any(item.fencing for item in items)

        def apply(conn: Connection) -> bool:
            if op is not None:
                op(conn)
                return False
            hit = fencing
            for item in items:
                if item.prepared.run(conn, item.params) == 0 and item.on_miss is not None:
                    item.on_miss(conn)
                    hit = hit and not item.fencing
            return hit

        if not self._backend.defers:
            return await self._write(apply, tx)
        current = tx if tx is not None else self._ambient()
        if current is None:
            async with self.transaction() as opened:
                return await self._write_deferred(items, opened, op=op)
        if self._check_tx(current).defer(items):
            return fencing
        return await current.run(apply)

    async def close(self) -> None:
        """Close the store's connections (waits for a running write transaction)."""
        if self._closed:
            return
        if self._ambient() is not None:
            raise RuntimeError("Close the store after its transaction block, not inside it.")
        async with self._lock:
            self._closed = True
            await self._backend.close()
