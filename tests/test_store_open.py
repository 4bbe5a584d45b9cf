"""The store opens on every backend, keeps its clock and settings, and keeps what it wrote."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from store_kit import SQLITE_BACKENDS, db_url, make_thread, msg, store_on_each_backend

from sa_core.spec.records import (
    Log,
    SubagentRegistryEntry,
)
from sa_core.store import (
    Store,
    now_us,
    open_store,
    resolve_database_url,
)

store = store_on_each_backend()


# --- URLs, clock -------------------------------------------------------------------------------


def test_resolve_database_url(tmp_path: Path) -> None:
    url, is_async = resolve_database_url(f"sqlite:///{tmp_path}/a/b/sa.db")
    assert url == f"sqlite+pysqlite:///{tmp_path}/a/b/sa.db" and not is_async
    assert (tmp_path / "a" / "b").is_dir()
    url, is_async = resolve_database_url(f"sqlite+aiosqlite:///{tmp_path}/c/sa.db")
    assert url == f"sqlite+aiosqlite:///{tmp_path}/c/sa.db" and is_async
    assert (tmp_path / "c").is_dir()
    assert resolve_database_url("postgresql://u:p@h:5432/db") == (
        "postgresql+asyncpg://u:p@h:5432/db",
        True,
    )
    assert resolve_database_url("postgres://u@h/db")[0] == "postgresql+asyncpg://u@h/db"
    assert resolve_database_url("postgresql+asyncpg://h/db")[0] == "postgresql+asyncpg://h/db"
    with pytest.raises(ValueError, match="Unsupported"):
        resolve_database_url("mysql://h/db")


def test_now_us_strictly_increasing() -> None:
    values = [now_us() for _ in range(10_000)]
    assert all(b > a for a, b in zip(values, values[1:], strict=False))
    assert abs(values[-1] - time.time_ns() // 1000) < 5_000_000


@pytest.mark.asyncio
async def test_in_memory_store() -> None:
    async with await open_store("sqlite://") as store:
        await make_thread(store)
        async with store.transaction() as tx:
            await store.insert_messages([msg("m1")], tx=tx)
        assert [m.id for m in await store.history("t1")] == ["m1"]


@pytest.mark.asyncio
async def test_sqlite_pragmas(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/sa.db") as store:

        def pragmas(conn: Any) -> list[Any]:
            names = ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            return [conn.execute(text(f"PRAGMA {name}")).scalar() for name in names]

        assert await store._read(pragmas) == ["wal", 1, 5000, 1]


def test_schema_and_statements_compile_for_postgresql() -> None:
    from sqlalchemy.dialects.postgresql import asyncpg
    from sqlalchemy.schema import CreateIndex, CreateTable

    from sa_core.store import messages, queue, tables, threads
    from sa_core.store.fast import Prepared

    dialect = asyncpg.dialect()  # type: ignore[no-untyped-call]
    for table in tables.metadata.sorted_tables:
        assert "CREATE TABLE" in str(CreateTable(table).compile(dialect=dialect))
        for index in table.indexes:
            CreateIndex(index).compile(dialect=dialect)
    prepared = [
        value
        for module in (messages, queue, threads)
        for value in vars(module).values()
        if isinstance(value, Prepared)
    ]
    assert len(prepared) >= 10
    for statement in prepared:
        plan = statement.plan(dialect)
        assert plan is not None and "$1" in plan.sql


@pytest.mark.asyncio
async def test_prepared_falls_back_to_connection_execute(store: Store) -> None:
    from sqlalchemy import bindparam, select

    from sa_core.store import tables
    from sa_core.store.fast import Prepared

    await make_thread(store, "a")
    await make_thread(store, "b")
    column = tables.threads.c.id
    statement = Prepared(
        select(column).where(column.in_(bindparam("ids", expanding=True))).order_by(column),
        [column],
    )
    rows = await store._read(lambda conn: statement.rows(conn, {"ids": ["a", "b", "c"]}))
    assert rows == [{"id": "a"}, {"id": "b"}]


@pytest.mark.asyncio
async def test_close_inside_transaction_is_refused(store: Store) -> None:
    async with store.transaction():
        with pytest.raises(RuntimeError, match="transaction"):
            await store.close()


# --- durability --------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", SQLITE_BACKENDS)
async def test_reopen_sees_everything(kind: str, tmp_path: Path) -> None:
    url = db_url(kind, tmp_path / "sa.db")
    store = await open_store(url)
    await make_thread(store, "t1", env={"SECRET": "s"}, tags=["x"], execution={"n": 1})
    await make_thread(store, "t2", parent_id="t1")
    async with store.transaction() as tx:
        await store.insert_messages([msg("m1"), msg("m2", role="assistant")], tx=tx)
        await store.insert_log("t1", Log(id="l1", type="model", created_at=now_us()), tx=tx)
    await store.write_file("t1", "/attachments/a.bin", bytes(range(256)) * 40, "image/png")
    queue_id = await store.enqueue("t1", {"content": "later"})
    effect = await store.schedule_effect("t1", "e", {"a": 1}, now_us() + 10**9)
    await store.upsert_child("t1", SubagentRegistryEntry(reference="t2", name="sub"))
    request_id = await store.create_env_request("t1", {"x": 1})
    token, _ = await store.create_api_key("k")
    await store.set_value("t1", "k", [1])
    before = await store.get_thread("t1")
    history = await store.history("t1")
    await store.close()
    await store.close()  # idempotent

    store = await open_store(url)
    try:
        assert await store.get_thread("t1") == before
        assert await store.descendant_ids("t1") == ["t2"]
        assert await store.history("t1") == history
        assert [log.id for log in (await store.list_logs("t1"))[0]] == ["l1"]
        assert await store.read_file("t1", "/attachments/a.bin") == bytes(range(256)) * 40
        assert [r.path for r in await store.readdir("t1", "/")] == ["/attachments"]
        assert [e.id for e in await store.list_queue("t1")] == [queue_id]
        assert await store.list_effects("t1") == [effect]
        assert [c.reference for c in await store.list_children("t1")] == ["t2"]
        assert await store.get_env_request("t1", request_id) == {"x": 1}
        assert await store.verify_api_key(token) is not None
        assert await store.get_value("t1", "k") == [1]
    finally:
        await store.close()

    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("sa.db"))
    assert token.encode() not in raw
    assert token[len("sa_") + 8 :].encode() not in raw
