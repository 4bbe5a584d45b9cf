"""Live frames match their declared types (``sa_core.engine.events.Frame``)."""

from __future__ import annotations

import typing

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.events import (
    ChunkFrame,
    EventFrame,
    MessageDataFrame,
    OutputFrame,
    QueuedFrame,
    ValueFrame,
)
from sa_core.testing import TestProvider, TestScript

FRAME_TYPES = {
    "message_data": MessageDataFrame,
    "message_chunk": ChunkFrame,
    "reasoning_chunk": ChunkFrame,
    "output_chunk": OutputFrame,
    "event": EventFrame,
    "queued": QueuedFrame,
    "value": ValueFrame,
}


def problems(frame: dict[str, typing.Any]) -> list[str]:
    declared = FRAME_TYPES.get(frame["type"])
    if declared is None:
        return [f"undeclared frame type {frame['type']!r}"]
    keys = set(frame)
    found = []
    if missing := declared.__required_keys__ - keys:
        found.append(f"{frame['type']}: missing {sorted(missing)}")
    if extra := keys - declared.__required_keys__ - declared.__optional_keys__:
        found.append(f"{frame['type']}: undeclared {sorted(extra)}")
    return found


@pytest.mark.asyncio
async def test_every_published_frame_has_exactly_the_keys_its_type_declares(sa_runtime_factory):
    async def lookup(state: typing.Any) -> str:
        state.emit("looked", 1)
        await state.set_value("looked", {"times": 1})
        return "found"

    tool = define_tool(name="lookup", description="x", execute=lookup)
    prompt = define_prompt(
        name="main", model="fast", prompt="P.", include_chat=True, tools=["lookup"]
    )
    pack = Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="fast", provider="test", model="m")],
        tools=[tool],
    )
    script = (
        TestScript()
        .add_tool_call_response([{"name": "lookup", "arguments": {}}])
        .add_text_response("Forty-two.")
        .add_text_response("Again.")
        .with_streaming_simulation(chunk_size=3)
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("a")
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.send_message("question")
            await thread.queue_message({"content": "more"})
            await rt.wait_idle(timeout=60)
            received = []
            while not frames.empty():
                received.append(frames.get_nowait())
    assert {f["type"] for f in received} == {
        "message_data", "message_chunk", "event", "queued", "value"
    }  # fmt: skip
    assert [p for f in received for p in problems(f)] == []


@pytest.mark.asyncio
async def test_set_value_tells_live_subscribers_the_value_with_secrets_redacted(
    sa_runtime_factory,
):
    pack = Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="P.")],
        models=[define_model(name="fast", provider="test", model="m")],
    )
    provider = TestProvider(TestScript())
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread(
            "a", env={"TOKEN": "tok-123456"}, env_types={"TOKEN": "secret"}
        )
        await thread.set_value("unwatched", 1)  # no subscriber: no frame, nothing kept
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.set_value("plan", {"steps": ["call with tok-123456"], "n": 2})
            received = [frames.get_nowait() for _ in range(frames.qsize())]
        assert await thread.get_value("plan") == {"steps": ["call with tok-123456"], "n": 2}
    assert received == [
        {"type": "value", "key": "plan", "value": {"steps": ["call with [redacted]"], "n": 2}}
    ]
