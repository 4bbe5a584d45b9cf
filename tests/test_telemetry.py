"""OpenTelemetry spans (the ``otel`` extra) with the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from sa_core import telemetry  # noqa: E402

SECRET = "sk-very-secret-value-42"
MODEL = define_model(name="fast", provider="test", model="test-model")
WORKER = define_model(name="worker_model", provider="test", model="worker")


class City(BaseModel):
    city: str


class Summary(BaseModel):
    summary: str


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.set_tracer_provider(None)
        provider.shutdown()


def weather_pack() -> Pack:
    def execute(state: Any, args: City) -> str:
        return f"Sunny in {args.city}; key {state.env('API_KEY')}"

    tool = define_tool(name="weather", description="Weather.", args=City, execute=execute)
    prompt = define_prompt(name="main", model="fast", prompt="Help.", tools=["weather"])
    agent = define_agent(
        name="helper",
        side_a={"prompt": "main"},
        variables=[{"name": "API_KEY", "type": "secret"}],
    )
    return Pack(name="weather", agents=[agent], prompts=[prompt], models=[MODEL], tools=[tool])


def weather_model() -> FunctionProvider:
    def answer(request: Any) -> Any:
        if not any(m.role == "tool" for m in request.messages):
            return {
                "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}, "id": "c1"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        return {"content": "Sunny.", "usage": {"prompt_tokens": 30, "completion_tokens": 3}}

    return FunctionProvider(answer)


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


@pytest.mark.asyncio
async def test_turn_model_and_tool_spans_follow_genai_conventions(sa_runtime_factory, spans):
    async with sa_runtime_factory(
        packs=[weather_pack()], providers={"test": weather_model()}
    ) as rt:
        thread = await rt.create_thread("helper", env={"API_KEY": SECRET})
        await thread.send_message("Weather in Oslo?")
        await rt.wait_idle(60)
    found = by_name(spans)
    (turn,) = found["invoke_agent helper"]
    chats = found["chat test-model"]
    (tool,) = found["execute_tool weather"]
    assert len(chats) == 2
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["sa.thread_id"] == thread.thread_id
    assert turn.attributes["sa.package"] == "weather"
    assert turn.attributes["sa.stop_reason"] == "stop_on_response"
    first = min(chats, key=lambda s: s.start_time)
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "test-model"
    assert first.attributes["gen_ai.system"] == "test"
    assert first.attributes["gen_ai.usage.input_tokens"] == 11
    assert first.attributes["gen_ai.usage.output_tokens"] == 7
    assert first.attributes["sa.thread_id"] == thread.thread_id
    assert tool.attributes["gen_ai.tool.name"] == "weather"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["sa.tool_status"] == "success"
    for child in [*chats, tool]:
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    everything = repr([(s.name, dict(s.attributes or {})) for s in spans.get_finished_spans()])
    assert SECRET not in everything


def subagent_pack() -> Pack:
    approve = define_tool(
        name="approve", description="Finish.", args=Summary, execute=lambda s, a: "ok"
    )
    coordinator = define_prompt(
        name="coordinator",
        model="fast",
        prompt="Coordinate.",
        tools=[{"name": "researcher", "blocking": True, "initUserMessageProperty": "summary"}],
    )
    worker = define_prompt(
        name="worker", model="worker_model", prompt="Work.", tools=["approve"], include_chat=True
    )
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches.",
        max_session_turns=2,
        side_a={
            "prompt": "worker",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary"},
        },
        side_b={"prompt": "worker", "stop_on_response": False},
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    return Pack(
        name="tree",
        agents=[lead, researcher],
        prompts=[coordinator, worker],
        models=[MODEL, WORKER],
        tools=[approve],
    )


def tree_model() -> FunctionProvider:
    def answer(request: Any) -> Any:
        if request.model == "worker":
            return {"tool_calls": [{"name": "approve", "arguments": {"summary": "42"}}]}
        if any(m.role == "tool" for m in request.messages):
            return "Done."
        return {"tool_calls": [{"name": "researcher", "arguments": {"summary": "go"}}]}

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_subagent_run_is_linked_to_the_parents_tool_call_span(sa_runtime_factory, spans):
    async with sa_runtime_factory(packs=[subagent_pack()], providers={"test": tree_model()}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        await lead.refresh()
        child_id = lead.children[0].reference
    found = by_name(spans)
    (call,) = found["execute_tool researcher"]
    runs = found["subagent_run researcher"]
    assert runs and all(r.attributes["sa.thread_id"] == child_id for r in runs)
    run = runs[0]
    assert run.attributes["sa.parent_thread_id"] == lead.thread_id
    assert run.parent is None  # its own trace ...
    assert run.context.trace_id != call.context.trace_id
    links = [link.context for link in run.links]  # ... linked to the tool call that started it
    assert [(c.trace_id, c.span_id) for c in links] == [
        (call.context.trace_id, call.context.span_id)
    ]
    child_chat = [s for s in found["chat worker"] if s.attributes["sa.thread_id"] == child_id]
    assert child_chat and child_chat[0].context.trace_id == run.context.trace_id


def test_spans_are_recorded_for_turns_started_over_http(sa_database_url, spans):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    runtime = Runtime(
        packs=[weather_pack()],
        providers={"test": weather_model()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as client:
        key, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {key}"
        base = "/api/packages/weather/threads"
        created = client.post(base + "/", json={"agent": "helper", "env": {"API_KEY": SECRET}})
        thread_id = created.json()["id"]
        client.post(f"{base}/{thread_id}/messages", json={"content": "Oslo?"})
        client.blocking_portal.call(runtime.wait_idle, 10)
    found = by_name(spans)
    assert found["invoke_agent helper"][0].attributes["sa.thread_id"] == thread_id
    assert len(found["chat test-model"]) == 2 and "execute_tool weather" in found


def test_without_the_extra_nothing_is_imported_and_runs_are_unchanged(tmp_path):
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
        sys.path.insert(0, {str(tmp_path)!r})
        from test_telemetry_subject import run
        print(asyncio.run(run({str(tmp_path / "db.sqlite")!r})))
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry."))
        print("loaded:", loaded, sys.modules["opentelemetry"])
        """
    )
    (tmp_path / "test_telemetry_subject.py").write_text(
        textwrap.dedent(
            """
            from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
            from sa_core import define_tool
            from sa_core.testing import FunctionProvider

            def answer(request):
                if any(m.role == "tool" for m in request.messages):
                    return "Sunny."
                return {"tool_calls": [{"name": "weather", "arguments": {}}]}

            async def run(path):
                tool = define_tool(name="weather", description="W.", execute=lambda s: "sun")
                pack = Pack(
                    name="plain",
                    agents=[define_agent(name="helper", side_a={"prompt": "main"})],
                    prompts=[define_prompt(name="main", model="m", prompt="x", tools=["weather"])],
                    models=[define_model(name="m", provider="test", model="m")],
                    tools=[tool],
                )
                async with Runtime(
                    packs=[pack],
                    providers={"test": FunctionProvider(answer)},
                    database_url="sqlite:///" + path,
                    load_entrypoints=False,
                ) as runtime:
                    thread = await runtime.create_thread("helper")
                    await thread.send_message("hi")
                    await runtime.wait_idle(60)
                    page = await thread.get_messages()
                return [(m.role, m.content) for m in page.messages]
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == (
        "[('user', 'hi'), ('assistant', None), ('tool', 'sun'), ('assistant', 'Sunny.')]"
    )
    assert lines[1] == "loaded: [] None"


def test_no_span_work_without_a_configured_tracer_provider():
    provider = TracerProvider()
    assert not telemetry.active()  # the extra is installed, but nothing would record spans
    telemetry.set_tracer_provider(provider)
    try:
        assert telemetry.active()
    finally:
        telemetry.set_tracer_provider(None)


def test_sa_telemetry_off_disables_spans_even_with_a_configured_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    telemetry.set_tracer_provider(TracerProvider())
    try:
        assert telemetry.active()
        monkeypatch.setenv("SA_TELEMETRY", "off")
        assert not telemetry.active()
        monkeypatch.delenv("SA_TELEMETRY")
        assert telemetry.active()
    finally:
        telemetry.set_tracer_provider(None)


@pytest.mark.asyncio
async def test_a_turn_decides_once_whether_its_calls_record_spans() -> None:
    """Inside a turn, model and tool calls reuse the turn's decision; outside, it is checked."""
    seen: list[bool] = []

    async def run() -> None:
        seen.append(telemetry.recording())
        telemetry.set_tracer_provider(TracerProvider())  # configured mid-turn: the next turn
        seen.append(telemetry.recording())

    class _Flow:
        state = None
        depth = 0
        stopped_by = None

    try:
        await telemetry.turn(_Flow(), run)  # type: ignore[arg-type]
        assert seen == [False, False]
        assert telemetry.recording()  # outside a turn: the current configuration
    finally:
        telemetry.set_tracer_provider(None)
    assert not telemetry.recording()
