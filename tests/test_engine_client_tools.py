"""Client tools through ThreadState: offered beside the agent's tools, parked, resumed."""

from __future__ import annotations

from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.tools.approvals import ApprovalNotFoundError
from sa_core.engine.turn.clienttools import RESULTS
from sa_core.errors import ClientToolResultsError, ClientToolsError
from sa_core.store import open_store
from sa_core.testing import FunctionProvider
from sa_providers._chat_completions import chat_tools

MODEL = define_model(name="fast", provider="test", model="fast")
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "w1"}


def desk_pack(executed: list[Any], *, client_tools: bool = True, **prompt: Any) -> Pack:
    def lookup(state: Any) -> str:
        executed.append("lookup")
        return "Record 7"

    tools = [define_tool(name="lookup", description="Read the record.", execute=lookup)]
    main = define_prompt(name="main", model="fast", prompt="Desk.", tools=["lookup"], **prompt)
    agent = define_agent(
        name="desk", side_a={"prompt": "main"}, serving={"client_tools": client_tools}
    )
    return Pack(name="desk", agents=[agent], prompts=[main], models=[MODEL], tools=tools)


def desk_model(*steps: list[dict[str, Any]]) -> FunctionProvider:
    """Makes the calls of each step in turn (of the tools offered), then reports the results."""

    def answer(request: Any) -> Any:
        made = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        offered = {t.name for t in request.tools}
        calls = [c for c in steps[made] if c["name"] in offered] if made < len(steps) else []
        if calls:
            return {"tool_calls": calls}
        return "Saw: " + ", ".join(m.content or "" for m in request.messages if m.role == "tool")

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_a_client_tool_call_parks_the_turn_until_its_result_comes(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        await thread.refresh()
        assert thread.row.execution["status"] == "awaiting_client_tools"
        assert provider.tool_names(provider.requests[0]) == ["lookup", "get_weather"]
        assert provider.requests[0].tools[1].parameters == WEATHER["parameters"]
        pending = await thread.pending_client_calls()
        assert [(p["tool_call_id"], p["name"], p["arguments"]) for p in pending] == [
            ("w1", "get_weather", {"city": "Paris"})
        ]
        assert await thread.pending_approvals() == []
        await thread.submit_tool_results({"w1": "Sunny, 21 C"})
        await thread.refresh()
        page = await thread.get_messages()
        assert await thread.pending_client_calls() == []
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "weather?"),
        ("assistant", None),
        ("tool", "Sunny, 21 C"),
        ("assistant", "Saw: Sunny, 21 C"),
    ]
    tool = page.messages[2]
    assert (tool.tool_call_id, tool.name, tool.tool_status) == ("w1", "get_weather", "success")
    assert tool.metadata == {"client_tool": True}
    assert thread.row.execution["status"] == "awaiting_human"
    assert len(provider.requests) == 2
    assert provider.tool_names(provider.requests[1]) == ["lookup", "get_weather"]


