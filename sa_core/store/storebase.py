"""The connection handling every part of the store shares: :class:`StoreBase`.

It serialises write transactions (one :class:`~sa_core.store.prioritylock.PriorityLock` per
store), lets calls in a task join the task's open transaction, and runs the lease fence before
a commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from sqlalchemy.engine import Connection

from sa_core.store.ambient import current_tx
from sa_core.store.caches import StoreCaches
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Backend, Op, T, Transaction
from sa_core.store.prioritylock import PriorityLock


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
        self._token = current_tx.set(self._tx)
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
            current_tx.reset(self._token)
            self._store._lock.release()


class WriteFence(Protocol):
    """What the store runs to fence a write transaction (several workers: a thread's lease).

    Given to the store with :meth:`StoreBase.fence_writes`
    (:class:`sa_core.engine.workers.leasefence.LeaseFence`).
    """

    def check(self, conn: Connection) -> None:
        """Before a write transaction commits: raise when it must not (the lease was lost)."""
        ...

    def guard(self) -> Deferred | None:
        """:meth:`check` as a statement sent with deferred writes; ``None``: nothing fenced now."""
        ...

    def owner(self, thread_id: str) -> str | None:
        """The worker whose lease fences a write of the thread made now, else ``None``."""
        ...


class StoreBase:
    """Connection handling shared by every part of the store."""

    write_fence: Op[None] | None = None
    """Run in each write transaction before it commits (:meth:`WriteFence.check`, given with
    :meth:`fence_writes`): inside a thread's turn it raises when the worker's lease on the
    thread was lost, so nothing the turn wrote commits."""

    write_fence_guard: Callable[[], Deferred | None] | None = None
    """:meth:`WriteFence.guard` (given with :meth:`fence_writes`), read on every commit."""

    write_fence_owner: Callable[[str], str | None] | None = None
    """:meth:`WriteFence.owner` (given with :meth:`fence_writes`; see :meth:`fence_owner`)."""

    def fence_writes(self, fence: WriteFence) -> None:
        """Fence every write transaction with ``fence`` from now on (several workers).

        Its three methods are kept as attributes: the commit path reads them without a call.
        """
        self.write_fence = fence.check
        self.write_fence_guard = fence.guard
        self.write_fence_owner = fence.owner

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = PriorityLock()  # one write transaction at a time; requests go first
        self._closed = False
        self._caches = StoreCaches()

    @property
    def created(self) -> bool:
        """Whether opening the store created the database's schema (it was empty)."""
        return self._backend.created

    @property
    def dialect_name(self) -> str:
        """The database's kind: ``sqlite`` or ``postgresql``."""
        return self._backend.dialect

    async def ping(self) -> None:
        """Run a trivial query (``SELECT 1``); raises when the database does not answer."""
        if self._closed:
            raise RuntimeError("The store is closed.")
        await self._read_one(lambda conn: conn.exec_driver_sql("SELECT 1").scalar())

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
        tx = current_tx.get()
        if tx is not None and tx.owner is self and tx.active:
            return tx
        return None

    def _check_tx(self, tx: Transaction) -> Transaction:
        if tx.owner is not self or not tx.active:
            raise RuntimeError("This transaction is closed or belongs to another store.")
        return tx

    async def read(self, op: Op[T], *, tx: Transaction | None = None) -> T:
        """Run a read-only query the store has no method for: ``op(connection)``.

        In ``tx``, the task's open transaction, or a read of its own (the engine's usage
        aggregates are one). ``op`` must not write.
        """
        return await self._read(op, tx)

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
        fencing = False
        for item in items:
            fencing = fencing or item.fencing

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
            if tx is not None:  # as _write does, one coroutine fewer
                return await self._check_tx(tx).run(apply)
            return await self._write(apply)
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
