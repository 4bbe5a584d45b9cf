"""The history cache behind the fast paths stays exact, and bounded.

Every test checks what a caller sees after a write made in a way the cache must notice: by this
store, inside a transaction, or by another store (process) on the same database file. (Queues
and keys: test_perf_queue_and_key_caches.py; conversions: test_perf_conversions.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from cache_kit import chat_pack, empty_turn_counts, sqlite_store, texts, thread_with

from sa_core.cachepolicy import ThreadUse
from sa_core.spec.records import Message
from sa_core.store import Store, ThreadRow, open_store
from sa_core.store.caches import HistoryCache, ReadHistories, ReadHistory

store = sqlite_store()
counted_turns = empty_turn_counts()


# -- thread histories ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cached_history_shows_inserts_updates_and_deletes_of_this_store(store):
    await thread_with(store, "one", "two")
    assert texts(await store.history("t1")) == ["one", "two"]
    await store.insert_messages(
        [Message(id="m3", thread_id="t1", role="assistant", content="three")]
    )
    assert texts(await store.history("t1")) == ["one", "two", "three"]
    await store.update_message("t1-m0", {"content": "ONE"})
    assert texts(await store.history("t1")) == ["ONE", "two", "three"]
    await store.update_message("m3", {"status": "pending"})
    assert texts(await store.history("t1")) == ["ONE", "two"]
    await store.delete_message("t1", "t1-m1")
    assert texts(await store.history("t1")) == ["ONE"]


@pytest.mark.asyncio
async def test_history_reloads_only_rows_written_since_it_was_cached(store, monkeypatch):
    await thread_with(store, "one", "two", "three")
    loads: list[int | None] = []
    original = Store._load_history

    async def counted(
        self: Store, thread_id: str, since: int | None, tx: Any, timeline: Any = None
    ) -> list[Message]:
        loads.append(since)
        return await original(self, thread_id, since, tx, timeline)

    monkeypatch.setattr(Store, "_load_history", counted)
    first = await store.history("t1")
    again = await store.history("t1")
    assert loads == [None] and texts(again) == texts(first)
    third = first[2]
    await store.update_message(third.id, {"content": "THREE"})
    assert texts(await store.history("t1")) == ["one", "two", "THREE"]
    assert loads == [None, third.created_at - 1]


def count_loads(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    loads: list[int | None] = []
    original = Store._load_history

    async def counted(
        self: Store, thread_id: str, since: int | None, tx: Any, timeline: Any = None
    ) -> list[Message]:
        loads.append(since)
        return await original(self, thread_id, since, tx, timeline)

    monkeypatch.setattr(Store, "_load_history", counted)
    return loads


@pytest.mark.asyncio
async def test_committed_inserts_join_the_cached_history_without_being_read_back(
    store, monkeypatch
):
    await thread_with(store, "one")
    loads = count_loads(monkeypatch)
    await store.history("t1")
    answer = Message(
        id="a1", thread_id="t1", role="assistant", content="two",
        metadata={"nested": [1, {"a": None}], "ratio": float("inf")},  # reads back as None
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )  # fmt: skip
    await store.insert_messages([answer])
    async with store.transaction() as tx:
        await store.insert_messages(
            [
                Message(
                    id="a2",
                    thread_id="t1",
                    role="tool",
                    content="three",
                    tool_call_id="c1",
                    metadata={"pair": (1, 2)},
                ),  # reads back as a list
                Message(id="sub", thread_id="t1", role="user", content="nested", depth=1),
            ],
            tx=tx,
        )
    cached = await store.history("t1")
    assert loads == [None]  # only the first read went to the database
    assert texts(cached) == ["one", "two", "three"]
    fresh = await store.history("t1", since=-1)  # bypasses the cache
    assert [m.model_dump() for m in cached] == [m.model_dump() for m in fresh]


@pytest.mark.asyncio
async def test_an_insert_rolled_back_never_reaches_the_cached_history(store):
    await thread_with(store, "one")
    await store.history("t1")
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await store.insert_messages(
                [Message(id="a1", thread_id="t1", role="assistant", content="lost")], tx=tx
            )
            raise RuntimeError("abort")
    assert texts(await store.history("t1")) == ["one"]


@pytest.mark.asyncio
async def test_a_moved_message_is_found_at_its_new_place(store):
    messages = await thread_with(store, "one", "two", "three")
    await store.history("t1")
    await store.update_message("t1-m2", {"created_at": messages[0].created_at - 10})
    assert texts(await store.history("t1")) == ["three", "one", "two"]


@pytest.mark.asyncio
async def test_history_sees_writes_of_another_store_on_the_same_file(store, tmp_path):
    await thread_with(store, "one")
    assert texts(await store.history("t1")) == ["one"]
    other = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        await other.update_message("t1-m0", {"content": "edited elsewhere"})
        await other.insert_messages(
            [Message(id="x", thread_id="t1", role="assistant", content="from elsewhere")]
        )
    finally:
        await other.close()
    assert texts(await store.history("t1")) == ["edited elsewhere", "from elsewhere"]


@pytest.mark.asyncio
async def test_a_new_thread_starts_with_a_known_empty_history(store, tmp_path, monkeypatch):
    await thread_with(store, "one")
    await store.history("t1")  # the cache is in use
    loads = count_loads(monkeypatch)
    await store.create_thread(ThreadRow(id="t2", package="pkg", agent_id="agent"))
    await store.insert_messages([Message(id="n1", thread_id="t2", role="user", content="hi")])
    assert texts(await store.history("t2")) == ["hi"]
    assert loads == []  # created and written here: nothing to read back
    await store.create_thread(ThreadRow(id="t3", package="pkg", agent_id="agent"))
    other = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        await other.insert_messages(
            [Message(id="x3", thread_id="t3", role="user", content="from elsewhere")]
        )
    finally:
        await other.close()
    assert texts(await store.history("t3")) == ["from elsewhere"]


@pytest.mark.asyncio
async def test_a_read_during_an_open_transaction_is_not_kept(store):
    await thread_with(store, "one")
    await store.history("t1")
    entered, release = asyncio.Event(), asyncio.Event()

    async def writer() -> None:
        async with store.transaction():
            await store.insert_messages(
                [Message(id="late", thread_id="t1", role="assistant", content="late")]
            )
            entered.set()
            await release.wait()

    task = asyncio.create_task(writer())
    await entered.wait()
    assert texts(await store.history("t1")) == ["one"]  # not committed yet
    release.set()
    await task
    assert texts(await store.history("t1")) == ["one", "late"]


@pytest.mark.asyncio
async def test_a_rolled_back_write_never_shows_in_the_history(store):
    await thread_with(store, "one")
    await store.history("t1")
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.insert_messages(
                [Message(id="gone", thread_id="t1", role="assistant", content="gone")]
            )
            assert texts(await store.history("t1")) == ["one", "gone"]
            raise RuntimeError("abort")
    assert texts(await store.history("t1")) == ["one"]


@pytest.mark.asyncio
async def test_a_deleted_thread_has_no_cached_history(store):
    await thread_with(store, "one")
    await store.history("t1")
    await store.delete_thread("t1")
    assert await store.history("t1") == []


def test_the_history_cache_is_bounded_by_threads_and_messages(counted_turns: ThreadUse):
    cache = HistoryCache(threads=2, messages=5)
    cache.check(1)
    three = [Message(id=str(i), role="user", content="x") for i in range(3)]
    cache.store("a", three)
    cache.store("b", three[:1])
    cache.store("c", three[:1])  # new conversations: always taken in
    assert cache.lookup("a") is None and len(cache) == 2
    cache.store("d", three)
    assert cache.size <= 5 and cache.lookup("b") is None
    cache.store("huge", three * 2)
    assert cache.lookup("huge") is None and cache.size <= 5


def test_a_history_longer_than_the_bound_is_not_kept_and_evicts_nothing(
    counted_turns: ThreadUse,
):
    two = [Message(id=str(i), role="user", content="x") for i in range(2)]
    huge = two * 4
    cache = HistoryCache(threads=10, messages=5)
    cache.check(1)
    kept = ReadHistories(threads=10, messages=5)
    for thread_id in ("a", "b"):
        cache.store(thread_id, two)
        kept.put(thread_id, ReadHistory(1, (2, 0), two))
    cache.store("huge", huge)
    kept.put("huge", ReadHistory(1, (8, 0), huge))
    assert [cache.holds(t) for t in ("a", "b", "huge")] == [True, True, False]
    assert [kept.holds(t) for t in ("a", "b", "huge")] == [True, True, False]
    assert cache.size == kept.size == 4


def hits_per_round(
    use: ThreadUse,
    hit: Callable[[str], bool],
    keep: Callable[[str, list[Message]], None],
    rounds: int,
) -> list[int]:
    """Ten threads of two messages used in turn: how many of them a cache served each round."""
    two = [Message(id=str(i), role="user", content="x") for i in range(2)]
    hits = []
    for _ in range(rounds):
        hits.append(0)
        for index in range(10):
            thread_id = f"loop-{index}"
            if hit(thread_id):
                hits[-1] += 1
            else:
                keep(thread_id, two)
            use.used(thread_id)  # as the engine counts a turn once it is over
    return hits


def test_a_full_history_cache_keeps_hitting_when_more_threads_than_fit_are_used_in_turn(
    counted_turns: ThreadUse,
):
    """Ten threads in turn, five fit: least-recently-used alone would miss every one."""
    cache = HistoryCache(threads=100, messages=10)
    cache.check(1)
    hit = lambda thread_id: cache.lookup(thread_id) is not None  # noqa: E731
    assert hits_per_round(counted_turns, hit, cache.store, 4) == [0, 5, 5, 5]


def test_kept_postgresql_histories_keep_hitting_when_more_threads_than_fit_are_used_in_turn(
    counted_turns: ThreadUse,
):
    kept = ReadHistories(threads=100, messages=10)
    hit = lambda thread_id: kept.get(thread_id) is not None  # noqa: E731

    def keep(thread_id: str, messages: list[Message]) -> None:
        kept.put(thread_id, ReadHistory(1, (2, 0), messages))

    assert hits_per_round(counted_turns, hit, keep, 3) == [0, 5, 5]


def test_a_thread_that_becomes_busy_takes_the_place_of_an_idle_one(counted_turns: ThreadUse):
    cache = HistoryCache(threads=2, messages=100)
    cache.check(1)
    one = [Message(id="m", role="user", content="x")]
    for thread_id in ("idle", "steady"):
        cache.store(thread_id, one)
        counted_turns.used(thread_id)
    cache.lookup("steady")
    counted_turns.used("busy")  # one turn already, not kept (as many as the idle thread)
    admitted = []
    for _ in range(2):
        cache.store("busy", one)
        admitted.append(cache.lookup("busy") is not None)
        counted_turns.used("busy")
    assert admitted == [False, True]  # once it had more turns than the idle thread
    assert cache.lookup("idle") is None and cache.lookup("steady") is not None


def test_turn_counts_halve_so_old_activity_fades_and_their_number_stays_bounded():
    use = ThreadUse(sample=10)
    for _ in range(9):
        use.used("old")
    use.used("new")  # the tenth use: every count halves (old 4, new 0)
    assert (use.turns("old"), use.turns("new")) == (4, 0)
    for _ in range(5):
        use.used("new")
    assert use.admits("new", "old")  # 5 > 4; without halving 6 < 9
    for index in range(1_000):
        use.used(f"once-{index}")
    assert len(use) <= 10


def test_a_thread_busy_long_ago_does_not_keep_new_threads_out():
    use = ThreadUse(sample=100)
    for _ in range(60):
        use.used("was-busy")
    for _ in range(40):
        use.used("steady")  # the hundredth turn halves the counts: was-busy 30, steady 20
    assert not use.admits("steady", "was-busy")
    for _ in range(100):
        use.used("steady")  # was-busy has had no turn for a hundred turns
    assert use.turns("was-busy") == 15 and use.admits("steady", "was-busy")


@pytest.mark.asyncio
async def test_the_engine_keeps_a_conversion_only_while_the_store_keeps_the_history(
    sa_runtime_factory: Any, counted_turns: ThreadUse
):
    """Both hold the same threads, sharing their messages, even when more threads are busy."""
    from sa_core.engine.model import context, pastcontext

    pack, provider = chat_pack()
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        runtime.store._caches.history = HistoryCache(threads=100, messages=30)
        threads = [await runtime.create_thread("chatter") for _ in range(6)]
        for turn in range(4):  # 6 threads of 2, 4, 6, 8 messages: from the third on, not all fit
            for thread in threads:
                await thread.send_message(f"question {turn}")
        store = runtime.store
        kept = {t.thread_id for t in threads if store.keeps_history(t.thread_id)}
        assert 0 < len(kept) < len(threads)
        ids = {t.thread_id for t in threads}
        assert set(context._converters) & ids == kept
        assert set(pastcontext._kept.threads) & ids == kept
        for thread_id in kept:  # the filtered history holds the store's own message objects
            cached = store._caches.history.lookup(thread_id)
            assert cached is not None
            source = pastcontext._kept.threads[thread_id].source
            assert all(a is b for a, b in zip(cached[0], source, strict=False))
        page = await threads[0].get_messages()
    assert [m.content for m in page.messages][-2:] == ["question 3", "answer 8"]
