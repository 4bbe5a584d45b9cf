"""The turn loop through the public API: chat, tool loops, stops, perspective, context."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider, TestProvider, TestScript

MODEL = define_model(name="fast", provider="test", model="test-model")


class CityArgs(BaseModel):
    city: str


def weather_tool(calls: list[str] | None = None):
    def execute(state, args: CityArgs) -> str:
        if calls is not None:
            calls.append(args.city)
        return f"Sunny in {args.city}"

    return define_tool(name="weather", description="Current weather.", args=CityArgs, execute=execute)


def chat_pack(*, tools=(), prompt_tools=(), include_chat=True, **prompt_fields) -> Pack:
    prompt = define_prompt(
        name="main",
        model="fast",
        prompt="You are helpful.",
        include_chat=include_chat,
        tools=list(prompt_tools),
        **prompt_fields,
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL], tools=list(tools))


@pytest.mark.asyncio
async def test_chat_reply_is_stored_as_assistant_after_user(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("Hello there"))
    async with sa_runtime_factory(packs=[chat_pack()], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("Hi")
        page = await thread.get_messages()
    assert [(m.role, m.content) for m in page.messages] == [("user", "Hi"), ("assistant", "Hello there")]
    assert page.total == 2 and page.has_more is False
    request = provider.last_request
    assert request.messages[0].role == "system" and request.messages[0].content == "You are helpful."
    assert [(m.role, m.content) for m in request.messages[1:]] == [("user", "Hi")]


@pytest.mark.asyncio
async def test_tool_loop_runs_tool_and_feeds_result_back(sa_runtime_factory):
    calls: list[str] = []
    script = (
        TestScript()
        .add_tool_call_response([{"name": "weather", "arguments": {"city": "Oslo"}}])
        .add_text_response("It is sunny in Oslo.")
    )
    provider = TestProvider(script)
    pack = chat_pack(tools=[weather_tool(calls)], prompt_tools=["weather"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("Weather in Oslo?")
        page = await thread.get_messages()
    assert calls == ["Oslo"]
    roles = [m.role for m in page.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_row = page.messages[2]
    assert tool_row.content == "Sunny in Oslo" and tool_row.tool_status == "success"
    assert tool_row.name == "weather" and tool_row.tool_call_id == page.messages[1].tool_calls[0].id
    second = provider.requests[1]
    assert second.messages[-1].role == "tool" and second.messages[-1].content == "Sunny in Oslo"
    assert [t.name for t in provider.requests[0].tools] == ["weather"]
    assert provider.requests[0].tools[0].parameters["required"] == ["city"]


@pytest.mark.asyncio
async def test_invalid_tool_arguments_become_an_error_result_the_model_sees(sa_runtime_factory):
    script = (
        TestScript()
        .add_tool_call_response([{"name": "weather", "arguments": {"town": "Oslo"}}])
        .add_text_response("Sorry.")
    )
    provider = TestProvider(script)
    pack = chat_pack(tools=[weather_tool()], prompt_tools=["weather"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("Weather?")
        page = await thread.get_messages()
    tool_row = page.messages[2]
    assert tool_row.tool_status == "error"
    assert tool_row.content.startswith("Failed to execute tool: Tool argument validation failed:")
    assert "city" in tool_row.content
    assert provider.requests[1].messages[-1].content == tool_row.content


@pytest.mark.asyncio
async def test_a_raising_tool_does_not_crash_the_turn(sa_runtime_factory):
    def boom(state, args):
        raise RuntimeError("database is down")

    tool = define_tool(name="boom", description="Fails.", execute=boom)
    script = TestScript().add_tool_call_response([{"name": "boom", "arguments": {}}]).add_text_response("ok")
    pack = chat_pack(tools=[tool], prompt_tools=["boom"])
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
    assert page.messages[2].content == "Failed to execute tool: database is down"
    assert page.messages[-1].content == "ok"


@pytest.mark.asyncio
async def test_tool_not_offered_by_the_prompt_is_refused(sa_runtime_factory):
    script = TestScript().add_tool_call_response([{"name": "weather", "arguments": {"city": "x"}}])
    script.add_text_response("fine")
    pack = chat_pack(tools=[weather_tool()])
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
    assert page.messages[2].content == (
        'Failed to execute tool: Tool "weather" is not available for this prompt. You can only use '
        "tools that were explicitly configured for this prompt."
    )


@pytest.mark.asyncio
async def test_include_chat_false_shows_only_this_turn(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("one").add_text_response("two"))
    async with sa_runtime_factory(packs=[chat_pack(include_chat=False)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first")
        await thread.send_message("second")
    assert [(m.role, m.content) for m in provider.requests[1].messages[1:]] == [("user", "second")]


@pytest.mark.asyncio
async def test_include_chat_true_shows_history(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("one").add_text_response("two"))
    async with sa_runtime_factory(packs=[chat_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first")
        await thread.send_message("second")
    assert [(m.role, m.content) for m in provider.requests[1].messages[1:]] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]


@pytest.mark.asyncio
async def test_past_tool_traffic_is_hidden_unless_include_past_tools(tmp_path):
    for include_past_tools, expected_roles in ((False, ["user", "assistant", "user"]), (True, ["user", "assistant", "tool", "assistant", "user"])):
        script = (
            TestScript()
            .add_tool_call_response([{"name": "weather", "arguments": {"city": "Oslo"}}])
            .add_text_response("Sunny.")
            .add_text_response("Bye.")
        )
        provider = TestProvider(script)
        pack = chat_pack(tools=[weather_tool()], prompt_tools=["weather"], include_past_tools=include_past_tools)
        async with Runtime(packs=[pack], providers={"test": provider}, database_url=f"sqlite:///{tmp_path}/{include_past_tools}.db", load_entrypoints=False) as rt:
            thread = await rt.create_thread("helper")
            await thread.send_message("Weather?")
            await thread.send_message("Thanks")
        assert [m.role for m in provider.requests[2].messages[1:]] == expected_roles


@pytest.mark.asyncio
async def test_tool_choice_and_parallel_flag_reach_the_provider(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("x"))
    pack = chat_pack(tools=[weather_tool()], prompt_tools=["weather"], tool_choice="required", parallel_tool_calls=False)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
    assert provider.last_request.tool_choice == "required"
    assert provider.last_request.parallel_tool_calls is False


@pytest.mark.asyncio
async def test_system_prompt_resolves_includes_and_env_parts(sa_runtime_factory):
    base = define_prompt(name="base", model="fast", prompt="Be brief. ")
    main = define_prompt(
        name="main",
        model="fast",
        prompt=[
            {"type": "include", "prompt": "base"},
            {"type": "text", "content": "Customer: "},
            {"type": "env", "property": "CUSTOMER"},
        ],
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    pack = Pack(name="demo", agents=[agent], prompts=[base, main], models=[MODEL])
    provider = TestProvider(TestScript().add_text_response("x"))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper", env={"CUSTOMER": "Ada"})
        await thread.send_message("hi")
    assert provider.last_request.messages[0].content == "Be brief. Customer: Ada"


@pytest.mark.asyncio
async def test_empty_response_is_rejected_with_a_synthetic_failed_call(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("").add_text_response("Here you go"))
    async with sa_runtime_factory(packs=[chat_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
        page = await thread.get_messages()
    assert page.messages[1].tool_calls[0].name == "invalid_assistant_response"
    assert page.messages[2].content.endswith(
        "You must reply. Empty response was rejected. Return non-empty content, call a tool, or include attachments."
    )
    assert page.messages[-1].content == "Here you go"


@pytest.mark.asyncio
async def test_model_calls_are_logged_with_tokens_and_latency(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("hello", usage={"prompt_tokens": 11, "completion_tokens": 3}))
    async with sa_runtime_factory(packs=[chat_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
        logs = await thread.get_logs()
        page = await thread.get_messages()
    llm = [log for log in logs if log.type == "llm_call"]
    assert len(llm) == 1
    data = llm[0].data
    assert data["provider"] == "test" and data["model"] == "test-model"
    assert data["input_tokens"] == 11 and data["output_tokens"] == 3
    assert data["latency_ms"] is not None and data["finish_reason"] == "stop" and data["error"] is None
    assert page.messages[1].log_id == llm[0].id


@pytest.mark.asyncio
async def test_function_provider_scripts_by_request(sa_runtime_factory):
    def answer(request):
        last = request.messages[-1]
        if last.role == "tool":
            return f"Result was: {last.content}"
        return {"tool_calls": [{"name": "weather", "arguments": {"city": last.content}}]}

    provider = FunctionProvider(answer)
    pack = chat_pack(tools=[weather_tool()], prompt_tools=["weather"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("Rome")
        page = await thread.get_messages()
    assert page.messages[-1].content == "Result was: Sunny in Rome"


@pytest.mark.asyncio
async def test_a_dict_with_its_own_status_field_is_plain_data(sa_runtime_factory):
    tool = define_tool(name="order", description="x", execute=lambda state: {"id": "A1", "status": "shipped"})
    script = TestScript().add_tool_call_response([{"name": "order", "arguments": {}}]).add_text_response("after")
    async with sa_runtime_factory(packs=[chat_pack(tools=[tool], prompt_tools=["order"])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
    assert page.messages[2].tool_status == "success"
    assert '"status": "shipped"' in page.messages[2].content
    assert page.messages[-1].content == "after"


@pytest.mark.asyncio
async def test_handoff_to_a_prompt_without_past_tools_hides_earlier_tool_calls(sa_runtime_factory):
    # The same stored message reaches two prompts in one flow: with its tool calls (the first
    # prompt keeps past tools) and stripped (the handoff target does not); the second must not
    # get the first one's conversion back.
    tick = define_tool(name="tick", description="x", execute=lambda state: "ticked")
    front_prompt = define_prompt(name="front_main", model="fast", prompt="Front.", include_chat=True, include_past_tools=True, tools=["tick", "back"])
    back_prompt = define_prompt(name="back_main", model="fast", prompt="Back.", include_chat=True, include_past_tools=False)
    front = define_agent(name="front", side_a={"prompt": "front_main"})
    back = define_agent(name="back", side_a={"prompt": "back_main"}, expose_as_tool=True, tool_description="Back office.")
    pack = Pack(name="desk", agents=[front, back], prompts=[front_prompt, back_prompt], models=[MODEL], tools=[tick])
    answers = {
        "Front.": [{"content": "Let me check.", "tool_calls": [{"name": "tick", "arguments": {}}]}, "Checked.", {"tool_calls": [{"name": "back", "arguments": {}}]}],
        "Back.": ["Back office here."],
    }
    provider = FunctionProvider(lambda request: answers[request.messages[0].content].pop(0))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("front")
        await thread.send_message("hi")
        await thread.send_message("switch me")
    back_view = provider.requests[-1].messages
    assert back_view[0].content == "Back."
    earlier = [m for m in back_view if m.content == "Let me check."]
    assert len(earlier) == 1 and earlier[0].tool_calls == []
    assert not any(m.role == "tool" and m.tool_name == "tick" for m in back_view)


@pytest.mark.asyncio
async def test_a_side_max_steps_above_250_raises_the_step_ceiling(sa_runtime_factory):
    tick = define_tool(name="tick", description="x", execute=lambda state: "ok")
    prompt = define_prompt(name="main", model="fast", prompt="Loop.", tools=["tick"])
    agent = define_agent(name="helper", side_a={"prompt": "main", "max_steps": 260})
    pack = Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL], tools=[tick])
    provider = FunctionProvider(lambda request: {"tool_calls": [{"name": "tick", "arguments": {}}]})
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        await thread.refresh()
    assert len(provider.requests) == 260
    assert thread.row.execution["last_stop_reason"] == "max_side_steps"


@pytest.mark.asyncio
async def test_tool_results_that_are_not_json_serialisable_are_stored_as_text(sa_runtime_factory):
    import datetime

    class Handle:
        def __str__(self) -> str:
            return "handle-7"

    when = define_tool(name="when", description="x", execute=lambda state: {"status": "success", "result": {"at": datetime.date(2024, 1, 2)}})
    refuse = define_tool(
        name="refuse",
        description="x",
        execute=lambda state: {"status": "error", "error": "closed", "error_code": "closed", "error_data": {"until": datetime.date(2024, 1, 3), "handle": Handle()}},
    )
    script = TestScript().add_tool_call_response([{"name": "when", "arguments": {}}, {"name": "refuse", "arguments": {}}]).add_text_response("after")
    async with sa_runtime_factory(packs=[chat_pack(tools=[when, refuse], prompt_tools=["when", "refuse"])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
    rows = [m for m in page.messages if m.role == "tool"]
    assert rows[0].tool_status == "success" and '"at": "2024-01-02"' in rows[0].content
    assert rows[1].tool_status == "error" and rows[1].content == "Failed to execute tool: closed"
    assert rows[1].metadata["error_data"] == {"until": "2024-01-03", "handle": "handle-7"}
    assert page.messages[-1].content == "after"
