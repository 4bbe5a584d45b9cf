"""Live frames: pending rows, text deltas, tool events; the stored result is the same either way."""

from __future__ import annotations

import asyncio

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import TestProvider, TestScript


def pack():
    tool = define_tool(name="lookup", description="x", execute=lambda state: "found")
    prompt = define_prompt(name="main", model="fast", prompt="P.", include_chat=True, tools=["lookup"])
    return Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="fast", provider="test", model="m")],
        tools=[tool],
    )


def script():
    return (
        TestScript()
        .add_tool_call_response([{"name": "lookup", "arguments": {}}])
        .add_text_response("The answer is forty-two.")
        .with_streaming_simulation(chunk_size=5)
    )


@pytest.mark.asyncio
async def test_subscribers_receive_pending_rows_deltas_and_tool_events(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": TestProvider(script())}) as rt:
        thread = await rt.create_thread("a")
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.send_message("question")
            received = []
            while not frames.empty():
                received.append(frames.get_nowait())
        stored = (await thread.get_messages()).messages
    final = stored[-1]
    chunks = [f["chunk"] for f in received if f["type"] == "message_chunk" and f["message_id"] == final.id]
    assert len(chunks) > 1 and "".join(chunks) == "The answer is forty-two."
    statuses = [f["data"].get("status") for f in received if f["type"] == "message_data" and f["message_id"] == final.id]
    assert statuses == ["pending", "completed"]
    events = [(f["eventType"], f["data"]["name"]) for f in received if f["type"] == "event"]
    assert events == [("tool_call_started", "lookup"), ("tool_call_done", "lookup")]


@pytest.mark.asyncio
async def test_unwatched_threads_store_the_same_messages(sa_runtime_factory, tmp_path):
    results = []
    for watched in (True, False):
        async with sa_runtime_factory(packs=[pack()], providers={"test": TestProvider(script())}) as rt:
            thread = await rt.create_thread("a")
            if watched:
                async with rt.events.subscribe(thread.thread_id):
                    await thread.send_message("question")
            else:
                await thread.send_message("question")
            page = await thread.get_messages()
            results.append([(m.role, m.content, m.status, m.name, bool(m.log_id) if m.role == "assistant" else None) for m in page.messages])
    assert results[0] == results[1]
    assert results[0][-1] == ("assistant", "The answer is forty-two.", "completed", None, True)


@pytest.mark.asyncio
async def test_stop_fails_the_pending_row_and_the_next_message_continues(sa_runtime_factory):
    slow = TestScript().add_text_response("too late", delay=5).add_text_response("back again")
    async with sa_runtime_factory(packs=[pack()], providers={"test": TestProvider(slow)}) as rt:
        thread = await rt.create_thread("a")
        async with rt.events.subscribe(thread.thread_id) as frames:
            await thread.send_message("slow please", wait=False)
            while True:
                frame = await asyncio.wait_for(frames.get(), 60)
                if frame["type"] == "message_data" and frame["data"].get("status") == "pending":
                    break
            await thread.stop()
        page = await thread.get_messages()
        assert page.messages[-1].status == "failed"
        await thread.send_message("again")
        page = await thread.get_messages()
    assert page.messages[-1].content == "back again"


@pytest.mark.asyncio
async def test_a_failed_model_call_leaves_the_same_failed_row_watched_or_not(sa_runtime_factory):
    rows = []
    for watched in (True, False):
        failing = TestScript().add_error_response("bad request body", status=400)
        async with sa_runtime_factory(packs=[pack()], providers={"test": TestProvider(failing)}) as rt:
            thread = await rt.create_thread("a")
            if watched:
                async with rt.events.subscribe(thread.thread_id):
                    await thread.send_message("question")
            else:
                await thread.send_message("question")
            page = await thread.get_messages()
            errors = [log for log in await thread.get_logs() if log.type == "step_error"]
        rows.append([(m.role, m.status) for m in page.messages])
        failed = page.messages[-1]
        assert "bad request body" in failed.metadata["error"]  # the cause, not just "exhausted"
        assert "bad request body" in errors[0].data["error"]
    assert rows[0] == rows[1] == [("user", None), ("assistant", "failed")]
