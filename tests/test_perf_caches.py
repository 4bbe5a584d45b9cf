"""The read caches behind the fast paths stay exact: histories, API keys, conversions, records.

Every test checks what a caller sees after a write made in a way the cache must notice: by this
store, inside a transaction, or by another store (process) on the same database file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.cachepolicy import THREAD_USE, ThreadUse
from sa_core.engine.model.context import converter_for, forget_converted
from sa_core.providers import ProviderMessage, ProviderRequest
from sa_core.spec.records import Message
from sa_core.store import Store, ThreadRow, now_us, open_store
from sa_core.store.caches import HistoryCache, ReadHistories, ReadHistory
from sa_core.testing import DEFAULT_RECORDED, FunctionProvider, TestProvider


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{tmp_path / 'sa.db'}")
    try:
        yield opened
    finally:
        await opened.close()


async def thread_with(store: Store, *contents: str, thread_id: str = "t1") -> list[Message]:
    await store.create_thread(ThreadRow(id=thread_id, package="pkg", agent_id="agent"))
    messages = [
        Message(id=f"{thread_id}-m{i}", thread_id=thread_id, role="user", content=text,
                created_at=now_us() + i)
        for i, text in enumerate(contents)
    ]  # fmt: skip
    await store.insert_messages(messages)
    return messages


def chat_pack() -> tuple[Pack, FunctionProvider]:
    """A chat agent that sees its whole history, and a provider answering how much it saw."""
    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="m")
    pack = Pack(name="p", agents=[agent], prompts=[prompt], models=[model])
    return pack, FunctionProvider(lambda request: f"answer {len(request.messages)}")


def texts(messages: list[Message]) -> list[str | None]:
    return [m.content for m in messages]


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


@pytest.fixture
def counted_turns() -> Iterator[ThreadUse]:
    """The process's turn counts, empty for the test (threads the test names only)."""
    THREAD_USE.clear()
    yield THREAD_USE
    THREAD_USE.clear()


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


# -- conversions kept per thread -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_every_turn_of_a_long_thread_sees_its_whole_history_in_order(sa_runtime_factory):
    pack, provider = chat_pack()
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("chatter")
        for turn in range(12):
            await thread.send_message(f"question {turn}")
        converter = converter_for(thread.thread_id)
        await thread.send_message("last")
        assert converter_for(thread.thread_id) is converter  # kept across turns
    seen = [(m.role, m.content) for m in provider.requests[-1].messages]
    expected: list[tuple[str, str | None]] = [("system", "Chat.")]
    for turn in range(12):
        expected += [("user", f"question {turn}"), ("assistant", f"answer {2 * turn + 2}")]
    assert seen == [*expected, ("user", "last")]


@pytest.mark.asyncio
async def test_a_turn_is_counted_once_when_it_ends_however_many_steps_it_took(
    sa_runtime_factory: Any, counted_turns: ThreadUse
):
    from pydantic import BaseModel

    from sa_core import define_tool

    class Nothing(BaseModel):
        pass

    look = define_tool(name="look", description="Look.", args=Nothing, execute=lambda s, a: "ok")
    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True,
                           tools=["look"])  # fmt: skip
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="m")
    pack = Pack(name="p", agents=[agent], prompts=[prompt], models=[model], tools=[look])

    def answer(request: ProviderRequest) -> Any:
        if request.messages[-1].role == "user":  # two tool steps, then the answer
            return {"tool_calls": [{"name": "look", "arguments": {}}]}
        looked = sum(1 for message in request.messages if message.role == "tool")
        return {"tool_calls": [{"name": "look", "arguments": {}}]} if looked < 2 else "seen"

    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("chatter")
        counted = []
        for turn in range(2):
            await thread.send_message(f"look {turn}")
            counted.append(counted_turns.turns(thread.thread_id))
    assert provider.call_count == 6  # three steps a turn
    assert counted == [1, 2]


@pytest.mark.asyncio
async def test_a_kept_conversion_is_not_reused_when_the_history_changed_underneath():
    converter = converter_for("thread-x")
    try:
        one = Message(id="1", role="user", content="hello")
        two = Message(id="2", role="assistant", content="hi")
        first = await converter.convert([one, two], acting="a")
        assert [m.content for m in first] == ["hello", "hi"]
        edited = one.model_copy(update={"content": "HELLO"})
        again = await converter.convert([edited, two], acting="a")
        assert [m.content for m in again] == ["HELLO", "hi"]
        as_b = await converter.convert([edited, two], acting="b")
        assert [m.role for m in as_b] == ["assistant", "user"]
    finally:
        forget_converted("thread-x")


# -- the offline provider's memory ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_test_provider_keeps_only_the_latest_requests_but_counts_all():
    provider = TestProvider(max_recorded=3)
    for index in range(5):
        request = ProviderRequest(model="m", messages=[ProviderMessage("user", f"q{index}")])
        await provider.generate(request)
    assert provider.call_count == 5
    assert [provider.last_user_message(r) for r in provider.requests] == ["q2", "q3", "q4"]
    assert provider.last_user_message() == "q4"
    provider.reset()
    assert provider.call_count == 0 and provider.requests == []


def test_the_test_provider_is_bounded_by_default_and_rejects_a_zero_bound():
    assert TestProvider().max_recorded == DEFAULT_RECORDED
    assert TestProvider(max_recorded=None).max_recorded is None
    with pytest.raises(ValueError, match="max_recorded"):
        TestProvider(max_recorded=0)


