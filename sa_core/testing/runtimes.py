"""Runtimes for tests: :func:`make_runtime_factory` behind the ``sa_runtime_factory`` fixture."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sa_core.testing.providers import TestProvider

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager


class RuntimeFactory(Protocol):
    """The ``sa_runtime_factory`` fixture: opens runtimes on the test's database."""

    def __call__(
        self,
        *,
        packs: Sequence[Any] = (),
        providers: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AbstractAsyncContextManager[Any]:
        """Open ``sa_core.Runtime`` as an async context manager."""
        ...


def make_runtime_factory(database_url: str) -> RuntimeFactory:
    """Build the ``sa_runtime_factory`` callable for one database.

    Each call opens ``Runtime(packs=..., providers=..., database_url=database_url,
    load_entrypoints=False, **options)``. Every runtime a factory opens shares the database, so
    a test can close one and open another to check that state survived.

    Args:
        database_url: the database the runtimes use.

    Returns:
        The factory; ``providers`` defaults to ``{"test": TestProvider()}``.

    """

    @contextlib.asynccontextmanager
    async def open_runtime(
        *,
        packs: Sequence[Any] = (),
        providers: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[Any]:
        runtime_class = importlib.import_module("sa_core.runtime").Runtime
        settings: dict[str, Any] = {"database_url": database_url, "load_entrypoints": False}
        settings.update(options)
        chosen = dict(providers) if providers is not None else {"test": TestProvider()}
        async with runtime_class(packs=list(packs), providers=chosen, **settings) as runtime:
            yield runtime

    return open_runtime