@pytest.mark.asyncio
async def test_agent_tools_of_the_same_step_run_on_the_server(sa_runtime_factory):
    executed: list[Any] = []
    provider = desk_model([{"name": "lookup", "arguments": {}, "id": "l1"}, WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack(executed)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("both", client_tools=[WEATHER])
        assert executed == ["lookup"]
        assert [p["tool_call_id"] for p in await thread.pending_client_calls()] == ["w1"]
        await thread.submit_tool_results({"w1": {"sky": "clear"}})
        page = await thread.get_messages()
    assert executed == ["lookup"]
    assert page.messages[-1].content == 'Saw: Record 7, {"sky": "clear"}'


@pytest.mark.asyncio
async def test_tool_choice_forces_the_next_step_only_and_none_offers_no_client_tool(
    sa_runtime_factory,
):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        strict = {**WEATHER, "strict": True}
        await thread.send_message(
            "forced", client_tools=[strict], tool_choice={"name": "get_weather"}
        )
        await thread.submit_tool_results({"w1": "Rain"})
        other = await rt.create_thread("desk")
        await other.send_message("any tool", client_tools=[WEATHER], tool_choice="required")
        await other.submit_tool_results({"w1": "Rain"})
        quiet = await rt.create_thread("desk")
        await quiet.send_message("no client tool", client_tools=[WEATHER], tool_choice="none")
        answer = (await quiet.get_messages()).messages[-1].content
    choices = [r.tool_choice for r in provider.requests]
    assert choices == [{"name": "get_weather"}, "auto", "required", "auto", "auto"]
    assert provider.tool_names(provider.requests[-1]) == ["lookup"]
    assert answer == "Saw: "
    assert provider.requests[0].tools[1].strict is True  # sent as OpenAI's strict function
    assert provider.requests[2].tools[1].strict is False
    sent = chat_tools(provider.requests[0].tools)
    assert [t["function"]["strict"] for t in sent] == [False, True]


@pytest.mark.asyncio
async def test_results_can_bring_the_tools_and_choice_the_turn_goes_on_with(sa_runtime_factory):
    second = {"name": "get_time", "arguments": {}, "id": "t1"}
    provider = desk_model([WEATHER_CALL], [second])
    clock = {"name": "get_time", "description": "The time.", "parameters": {"type": "object"}}
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        await thread.submit_tool_results(
            {"w1": "Fog"}, client_tools=[WEATHER, clock], tool_choice={"name": "get_time"}
        )
        assert [p["name"] for p in await thread.pending_client_calls()] == ["get_time"]
        await thread.submit_tool_results({"t1": "noon"})
        page = await thread.get_messages()
    assert provider.requests[1].tool_choice == {"name": "get_time"}
    assert provider.tool_names(provider.requests[1]) == ["lookup", "get_weather", "get_time"]
    assert page.messages[-1].content == "Saw: Fog, noon"


@pytest.mark.asyncio
async def test_bad_client_tools_are_refused_naming_every_problem(sa_runtime_factory):
    provider = desk_model()
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        tools: list[Any] = [
            {"name": "lookup", "parameters": {"type": "object"}},
            {"name": "bad name!"},
            {"name": "ok", "parameters": {"type": 3}},
            {"name": "ok2", "colour": "red"},
        ]
        with pytest.raises(ClientToolsError) as caught:
            await thread.send_message("hi", client_tools=tools, tool_choice={"name": "nope"})
        assert [field for field, _ in caught.value.problems] == [
            "client_tools[1].name",
            "client_tools[2].parameters",
            "client_tools[3].colour",
            "client_tools[0].name",
            "tool_choice",
        ]
        assert "agent 'desk''s own tools" in str(caught.value)
        assert (await thread.get_messages()).messages == []
        assert provider.requests == []


@pytest.mark.asyncio
async def test_an_agent_that_turns_client_tools_off_refuses_them(sa_runtime_factory):
    pack = desk_pack([], client_tools=False)
    async with sa_runtime_factory(packs=[pack], providers={"test": desk_model()}) as rt:
        thread = await rt.create_thread("desk")
        with pytest.raises(ClientToolsError, match="serving.client_tools is false") as caught:
            await thread.send_message("hi", client_tools=[WEATHER])
        assert caught.value.problems[0][0] == "client_tools"


@pytest.mark.asyncio
async def test_results_for_unknown_calls_are_refused_and_approvals_leave_client_calls_alone(
    sa_runtime_factory,
):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        with pytest.raises(ClientToolResultsError, match="'nope' is not a client tool call"):
            await thread.submit_tool_results({"w1": "Sun", "nope": "?"})
        with pytest.raises(ApprovalNotFoundError, match="client tool's call"):
            await thread.approve("w1")
        assert [p["tool_call_id"] for p in await thread.pending_client_calls()] == ["w1"]
        await thread.submit_tool_results({"w1": "Sun"})
        with pytest.raises(ClientToolResultsError, match="awaiting: none"):
            await thread.submit_tool_results({"w1": "Sun again"})
    assert len(provider.requests) == 2


@pytest.mark.asyncio
async def test_a_pending_client_call_survives_a_restart(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        thread_id = thread.thread_id
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        await rt.wait_idle(60)
        thread = await rt.get_thread(thread_id)
        assert thread.row.execution["status"] == "awaiting_client_tools"
        assert [p["tool_call_id"] for p in await thread.pending_client_calls()] == ["w1"]
        await thread.submit_tool_results({"w1": "Hail"})
        page = await thread.get_messages()
    assert page.messages[-1].content == "Saw: Hail"
    # the resumed turn still offers the client tool (read back from the turn's message)
    assert provider.tool_names(provider.requests[0]) == ["lookup", "get_weather"]


@pytest.mark.asyncio
async def test_results_queued_before_a_crash_are_taken_in_after_the_restart(
    sa_runtime_factory, sa_database_url
):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        thread_id = thread.thread_id
    # what submit_tool_results commits, left as a process that died before its drain leaves it
    async with await open_store(sa_database_url) as store:
        entry = {"role": "user", "content": "", "silent": True,
                 "metadata": {RESULTS: {"w1": "Snow"}}}  # fmt: skip
        await store.enqueue(thread_id, entry)
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        await rt.wait_idle(60)
        thread = await rt.get_thread(thread_id)
        page = await thread.get_messages()
    assert page.messages[-1].content == "Saw: Snow"


@pytest.mark.asyncio
async def test_stopping_a_thread_settles_its_pending_client_calls(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        await thread.stop()
        await thread.refresh()
        assert await thread.pending_client_calls() == []
        assert thread.row.execution["status"] == "idle"
        page = await thread.get_messages()
    tool = page.messages[-1]
    assert tool.content == (
        "Failed to execute tool: Not run: the thread was stopped before the client sent its "
        "result."
    )
    assert (tool.metadata or {})["error_code"] == "client_tool_cancelled"


@pytest.mark.asyncio
async def test_a_turn_without_client_tools_offers_only_the_agents_tools(sa_runtime_factory):
    provider = desk_model()
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        await thread.send_message("plain")
    assert provider.tool_names(provider.requests[0]) == ["lookup", "get_weather"]
    assert provider.tool_names(provider.requests[1]) == ["lookup"]
    assert provider.requests[1].tool_choice == "auto"


@pytest.mark.asyncio
async def test_a_conversation_brought_with_its_tool_calls_is_injected_as_it_was(
    sa_runtime_factory,
):
    provider = desk_model()
    pack = desk_pack([], include_chat=True, include_past_tools=True)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        call = {"id": "w0", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}
        await thread.inject_message({"role": "user", "content": "weather?"})
        await thread.inject_message({"role": "assistant", "content": "", "tool_calls": [call]})
        await thread.inject_message(
            {"role": "tool", "content": "Cold", "tool_call_id": "w0", "name": "get_weather"}
        )
        await thread.send_message("and now?")
    sent = provider.requests[0].messages
    assert [m.role for m in sent[1:]] == ["user", "assistant", "tool", "user"]
    assert sent[2].tool_calls[0].name == "get_weather"
    assert sent[2].tool_calls[0].arguments == {"city": "Oslo"}
    assert (sent[3].tool_call_id, sent[3].content) == ("w0", "Cold")


@pytest.mark.asyncio
async def test_a_message_is_refused_while_client_calls_await_their_results(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        with pytest.raises(ClientToolResultsError, match="awaits the results of client tool"):
            await thread.send_message("never mind")
        again = await rt.get_thread(thread.thread_id)  # a handle read from the database
        with pytest.raises(ClientToolResultsError, match="w1"):
            await again.send_message("never mind")
        await thread.submit_tool_results({"w1": "Dry"})
        await thread.send_message("thanks")
        page = await thread.get_messages()
    assert [m.content for m in page.messages if m.role == "user"] == ["weather?", "thanks"]


@pytest.mark.asyncio
async def test_results_can_end_the_turn_without_a_model_step(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    pack = desk_pack([], include_chat=True, include_past_tools=True)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        await thread.submit_tool_results({"w1": "Final."}, resume=False)
        await thread.refresh()
        assert await thread.pending_client_calls() == []
        assert thread.row.execution["status"] == "idle"
        assert len(provider.requests) == 1  # no model step after the results
        await thread.send_message("next")
        page = await thread.get_messages()
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "weather?"), ("assistant", None), ("tool", "Final."), ("user", "next"),
        ("assistant", "Saw: Final."),
    ]  # fmt: skip
    assert page.messages[2].metadata == {"client_tool": True}
    assert [m.role for m in provider.requests[1].messages[1:]] == [
        "user", "assistant", "tool", "user"
    ]


@pytest.mark.asyncio
async def test_a_result_stored_before_a_crash_is_not_stored_twice(sa_runtime_factory):
    provider = desk_model([WEATHER_CALL])
    async with sa_runtime_factory(packs=[desk_pack([])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("desk")
        await thread.send_message("weather?", client_tools=[WEATHER])
        # the row a runner stored just before a crash kept it from crossing the call off
        await thread.inject_message(
            {"role": "tool", "content": "Windy", "tool_call_id": "w1", "name": "get_weather"}
        )
        await thread.submit_tool_results({"w1": "Windy"})
        page = await thread.get_messages()
    assert [m.content for m in page.messages if m.role == "tool"] == ["Windy"]
    assert page.messages[-1].content == "Saw: Windy"
