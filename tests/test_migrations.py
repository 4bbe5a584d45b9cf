"""Schema migrations: versioned schema, upgraded on open, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, Table, create_engine, insert, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from sa_core.spec.records import Log, Message
from sa_core.store import now_us, open_store, resolve_database_url
from sa_core.store import tables as t
from sa_core.store.migrate import (
    BASELINE,
    HEAD,
    MIGRATIONS,
    SchemaVersionError,
    current_revision,
    sqlite_statements,
    upgrade,
    version_metadata,
    version_table,
)
from sa_core.store.sqliteschema import statements

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_empty_database_url"))
    return f"sqlite:///{tmp_path / 'sa.db'}"


async def run_sync(url: str, fn: Any) -> Any:
    """Run ``fn(conn)`` in one committed transaction on the database at ``url``."""
    resolved, is_async = resolve_database_url(url)
    if not is_async:
        engine = create_engine(resolved)
        try:
            with engine.begin() as conn:
                return fn(conn)
        finally:
            engine.dispose()
    async_engine = create_async_engine(resolved)
    try:
        async with async_engine.begin() as conn:
            return await conn.run_sync(fn)
    finally:
        await async_engine.dispose()


def create_main_schema(conn: Connection) -> None:
    """The database as today's main created it: the baseline tables, no version table."""
    upgrade(conn, None, BASELINE)
    conn.execute(text("DROP TABLE alembic_version"))


def _as_created(conn: Connection, table: Table) -> Table:
    """``table`` as the database has it (an older revision lacks today's columns)."""
    return Table(table.name, MetaData(), autoload_with=conn)


def fill_main_schema(conn: Connection) -> None:
    now = 1_700_000_000_000_000

    def insert(table: Table) -> Any:
        from sqlalchemy import insert as sql_insert

        return sql_insert(_as_created(conn, table))

    conn.execute(insert(t.threads).values(
        id="t1", package="pkg", agent_id="agent", created_at=now, updated_at=now, stopped=False,
        env={"NAME": "Ada"}, env_types={"NAME": "text"}, tags=["vip"], properties={"p": 1},
        execution={"turns": {"a": 1}},
    ))
    conn.execute(insert(t.threads).values(
        id="c1", package="pkg", agent_id="child", parent_id="t1", created_at=now + 1,
        updated_at=now + 1, stopped=False,
    ))
    conn.execute(insert(t.thread_tags).values(thread_id="t1", tag="vip"))
    conn.execute(insert(t.messages).values(
        id="m1", thread_id="t1", role="user", content="hello", created_at=now + 2, silent=False,
        depth=0, meta={"k": "v"}, attachments=[{"path": "/a.txt", "name": "a.txt"}],
    ))
    conn.execute(insert(t.messages).values(
        id="m2", thread_id="t1", role="assistant", content="hi", created_at=now + 3,
        silent=False, depth=0, status="completed", extra={"custom": 1},
    ))
    conn.execute(insert(t.logs).values(
        id="l1", thread_id="t1", type="llm_call", data={"model": "m"}, created_at=now + 4,
    ))
    conn.execute(insert(t.files).values(
        thread_id="t1", path="/a.txt", parent="/", name="a.txt", is_directory=False,
        mime_type="text/plain", storage="local", size=5, data=b"hello", created_at=now + 5,
        updated_at=now + 5,
    ))
    conn.execute(insert(t.queue).values(
        id="q1", thread_id="t1", role="user", content="later", silent=False, created_at=now + 6,
    ))
    conn.execute(insert(t.effects).values(
        id="e1", thread_id="t1", name="remind", args={"x": 1}, scheduled_at=now + 10**9,
        created_at=now + 7, status="pending",
    ))
    conn.execute(insert(t.children).values(
        parent_id="t1", reference="ref1", entry={"id": "c1", "name": "child"}, created_at=now + 8,
    ))
    conn.execute(insert(t.env_requests).values(
        id="r1", parent_id="t1", payload={"names": ["KEY"]}, created_at=now + 9,
    ))
    conn.execute(insert(t.thread_values).values(
        thread_id="t1", key="counter", value={"n": 3}, created_at=now + 10, updated_at=now + 10,
    ))
    conn.execute(insert(t.api_keys).values(
        id="k1", name="ci", prefix="sa_abc", key_hash="f" * 64, created_at=now + 11,
    ))


