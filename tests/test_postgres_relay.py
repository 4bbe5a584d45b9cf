"""Streams across workers: two runtimes (workers) in this process on one PostgreSQL database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from test_server_packs import alpha_pack, provider

from sa_core import Runtime
from sa_core.engine.workers.relay import MAX_NOTIFY_BYTES, RelayBus

pytestmark = pytest.mark.asyncio


@asynccontextmanager
async def two_workers(url: str) -> AsyncIterator[tuple[Runtime, Runtime]]:
    def worker() -> Runtime:
        return Runtime(
            packs=[alpha_pack()],
            providers={"test": provider()},
            database_url=url,
            load_entrypoints=False,
        )

    async with worker() as first, worker() as second:
        yield first, second


def is_final_reply(frame: dict[str, Any]) -> bool:
    data = frame.get("data") or {}
    return (
        frame["type"] == "message_data"
        and not frame.get("subagent_id")
        and data.get("role") == "assistant"
        and data.get("status") == "completed"
        and bool(data.get("content"))
    )


async def frames_until(queue: asyncio.Queue[dict[str, Any]], done: Any) -> list[dict[str, Any]]:
    frames = []
    async with asyncio.timeout(30):
        while True:
            frame = await queue.get()
            frames.append(frame)
            if done(frame):
                return frames


async def test_a_client_of_one_worker_receives_every_frame_of_a_thread_running_on_another(
    pg_database_url: str,
) -> None:
    async with two_workers(pg_database_url) as (runner, watcher):
        assert isinstance(runner.events, RelayBus) and isinstance(watcher.events, RelayBus)
        state = await runner.create_thread("helper", package="alpha")
        async with (
            runner.events.subscribe(state.thread_id) as local,
            watcher.events.subscribe(state.thread_id) as remote,
        ):
            await state.send_message("summarize please")
            here = await frames_until(local, is_final_reply)
            there = await frames_until(remote, is_final_reply)
        assert not watcher.is_running(state.thread_id)  # it ran on the other worker
        assert there == here  # every frame, in order, child-thread frames included
        child_frames = [f for f in there if f.get("subagent_id")]
        assert child_frames, "no child-thread frames reached the other worker"
        assert any(f["type"] == "message_chunk" for f in there)
        assert any(
            f["type"] == "event" and f["eventType"] == "tool_call_done" for f in child_frames
        )


async def test_frames_larger_than_a_notification_reach_the_other_worker_intact(
    pg_database_url: str,
) -> None:
    async with two_workers(pg_database_url) as (runner, watcher):
        state = await runner.create_thread("helper", package="alpha")
        big = {"type": "event", "eventType": "report", "data": {"text": "é" * MAX_NOTIFY_BYTES}}
        small = {"type": "event", "eventType": "after", "data": {}}
        async with watcher.events.subscribe(state.thread_id) as remote:
            runner.events.publish(state.thread_id, big)
            runner.events.publish(state.thread_id, small)
            received = await frames_until(remote, lambda f: f["eventType"] == "after")
        assert received == [big, small]


async def test_frames_published_together_share_notifications_and_none_is_folded(
    pg_database_url: str,
) -> None:
    """A burst of frames goes out in a few notifications, in order, identical ones included."""
    async with two_workers(pg_database_url) as (runner, watcher):
        assert isinstance(runner.events, RelayBus)
        state = await runner.create_thread("helper", package="alpha")
        sent: list[int] = []
        send = runner.events._send

        async def counting(notes: list[tuple[str, str]]) -> None:
            sent.append(len(notes))
            await send(notes)

        runner.events._send = counting
        tick = {"type": "event", "eventType": "tick", "data": {}}
        burst = [
            tick,
            tick,
            *[{"type": "event", "eventType": "n", "data": {"i": i}} for i in range(200)],
            tick,
        ]
        last = {"type": "event", "eventType": "last", "data": {}}
        async with watcher.events.subscribe(state.thread_id) as remote:
            for frame in [*burst, last]:
                runner.events.publish(state.thread_id, frame)
            received = await frames_until(remote, lambda f: f["eventType"] == "last")
        assert received == [*burst, last]  # the repeated identical frames all arrive
        assert sum(sent) < len(burst) / 10  # packed: a handful of notifications, not 204


@asynccontextmanager
async def chat_workers(
    url: str, answer_for: Callable[[str], Callable[[Any], Any]]
) -> AsyncIterator[tuple[Runtime, Runtime]]:
    """Workers ``runner`` and ``other`` of a one-prompt chat agent ``a`` (package ``chat``);
    ``answer_for(worker name)`` answers that worker's model requests."""
    from sa_core import Pack, define_agent, define_model, define_prompt
    from sa_core.testing import FunctionProvider

    prompt = define_prompt(name="main", model="m", prompt="Hi", include_chat=True)
    pack = Pack(
        name="chat",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="x")],
    )

    def worker(name: str) -> Runtime:
        return Runtime(
            packs=[pack],
            providers={"test": FunctionProvider(answer_for(name))},
            database_url=url,
            load_entrypoints=False,
        )

    async with worker("runner") as runner, worker("other") as other:
        yield runner, other


