"""Tests of sa_core.store: every method group, both backends, durability.

What a step's writes cost is measured by ``benchmarks/store_step.py``, not here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from sa_core.errors import FileSystemError
from sa_core.spec.records import (
    AttachmentRef,
    Log,
    Message,
    QueueMessageInput,
    SubagentRegistryEntry,
    ToolCall,
    ToolCallFunction,
)
from sa_core.store import (
    UNSET,
    Store,
    ThreadRow,
    now_us,
    open_store,
    resolve_database_url,
)
from sa_core.store.paths import glob_matches, normalize_path

# SQLAlchemy's asyncio layer (aiosqlite, asyncpg) needs greenlet; the default backend does not.
_ASYNC_MARKS = (
    [] if importlib.util.find_spec("greenlet") else [pytest.mark.skip(reason="needs greenlet")]
)

SQLITE_BACKENDS = ["sqlite", pytest.param("sqlite+aiosqlite", marks=_ASYNC_MARKS)]
BACKENDS = [*SQLITE_BACKENDS, pytest.param("postgresql", marks=_ASYNC_MARKS)]


def db_url(kind: str, path: Path) -> str:
    return f"{kind}:///{path}"


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


async def make_thread(store: Store, thread_id: str = "t1", **fields: Any) -> ThreadRow:
    values: dict[str, Any] = {"package": "pkg", "agent_id": "agent"} | fields
    return await store.create_thread(ThreadRow(id=thread_id, **values))


def msg(message_id: str, thread_id: str = "t1", **fields: Any) -> Message:
    values: dict[str, Any] = {"role": "user", "content": message_id} | fields
    return Message(id=message_id, thread_id=thread_id, **values)


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


# --- threads -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_threads_crud(store: Store) -> None:
    row = await make_thread(
        store,
        env={"KEY": "v", "SECRET": "s"},
        env_types={"SECRET": "secret"},
        tags=["a", "b"],
        properties={"x": [1, 2]},
        user_id="u1",
    )
    assert row.created_at > 0 and row.updated_at == row.created_at
    got = await store.get_thread("t1")
    assert got == row
    assert await store.get_thread("nope") is None

    assert await store.update_thread(
        "t1", execution={"step": 3, "side": "a"}, stopped=True, terminated=123, tags=["c"]
    )
    got = await store.get_thread("t1")
    assert got is not None
    assert got.execution == {"step": 3, "side": "a"} and got.stopped and got.terminated == 123
    assert got.tags == ["c"] and got.updated_at > row.updated_at
    assert not await store.update_thread("nope", stopped=True)
    with pytest.raises(ValueError, match="unknown"):
        await store.update_thread("t1", bogus=1)
    with pytest.raises(ValueError, match="read-only"):
        await store.update_thread("t1", id="x")


@pytest.mark.asyncio
async def test_list_threads_filters(store: Store) -> None:
    await make_thread(store, "p1", tags=["red"])
    await make_thread(store, "p2", agent_id="other", tags=["red", "blue"])
    await make_thread(store, "c1", parent_id="p1")
    await make_thread(store, "c2", parent_id="p1", package="pkg2")

    rows, total = await store.list_threads()
    assert [r.id for r in rows] == ["c2", "c1", "p2", "p1"] and total == 4
    rows, total = await store.list_threads(parent_id=None)
    assert [r.id for r in rows] == ["p2", "p1"] and total == 2
    rows, _ = await store.list_threads(parent_id="p1")
    assert [r.id for r in rows] == ["c2", "c1"]
    rows, _ = await store.list_threads(parent_id=UNSET, package="pkg2")
    assert [r.id for r in rows] == ["c2"]
    rows, total = await store.list_threads(agent_id="other")
    assert [r.id for r in rows] == ["p2"] and total == 1
    rows, total = await store.list_threads(tag="red")
    assert [r.id for r in rows] == ["p2", "p1"] and total == 2
    rows, total = await store.list_threads(tag="blue")
    assert [r.id for r in rows] == ["p2"]
    rows, total = await store.list_threads(limit=2, offset=1)
    assert [r.id for r in rows] == ["c1", "p2"] and total == 4
    await store.update_thread("p1", tags=[])
    rows, _ = await store.list_threads(tag="red")
    assert [r.id for r in rows] == ["p2"]


async def populate(store: Store, thread_id: str) -> None:
    await store.insert_messages([msg(f"{thread_id}-m", thread_id)])
    await store.insert_log(thread_id, Log(id=f"{thread_id}-l", type="x", created_at=now_us()))
    await store.write_file(thread_id, "/a/b.txt", b"data", "text/plain")
    await store.enqueue(thread_id, {"content": "queued"})
    await store.schedule_effect(thread_id, "eff", {}, now_us())
    await store.upsert_child(thread_id, SubagentRegistryEntry(reference="r", name="n"))
    await store.create_env_request(thread_id, {"k": 1})
    await store.set_value(thread_id, "k", 1)


@pytest.mark.asyncio
async def test_delete_thread_cascades_to_descendants(store: Store) -> None:
    await make_thread(store, "root")
    await make_thread(store, "child", parent_id="root")
    await make_thread(store, "grandchild", parent_id="child")
    await make_thread(store, "child2", parent_id="root")
    await make_thread(store, "other")
    for thread_id in ("root", "child", "grandchild", "child2", "other"):
        await populate(store, thread_id)

    assert await store.descendant_ids("root") == ["child", "child2", "grandchild"]
    assert await store.descendant_ids("grandchild") == []
    deleted = await store.delete_thread("root")
    assert deleted[0] == "root" and sorted(deleted) == sorted(
        ["root", "child", "grandchild", "child2"]
    )
    for thread_id in deleted:
        assert await store.get_thread(thread_id) is None
        assert await store.history(thread_id) == []
        assert (await store.list_logs(thread_id))[1] == 0
        assert await store.file_stats(thread_id) == await store.file_stats("nobody")
        assert await store.list_queue(thread_id) == []
        assert await store.list_effects(thread_id) == []
        assert await store.list_children(thread_id) == []
        assert await store.get_value(thread_id, "k") is None
    assert await store.threads_with_queue() == ["other"]
    assert len(await store.history("other")) == 1
    assert (await store.file_stats("other")).file_count == 1
    assert await store.delete_thread("root") == []


@pytest.mark.asyncio
async def test_integrity_errors_are_sqlalchemy_errors(store: Store) -> None:
    await make_thread(store)
    with pytest.raises(IntegrityError):
        await make_thread(store)
    with pytest.raises(IntegrityError):  # foreign key: the thread must exist
        await store.insert_messages([msg("m1", "no-such-thread")])
    await store.insert_messages([msg("m1")])
    with pytest.raises(IntegrityError):
        await store.insert_messages([msg("m1")])
    assert [m.id for m in await store.history("t1")] == ["m1"]


# --- messages ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_message_round_trip_every_field(store: Store) -> None:
    await make_thread(store)
    full = Message(
        id="m1",
        thread_id="t1",
        role="assistant",
        content="hi",
        name="bot",
        tool_calls=[
            ToolCall(
                id="c1",
                function=ToolCallFunction(name="f", arguments='{"a": 1}'),
                extra_content={"google": {"thought_signature": "sig"}},
            )
        ],
        tool_call_id="tc",
        log_id="l1",
        created_at=now_us(),
        request_sent_at=1,
        response_completed_at=2,
        status="completed",
        silent=True,
        tool_status="success",
        reasoning_content="because",
        reasoning_details=[{"type": "reasoning.text", "text": "x"}],
        parent_id="p",
        depth=0,
        prompt="main",
        attachments=[
            AttachmentRef(id="f1", path="/attachments/a.png", name="a.png", size=3, width=1)
        ],
        metadata={"k": [1, {"n": None}]},
        subagent_id="s",
        subagent_name="sn",
        subagent_title="st",
        subagent_description="sd",
        subagent_status="running",
        subagent_resumable=True,
        subagent_blocking=False,
        subagent_thread_name="tn",
        subagent_spawn_group_id="g",
        custom_extra={"kept": True},
    )
    await store.insert_messages([full])
    got = await store.get_message("t1", "m1")
    assert got == full
    assert got is not None and got.model_extra == {"custom_extra": {"kept": True}}
    assert got.tool_calls is not None and got.tool_calls[0].arguments == {"a": 1}
    assert await store.get_message("other", "m1") is None


@pytest.mark.asyncio
async def test_messages_read_back_as_validating_them_would_build_them(store: Store) -> None:
    """Rows without nested models skip validation: the messages must not differ in any way.

    Same fields in the same order, same Python types (booleans, integers, decoded JSON), same
    fields set and extras, as ``Message.model_validate`` builds them, for every kind of row.
    """
    from sa_core.store import messagerows

    # the table's columns follow the message's fields: a read row is then its __dict__
    assert messagerows.IN_FIELD_ORDER
    await make_thread(store)
    shapes: list[dict[str, Any]] = [
        {},
        {
            "role": "assistant",
            "status": "completed",
            "log_id": "l",
            "request_sent_at": 5,
            "response_completed_at": 6,
            "prompt": "main",
        },
        {"silent": True, "metadata": {"k": [1, {"n": None}], "flag": False}},
        {"role": "tool", "tool_call_id": "c", "name": "f", "tool_status": "error"},
        {"role": "assistant", "reasoning_content": "r", "reasoning_details": [{"t": "x"}]},
        {
            "subagent_id": "s",
            "subagent_status": "running",
            "subagent_resumable": False,
            "subagent_blocking": True,
            "subagent_spawn_group_id": "g",
            "subagent_title": None,
        },
        {"depth": 1, "parent_id": "p", "content": None},
        {"tool_calls": [ToolCall(id="c", function=ToolCallFunction(name="f", arguments="{}"))]},
        {"attachments": [AttachmentRef(id="f", path="/a.txt", name="a.txt", size=1)]},
        {"custom_extra": {"kept": True}},
    ]
    written = [msg(f"m{i}", created_at=now_us(), **shape) for i, shape in enumerate(shapes)]
    await store.insert_messages(written)
    page, _total = await store.list_messages("t1", include_silent=True, max_depth=None)
    read = [*page, *await store.history("t1")]
    assert {m.id for m in read} == {m.id for m in written}
    for message in read:
        built = Message.model_validate(message.model_dump())
        assert list(message.__dict__.items()) == list(built.__dict__.items())
        assert [type(v) for v in message.__dict__.values()] == [
            type(v) for v in built.__dict__.values()
        ]
        assert message.model_fields_set == built.model_fields_set
        assert message.model_extra == built.model_extra
        original = next(m for m in written if m.id == message.id)
        assert message.model_dump_json() == original.model_dump_json()


@pytest.mark.asyncio
async def test_messages_with_none_fields_round_trip(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message's ``None`` fields are written as NULL in the statement: rows read back equal.

    Covers a shape per message, shapes beyond the cache's bound, and a multi-row insert.
    """
    from sa_core.store import messages as store_messages

    monkeypatch.setattr(store_messages._ShapedInsert, "MAX_SHAPES", 2)
    await make_thread(store)
    optional = ["name", "tool_call_id", "log_id", "status", "prompt", "metadata", "parent_id"]
    values: dict[str, Any] = {
        "name": "n",
        "tool_call_id": "tc",
        "log_id": "l",
        "status": "completed",
        "prompt": "p",
        "metadata": {"k": None},
        "parent_id": "x",
    }
    singles = [
        msg(f"m{i}", created_at=now_us(), **{key: values[key] for key in optional[:i]})
        for i in range(len(optional) + 1)
    ]
    for message in singles:
        await store.insert_messages([message])
    several = [msg("r1", created_at=now_us(), name="n"), msg("r2", created_at=now_us())]
    await store.insert_messages(several)
    for message in [*singles, *several]:
        assert await store.get_message("t1", message.id) == message
    log = Log(id="l1", type="llm_call", data={"a": None}, created_at=now_us())
    await store.insert_log("t1", log)
    assert (await store.list_logs("t1"))[0] == [log]


