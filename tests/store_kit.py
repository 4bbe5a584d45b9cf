"""What the store tests share: the backends, a ``store`` fixture on each, and row builders.

A test module gets the fixture with ``store = store_on_each_backend()``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sa_core.spec.records import Message
from sa_core.store import Store, ThreadRow, open_store

# SQLAlchemy's asyncio layer (aiosqlite, asyncpg) needs greenlet; the default backend does not.
_ASYNC_MARKS = (
    [] if importlib.util.find_spec("greenlet") else [pytest.mark.skip(reason="needs greenlet")]
)

SQLITE_BACKENDS = ["sqlite", pytest.param("sqlite+aiosqlite", marks=_ASYNC_MARKS)]
BACKENDS = [*SQLITE_BACKENDS, pytest.param("postgresql", marks=_ASYNC_MARKS)]


def db_url(kind: str, path: Path) -> str:
    return f"{kind}:///{path}"


def store_on_each_backend() -> Any:
    """The ``store`` fixture: a new store on each of :data:`BACKENDS`, closed after the test."""

    @pytest_asyncio.fixture(params=BACKENDS)
    async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
        if request.param == "postgresql":
            url = str(request.getfixturevalue("pg_database_url"))
        else:
            url = db_url(request.param, tmp_path / "db" / "sa.db")
        opened = await open_store(url)
        try:
            yield opened
        finally:
            await opened.close()

    return store


async def make_thread(store: Store, thread_id: str = "t1", **fields: Any) -> ThreadRow:
    values: dict[str, Any] = {"package": "pkg", "agent_id": "agent"} | fields
    return await store.create_thread(ThreadRow(id=thread_id, **values))


def msg(message_id: str, thread_id: str = "t1", **fields: Any) -> Message:
    values: dict[str, Any] = {"role": "user", "content": message_id} | fields
    return Message(id=message_id, thread_id=thread_id, **values)