def recording(seen: list[list[tuple[str, str]]]) -> Callable[[str], Callable[[Any], str]]:
    """Answers ``answer <n>``, recording each request's non-system messages in ``seen``."""

    def answer(request: Any) -> str:
        seen.append([(m.role, str(m.content)) for m in request.messages if m.role != "system"])
        return f"answer {len(seen)}"

    return lambda _name: answer


async def test_a_message_posted_through_another_worker_joins_the_running_thread(
    pg_database_url: str,
) -> None:
    calls: list[tuple[str, str]] = []
    gate = asyncio.Event()

    def model(name: str) -> Callable[[Any], Any]:
        async def answer(request: Any) -> str:
            last = [m for m in request.messages if m.role == "user"][-1].content
            calls.append((name, str(last)))
            if last == "first":
                await gate.wait()
            return f"answer to {last}"

        return answer

    async with chat_workers(pg_database_url, model) as (runner, other):
        state = await runner.create_thread("a")
        await state.send_message("first", wait=False)
        async with asyncio.timeout(60):
            while not calls:
                await asyncio.sleep(0.01)
        remote = await other.get_thread(state.thread_id)
        await remote.send_message("second", wait=False)  # it runs on `runner`: queued there
        gate.set()
        async with asyncio.timeout(60):
            while True:
                page = await runner.store.list_messages(state.thread_id)
                contents = [m.content for m in page[0]]
                if "answer to second" in contents:
                    break
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert contents == ["first", "answer to first", "second", "answer to second"]
        assert calls == [("runner", "first"), ("runner", "second")]  # once each, one worker
        assert runner.workers is not None and other.workers is not None
        assert not other.is_running(state.thread_id)


async def test_a_stop_posted_through_another_worker_stops_the_turn_where_it_runs(
    pg_database_url: str,
) -> None:
    started = asyncio.Event()

    async def stuck(request: Any) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    async with chat_workers(pg_database_url, lambda _name: stuck) as (runner, other):
        state = await runner.create_thread("a")
        await state.send_message("go", wait=False)
        async with asyncio.timeout(60):
            await started.wait()
        await (await other.get_thread(state.thread_id)).stop()
        async with asyncio.timeout(60):
            while runner.is_running(state.thread_id):
                await asyncio.sleep(0.05)
        row = await runner.store.get_thread(state.thread_id)
        assert row is not None and row.stopped


async def answered_twice(runner: Runtime, thread_id: str, seen: list[Any]) -> None:
    async with asyncio.timeout(60):
        while len(seen) < 2:
            await asyncio.sleep(0.02)
        await runner.scheduler.wait(thread_id)


async def test_a_runner_woken_by_another_workers_message_reads_the_thread_in_one_query(
    pg_database_url: str, sent: list[str]
) -> None:
    """The woken worker reads row, record, queue and history at once; the model sees each
    earlier message exactly once."""
    seen: list[list[tuple[str, str]]] = []
    async with chat_workers(pg_database_url, recording(seen)) as (runner, other):
        state = await runner.create_thread("a")
        await state.send_message("first")  # runs here; the lease stays with `runner`
        remote = await other.get_thread(state.thread_id)
        sent.clear()
        await remote.send_message("second", wait=False)
        await answered_twice(runner, state.thread_id, seen)
    assert seen[1] == [
        ("user", "first"), ("assistant", "answer 1"), ("user", "second"),
    ]  # fmt: skip
    reads = [s for s in sent if s.startswith("SELECT")]
    assert not [s for s in reads if s.startswith("SELECT executions.")], reads
    assert not [s for s in reads if s.startswith("SELECT queue.")], reads
    assert not [s for s in reads if s.startswith("SELECT (SELECT json_build_array")], reads


async def test_an_entry_deleted_before_the_woken_runner_drains_it_is_never_stored(
    pg_database_url: str,
) -> None:
    """The runner read "second"; it was deleted (and "third" queued) before the drain."""
    seen: list[list[tuple[str, str]]] = []
    async with chat_workers(pg_database_url, recording(seen)) as (runner, other):
        state = await runner.create_thread("a")
        await state.send_message("first")
        drain = runner.store.drain_entries

        async def deleted_meanwhile(thread_id: str, entries: Any, *, tx: Any) -> None:
            for entry in entries:
                assert await other.store.delete_queue_entry(thread_id, entry.id)
            await other.store.enqueue(thread_id, {"content": "third"})
            await drain(thread_id, entries, tx=tx)

        runner.store.drain_entries = deleted_meanwhile  # type: ignore[method-assign]
        remote = await other.get_thread(state.thread_id)
        await remote.send_message("second", wait=False)
        await answered_twice(runner, state.thread_id, seen)
        page = await runner.store.list_messages(state.thread_id)
    assert [m.content for m in page[0]] == ["first", "answer 1", "third", "answer 2"]
    assert [content for _, content in seen[1]] == ["first", "answer 1", "third"]
