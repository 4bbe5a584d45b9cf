"""ThreadState through the public API: env, queue, terminate, files, durability (effects:
test_engine_state_effects.py).
"""

from __future__ import annotations

import asyncio

import pytest
from engine_state_kit import MODEL, make_pack

from sa_core import (
    MissingVariablesError,
    Pack,
    ThreadTerminatedError,
    define_agent,
    define_prompt,
    define_tool,
)
from sa_core.errors import VariableNotFoundError
from sa_core.testing import FunctionProvider, TestProvider, TestScript


@pytest.mark.asyncio
async def test_missing_required_variables_name_each_variable_and_declarer(sa_runtime_factory):
    tool = define_tool(
        name="lookup",
        description="x",
        execute=lambda s: "x",
        variables=[{"name": "API_TOKEN", "type": "secret", "required": True}],
    )
    pack = make_pack(tools=[tool], variables=[{"name": "REGION", "required": True}])
    async with sa_runtime_factory(packs=[pack]) as rt:
        with pytest.raises(MissingVariablesError) as info:
            await rt.create_thread("helper")
        assert set(info.value.names) == {"API_TOKEN", "REGION"}
        assert "tool 'lookup'" in str(info.value) and "prompt 'main'" in str(info.value)
        thread = await rt.create_thread("helper", env={"API_TOKEN": "t", "REGION": "eu"})
        assert thread.env("REGION") == "eu"


@pytest.mark.asyncio
async def test_env_resolution_order_thread_user_instance_agent_tool_prompt(sa_runtime_factory):
    seen = {}

    def probe(state):
        for name in ("A", "B", "C", "D", "E", "F"):
            seen[name] = state.env(name)
        return "ok"

    tool = define_tool(name="probe", description="x", execute=probe)
    from sa_core.spec import PromptToolConfig

    pack = make_pack(
        tools=[tool],
        prompt_tools=[PromptToolConfig(name="probe", env={"A": "tool", "B": "tool", "C": "tool", "D": "tool", "E": "tool"})],
        prompt_env={"A": "prompt", "B": "prompt", "C": "prompt", "D": "prompt", "E": "prompt", "F": "prompt"},
        agent_env={"A": "agent", "B": "agent", "C": "agent", "D": "agent"},
    )
    script = TestScript().add_tool_call_response([{"name": "probe", "arguments": {}}]).add_text_response("done")
    async with sa_runtime_factory(
        packs=[pack],
        providers={"test": TestProvider(script)},
        env={"A": "instance", "B": "instance", "C": "instance"},
        user_env={"u1": {"A": "user", "B": "user"}},
    ) as rt:
        thread = await rt.create_thread("helper", env={"A": "thread"}, user_id="u1")
        await thread.send_message("go")
        with pytest.raises(VariableNotFoundError, match="Environment variable not found: NOPE"):
            thread.env("NOPE")
    assert seen == {"A": "thread", "B": "user", "C": "instance", "D": "agent", "E": "tool", "F": "prompt"}


@pytest.mark.asyncio
async def test_secret_variables_never_reach_the_model(sa_runtime_factory):
    prompt = define_prompt(name="main", model="fast", prompt=[{"type": "text", "content": "Key:"}, {"type": "env", "property": "TOKEN"}], variables=[{"name": "TOKEN", "type": "secret"}])
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    pack = Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL])
    provider = TestProvider(TestScript().add_text_response("x"))
    # validation refuses the graph outright...
    with pytest.raises(Exception, match="secret"):
        pack.validate()
    # ...and the renderer would never print it either (thread-typed secrets)
    pack2 = make_pack(prompt_env={})
    prompt2 = define_prompt(name="main", model="fast", prompt=[{"type": "env", "property": "PASSWORD"}])
    pack2 = Pack(name="demo", agents=pack2.agents, prompts=[prompt2], models=[MODEL])
    async with sa_runtime_factory(packs=[pack2], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper", env={"PASSWORD": "hunter2"}, env_types={"PASSWORD": "secret"})
        await thread.send_message("hi")
    assert "hunter2" not in repr(provider.last_request.messages)


@pytest.mark.asyncio
async def test_state_survives_closing_and_reopening_the_runtime(sa_runtime_factory):
    script = TestScript().add_text_response("first answer")
    pack = make_pack()
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper", env={"CITY": "Oslo"})
        await thread.send_message("hello")
        await thread.write_file("/attachments/notes.txt", "remember the milk")
        thread_id = thread.thread_id
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(TestScript().add_text_response("second"))}) as rt:
        again = await rt.get_thread(thread_id)
        page = await again.get_messages()
        assert [m.content for m in page.messages] == ["hello", "first answer"]
        assert again.env("CITY") == "Oslo"
        assert await again.read_file("/attachments/notes.txt") == b"remember the milk"
        await again.send_message("more")
        page = await again.get_messages()
        assert [m.content for m in page.messages][-1] == "second"