@pytest.mark.asyncio
async def test_message_ordering_and_filters(store: Store) -> None:
    await make_thread(store)
    same = now_us()
    await store.insert_messages(
        [
            msg("a", created_at=same),
            msg("b", created_at=same, role="assistant", status="pending"),
            msg("c", created_at=same, silent=True),
            msg("d", depth=1, parent_id="b", role="tool"),
            msg("e", status="failed"),
        ]
    )
    await store.insert_messages([msg("f")])

    def ids(messages: list[Message]) -> list[str]:
        return [m.id for m in messages]

    page, total = await store.list_messages("t1")
    assert ids(page) == ["a", "b", "e", "f"] and total == 4
    page, total = await store.list_messages("t1", include_silent=True, max_depth=None)
    assert ids(page) == ["a", "b", "c", "d", "e", "f"] and total == 6
    page, total = await store.list_messages("t1", order="desc", limit=2)
    assert ids(page) == ["f", "e"] and total == 4
    page, total = await store.list_messages("t1", order="desc", limit=2, offset=2)
    assert ids(page) == ["b", "a"]
    page, total = await store.list_messages("t1", statuses_excluded=("pending", "failed"))
    assert ids(page) == ["a", "f"] and total == 2
    page, _ = await store.list_messages("t1", parent_id="b", max_depth=None)
    assert ids(page) == ["d"]
    page, _ = await store.list_messages("t1", parent_id=None, include_silent=True)
    assert ids(page) == ["a", "b", "c", "e", "f"]

    assert ids(await store.history("t1")) == ["a", "c", "e", "f"]
    e = await store.get_message("t1", "e")
    assert e is not None
    assert ids(await store.history("t1", since=e.created_at)) == ["f"]
    assert ids(await store.messages_by_parent("t1", "b")) == ["d"]

    assert await store.delete_message("t1", "f")
    assert not await store.delete_message("t1", "f")
    assert ids(await store.history("t1")) == ["a", "c", "e"]


