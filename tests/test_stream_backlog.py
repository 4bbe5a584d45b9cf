"""Live-stream memory: slow subscribers are cut off with their frames released; nothing stays
behind in the event bus or the stream hub once subscribers leave."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from test_server_live import A, new_thread, serving, sse_frames

from sa_core.engine.events import OVERFLOW, EventBus
from sa_core.server import streaming
from sa_core.server.streaming import StreamHub


def frame(n: int) -> Any:
    return {"type": "event", "eventType": "tick", "data": n, "timestamp": n}


async def drained(queue: asyncio.Queue[Any]) -> list[Any]:
    found = []
    while not queue.empty():
        found.append(queue.get_nowait())
    return found


@pytest.mark.asyncio
async def test_bounded_subscriber_that_falls_behind_is_dropped_and_its_frames_released() -> None:
    bus = EventBus()
    async with bus.subscribe("t", max_backlog=3) as slow, bus.subscribe("t") as reader:
        for n in range(100):
            bus.publish("t", frame(n))
        assert await drained(slow) == [OVERFLOW]
        assert len(await drained(reader)) == 100
        assert bus.subscriber_count("t") == 1
        bus.publish("t", frame(100))
        assert slow.empty() and reader.qsize() == 1
    assert bus.subscriber_count() == 0 and bus.thread_count == 0


@pytest.mark.asyncio
async def test_bounded_subscriber_keeps_every_frame_while_it_keeps_up() -> None:
    bus = EventBus()
    async with bus.subscribe("t", max_backlog=3) as queue:
        got = []
        for n in range(50):
            bus.publish("t", frame(n))
            got.extend(await drained(queue))
    assert [f["data"] for f in got] == list(range(50))


@pytest.mark.asyncio
async def test_ancestor_subscriber_is_bounded_for_relayed_child_frames() -> None:
    bus = EventBus()
    bus.parent_of = {"child": "parent"}.get
    async with bus.subscribe("parent", max_backlog=5) as queue:
        for n in range(20):
            bus.publish("child", frame(n))
        assert await drained(queue) == [OVERFLOW]
        assert bus.thread_count == 0
    assert bus.thread_count == 0


@pytest.mark.asyncio
async def test_subscribers_that_leave_leave_no_entry_behind() -> None:
    bus = EventBus()
    for index in range(50):
        with pytest.raises(RuntimeError):
            async with bus.subscribe(f"t{index}", max_backlog=10):
                raise RuntimeError("client went away")
        async with bus.subscribe(f"t{index}"), bus.subscribe(f"t{index}", max_backlog=2):
            assert bus.subscriber_count(f"t{index}") == 2
    assert bus.subscriber_count() == 0 and bus.thread_count == 0
    assert not bus.has_listeners
    assert bus._limits == {}


@pytest.mark.asyncio
async def test_bad_max_backlog_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_backlog"):
        async with EventBus().subscribe("t", max_backlog=0):
            pass


@pytest.mark.asyncio
async def test_slow_stream_gets_a_slow_consumer_error_then_ends_and_unsubscribes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streaming, "MAX_BACKLOG", 5)
    runtime: Any = SimpleNamespace(events=EventBus())
    hub = StreamHub()
    batches = []
    async with hub.listen(runtime, "t") as live:
        assert len(hub) == 1
        for n in range(50):
            runtime.events.publish("t", frame(n))
        async with asyncio.timeout(60):
            async for batch in live.batches():
                batches.append(batch)
    frames = [f for batch in batches for f in batch]
    assert frames[0]["type"] == "connected"
    assert frames[-1]["type"] == "error" and frames[-1]["error"] == "slow_consumer"
    assert len(frames) == 2
    assert len(hub) == 0 and runtime.events.thread_count == 0


@pytest.mark.asyncio
async def test_live_sse_client_that_disconnects_leaves_no_subscriber(
    sa_database_url: str,
) -> None:
    async with serving(sa_database_url) as (client, runtime, _):
        thread_id = await new_thread(client)
        for _ in range(3):
            async with client.stream("GET", f"{A}/threads/{thread_id}/stream") as response:
                assert await anext(sse_frames(response)) == {
                    "type": "connected",
                    "thread_id": thread_id,
                }
                assert runtime.events.subscriber_count(thread_id) == 1
        async with asyncio.timeout(60):
            while runtime.events.subscriber_count() != 0:
                await asyncio.sleep(0.01)
        assert runtime.events.thread_count == 0


@pytest.mark.asyncio
async def test_live_sse_slow_client_is_cut_off_and_its_stream_ends(
    sa_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "MAX_BACKLOG", 5)
    async with serving(sa_database_url) as (client, runtime, _):
        thread_id = await new_thread(client)
        async with client.stream("GET", f"{A}/threads/{thread_id}/stream") as response:
            frames = sse_frames(response)
            assert (await anext(frames))["type"] == "connected"
            for n in range(50):  # all at once: the stream falls behind before it can send
                runtime.events.publish(thread_id, frame(n))
            async with asyncio.timeout(60):
                rest = [f async for f in frames]
        assert [f["type"] for f in rest] == ["error"] and rest[0]["error"] == "slow_consumer"
        assert runtime.events.subscriber_count() == 0


@pytest.mark.asyncio
async def test_live_websocket_slow_client_is_cut_off_and_closed(
    sa_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("websockets")
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    monkeypatch.setattr(streaming, "MAX_BACKLOG", 5)
    async with serving(sa_database_url) as (client, runtime, token):
        thread_id = await new_thread(client)
        url = str(client.base_url).replace("http://", "ws://") + f"{A}/threads/{thread_id}/ws"
        async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            assert json.loads(await ws.recv())["type"] == "connected"
            for n in range(50):
                runtime.events.publish(thread_id, frame(n))
            async with asyncio.timeout(60):
                error = json.loads(await ws.recv())
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
        assert error["error"] == "slow_consumer"
        assert runtime.events.subscriber_count() == 0