@pytest.mark.asyncio
async def test_queued_message_survives_restart_and_runs_on_start(sa_runtime_factory):
    pack = make_pack()
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(TestScript())}) as rt:
        thread = await rt.create_thread("helper")
        thread_id = thread.thread_id
        rt.kernel.life.open = False  # simulate a process that dies right after queueing: no turn starts
        await thread.queue_message({"role": "user", "content": "queued while down"})
        rt.kernel.life.open = True
    provider = TestProvider(TestScript().add_text_response("handled"))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        await rt.wait_idle(timeout=60)
        page = await (await rt.get_thread(thread_id)).get_messages()
    assert [m.content for m in page.messages] == ["queued while down", "handled"]
    assert page.messages[0].metadata["queued"] is True


@pytest.mark.asyncio
async def test_queue_while_running_is_injected_before_the_next_step(sa_runtime_factory):
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(state):
        started.set()
        await release.wait()
        return "slow done"

    tool = define_tool(name="slow", description="x", execute=slow)

    def answer(request):
        texts = [m.content for m in request.messages if m.role == "user"]
        if len(request.messages) == 2:
            return {"tool_calls": [{"name": "slow", "arguments": {}}]}
        return f"saw: {texts}"

    pack = make_pack(tools=[tool])
    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("start", wait=False)
        await asyncio.wait_for(started.wait(), 60)
        await thread.queue_message({"role": "user", "content": "also this"})
        release.set()
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
    assert page.messages[-1].content == "saw: ['start', 'also this']"
    assert len(provider.requests) == 2


@pytest.mark.asyncio
async def test_queue_while_idle_starts_a_turn(sa_runtime_factory):
    provider = TestProvider(TestScript().add_text_response("woke up"))
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.queue_message({"role": "user", "content": "ping", "silent": True})
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages(include_silent=True)
    assert [m.content for m in page.messages] == ["ping", "woke up"]
    assert page.messages[0].silent is True


