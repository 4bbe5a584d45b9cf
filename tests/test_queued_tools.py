"""``state.queue_tool``: the queued tool reaches the model as a regular, paired tool call.

Seed 002 (0.14.1): "Prefer ``queueTool`` when the model should see the result as a regular
tool call." The queued call is stored on a message of the acting side before the tool runs,
its result as a tool message when it finishes; every provider's wire shape then pairs them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider, TestProvider, TestScript
from sa_providers._chat_completions import ChatDialect, chat_body
from sa_providers.anthropic import anthropic_body
from sa_providers.google import gemini_body

MODEL = define_model(name="fast", provider="test", model="m")


def make_pack(*tools: Any, offered: list[str]) -> Pack:
    prompt = define_prompt(
        name="main", model="fast", prompt="Hi.", include_chat=True, tools=offered
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL], tools=list(tools))


def planner(state: Any) -> str:
    state.queue_tool("lookup", {"city": "Oslo"})
    return "planned"


PLANNER = define_tool(name="planner", description="Plan.", execute=planner)
LOOKUP = define_tool(
    name="lookup", description="Look up.", execute=lambda state: "Sunny in Oslo"
)


def _queued_pair(request: ProviderRequest) -> tuple[Any, Any]:
    """The assistant message calling ``lookup`` and the message right after it."""
    for index, message in enumerate(request.messages):
        if message.role == "assistant" and any(c.name == "lookup" for c in message.tool_calls):
            return message, request.messages[index + 1]
    raise AssertionError(f"no lookup call in {request.messages}")


@pytest.mark.asyncio
async def test_the_next_model_request_contains_the_queued_call_and_its_result(
    sa_runtime_factory,
):
    script = (
        TestScript()
        .add_tool_call_response([{"name": "planner", "arguments": {}}])
        .add_text_response("It is sunny.")
    )
    provider = TestProvider(script)
    pack = make_pack(PLANNER, LOOKUP, offered=["planner"])  # lookup is not offered
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("Weather?")
        stored = (await thread.get_messages()).messages
    call_message, result = _queued_pair(provider.requests[1])
    (call,) = call_message.tool_calls
    assert call.arguments == {"city": "Oslo"}
    assert result.role == "tool"
    assert result.tool_call_id == call.id and result.content == "Sunny in Oslo"
    # stored: the model's call and result, then the queued call and its result, then the answer
    assert [(m.role, m.name, bool(m.tool_calls)) for m in stored] == [
        ("user", None, False),
        ("assistant", None, True),
        ("tool", "planner", False),
        ("assistant", None, True),
        ("tool", "lookup", False),
        ("assistant", None, False),
    ]
    carrier = stored[3]
    assert carrier.metadata == {"queued_tools": True} and carrier.content is None
    assert carrier.tool_calls[0].id == stored[4].tool_call_id == call.id


@pytest.mark.asyncio
async def test_the_queued_call_and_its_result_are_paired_on_every_provider_wire_shape(
    sa_runtime_factory,
):
    script = (
        TestScript()
        .add_tool_call_response([{"name": "planner", "arguments": {}}])
        .add_text_response("It is sunny.")
    )
    provider = TestProvider(script)
    pack = make_pack(PLANNER, LOOKUP, offered=["planner"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("Weather?")
    request = provider.requests[1]
    call_id = _queued_pair(request)[0].tool_calls[0].id

    openai = chat_body(request, ChatDialect(), stream=False)["messages"]
    for index, message in enumerate(openai):
        if message["role"] == "tool":  # every result answers a call of the message before it
            owner = next(m for m in reversed(openai[:index]) if m["role"] != "tool")
            assert message["tool_call_id"] in [c["id"] for c in owner["tool_calls"]]
    assert any(m.get("tool_call_id") == call_id for m in openai)

    anthropic = anthropic_body(request, stream=False)["messages"]
    roles = [m["role"] for m in anthropic]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # alternating
    for index, message in enumerate(anthropic):
        used = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if used:  # the next message answers every tool_use of this one
            answered = [
                b["tool_use_id"] for b in anthropic[index + 1]["content"]
                if b["type"] == "tool_result"
            ]
            assert answered == used
    assert any(
        b.get("tool_use_id") == call_id for m in anthropic for b in m["content"]
    )

    contents = gemini_body(request)["contents"]
    for index, content in enumerate(contents):
        calls = [p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p]
        if calls:
            responses = [
                p["functionResponse"]["name"]
                for p in contents[index + 1]["parts"]
                if "functionResponse" in p
            ]
            assert responses == calls
    assert any(
        p.get("functionCall", {}).get("name") == "lookup" for c in contents for p in c["parts"]
    )


@pytest.mark.asyncio
async def test_tools_queued_by_a_queued_tool_are_paired_too(sa_runtime_factory):
    def first(state: Any) -> str:
        state.queue_tool("second", {})
        return "first done"

    tools = [
        define_tool(
            name="starter", description="x", execute=lambda s: s.queue_tool("first") or "ok"
        ),
        define_tool(name="first", description="x", execute=first),
        define_tool(name="second", description="x", execute=lambda s: "second done"),
    ]
    script = (
        TestScript()
        .add_tool_call_response([{"name": "starter", "arguments": {}}])
        .add_text_response("done")
    )
    provider = TestProvider(script)
    async with sa_runtime_factory(
        packs=[make_pack(*tools, offered=["starter"])], providers={"test": provider}
    ) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
    sent = provider.requests[1].messages
    results = {m.tool_call_id: m.content for m in sent if m.role == "tool"}
    calls = [(c.name, results.get(c.id)) for m in sent for c in m.tool_calls]
    assert calls == [("starter", "ok"), ("first", "first done"), ("second", "second done")]


@pytest.mark.asyncio
async def test_a_queued_tool_interrupted_by_a_shutdown_runs_again_once_on_restart(
    sa_runtime_factory,
):
    started = asyncio.Event()
    attempts: list[tuple[str | None, int]] = []

    async def lookup(state: Any) -> str:
        attempts.append((state.tool_call_id, state.tool_attempt))
        if state.tool_attempt == 1:
            started.set()
            await asyncio.sleep(60)
        return f"Sunny (attempt {state.tool_attempt})"

    pack = make_pack(
        PLANNER,
        define_tool(name="lookup", description="Look up.", execute=lookup),
        offered=["planner"],
    )
    script = TestScript().add_tool_call_response([{"name": "planner", "arguments": {}}])
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("Weather?", wait=False)
        await asyncio.wait_for(started.wait(), 5)
    # the queued call committed before it ran: the restart runs it again (attempt 2)
    provider = FunctionProvider(lambda request: "It is sunny.")
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        await rt.wait_idle(timeout=5)
        stored = (await (await rt.get_thread(thread.thread_id)).get_messages()).messages
    assert [a for _, a in attempts] == [1, 2] and attempts[0][0] == attempts[1][0]
    assert [(m.role, m.name) for m in stored] == [
        ("user", None),
        ("assistant", None),
        ("tool", "planner"),
        ("assistant", None),
        ("tool", "lookup"),
        ("assistant", None),
    ]
    assert stored[4].content == "Sunny (attempt 2)"
    call_message, result = _queued_pair(provider.requests[-1])
    assert result.tool_call_id == call_message.tool_calls[0].id == attempts[0][0]
    assert len(provider.requests) == 1  # the planner's step was not requested again