@pytest.mark.asyncio
async def test_update_message(store: Store) -> None:
    await make_thread(store)
    await store.insert_messages([msg("m1", role="assistant", status="pending")])
    call = ToolCall(id="c", function=ToolCallFunction(name="t"))
    updated = await store.update_message(
        "m1", {"status": "completed", "tool_calls": [call], "metadata": {"n": 1}, "content": None}
    )
    assert updated is not None
    assert updated.status == "completed" and updated.tool_calls == [call]
    assert updated.metadata == {"n": 1} and updated.content is None
    assert await store.get_message("t1", "m1") == updated
    assert await store.update_message("missing", {"status": "failed"}) is None
    same = await store.update_message("m1", {})
    assert same == updated
    with pytest.raises(ValueError, match="unknown"):
        await store.update_message("m1", {"nope": 1})


@pytest.mark.asyncio
async def test_insert_message_requires_thread_id(store: Store) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        await store.insert_messages([Message(id="x", role="user")])


@pytest.mark.asyncio
async def test_history_uses_index(tmp_path: Path) -> None:
    from sa_core.store.messages import _HISTORY

    async with await open_store(f"sqlite:///{tmp_path}/sa.db") as store:

        def plan(conn: Any) -> str:
            compiled = _HISTORY.stmt.compile(dialect=conn.dialect)  # type: ignore[attr-defined]
            sql = "EXPLAIN QUERY PLAN " + compiled.string
            args = ["t1", 0, -1, "pending"]
            rows = conn.exec_driver_sql(sql, tuple(args)).all()
            return " | ".join(str(row[-1]) for row in rows)

        text_plan = await store._read(plan)
        # the thread's rows in (created_at, seq) order, read from the index: no sort
        assert "ix_messages_thread_created (thread_id=? AND created_at>?)" in text_plan
        assert "TEMP B-TREE" not in text_plan


