"""Threads in the store, their logs, and the transactions that group writes."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError
from store_kit import make_thread, msg, store_on_each_backend

from sa_core.spec.records import (
    Log,
    SubagentRegistryEntry,
)
from sa_core.store import (
    UNSET,
    Store,
    now_us,
)

store = store_on_each_backend()


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
