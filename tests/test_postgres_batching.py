"""On PostgreSQL a transaction's deferred writes reach the server together, as one statement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from sa_core.spec.records import Log, Message
from sa_core.store import Store, ThreadRow, now_us, open_store
from sa_core.store.fast import Deferred
from sa_core.store.leases import LeaseLost, lease_guard

pytestmark = pytest.mark.asyncio
SECOND = 1_000_000


@pytest_asyncio.fixture
async def store(pg_database_url: str) -> AsyncIterator[Store]:
    async with await open_store(pg_database_url) as opened:
        await opened.create_thread(ThreadRow(id="t1", package="p", agent_id="a"))
        yield opened


def _message(message_id: str) -> Message:
    return Message(id=message_id, thread_id="t1", role="assistant", content=message_id)


def _log(log_id: str) -> Log:
    return Log(id=log_id, type="model", data={}, created_at=now_us())


async def _message_ids(store: Store) -> list[str]:
    messages, _ = await store.list_messages("t1")
    return [m.id for m in messages]


async def _log_ids(store: Store) -> list[str]:
    logs, _ = await store.list_logs("t1")
    return [log.id for log in logs]


async def test_a_step_commit_is_one_statement_without_begin_or_commit(
    store: Store, sent: list[str]
) -> None:
    await store.save_running_point("t1", {"since": 1, "side": "a"}, None)
    sent.clear()
    async with store.transaction() as tx:
        await store.insert_log("t1", _log("l1"), tx=tx)
        await store.insert_messages([_message("m1")], tx=tx)
        await store.save_running_point("t1", {"since": 2, "side": "a"}, None, tx=tx)
        assert sent == []  # nothing sent yet
    assert len(sent) == 1 and sent[0].startswith("WITH ")
    assert await _message_ids(store) == ["m1"]
    assert await _log_ids(store) == ["l1"]
    record = await store.get_execution("t1")
    assert record is not None and record.resume is not None and record.resume.since == 2


async def test_a_read_in_the_transaction_sees_the_writes_deferred_before_it(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await store.insert_messages([_message("m1")], tx=tx)
        seen = await store.get_message("t1", "m1", tx=tx)
        await store.insert_messages([_message("m2")], tx=tx)
    assert seen is not None and seen.content == "m1"
    assert await _message_ids(store) == ["m1", "m2"]


async def test_a_failing_write_of_a_batch_leaves_none_of_it_and_fails_the_commit(
    store: Store,
) -> None:
    await store.insert_messages([_message("m1")])
    with pytest.raises(IntegrityError):
        async with store.transaction() as tx:
            await store.insert_log("t1", _log("l1"), tx=tx)
            await store.insert_messages([_message("m1")], tx=tx)  # the same id again
    assert await _log_ids(store) == []
    assert await _message_ids(store) == ["m1"]
    await store.insert_log("t1", _log("l2"))  # the kept connection is usable
    assert await _log_ids(store) == ["l2"]


async def test_an_update_that_finds_no_row_is_undone_with_its_batch_and_falls_back(
    store: Store,
) -> None:
    # no execution record (a thread created before threads got theirs at creation): the
    # update misses, the whole statement is undone, and the writes go again inside a
    # transaction, the record inserted by the update's fallback
    await store.delete_execution("t1")
    async with store.transaction() as tx:
        await store.insert_log("t1", _log("l1"), tx=tx)
        await store.save_running_point("t1", {"since": 3, "side": "a"}, "me", tx=tx)
    record = await store.get_execution("t1")
    assert record is not None and record.status == "running" and record.claimed_by == "me"
    assert await _log_ids(store) == ["l1"]


def _fence_on(store: Store, checks: list[str], running: list[bool]) -> None:
    """The lease fence of worker w1 while it runs thread t1 (as the workers install it)."""

    def fence(conn: Connection) -> None:
        from sa_core.store.leases import lease_valid

        if not running:
            return
        checks.append("fence")
        if not lease_valid(conn, "t1", "w1"):
            raise LeaseLost("t1")

    class Fence:
        check = staticmethod(fence)

        @staticmethod
        def guard() -> Deferred | None:
            return lease_guard("t1", "w1", fence) if running else None

        @staticmethod
        def owner(thread_id: str) -> str | None:
            return None  # no write states its own lease check here

    store.fence_writes(Fence())


async def test_the_lease_fence_goes_with_the_batch_and_refuses_it_once_the_lease_is_lost(
    store: Store, sent: list[str]
) -> None:
    checks: list[str] = []
    running: list[bool] = []
    _fence_on(store, checks, running)
    await store.acquire_lease("t1", "w1", 10 * SECOND)
    running.append(True)
    sent.clear()
    await store.insert_messages([_message("m1")])  # a write of its own, fenced
    assert len(sent) == 1 and "FOR SHARE" in sent[0]
    assert checks == []  # the lease held: the fence statement itself never ran
    running.clear()
    await store.acquire_lease("t1", "w1", -1)  # the lease expires
    running.append(True)
    with pytest.raises(LeaseLost):
        await store.insert_messages([_message("m2")])
    with pytest.raises(LeaseLost):
        async with store.transaction() as tx:
            await store.insert_log("t1", _log("l1"), tx=tx)
            await store.insert_messages([_message("m3")], tx=tx)
    assert checks == ["fence", "fence"]
    assert await _message_ids(store) == ["m1"]
    assert await _log_ids(store) == []


async def test_a_last_read_goes_with_the_deferred_writes_in_the_same_statement(
    store: Store, sent: list[str]
) -> None:
    await store.save_running_point("t1", {"since": 1, "side": "a"}, None)
    for queued in ([], ["first", "second"]):
        for content in queued:
            await store.enqueue("t1", {"content": content})
        sent.clear()
        async with store.transaction() as tx:
            await store.set_thread_fields("t1", tx=tx, execution={"turns": {"a": len(queued)}})
            await store.finish_execution("t1", "stop_on_response", tx=tx)
            entries = await store.list_queue("t1", tx=tx, last=True)
            with pytest.raises(RuntimeError, match="ended with its last read"):
                await store.list_queue("t1", tx=tx)
        assert len(sent) == 1 and sent[0].startswith("WITH ")
        assert [entry.content for entry in entries] == queued
        row = await store.get_thread("t1")
        assert row is not None and row.execution == {"turns": {"a": len(queued)}}
        record = await store.get_execution("t1")
        assert record is not None and record.status == "idle"


async def test_a_last_read_after_a_missed_update_reads_after_the_fallback(
    store: Store,
) -> None:
    await store.enqueue("t1", {"content": "waiting"})
    async with store.transaction() as tx:  # no execution record: the update misses
        await store.finish_execution("t1", None, tx=tx)
        entries = await store.list_queue("t1", tx=tx, last=True)
    assert [entry.content for entry in entries] == ["waiting"]
    record = await store.get_execution("t1")
    assert record is not None and record.status == "idle"


async def test_a_read_of_rows_the_transaction_does_not_write_goes_with_its_writes(
    store: Store, sent: list[str]
) -> None:
    await store.enqueue("t1", {"content": "waiting"})
    sent.clear()
    async with store.transaction() as tx:
        await store.insert_messages([_message("m1")], tx=tx)
        entries = await store.list_queue("t1", tx=tx, unwritten=True)
        seen = await store.get_message("t1", "m1", tx=tx)  # after the writes went
        await store.insert_log("t1", _log("l1"), tx=tx)
    assert [entry.content for entry in entries] == ["waiting"]
    assert seen is not None
    assert [s.split(" ")[0] for s in sent] == ["BEGIN", "WITH", "SELECT", "INSERT", "COMMIT"]
    assert await _log_ids(store) == ["l1"]


async def test_the_turn_start_read_goes_with_the_writes_and_reads_as_a_reload_would(
    store: Store, sent: list[str]
) -> None:
    earlier = Message(
        id="m0",
        thread_id="t1",
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        metadata={"k": [1, "two", None]},
        reasoning_details=[{"type": "text", "text": "é\\n\u2603"}],
        created_at=now_us(),
    )
    await store.insert_messages([earlier])
    await store.enqueue("t1", {"content": "queued", "metadata": {"a": 1}, "silent": True})
    sent.clear()
    written = Message(id="m1", thread_id="t1", role="user", content="hi", created_at=now_us())
    async with store.transaction() as tx:
        await store.insert_messages([written], tx=tx)
        start = await store.read_turn_start("t1", tx=tx, written=[written])
    assert len(sent) == 1 and sent[0].startswith("WITH ")  # writes and reads: one round trip
    assert start is not None and start.row.id == "t1" and start.children == []
    assert start.queue == await store.list_queue("t1")
    assert start.history == await store.history("t1")
    assert [m.id for m in start.history] == ["m0", "m1"]


async def test_the_turn_start_read_of_a_missing_thread_is_none(store: Store) -> None:
    async with store.transaction() as tx:
        await store.insert_log("t1", _log("l1"), tx=tx)
        assert await store.read_turn_start("gone", tx=tx) is None


async def test_a_history_read_again_gives_back_the_same_messages_for_unchanged_rows(
    store: Store,
) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    first = await store.history("t1")
    again = await store.history("t1")
    async with store.transaction() as tx:  # the turn-start read reuses them as well
        await store.insert_log("t1", _log("l1"), tx=tx)
        start = await store.read_turn_start("t1", tx=tx)
    assert start is not None and start.history is not None
    for read in (again, start.history):
        assert [m.id for m in read] == ["m1", "m2"]
        assert all(a is b for a, b in zip(first, read, strict=True))


async def test_a_message_another_worker_changed_reads_as_changed(
    store: Store, pg_database_url: str
) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    first = await store.history("t1")
    async with await open_store(pg_database_url) as other:
        await other.update_message("m2", {"content": "edited", "status": "completed"})
        await other.delete_message("t1", "m1")
    read = await store.history("t1")
    assert [(m.id, m.content, m.status) for m in read] == [("m2", "edited", "completed")]
    assert first[1].content == "m2"  # what was read before is left as it was


async def _turn_start_history(store: Store) -> list[Message] | None:
    async with store.transaction() as tx:
        await store.insert_log("t1", _log(f"l{now_us()}"), tx=tx)
        start = await store.read_turn_start("t1", tx=tx)
    assert start is not None
    return start.history


def _count_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from sa_core.store import caches

    built: list[str] = []
    original = caches.RowMessages.message

    def message(self: caches.RowMessages, row: dict[str, Any], build: Any) -> Message:
        built.append(row["id"])
        return original(self, row, build)

    monkeypatch.setattr(caches.RowMessages, "message", message)
    return built


async def test_the_turn_start_read_fetches_only_rows_newer_than_the_history_it_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    built = _count_built(monkeypatch)
    first = await _turn_start_history(store)
    assert built == ["m1", "m2"]
    await store.insert_messages([_message("m3")])
    built.clear()
    second = await _turn_start_history(store)
    assert built == ["m3"]  # the rows it had were not sent again
    assert first is not None and second is not None
    assert second == await store.history("t1")
    assert [m.id for m in second] == ["m1", "m2", "m3"] and second[0] is first[0]


async def test_a_new_row_created_before_kept_ones_reads_in_stored_order(store: Store) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    await _turn_start_history(store)
    early = Message(id="m0", thread_id="t1", role="user", content="early", created_at=1)
    await store.insert_messages([early])
    history = await _turn_start_history(store)
    assert history is not None and [m.id for m in history] == ["m0", "m1", "m2"]
    assert history == await store.history("t1")


@pytest.mark.parametrize("change", ["edit", "delete", "pending"])
async def test_an_older_row_another_worker_changed_is_never_served_from_the_kept_history(
    store: Store, pg_database_url: str, change: str
) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    await _turn_start_history(store)
    async with await open_store(pg_database_url) as other:
        if change == "edit":
            await other.update_message("m1", {"content": "edited"})
        elif change == "delete":
            await other.delete_message("t1", "m1")
        else:
            await other.update_message("m1", {"status": "pending"})
        await other.insert_messages([_message("m3")])
    assert await _turn_start_history(store) is None  # the engine reads the history whole
    expected = await store.history("t1")
    assert [(m.id, m.content) for m in expected] == {
        "edit": [("m1", "edited"), ("m2", "m2"), ("m3", "m3")],
        "delete": [("m2", "m2"), ("m3", "m3")],
        "pending": [("m2", "m2"), ("m3", "m3")],
    }[change]
    assert await _turn_start_history(store) == expected  # read whole again, then kept
    assert await _turn_start_history(store) == expected


async def test_a_history_read_fetches_only_rows_newer_than_the_history_it_kept(
    store: Store, pg_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert_messages([_message("m1"), _message("m2")])
    built = _count_built(monkeypatch)
    assert [m.id for m in await store.history("t1")] == ["m1", "m2"]
    async with await open_store(pg_database_url) as other:  # another worker appends
        await other.insert_messages([_message("m3")])
    built.clear()
    assert [m.id for m in await store.history("t1")] == ["m1", "m2", "m3"]
    assert built == ["m3"]
    async with await open_store(pg_database_url) as other:  # and edits an older row
        await other.update_message("m2", {"content": "edited"})
    built.clear()
    assert [m.content for m in await store.history("t1")] == ["m1", "edited", "m3"]
    assert built == ["m1", "m2", "m3"]  # read whole: m1 and m3 come back as they were built