@pytest.mark.asyncio
async def test_terminate_aborts_work_and_rejects_new_messages(sa_runtime_factory):
    started = asyncio.Event()

    async def hang(state):
        started.set()
        await asyncio.sleep(60)

    tool = define_tool(name="hang", description="x", execute=hang)
    script = TestScript().add_tool_call_response([{"name": "hang", "arguments": {}}])
    async with sa_runtime_factory(packs=[make_pack(tools=[tool])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go", wait=False)
        await asyncio.wait_for(started.wait(), 60)
        await thread.terminate()
        await rt.wait_idle(timeout=60)
        assert thread.terminated is not None
        with pytest.raises(ThreadTerminatedError, match="is terminated"):
            await thread.send_message("again")
        with pytest.raises(ThreadTerminatedError):
            await thread.queue_message({"role": "user", "content": "x"})
        page = await thread.get_messages()
    tool_row = page.messages[-1]
    assert tool_row.role == "tool" and tool_row.tool_status == "error"
    assert "Execution stopped by user" in tool_row.content


@pytest.mark.asyncio
async def test_thread_filesystem_operations(sa_runtime_factory):
    async with sa_runtime_factory(packs=[make_pack()]) as rt:
        thread = await rt.create_thread("helper")
        record = await thread.write_file("/docs/report.txt", "alpha\nbeta needle\n")
        assert record.path == "/docs/report.txt" and record.size == 18 and record.mime_type == "text/plain"
        await thread.mkdir_file("/empty")
        names = sorted(r.name for r in await thread.readdir_file("/"))
        assert names == ["docs", "empty"]
        grep = await thread.grep_files("needle")
        assert grep[0].path == "/docs/report.txt" and grep[0].line_numbers == [2]
        assert [r.path for r in await thread.find_files("*.txt")] == ["/docs/report.txt"]
        chunks = [c async for c in thread.read_file_stream("/docs/report.txt", chunk_size=5)]
        assert b"".join(chunks) == b"alpha\nbeta needle\n"
        stats = await thread.get_file_stats()
        assert stats.file_count == 1 and stats.total_size == 18
        assert await thread.unlink_file("/docs/report.txt") is True
        assert await thread.stat_file("/docs/report.txt") is None
        assert await thread.rmdir_file("/empty") is True


@pytest.mark.asyncio
async def test_tool_attachments_are_written_and_referenced(sa_runtime_factory):
    import base64

    def draw(state):
        return {"status": "success", "result": "drawn", "attachments": [{"name": "chart.png", "mimeType": "image/png", "data": base64.b64encode(b"PNGDATA").decode()}]}

    tool = define_tool(name="draw", description="x", execute=draw)
    script = TestScript().add_tool_call_response([{"name": "draw", "arguments": {}}]).add_text_response("ok")
    async with sa_runtime_factory(packs=[make_pack(tools=[tool])], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("draw")
        row = (await thread.get_messages()).messages[2]
        ref = row.attachments[0]
        assert ref.path.startswith("/attachments/") and ref.path.endswith(".png")
        assert row.content == f'drawn\nAttachment path for "chart.png": {ref.path}'
        assert await thread.read_file(ref.path) == b"PNGDATA"


@pytest.mark.asyncio
async def test_invoke_tool_returns_a_result_without_storing_a_message(sa_runtime_factory):
    tool = define_tool(name="echo", description="x", execute=lambda state: "echoed")
    async with sa_runtime_factory(packs=[make_pack(tools=[tool])]) as rt:
        thread = await rt.create_thread("helper")
        result = await thread.invoke_tool("echo", {})
        assert result.status == "success" and result.result == "echoed"
        assert (await thread.get_messages()).total == 0


@pytest.mark.asyncio
async def test_set_env_persists(sa_runtime_factory):
    pack = make_pack()
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("helper")
        await thread.set_env("MODE", "fast")
        thread_id = thread.thread_id
    async with sa_runtime_factory(packs=[pack]) as rt:
        assert (await rt.get_thread(thread_id)).env("MODE") == "fast"


@pytest.mark.asyncio
async def test_resources_and_emit(sa_runtime_factory):
    async with sa_runtime_factory(packs=[make_pack()]) as rt:
        thread = await rt.create_thread("helper")
        assert thread.get_agent_names() == ["helper"] and thread.get_prompt_names() == ["main"]
        assert thread.load_model("fast").model == "m" and thread.load_prompt("main").name == "main"
        async with rt.events.subscribe(thread.thread_id) as frames:
            thread.emit("progress", {"pct": 50})
            frame = await asyncio.wait_for(frames.get(), 60)
        assert frame["type"] == "event" and frame["eventType"] == "progress" and frame["data"] == {"pct": 50}


@pytest.mark.asyncio
async def test_message_get_update_delete(sa_runtime_factory):
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": TestProvider(TestScript().add_text_response("hi"))}) as rt:
        thread = await rt.create_thread("helper")
        sent = await thread.send_message("hello")
        assert (await thread.get_message(sent.id)).content == "hello"
        updated = await thread.update_message(sent.id, {"content": "hello (edited)", "metadata": {"edited": True}})
        assert updated.content == "hello (edited)" and updated.metadata == {"edited": True}
        assert await thread.delete_message(sent.id) is True
        assert await thread.get_message(sent.id) is None
        assert await thread.delete_message("no-such-id") is False
        page = await thread.get_messages(order="desc", limit=1)
        assert [m.content for m in page.messages] == ["hi"] and page.total == 1


@pytest.mark.asyncio
async def test_tools_see_execution_inject_messages_and_queue_tools(sa_runtime_factory):
    seen = {}

    def planner(state):
        execution = state.execution
        seen["side"] = execution.current_side
        seen["step"] = execution.step_count
        state.context["plan"] = "A"
        state.queue_tool("follow_up", {})
        return "planned"

    async def follow_up(state):
        seen["context"] = state.context.get("plan")
        await state.inject_message({"role": "system", "content": "note for the model", "silent": True})
        return "followed"

    tools = [define_tool(name="planner", description="x", execute=planner), define_tool(name="follow_up", description="x", execute=follow_up)]
    script = TestScript().add_tool_call_response([{"name": "planner", "arguments": {}}]).add_text_response("done")
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[make_pack(tools=tools, prompt_tools=["planner"])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        assert thread.execution is None
        rows = [m for m in (await thread.get_messages(include_silent=True)).messages if m.role == "tool"]
    assert seen == {"side": "a", "step": 1, "context": "A"}
    assert [r.content for r in rows] == ["planned", "followed"]
    second = provider.requests[1]
    assert "note for the model" in [m.content for m in second.messages]
    # the queued tool reaches the model as a regular call with its result (see below)
    assert "followed" in [m.content for m in second.messages]


@pytest.mark.asyncio
async def test_a_turn_interrupted_by_shutdown_resumes_with_its_message(sa_runtime_factory):
    started = asyncio.Event()

    async def hang(request):
        started.set()
        await asyncio.sleep(60)

    prompt = define_prompt(name="main", model="fast", prompt="Hi.")  # include_chat=False
    pack = Pack(name="demo", agents=[define_agent(name="helper", side_a={"prompt": "main"})], prompts=[prompt], models=[MODEL])
    async with sa_runtime_factory(packs=[pack], providers={"test": FunctionProvider(hang)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("what is 6 x 7?", wait=False)
        await asyncio.wait_for(started.wait(), 60)
    provider = FunctionProvider(lambda request: f"you asked: {request.messages[-1].content}")
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        await rt.wait_idle(timeout=60)
        page = await (await rt.get_thread(thread.thread_id)).get_messages()
    assert [(m.content, m.status) for m in page.messages] == [
        ("what is 6 x 7?", None),
        (None, "failed"),  # the call the shutdown interrupted
        ("you asked: what is 6 x 7?", "completed"),
    ]


def _gated_provider(gate: asyncio.Event, entered: asyncio.Event) -> FunctionProvider:
    """Answers "reply"; the first request waits on ``gate``."""
    calls = []

    async def answer(request):
        calls.append(request)
        if len(calls) == 1:
            entered.set()
            await gate.wait()
        return "reply"

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_a_message_sent_while_a_turn_is_being_stopped_runs_after_the_stop(sa_runtime_factory):
    gate, entered = asyncio.Event(), asyncio.Event()
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": _gated_provider(gate, entered)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first", wait=False)
        await asyncio.wait_for(entered.wait(), 60)
        stopping = asyncio.ensure_future(thread.stop())
        await asyncio.sleep(0)  # the stop has begun; the aborted turn is still unwinding
        await asyncio.wait_for(thread.send_message("second"), 60)
        await stopping
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
    assert [m.content for m in page.messages if m.role == "user"] == ["first", "second"]
    assert page.messages[-1].content == "reply"


@pytest.mark.asyncio
async def test_the_next_message_after_a_stop_clears_the_stored_stop_flag(sa_runtime_factory):
    gate, entered = asyncio.Event(), asyncio.Event()
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": _gated_provider(gate, entered)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first", wait=False)
        await asyncio.wait_for(entered.wait(), 60)
        await thread.stop()
        await thread.send_message("second")
        assert thread.row.stopped is False
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": FunctionProvider(lambda r: "x")}) as rt:
        reopened = await rt.get_thread(thread.thread_id)
    assert reopened.row.stopped is False  # a crash now would resume the thread's turns


@pytest.mark.asyncio
async def test_a_tool_that_terminates_its_own_thread_ends_the_turn(sa_runtime_factory):
    async def shut_down(state):
        await state.terminate()
        return "terminated"

    tool = define_tool(name="shut_down", description="x", execute=shut_down)
    provider = FunctionProvider(lambda request: {"tool_calls": [{"name": "shut_down", "arguments": {}}]})
    async with sa_runtime_factory(packs=[make_pack(tools=[tool])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await asyncio.wait_for(thread.send_message("go"), 60)
        assert thread.terminated is not None
        page = await thread.get_messages()
    assert len(provider.requests) == 1  # no model call after the thread was terminated
    assert [m.role for m in page.messages] == ["user", "assistant", "tool"]


@pytest.mark.asyncio
async def test_secrets_declared_by_plugin_tools_are_redacted_from_tool_results(sa_runtime_factory):
    from sa_hooks import hookimpl

    echo = define_tool(
        name="echo_token",
        description="x",
        execute=lambda state: f"using {state.env('PLUGIN_TOKEN')}",
        variables=[{"name": "PLUGIN_TOKEN", "type": "secret", "required": True}],
    )

    class TokenPlugin:
        @hookimpl
        def sa_register_tools(self, register):
            register(echo)

    script = TestScript().add_tool_call_response([{"name": "echo_token", "arguments": {}}]).add_text_response("done")
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[make_pack(prompt_tools=["echo_token"])], providers={"test": provider}, plugins=[TokenPlugin()]) as rt:
        thread = await rt.create_thread("helper", env={"PLUGIN_TOKEN": "sk-live-123456"})
        await thread.send_message("go")
        page = await thread.get_messages()
    assert "sk-live-123456" not in repr(provider.last_request.messages)
    assert page.messages[2].content == "using [redacted]"


@pytest.mark.asyncio
async def test_a_required_tool_variable_given_by_the_prompts_tool_config_is_not_missing(sa_runtime_factory):
    from sa_core.spec import PromptToolConfig

    tool = define_tool(name="lookup", description="x", execute=lambda state: f"region {state.env('REGION')}", variables=[{"name": "REGION", "required": True}])
    pack = make_pack(tools=[tool], prompt_tools=[PromptToolConfig(name="lookup", env={"REGION": "eu"})])
    script = TestScript().add_tool_call_response([{"name": "lookup", "arguments": {}}]).add_text_response("done")
    async with sa_runtime_factory(packs=[pack], providers={"test": TestProvider(script)}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        page = await thread.get_messages()
    assert page.messages[2].content == "region eu"


@pytest.mark.asyncio
async def test_a_tool_that_stops_its_own_thread_ends_the_turn(sa_runtime_factory):
    async def halt(state):
        await state.stop()
        return "halted"

    tool = define_tool(name="halt", description="x", execute=halt)
    provider = FunctionProvider(lambda request: {"tool_calls": [{"name": "halt", "arguments": {}}]} if len(provider.requests) == 1 else "back")
    async with sa_runtime_factory(packs=[make_pack(tools=[tool])], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await asyncio.wait_for(thread.send_message("go"), 60)
        assert thread.row.stopped is True
        page = await thread.get_messages()
        assert [(m.role, m.content) for m in page.messages] == [("user", "go"), ("assistant", None), ("tool", "halted")]
        assert len(provider.requests) == 1
        await asyncio.wait_for(thread.send_message("again"), 60)
        page = await thread.get_messages()
    assert page.messages[-1].content == "back"
