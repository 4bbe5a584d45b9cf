"""The public test kit: scripts, the scripted provider, fixtures (FunctionProvider:
test_function_provider.py).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kit_requests import CALL_ID, chunks_of, request, tool_round_trip

from sa_core.errors import ProviderError, ScriptExhaustedError
from sa_core.providers import (
    BaseProvider,
    ProviderMessage,
    ProviderRequest,
    ProviderTool,
    ProviderToolCall,
    StreamChunk,
    Usage,
    collect_stream,
)
from sa_core.testing import (
    UNSCRIPTED_REPLY,
    FunctionProvider,
    InputExpectation,
    ScriptedResponse,
    TestProvider,
    TestScript,
    default_error_code,
    make_runtime_factory,
    sa_database_url,  # noqa: F401  (the fixture, used without the plugin installed)
)

# -- TestScript --------------------------------------------------------------------------------


def test_script_builder_chains_and_counts() -> None:
    script = TestScript()
    assert script.is_empty() and len(script) == 0
    same = (
        script.add_text_response("one")
        .add_tool_call_response([{"name": "search", "arguments": {"q": "x"}}], text="looking")
        .add_error_response("boom", status=503)
        .add_reasoning_response("answer", "thinking")
        .add_response(ScriptedResponse(content="five"))
    )
    assert same is script
    assert len(script) == 5 and not script.is_empty()
    first, call, error, reasoning, last = script.responses
    assert (first.content, first.finish_reason) == ("one", "stop")
    assert call.finish_reason == "tool_calls" and call.content == "looking"
    assert error.error == {"message": "boom", "code": "server_error", "status": 503}
    assert (reasoning.content, reasoning.reasoning) == ("answer", "thinking")
    assert last.content == "five"
    assert TestScript.create().is_empty()


def test_tool_call_ids_default_to_call_hex() -> None:
    script = TestScript().add_tool_call_response(
        [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}, "id": "mine"}]
    )
    calls = script.responses[0].tool_calls
    assert all(isinstance(call, ProviderToolCall) for call in calls)
    first, second = (call for call in calls if isinstance(call, ProviderToolCall))
    assert CALL_ID.match(first.id)
    assert second.id == "mine" and second.arguments == {"x": 1}


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (None, "unknown"),
        (500, "server_error"),
        (529, "server_error"),
        (429, "rate_limit"),
        (401, "auth_error"),
        (403, "auth_error"),
        (400, "invalid_request"),
        (404, "invalid_request"),
        (302, "unknown"),
    ],
)
def test_error_code_defaults_from_status(status: int | None, code: str) -> None:
    assert default_error_code(status) == code
    script = TestScript().add_error_response("no", status=status)
    error = script.responses[0].error
    assert error is not None and error["code"] == code


def test_explicit_error_code_wins() -> None:
    error = TestScript().add_error_response("slow", "timeout", 500).responses[0].error
    assert error == {"message": "slow", "code": "timeout", "status": 500}


def test_clone_is_independent() -> None:
    script = TestScript().add_text_response("a").with_streaming_simulation(3, 0.01)
    twin = script.clone()
    twin.add_text_response("b")
    assert len(script) == 1 and len(twin) == 2
    assert (twin.chunk_size, twin.chunk_delay) == (3, 0.01)
    assert twin.responses[0] is not script.responses[0]


def test_usage_accepts_a_dict() -> None:
    scripted = TestScript().add_text_response("x", usage={"prompt_tokens": 7}).responses[0]
    assert scripted.usage == Usage(prompt_tokens=7)


def test_streaming_simulation_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        TestScript().with_streaming_simulation(0)
    with pytest.raises(ValueError, match="chunk_delay"):
        TestScript().with_streaming_simulation(2, -1.0)


def test_kit_classes_are_not_collected_as_tests() -> None:
    assert TestScript.__test__ is False
    assert TestProvider.__test__ is False


# -- TestProvider: order, recording, exhaustion ------------------------------------------------


@pytest.mark.asyncio
async def test_answers_in_order_from_generate_and_stream() -> None:
    script = TestScript().add_text_response("first").add_text_response("second")
    provider = TestProvider(script)
    assert provider.name == "test" and isinstance(provider, BaseProvider)
    one = await provider.generate(request("hi"))
    two = await collect_stream(provider.stream(request("again")))
    assert (one.content, two.content) == ("first", "second")
    assert provider.current_index == 2
    assert provider.is_script_complete() and provider.remaining_responses() == 0


@pytest.mark.asyncio
async def test_records_every_request() -> None:
    provider = TestProvider(TestScript().add_text_response("a").add_text_response("b"))
    tools = [ProviderTool("search", "Search the web", {"type": "object", "properties": {}})]
    first = request("hello", tools=tools)
    second = request("hello", "and more")
    await provider.generate(first)
    assert provider.last_request is first
    await collect_stream(provider.stream(second))
    assert provider.requests == [first, second]
    assert provider.request_log is provider.requests
    assert provider.call_count == 2
    assert provider.last_user_message() == "and more"
    assert provider.last_user_message(first) == "hello"
    assert provider.tool_names(first) == ["search"]
    assert provider.tool_names() == []
    assert first.model == "test-model" and first.messages[0].role == "system"


def test_helpers_before_any_request() -> None:
    provider = TestProvider()
    assert provider.last_request is None
    assert provider.last_user_message() is None
    assert provider.tool_names() == []


@pytest.mark.asyncio
async def test_exhausted_script_raises_a_helpful_error() -> None:
    provider = TestProvider(TestScript().add_text_response("only"))
    await provider.generate(request("hi"))
    with pytest.raises(ScriptExhaustedError) as caught:
        await provider.generate(request("hi", "what next?"))
    error = caught.value
    assert isinstance(error, ProviderError)
    assert error.code == "invalid_request"
    assert str(error) == (
        "TestProvider: script exhausted after 1 responses; add more responses to the "
        "TestScript (last request had 3 messages, last user message: 'what next?')"
    )
    assert len(provider.requests) == 2


@pytest.mark.asyncio
async def test_exhaustion_also_raises_from_stream_and_truncates_long_messages() -> None:
    provider = TestProvider(TestScript())
    with pytest.raises(ScriptExhaustedError, match="after 0 responses") as caught:
        await collect_stream(provider.stream(request("x" * 500)))
    assert "x" * 77 + "...'" in str(caught.value)
    assert "x" * 81 not in str(caught.value)


@pytest.mark.asyncio
async def test_exhaustion_without_user_message() -> None:
    provider = TestProvider(TestScript())
    with pytest.raises(ScriptExhaustedError, match=r"last user message: \(none\)"):
        await provider.generate(request())


@pytest.mark.asyncio
async def test_unscripted_provider_answers_forever() -> None:
    provider = TestProvider()
    for _ in range(3):
        response = await provider.generate(request("hi"))
        assert response.content == UNSCRIPTED_REPLY == "Test response received."
        assert response.finish_reason == "stop"
    streamed = await collect_stream(provider.stream(request("hi")))
    assert streamed.content == UNSCRIPTED_REPLY
    assert provider.is_script_complete() and provider.remaining_responses() == 0


@pytest.mark.asyncio
async def test_reset_and_set_script() -> None:
    provider = TestProvider(TestScript().add_text_response("a"))
    await provider.generate(request("hi"))
    provider.reset()
    assert provider.current_index == 0 and provider.requests == []
    assert (await provider.generate(request("hi"))).content == "a"
    provider.set_script(TestScript().add_text_response("b").add_text_response("c"))
    assert provider.remaining_responses() == 2 and provider.requests == []
    assert (await provider.generate(request("hi"))).content == "b"
    assert provider.remaining_responses() == 1 and not provider.is_script_complete()


def test_custom_name() -> None:
    assert TestProvider(name="openai").name == "openai"
    assert TestProvider().name == "test"
    assert FunctionProvider(lambda r: "x", name="mock").name == "mock"


# -- answers ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_tool_call_response() -> None:
    script = TestScript().add_tool_call_response(
        [{"name": "lookup", "arguments": {"city": "Oslo"}, "id": "call_1"}], text="Checking."
    )
    response = await TestProvider(script).generate(request("weather?"))
    assert response.finish_reason == "tool_calls"
    assert response.content == "Checking."
    assert response.tool_calls == [ProviderToolCall("call_1", "lookup", {"city": "Oslo"})]


@pytest.mark.asyncio
async def test_answers_do_not_share_state_with_the_script() -> None:
    script = TestScript().add_tool_call_response([{"name": "t", "arguments": {"a": [1]}}])
    provider = TestProvider(script)
    response = await provider.generate(request("x"))
    response.tool_calls[0].arguments["a"].append(2)
    provider.reset()
    again = await provider.generate(request("x"))
    assert again.tool_calls[0].arguments == {"a": [1]}
    assert again.tool_calls[0].id == response.tool_calls[0].id


@pytest.mark.asyncio
async def test_dict_tool_calls_in_scripted_response() -> None:
    scripted = ScriptedResponse(tool_calls=[{"name": "t", "arguments": '{"n": 2}'}])
    response = await TestProvider(TestScript().add_response(scripted)).generate(request("x"))
    assert response.finish_reason == "tool_calls"
    call = response.tool_calls[0]
    assert call.name == "t" and call.arguments == {"n": 2} and CALL_ID.match(call.id)


@pytest.mark.asyncio
async def test_reasoning_response() -> None:
    details = [{"type": "text", "text": "hmm", "signature": "sig"}]
    script = (
        TestScript()
        .add_reasoning_response("42", "Let me think.")
        .add_response(ScriptedResponse(content="ok", reasoning="r", reasoning_details=details))
    )
    provider = TestProvider(script)
    response = await provider.generate(request("q"))
    assert (response.content, response.reasoning) == ("42", "Let me think.")
    streamed = await collect_stream(provider.stream(request("q")))
    assert streamed.reasoning == "r" and streamed.reasoning_details == details


@pytest.mark.asyncio
async def test_usage_is_estimated_at_four_chars_a_token() -> None:
    provider = TestProvider(TestScript().add_text_response("12345678"))
    req = ProviderRequest("m", [ProviderMessage("user", "a" * 16)])
    usage = (await provider.generate(req)).usage
    assert usage == Usage(prompt_tokens=4, completion_tokens=2, total_tokens=6)


@pytest.mark.asyncio
async def test_scripted_usage_is_reported() -> None:
    script = TestScript().add_text_response(
        "x", usage=Usage(prompt_tokens=100, completion_tokens=5, cost=0.5)
    )
    usage = (await TestProvider(script).generate(request("hi"))).usage
    assert usage == Usage(prompt_tokens=100, completion_tokens=5, total_tokens=105, cost=0.5)


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
async def test_error_response_raises_provider_error(streaming: bool) -> None:
    script = TestScript().add_error_response("slow down", status=429, retry_after=2.0)
    script.add_text_response("recovered")
    provider = TestProvider(script, name="openai")
    with pytest.raises(ProviderError) as caught:
        if streaming:
            await collect_stream(provider.stream(request("hi")))
        else:
            await provider.generate(request("hi"))
    error = caught.value
    assert str(error) == "slow down"
    assert (error.code, error.status, error.retry_after) == ("rate_limit", 429, 2.0)
    assert error.provider == "openai" and error.retryable
    assert (await provider.generate(request("hi"))).content == "recovered"


# -- streaming ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stream_chunk_vocabulary() -> None:
    script = TestScript().add_response(
        ScriptedResponse(
            content="Hi",
            reasoning="hm",
            tool_calls=[ProviderToolCall("c1", "t", {"a": 1})],
        )
    )
    chunks = await chunks_of(TestProvider(script), request("x"))
    assert [chunk.type for chunk in chunks] == [
        "reasoning-delta",
        "reasoning-done",
        "content-delta",
        "content-done",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-done",
        "finish",
    ]
    assert chunks[-1].finish_reason == "tool_calls" and chunks[-1].usage is not None
    assert chunks[5].arguments_delta == '{"a": 1}' and chunks[6].arguments == {"a": 1}


@pytest.mark.asyncio
async def test_streaming_simulation_splits_text_and_assembles_to_the_same_response() -> None:
    def build() -> TestScript:
        return (
            TestScript()
            .add_tool_call_response(
                [{"name": "search", "arguments": {"query": "long query"}, "id": "c1"}],
                text="Let me look that up for you.",
            )
            .add_reasoning_response("The answer is 42.", "Deep thought, briefly.")
        )

    plain = TestProvider(build())
    chunked = TestProvider(build().with_streaming_simulation(5))
    for _ in range(2):
        req = request("q")
        expected = await plain.generate(req)
        chunks = await chunks_of(chunked, req)
        text_deltas = [c.delta for c in chunks if c.type == "content-delta"]
        assert len(text_deltas) > 1 and all(len(d or "") <= 5 for d in text_deltas)
        assert "".join(d or "" for d in text_deltas) == expected.content

        async def replay(items: list[StreamChunk] = chunks) -> AsyncIterator[StreamChunk]:
            for item in items:
                yield item

        assembled = await collect_stream(replay())
        assert assembled == expected


@pytest.mark.asyncio
async def test_streaming_simulation_waits_between_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    script = TestScript().add_text_response("abcdef").with_streaming_simulation(2, 0.25)
    chunks = await chunks_of(TestProvider(script), request("x"))
    assert [c.delta for c in chunks if c.type == "content-delta"] == ["ab", "cd", "ef"]
    assert sleeps == [0.25, 0.25]


# -- delay --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_delay_keeps_the_call_in_flight() -> None:
    provider = TestProvider(TestScript().add_text_response("late", delay=0.05))
    task = asyncio.create_task(provider.generate(request("hi")))
    await asyncio.sleep(0.01)
    assert not task.done()
    assert len(provider.requests) == 1  # recorded while still in flight
    assert (await task).content == "late"


@pytest.mark.asyncio
async def test_delay_applies_to_streams() -> None:
    provider = TestProvider(TestScript().add_text_response("late", delay=0.05))
    task = asyncio.create_task(collect_stream(provider.stream(request("hi"))))
    await asyncio.sleep(0.01)
    assert not task.done()
    assert (await task).content == "late"


# -- expectations -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_expectations_pass() -> None:
    expect = InputExpectation(
        contains_message=re.compile(r"oslo", re.I),
        contains_tool_result={"tool_name": "weather", "result_contains": "Sunny"},
        message_count=4,
        system_prompt_contains="weather bot",
    )
    script = TestScript().add_text_response("It is sunny.", expect=expect)
    response = await TestProvider(script, validate_inputs=True).generate(tool_round_trip())
    assert response.content == "It is sunny."


@pytest.mark.asyncio
async def test_expectation_violations_raise_invalid_request() -> None:
    expect = InputExpectation(
        contains_message="Paris",
        contains_tool_result={"tool_name": "weather", "result_contains": "Rain"},
        message_count=2,
        system_prompt_contains=re.compile("^Pirate"),
    )
    script = TestScript().add_response(ScriptedResponse(content="x", expect=expect))
    with pytest.raises(ProviderError) as caught:
        await TestProvider(script, validate_inputs=True).generate(tool_round_trip())
    error = caught.value
    assert error.code == "invalid_request" and not isinstance(error, ScriptExhaustedError)
    message = str(error)
    assert "no message contains 'Paris'" in message
    assert "no result from tool 'weather' containing 'Rain'" in message
    assert "expected 2 messages, got 4" in message
    assert "does not contain a match for /^Pirate/" in message


@pytest.mark.asyncio
async def test_tool_result_expectation_uses_tool_name_field() -> None:
    req = tool_round_trip()
    req.messages[-1].tool_name = "forecast"
    expect = InputExpectation(contains_tool_result={"tool_name": "weather"})
    script = TestScript().add_text_response("x", expect=expect)
    with pytest.raises(ProviderError, match="no result from tool 'weather'"):
        await TestProvider(script, validate_inputs=True).generate(req)


@pytest.mark.asyncio
async def test_expectations_ignored_without_validate_inputs() -> None:
    expect = InputExpectation(message_count=99)
    script = TestScript().add_text_response("fine", expect=expect)
    assert (await TestProvider(script).generate(request("hi"))).content == "fine"


# -- fixtures -----------------------------------------------------------------------------------


def test_sa_database_url_fixture(sa_database_url: str, tmp_path: Path) -> None:  # noqa: F811
    assert sa_database_url == f"sqlite:///{tmp_path / 'sa.db'}"


class FakeRuntime:
    opened: list[FakeRuntime] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.entered = False
        self.closed = False
        FakeRuntime.opened.append(self)

    async def __aenter__(self) -> FakeRuntime:
        self.entered = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed = True


@pytest.mark.asyncio
async def test_runtime_factory_opens_runtimes_on_one_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("sa_core.runtime")
    module.Runtime = FakeRuntime  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sa_core.runtime", module)
    FakeRuntime.opened = []
    factory = make_runtime_factory("sqlite:///tmp/x.db")
    provider = TestProvider()
    async with factory(packs=["pack"], providers={"test": provider}) as first:
        assert first.entered
        assert first.kwargs == {
            "packs": ["pack"],
            "providers": {"test": provider},
            "database_url": "sqlite:///tmp/x.db",
            "load_entrypoints": False,
        }
    assert first.closed
    async with factory(env={"K": "v"}) as second:
        assert second.kwargs["database_url"] == "sqlite:///tmp/x.db"
        assert second.kwargs["env"] == {"K": "v"}
        assert isinstance(second.kwargs["providers"]["test"], TestProvider)
    assert len(FakeRuntime.opened) == 2


def test_the_test_kit_does_not_load_pytest_for_a_script_or_a_server() -> None:
    code = "import sys, sa_core.testing; print('pytest' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
