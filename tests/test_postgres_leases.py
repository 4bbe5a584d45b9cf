"""Thread leases and worker heartbeats in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from sa_core.store import Store, ThreadRow, open_store

pytestmark = pytest.mark.asyncio
SECOND = 1_000_000


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "postgresql":
        url = str(request.getfixturevalue("pg_database_url"))
    else:
        url = f"sqlite:///{tmp_path / 'sa.db'}"
    async with await open_store(url) as opened:
        for thread_id in ("t1", "t2"):
            await opened.create_thread(ThreadRow(id=thread_id, package="p", agent_id="a"))
        yield opened


async def test_a_lease_is_held_by_one_worker_until_released(store: Store) -> None:
    token = await store.acquire_lease("t1", "w1", 10 * SECOND)
    assert token is not None
    assert await store.acquire_lease("t1", "w2", 10 * SECOND) is None
    assert await store.lease_owner("t1") == "w1"
    assert await store.acquire_lease("t1", "w1", 10 * SECOND) is not None  # renewed by holder
    assert await store.acquire_lease("missing", "w1", 10 * SECOND) is None
    assert await store.release_lease("t1", "w1", token) is False  # an older acquisition
    assert await store.release_lease("t1", "w1")
    assert await store.acquire_lease("t1", "w2", 10 * SECOND) is not None


async def test_a_refused_lease_names_its_holder_on_postgresql(store: Store) -> None:
    taken = await store.try_lease("t1", "w1", 10 * SECOND)
    assert taken.token is not None and taken.holder is None
    refused = await store.try_lease("t1", "w2", 10 * SECOND)
    assert refused.token is None
    # the worker to tell about queued work (SQLite has one worker and cannot say)
    assert refused.holder == ("w1" if store.url.startswith("postgresql") else None)
    assert await store.lease_owner("t1") == "w1"
    assert (await store.try_lease("missing", "w1", 10 * SECOND)).token is None


async def test_an_expired_lease_is_taken_over_by_exactly_one_worker(store: Store) -> None:
    await store.acquire_lease("t1", "dead", 1)  # expires at once
    await store.acquire_lease("t2", "alive", 10 * SECOND)
    await asyncio.sleep(0.01)
    claims = await asyncio.gather(*(store.claim_expired_leases(w, 10 * SECOND) for w in "abc"))
    assert sorted(sum(claims, [])) == ["t1"]
    winner = next(w for w, ids in zip("abc", claims, strict=True) if ids)
    assert await store.lease_owner("t1") == winner
    assert await store.lease_owner("t2") == "alive"


async def test_the_heartbeat_renews_only_the_leases_still_held(store: Store) -> None:
    await store.acquire_lease("t1", "w1", 1)
    await asyncio.sleep(0.01)
    assert await store.claim_expired_leases("w2", 10 * SECOND) == ["t1"]
    assert await store.heartbeat("w1", 10 * SECOND, ["t1"]) == []  # lost: w1 must stop
    assert await store.heartbeat("w2", 10 * SECOND, ["t1"]) == ["t1"]
    assert await store.live_workers(10 * SECOND) == ["w1", "w2"]


async def test_a_retired_worker_hands_its_threads_over_at_once(store: Store) -> None:
    await store.acquire_lease("t1", "w1", 10 * SECOND)
    await store.heartbeat("w1", 10 * SECOND, ["t1"])
    await store.retire_worker("w1")
    assert await store.live_workers(10 * SECOND) == []
    assert await store.claim_expired_leases("w2", 10 * SECOND) == ["t1"]


async def test_queued_work_without_a_lease_is_found(store: Store) -> None:
    await store.enqueue("t1", {"content": "hi"})
    await store.enqueue("t2", {"content": "hi"})
    await store.acquire_lease("t2", "w1", 10 * SECOND)
    assert await store.unleased_queued_threads() == ["t1"]


async def test_due_effects_are_claimed_once_and_only_dead_workers_effects_reset(
    store: Store,
) -> None:
    await store.schedule_effect("t1", "remind", {}, 0)
    store.join_workers("w1", 10 * SECOND)
    await store.heartbeat("w1", 10 * SECOND, [])
    assert [run.name for run in await store.claim_due_effects(10**18)] == ["remind"]
    assert await store.claim_due_effects(10**18) == []
    assert await store.reset_processing_effects() == 0  # w1 is alive
    await store.retire_worker("w1")
    assert await store.reset_processing_effects() == 1


async def test_a_fenced_execution_write_stands_for_the_commit_fence_only_while_the_lease_holds(
    store: Store,
) -> None:
    from sa_core.store.executions import ExecutionRecord

    fences: list[str] = []
    store.write_fence = lambda conn: fences.append("checked")
    store.write_fence_owner = lambda thread_id: "w1" if thread_id == "t1" else None
    await store.save_execution("t1", ExecutionRecord(status="owed"))
    await store.acquire_lease("t1", "w1", 10 * SECOND)
    fences.clear()
    async with store.transaction() as tx:  # w1's lease is valid: the update checked it
        await store.save_running_point("t1", {"since": 1, "side": "a"}, "w1", tx=tx)
        assert tx.fenced
    assert fences == []
    await store.acquire_lease("t1", "w1", -1)  # w1's lease expires
    fences.clear()
    async with store.transaction() as tx:  # written all the same, but the commit fence runs
        await store.finish_execution("t1", None, tx=tx)
    assert not tx.fenced
    assert fences == ["checked"]
    record = await store.get_execution("t1")
    assert record is not None and record.status == "idle"
