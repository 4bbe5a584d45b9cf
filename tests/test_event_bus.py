"""The event bus hands ancestors a tagged copy; a relayed frame enters typed in one place."""

from __future__ import annotations

import asyncio
import json

import pytest

from sa_core.engine.events import OVERFLOW, ChunkFrame, Delivered, EventBus
from sa_core.engine.workers.relay import RelayBus, as_frame


def chunk() -> ChunkFrame:
    return {"type": "message_chunk", "message_id": "m1", "depth": 1, "chunk": "Hi"}


def drained(queue: asyncio.Queue[Delivered]) -> list[Delivered]:
    found = []
    while not queue.empty():
        found.append(queue.get_nowait())
    return found


def relay_bus(worker_id: str) -> RelayBus:
    """A relay bus whose database side does nothing (frames are handed to it directly)."""

    async def send(_notes: list[tuple[str, str]]) -> None:
        return None

    async def store_frame(_thread_id: str, _frame: object) -> int:
        return 0

    async def fetch_frame(_seq: int) -> object:
        return None

    return RelayBus(worker_id, send, store_frame, fetch_frame)


@pytest.mark.asyncio
async def test_ancestors_receive_tagged_copies_and_the_threads_own_frame_is_untouched() -> None:
    bus = EventBus()
    bus.parent_of = {"child": "parent", "parent": "root"}.get
    frame = chunk()
    async with (
        bus.subscribe("child") as own,
        bus.subscribe("parent") as parent,
        bus.subscribe("root") as root,
    ):
        bus.publish("child", frame)
        [mine], [tagged], [top] = drained(own), drained(parent), drained(root)
    assert mine is frame and frame == chunk()  # no subagent_id added to the publisher's frame
    assert tagged == {**chunk(), "subagent_id": "child"} and tagged is not frame
    assert top == {**chunk(), "subagent_id": "parent"} and top is not tagged


@pytest.mark.asyncio
async def test_a_frame_already_tagged_keeps_its_subagent_id_for_every_ancestor() -> None:
    bus = EventBus()
    bus.parent_of = {"child": "parent"}.get
    frame = chunk()
    frame["subagent_id"] = "grandchild"
    async with bus.subscribe("parent") as parent:
        bus.publish("child", frame)
        assert drained(parent) == [frame]


@pytest.mark.asyncio
async def test_json_from_another_worker_is_delivered_once_it_is_a_frame() -> None:
    bus = relay_bus("here")
    bus.start()
    notes = [
        {"t": "child", "a": ["parent"], "f": chunk()},
        {"t": "child", "a": ["parent"], "f": {"type": "no_such_frame"}},
        {"t": "child", "a": ["parent"], "f": ["not", "a", "frame"]},
    ]
    try:
        async with bus.subscribe("child") as own, bus.subscribe("parent") as parent:
            bus.on_notify(None, 0, "sa_stream", "there|" + json.dumps({"n": 1, "b": notes}))
            bus.on_notify(None, 0, "sa_stream", "here|" + json.dumps({"n": 1, "b": notes}))
            async with asyncio.timeout(5):
                while own.empty():
                    await asyncio.sleep(0.01)
            assert drained(own) == [chunk()]
            assert drained(parent) == [{**chunk(), "subagent_id": "child"}]
    finally:
        await bus.stop()


@pytest.mark.asyncio
async def test_a_slow_subscriber_of_relayed_frames_is_cut_off_at_its_backlog() -> None:
    bus = relay_bus("here")
    async with (
        bus.subscribe("child", max_backlog=2) as own,
        bus.subscribe("parent", max_backlog=2) as parent,
    ):
        for _ in range(3):  # frames of a thread running on another worker
            bus.deliver("child", chunk(), ["parent"])
        assert drained(own) == [OVERFLOW] and drained(parent) == [OVERFLOW]
        assert bus.subscriber_count() == 0  # both dropped: nothing more piles up
        bus.deliver("child", chunk(), ["parent"])
        assert own.empty() and parent.empty()


def test_only_json_objects_with_a_known_frame_type_count_as_frames() -> None:
    assert as_frame(chunk())
    assert as_frame({"type": "queued", "queue_id": "q", "role": "user", "silent": False})
    assert not as_frame({"type": "overflow"})  # a subscriber's own marker, never relayed
    assert not as_frame({"type": "connected", "thread_id": "t"})
    assert not as_frame({"chunk": "Hi"})
    assert not as_frame("message_chunk")