async def test_a_database_with_the_schema_of_main_is_upgraded_on_open_and_keeps_its_data(
    empty_url: str,
) -> None:
    await run_sync(empty_url, create_main_schema)
    await run_sync(empty_url, fill_main_schema)
    assert await run_sync(empty_url, current_revision) is None

    async with await open_store(empty_url) as store:
        thread = await store.get_thread("t1")
        assert thread is not None
        assert (thread.env, thread.tags, thread.execution) == (
            {"NAME": "Ada"}, ["vip"], {"turns": {"a": 1}}
        )
        threads, total = await store.list_threads(tag="vip")
        assert [row.id for row in threads] == ["t1"] and total == 1
        assert await store.descendant_ids("t1") == ["c1"]
        messages, _ = await store.list_messages("t1")
        assert [(m.id, m.content) for m in messages] == [("m1", "hello"), ("m2", "hi")]
        assert messages[0].metadata == {"k": "v"}
        logs, _ = await store.list_logs("t1")
        assert [log.id for log in logs] == ["l1"]
        assert await store.read_file("t1", "/a.txt") == b"hello"
        assert [entry.content for entry in await store.list_queue("t1")] == ["later"]
        assert [effect.name for effect in await store.list_effects("t1")] == ["remind"]
        assert await store.get_value("t1", "counter") == {"n": 3}
        assert [key.name for key in await store.list_api_keys()] == ["ci"]
        # a key made before scopes existed keeps its full access: every package, read-write
        (old_key,) = await store.list_api_keys()
        assert (old_key.packages, old_key.read_only, old_key.full_access) == (None, False, True)
        # the new revision's tables work on the upgraded database
        await store.insert_messages([Message(id="m3", thread_id="t1", role="user", content="x")])
        await store.insert_log("t1", Log(id="l2", type="error", data={}, created_at=now_us()))
        assert [row.id for row in (await store.list_threads())[0]] == ["c1", "t1"]
    assert await run_sync(empty_url, current_revision) == HEAD
    # opening again leaves it at the head revision
    async with await open_store(empty_url) as store:
        assert (await store.get_message("t1", "m3")) is not None


async def test_upgrading_from_the_baseline_gives_exactly_the_schema_of_a_new_database(
    empty_url: str,
) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def sqlalchemy_object(_obj: Any, name: str | None, *_args: Any) -> bool:
        # the full-text index (FTS5 tables, a GIN expression index) is no SQLAlchemy object:
        # the two tests below check it
        return not (name or "").startswith(t.STORE_TEXT_OBJECTS)

    def migrate_step_by_step(conn: Connection) -> list[Any]:
        upgrade(conn, None, BASELINE)
        upgrade(conn, BASELINE, HEAD)
        context = MigrationContext.configure(conn, opts={"include_object": sqlalchemy_object})
        return list(compare_metadata(context, t.metadata))

    assert await run_sync(empty_url, migrate_step_by_step) == []


def full_text_objects(conn: Connection) -> list[str]:
    """The store's full-text index as the database has it."""
    if conn.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE name = 'store_items_fts'"
    else:
        query = "SELECT indexname FROM pg_indexes WHERE indexname = 'ix_store_items_text'"
    return list(conn.exec_driver_sql(query).scalars())


async def test_an_upgraded_database_has_the_stores_full_text_index(empty_url: str) -> None:
    def upgraded(conn: Connection) -> list[str]:
        upgrade(conn, None, BASELINE)
        upgrade(conn, BASELINE, HEAD)
        return full_text_objects(conn)

    assert len(await run_sync(empty_url, upgraded)) == 1


async def test_a_new_database_has_the_stores_full_text_index(empty_url: str) -> None:
    store = await open_store(empty_url)
    await store.close()
    assert len(await run_sync(empty_url, full_text_objects)) == 1


async def test_the_sqlite_script_holds_what_create_all_sends_today() -> None:
    assert statements() == sqlite_statements(), (
        "sa_core/store/sqlite_schema.sql is out of date: write it again with "
        "`python -m sa_core.store.migrate`"
    )


async def test_a_new_sqlite_database_gets_the_schema_create_all_makes(tmp_path: Path) -> None:
    def schema(conn: Connection) -> list[tuple[str, str, str]]:
        """Each table's and index's definition (lines without their trailing spaces)."""
        query = "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
        return [
            (kind, name, "\n".join(line.rstrip() for line in sql.splitlines()))
            for kind, name, sql in conn.exec_driver_sql(query)
        ]

    def created_by_create_all(conn: Connection) -> None:
        version_metadata.create_all(conn)
        t.metadata.create_all(conn)

    async with await open_store(f"sqlite:///{tmp_path / 'script.db'}"):
        pass
    await run_sync(f"sqlite:///{tmp_path / 'create_all.db'}", created_by_create_all)
    from_script = await run_sync(f"sqlite:///{tmp_path / 'script.db'}", schema)
    assert len(from_script) > 50
    assert from_script == await run_sync(f"sqlite:///{tmp_path / 'create_all.db'}", schema)


async def test_a_store_says_whether_it_created_the_database(empty_url: str) -> None:
    async with await open_store(empty_url) as store:
        assert store.created
    async with await open_store(empty_url) as store:
        assert not store.created


async def test_a_new_database_is_created_at_the_head_revision(empty_url: str) -> None:
    async with await open_store(empty_url):
        pass
    assert await run_sync(empty_url, current_revision) == HEAD


