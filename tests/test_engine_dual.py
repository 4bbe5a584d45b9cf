"""dual_ai agents: side perspective, stop evaluation order, session bindings, limits."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

MODEL_A = define_model(name="model_a", provider="test", model="writer")
MODEL_B = define_model(name="model_b", provider="test", model="reviewer")


class Summary(BaseModel):
    summary: str


class Reason(BaseModel):
    reason: str


def ok(state, args):
    return "recorded"


def failing(state, args):
    raise RuntimeError("approval service unavailable")


def pack_with(side_a=None, side_b=None, *, approve_execute=ok, **agent_fields) -> Pack:
    approve = define_tool(name="approve", description="Approve.", args=Summary, execute=approve_execute)
    reject = define_tool(name="reject", description="Reject.", args=Reason, execute=ok)
    writer = define_prompt(name="writer", model="model_a", prompt="Write.", include_chat=True, tools=["reject"])
    reviewer = define_prompt(name="reviewer", model="model_b", prompt="Review.", include_chat=True, tools=["approve", "reject"])
    agent = define_agent(
        name="duo",
        type="dual_ai",
        side_a={"prompt": "writer", **(side_a or {})},
        side_b={"prompt": "reviewer", **(side_b or {})},
        **agent_fields,
    )
    return Pack(name="duo", agents=[agent], prompts=[writer, reviewer], models=[MODEL_A, MODEL_B], tools=[approve, reject])


def scripted(responses_a, responses_b):
    """A FunctionProvider answering side A (writer model) and side B (reviewer model) in turn."""
    queues = {"writer": list(responses_a), "reviewer": list(responses_b)}

    def answer(request):
        queue = queues[request.model]
        if not queue:
            raise AssertionError(f"no more scripted answers for {request.model}")
        return queue.pop(0)

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_each_side_sees_itself_as_assistant(sa_runtime_factory):
    provider = scripted(
        ["Draft one", "Draft two"],
        ["Needs work", {"tool_calls": [{"name": "approve", "arguments": {"summary": "Great"}}]}],
    )
    pack = pack_with(side_b={"stop_on_response": True, "session_stop": {"name": "approve", "message_property": "summary"}})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Write a haiku")
        page = await thread.get_messages()
    stored = [(m.role, m.content) for m in page.messages if m.role != "tool"]
    assert stored[:4] == [("user", "Write a haiku"), ("assistant", "Draft one"), ("user", "Needs work"), ("assistant", "Draft two")]
    reviewer_view = provider.requests[1]
    assert [(m.role, m.content) for m in reviewer_view.messages[1:]] == [
        ("assistant", "Write a haiku"),
        ("user", "Draft one"),
    ]
    writer_view = provider.requests[2]
    assert [(m.role, m.content) for m in writer_view.messages[1:]] == [
        ("user", "Write a haiku"),
        ("assistant", "Draft one"),
        ("user", "Needs work"),
    ]


@pytest.mark.asyncio
async def test_session_stop_maps_message_property_and_ends_the_session(sa_runtime_factory):
    provider = scripted(["Draft"], [{"tool_calls": [{"name": "approve", "arguments": {"summary": "  Looks good  "}}]}])
    pack = pack_with(side_b={"stop_on_response": False, "session_stop": {"name": "approve", "message_property": "summary"}})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
        page = await thread.get_messages()
    tool_row = page.messages[-1]
    assert tool_row.role == "tool" and tool_row.content == "Looks good"
    assert len(provider.requests) == 2


@pytest.mark.asyncio
async def test_failed_session_stop_call_keeps_the_side_stepping(sa_runtime_factory):
    provider = scripted(
        ["Draft"],
        [
            {"tool_calls": [{"name": "approve", "arguments": {"summary": "ok"}}]},
            {"tool_calls": [{"name": "reject", "arguments": {"reason": "approval is broken"}}]},
        ],
    )
    pack = pack_with(
        approve_execute=failing,
        side_b={"stop_on_response": False, "session_stop": "approve", "session_fail": {"name": "reject", "message_property": "reason"}},
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
        page = await thread.get_messages()
    # side B stepped again after the failed approve (no side switch), then failed the session
    assert [r.model for r in provider.requests] == ["writer", "reviewer", "reviewer"]
    assert page.messages[-1].content == "approval is broken"


@pytest.mark.asyncio
async def test_session_fail_wins_over_session_stop_in_the_same_step(sa_runtime_factory):
    provider = scripted(
        ["Draft"],
        [{"tool_calls": [
            {"name": "approve", "arguments": {"summary": "fine"}},
            {"name": "reject", "arguments": {"reason": "actually not"}},
        ]}],
    )
    pack = pack_with(side_b={"stop_on_response": False, "session_stop": "approve", "session_fail": {"name": "reject", "message_property": "reason"}})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
        state = await rt.get_thread(thread.thread_id)
    assert state.row.execution["last_stop_reason"] == "session_fail"


@pytest.mark.asyncio
async def test_stop_tool_completes_the_turn_and_response_property_replaces_content(sa_runtime_factory):
    provider = scripted(
        [{"content": "thinking...", "tool_calls": [{"name": "reject", "arguments": {"reason": "Final draft"}}]}],
        [{"tool_calls": [{"name": "approve", "arguments": {"summary": "ok"}}]}],
    )
    pack = pack_with(
        side_a={"stop_tool": "reject", "stop_tool_response_property": "reason"},
        side_b={"stop_on_response": False, "session_stop": "approve"},
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
        page = await thread.get_messages()
    assert page.messages[1].content == "Final draft"
    assert [r.model for r in provider.requests] == ["writer", "reviewer"]


@pytest.mark.asyncio
async def test_max_session_turns_ends_a_conversation_that_never_stops(sa_runtime_factory):
    # The cap counts the turns of both sides together (seed 002: "Maximum total turns across
    # both sides"): 3 is A, B, A; counted as exchanges (min of the sides) it would be 6 steps.
    provider = scripted([f"a{i}" for i in range(10)], [f"b{i}" for i in range(10)])
    pack = pack_with(max_session_turns=3)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
        state = await rt.get_thread(thread.thread_id)
        assert [r.model for r in provider.requests] == ["writer", "reviewer", "writer"]
        assert state.row.execution["last_stop_reason"] == "max_session_turns"
        # the session ended: its counters start again, so the next message gets a full session
        await thread.send_message("Again")
        page = await thread.get_messages()
    assert [r.model for r in provider.requests][3:] == ["writer", "reviewer", "writer"]
    assert [m.content for m in page.messages][-4:] == ["Again", "a2", "b1", "a3"]


@pytest.mark.asyncio
async def test_max_session_turns_does_not_cap_an_ai_human_agent(sa_runtime_factory):
    # "Only applies to dual_ai agents" (seed 002): a chat agent answers every message.
    prompt = define_prompt(name="chat", model="model_a", prompt="Chat.", include_chat=True)
    agent = define_agent(name="chat", max_session_turns=2, side_a={"prompt": "chat"})
    pack = Pack(name="chat", agents=[agent], prompts=[prompt], models=[MODEL_A])
    provider = scripted([f"reply {i}" for i in range(4)], [])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("chat")
        for text in ("one", "two", "three", "four"):
            await thread.send_message(text)
        page = await thread.get_messages()
        state = await rt.get_thread(thread.thread_id)
    last = [(m.role, m.content) for m in page.messages][-2:]
    assert last == [("user", "four"), ("assistant", "reply 3")]
    assert len(provider.requests) == 4
    assert state.row.execution["last_stop_reason"] == "stop_on_response"


@pytest.mark.asyncio
async def test_max_steps_caps_a_side_within_one_flow(sa_runtime_factory):
    looping = {"tool_calls": [{"name": "reject", "arguments": {"reason": "again"}}]}
    provider = scripted([looping] * 10, [])
    pack = pack_with(side_a={"max_steps": 3})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Go")
    assert len(provider.requests) == 3


@pytest.mark.asyncio
async def test_assistant_message_makes_side_b_act_first(sa_runtime_factory):
    provider = scripted([], [{"tool_calls": [{"name": "approve", "arguments": {"summary": "ok"}}]}])
    pack = pack_with(side_b={"stop_on_response": False, "session_stop": "approve"})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("duo")
        await thread.send_message("Here is my draft", role="assistant")
    assert [r.model for r in provider.requests] == ["reviewer"]
    assert provider.requests[0].messages[-1].role == "user"
