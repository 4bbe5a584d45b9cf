"""``Store.owe_execution``: the owed record and this runtime's claim in one write.

It must behave exactly as ``claim_execution`` followed by ``save_execution``: the record is
always saved; the claim is taken only when free (unset, already the owner's, or lapsed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from sa_core.store import Store, ThreadRow, now_us, open_store
from sa_core.store.executions import ExecutionRecord, ResumePoint


@pytest_asyncio.fixture
async def store(sa_database_url: str) -> AsyncIterator[Store]:
    opened = await open_store(sa_database_url)
    try:
        await opened.create_thread(ThreadRow(id="t1", package="pkg", agent_id="agent"))
        yield opened
    finally:
        await opened.close()


def owed(side: str = "a") -> ExecutionRecord:
    return ExecutionRecord.model_validate(
        {"status": "owed", "resume": {"since": now_us(), "side": side}}
    )


@pytest.mark.asyncio
async def test_owe_execution_without_a_record_creates_it_claimed(store: Store) -> None:
    record = owed()
    assert await store.owe_execution("t1", record, "runtime-1")
    saved = await store.get_execution("t1")
    assert saved is not None
    assert (saved.status, saved.resume, saved.claimed_by) == ("owed", record.resume, "runtime-1")


@pytest.mark.asyncio
async def test_owe_execution_claims_a_free_or_own_record(store: Store) -> None:
    await store.finish_execution("t1", "idle")
    assert await store.owe_execution("t1", owed(), "runtime-1")  # unclaimed
    record = owed("b")
    assert await store.owe_execution("t1", record, "runtime-1")  # its own claim
    saved = await store.get_execution("t1")
    assert saved is not None
    assert (saved.status, saved.resume, saved.claimed_by) == ("owed", record.resume, "runtime-1")
    assert saved.resume is not None and saved.resume.side == "b"


@pytest.mark.asyncio
async def test_owe_execution_saves_the_record_but_leaves_another_owners_claim(
    store: Store,
) -> None:
    assert await store.claim_execution("t1", "other-runtime")
    record = owed()
    assert not await store.owe_execution("t1", record, "runtime-1")
    saved = await store.get_execution("t1")
    assert saved is not None
    assert (saved.status, saved.resume, saved.claimed_by) == (
        "owed",
        record.resume,
        "other-runtime",
    )
    assert list(await store.owed_executions()) == ["t1"]


@pytest.mark.asyncio
async def test_owe_execution_takes_over_a_lapsed_claim(store: Store) -> None:
    from sqlalchemy import update

    from sa_core.store import tables

    assert await store.claim_execution("t1", "dead-runtime")
    stmt = (
        update(tables.executions)
        .where(tables.executions.c.thread_id == "t1")
        .values(claimed_until=now_us() - 1_000_000)
    )
    await store._write(lambda conn: conn.execute(stmt))
    assert await store.owe_execution("t1", owed(), "runtime-1")
    saved = await store.get_execution("t1")
    assert saved is not None and saved.claimed_by == "runtime-1" and saved.claimed_until is None


@pytest.mark.asyncio
async def test_owe_execution_stores_the_resume_point_as_given(store: Store) -> None:
    point = ResumePoint(since=now_us(), side="a", turns={"a": 2, "b": 3})
    assert await store.owe_execution("t1", ExecutionRecord(status="owed", resume=point), "r")
    saved = await store.get_execution("t1")
    assert saved is not None and saved.resume == point
