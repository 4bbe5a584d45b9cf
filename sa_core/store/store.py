"""The :class:`Store`: every persistence operation of the runtime, and :func:`open_store`."""

from __future__ import annotations

from types import TracebackType

from sa_core.store.a2apush import A2APushMixin
from sa_core.store.apikeys import ApiKeysMixin
from sa_core.store.asyncbackend import AsyncBackend
from sa_core.store.branching import BranchingMixin
from sa_core.store.connect import resolve_database_url
from sa_core.store.effects import EffectsMixin
from sa_core.store.evals import EvalsMixin
from sa_core.store.executions import ExecutionsMixin
from sa_core.store.files import FilesMixin
from sa_core.store.interface import Backend
from sa_core.store.leases import LeasesMixin
from sa_core.store.messages import MessagesMixin
from sa_core.store.packstore import PackStoreMixin
from sa_core.store.queue import QueueMixin
from sa_core.store.registry import RegistryMixin
from sa_core.store.schedules import SchedulesMixin
from sa_core.store.sqlitebackend import SQLiteBackend
from sa_core.store.threads import ThreadsMixin
from sa_core.store.turnstart import TurnStartMixin
from sa_core.store.usage import UsageMixin


class Store(
    TurnStartMixin,
    ThreadsMixin,
    MessagesMixin,
    BranchingMixin,
    FilesMixin,
    QueueMixin,
    EffectsMixin,
    RegistryMixin,
    ApiKeysMixin,
    ExecutionsMixin,
    LeasesMixin,
    UsageMixin,
    SchedulesMixin,
    PackStoreMixin,
    A2APushMixin,
    EvalsMixin,
):
    """Durable state: threads, messages, files, queues, effects, keys, leases, schedules, stores.

    Also the push notifications our A2A server owes (:mod:`sa_core.store.a2apush`).

    Every method takes an optional ``tx=`` from :meth:`transaction`; without it, a method runs
    in its own short transaction (or joins the transaction open in the calling task).
    """

    def __init__(self, backend: Backend, url: str, *, vectors: bool = False) -> None:
        super().__init__(backend)
        self.url = url
        self.vectors = vectors
        """Whether the store was opened for vectors (search by meaning)."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def open_store(database_url: str, *, vectors: bool = False) -> Store:
    """Open (and create) the store at a database URL.

    Args:
        database_url: ``sqlite:///path/file.db`` (embedded default; parent directories are
            created), ``sqlite+aiosqlite:///path``, or ``postgresql://...`` (opened as
            ``postgresql+asyncpg``).
        vectors: Whether a pack's store searches by meaning: load ``sqlite-vec`` into SQLite
            connections, create pgvector's extension on PostgreSQL (see
            :mod:`sa_core.store.vectors`).

    Returns:
        The open store; close it with ``await store.close()``.

    Raises:
        ConfigurationError: ``vectors`` asked for, and what they need is not installed.

    """
    url, is_async = resolve_database_url(database_url)
    backend: Backend = (
        AsyncBackend(url, vectors=vectors) if is_async else SQLiteBackend(url, vectors=vectors)
    )
    try:
        await backend.setup()
    except BaseException:
        await backend.close()
        raise
    return Store(backend, url, vectors=vectors)