async def test_a_new_database_indexes_only_the_messages_that_have_a_parent(empty_url: str) -> None:
    """The parent index is partial on a new database too, as revision 0004 makes it."""
    async with await open_store(empty_url):
        pass

    def parent_index(conn: Connection) -> str:
        if conn.dialect.name == "postgresql":
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
        else:
            query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :name"
        return str(conn.execute(text(query), {"name": t.PARENT_INDEX}).scalar_one())

    definition = await run_sync(empty_url, parent_index)
    assert "WHERE" in definition and "parent_id IS NOT NULL" in definition, definition


async def test_a_database_migrated_by_a_newer_release_is_refused_with_a_clear_error(
    empty_url: str,
) -> None:
    async with await open_store(empty_url):
        pass

    def from_the_future(conn: Connection) -> None:
        conn.execute(version_table.update().values(version_num="9999_future"))

    await run_sync(empty_url, from_the_future)
    with pytest.raises(SchemaVersionError, match="9999_future.*upgrade standard-agents"):
        await open_store(empty_url)


async def test_the_head_constant_is_the_newest_shipped_revision() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_heads() == [HEAD]


async def test_workers_starting_together_on_one_postgresql_database_migrate_it_once(
    pg_empty_database_url: str,
) -> None:
    await run_sync(pg_empty_database_url, create_main_schema)
    stores = await asyncio.gather(*(open_store(pg_empty_database_url) for _ in range(4)))
    for store in stores:
        await store.close()

    def versions(conn: Connection) -> list[str]:
        return list(conn.execute(select(version_table.c.version_num)).scalars())

    assert await run_sync(pg_empty_database_url, versions) == [HEAD]


WORKERS = "0002_workers"


def create_workers_schema(conn: Connection) -> None:
    """A database left at revision 0002 (many workers, before the durable engine)."""
    upgrade(conn, None, WORKERS)


def fill_workers_schema(conn: Connection) -> None:
    fill_main_schema(conn)
    now = 1_700_000_000_000_000
    conn.execute(insert(_as_created(conn, t.workers)).values(
        id="w-old", started_at=now, heartbeat_at=now
    ))
    conn.execute(insert(_as_created(conn, t.thread_leases)).values(
        thread_id="t1", owner="w-old", expires_at=now, acquired_at=now
    ))


async def test_a_0002_database_is_upgraded_to_the_durable_engine_schema_and_keeps_its_data(
    empty_url: str,
) -> None:
    from sa_core.store.executions import ExecutionRecord, ResumePoint

    await run_sync(empty_url, create_workers_schema)
    await run_sync(empty_url, fill_workers_schema)
    assert await run_sync(empty_url, current_revision) == WORKERS

    async with await open_store(empty_url) as store:
        messages, _ = await store.list_messages("t1")
        assert [(m.id, m.content) for m in messages] == [("m1", "hello"), ("m2", "hi")]
        assert [entry.content for entry in await store.list_queue("t1")] == ["later"]
        # the old worker's expired lease is still there and is taken over
        assert await store.claim_expired_leases("w-new", 10**7) == ["t1"]
        # the effect written before the upgrade has attempts 0 and counts its runs now
        (run,) = await store.claim_due_effects(10**18)
        assert run.name == "remind" and run.attempt == 1
        # execution records work on the upgraded database
        assert await store.get_execution("t1") is None
        point = ResumePoint(since=now_us(), side="a")
        await store.save_execution("t1", ExecutionRecord(status="owed", resume=point))
        assert await store.claim_execution("t1", "runtime-1")
        assert not await store.claim_execution("t1", "runtime-2")
        record = await store.get_execution("t1")
        assert record is not None and record.status == "owed" and record.resume == point
        assert list(await store.owed_executions()) == ["t1"]
        await store.finish_execution("t1", "idle")
        assert await store.owed_executions() == {}
    assert await run_sync(empty_url, current_revision) == HEAD


def create_unversioned_durable_schema(conn: Connection) -> None:
    """A database created by the durable engine's release before migrations existed."""
    upgrade(conn, None, BASELINE)
    conn.execute(text("DROP TABLE alembic_version"))
    conn.execute(text("ALTER TABLE effects ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0"))
    t.executions.create(conn)


async def test_an_unversioned_database_that_already_has_execution_records_is_upgraded(
    empty_url: str,
) -> None:
    from sa_core.store.executions import ExecutionRecord

    await run_sync(empty_url, create_unversioned_durable_schema)
    await run_sync(empty_url, fill_main_schema)
    async with await open_store(empty_url) as store:
        await store.save_execution("t1", ExecutionRecord(status="idle"))
        assert (await store.get_execution("t1")) is not None
        assert [effect.name for effect in await store.list_effects("t1")] == ["remind"]
    assert await run_sync(empty_url, current_revision) == HEAD
