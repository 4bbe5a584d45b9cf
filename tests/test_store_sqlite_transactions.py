"""The SQLite backend's transactions, driven on the raw ``sqlite3`` connection.

A store transaction is ``BEGIN IMMEDIATE`` ... ``COMMIT`` on the driver connection. Work inside it
may use the prepared-statement path or SQLAlchemy's ``Connection.execute`` (which begins a
SQLAlchemy transaction of its own): both must commit together, or roll back together, and the
connection must be left with no transaction open either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import insert, select

from sa_core.spec.records import Log, Message
from sa_core.store import Store, ThreadRow, now_us, open_store
from sa_core.store import tables as t
from sa_core.store.backend import detached_context


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    await opened.create_thread(ThreadRow(id="t1", package="pkg", agent_id="agent"))
    try:
        yield opened
    finally:
        await opened.close()


def core_log(log_id: str) -> Any:
    """An INSERT that goes through SQLAlchemy's ``Connection.execute`` (not the prepared path)."""
    row = {"id": log_id, "thread_id": "t1", "type": "note", "data": {}, "created_at": now_us()}
    return insert(t.logs).values(**row)


async def log_ids(store: Store) -> list[str]:
    logs, _ = await store.list_logs("t1", order="asc")
    return [log.id for log in logs]


def open_transactions(store: Store) -> list[bool]:
    """Whether the writer and reader connections (driver and SQLAlchemy) are in a transaction."""
    writer, reader = store._backend._conns()  # type: ignore[attr-defined]
    return [
        c.in_transaction() or c.connection.dbapi_connection.in_transaction for c in (writer, reader)
    ]


@pytest.mark.asyncio
async def test_prepared_and_sqlalchemy_statements_commit_together(store: Store) -> None:
    async with store.transaction() as tx:
        await store.insert_log("t1", Log(id="prepared", type="note", created_at=now_us()), tx=tx)
        await tx.run(lambda conn: conn.execute(core_log("core")))
    assert await log_ids(store) == ["prepared", "core"]
    assert open_transactions(store) == [False, False]


@pytest.mark.asyncio
async def test_a_failed_block_rolls_back_both_kinds_of_statement(store: Store) -> None:
    with pytest.raises(RuntimeError, match="abort"):
        async with store.transaction() as tx:
            await tx.run(lambda conn: conn.execute(core_log("core")))
            await store.insert_messages([Message(id="m1", thread_id="t1", role="user")], tx=tx)
            raise RuntimeError("abort")
    assert await log_ids(store) == []
    assert await store.get_message("t1", "m1") is None
    assert open_transactions(store) == [False, False]


@pytest.mark.asyncio
async def test_a_failing_statement_leaves_no_transaction_open(store: Store) -> None:
    await store.insert_log("t1", Log(id="dup", type="note", created_at=now_us()))
    with pytest.raises(Exception, match="UNIQUE"):
        await store.insert_log("t1", Log(id="dup", type="note", created_at=now_us()))
    assert open_transactions(store) == [False, False]
    await store.insert_log("t1", Log(id="after", type="note", created_at=now_us()))
    assert await log_ids(store) == ["dup", "after"]


@pytest.mark.asyncio
async def test_reads_inside_and_outside_see_committed_rows_only(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.run(lambda conn: conn.execute(core_log("pending")))
        inside = await tx.run(lambda conn: conn.execute(select(t.logs.c.id)).scalars().all())
        assert list(inside) == ["pending"]
        outside = asyncio.create_task(log_ids(store), context=detached_context())
        assert await outside == []  # another task reads the last committed state
    assert await log_ids(store) == ["pending"]
