"""The PostgreSQL store keeps the connections it checked out, within the pool's bounds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import bindparam, func, insert, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from sa_core.store import open_store
from sa_core.store import tables as t
from sa_core.store.backend import POOL_OVERFLOW, POOL_SIZE
from sa_core.store.fast import Prepared, _direct


def _backend_pids(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


@pytest.mark.asyncio
async def test_operations_reuse_one_kept_connection_instead_of_a_pool_checkout_each(
    pg_database_url: str,
) -> None:
    async with await open_store(pg_database_url) as store:
        reads = {await store._read(_backend_pids) for _ in range(5)}
        writes = {await store._write(_backend_pids) for _ in range(5)}
        async with store.transaction() as tx:
            in_tx = await store._read(_backend_pids, tx)
    assert len(reads) == 1
    assert len(writes) == 1
    assert in_tx in writes  # a transaction block uses the kept writer


@pytest.mark.asyncio
async def test_more_concurrent_operations_than_the_pool_holds_all_finish_within_its_bounds(
    pg_database_url: str,
) -> None:
    capacity = POOL_SIZE + POOL_OVERFLOW

    def slow_read(conn: Connection) -> int:
        conn.execute(text("SELECT pg_sleep(0.02)"))
        return _backend_pids(conn)

    async with await open_store(pg_database_url) as store:
        reads = [store._read(slow_read) for _ in range(capacity * 3)]
        writes = [store._write(slow_read) for _ in range(5)]
        async with asyncio.timeout(60):
            pids = await asyncio.gather(*reads, *writes)
        # readers kept in the pool's whole capacity still leave room for the writer
        assert len(set(pids)) <= capacity
        assert store._backend._held <= capacity  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_connection_the_server_closed_is_dropped_and_the_next_operation_reconnects(
    pg_database_url: str,
) -> None:
    async with await open_store(pg_database_url) as store:
        first = await store._read(_backend_pids)
        await store._write(lambda conn: conn.execute(text(f"SELECT pg_terminate_backend({first})")))
        with pytest.raises(DBAPIError):
            await store._read(_backend_pids)
        second = await store._read(_backend_pids)
    assert second != first


@pytest.mark.asyncio
async def test_a_cancelled_operation_leaves_no_busy_connection_behind(
    pg_database_url: str,
) -> None:
    async with await open_store(pg_database_url) as store:
        busy: Any = asyncio.create_task(
            store._write(lambda conn: conn.execute(text("SELECT pg_sleep(5)")))
        )
        await asyncio.sleep(0.3)
        busy.cancel()
        await asyncio.sleep(0)
        busy.cancel()  # again, while it gives the interrupted connection back
        with pytest.raises(asyncio.CancelledError):
            await busy
        await asyncio.sleep(0.5)
        backend: Any = store._backend
        assert backend._held == backend._engine.pool.checkedout()  # nothing leaked
        async with asyncio.timeout(20):  # the writer is usable again at once
            assert await store._write(lambda conn: conn.execute(text("SELECT 1")).scalar()) == 1
            assert await store._read(lambda conn: conn.execute(text("SELECT 2")).scalar()) == 2


@pytest.mark.asyncio
async def test_a_violation_on_the_driver_fast_path_is_an_integrity_error_and_rolls_back(
    pg_database_url: str,
) -> None:
    add = Prepared(
        insert(t.workers).values(
            id=bindparam("p_id"), started_at=bindparam("p_at"), heartbeat_at=bindparam("p_at")
        )
    )
    count = Prepared(select(func.count()).select_from(t.workers), [func.count()])

    def twice(conn: Connection) -> None:
        # the store sent BEGIN itself: every statement goes straight to asyncpg, inside it
        assert _direct(conn) is not None and conn.connection.driver_connection.is_in_transaction()
        add.run(conn, {"p_id": "w1", "p_at": 1})
        add.run(conn, {"p_id": "w1", "p_at": 2})

    async with await open_store(pg_database_url) as store:
        writer = await store._write(_backend_pids)
        with pytest.raises(IntegrityError):
            await store._write(twice)
        left = await store._read(lambda conn: count.rows(conn, {}))
        again = await store._write(_backend_pids)
    assert list(left[0].values()) == [0]  # the first insert was rolled back with the second
    assert again == writer  # a constraint violation leaves the kept writer usable
