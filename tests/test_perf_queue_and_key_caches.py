"""The empty-queue and API-key caches stay exact: a write by this store, in a transaction, or by
another store on the same file is seen; a revoked key is refused at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cache_kit import sqlite_store, thread_with

from sa_core.store import Store, ThreadRow, open_store

store = sqlite_store()


# -- empty queues --------------------------------------------------------------------------------


async def queue_in_tx(store: Store, thread_id: str = "t1") -> list[str]:
    async with store.transaction() as tx:
        return [entry.content for entry in await store.list_queue(thread_id, tx=tx)]


@pytest.mark.asyncio
async def test_a_queue_known_empty_shows_entries_queued_by_this_store(store):
    await thread_with(store)
    assert await queue_in_tx(store) == []
    assert await queue_in_tx(store) == []  # known empty: not read
    await store.enqueue("t1", {"content": "later"})
    assert await queue_in_tx(store) == ["later"]


@pytest.mark.asyncio
async def test_a_queue_known_empty_shows_entries_queued_by_another_store(store, tmp_path):
    await thread_with(store)
    assert await queue_in_tx(store) == []
    other = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        await other.enqueue("t1", {"content": "from elsewhere"})
    finally:
        await other.close()
    assert await queue_in_tx(store) == ["from elsewhere"]


@pytest.mark.asyncio
async def test_a_queue_read_empty_after_a_drain_that_rolls_back_is_not_remembered(store):
    await thread_with(store)
    await store.enqueue("t1", {"content": "kept"})
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await store.drain_queue("t1", tx=tx)
            assert await store.list_queue("t1", tx=tx) == []
            raise RuntimeError("abort")
    assert await queue_in_tx(store) == ["kept"]


@pytest.mark.asyncio
async def test_a_queue_read_empty_then_written_in_the_same_transaction_is_not_remembered(store):
    await thread_with(store)
    async with store.transaction() as tx:
        assert await store.list_queue("t1", tx=tx) == []
        await store.enqueue("t1", {"content": "after the read"}, tx=tx)
    assert await queue_in_tx(store) == ["after the read"]


@pytest.mark.asyncio
async def test_a_new_thread_starts_with_a_known_empty_queue(store, monkeypatch):
    await thread_with(store)
    assert await queue_in_tx(store) == []  # the cache is in use
    reads: list[object] = []
    original = Store._fetch

    async def counted(self: Store, query: Any, params: Any, tx: Any = None) -> Any:
        reads.append(params)
        return await original(self, query, params, tx)

    monkeypatch.setattr(Store, "_fetch", counted)
    await store.create_thread(ThreadRow(id="t2", package="pkg", agent_id="agent"))
    assert await queue_in_tx(store, "t2") == []
    assert reads == []
    await store.enqueue("t2", {"content": "first"})
    assert await queue_in_tx(store, "t2") == ["first"]


@pytest.mark.asyncio
async def test_a_blocking_delegation_on_sqlite_reads_no_row_back(sa_runtime_factory: Any) -> None:
    from tests.test_engine_transactions import delegation_pack, delegation_provider

    # Every row the delegation needs was written or read in this process: the threads' queues
    # are known empty (new threads, and queues found empty before) and the parent's registry
    # entry is the live handle's. Only writes go to the database.
    provider = delegation_provider()
    async with sa_runtime_factory(packs=[delegation_pack()], providers={"test": provider}) as rt:
        warm = await rt.create_thread("lead")
        await warm.send_message("warm up")
        parent = await rt.create_thread("lead")
        raw = rt.store._backend._writer.connection.dbapi_connection
        statements: list[str] = []
        raw.set_trace_callback(statements.append)
        try:
            await parent.send_message("research please")
        finally:
            raw.set_trace_callback(None)
        page = await parent.get_messages()
    assert page.messages[-1].content == "Summarized"
    assert [s for s in statements if s.lstrip().upper().startswith("SELECT")] == []
    assert sum(s.strip().upper() == "COMMIT" for s in statements) == 8


# -- API keys ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_verified_key_is_refused_as_soon_as_it_is_revoked(store):
    token, row = await store.create_api_key("ci")
    assert (await store.verify_api_key(token)).id == row.id
    assert (await store.verify_api_key(token)).id == row.id  # from the cache
    assert await store.revoke_api_key(row.id)
    assert await store.verify_api_key(token) is None


@pytest.mark.asyncio
async def test_a_key_revoked_by_another_process_is_refused(store, tmp_path):
    token, row = await store.create_api_key("ci")
    assert await store.verify_api_key(token) is not None
    other = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        assert await other.revoke_api_key(row.prefix)
    finally:
        await other.close()
    assert await store.verify_api_key(token) is None


@pytest.mark.asyncio
async def test_a_key_revoked_in_a_transaction_is_refused_once_it_commits(store):
    token, row = await store.create_api_key("ci")
    await store.verify_api_key(token)
    revoked, release = asyncio.Event(), asyncio.Event()

    async def revoke() -> None:
        async with store.transaction():
            await store.revoke_api_key(row.id)
            revoked.set()
            await release.wait()

    task = asyncio.create_task(revoke())
    await revoked.wait()
    assert await store.verify_api_key(token) is not None  # the revocation is not committed
    release.set()
    await task
    assert await store.verify_api_key(token) is None


@pytest.mark.asyncio
async def test_wrong_keys_are_refused_and_never_kept(store):
    token, _ = await store.create_api_key("ci")
    wrong = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert await store.verify_api_key(wrong) is None
    assert await store.verify_api_key(wrong) is None
    assert len(store._caches.keys) == 0