# --- logs --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_logs(store: Store) -> None:
    await make_thread(store)
    for i in range(5):
        await store.insert_log(
            "t1", Log(id=f"l{i}", type="model", data={"i": i}, created_at=now_us(), cost=0.5)
        )
    logs, total = await store.list_logs("t1")
    assert [log.id for log in logs] == ["l4", "l3", "l2", "l1", "l0"] and total == 5
    assert logs[0].data == {"i": 4} and logs[0].model_extra == {"cost": 0.5}
    logs, total = await store.list_logs("t1", order="asc", limit=2, offset=1)
    assert [log.id for log in logs] == ["l1", "l2"] and total == 5


# --- transactions ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_transaction_commit_and_rollback(store: Store) -> None:
    await make_thread(store)
    async with store.transaction() as tx:
        await store.insert_messages([msg("m1")], tx=tx)
        await store.update_thread("t1", execution={"step": 1}, tx=tx)
        await store.insert_log("t1", Log(id="l1", type="x", created_at=now_us()), tx=tx)
        # Methods called inside the block without tx= join it (read your writes).
        assert [m.id for m in await store.history("t1")] == ["m1"]
    assert [m.id for m in await store.history("t1")] == ["m1"]

    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction() as tx:
            await store.insert_messages([msg("m2")], tx=tx)
            await store.update_thread("t1", execution={"step": 2}, tx=tx)
            await store.write_file("t1", "/x.txt", b"x", "text/plain")
            async with store.transaction() as inner:
                assert inner is tx
                await store.enqueue("t1", {"content": "q"}, tx=inner)
            raise RuntimeError("boom")
    assert [m.id for m in await store.history("t1")] == ["m1"]
    thread = await store.get_thread("t1")
    assert thread is not None and thread.execution == {"step": 1}
    assert await store.read_file("t1", "/x.txt") is None
    assert await store.list_queue("t1") == []
    with pytest.raises(RuntimeError, match="closed"):
        await store.insert_messages([msg("m3")], tx=tx)


