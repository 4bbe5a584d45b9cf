"""An ``AsyncEngine`` backend (``sqlite+aiosqlite://``, ``postgresql+asyncpg://``).

Each operation runs through ``AsyncConnection.run_sync``: one hop per operation, not one per
statement. On PostgreSQL the backend keeps its connections and sends ``BEGIN``/``COMMIT`` on
the asyncpg connection itself (:class:`_DriverTransaction`), batching deferred writes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from sa_core import jsontext
from sa_core.store.connect import WRITE_OPTION, install_sqlite_listeners, is_memory
from sa_core.store.fast import (
    Deferred,
    GuardFailed,
    Prepared,
    in_driver_transaction,
    run_batch_async,
    run_on_driver,
    run_on_driver_async,
)
from sa_core.store.interface import Backend, Op, T, Transaction
from sa_core.store.migrate import ensure_schema
from sa_core.store.vectors import ensure_pgvector, refuse_aiosqlite

POOL_SIZE = 5
"""Connections of a PostgreSQL store's pool kept open (SQLAlchemy's default)."""
POOL_OVERFLOW = 10
"""Connections a PostgreSQL store opens beyond :data:`POOL_SIZE` under load."""


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
            item
            for item, count in zip(batch, counts, strict=True)
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

        self._check_open()
        if not self._batch or read.plan(self._conn.sync_connection.dialect) is None:
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

    def __init__(self, url: str, *, vectors: bool = False) -> None:
        # SQLAlchemy's asyncio extension brings its ORM along (~50 ms): only this backend needs it
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
        self._vectors = vectors and postgres
        if self._engine.dialect.name == "sqlite":
            if vectors:
                refuse_aiosqlite()
            memory = is_memory(url)
            self.serialize_reads = memory
            install_sqlite_listeners(self._engine.sync_engine, memory=memory)

    async def setup(self) -> None:
        """Connect and create or upgrade the tables."""
        async with self._engine.begin() as conn:
            self.created = await conn.run_sync(ensure_schema) == "created"
            if self._vectors:
                await conn.run_sync(ensure_pgvector)

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
        """Keep a connection for the next operation, or drop it when it may be unusable.

        A connection the server lost (SQLAlchemy invalidated it: the server restarted, or ended
        the session) takes the idle ones with it: they were opened before, so each would fail
        its next operation too.
        """
        self._slots.release()
        if conn.invalidated and not self._closing:
            await self._drop_idle()
        if ok and not conn.invalidated and not self._closing:
            (self._idle_writers if write else self._idle_readers).append(conn)
            return
        self._held -= 1
        # shielded: a second cancellation must not leave the connection checked out of the
        # pool while it is no longer counted here (the pool would run dry)
        await asyncio.shield(self._drop(conn, ok))

    async def _drop_idle(self) -> None:
        """Give every kept idle connection back to the pool."""
        idle = self._idle_readers + self._idle_writers
        self._idle_readers, self._idle_writers = [], []
        self._held -= len(idle)
        for kept in idle:
            await asyncio.shield(self._drop(kept, True))

    @staticmethod
    async def _drop(conn: Any, ok: bool) -> None:
        """Give a connection back to the pool, invalidated when its session may be unusable."""
        with contextlib.suppress(Exception):  # already broken: the pool forgets it
            if not ok and not conn.invalidated:  # interrupted: the session state is unknown
                await conn.invalidate()
        with contextlib.suppress(Exception):
            await conn.close()

    async def _run(self, op: Op[T], write: bool) -> T:

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