@pytest.mark.asyncio
async def test_the_function_provider_keeps_only_the_latest_requests_by_default_too():
    provider = FunctionProvider(lambda request: "ok", max_recorded=2)
    for index in range(4):
        request = ProviderRequest(model="m", messages=[ProviderMessage("user", f"q{index}")])
        await provider.generate(request)
    assert provider.call_count == 4
    assert [provider.last_user_message(r) for r in provider.requests] == ["q2", "q3"]
    assert FunctionProvider(lambda request: "ok").max_recorded == DEFAULT_RECORDED


# -- live streams --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_frames_queued_together_are_sent_as_one_batch_in_order():
    from sa_core.server.streaming import _CLOSE, _PING, LiveStream

    queue: asyncio.Queue[Any] = asyncio.Queue()
    live = LiveStream("t1", queue)
    silent = {"type": "message_data", "data": {"id": "s", "silent": True}}
    for frame in ({"type": "a"}, silent, _PING, {"type": "b"}):
        queue.put_nowait(frame)
    batches = live.batches()
    try:
        assert await anext(batches) == [{"type": "connected", "thread_id": "t1"}]
        assert await anext(batches) == [{"type": "a"}, None, {"type": "b"}]
        queue.put_nowait({"type": "c"})
        queue.put_nowait(_CLOSE)
        queue.put_nowait({"type": "after close"})
        assert await anext(batches) == [{"type": "c"}]
        with pytest.raises(StopAsyncIteration):
            await anext(batches)
    finally:
        live.stop_heartbeat()


def test_sa_serve_runs_uvicorn_with_the_httptools_parser():
    from litestar import Litestar

    from sa_core.server.runner import build_server, http_protocol

    assert http_protocol() == "httptools"
    server = build_server(Litestar(route_handlers=[]), port=0, handle_signals=False)
    assert server.config.http == "httptools"


@pytest.mark.asyncio
async def test_kept_conversions_are_bounded_by_threads_and_messages(monkeypatch):
    from sa_core.engine.model import context

    monkeypatch.setattr(context, "CONVERTED_THREADS", 2)
    monkeypatch.setattr(context, "CONVERTED_MESSAGES", 3)
    forget_converted()
    try:
        first = converter_for("a")
        await first.convert([Message(id=str(i), role="user", content="x") for i in range(3)],
                            acting="a")  # fmt: skip
        converter_for("b")
        converter_for("c")
        assert list(context._converters) == ["b", "c"]  # "a": the least recently used
        big = converter_for("b")
        await big.convert([Message(id=f"b{i}", role="user", content="y") for i in range(4)],
                          acting="a")  # fmt: skip
        converter_for("c")
        assert list(context._converters) == ["c"]  # "b" held more than the bound
    finally:
        forget_converted()


@pytest.mark.asyncio
async def test_the_usage_estimate_is_the_same_when_message_sizes_are_reused():
    from sa_core.providers import ProviderResponse
    from sa_core.testing.answers import estimated_usage

    provider = TestProvider()
    history = [ProviderMessage("system", "S" * 40), ProviderMessage("user", "u" * 400)]
    for turn in range(3):
        request = ProviderRequest(model="m", messages=list(history), user="thread-1")
        answer = await provider.generate(request)
        expected = estimated_usage(request, ProviderResponse(content=answer.content))
        assert answer.usage.prompt_tokens == expected.prompt_tokens
        history[0] = ProviderMessage("system", "S" * 100 * (turn + 2))  # a new system prompt
        history += [
            ProviderMessage("assistant", answer.content),
            ProviderMessage("user", "x" * turn),
        ]


@pytest.mark.asyncio
async def test_the_usage_estimate_is_exact_when_history_grows_or_an_earlier_message_changes():
    from sa_core.providers import ProviderResponse
    from sa_core.testing.answers import estimated_usage

    provider = TestProvider()
    history = [ProviderMessage("system", "S" * 40), ProviderMessage("user", "u" * 400)]

    async def estimate_matches() -> None:
        request = ProviderRequest(model="m", messages=list(history), user="thread-1")
        answer = await provider.generate(request)
        expected = estimated_usage(request, ProviderResponse(content=answer.content))
        assert answer.usage.prompt_tokens == expected.prompt_tokens
        history.extend([ProviderMessage("assistant", answer.content), ProviderMessage("user", "v")])

    for _ in range(3):  # the previous request's messages, then new ones
        await estimate_matches()
    history[1] = ProviderMessage("user", "w" * 4000)  # an earlier message replaced
    await estimate_matches()
    history[:] = history[:3]  # a shorter request (the context trimmed)
    await estimate_matches()


def test_the_usage_estimate_keeps_message_sizes_within_its_bounds(
    monkeypatch: pytest.MonkeyPatch, counted_turns: ThreadUse
) -> None:
    from sa_core.testing.answers import PromptSizes

    monkeypatch.setattr(PromptSizes, "MESSAGES", 10)
    sizes = PromptSizes()
    two = [ProviderMessage("user", "u" * 10), ProviderMessage("assistant", "a" * 5)]
    for index in range(10):  # new threads: each taken in, the least recent going
        assert sizes.chars(ProviderRequest(model="m", messages=two, user=f"u-{index}")) == 15
    assert sizes._held == 10 and list(sizes._last) == [f"u-{index}" for index in range(5, 10)]
    for index in range(10):
        counted_turns.used(f"u-{index}")
    sizes.chars(ProviderRequest(model="m", messages=two, user="u-0"))
    assert "u-0" not in sizes._last  # as many turns as the least recent one kept: not taken in
    counted_turns.used("u-0")
    sizes.chars(ProviderRequest(model="m", messages=two, user="u-0"))
    assert "u-0" in sizes._last and "u-5" not in sizes._last and sizes._held == 10