@pytest.mark.asyncio
async def test_uncommitted_writes_invisible_to_other_tasks(store: Store) -> None:
    await make_thread(store)
    inside = asyncio.Event()
    release = asyncio.Event()

    async def writer() -> None:
        async with store.transaction() as tx:
            await store.insert_messages([msg("m1")], tx=tx)
            inside.set()
            await release.wait()

    task = asyncio.create_task(writer())
    await inside.wait()
    if not store._backend.serialize_reads:
        assert await store.history("t1") == []
    release.set()
    await task
    assert [m.id for m in await store.history("t1")] == ["m1"]


@pytest.mark.asyncio
async def test_concurrent_writers_are_serialised(store: Store) -> None:
    await make_thread(store)

    async def step(i: int) -> None:
        async with store.transaction() as tx:
            await store.insert_messages([msg(f"m{i}")], tx=tx)
            await asyncio.sleep(0)
            await store.update_message(f"m{i}", {"status": "completed"}, tx=tx)
        await store.set_value("t1", f"k{i}", i)

    await asyncio.gather(*(step(i) for i in range(40)))
    assert len(await store.history("t1")) == 40
    assert len(await store.list_values("t1")) == 40


# --- files -------------------------------------------------------------------------------------


def test_normalize_path() -> None:
    assert normalize_path("/a/./b/../c.txt") == "/a/c.txt"
    assert normalize_path("attachments//x.txt") == "/attachments/x.txt"
    assert normalize_path("/") == "/"
    for bad in ("/../etc/passwd", "a/../../x", "..", "", "/a\x00b"):
        with pytest.raises(FileSystemError):
            normalize_path(bad)


def test_glob_matches() -> None:
    assert glob_matches("*.txt", "/a/b.txt", "b.txt")
    assert not glob_matches("*.txt", "/a/b.md", "b.md")
    assert glob_matches("/attachments/**", "/attachments/x/y.png", "y.png")
    assert not glob_matches("/attachments/**", "/other/y.png", "y.png")
    assert not glob_matches("/attachments/*", "/attachments/x/y.png", "y.png")
    assert glob_matches("**/*.md", "/a/b/c.md", "c.md")
    assert glob_matches("/**/*.md", "/c.md", "c.md")
    assert glob_matches("file?.[ch]", "/file1.c", "file1.c")
    assert not glob_matches("file[!1].c", "/file1.c", "file1.c")


@pytest.mark.asyncio
async def test_files_basic(store: Store) -> None:
    await make_thread(store)
    record = await store.write_file(
        "t1", "/attachments/report.txt", b"hello\n", "text/plain", metadata={"m": 1}
    )
    assert record.path == "/attachments/report.txt" and record.name == "report.txt"
    assert record.size == 6 and record.metadata == {"m": 1} and not record.is_directory
    assert await store.read_file("t1", "attachments/../attachments/report.txt") == b"hello\n"
    assert await store.read_file("t1", "/missing") is None

    again = await store.write_file("t1", "/attachments/report.txt", b"bye", "text/plain")
    assert again.size == 3 and again.created_at == record.created_at
    assert await store.read_file("t1", "/attachments/report.txt") == b"bye"

    image = await store.write_file(
        "t1", "/attachments/img.png", b"\x89PNG", "image/png", width=4, height=2
    )
    assert (image.width, image.height) == (4, 2)
    stats = await store.file_stats("t1")
    assert (stats.total_size, stats.file_count) == (7, 2)

    assert await store.unlink_file("t1", "/attachments/img.png")
    assert not await store.unlink_file("t1", "/attachments/img.png")
    assert await store.stat_file("t1", "/attachments/img.png") is None


