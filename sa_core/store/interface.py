"""The interface a database backend implements: :class:`Backend` and its :class:`Transaction`.

Every repository operation (:data:`Op`) is a *synchronous* function of a SQLAlchemy
``Connection``; a backend decides how it runs (see :mod:`sa_core.store.backend`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sa_core.store.caches import StoreCaches

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from sa_core.store.fast import Deferred, Prepared

T = TypeVar("T")
Op = Callable[["Connection"], T]


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
    created = False
    """Whether :meth:`setup` created the schema: the database was empty (no thread, claim,
    effect or schedule in it yet)."""

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
