"""The store's queue, effects, child registry, env requests, values and API keys."""

from __future__ import annotations

import asyncio

import pytest
from store_kit import make_thread, store_on_each_backend

from sa_core.spec.records import (
    AttachmentRef,
    Message,
    QueueMessageInput,
    SubagentRegistryEntry,
)
from sa_core.store import (
    Store,
    now_us,
)

store = store_on_each_backend()


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