@pytest.mark.asyncio
async def test_files_directories(store: Store) -> None:
    await make_thread(store)
    await store.write_file("t1", "/a/b/c.txt", b"c", "text/plain")
    a = await store.stat_file("t1", "/a")
    assert a is not None and a.is_directory and a.name == "a"
    root = await store.stat_file("t1", "/")
    assert root is not None and root.is_directory
    assert [(r.name, r.is_directory) for r in await store.readdir("t1", "/")] == [("a", True)]
    assert [r.path for r in await store.readdir("t1", "/a")] == ["/a/b"]
    assert [r.path for r in await store.readdir("t1", "/a/b")] == ["/a/b/c.txt"]

    made = await store.mkdir("t1", "/x/y")
    assert made.is_directory and made.path == "/x/y"
    assert (await store.mkdir("t1", "/x/y")).created_at == made.created_at
    assert [r.name for r in await store.readdir("t1", "/")] == ["a", "x"]
    assert await store.readdir("t1", "/x/y") == []

    with pytest.raises(FileSystemError):
        await store.readdir("t1", "/nope")
    with pytest.raises(FileSystemError):
        await store.readdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.mkdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/a/b/c.txt/d", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/a/b", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.read_file("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.unlink_file("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.write_file("t1", "/../escape.txt", b"", "text/plain")
    with pytest.raises(FileSystemError):
        await store.read_file("t1", "/a/../../etc/passwd")

    with pytest.raises(FileSystemError, match="not empty"):
        await store.rmdir("t1", "/a")
    with pytest.raises(FileSystemError):
        await store.rmdir("t1", "/a/b/c.txt")
    with pytest.raises(FileSystemError):
        await store.rmdir("t1", "/")
    assert await store.rmdir("t1", "/x/y")
    assert not await store.rmdir("t1", "/x/y")
    # LIKE wildcards in names are escaped: removing /a_b must not touch /axb.
    await store.write_file("t1", "/a_b/f.txt", b"1", "text/plain")
    await store.write_file("t1", "/axb/f.txt", b"2", "text/plain")
    assert await store.rmdir("t1", "/a_b", recursive=True)
    assert await store.read_file("t1", "/axb/f.txt") == b"2"
    assert await store.rmdir("t1", "/a", recursive=True)
    assert await store.stat_file("t1", "/a/b/c.txt") is None
    assert [r.name for r in await store.readdir("t1", "/")] == ["axb", "x"]


@pytest.mark.asyncio
async def test_grep_find_copy(store: Store) -> None:
    await make_thread(store)
    await make_thread(store, "t2")
    await store.write_file("t1", "/notes/a.txt", b"alpha\nbeta\nalphabet\n", "text/plain")
    await store.write_file("t1", "/notes/b.md", b"# alpha\n", "text/markdown")
    await store.write_file("t1", "/data.json", b'{"alpha": 1}', "application/json")
    await store.write_file("t1", "/bin.dat", b"alpha", "application/octet-stream")
    await store.write_file("t1", "/attachments/x/y.png", b"png", "image/png")

    results = await store.grep_files("t1", "^alpha")
    assert [(r.path, r.matches, r.line_numbers) for r in results] == [
        ("/notes/a.txt", ["alpha", "alphabet"], [1, 3])
    ]
    results = await store.grep_files("t1", "alpha")
    assert [r.path for r in results] == ["/data.json", "/notes/a.txt", "/notes/b.md"]
    assert await store.grep_files("t1", "alpha(") == []  # invalid regex: taken literally

    found = await store.find_files("t1", "*.txt")
    assert [r.path for r in found] == ["/notes/a.txt"]
    found = await store.find_files("t1", "/attachments/**")
    assert [r.path for r in found] == ["/attachments/x", "/attachments/x/y.png"]
    found = await store.find_files("t1", "**/*.md")
    assert [r.path for r in found] == ["/notes/b.md"]

    copied = await store.copy_file("t1", "/notes/a.txt", "t2", "/copies/a.txt")
    assert copied.path == "/copies/a.txt" and copied.mime_type == "text/plain"
    assert await store.read_file("t2", "/copies/a.txt") == b"alpha\nbeta\nalphabet\n"
    assert [r.path for r in await store.readdir("t2", "/")] == ["/copies"]
    with pytest.raises(FileSystemError):
        await store.copy_file("t1", "/missing", "t2", "/x")
    with pytest.raises(FileSystemError):
        await store.copy_file("t1", "/notes", "t2", "/x")


# --- queue -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_queue(store: Store) -> None:
    await make_thread(store)
    await make_thread(store, "t2")
    first = await store.enqueue(
        "t1",
        QueueMessageInput(
            content="one",
            attachments=[AttachmentRef(path="/attachments/a.txt", name="a.txt")],
            metadata={"m": 1},
        ),
    )
    second = await store.enqueue(
        "t1", {"role": "assistant", "content": "two", "silent": True, "created_at": 5}
    )
    third = await store.enqueue("t1", {"content": "three"})
    await store.enqueue("t2", {"content": "other"})
    assert await store.threads_with_queue() == ["t1", "t2"]

    listed = await store.list_queue("t1")
    assert [e.id for e in listed] == [second, first, third]
    entry = listed[1]
    assert entry.role == "user" and entry.metadata == {"m": 1} and not entry.silent
    assert entry.attachments[0]["path"] == "/attachments/a.txt"
    assert listed[0].silent and listed[0].role == "assistant" and listed[0].created_at == 5

    assert await store.delete_queue_entry("t1", third)
    assert not await store.delete_queue_entry("t1", third)
    drained = await store.drain_queue("t1")
    assert [e.content for e in drained] == ["two", "one"]
    assert await store.drain_queue("t1") == []
    assert await store.threads_with_queue() == ["t2"]


@pytest.mark.asyncio
async def test_queue_drain_is_atomic(store: Store) -> None:
    await make_thread(store)
    received: list[str] = []

    async def producer(n: int) -> None:
        for i in range(n):
            await store.enqueue("t1", {"content": f"{i}"})
            await asyncio.sleep(0)

    async def consumer() -> None:
        for _ in range(60):
            received.extend(e.content for e in await store.drain_queue("t1"))
            await asyncio.sleep(0)

    await asyncio.gather(producer(50), consumer(), consumer())
    received.extend(e.content for e in await store.drain_queue("t1"))
    assert sorted(received, key=int) == [str(i) for i in range(50)]

    # Inside a rolled-back transaction the drain is undone too.
    await store.enqueue("t1", {"content": "kept"})
    with pytest.raises(KeyError):
        async with store.transaction() as tx:
            assert len(await store.drain_queue("t1", tx=tx)) == 1
            raise KeyError("fail")
    assert [e.content for e in await store.list_queue("t1")] == ["kept"]


@pytest.mark.asyncio
async def test_draining_known_entries_takes_exactly_them_or_nothing(store: Store) -> None:
    from sa_core.store.queue import QueueChanged

    await make_thread(store)
    await store.enqueue("t1", {"content": "one"})
    await store.enqueue("t1", {"content": "two"})
    known = await store.list_queue("t1")
    await store.enqueue("t1", {"content": "later"})  # queued after the read: stays
    async with store.transaction() as tx:
        await store.drain_entries("t1", known, tx=tx)
        await store.insert_messages([Message(id="m1", thread_id="t1", role="user", content="x")],
                                    tx=tx)  # fmt: skip
    assert [e.content for e in await store.list_queue("t1")] == ["later"]

    known = await store.list_queue("t1")
    await store.enqueue("t1", {"content": "last"})
    assert await store.delete_queue_entry("t1", known[0].id)  # deleted meanwhile
    with pytest.raises(QueueChanged):
        async with store.transaction() as tx:
            await store.drain_entries("t1", known, tx=tx)
            await store.insert_messages(
                [Message(id="m2", thread_id="t1", role="user", content="y")], tx=tx
            )
    assert [e.content for e in await store.list_queue("t1")] == ["last"]
    assert await store.get_message("t1", "m2") is None  # nothing of that transaction stayed


# --- effects -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_effects(store: Store) -> None:
    await make_thread(store)
    now = now_us()
    due = await store.schedule_effect("t1", "remind", {"text": "hi"}, now - 10)
    later = await store.schedule_effect("t1", "remind", {}, now + 60_000_000)
    other = await store.schedule_effect("t1", "cleanup", {"n": 1}, now - 5)
    assert due.args == {"text": "hi"} and due.scheduled_at == now - 10

    assert [e.id for e in await store.list_effects("t1")] == [due.id, other.id, later.id]
    assert [e.id for e in await store.list_effects("t1", "remind")] == [due.id, later.id]
    assert await store.next_effect_time() == now - 10

    runs = await store.claim_due_effects(now)
    assert [(r.id, r.name, r.args, r.thread_id) for r in runs] == [
        (due.id, "remind", {"text": "hi"}, "t1"),
        (other.id, "cleanup", {"n": 1}, "t1"),
    ]
    assert await store.claim_due_effects(now) == []
    assert [e.id for e in await store.list_effects("t1")] == [later.id]
    assert await store.next_effect_time() == now + 60_000_000

    assert await store.finish_effect(due.id, "completed")
    # other stays "processing" as after a crash: reset makes it run again.
    assert await store.reset_processing_effects() == 1
    assert [r.id for r in await store.claim_due_effects(now)] == [other.id]
    assert await store.finish_effect(other.id, "failed", "boom")
    assert await store.reset_processing_effects() == 0

    assert await store.remove_effect("t1", later.id)
    assert not await store.remove_effect("t1", later.id)
    assert await store.next_effect_time() is None
    with pytest.raises(ValueError):
        await store.finish_effect(due.id, "pending")  # type: ignore[arg-type]


# --- registries, env requests, values, api keys ------------------------------------------------


@pytest.mark.asyncio
async def test_children_registry(store: Store) -> None:
    await make_thread(store)
    await store.upsert_child("t1", SubagentRegistryEntry(reference="c1", name="a", title="one"))
    await store.upsert_child("t1", SubagentRegistryEntry(reference="c2", name="b"))
    await store.upsert_child(
        "t1", SubagentRegistryEntry(reference="c1", name="a", title="uno", status="done")
    )
    children = await store.list_children("t1")
    assert [(c.reference, c.title, c.status) for c in children] == [
        ("c1", "uno", "done"),
        ("c2", None, "running"),
    ]
    updated = await store.update_child("t1", "c2", status="stopped", blocking=True)
    assert updated is not None and updated.status == "stopped" and updated.blocking
    assert (await store.list_children("t1"))[1] == updated
    assert await store.update_child("t1", "nope", status="x") is None


@pytest.mark.asyncio
async def test_env_requests(store: Store) -> None:
    await make_thread(store)
    await make_thread(store, "t2")
    request_id = await store.create_env_request("t1", {"variables": ["A"], "child": "c"})
    assert len(request_id) == 36
    assert await store.get_env_request("t1", request_id) == {"variables": ["A"], "child": "c"}
    assert await store.get_env_request("t2", request_id) is None
    assert await store.delete_env_request("t1", request_id)
    assert await store.get_env_request("t1", request_id) is None


@pytest.mark.asyncio
async def test_values(store: Store) -> None:
    await make_thread(store)
    assert await store.get_value("t1", "k") is None
    await store.set_value("t1", "k", {"a": [1, 2]})
    await store.set_value("t1", "k", {"a": [3]})
    await store.set_value("t1", "p_1", "x")
    await store.set_value("t1", "pa", None)
    assert await store.get_value("t1", "k") == {"a": [3]}
    assert await store.list_values("t1") == {"k": {"a": [3]}, "p_1": "x", "pa": None}
    assert await store.list_values("t1", prefix="p_") == {"p_1": "x"}
    assert await store.delete_value("t1", "k")
    assert not await store.delete_value("t1", "k")


@pytest.mark.asyncio
async def test_api_keys(store: Store) -> None:
    token, row = await store.create_api_key("ci")
    assert token.startswith("sa_") and len(token) > 40 and token.startswith(row.prefix)
    assert await store.count_api_keys() == 1
    verified = await store.verify_api_key(token)
    assert verified is not None and verified.id == row.id and not verified.revoked
    assert await store.verify_api_key(token + "x") is None
    assert await store.verify_api_key("nope") is None
    token2, row2 = await store.create_api_key("other")
    assert [k.name for k in await store.list_api_keys()] == ["ci", "other"]

    assert await store.revoke_api_key(row.prefix)
    assert not await store.revoke_api_key(row.prefix)
    assert await store.verify_api_key(token) is None
    assert await store.count_api_keys() == 1
    assert await store.revoke_api_key(row2.id)
    assert await store.count_api_keys() == 0
    keys = await store.list_api_keys()
    assert all(k.revoked for k in keys)


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


def test_message_rows_match_the_models_json_dump() -> None:
    """``message_to_row`` dumps only the JSON fields; the parameters equal a full JSON dump's."""
    from sa_core.store.messagerows import _PARAMS, message_to_row
    from sa_core.store.messagerows import STORED_FIELDS as _STORED

    def dumped_row(message: Message) -> dict[str, Any]:
        dumped = message.model_dump(mode="json")
        row = {param: dumped[key] for key, param in _PARAMS}
        row["p_extra"] = {k: v for k, v in dumped.items() if k not in _STORED} or None
        return row

    call = ToolCall(
        id="c1",
        function=ToolCallFunction(name="f", arguments='{"a": 1}'),
        extra_content={"google": {"thought_signature": "sig"}},
    )
    messages = [
        msg("a", role="assistant", content=None, tool_calls=[call], status="completed"),
        msg("t", role="tool", name="f", tool_call_id="c1", tool_status="success", depth=1),
        msg(
            "u",
            attachments=[AttachmentRef(path="/attachments/a.png", name="a.png", width=2)],
            metadata={"k": [1, {"n": None}]},
            reasoning_details=[{"type": "reasoning.text", "text": "x"}],
            silent=True,
        ),
        msg("x", custom_extra={"kept": True}),
    ]
    for message in messages:
        assert message_to_row(message) == dumped_row(message)
